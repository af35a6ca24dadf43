"""Time shifting inside ADMM (``admm`` with ``horizon > 0``, :mod:`.admm_horizon`): the taut
string projection against a generic QP, a hand-made two-epoch problem where later energy is
cheaper (ADMM holds exactly the deferrable work that is not yet due), and ADMM against lp-mpc's
horizon LP on small random congested problems."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from greenroute.core.types import ClusterInfo, ObjectiveWeights, Observation
from greenroute.policies.optimize.admm_horizon import (
    admm_horizon,
    horizon_objective,
    horizon_problem,
    shift_warm,
    taut_string,
)
from greenroute.policies.optimize.lp import solve_horizon_lp
from greenroute.policies.optimize.model import DEFERRABLE, INTERACTIVE, build_cost_model
from greenroute.policies.registry import make_geo_policy


# ---------------------------------------------------------------------------- taut string
@pytest.mark.parametrize("seed", range(6))
def test_taut_string_is_the_exact_projection(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    v = rng.normal(1.0, 2.0, n)
    hi = np.cumsum(rng.uniform(0.0, 2.0, n)) + rng.uniform(0, 1)
    lo = hi - rng.uniform(0.0, 3.0, n)
    if seed % 2:
        lo[-1] = hi[-1]  # a fixed end (zero-pool)
    s = taut_string(v, lo, hi)
    c = np.cumsum(s)
    assert np.all(c >= lo - 1e-9) and np.all(c <= hi + 1e-9)
    cons = [{"type": "ineq", "fun": lambda x: np.cumsum(x) - lo},
            {"type": "ineq", "fun": lambda x: hi - np.cumsum(x)}]  # fmt: skip
    ref = minimize(lambda x: ((x - v) ** 2).sum(), np.diff(lo, prepend=0.0), method="SLSQP",
                   constraints=cons, options={"ftol": 1e-14, "maxiter": 500})  # fmt: skip
    assert ((s - v) ** 2).sum() <= ref.fun + 1e-7
    np.testing.assert_allclose(s, ref.x, atol=1e-5)


def test_taut_string_keeps_a_feasible_point_and_hand_case():
    # v already feasible: unchanged
    np.testing.assert_allclose(taut_string([1.0, 1.0], [0.0, 2.0], [3.0, 3.0]), [1.0, 1.0])
    # v = (3, 0) with cum <= (1, 3): the first step is cut to 1, the second takes nothing more
    # (moving 2 units later would cost (0-2)^2): s = (1, 0)
    np.testing.assert_allclose(taut_string([3.0, 0.0], [0.0, 0.0], [1.0, 3.0]), [1.0, 0.0])
    # the same with the end fixed at 3: s = (1, 2)
    np.testing.assert_allclose(taut_string([3.0, 0.0], [0.0, 3.0], [1.0, 3.0]), [1.0, 2.0])


# ---------------------------------------------------------------------------- observations
def make_obs(
    *,
    n_o: int,
    n_r: int,
    h1: int,
    price: np.ndarray,  # [H1, R] $/kWh (facility factor 1.2 on top)
    demand_rps: np.ndarray,  # [H1, C, O]
    pending: np.ndarray,  # [O]
    pending_due: np.ndarray | None,
    capacity: np.ndarray,
    congestion: bool = False,
) -> Observation:
    names = tuple(f"R{i}" for i in range(n_r))
    origins = tuple(f"R{i}" for i in range(n_o))
    ones = np.ones((h1, n_r))
    lat = np.full((n_o, n_r), 0.02)
    grid = np.linspace(0.0, 1.0, 11) if congestion else None
    wait = np.tile(0.5 * grid**3 / (1.0 - 0.9 * grid), (n_r, 1)) if congestion else None
    return Observation(
        epoch=0, time_s=0.0, time_utc=pd.Timestamp("2024-01-15", tz="UTC"), epoch_s=900.0,
        regions=names, origins=origins, carbon_intensity_g_per_kwh=100 * ones,
        price_usd_per_kwh=price, temp_c=20 * ones, wetbulb_c=15 * ones,
        water_intensity_l_per_kwh=ones, energy_kwh_per_it_kwh=1.2 * ones,
        carbon_g_per_it_kwh=120 * ones, water_l_per_it_kwh=ones,
        cost_usd_per_it_kwh=1.2 * price, it_kwh_per_request=np.full((2, n_r), 0.01),
        slot_s_per_request=np.full((2, n_r), 9.0), prefill_s_per_request=np.full((2, n_r), 0.1),
        capacity_slots=capacity, busy_slots=np.zeros(n_r), queue_len=np.zeros(n_r),
        backlog_slot_s=np.zeros(n_r), kv_free_frac=np.ones(n_r),
        resident_models=(frozenset({"m"}),) * n_r, idle_power_kw=np.full(n_r, 10.0),
        peak_power_kw=np.full(n_r, 30.0), demand_rps=demand_rps,
        pending_deferrable=pending, pending_deadline_s=np.full(n_o, np.inf),
        pending_due=pending_due, latency_s=lat, allowed=np.ones((2, n_o, n_r), dtype=bool),
        ttft_slo_s=2.0,
        weights=ObjectiveWeights(carbon=0.0, water=0.0, cost=1.0, latency=1.0 * congestion,
                                 slo_penalty=0.0),
        objective_scales={"cost_usd": 1.0, "ttft_mean_s": 1.0, "interactive_requests": 1e4},
        util_grid=grid, wait_curve_s=wait,
        slo_miss_curve=np.zeros((n_r, 11)) if congestion else None,
    )  # fmt: skip


def two_epoch_obs() -> Observation:
    """Two epochs, two regions; energy costs 0.2 $/kWh now and 0.1 next epoch. Origin 0 holds
    300 deferrable requests of which 100 are due now (``pending_due``: the simulator counts
    held work due within its forced-release margin, which lp._due reads ahead), no new
    deferrable arrivals; interactive 1 rps per origin (900 requests per epoch)."""
    h1 = 2
    demand = np.zeros((h1, 2, 2))
    demand[:, INTERACTIVE] = 1.0
    return make_obs(n_o=2, n_r=2, h1=h1, price=np.array([[0.2, 0.2], [0.1, 0.1]]),
                    demand_rps=demand, pending=np.array([300.0, 0.0]),
                    pending_due=np.array([[100.0, 0.0], [100.0, 0.0]]),
                    capacity=np.array([100.0, 100.0]))  # fmt: skip


@pytest.mark.parametrize("terminal", ["zero-pool", "cost"])
def test_two_epochs_admm_defers_exactly_what_is_not_due(terminal):
    obs = two_epoch_obs()
    model = build_cost_model(obs)
    hp = horizon_problem(obs, model, (0.0, 0.0), terminal=terminal)
    np.testing.assert_allclose(hp.lo[:, 0], [100.0, 300.0 if terminal == "zero-pool" else 100])
    np.testing.assert_allclose(hp.hi[:, 0], [300.0, 300.0])
    res = admm_horizon(hp, eps_abs=1e-8, eps_rel=1e-8)
    assert res.converged
    # due work now, the rest in the cheaper epoch: never later than due, never earlier
    np.testing.assert_allclose(res.dispatch[:, 0], [100.0, 200.0], atol=1e-4)
    np.testing.assert_allclose(res.dispatch[:, 1], 0.0, atol=1e-9)
    np.testing.assert_allclose(res.pool[:, 0], [200.0, 0.0], atol=1e-4)
    # per request 0.01 kWh x 1.2: 2 x 900 x (0.0024 + 0.0012) + 100 x 0.0024 + 200 x 0.0012
    assert res.objective == pytest.approx(2 * 900 * 0.0036 + 0.24 + 0.24, rel=1e-6)
    lp = solve_horizon_lp(obs, model, (0.0, 0.0), terminal=terminal)
    np.testing.assert_allclose(lp.d[:, 0], [100.0, 200.0], atol=1e-6)
    assert res.objective == pytest.approx(lp.objective, rel=1e-6)


def _cluster(n: int, slack=(0.0, 0.0)) -> ClusterInfo:
    names = tuple(f"R{i}" for i in range(n))
    return ClusterInfo(names, names, ("m",), 900.0, 96, np.full(n, 100.0), np.full(n, 2),
                       np.full(n, 10.0), np.full(n, 30.0), np.zeros((n, n)), np.zeros((n, 2)),
                       np.zeros((n, 2)), 2.0, deadline_slack_s=slack)  # fmt: skip


def test_policy_with_horizon_holds_the_share_not_due():
    pol = make_geo_policy("admm", horizon=1, eps_abs=1e-8, eps_rel=1e-8)
    pol.reset(_cluster(2), 0)
    assert pol.horizon_epochs == 1
    plan = pol.plan(two_epoch_obs())
    assert plan.hold[0] == pytest.approx(200.0 / 300.0, abs=1e-6)  # 100 of 300 dispatched
    assert pol.records[-1]["gap"] == pytest.approx(0.0, abs=1e-6)  # checked against the LP
    spatial = make_geo_policy("admm")  # horizon 0: everything dispatched now
    spatial.reset(_cluster(2), 0)
    assert spatial.plan(two_epoch_obs()).hold[0] == 0.0


def random_obs(seed: int) -> tuple[Observation, tuple[float, float]]:
    rng = np.random.default_rng(seed)
    n_o, n_r, h1 = 3, 3, 4
    demand = np.zeros((h1, 2, n_o))
    demand[:, INTERACTIVE] = rng.uniform(0.5, 2.0, (h1, n_o))
    demand[:, DEFERRABLE] = rng.uniform(0.0, 0.6, (h1, n_o))
    pending = rng.uniform(0.0, 400.0, n_o)
    due = np.minimum(np.cumsum(rng.uniform(0, 150, (h1 + 3, n_o)), axis=0), pending)
    obs = make_obs(n_o=n_o, n_r=n_r, h1=h1, price=rng.uniform(0.05, 0.3, (h1, n_r)),
                   demand_rps=demand, pending=pending, pending_due=due,
                   capacity=rng.uniform(15.0, 40.0, n_r), congestion=True)  # fmt: skip
    return obs, (900.0, 3600.0)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("terminal", ["cost", "zero-pool"])
def test_admm_horizon_matches_the_lp_on_small_congested_problems(seed, terminal):
    obs, slack = random_obs(seed)
    model = build_cost_model(obs)
    hp = horizon_problem(obs, model, slack, terminal=terminal)
    lp = solve_horizon_lp(obs, model, slack, terminal=terminal)
    res = admm_horizon(hp, eps_abs=1e-7, eps_rel=1e-7, max_iter=20000)
    assert res.converged
    # the plan is feasible: interactive rows exact, cumulative dispatch within the deadlines
    np.testing.assert_allclose(res.x[:, INTERACTIVE].sum(axis=2), hp.d_int, rtol=1e-9)
    cum = np.cumsum(res.x[:, DEFERRABLE].sum(axis=2), axis=0)
    assert np.all(cum >= hp.lo - 1e-4) and np.all(cum <= hp.hi + 1e-4)  # requests, of ~1000
    assert horizon_objective(hp, res.x) == pytest.approx(res.objective, rel=1e-12)
    # lp-mpc's optimum (same program), to ADMM's tolerance
    assert res.objective >= lp.objective * (1 - 1e-6)
    assert res.objective == pytest.approx(lp.objective, rel=1e-4)


def test_shift_warm_moves_the_plan_one_step():
    a = np.arange(3.0)[:, None] * np.ones((3, 2))
    np.testing.assert_allclose(shift_warm(a, 3)[:, 0], [1.0, 2.0, 2.0])
    np.testing.assert_allclose(shift_warm(a, 1)[:, 0], [1.0])
    assert shift_warm(None, 2) is None
