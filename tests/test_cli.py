"""The ``greenroute`` command: JSON shapes, outputs, manifests, user errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from greenroute.cli import app
from greenroute.sim.results import METRIC_KEYS

runner = CliRunner()
FAST = ["--days", "0.05"]


def invoke(*args):
    return runner.invoke(app, list(args))


def test_run_json_shape():
    res = invoke("run", "--scenario", "demo", "--policy", "local-only", *FAST, "--json")
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert payload["scenario"] == "demo" and payload["policy"] == "local-only"
    assert set(METRIC_KEYS) <= set(payload["metrics"])


def test_compare_json_shape():
    res = invoke(
        "compare", "--scenario", "demo", "--policies", "local-only,lowest-carbon", *FAST, "--json"
    )
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert payload["scenario"] == "demo"
    assert [r["policy"] for r in payload["results"]] == ["local-only", "lowest-carbon"]
    for r in payload["results"]:
        assert set(METRIC_KEYS) <= set(r["metrics"])


def test_compare_table_has_seed_000_columns():
    res = invoke("compare", "--scenario", "demo", "--policies", "local-only,coolest", *FAST)
    assert res.exit_code == 0, res.output
    for col in ("Carbon", "Energy cost", "Water", "SLO viol.", "Max delay", "coolest"):
        assert col in res.stdout


def test_out_writes_metrics_epochs_manifest_and_manifest_reproduces(tmp_path):
    out = tmp_path / "run1"
    res = invoke("run", "--scenario", "demo", "--policy", "lowest-carbon", *FAST, "--seed", "5",
                 "--out", str(out), "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    for name in ("metrics.json", "metrics.csv", "epochs.parquet", "manifest.json"):
        assert (out / name).is_file(), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["scenario"] == "demo" and manifest["seed"] == 5
    assert manifest["greenroute_version"]
    epochs = pd.read_parquet(out / "epochs.parquet")
    metrics = json.loads((out / "metrics.json").read_text())
    assert epochs["carbon_kg"].sum() == pytest.approx(metrics["carbon_kg"])
    again = invoke("run", "--manifest", str(out / "manifest.json"), "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["metrics"] == json.loads(res.stdout)["metrics"]


def test_out_not_empty_is_refused(tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    res = invoke("run", "--scenario", "demo", *FAST, "--out", str(out))
    assert res.exit_code == 2
    assert "not empty" in res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--policy", "greenest"], "unknown policy 'greenest'; valid choices:"),
        (["run", "--scenario", "mars"], "unknown scenario 'mars'; valid choices:"),
        (["run", "--local-policy", "fastest"], "valid choices: least-connections"),
        (["run", "--exclude", "SG@5-2"], "bad --exclude"),
        (["run", "--exclude", "MARS"], "unknown region in exclusion 'MARS'"),
        (["run", "--residency", "SG=SG", "--exclude", "SG"], "infeasible constraints"),
        (["run", "--power-cap", "SG=-3"], "bad --power-cap"),
        (["run", "--weights", "carbon=x"], "bad --weights"),
        (["run", "--data-dir", "/nonexistent/dir"], "data directory does not exist"),
        (["compare", "--policies", "local-only,nope"], "unknown policy 'nope'"),
        (["run", "--policy-opt", "horizon=3"], "valid choices: target_utilisation"),
        (["run", "--facility", "igloo"], "valid choices: default, marlin"),
    ],
)
def test_user_errors_one_line_no_traceback(args, needle, tmp_path):
    out = tmp_path / "never"
    res = invoke(*args, *FAST, "--out", str(out))
    assert res.exit_code == 2, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert needle in lines[0]
    assert "Traceback" not in res.output + res.stderr
    assert not out.exists()  # nothing half-written


def test_bad_manifest_is_a_user_error(tmp_path):
    bad = tmp_path / "manifest.json"
    bad.write_text("{not json")
    res = invoke("run", "--manifest", str(bad))
    assert res.exit_code == 2
    assert "manifest.json:1: not valid JSON" in res.stderr


def test_listing_commands():
    res = invoke("scenarios", "--json")
    assert res.exit_code == 0
    assert "geo10" in json.loads(res.stdout)
    res = invoke("policies", "--json")
    payload = json.loads(res.stdout)
    assert "carbon-threshold" in payload["geo"] and "least-connections" in payload["local"]


def test_demo_command_prints_every_baseline():
    res = invoke("demo")
    assert res.exit_code == 0, res.output
    for name in ("local-only", "round-robin", "random", "least-loaded", "lowest-carbon",
                 "lowest-price", "coolest", "nearest", "carbon-threshold"):  # fmt: skip
        assert name in res.stdout
