"""NSGA-II geo policy: valid plans, better than local-only under the cost model, seeded."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("pymoo")

import greenroute
from greenroute.core.types import ObjectiveWeights
from greenroute.policies.optimize.lp import solve_horizon_lp
from greenroute.policies.optimize.model import build_cost_model, congestion_cost
from greenroute.policies.optimize.nsga2 import (
    OBJECTIVES,
    NSGA2Policy,
    build_epoch_problem,
    local_shares,
)
from greenroute.policies.registry import geo_policy_names, make_geo_policy
from greenroute.scenarios import get_scenario


class _Capture:
    """Records the observations of a local-only run (real demo observations)."""

    name = "capture"

    def __init__(self) -> None:
        self.inner = make_geo_policy("local-only")
        self.obs = []

    def reset(self, cluster, seed):
        self.cluster = cluster
        self.inner.reset(cluster, seed)

    def plan(self, obs):
        self.obs.append(obs)
        return self.inner.plan(obs)


@pytest.fixture(scope="module")
def demo():
    cap = _Capture()
    # observations of slots servers at the demo's former load (2.0 + 0.4 rps per origin): the
    # gap bounds below were set on them (the iteration model's steeper congestion makes the
    # per-epoch search harder: 3.6 % at 1x measured)
    sc = get_scenario("demo")
    wl = dataclasses.replace(sc.workload, interactive_rps=(2.0,) * 3, deferrable_rps=(0.4,) * 3)
    greenroute.run(dataclasses.replace(sc, workload=wl), cap, days=0.1, server_model="slots")
    return cap.cluster, cap.obs


def make(cluster, seed=0, **kw) -> NSGA2Policy:
    p = make_geo_policy("nsga2", **kw)
    p.reset(cluster, seed)
    return p


def busier(obs, mult=2.5):
    """The same epoch with more demand, so capacity and queueing matter."""
    return dataclasses.replace(obs, demand_rps=obs.demand_rps * mult)


def test_registered_and_weighted():
    assert "nsga2" in geo_policy_names()
    assert NSGA2Policy.uses_weights is True


def test_plans_are_valid_and_forbidden_pairs_get_zero(demo):
    cluster, obs = demo
    o = obs[3]
    allowed = o.allowed.copy()
    allowed[:, 0, 2] = False  # origin 0 may not use region 2
    allowed[1, 1, 0] = False  # deferrable work of origin 1 may not use region 0
    o = dataclasses.replace(busier(o), allowed=allowed)
    plan = make(cluster).plan(o)
    assert plan.route.shape == o.allowed.shape
    assert np.allclose(plan.route.sum(axis=2), 1.0)
    assert (plan.route >= 0).all()
    assert (plan.route[~allowed] == 0.0).all()
    assert plan.hold is not None and (plan.hold == 0).all()  # spatial only


def _lp_optimum(o):
    """The epoch's LP optimum: ``solve_horizon_lp`` for this epoch alone, releasing every
    pending deferrable request (as NSGA-II does) and with no utilisation cap, so that its
    optimum is a lower bound of the LP-model cost of any routing of the epoch's requests."""
    model = build_cost_model(o, max_util=UNCAPPED)
    sol = solve_horizon_lp(o, model, (0.0, 0.0), terminal="zero-pool", steps=1)
    x = np.stack([sol.xi[0], sol.xd[0]])  # [C, O, R] requests
    route = x / np.maximum(x.sum(axis=-1, keepdims=True), 1e-300)
    return model, sol.objective, route


def _lp_model_cost(model, ep, route) -> float:
    """The LP's objective for a routing: per-request costs + convex congestion of the busy
    slots, the carried backlog included (what ``solve_horizon_lp`` minimises at one step)."""
    x = route * ep.counts[..., None]
    busy = ep.base_busy + (x.sum(axis=1) * ep.slot_s).sum(axis=0) / ep.epoch_s
    return float((model.unit[0] * x).sum() + congestion_cost(model, busy).sum())


UNCAPPED = 100.0  # max_util for the reference LP: no capacity row binds
# Gap of NSGA-II's plan to the LP optimum under the LP's (convexified) cost model. NSGA-II
# optimises J on the simulator's own (non-convex) waiting curve, so it need not reach the
# LP optimum; measured on these 10 epochs: 0 at demo load, at most 5.9 % at 2.5x demand.
LP_GAP_MAX = {1.0: 1e-9, 2.5: 0.07}


@pytest.mark.parametrize("mult", [1.0, 2.5])
def test_gap_to_the_per_epoch_lp_optimum(demo, mult):
    cluster, obs = demo
    local = make_geo_policy("local-only")
    local.reset(cluster, 0)
    for o in obs:  # every epoch
        o = busier(o, mult)
        chosen = make(cluster).plan(o).route
        model, best, lp_route = _lp_optimum(o)
        ep = build_epoch_problem(o, model, o.weights)
        # the LP's optimum is the LP-model cost of its own plan (the reference is consistent)
        assert _lp_model_cost(model, ep, lp_route) == pytest.approx(best, rel=1e-6)
        gap = _lp_model_cost(model, ep, chosen) / best - 1.0
        assert -1e-6 <= gap <= LP_GAP_MAX[mult], (o.epoch, gap)
        # under its own objective J, NSGA-II's plan is at least as good as the LP's plan
        _, j = ep.evaluate(np.stack([chosen, lp_route, local.plan(o).route]))
        assert j[0] <= j[1] * (1 + 1e-9), (o.epoch, j)
    # when load is high the search finds a strictly better plan than staying local
    if mult > 1:
        assert j[0] < 0.95 * j[2]


def test_objectives_match_the_cost_model_by_hand(demo):
    _, obs = demo
    o = obs[2]
    model = build_cost_model(o)
    ep = build_epoch_problem(o, model, o.weights)
    route = local_shares(o, ep)
    f, _ = ep.evaluate(route)
    n = ep.counts  # [C, O]; local-only: origin o -> region o (demo origins are its regions)
    carbon = sum(n[c, r] * model.carbon_kg[0, c, r] for c in range(2) for r in range(3))
    assert f[0, 0] == pytest.approx(carbon, rel=1e-12)
    no_queue = (n[0] * model.ttft_s[0].diagonal()).sum() / n[0].sum()
    assert f[0, 3] >= no_queue  # queueing adds to network + prefill
    assert f.shape == (1, len(OBJECTIVES))


def test_weights_steer_the_choice(demo):
    cluster, obs = demo
    o = busier(obs[4], 2.0)
    green = make(cluster, weights={"carbon": 1.0, "water": 0, "cost": 0, "latency": 0})
    fast = make(cluster, weights={"carbon": 0, "water": 0, "cost": 0, "latency": 1.0})
    ep = build_epoch_problem(o, build_cost_model(o), ObjectiveWeights())
    f, _ = ep.evaluate(np.stack([green.plan(o).route, fast.plan(o).route]))
    assert f[0, 0] < f[1, 0]  # carbon
    assert f[1, 3] < f[0, 3]  # mean TTFT


def test_deterministic_by_seed(demo):
    cluster, obs = demo
    routes = []
    for _ in range(2):
        p = make(cluster, seed=7)
        routes.append([p.plan(busier(o)).route for o in obs[:3]])
    for a, b in zip(*routes, strict=True):
        np.testing.assert_array_equal(a, b)


def test_runs_inside_the_simulator():
    # the slots server model: the figures below were measured with it
    res = greenroute.run("demo", "nsga2", days=0.05, server_model="slots")
    # an independent optimiser on the same window: the oracle (one LP over the whole window,
    # perfect foresight). Spatial-only NSGA-II reaches its simulated J within 1 % (measured
    # 0.9527 vs 0.9531), far from local-only's (1.156).
    oracle = greenroute.run("demo", "oracle", days=0.05, server_model="slots").metrics["objective"]
    assert res.metrics["objective"] == pytest.approx(oracle, rel=0.01)
    s = res.extras["policy_summary"]
    assert {"generations_mean", "front_size_mean", "plan_ms_mean"} <= set(s)
    assert 1 <= s["generations_mean"] <= 25 and s["front_size_mean"] >= 1
    again = greenroute.run("demo", "nsga2", days=0.05, server_model="slots")
    assert again.metrics["carbon_kg"] == res.metrics["carbon_kg"]
