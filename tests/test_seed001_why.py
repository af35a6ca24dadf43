"""bench.seed001_why: Fig. 4 under other readings of §6.1 (hand-computed hypervolumes) and
the off-local share of a plan."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from greenroute.bench import seed001_why as W


def _runs() -> pd.DataFrame:
    """Two seeds of three policies; points (carbon, water, cost, ttft) as in the docstring."""
    pts = {"marlin-balanced": (2, 2, 2, 2), "slit": (1, 1, 1, 3), "local-only": (4, 4, 4, 4)}
    labels = {"marlin-balanced": "MARLIN-Balanced", "slit": "SLIT", "local-only": "local-only"}
    rows = [
        {"scenario": "marlin8", "policy": p, "seed": s, "weights": "balanced", "tag": np.nan,
         "label": labels[p], "carbon_kg": c, "water_m3": w, "cost_usd": u, "ttft_mean_s": t}
        for p, (c, w, u, t) in pts.items() for s in (0, 1)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_hv_readings_hand_computed():
    t = W.hv_readings(_runs()).set_index("framework")
    # reference = worst x 1.1 = 4.4 on every axis: MARLIN (2.4/4.4)^4, SLIT (3.4/4.4)^3 (1.4/4.4)
    slit = 100 * 3.4**3 * 1.4 / 2.4**4
    assert t.loc["SLIT", "ours"] == pytest.approx(slit)
    assert t.loc["local-only", "ours"] == pytest.approx(100 * 0.4**4 / 2.4**4)
    # min-max normalisation scales every volume by one constant: the shares do not move
    assert t.loc["SLIT", "minmax"] == pytest.approx(slit)
    # reference at the worst values (4): 3^3 x 1 / 2^4; local-only adds no volume
    assert t.loc["SLIT", "ref_worst"] == pytest.approx(100 * 27 / 16)
    assert t.loc["local-only", "ref_worst"] == 0.0
    # without TTFT: (3.4 / 2.4)^3
    assert t.loc["SLIT", "no_ttft"] == pytest.approx(100 * (3.4 / 2.4) ** 3)
    # both seeds are equal, so per-seed, Balanced-only and paper-set readings equal ours
    for col in ("per_seed", "balanced_only", "paper_set"):
        assert t.loc["SLIT", col] == pytest.approx(slit)
    assert t.loc["MARLIN"].to_numpy() == pytest.approx(np.full(7, 100.0))


def test_axis_factors_multiply_to_the_single_point_volume():
    f = W.axis_factors(_runs()).set_index("policy")
    assert f.loc["slit", "ttft_mean_s"] == pytest.approx(1.4 / 4.4)
    assert f.loc["marlin-balanced", "product"] == pytest.approx((2.4 / 4.4) ** 4)


def test_off_local_share_of_a_plan():
    # origins A, B; datacenters A, B, C; demand A 3, B 1 (one class); A keeps half at home,
    # B sends everything to C: (3 x 0.5 + 1 x 1) / 4 = 0.625
    route = np.array([[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]])
    inner = SimpleNamespace(plan=lambda obs: SimpleNamespace(route=route), name="fake")
    obs = SimpleNamespace(demand_rps=np.array([[[3.0, 1.0]]]), origins=("A", "B"),
                          regions=("A", "B", "C"))  # fmt: skip
    rec = W._OffLocal(inner)
    assert rec.plan(obs).route is route
    assert rec.moved == [pytest.approx(0.625)]
    assert rec.name == "fake"  # everything else is the wrapped policy's


def test_where_served_hand_computed():
    # one epoch, four sites with grid intensity 10..40 g/kWh serving 1..4 requests
    f = pd.DataFrame({"epoch": 0, "region": list("ABCD"), "requests_dispatched": [1, 2, 3, 4],
                      "carbon_intensity_g_per_kwh": [10.0, 20.0, 30.0, 40.0],
                      "utilisation": [0.1, 0.2, 0.3, 0.4]})  # fmt: skip
    t = W.where_served({"p": f}, {"p": {"moved": [0.25, 0.75]}}).iloc[0]
    assert t.moved_share_pct == pytest.approx(50.0)
    assert t.served_2_cleanest_pct == pytest.approx(30.0)  # (1 + 2) / 10
    assert t.served_2_dirtiest_pct == pytest.approx(70.0)
    assert t.grid_g_per_kwh_weighted == pytest.approx((10 + 40 + 90 + 160) / 10)
    assert t.util_D == pytest.approx(0.4)
