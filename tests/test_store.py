"""The result store: what is written comes back exactly, queries and exports select the right
rows, user errors are one line, and concurrent writers never corrupt it."""

from __future__ import annotations

import json
import math
import multiprocessing

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import greenroute
from greenroute.bench.store import (
    EPOCH_IDENTITY,
    IDENTITY_COLUMNS,
    ResultStore,
    load_epochs,
    result_key,
)
from greenroute.cli import app
from greenroute.core.errors import ConfigError

runner = CliRunner()


@pytest.fixture(scope="module")
def demo_res():
    return greenroute.run("demo", "lowest-carbon", seed=3, days=0.25, fidelity="fluid")


@pytest.fixture(scope="module")
def other_res():
    return greenroute.run("demo", "local-only", seed=4, days=0.25, fidelity="fluid")


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_a_run_comes_back_exactly(tmp_path, demo_res):
    st = ResultStore(tmp_path / "store")
    rid = st.append(demo_res, source="run")
    assert rid == result_key(demo_res.manifest, "run") and rid.startswith("run-")
    runs = st.runs()
    assert len(runs) == 1
    row = runs.iloc[0]
    assert (row["run_id"], row["scenario"], row["policy"], row["seed"], row["status"]) == (
        rid, "demo", "lowest-carbon", 3, "ok",
    )  # fmt: skip
    for k, v in demo_res.metrics.items():
        assert _same(float(row[k]), float(v)), k
    for w, v in demo_res.manifest["weights"].items():
        assert row[f"weight_{w}"] == v
    assert json.loads(row["manifest"]) == json.loads(json.dumps(demo_res.manifest))
    ep = st.epochs()
    assert list(ep.columns[: len(EPOCH_IDENTITY)]) == list(EPOCH_IDENTITY)
    assert (ep["run_id"] == rid).all() and (ep["seed"] == 3).all()
    got = ep.drop(columns=list(EPOCH_IDENTITY)).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, demo_res.epochs.reset_index(drop=True), check_dtype=False)


def test_the_same_run_twice_is_one_row_and_sources_are_kept_apart(tmp_path, demo_res):
    st = ResultStore(tmp_path / "store")
    st.append(demo_res, source="run")
    st.append(demo_res, source="run")
    assert len(st.runs()) == 1
    st.append(demo_res, source="compare")
    assert sorted(st.runs()["source"]) == ["compare", "run"]


def test_query_metrics_and_errors(tmp_path, demo_res, other_res):
    st = ResultStore(tmp_path / "store")
    st.append(demo_res, source="run")
    st.append(other_res, source="run")
    sel = st.runs("policy = 'local-only' and seed = 4", metrics=["carbon_kg", "slo_violation_pct"])
    assert len(sel) == 1
    assert sel["carbon_kg"].iloc[0] == other_res.metrics["carbon_kg"]
    assert "energy_kwh" not in sel.columns and "scenario" in sel.columns
    assert len(st.runs(f"carbon_kg < {other_res.metrics['carbon_kg']}")) == (
        demo_res.metrics["carbon_kg"] < other_res.metrics["carbon_kg"]
    )
    with pytest.raises(
        ConfigError, match=r"unknown metric\(s\) \['nope'\].*valid choices:.*carbon_kg"
    ):
        st.runs(metrics=["nope"])
    with pytest.raises(ConfigError, match=r"cannot query store .*columns: run_id"):
        st.runs("no_such_column = 1")
    epochs = load_epochs(where="policy = 'local-only'", store=st.root)
    assert set(epochs["policy"]) == {"local-only"} and len(epochs) == len(other_res.epochs)


def test_empty_store_gives_an_empty_frame_with_the_identity_columns(tmp_path):
    frame = greenroute.results(store=tmp_path / "nothing")
    assert frame.empty and list(frame.columns) == list(IDENTITY_COLUMNS)
    with pytest.raises(ConfigError, match=r"no sweep 'x'.*valid choices: \(none\)"):
        greenroute.results(sweep="x", store=tmp_path / "nothing")


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_export_round_trips(tmp_path, demo_res, other_res, fmt):
    st = ResultStore(tmp_path / "store")
    st.append(demo_res, source="run")
    st.append(other_res, source="run")
    out = tmp_path / f"runs.{fmt}"
    n = st.export(out, fmt, where="seed = 4", metrics=["carbon_kg"])
    back = {
        "csv": pd.read_csv,
        "parquet": pd.read_parquet,
        "json": lambda p: pd.DataFrame(json.loads(p.read_text())),
    }[fmt](out)
    assert n == 1 == len(back)
    assert back["carbon_kg"].iloc[0] == pytest.approx(other_res.metrics["carbon_kg"], rel=1e-15)
    assert back["policy"].iloc[0] == "local-only"


def test_results_cli_list_query_export(tmp_path, demo_res, other_res):
    st = ResultStore(tmp_path / "store")
    st.append(demo_res, source="run")
    st.append(other_res, source="compare")
    store = ["--store", str(st.root)]
    res = runner.invoke(app, ["results", "list", *store])
    assert res.exit_code == 0, res.output
    assert "2 runs" in res.stdout and "lowest-carbon" in res.stdout and "local-only" in res.stdout
    where = "policy = 'local-only' and scenario = 'demo'"
    metrics = ["--metrics", "carbon_kg,slo_violation_pct"]
    res = runner.invoke(app, ["results", "query", where, *metrics, "--json", *store])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert len(rows) == 1 and rows[0]["carbon_kg"] == other_res.metrics["carbon_kg"]
    assert rows[0]["slo_violation_pct"] == other_res.metrics["slo_violation_pct"]
    out = tmp_path / "all.csv"
    res = runner.invoke(app, ["results", "export", "--format", "csv", "--out", str(out), *store])
    assert res.exit_code == 0, res.output
    assert len(pd.read_csv(out)) == 2
    res = runner.invoke(app, ["results", "export", "--table", "epochs", "--format", "parquet",
                              "--out", str(tmp_path / "ep.parquet"), *store])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert len(pd.read_parquet(tmp_path / "ep.parquet")) == len(demo_res.epochs) * 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["results", "query", "seed = 3", "--metrics", "nope"], "unknown metric(s) ['nope']"),
        (["results", "query", "seed = = 3"], "cannot query store"),
        (["results", "export", "--format", "xml", "--out", "x.xml"], "unknown format 'xml'"),
        (["results", "list", "--sweep", "missing"], "no sweep 'missing'"),
    ],
)
def test_results_cli_user_errors_are_one_line(tmp_path, demo_res, args, message):
    ResultStore(tmp_path / "store").append(demo_res, source="run")
    args = [a if a != "x.xml" else str(tmp_path / "x.xml") for a in args]
    res = runner.invoke(app, [*args, "--store", str(tmp_path / "store")])
    assert res.exit_code == 2, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert "Traceback" not in res.output


def test_cli_run_and_compare_append_to_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("GREENROUTE_STORE", str(tmp_path / "store"))
    fast = ["--scenario", "demo", "--days", "0.05", "--fidelity", "fluid"]
    assert runner.invoke(app, ["run", "--policy", "coolest", *fast]).exit_code == 0
    res = runner.invoke(
        app, ["compare", "--policies", "local-only,nearest", "--no-oracle-gap", *fast]
    )
    assert res.exit_code == 0, res.output
    runs = greenroute.results()
    assert sorted(zip(runs["source"], runs["policy"], strict=True)) == [
        ("compare", "local-only"), ("compare", "nearest"), ("run", "coolest"),
    ]  # fmt: skip
    monkeypatch.setenv("GREENROUTE_STORE", "off")
    assert runner.invoke(app, ["run", "--policy", "random", *fast]).exit_code == 0
    assert len(greenroute.results(store=tmp_path / "store")) == 3


# ------------------------------------------------------------------ concurrent writers
N_WRITERS = 4
N_RUNS = 12
N_EPOCH_ROWS = 2000  # large enough that a torn write would be caught mid-file


def _row(run_id: str, value: float) -> dict:
    row = {c: None for c in IDENTITY_COLUMNS}
    row.update(run_id=run_id, source="test", status="ok", scenario="demo", policy="p", seed=0,
               created_utc=f"2026-01-01T00:00:{value:09.3f}", carbon_kg=value,
               manifest=json.dumps({"pad": "x" * 5000}))  # fmt: skip
    return row


def _writer(root: str, wid: int, start) -> None:
    st = ResultStore(root)
    start.wait()
    for i in range(N_RUNS):
        value = float(wid * 1000 + i)
        ep = pd.DataFrame(
            {"epoch": np.arange(N_EPOCH_ROWS), "carbon_kg": np.full(N_EPOCH_ROWS, value)}
        )
        st.write(_row(f"w{wid}-{i}", value), ep)
        st.write(_row("shared", float(wid)), ep)  # every writer writes this id too


def test_concurrent_writers_never_corrupt_the_store(tmp_path):
    ctx = multiprocessing.get_context("fork")
    root = tmp_path / "store"
    st = ResultStore(root)
    start = ctx.Barrier(N_WRITERS + 1)
    procs = [ctx.Process(target=_writer, args=(str(root), w, start)) for w in range(N_WRITERS)]
    for p in procs:
        p.start()
    start.wait()
    reads = 0
    while any(p.is_alive() for p in procs) or reads == 0:
        runs = st.runs()  # a torn file would make DuckDB raise here
        if runs.empty:
            continue
        own = runs[runs["run_id"] != "shared"]
        ids = own["run_id"].str.extract(r"w(\d+)-(\d+)").astype(int)
        assert (own["carbon_kg"].to_numpy() == (ids[0] * 1000 + ids[1]).to_numpy()).all()
        reads += 1
    for p in procs:
        p.join()
        assert p.exitcode == 0
    runs = st.runs()
    assert len(runs) == N_WRITERS * N_RUNS + 1
    assert runs["run_id"].is_unique
    assert runs.loc[runs["run_id"] == "shared", "carbon_kg"].iloc[0] in range(N_WRITERS)
    ep = st.epochs(where="run_id != 'shared'")
    assert len(ep) == N_WRITERS * N_RUNS * N_EPOCH_ROWS
    per_run = ep.groupby("run_id")["carbon_kg"].agg(["min", "max", "size"])
    assert (per_run["min"] == per_run["max"]).all() and (per_run["size"] == N_EPOCH_ROWS).all()
    assert not list(root.glob("*/*.tmp-*"))  # every temporary file was renamed into place
    assert reads >= 1
