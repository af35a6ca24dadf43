"""LP-MPC and the oracle: a hand-solved instance, constraint safety, the oracle as yardstick."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import greenroute
from greenroute.constraints import ConstraintSet, Exclusion
from greenroute.core.types import ObjectiveWeights, Observation
from greenroute.policies.optimize.lp import plan_from_solution, solve_horizon_lp
from greenroute.policies.optimize.model import build_cost_model
from greenroute.sim.forecast import Forecaster

HEURISTICS = ("local-only", "round-robin", "random", "least-loaded", "lowest-carbon",
              "lowest-price", "coolest", "nearest", "carbon-threshold")  # fmt: skip


def tiny_obs(demand_requests=2700.0, caps=(100.0, 20.0), ci=(400.0, 100.0)):
    """1 origin, 2 regions, 1 epoch; slot_s = 10 s so 2700 requests = 30 busy slots."""
    n_r = 2
    ones = np.ones((1, n_r))
    ci = np.asarray(ci, float)[None]
    return Observation(
        epoch=0,
        time_s=0.0,
        time_utc=pd.Timestamp("2023-07-01", tz="UTC"),
        epoch_s=900.0,
        regions=("A", "B"),
        origins=("A",),
        carbon_intensity_g_per_kwh=ci,
        price_usd_per_kwh=ones * 0.1,
        temp_c=ones * 20,
        wetbulb_c=ones * 15,
        water_intensity_l_per_kwh=ones,
        energy_kwh_per_it_kwh=ones,
        carbon_g_per_it_kwh=ci,  # PUE 1 for hand arithmetic
        water_l_per_it_kwh=ones,
        cost_usd_per_it_kwh=ones * 0.1,
        it_kwh_per_request=np.full((2, n_r), 0.01),
        slot_s_per_request=np.full((2, n_r), 10.0),
        prefill_s_per_request=np.full((2, n_r), 0.1),
        capacity_slots=np.asarray(caps, float),
        busy_slots=np.zeros(n_r),
        queue_len=np.zeros(n_r),
        backlog_slot_s=np.zeros(n_r),
        kv_free_frac=np.ones(n_r),
        resident_models=(frozenset(), frozenset()),
        idle_power_kw=np.zeros(n_r),
        peak_power_kw=np.ones(n_r),
        demand_rps=np.array([[[demand_requests / 900.0], [0.0]]]),
        pending_deferrable=np.zeros(1),
        pending_deadline_s=np.full(1, np.inf),
        pending_due=None,
        latency_s=np.array([[0.001, 0.001]]),
        allowed=np.ones((2, 1, n_r), bool),
        ttft_slo_s=2.0,
        weights=ObjectiveWeights(1.0, 0.0, 0.0, 0.0, 0.0),
        objective_scales={"carbon_kg": 1.0, "interactive_requests": 2700.0},
    )


def test_tiny_instance_matches_hand_optimum():
    obs = tiny_obs()
    model = build_cost_model(obs, max_util=1.0)
    sol = solve_horizon_lp(obs, model, (0.0, 0.0))
    # B (100 g/kWh) is cheaper: it takes its full 20 slots = 1800 requests, A the other 900
    assert sol.xi[0, 0].tolist() == pytest.approx([900.0, 1800.0], abs=1e-6)
    assert sol.busy[0].tolist() == pytest.approx([10.0, 20.0], abs=1e-9)
    # objective (carbon kg, scale 1): 0.01 kWh x (900 x 0.4 + 1800 x 0.1) kg/kWh = 5.4 kg
    assert sol.objective == pytest.approx(0.01 * (900 * 0.4 + 1800 * 0.1), rel=1e-9)
    plan = plan_from_solution(obs, model, sol, 0)
    assert plan.route[0, 0].tolist() == pytest.approx([1 / 3, 2 / 3])


def test_tiny_instance_uncapped_goes_all_to_cleanest():
    obs = tiny_obs(caps=(100.0, 100.0))
    sol = solve_horizon_lp(obs, build_cost_model(obs, max_util=1.0), (0.0, 0.0))
    assert sol.xi[0, 0].tolist() == pytest.approx([0.0, 2700.0], abs=1e-6)


@pytest.mark.parametrize("policy", ["lp-mpc", "oracle"])
def test_lp_plans_pass_the_simulators_validator_under_constraints(policy):
    cs = ConstraintSet(
        (Exclusion("US-CAL-CISO", 2 * 3600, 6 * 3600, "maintenance"),),
        residency={"DE-LU": frozenset({"DE-LU", "SG"})},
    )
    # on_invalid="raise" (default): any violating plan would abort the run
    res = greenroute.run("demo", policy, days=0.35, seed=2, constraints=cs, fidelity="fluid")
    ep = res.epochs
    cal = ep[(ep["region"] == "US-CAL-CISO") & ep["epoch"].between(8, 23)]
    assert (cal["requests_dispatched"] == 0).all()
    assert res.metrics["invalid_plans"] == 0


def _assert_oracle_not_beaten(scenario, days, seed, data_dir=None, **kw):
    results = greenroute.compare(
        scenario, (*HEURISTICS, "oracle"), seed=seed, days=days, data_dir=data_dir,
        oracle_gap=False, **kw,
    )  # fmt: skip
    j = {r.policy: r.metrics["objective"] for r in results}
    for name in HEURISTICS:
        assert j["oracle"] <= j[name] * (1 + 1e-3), (name, j)


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("scenario", "days", "seed"), [("geo3", 2.0, 0), ("geo3", 2.0, 1), ("geo5", 1.0, 0)]
)
def test_oracle_not_beaten_by_any_heuristic(scenario, days, seed, data_dir):
    _assert_oracle_not_beaten(scenario, days, seed, data_dir)


def test_oracle_not_beaten_by_any_heuristic_on_demo():
    """demo runs on the embedded data: no real data needed. The oracle's LP models the slots
    server (one placement per request), so the comparison runs that server model."""
    _assert_oracle_not_beaten("demo", 1.0, 0, server_model="slots")


@pytest.mark.realdata
def test_oracle_lp_model_tracks_its_execution_and_gap_columns(data_dir):
    # slots servers: the LP's linear capacity model is exact for them; under the iteration model
    # (capacity bends with prefill interference) the open-loop oracle can trail closed-loop
    # lp-mpc by ~0.3 % of J on this window (0.6424 vs 0.6405 measured)
    res = greenroute.compare("geo3", ["local-only", "lp-mpc", "oracle"], days=2,
                             data_dir=data_dir, server_model="slots")  # fmt: skip
    m = {r.policy: r.metrics for r in res}
    # the LP's own estimate of J is close to the simulated J of its plan (model fidelity)
    assert m["oracle"]["oracle_lp_objective"] == pytest.approx(m["oracle"]["objective"], rel=0.02)
    # lp-mpc sits between local-only and the oracle, so its share of the oracle's saving is
    # in (0, 100] (the formula itself is checked by hand in test_oracle_gap_columns_by_hand)
    j = {k: v["objective"] for k, v in m.items()}
    assert j["oracle"] <= j["lp-mpc"] * (1 + 1e-3) and j["lp-mpc"] < j["local-only"]
    assert 0.0 < m["lp-mpc"]["oracle_savings_captured_pct"] <= 100.1


def test_oracle_gap_columns_by_hand():
    """Share of the oracle's saving over local-only, on hand-made results."""
    from types import SimpleNamespace

    from greenroute.api import add_oracle_gaps

    def result(j, carbon, extras=None):
        return SimpleNamespace(metrics={"objective": j, "carbon_kg": carbon}, extras=extras or {})

    base = result(1.20, 100.0)
    orc = result(0.80, 60.0, {"policy_summary": {"lp_objective_j": 0.78}})
    mpc, worse, same = result(0.90, 76.0), result(1.30, 110.0), result(1.20, 100.0)
    add_oracle_gaps([base, orc, mpc, worse, same], base, orc)
    # J saving of the oracle 1.20 - 0.80 = 0.40; lp-mpc saves 0.30 -> 75 %, worse loses
    # 0.10 -> -25 %; carbon: 100 - 60 = 40 kg saved by the oracle, lp-mpc 24 kg -> 60 %
    assert mpc.metrics["oracle_savings_captured_pct"] == pytest.approx(75.0, rel=1e-12)
    assert worse.metrics["oracle_savings_captured_pct"] == pytest.approx(-25.0, rel=1e-12)
    assert mpc.metrics["oracle_carbon_savings_captured_pct"] == pytest.approx(60.0, rel=1e-12)
    assert worse.metrics["oracle_carbon_savings_captured_pct"] == pytest.approx(-25.0, rel=1e-12)
    assert (
        orc.metrics["oracle_savings_captured_pct"] == 100.0
        and base.metrics["oracle_savings_captured_pct"] == 0.0
    )
    assert same.metrics["oracle_savings_captured_pct"] == 0.0
    assert mpc.metrics["oracle_objective"] == 0.80 and mpc.metrics["oracle_lp_objective"] == 0.78
    # no saving at all: the share is undefined (NaN), not a division by zero
    flat = result(1.0, 50.0)
    add_oracle_gaps([flat], flat, result(1.0, 50.0))
    assert math.isnan(flat.metrics["oracle_savings_captured_pct"])


def test_forecasters_by_hand():
    series = np.arange(20, dtype=float)[:, None] * np.ones((1, 2))
    perfect = Forecaster("perfect").signal(series, 3, 4)
    assert perfect[:, 0].tolist() == [3, 4, 5, 6, 7]
    pers = Forecaster("persistence").signal(series, 3, 4)
    assert pers[:, 0].tolist() == [3, 3, 3, 3, 3]
    blend = Forecaster("blend-yesterday", epochs_per_day=2).signal(series, 3, 2)
    # 0.5 x now + 0.5 x same step yesterday (2 epochs back): h=1 -> 0.5*3 + 0.5*2 = 2.5
    assert blend[:, 0].tolist() == [3.0, 2.5, 3.0]
    noisy = Forecaster("noisy", error=0.2, seed=1)
    draws = np.stack([noisy.signal(np.ones((10, 1)) * 100, 0, 4)[:, 0] for _ in range(2000)])
    assert draws[:, 0].std() == 0.0  # now is measured
    assert draws[:, 1].mean() == pytest.approx(100, rel=0.02)
    assert draws[:, 4].std() > draws[:, 1].std()  # error grows with lead time


def test_numerical_trouble_retries_the_other_highs_algorithms(monkeypatch):
    """HiGHS can end with model status "Unknown" on a feasible LP (geo3, lp-mpc, epoch 1072:
    the default and dual simplex failed, interior point solved it; seed004 --horizon 48,
    epoch 156: only dual simplex without presolve solved it): the solve is retried with
    ``LP_RETRY_METHODS`` in turn; the hand optimum of the tiny instance comes out of the
    retry, and a failure of every method is still an error naming the epoch."""
    import scipy.optimize as so

    from greenroute.core.errors import InfeasibleConstraintsError
    from greenroute.policies.optimize import lp as L

    real = so.linprog
    seen = []

    def flaky(*a, fail=(("highs", True), ("highs-ds", True)), **k):
        key = (k["method"], (k.get("options") or {}).get("presolve", True))
        seen.append(key)
        if key in fail:
            return so.OptimizeResult(status=L.LINPROG_NUMERICAL, x=None, message="Unknown")
        return real(*a, **k)

    monkeypatch.setattr(so, "linprog", flaky)
    obs = tiny_obs()
    sol = solve_horizon_lp(obs, build_cost_model(obs, max_util=1.0), (0.0, 0.0))
    assert seen == [("highs", True), ("highs-ds", True), ("highs-ipm", True)]
    assert sol.xi[0, 0].tolist() == pytest.approx([900.0, 1800.0], abs=1e-6)  # the hand optimum
    # only dual simplex without presolve solves it: the last retry
    seen.clear()
    three = (("highs", True), ("highs-ds", True), ("highs-ipm", True))
    monkeypatch.setattr(so, "linprog", lambda *a, **k: flaky(*a, fail=three, **k))
    sol = solve_horizon_lp(obs, build_cost_model(obs, max_util=1.0), (0.0, 0.0))
    assert seen == [*three, ("highs-ds", False)]
    assert sol.xi[0, 0].tolist() == pytest.approx([900.0, 1800.0], abs=1e-6)
    every = (*three, ("highs-ds", False))
    monkeypatch.setattr(so, "linprog", lambda *a, **k: flaky(*a, fail=every, **k))
    with pytest.raises(InfeasibleConstraintsError, match="epoch 0"):
        solve_horizon_lp(obs, build_cost_model(obs, max_util=1.0), (0.0, 0.0))
