"""bench.marlin_table: docs/marlin.md's per-seed MARLIN table and ablations (plan, changes
against local-only, acceptance lines), checked on hand-made runs."""

from __future__ import annotations

import pandas as pd
import pytest

from greenroute.bench import marlin_table as T
from greenroute.bench import seed001 as S


def _runs() -> pd.DataFrame:
    rows = []
    base = {"ttft_mean_s": 0.100, "carbon_kg": 200.0, "water_m3": 10.0, "cost_usd": 50.0}
    for seed in (0, 1):
        for p in T.POLICIES:
            m = dict(base, carbon_kg=200.0 if seed == 0 else 220.0)
            if p == "marlin-min-carbon":
                m["carbon_kg"] = 180.0 if seed == 0 else 231.0  # -10 %, then +5 %
            if p == "lp-mpc":
                m["carbon_kg"] = 190.0 if seed == 0 else 230.0
            rows.append({"policy": p, "seed": seed, "tag": "", "slo_violation_pct": 0.01,
                         "wall_s": 3.0, **m})  # fmt: skip
    veto = {**base, "ttft_mean_s": 0.125}
    rows.append({"policy": "marlin-balanced", "seed": 0, "tag": "no-veto",
                 "slo_violation_pct": 0.0, "wall_s": 1.0, **veto})  # fmt: skip
    return pd.DataFrame(rows)


def test_plan_is_every_policy_on_every_seed_then_the_ablations_on_seed_0():
    cells = T.plan_cells(T.Config(seeds=3))
    assert len(cells) == len(T.POLICIES) * 3 + len(S.ABLATIONS)
    assert {c.forecast for c in cells} == {"marlin-ewma"}
    assert {c.scenario for c in cells} == {"marlin8"}
    abl = [c for c in cells if c.tag]
    assert [c.options for c in abl] == [((a, False),) for a in S.ABLATIONS]
    assert {c.seed for c in abl} == {0}
    assert len(T.plan_cells(T.Config(seeds=2, ablations=False))) == len(T.POLICIES) * 2


def test_changes_are_against_local_only_of_the_same_seed():
    r = T.with_changes(_runs())
    mc = r[(r.policy == "marlin-min-carbon")].set_index("seed")
    assert mc.loc[0, "carbon_kg_vs_local_pct"] == pytest.approx(-10.0)
    assert mc.loc[1, "carbon_kg_vs_local_pct"] == pytest.approx(5.0)
    veto = r[r.tag == "no-veto"].iloc[0]
    assert veto.ttft_mean_s_vs_local_pct == pytest.approx(25.0)


def test_tables_and_acceptance_read_the_runs():
    runs = _runs()
    table = T.main_table(runs)
    assert "| marlin-min-carbon | 0 | 0.100 (+0.00 %) | 180 (-10.00 %) |" in table
    assert "| local-only | 1 | 0.100 | 220 | 10.0 | 50 | 0.01 | 3 |" in table
    assert "| no-veto | +25.0 % | +0.00 % | +0.00 % | +0.00 % |" in T.ablation_table(runs)
    lines = {ln.split(":")[0]: ln for ln in T.acceptance(runs)}
    assert "-10.00 / +5.00 %" in lines["marlin-min-carbon"]
    assert "beats it on 1 of 2 seeds; beats lp-mpc on 1)" in lines["marlin-min-carbon"]
    assert "beats it on 0 of 2 seeds" in lines["marlin-min-cost"]


def test_the_cells_forecast_reaches_the_run_and_the_reuse_key(monkeypatch, tmp_path):
    seen = {}

    class _Res:
        def __init__(self):
            self.metrics = {
                k: 1.0 for k in (*S.METRIC_KEYS, "slo_violation_pct", "requests_dropped")
            }
            self.manifest: dict = {}

    def fake_run(prep, policy, **kw):
        seen.update(kw)
        return _Res()

    monkeypatch.setattr("greenroute.bench.runner.prepare_checked", lambda *a, **k: (None,))
    monkeypatch.setattr("greenroute.bench.runner.run_prepared", fake_run)
    S._PREPARED.clear()
    cell = T.plan_cells(T.Config(seeds=1, hours=1.0))[0]
    row = S.run_cell(cell)
    S._PREPARED.clear()
    assert seen["forecast"] == "marlin-ewma" and row["forecast"] == "marlin-ewma"
    # a runs.csv row keeps its forecast in the reuse key; one without the column is "perfect"
    pd.DataFrame([{**row, "input_files_sha256": ""}]).to_csv(tmp_path / "a.csv", index=False)
    assert len(S.reused_rows(str(tmp_path / "a.csv"), [cell])) == 1
    perfect = S.Cell(cell.scenario, cell.policy, cell.seed, cell.hours)
    assert len(S.reused_rows(str(tmp_path / "a.csv"), [perfect])) == 0
    pd.DataFrame([{**row, "input_files_sha256": ""}]).drop(columns="forecast").to_csv(
        tmp_path / "b.csv", index=False
    )
    assert len(S.reused_rows(str(tmp_path / "b.csv"), [perfect])) == 1


@pytest.mark.parametrize("module", ["marlin_table", "seed001"])
def test_a_bad_option_is_one_line_and_exit_2(module, tmp_path):
    import subprocess
    import sys

    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", f"greenroute.bench.{module}", "--out", str(out), "--seeds", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2
    assert res.stderr.startswith("error: --seeds must be") and "Traceback" not in res.stderr
    assert not out.exists()  # nothing written
