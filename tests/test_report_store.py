"""``greenroute report`` on a result store (what ``greenroute sweep --out`` writes): a sweep's
cells grouped by their labels over seeds, failed cells named, the time series read back, and
``--sweep`` / ``--where`` choosing the runs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import greenroute
from greenroute.bench.report import load, make_report
from greenroute.bench.report_data import metric_table
from greenroute.cli import app
from greenroute.core.errors import ConfigError

pytest.importorskip("plotly")
pytest.importorskip("pymoo")
pytest.importorskip("duckdb")

POLICIES = ["local-only", "lowest-carbon", "oracle"]
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    """A store with one sweep of 3 policies x 3 seeds (one cell failed) and one loose run."""
    from greenroute.bench.store import ResultStore, failure_record

    root = tmp_path_factory.mktemp("store")
    st = ResultStore(root)
    keys, results = [], {}
    for seed in SEEDS:
        res = greenroute.compare("demo", POLICIES, days=0.5, fidelity="fluid", seed=seed)
        for r in res:
            label = "carbon-greedy" if r.policy == "lowest-carbon" else r.policy
            keys.append(st.append(r, source="sweep", sweep="grid", label=label))
            results[(r.policy, seed)] = r
    failed_id = "failed-cell"
    identity = {"scenario": "demo", "policy": "lp-mpc", "label": "lp-mpc", "seed": 0}
    st.write(failure_record(identity, failed_id, "sweep", ValueError("boom"), "grid"))
    # a training cell's row (bench/sweep_train.py): no run metrics, left out of the report
    train = failure_record(
        {"scenario": "lb-highload", "policy": "train:lb-ppo", "label": "ppo", "seed": 0},
        "train-cell",
        "sweep",
        ValueError("unused"),
        "grid",
    )
    train.update(status="ok", error=None, traceback=None, train_steps=256.0)  # fmt: skip
    st.write(train)
    st.save_sweep("grid", [*keys, failed_id, "train-cell"], {"cells": len(keys) + 2})
    st.append(results[("oracle", 0)], source="run")  # a loose run, not in the sweep
    return root, results


def test_a_sweep_groups_its_labels_over_seeds(store_dir):
    root, results = store_dir
    inp = load(root)
    assert inp.kind == "sweep" and inp.seeds == list(SEEDS)
    assert sorted(inp.labels) == sorted(["local-only", "carbon-greedy", "oracle"])
    assert len(inp.runs) == len(POLICIES) * len(SEEDS)  # the loose run is not a cell
    t = metric_table(inp, ["carbon_kg"]).set_index("label")
    expected = sum(results[("lowest-carbon", s)].metrics["carbon_kg"] for s in SEEDS) / 3
    assert t.loc["carbon-greedy", "n"] == 3
    assert t.loc["carbon-greedy", "mean"] == pytest.approx(expected, rel=1e-12)
    assert any("1 failed cell(s) left out: lp-mpc seed 0: ValueError: boom" in n for n in inp.notes)
    assert "1 training cell(s) left out" in " ".join(inp.notes)
    assert "ppo" not in inp.labels
    # the time series of each label's lowest seed are read back from the store
    shown = inp.series_run("carbon-greedy")
    assert shown.seed == 0
    assert len(shown.epochs) == len(results[("lowest-carbon", 0)].epochs)
    assert shown.epochs["requests_dispatched"].sum() == pytest.approx(
        results[("lowest-carbon", 0)].epochs["requests_dispatched"].sum()
    )


def test_where_and_sweep_choose_runs(store_dir):
    root, _ = store_dir
    assert load(root, where="seed < 2").seeds == [0, 1]
    with pytest.raises(ConfigError, match="valid choices: grid"):
        load(root, sweep="nope")
    with pytest.raises(ConfigError, match="no successful run"):
        load(root, where="seed > 99")
    with pytest.raises(ConfigError, match=r"0 failed, 1 training cell\(s\) \(not runs\)"):
        load(root, where="policy = 'train:lb-ppo'")


def test_store_report_html_and_cli(store_dir, tmp_path):
    root, _ = store_dir
    info = make_report(root, tmp_path / "r.html")
    assert info["runs"] == 9 and "improvement" in info["figures"]
    text = (tmp_path / "r.html").read_text()
    assert "carbon-greedy" in text and "ValueError: boom" in text
    r = CliRunner().invoke(app, ["report", str(tmp_path), "--sweep", "grid", "--out", "x.html"])
    assert r.exit_code == 2 and "not one (no runs/)" in r.stderr


def test_compare_without_out_names_its_runs_in_the_store(tmp_path, monkeypatch):
    import re

    store = tmp_path / "store"
    monkeypatch.setenv("GREENROUTE_STORE", str(store))
    args = ["compare", "--scenario", "demo", "--days", "0.25", "--fidelity", "fluid",
            "--policies", "local-only,lowest-carbon", "--no-oracle-gap"]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    hint = re.search(r'greenroute report (\S+) --where "([^"]+)"', r.stderr)
    assert hint and hint.group(1) == str(store)
    inp = load(hint.group(1), where=hint.group(2))
    assert inp.labels == ["local-only", "lowest-carbon"] and inp.kind == "store"
