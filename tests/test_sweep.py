"""Sweeps: the spec is checked strictly, cells have stable keys, every cell lands in the store
once (resumed sweeps neither duplicate nor lose cells), failures are recorded and the rest
completes, and the process pool and Ray give the same numbers as a direct run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import greenroute
from greenroute.bench.store import ResultStore
from greenroute.bench.sweep import run_sweep
from greenroute.bench.sweep_spec import Cell, load_spec, parse_spec
from greenroute.cli import app
from greenroute.core.errors import ConfigError

runner = CliRunner()
# demo (embedded data), fluid, 6 h: ~0.1 s a cell once warm
FAST = {"scenarios": ["demo"], "days": 0.25, "fidelity": "fluid"}
GRID = {**FAST, "name": "small", "policies": ["local-only", "lowest-carbon"], "seeds": [0, 1]}
IMPOSSIBLE_DAYS = 1e7  # refused before it runs: no machine has the ~1e6 GiB it needs


def _write(path: Path, spec: dict) -> Path:
    path.write_text(yaml.safe_dump(spec))
    return path


def _direct(cell: Cell):
    return greenroute.run(
        cell.scenario, cell.policy, seed=cell.seed, days=cell.days, fidelity=cell.fidelity,
        weights=greenroute.ObjectiveWeights(**cell.weights),
    )  # fmt: skip


# ------------------------------------------------------------------ the spec
def test_grid_expands_in_order_with_stable_keys():
    spec = parse_spec({**GRID, "policies": ["local-only", {"name": "lp-mpc",
                       "options": {"horizon": 8}, "label": "lp8"}], "weights": ["balanced",
                       {"carbon": 1}]})  # fmt: skip
    assert len(spec.cells) == 2 * 2 * 2
    first = spec.cells[0]
    assert (first.policy, first.seed, first.weights["carbon"]) == ("local-only", 0, 0.25)
    assert [c.label for c in spec.cells[4:]] == ["lp8"] * 4
    assert spec.cells[4].policy_options == {"horizon": 8}
    # the key hashes the configuration (not the label): same config, same key, in any sweep
    again = parse_spec({**GRID, "policies": [{"name": "local-only", "label": "other"}]})
    assert again.cells[0].key == first.key
    assert len({c.key for c in spec.cells}) == len(spec.cells)
    # pinned: a change of this value changes every stored cell's key (old results re-run)
    assert first.key == Cell(scenario="demo", policy="local-only", seed=0, days=0.25,
                             weights=first.weights, fidelity="fluid").key  # fmt: skip
    assert first.key == "856dfa3654350f3c"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({**GRID, "seedz": 2}, "unknown key(s) ['seedz']; valid choices: name, scenarios"),
        ({**GRID, "policies": ["nope"]},
         "unknown policy 'nope'; valid choices: actor-critic, admm,"),
        ({**GRID, "scenarios": ["geo4"]}, "unknown scenario 'geo4'; valid choices: au-edge,"),
        ({**GRID, "policies": [{"name": "lp-mpc", "options": {"hz": 1}}]},
         "unknown option 'hz' of policy 'lp-mpc'; valid choices: blind_cop, blind_data_dir, "
         "blind_pue, cooling_model, horizon, max_utilisation, weights"),
        ({**GRID, "policies": [{"name": "lowest-carbon", "options": {"target_utilisation": 2}}]},
         "target_utilisation must be in (0, 1]"),
        ({**GRID, "policies": [{"nam": "x"}]}, "unknown policy key(s) ['nam']"),
        ({**GRID, "seeds": [-1]}, "seeds must be integers >= 0"),
        ({**GRID, "days": [0]}, "days must be finite numbers > 0"),
        ({**GRID, "fidelity": "exact"}, "unknown fidelity 'exact'; valid choices: auto, fluid"),
        ({**GRID, "weights": [{"carbn": 1}]}, "unknown weight(s) ['carbn']"),
        ({**GRID, "weights": ["greenest"]}, "unknown weights preset 'greenest'; valid choices:"),
        ({**GRID, "data_dir": "no/such/dir"}, "data directory does not exist"),
        ({**GRID, "policies": ["local-only", "local-only"]}, "are listed twice"),
        ({"policies": ["local-only"]}, "'scenarios' is required"),
    ],
)  # fmt: skip
def test_spec_errors_are_one_line_naming_the_file(tmp_path, spec, message):
    path = _write(tmp_path / "bad.yaml", spec)
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)
    res = runner.invoke(app, ["sweep", str(path), "--local", "--out", str(tmp_path / "s")])
    assert res.exit_code == 2, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert "Traceback" not in res.output and not (tmp_path / "s").exists()


def test_unreadable_specs(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenarios: [demo\npolicies: x\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_spec(bad)
    with pytest.raises(ConfigError, match="sweep spec not found"):
        load_spec(tmp_path / "missing.yaml")
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="a sweep spec is a mapping"):
        load_spec(bad)


def test_relative_data_dir_is_relative_to_the_spec_file(tmp_path):
    data = tmp_path / "d"
    (data / "grid").mkdir(parents=True)
    (data / "grid" / "regions.csv").write_text("x\n")
    (tmp_path / "specs").mkdir()
    spec = load_spec(_write(tmp_path / "specs" / "s.yaml", {**GRID, "data_dir": "../d"}))
    assert spec.cells[0].data_dir == str(data.resolve())


# ------------------------------------------------------------------ running
def test_inline_sweep_resumes_without_duplicates_and_matches_direct_runs(tmp_path):
    spec = parse_spec(GRID)
    store = ResultStore(tmp_path / "store")
    part = run_sweep(spec, store=store, backend="local", workers=1, limit=1)
    assert (part.done, part.skipped, part.failed) == (1, 0, 0)
    first = store.runs()
    assert list(first["run_id"]) == [spec.cells[0].key]
    full = run_sweep(spec, store=store, backend="local", workers=1)
    assert (full.total, full.skipped, full.done, full.failed) == (4, 1, 3, 0) and full.complete
    runs = store.runs(sweep="small")
    assert sorted(runs["run_id"]) == sorted(spec.keys) and runs["run_id"].is_unique
    kept = runs.set_index("run_id").loc[spec.cells[0].key, "created_utc"]
    assert kept == first["created_utc"].iloc[0]  # the first cell was not run again
    again = run_sweep(spec, store=store, backend="local", workers=1)
    assert (again.skipped, again.done) == (4, 0) and again.workers == 0
    by_key = runs.set_index("run_id")
    for cell in (spec.cells[0], spec.cells[3]):
        direct = _direct(cell).metrics
        assert by_key.loc[cell.key, "carbon_kg"] == direct["carbon_kg"]
        assert by_key.loc[cell.key, "objective"] == direct["objective"]
    assert set(runs["label"]) == {"local-only", "lowest-carbon"} and set(runs["seed"]) == {0, 1}
    ep = store.epochs(sweep="small")
    assert len(ep) == 4 * len(_direct(spec.cells[0]).epochs)


def test_a_failing_cell_is_recorded_and_the_rest_complete(tmp_path):
    spec = parse_spec({**GRID, "days": [0.25, IMPOSSIBLE_DAYS], "seeds": [0]})
    store = ResultStore(tmp_path / "store")
    summary = run_sweep(spec, store=store, backend="local", workers=1)
    assert (summary.total, summary.done, summary.failed) == (4, 2, 2)
    assert not summary.complete
    runs = store.runs(include_failed=True)
    assert len(runs) == 4 and runs["run_id"].is_unique
    failed = runs[runs["status"] == "failed"]
    assert set(failed["days_requested"]) == {IMPOSSIBLE_DAYS}
    assert all(e.startswith("ConfigError: --days 1e+07 on scenario demo") for e in failed["error"])
    assert failed["traceback"].str.contains("check_window").all()
    assert len(store.runs()) == 2  # ok runs only by default
    # a rerun retries the failed cells (they fail again) and keeps one row per cell
    again = run_sweep(spec, store=store, backend="local", workers=1)
    assert (again.skipped, again.done, again.failed) == (2, 0, 2)
    assert len(store.runs(include_failed=True)) == 4


def test_cli_sweep_in_a_process_pool(tmp_path):
    path = _write(tmp_path / "small.yaml", {**GRID, "days": [0.25, IMPOSSIBLE_DAYS], "seeds": [0]})
    store = tmp_path / "store"
    res = runner.invoke(app, ["sweep", str(path), "--local", "--workers", "2", "--out", str(store)])
    assert res.exit_code == 1, res.output  # a failed cell: exit 1 after the others completed
    assert "4 cells, 0 already in the store, 2 run, 2 failed" in res.stdout
    assert "(local, 2 workers)" in res.stdout
    assert res.stderr.count("failed: cell ") == 2
    spec = load_spec(path)
    runs = ResultStore(store).runs(sweep="small")
    assert len(runs) == 2
    for cell in spec.cells:
        if cell.days != IMPOSSIBLE_DAYS:
            got = runs.set_index("run_id").loc[cell.key, "carbon_kg"]
            assert got == _direct(cell).metrics["carbon_kg"]


@pytest.mark.slow
def test_ray_sweep_with_two_cpus_matches_the_process_pool(tmp_path):
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    spec = parse_spec(GRID)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        summary = run_sweep(spec, store=tmp_path / "ray", backend="ray")
    finally:
        ray.shutdown()
    assert (summary.done, summary.failed, summary.workers) == (4, 0, 2)
    local = run_sweep(spec, store=tmp_path / "local", backend="local", workers=1)
    assert local.done == 4
    a = ResultStore(tmp_path / "ray").runs().set_index("run_id").sort_index()
    b = ResultStore(tmp_path / "local").runs().set_index("run_id").sort_index()
    assert list(a.index) == sorted(spec.keys) == list(b.index)
    for col in ("carbon_kg", "water_m3", "cost_usd", "slo_violation_pct", "objective"):
        assert (a[col] == b[col]).all(), col


@pytest.mark.slow
def test_a_killed_sweep_resumes_where_it_stopped(tmp_path):
    # request level, 6 h: about a second a cell, so the kill lands between cells
    spec = {**GRID, "fidelity": "request", "seeds": [0, 1, 2]}
    path = _write(tmp_path / "small.yaml", spec)
    store = tmp_path / "store"
    exe = str(Path(sys.executable).with_name("greenroute"))
    cmd = [exe, "sweep", str(path), "--local",
           "--workers", "1", "--out", str(store)]  # fmt: skip
    env = {**os.environ, "GREENROUTE_STORE": "off"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs_dir = store / "runs"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(runs_dir.glob("*.parquet"))) < 2:
        assert proc.poll() is None, "the sweep ended before it could be killed"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {p.stem for p in runs_dir.glob("*.parquet")}
    keys = load_spec(path).keys
    assert 2 <= len(before) < len(keys), "the kill should land mid-sweep"
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert f"{len(keys)} cells, {len(before)} already in the store" in done.stdout
    runs = ResultStore(store).runs(sweep="small", include_failed=True)
    assert sorted(runs["run_id"]) == sorted(keys) and (runs["status"] == "ok").all()


def test_api_sweep_and_results(tmp_path):
    summary = greenroute.sweep({**GRID, "seeds": [2]}, store=tmp_path / "s", backend="local",
                               workers=1)  # fmt: skip
    assert (summary.done, summary.failed) == (2, 0)
    frame = greenroute.results("seed = 2", metrics=["carbon_kg"], sweep="small",
                               store=tmp_path / "s")  # fmt: skip
    assert sorted(frame["policy"]) == ["local-only", "lowest-carbon"]
    assert (frame["source"] == "sweep").all() and "energy_kwh" not in frame.columns


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "dask"}, "unknown sweep backend 'dask'; valid choices: ray, local"),
        ({"backend": "local", "workers": 0}, "--workers must be >= 1, got 0"),
        ({"backend": "local", "address": "auto"}, "does not combine with --local"),
    ],
)
def test_backend_errors(tmp_path, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        run_sweep(parse_spec(GRID), store=tmp_path / "s", **kwargs)


def test_demo_example_spec():
    spec = load_spec(Path(__file__).parents[1] / "examples" / "sweep_demo.yaml")
    assert len(spec.cells) == 2 * 2 * 2
    assert {c.label for c in spec.cells} == {"local-only", "lowest-carbon-80"}
    assert {c.weights["carbon"] for c in spec.cells} == {0.25, 1.0}


@pytest.mark.realdata
def test_acceptance_example_spec(data_dir):
    spec = load_spec(Path(__file__).parents[1] / "examples" / "sweep_geo3.yaml")
    assert len(spec.cells) == 6 * 5 == len(set(spec.keys))
    assert {c.days for c in spec.cells} == {7.0} and {c.scenario for c in spec.cells} == {"geo3"}
    assert spec.cells[0].data_dir is not None and Path(spec.cells[0].data_dir).is_dir()
