"""The seed 001 reproduction (bench/seed001.py): its statistics and hypervolume bookkeeping by
hand on made-up runs, and the ``--quick`` configuration end to end on the real data."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from greenroute.bench import seed001 as S
from greenroute.bench import seed001_figures as F
from greenroute.core.objective import PRESETS


def test_ci95_is_the_student_t_interval():
    mean, half, n = F.ci95([1.0, 2.0, 3.0])
    assert (mean, n) == (2.0, 3)
    assert half == pytest.approx(4.302652729911275 * 1.0 / math.sqrt(3))  # t(0.975, 2) s/sqrt n
    assert F.ci95([5.0]) == (5.0, 0.0, 1)


def _row(policy, seed, c, w, d, t, label=None, weights="balanced", tag="", scenario="marlin8"):
    return {
        "scenario": scenario, "n_dc": 8, "policy": policy, "seed": seed, "weights": weights,
        "tag": tag, "label": label or S.LABELS.get(policy, policy), "carbon_kg": c,
        "water_m3": w, "cost_usd": d, "ttft_mean_s": t,
    }  # fmt: skip


def test_framework_points_and_hypervolume_follow_section_6_1():
    df = pd.DataFrame(
        [
            _row("slit", 0, 8.0, 8.0, 8.0, 8.0),
            _row("slit", 1, 6.0, 6.0, 6.0, 6.0),  # heuristic: one point, the mean (7, 7, 7, 7)
            _row("qlearning", 0, 9.0, 1.0, 9.0, 9.0),  # RL: every seed is a point
            _row("qlearning", 1, 1.0, 9.0, 9.0, 9.0),
            _row("marlin-balanced", 0, 2.0, 2.0, 2.0, 2.0),
            _row("marlin-min-carbon", 0, 1.0, 5.0, 5.0, 5.0),
        ]
    )
    pts = F.framework_points(df)
    assert pts["SLIT"] == pytest.approx(np.array([[7.0, 7.0, 7.0, 7.0]]))
    assert len(pts["QLearning"]) == 2 and len(pts["MARLIN"]) == 2
    tab = F.hv_table(pts).set_index("framework")
    ref = 1.1 * 9.0  # worst observed (9 in every metric) + 10 %
    slit = (1 - 7.0 / ref) ** 4  # one point: its hyperrectangle
    assert tab.loc["SLIT", "hypervolume"] == pytest.approx(slit)
    # MARLIN: (2,2,2,2) dominates (1,5,5,5) in all but carbon: union of two boxes
    a, b = (1 - 2 / ref) ** 4, (1 - 1 / ref) * (1 - 5 / ref) ** 3
    inter = (1 - 2 / ref) * (1 - 5 / ref) ** 3
    assert tab.loc["MARLIN", "hypervolume"] == pytest.approx(a + b - inter)
    assert tab.loc["SLIT", "share_of_MARLIN_pct"] == pytest.approx(100 * slit / (a + b - inter))


def test_headline_compares_marlin_balanced_with_slit_in_percent():
    df = pd.DataFrame(
        [
            _row("slit", 0, 100.0, 10.0, 50.0, 0.5),
            _row("marlin-balanced", 0, 40.0, 2.0, 20.0, 0.49),
        ]
    )
    ours = {r["quantity"]: r["ours"] for r in F.headline(df)}
    assert ours["MARLIN-Balanced vs SLIT carbon %"] == pytest.approx(-60.0)
    assert ours["MARLIN-Balanced vs SLIT water %"] == pytest.approx(-80.0)
    assert ours["MARLIN-Balanced vs SLIT cost %"] == pytest.approx(-60.0)
    assert ours["MARLIN-Balanced vs SLIT TTFT %"] == pytest.approx(-2.0)
    assert math.isnan(ours["no-veto ablation HV change %"])  # no ablation ran


def test_quick_plan_covers_every_figure():
    cfg = S.quick_config()
    cells = S.plan_cells(cfg)
    pols = {c.policy for c in cells}
    assert set(S.BASELINES) | set(S.REFERENCES) <= pols
    assert {c.scenario for c in cells} == {"marlin8", "marlin4"}
    assert {c.seed for c in cells} == {0, 1}
    assert {c.weights for c in cells if c.policy == "lp-mpc"} == set(PRESETS)
    assert len(cells) == len(set(cells))


@pytest.mark.slow
@pytest.mark.realdata
def test_quick_reproduction_writes_every_figure(data_dir, tmp_path):
    out = tmp_path / "seed001"
    res = S.reproduce(S.quick_config(str(data_dir)), out, log=lambda *_: None)
    runs = pd.read_csv(out / "runs.csv")
    for name in ("fig3_metrics", "fig4_hypervolume", "fig5_scaling"):
        assert (out / f"{name}.csv").exists() and (out / f"{name}.png").stat().st_size > 0
    assert np.isfinite(runs[list(S.METRIC_KEYS)].to_numpy()).all()
    fig3 = pd.read_csv(out / "fig3_metrics.csv")
    assert set(S.BASELINES) | set(S.REFERENCES) <= set(fig3.policy)
    assert (fig3.n_seeds == 2).all()
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["cells"]) == len(runs) and manifest["input_files_sha256"]
    # the learners' floats depend on the CPU: the manifest names it
    assert manifest["machine"]["cpu"] and manifest["machine"]["torch_cpu_capability"]
    assert [r["quantity"] for r in res["headline"]] == list(F.PAPER)
    if S.marlin_names():
        assert (out / "fig6_ablation.png").exists()


def test_reuse_keeps_only_the_cells_of_this_plan(tmp_path):
    cfg = S.Config(seeds=1, hours=24.0, figures=(3,), only=("slit", "helix"))
    cells = S.plan_cells(cfg)
    assert [c.policy for c in cells] == ["helix", "slit"]
    rows = [
        {**_row("slit", 0, 1, 1, 1, 1), "hours": 24.0, "options": "{}"},
        {**_row("slit", 0, 1, 1, 1, 1), "hours": 2.0, "options": "{}"},  # another length
        {**_row("slit", 1, 1, 1, 1, 1), "hours": 24.0, "options": "{}"},  # another seed
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "runs.csv", index=False)
    kept = S.reused_rows(str(tmp_path / "runs.csv"), cells)
    assert len(kept) == 1 and kept.iloc[0].hours == 24.0 and kept.iloc[0].seed == 0


def test_marlin_n_keeps_marlin8s_setup_over_n_sites():
    from greenroute.core.errors import ConfigError
    from greenroute.scenarios import get_scenario
    from greenroute.scenarios.marlin import MARLIN8_REGIONS, MARLIN_SCALE_REGIONS, marlin_n

    m8, m12 = get_scenario("marlin8"), marlin_n(12)
    assert set(MARLIN_SCALE_REGIONS[:8]) == set(MARLIN8_REGIONS)  # n = 8 is marlin8's sites
    assert m12.regions == m12.origins == MARLIN_SCALE_REGIONS and m12.name == "marlin12"
    assert marlin_n(4).regions == MARLIN_SCALE_REGIONS[:4]
    # per datacenter: the same nodes, cap and per-origin load as marlin8
    assert set(m12.constraints.power_caps_kw.values()) == set(m8.constraints.power_caps_kw.values())
    assert m12.cluster.regions[0].groups == m8.cluster.regions[0].groups
    assert m12.workload.interactive_rps[0] == m8.workload.interactive_rps[0]
    with pytest.raises(ConfigError, match="4 to 12"):
        marlin_n(3)
