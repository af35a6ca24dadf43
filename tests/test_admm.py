"""The ``admm`` geo policy (seed 004): the exact region subproblem, ADMM against the centralised
epoch LP (a hand-solved instance, random congested instances, masks), determinism, and the
acceptance check on the ``au-edge`` scenario (ADMM within 1 % of the centralised optimum)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from greenroute.constraints import ConstraintSet, Exclusion
from greenroute.core.types import ClusterInfo, ObjectiveWeights, Observation
from greenroute.policies.optimize.admm import ADMMPolicy
from greenroute.policies.optimize.admm_solver import admm_epoch, region_prox, region_pwl
from greenroute.policies.optimize.epoch_problem import (
    EpochProblem,
    centralized_epoch_lp,
    epoch_objective,
    epoch_problem,
    solve_epoch_lp,
)
from greenroute.policies.optimize.model import build_cost_model
from greenroute.policies.registry import geo_policy_names, make_geo_policy

# ---------------------------------------------------------------------------- a hand instance
# Two origins, two regions, linear costs (no queueing curve), carbon + latency weights.
# Per request: 0.01 IT kWh; region A 100 g/kWh (1e-3 kg), region B 300 g/kWh (3e-3 kg);
# latency cost 1e-3 per second of TTFT (weight 1 / (1 s x 1000 requests)), TTFT = 2 x one-way
# + 0.1 s prefill. Interactive unit costs (kg-equivalent):
#   origin A -> A 1.12e-3, -> B 3.30e-3;  origin B -> A 1.20e-3, -> B 3.12e-3;
#   deferrable (no TTFT term): A 1e-3, B 3e-3.
# Demand: interactive 900 (origin A), 1800 (origin B); deferrable 300 held at origin A.
# slot_s = 9 s in a 900 s epoch: 0.01 busy slots per request. Region A has 20 slots, so at
# 95 % it takes 1900 requests (binding); B has room. A's saving per request over B: origin A
# 2.18e-3 > deferrable 2.00e-3 > origin B 1.92e-3, so A takes origin A's 900, the 300
# deferrable and 700 of origin B; B takes origin B's other 1100:
#   900 x 1.12e-3 + 300 x 1e-3 + 700 x 1.2e-3 + 1100 x 3.12e-3 = 5.58.
HAND_X = np.array([[[900.0, 0.0], [700.0, 1100.0]], [[300.0, 0.0], [0.0, 0.0]]])
HAND_OBJ = 5.58
AB = ("A", "B")


def hand_obs(constraints: ConstraintSet | None = None, **over) -> Observation:
    h, n = 2, 2
    epoch_s = 900.0
    ci = np.tile([100.0, 300.0], (h + 1, 1))
    demand = np.zeros((h + 1, 2, n))
    demand[:, 0] = [1.0, 2.0]  # rps -> 900, 1800 requests per epoch
    lat = np.array([[0.01, 0.1], [0.05, 0.01]])
    cons = constraints or ConstraintSet()
    allowed = cons.allowed_mask(AB, AB, 0.0, epoch_s, lat)
    kw = dict(
        epoch=0,
        time_s=0.0,
        time_utc=pd.Timestamp("2024-01-15", tz="UTC"),
        epoch_s=epoch_s,
        regions=AB,
        origins=AB,
        carbon_intensity_g_per_kwh=ci,
        price_usd_per_kwh=np.full((h + 1, n), 0.1),
        temp_c=np.tile([15.0, 30.0], (h + 1, 1)),
        wetbulb_c=np.tile([10.0, 24.0], (h + 1, 1)),
        water_intensity_l_per_kwh=np.ones((h + 1, n)),
        energy_kwh_per_it_kwh=np.full((h + 1, n), 1.2),
        carbon_g_per_it_kwh=ci,
        water_l_per_it_kwh=np.ones((h + 1, n)),
        cost_usd_per_it_kwh=np.full((h + 1, n), 0.1),
        it_kwh_per_request=np.full((2, n), 0.01),
        slot_s_per_request=np.full((2, n), 9.0),
        prefill_s_per_request=np.full((2, n), 0.1),
        capacity_slots=np.array([20.0, 100.0]),
        busy_slots=np.zeros(n),
        queue_len=np.zeros(n),
        backlog_slot_s=np.zeros(n),
        kv_free_frac=np.ones(n),
        resident_models=(frozenset({"m"}), frozenset({"m"})),
        idle_power_kw=np.full(n, 10.0),
        peak_power_kw=np.full(n, 30.0),
        demand_rps=demand,
        pending_deferrable=np.array([300.0, 0.0]),
        pending_deadline_s=np.full(n, np.inf),
        pending_due=None,
        latency_s=lat,
        allowed=allowed,
        ttft_slo_s=2.0,
        weights=ObjectiveWeights(carbon=1.0, water=0.0, cost=0.0, latency=1.0, slo_penalty=0.0),
        constraints=cons,
        objective_scales={"carbon_kg": 1.0, "ttft_mean_s": 1.0, "interactive_requests": 1000.0},
    )
    kw.update(over)
    return Observation(**kw)


def new_policy(**kw) -> ADMMPolicy:
    p = make_geo_policy("admm", **kw)
    info = ClusterInfo(AB, AB, ("m",), 900.0, 96, np.array([20.0, 100.0]), np.full(2, 2),
                       np.full(2, 10.0), np.full(2, 30.0), np.zeros((2, 2)), np.zeros((2, 2)),
                       np.zeros((2, 2)), 2.0)  # fmt: skip
    p.reset(info, 0)
    return p


def test_admm_is_registered_and_uses_weights():
    assert "admm" in geo_policy_names()
    p = make_geo_policy("admm")
    assert isinstance(p, ADMMPolicy)
    assert p.uses_weights is True
    # the options recreate the policy (the run manifest stores them)
    q = make_geo_policy("admm", **p.options)
    assert q.options == p.options


def test_hand_instance_centralised_lp():
    obs = hand_obs()
    x, obj = centralized_epoch_lp(obs, build_cost_model(obs))
    assert obj == pytest.approx(HAND_OBJ, rel=1e-9)
    np.testing.assert_allclose(x, HAND_X, atol=1e-6)


def test_hand_instance_admm_reaches_the_optimum_and_converges():
    obs = hand_obs()
    prob = epoch_problem(obs, build_cost_model(obs))
    res = admm_epoch(prob, keep_history=True)  # default tolerances
    assert res.converged
    assert res.primal_res <= res.eps_pri and res.dual_res <= res.eps_dual
    assert res.iterations == len(res.history) < 5000
    assert HAND_OBJ - 1e-9 <= res.objective <= HAND_OBJ * (1 + 1e-3)  # feasible, near-optimal
    np.testing.assert_allclose(res.x.sum(axis=2), prob.demand, rtol=1e-12)  # exact demand
    np.testing.assert_allclose(res.x, HAND_X, atol=1.0)  # requests, out of 3000
    # tighter tolerances: ADMM converges to the optimum itself
    tight = admm_epoch(prob, eps_abs=1e-8, eps_rel=1e-8)
    assert tight.converged
    assert tight.objective == pytest.approx(HAND_OBJ, rel=1e-6)
    np.testing.assert_allclose(tight.x, HAND_X, atol=0.01)
    busy_a = (tight.x[:, :, 0] * 0.01).sum()
    assert busy_a == pytest.approx(19.0, abs=1e-4)  # the binding capacity (95 % of 20 slots)


def test_hand_instance_plan_routes_and_dispatches_everything():
    obs = hand_obs()
    p = new_policy()
    plan = p.plan(obs)
    np.testing.assert_allclose(plan.route[0, 0], [1.0, 0.0], atol=1e-3)
    np.testing.assert_allclose(plan.route[0, 1], [7 / 18, 11 / 18], atol=2e-3)
    np.testing.assert_allclose(plan.route[1, 0], [1.0, 0.0], atol=1e-3)
    np.testing.assert_allclose(plan.route.sum(axis=2), 1.0)
    np.testing.assert_array_equal(plan.hold, [0.0, 0.0])  # spatial only: nothing held
    rec = p.records[-1]
    assert rec["converged"] and rec["gap"] < 1e-3 and rec["certified_gap"] <= 1e-3
    assert rec["central_objective"] == pytest.approx(HAND_OBJ, rel=1e-9)
    s = p.summary()
    for key in ("iters_mean", "iters_max", "primal_res_max", "dual_res_max", "gap_mean",
                "gap_max", "converged_share"):  # fmt: skip
        assert key in s
    assert s["converged_share"] == 1.0


@pytest.mark.parametrize(
    ("constraints", "expected", "banned"),
    [
        # origin A may only use region B (both classes): A takes origin B's 1800 (18 slots)
        # 1800 x 1.2e-3 + 900 x 3.3e-3 + 300 x 3e-3 = 6.03
        (ConstraintSet().with_residency("A", {"B"}), 6.03, (0, 0)),
        # region A excluded: everything in B: 900 x 3.3e-3 + 1800 x 3.12e-3 + 300 x 3e-3
        (ConstraintSet().with_exclusion(Exclusion("A", 0.0, 3600.0)), 9.486, (None, 0)),
    ],
)
def test_masks_are_respected(constraints, expected, banned):
    obs = hand_obs(constraints)
    model = build_cost_model(obs)
    _, lp_obj = centralized_epoch_lp(obs, model)
    assert lp_obj == pytest.approx(expected, rel=1e-9)
    p = new_policy()
    plan = p.plan(obs)
    rec = p.records[-1]
    assert rec["objective"] == pytest.approx(expected, rel=1e-4)
    o, r = banned
    sel = plan.route[:, :, r] if o is None else plan.route[:, o, r]
    assert np.all(sel == 0.0)
    assert np.all(plan.route[~obs.allowed] == 0.0)
    # the simulator's validator accepts it
    constraints.validate(plan.route, plan.hold, None, AB, AB, obs.allowed, 0)


# ---------------------------------------------------------------------------- random instances
def random_problem(rng: np.random.Generator, n_o=3, n_r=4, load=1.0) -> EpochProblem:
    """A congested epoch problem: random costs, masks, backlog and a convex PWL congestion."""
    n_c = 2
    ok = rng.random((n_c, n_o, n_r)) < 0.8
    ok[:, np.arange(n_o), rng.integers(0, n_r, n_o)] = True  # every pair has a region
    unit = rng.uniform(0.5, 2.0, (n_c, n_o, n_r)) * 1e-6
    demand = rng.uniform(1e4, 1e5, (n_c, n_o))
    w = rng.uniform(0.005, 0.02, (n_c, n_r))
    cap = load * (demand[:, :, None] * w[:, None, :]).sum(axis=(0, 1)).mean() / n_r
    cap = cap * rng.uniform(0.6, 1.4, n_r)
    # congestion: convex PWL through (0, 0) with increasing slopes (cost per busy slot)
    knots = np.linspace(0, 1.2, 7)[None, :] * cap[:, None]  # [R, 7]
    slopes = np.cumsum(rng.uniform(0, 3e-5, (n_r, 6)), axis=1)
    icept = np.zeros((n_r, 6))
    for k in range(1, 6):
        icept[:, k] = icept[:, k - 1] + (slopes[:, k - 1] - slopes[:, k]) * knots[:, k]
    return EpochProblem(
        demand=demand,
        ok=ok,
        unit=np.where(ok, unit, 0.0),
        w=w,
        b0=rng.uniform(0, 0.2, n_r) * cap,
        ucap=0.95 * cap,
        cong_slope=slopes,
        cong_icept=icept,
        big=1e3 * (float(unit.max()) / float(w.min()) + float(slopes.max())),
        cost_scale=1e6,
    )


@pytest.mark.parametrize("load", [0.5, 0.8, 1.0, 1.2, 1.4, 2.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_admm_matches_lp_on_random_congested_instances(seed, load):
    """Overloaded (0.5: the LP overflows too), tight and slack instances, random masks."""
    rng = np.random.default_rng(100 * seed + int(10 * load))
    prob = random_problem(rng, load=load)
    x_lp, lp_obj = solve_epoch_lp(prob)
    res = admm_epoch(prob)
    assert res.converged
    # the Lagrangian bound from ADMM's prices and the recovered plan bracket the optimum
    assert res.lower_bound <= lp_obj * (1 + 1e-9)
    assert res.objective >= lp_obj * (1 - 1e-9)
    assert res.certified_gap <= 1e-3  # the default gap_tol
    assert res.objective <= lp_obj * (1 + 1e-3)
    assert np.all(res.x[~prob.ok] == 0.0) and np.all(res.x >= 0.0)
    np.testing.assert_allclose(res.x.sum(axis=2), prob.demand, rtol=1e-12)
    np.testing.assert_allclose(x_lp.sum(axis=2), prob.demand, rtol=1e-7)
    assert epoch_objective(prob, x_lp) == pytest.approx(lp_obj)


def _prox_objective(a, w, v, rho, k_obj, s, b, b0, ucap, big):
    """The region step's objective and an SLSQP reference value (its smooth epigraph QP)."""

    def phi(t):
        busy = t + b0
        return k_obj * (np.max(s * busy + b) + big * max(busy - ucap, 0.0))

    def f(y):
        return a @ y + phi(w @ y) + rho / 2 * np.sum((y - v) ** 2)

    n = a.size

    def g(z):  # z = (y, e1 >= every line, e2 >= the hinge)
        return a @ z[:n] + z[n] + z[n + 1] + rho / 2 * np.sum((z[:n] - v) ** 2)

    def lines(z):
        return z[n] - k_obj * (s * (w @ z[:n] + b0) + b)

    def hinge(z):
        return np.array([z[n + 1] - k_obj * big * (w @ z[:n] + b0 - ucap)])

    y0 = np.maximum(v, 0.0)
    z0 = np.concatenate([y0, [phi(w @ y0) + 1.0, k_obj * big * max(w @ y0 + b0 - ucap, 0) + 1]])
    sol = minimize(
        g,
        z0,
        method="SLSQP",
        bounds=[(0, None)] * n + [(None, None), (0, None)],
        constraints=[{"type": "ineq", "fun": lines}, {"type": "ineq", "fun": hinge}],
        options={"ftol": 1e-13, "maxiter": 1000},
    )
    return f, min(f(np.maximum(sol.x[:n], 0.0)), float(sol.fun))


def test_region_prox_is_exact():
    """The closed-form region step against SLSQP on the same problem as a smooth QP."""
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(20):
        prob = random_problem(rng, n_o=2, n_r=3, load=1.2)
        k_obj = 3.0
        pwl = region_pwl(prob, k_obj)
        n_r = prob.ok.shape[2]
        mask = prob.ok.reshape(-1, n_r).T
        w = np.repeat(prob.w[:, None, :], prob.ok.shape[1], axis=1).reshape(-1, n_r).T * 1e3
        a = prob.unit.reshape(-1, n_r).T * 1e6
        v = rng.normal(1.0, 1.0, a.shape)
        rho = float(rng.uniform(0.2, 5.0))
        x = region_prox(a, w, v, mask, rho, pwl)
        assert np.all(x[~mask] == 0.0) and np.all(x >= 0.0)
        for r in range(n_r):
            m = mask[r]
            f, ref = _prox_objective(
                a[r, m], w[r, m], v[r, m], rho, k_obj, prob.cong_slope[r], prob.cong_icept[r],
                prob.b0[r], prob.ucap[r], prob.big,
            )  # fmt: skip
            worst = max(worst, f(x[r, m]) - ref)
    assert worst <= 1e-7


def test_warm_start_cuts_iterations_and_keeps_the_answer():
    rng = np.random.default_rng(3)
    prob = random_problem(rng, load=1.1)
    cold = admm_epoch(prob)
    warm = admm_epoch(prob, rho=cold.rho, shares0=cold.shares, price0=cold.price)
    assert warm.iterations < cold.iterations
    assert warm.objective == pytest.approx(cold.objective, rel=1e-3)


def test_determinism():
    runs = []
    for _ in range(2):
        p = new_policy()
        plans = []
        for e, scale in enumerate([1.0, 1.3, 0.8]):
            dem = hand_obs().demand_rps * scale
            obs = hand_obs(epoch=e, time_s=900.0 * e, demand_rps=dem)
            plans.append(p.plan(obs).route)
        recs = [{k: v for k, v in r.items() if k != "solve_s"} for r in p.records]
        runs.append((np.stack(plans), recs))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]


def test_weights_option_changes_the_plan():
    obs = hand_obs()
    # latency only: origin B's interactive work goes to B (0.12 s TTFT) instead of A (0.2 s)
    p = new_policy(weights={"carbon": 0.0, "water": 0.0, "cost": 0.0, "latency": 1.0})
    plan = p.plan(obs)
    assert plan.route[0, 1, 1] == pytest.approx(1.0, abs=1e-3)
    assert plan.route[0, 0, 0] == pytest.approx(1.0, abs=1e-3)


# ---------------------------------------------------------------------------- scenarios
def _run_recording(scenario: str, days: float, **kw):
    import greenroute

    routes = []

    class Recording(ADMMPolicy):
        def plan(self, obs):
            plan = super().plan(obs)
            routes.append((obs.allowed.copy(), plan.route.copy(), plan.hold.copy()))
            return plan

    pol = Recording(check_gap=True)
    # embedded (synthesised) signals: the optimiser's gap does not need the real data
    res = greenroute.run(scenario=scenario, policy=pol, days=days, **kw)
    return pol, res, routes


def _check_gap_and_plans(pol, res, routes):
    s = res.extras["policy_summary"]
    adm = sum(r["objective"] for r in pol.records)
    cen = sum(r["central_objective"] for r in pol.records)
    assert cen > 0
    assert adm >= cen * (1 - 1e-6)
    assert (adm - cen) / cen <= 0.01  # acceptance: within 1 % of the centralised optimum
    assert s["gap_max"] <= 0.01
    assert s["converged_share"] >= 0.95
    for allowed, route, hold in routes:
        assert np.all(route[~allowed] == 0.0)
        np.testing.assert_allclose(route.sum(axis=2), 1.0, atol=1e-9)
        assert np.all(hold == 0.0)


def test_au_edge_admm_within_one_percent_of_centralised():
    pol, res, routes = _run_recording("au-edge", 2.0)
    assert len(pol.records) == 192
    _check_gap_and_plans(pol, res, routes)


def test_au_edge_residency_and_exclusion_respected():
    cons = (
        ConstraintSet()
        .with_residency("AU-NSW", {"AU-NSW", "AU-VIC"})
        .with_residency("AU-NT-DRW", {"AU-NT-DRW", "AU-QLD-BNE"})
        .with_exclusion(Exclusion("AU-TAS-HBA", 6 * 3600.0, 12 * 3600.0, "maintenance"))
    )
    pol, res, routes = _run_recording("au-edge", 1.0, constraints=cons)
    _check_gap_and_plans(pol, res, routes)
    regions = list(res.manifest.get("regions") or pol.cluster.regions)
    nsw, drw, hba = (regions.index(k) for k in ("AU-NSW", "AU-NT-DRW", "AU-TAS-HBA"))
    for e, (_, route, _) in enumerate(routes):
        keep = np.zeros(len(regions), bool)
        keep[[nsw, regions.index("AU-VIC")]] = True
        assert np.all(route[:, nsw, ~keep] == 0.0)
        keep[:] = False
        keep[[drw, regions.index("AU-QLD-BNE")]] = True
        assert np.all(route[:, drw, ~keep] == 0.0)
        if 24 <= e < 48:  # 6 h to 12 h, 15-minute epochs
            assert np.all(route[:, :, hba] == 0.0)


def test_geo5_admm_within_one_percent_of_centralised():
    pol, res, routes = _run_recording("geo5", 1.0)
    _check_gap_and_plans(pol, res, routes)
