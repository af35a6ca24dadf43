"""LP-MPC and the clairvoyant oracle (one linear program, two horizons).

Each epoch ``lp-mpc`` solves, with scipy's HiGHS, a linear program over a receding horizon
of H epochs built from the observation (:mod:`.model`): route interactive demand per origin
to regions and schedule deferrable work in time, subject to

- demand conservation per (step, origin) for interactive work;
- a deferrable pool per origin: P_h = P_{h-1} + A_h - d_h >= 0, deadlines as upper bounds on
  the pool (work due by step h must have been dispatched: P_h <= pending + cum A_h - due_h);
- capacity: busy slots <= max utilisation x usable slots (+ a heavily penalised overflow so
  the program is always feasible);
- the hard constraints and per-pair SLO bounds (only allowed pairs get variables);
- a convex piecewise-linear congestion cost per (step, region) from the simulator's queueing
  curve (latency and SLO-miss terms of the objective).

It uses forecasts, not the future (``--forecast``). Work left in the pool at the end of the
horizon costs the cheapest average marginal cost of serving it later.

``oracle`` is the same program over the whole run with perfect knowledge of arrivals and
signals (the simulator hands a ``clairvoyant`` policy perfect, full-length forecasts), solved
once; every pooled request must be dispatched by the end of the run. Its plan is then
executed by the simulator like any other, so its metrics are measured, not assumed.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from greenroute.core.errors import ConfigError, InfeasibleConstraintsError
from greenroute.core.objective import objective_weights_option
from greenroute.core.types import ClusterInfo, Observation, Plan
from greenroute.policies.optimize.blind import (
    BlindFactors,
    blind_factors_option,
    blind_observation,
    check_cooling_model,
)
from greenroute.policies.optimize.model import (
    DEFAULT_MAX_UTILISATION,
    DEFERRABLE,
    INTERACTIVE,
    CostModel,
    build_cost_model,
)
from greenroute.policies.registry import register_geo_policy

# scipy.optimize.linprog's status for numerical trouble, including HiGHS's model status
# "Unknown" (scipy/optimize/_linprog_highs.py maps unrecognised statuses to 4)
LINPROG_NUMERICAL = 4
# (method, options) tried in turn after the default: dual simplex, interior point, then dual
# simplex without presolve (seed004 --horizon 48, summer, epoch 156, 2026-11-27: only that one
# solved it)
LP_RETRY_METHODS = (("highs-ds", {}), ("highs-ipm", {}), ("highs-ds", {"presolve": False}))

OVERFLOW_PENALTY = 1e3  # x the largest per-slot cost: overflow only when nothing else fits


class LPSolution:
    def __init__(self, xi, xd, d, pool, busy, status, objective, solve_s, n_vars, n_rows):
        self.xi, self.xd, self.d, self.pool, self.busy = xi, xd, d, pool, busy
        self.status, self.objective, self.solve_s = status, objective, solve_s
        self.n_vars, self.n_rows = n_vars, n_rows


def solve_horizon_lp(
    obs: Observation,
    model: CostModel,
    slack_s: tuple[float, float],
    *,
    terminal: str = "cost",  # "cost": pooled work left costs its cheapest average; "zero-pool"
    steps: int | None = None,  # plan only this many steps (the run's end), default: horizon
) -> LPSolution:
    """Build and solve the horizon LP. Returns per-step request counts.

    ``xi[h, o, r]`` interactive, ``xd[h, o, r]`` deferrable routed, ``d[h, o]`` deferrable
    dispatched, ``pool[h, o]`` held after step h, ``busy[h, r]`` busy slots.
    """
    from scipy.optimize import linprog  # lazy: ~0.3 s import

    t_start = time.perf_counter()
    h1 = model.horizon + 1 if steps is None else max(1, min(model.horizon + 1, int(steps)))
    _, n_o, n_r = model.pair_ok.shape
    dt = obs.epoch_s
    dem = np.maximum(obs.demand_rps[:h1], 0.0) * dt  # [H+1, C, O] expected counts
    d_int = dem[:, INTERACTIVE, :]
    arr = dem[:, DEFERRABLE, :]
    pending = np.asarray(obs.pending_deferrable, dtype=float)
    pi_o, pi_r = np.nonzero(model.pair_ok[INTERACTIVE])
    pd_o, pd_r = np.nonzero(model.pair_ok[DEFERRABLE])
    ni, nd = pi_o.size, pd_o.size
    # variable blocks (row-major by step)
    off_xi = 0
    off_xd = off_xi + h1 * ni
    off_d = off_xd + h1 * nd
    off_p = off_d + h1 * n_o
    off_b = off_p + h1 * n_o
    off_t = off_b + h1 * n_r
    off_s = off_t + h1 * n_r
    n_var = off_s + h1 * n_r
    hs = np.arange(h1)

    def idx(off, width, h, j):
        return off + np.asarray(h) * width + np.asarray(j)

    # ---------------- objective
    cost_scale = _cost_scale(model)
    c = np.zeros(n_var)
    c[off_xi:off_xd] = (model.unit[:h1, INTERACTIVE][:, pi_o, pi_r]).ravel() * cost_scale
    c[off_xd:off_d] = (model.unit[:h1, DEFERRABLE][:, pd_o, pd_r]).ravel() * cost_scale
    c[off_t:off_s] = cost_scale
    slot_cost = np.max(model.unit) * dt / max(float(np.min(model.slot_s[model.slot_s > 0])), 1e-9)
    big = OVERFLOW_PENALTY * (slot_cost + float(np.max(model.cong_slope))) * cost_scale + 1.0
    c[off_s:] = big
    term = _terminal_cost(model) * cost_scale
    if terminal == "cost":
        c[idx(off_p, n_o, h1 - 1, np.arange(n_o))] = term
    # ---------------- bounds
    lb = np.zeros(n_var)
    ub = np.full(n_var, np.inf)
    # pairs not allowed at a step (exclusion windows) are fixed at zero there
    ok_i = model.pair_ok_h[:h1, INTERACTIVE][:, pi_o, pi_r]  # [H+1, Ni]
    ok_d = model.pair_ok_h[:h1, DEFERRABLE][:, pd_o, pd_r]
    ub[off_xi:off_xd] = np.where(ok_i, np.inf, 0.0).ravel()
    ub[off_xd:off_d] = np.where(ok_d, np.inf, 0.0).ravel()
    cum_arr = np.cumsum(arr, axis=0)
    due = _due(obs, arr, slack_s, h1)  # [H+1, O] cumulative work that must be dispatched
    pmax = pending[None, :] + cum_arr - due
    ub[off_p:off_b] = np.maximum(pmax, 0.0).ravel()
    if terminal == "zero-pool":
        ub[idx(off_p, n_o, h1 - 1, np.arange(n_o))] = 0.0
    # ---------------- equality rows
    rows, cols, vals, rhs = [], [], [], []
    r0 = 0
    # (1) interactive demand: sum_r xi[h, o, r] = D[h, o]
    h_i, p_i = np.meshgrid(hs, np.arange(ni), indexing="ij")
    rows.append((r0 + h_i * n_o + pi_o[p_i]).ravel())
    cols.append(idx(off_xi, ni, h_i, p_i).ravel())
    vals.append(np.ones(h_i.size))
    rhs.append(d_int.ravel())
    r0 += h1 * n_o
    # (2) deferrable routing: sum_r xd[h, o, r] - d[h, o] = 0
    h_d, p_d = np.meshgrid(hs, np.arange(nd), indexing="ij")
    rows.append((r0 + h_d * n_o + pd_o[p_d]).ravel())
    cols.append(idx(off_xd, nd, h_d, p_d).ravel())
    vals.append(np.ones(h_d.size))
    h_o, o_o = np.meshgrid(hs, np.arange(n_o), indexing="ij")
    rows.append((r0 + h_o * n_o + o_o).ravel())
    cols.append(idx(off_d, n_o, h_o, o_o).ravel())
    vals.append(-np.ones(h_o.size))
    rhs.append(np.zeros(h1 * n_o))
    r0 += h1 * n_o
    # (3) pool: P[h] - P[h-1] + d[h] = A[h]  (P[-1] = pending)
    rows.append((r0 + h_o * n_o + o_o).ravel())
    cols.append(idx(off_p, n_o, h_o, o_o).ravel())
    vals.append(np.ones(h_o.size))
    rows.append((r0 + h_o * n_o + o_o).ravel())
    cols.append(idx(off_d, n_o, h_o, o_o).ravel())
    vals.append(np.ones(h_o.size))
    if h1 > 1:
        hh, oo = np.meshgrid(hs[1:], np.arange(n_o), indexing="ij")
        rows.append((r0 + hh * n_o + oo).ravel())
        cols.append(idx(off_p, n_o, hh - 1, oo).ravel())
        vals.append(-np.ones(hh.size))
    b3 = arr.copy()
    b3[0] += pending
    rhs.append(b3.ravel())
    r0 += h1 * n_o
    # (4) busy slots: sum x * slot_s / dt - B[h, r] = -backlog / dt (h = 0)
    rows.append((r0 + h_i * n_r + pi_r[p_i]).ravel())
    cols.append(idx(off_xi, ni, h_i, p_i).ravel())
    vals.append(np.broadcast_to(model.slot_s[INTERACTIVE][pi_r] / dt, h_i.shape).ravel())
    rows.append((r0 + h_d * n_r + pd_r[p_d]).ravel())
    cols.append(idx(off_xd, nd, h_d, p_d).ravel())
    vals.append(np.broadcast_to(model.slot_s[DEFERRABLE][pd_r] / dt, h_d.shape).ravel())
    h_r, r_r = np.meshgrid(hs, np.arange(n_r), indexing="ij")
    rows.append((r0 + h_r * n_r + r_r).ravel())
    cols.append(idx(off_b, n_r, h_r, r_r).ravel())
    vals.append(-np.ones(h_r.size))
    b4 = np.zeros((h1, n_r))
    b4[0] = -np.asarray(obs.backlog_slot_s, dtype=float) / dt
    rhs.append(b4.ravel())
    r0 += h1 * n_r
    a_eq = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r0, n_var)
    )
    b_eq = np.concatenate(rhs)
    # ---------------- inequality rows
    rows, cols, vals, rhs = [], [], [], []
    q0 = 0
    # (5) capacity: B[h, r] - s[h, r] <= u_max * cap
    rows += [(q0 + h_r * n_r + r_r).ravel()] * 2
    cols += [idx(off_b, n_r, h_r, r_r).ravel(), idx(off_s, n_r, h_r, r_r).ravel()]
    vals += [np.ones(h_r.size), -np.ones(h_r.size)]
    rhs.append(np.broadcast_to(model.max_util * model.cap_slots, (h1, n_r)).ravel())
    q0 += h1 * n_r
    # (6) congestion epigraph: slope_k * B[h, r] + icept_k <= t[h, r]
    k = model.cong_slope.shape[1]
    h3, r3, k3 = np.meshgrid(hs, np.arange(n_r), np.arange(k), indexing="ij")
    row3 = (q0 + (h3 * n_r + r3) * k + k3).ravel()
    rows += [row3, row3]
    cols += [idx(off_b, n_r, h3, r3).ravel(), idx(off_t, n_r, h3, r3).ravel()]
    vals += [model.cong_slope[r3, k3].ravel(), -np.ones(h3.size)]
    rhs.append(-model.cong_icept[r3, k3].ravel())
    q0 += h1 * n_r * k
    a_ub = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(q0, n_var)
    )
    b_ub = np.concatenate(rhs)
    bounds = np.stack([lb, ub], axis=1)
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs")
    for method, options in LP_RETRY_METHODS:
        if res.status != LINPROG_NUMERICAL:
            break
        # HiGHS can end with model status "Unknown" on a feasible LP (seen at geo3 epoch 1072
        # with lp-mpc, 2026-11-26): another HiGHS algorithm or no presolve usually solves it
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds,
                      method=method, options=options)  # fmt: skip
    if res.status != 0 or res.x is None:
        raise InfeasibleConstraintsError(
            "lp", f"the horizon LP failed at epoch {obs.epoch}: {res.message}"
        )
    x = res.x
    xi = np.zeros((h1, n_o, n_r))
    xi[:, pi_o, pi_r] = x[off_xi:off_xd].reshape(h1, ni)
    xd = np.zeros((h1, n_o, n_r))
    xd[:, pd_o, pd_r] = x[off_xd:off_d].reshape(h1, nd)
    return LPSolution(
        xi=xi,
        xd=xd,
        d=x[off_d:off_p].reshape(h1, n_o),
        pool=x[off_p:off_b].reshape(h1, n_o),
        busy=x[off_b:off_t].reshape(h1, n_r),
        status=int(res.status),
        objective=float(res.fun) / cost_scale,
        solve_s=time.perf_counter() - t_start,
        n_vars=n_var,
        n_rows=int(a_eq.shape[0] + a_ub.shape[0]),
    )


def fixed_cost(obs: Observation, model: CostModel) -> float:
    """The policy-independent part of the objective over the horizon: idle power of every
    server (always on), in normalised units — added to an LP value to compare it with J."""
    idle_kwh = obs.idle_power_kw[None, :] * obs.epoch_s / 3600.0  # [1, R]
    k = model.coef
    per_kwh = (
        k["carbon"] * obs.carbon_g_per_it_kwh / 1e3
        + k["water"] * obs.water_l_per_it_kwh / 1e3
        + k["cost"] * obs.cost_usd_per_it_kwh
    )  # [H+1, R]
    return float((per_kwh * idle_kwh).sum())


def _cost_scale(model: CostModel) -> float:
    """HiGHS tolerances are absolute: bring typical per-request costs to ~1."""
    typical = float(np.median(np.abs(model.unit[model.unit != 0]))) if model.unit.any() else 1.0
    return 1.0 / typical if typical > 0 else 1.0


def _terminal_cost(model: CostModel) -> np.ndarray:
    """Per pooled request left at the horizon's end: the cheapest allowed region's average
    marginal cost over the horizon (it will have to be served later)."""
    mean_unit = model.unit[:, DEFERRABLE].mean(axis=0)  # [O, R]
    masked = np.where(model.pair_ok[DEFERRABLE], mean_unit, np.inf)
    best = masked.min(axis=1)
    return np.where(np.isfinite(best), best, 0.0)


def _due(obs: Observation, arr: np.ndarray, slack_s: tuple[float, float], h1: int) -> np.ndarray:
    """Cumulative deferrable work that must be dispatched by the end of each step: held work
    (``pending_due``) and new arrivals whose deadline falls within the simulator's forced-release
    margin (2 epochs + service) of the step's end. New arrivals' deadlines are uniform over
    the slack window."""
    dt = obs.epoch_s
    margin = 2 * dt + float(np.max(obs.slot_s_per_request[DEFERRABLE]))
    shift = int(np.ceil(margin / dt))
    n_o = arr.shape[1]
    due = np.zeros((h1, n_o))
    if obs.pending_due is not None and obs.pending_due.size:
        pdue = np.asarray(obs.pending_due)
        take = np.minimum(np.arange(h1) + shift, pdue.shape[0] - 1)
        due += pdue[take]
    lo, hi = slack_s
    if hi > 0:
        ends = (np.arange(h1) + 1.0) * dt + margin  # deadline threshold per step
        starts = np.arange(h1) * dt + dt / 2  # arrival time of each cohort
        gap = ends[:, None] - starts[None, :]  # [step, cohort]
        frac = np.clip((gap - lo) / max(hi - lo, 1e-9), 0.0, 1.0)
        frac = np.tril(frac)  # only cohorts that arrived by the step
        due += frac @ arr
    return due


def plan_from_solution(
    obs: Observation, model: CostModel, sol: LPSolution, h: int, track_pool: bool = False
) -> Plan:
    """Routing shares and the hold share of step ``h`` of a solution."""
    n_c, n_o, n_r = model.pair_ok.shape
    ok = model.pair_ok_h[min(h, model.pair_ok_h.shape[0] - 1)] & obs.allowed
    route = np.zeros((n_c, n_o, n_r))
    cheapest = np.where(ok, model.unit[min(h, model.horizon)], np.inf)
    for c, x in ((INTERACTIVE, sol.xi[h]), (DEFERRABLE, sol.xd[h])):
        tot = x.sum(axis=1)
        for o in range(n_o):
            if tot[o] > 1e-9:
                route[c, o] = np.maximum(x[o], 0.0) / tot[o]
            else:
                route[c, o, int(np.argmin(cheapest[c, o]))] = 1.0
    route = np.where(ok, route, 0.0)
    empty = route.sum(axis=2) <= 0  # solution routed only to now-forbidden pairs: cheapest ok
    for c, o in zip(*np.nonzero(empty), strict=True):
        route[c, o, int(np.argmin(cheapest[c, o]))] = 1.0
    route = route / np.maximum(route.sum(axis=2, keepdims=True), 1e-12)
    avail = np.asarray(obs.pending_deferrable, dtype=float) + obs.demand_rps[0, DEFERRABLE] * (
        obs.epoch_s
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        if track_pool:
            # keep the planned pool level rather than dispatch the planned amount: if the
            # simulator's pool drifted (forced releases, noise), this corrects instead of
            # compounding the drift (the oracle executes a whole-run plan open-loop)
            hold = np.where(avail > 1e-9, sol.pool[h] / avail, 0.0)
        else:
            hold = np.where(avail > 1e-9, 1.0 - sol.d[h] / avail, 0.0)
    return Plan(route=route, hold=np.clip(hold, 0.0, 1.0))


def _rationale(obs: Observation, sol: LPSolution, h: int) -> str:
    share = sol.xi[h].sum(axis=0) + sol.xd[h].sum(axis=0)
    tot = share.sum()
    if tot <= 0:
        return "no demand"
    top = np.argsort(share)[::-1][:3]
    parts = [f"{obs.regions[r]} {100 * share[r] / tot:.0f}%" for r in top if share[r] > 0]
    held = float(sol.pool[h].sum())
    return f"LP: {', '.join(parts)}; {held:.0f} deferrable held"


class _LPBase:
    name = ""
    uses_weights = True  # optimises obs.weights (or its own ``weights`` option)

    def __init__(
        self,
        weights: dict | None = None,
        max_utilisation: float = DEFAULT_MAX_UTILISATION,
        cooling: tuple[str, float | None, float | None, str | None] = ("aware", None, None, None),
    ) -> None:
        self.weights = objective_weights_option(weights)
        if not 0.0 < max_utilisation <= 1.0:
            raise ConfigError(f"max_utilisation must be in (0, 1], got {max_utilisation}")
        self.max_util = float(max_utilisation)
        self.solve_times: list[float] = []
        # seed 004's comparator: (cooling_model, blind_pue, blind_cop, blind_data_dir)
        self.cooling_model = check_cooling_model(cooling[0])
        self._blind_opts = cooling[1:]
        self.blind: BlindFactors | None = None

    def planning_obs(self, obs: Observation) -> Observation:
        """What the planner optimises on: ``obs`` itself, or (``cooling_model="blind"``) obs
        with one location-independent cooling efficiency (:mod:`.blind`)."""
        if self.cooling_model == "aware":
            return obs
        if self.blind is None:
            pue, cop, root = self._blind_opts
            self.blind = blind_factors_option(obs, blind_pue=pue, blind_cop=cop, data_dir=root)
        return blind_observation(obs, self.blind)

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        self.cluster = cluster
        self.slack = tuple(cluster.deadline_slack_s)
        self.solve_times = []
        self.blind = None  # the fleet mean is of this run's regions and year


_LP_UNITS = {"max_utilisation": "share of usable slots", "weights": "objective weights"}
_LP_HELP = {
    "max_utilisation": "busy-slot ceiling the LP plans to",
    "weights": 'own objective weights, e.g. {"carbon": 1} (default: the run\'s --weights)',
}
# seed 004's temperature-blind comparator (policies/optimize/blind.py)
COOLING_UNITS = {"blind_pue": "facility kWh per IT kWh", "blind_cop": "heat kWh per kWh"}
COOLING_HELP = {
    "cooling_model": "aware (each site's COP from its temperature) | blind (one constant PUE)",
    "blind_pue": "blind planner's PUE (default: the fleet's mean over the run's year)",
    "blind_cop": "or the blind planner's plant COP (PUE = 1 + 1/COP + infra)",
    "blind_data_dir": "data dir of the fleet-mean signals (default: $GREENROUTE_DATA_DIR)",
}


@register_geo_policy(
    "lp-mpc",
    "Receding-horizon LP (HiGHS): spatial routing + deferrable scheduling on forecasts.",
    units={"horizon": "epochs", **_LP_UNITS, **COOLING_UNITS},
    help={"horizon": "look-ahead of each LP", **_LP_HELP, **COOLING_HELP},
)
class LPMPC(_LPBase):
    name = "lp-mpc"

    def __init__(
        self,
        horizon: int = 48,
        weights: dict | None = None,
        max_utilisation: float = DEFAULT_MAX_UTILISATION,
        cooling_model: str = "aware",
        blind_pue: float | None = None,
        blind_cop: float | None = None,
        blind_data_dir: str | None = None,
    ) -> None:
        cooling = (cooling_model, blind_pue, blind_cop, blind_data_dir)
        super().__init__(weights, max_utilisation, cooling)
        if horizon < 1:
            raise ConfigError(f"horizon must be >= 1 epoch, got {horizon}")
        self.horizon_epochs = int(horizon)

    def summary(self) -> dict:
        t = np.asarray(self.solve_times) * 1e3
        if t.size == 0:
            return {}
        return {"horizon": self.horizon_epochs, "plan_ms_mean": float(t.mean()),
                "plan_ms_p95": float(np.percentile(t, 95)), "lps": int(t.size)}  # fmt: skip

    def plan(self, obs: Observation) -> Plan:
        t0 = time.perf_counter()
        obs = self.planning_obs(obs)
        model = build_cost_model(obs, self.weights, self.max_util)
        # the evaluation window is part of the scenario: when it ends within the horizon, plan
        # to its end and leave nothing held (like the oracle), instead of passing work on to
        # epochs that will never be simulated
        left = self.cluster.n_epochs - obs.epoch
        if left <= model.horizon + 1:
            sol = solve_horizon_lp(obs, model, self.slack, terminal="zero-pool", steps=left)
        else:
            sol = solve_horizon_lp(obs, model, self.slack, terminal="cost")
        plan = plan_from_solution(obs, model, sol, 0)
        plan.rationale = _rationale(obs, sol, 0)
        self.solve_times.append(time.perf_counter() - t0)  # the whole plan() call
        return plan


@register_geo_policy(
    "oracle",
    "Clairvoyant lower bound: one LP over the whole run with perfect arrivals and signals.",
    units=_LP_UNITS,
    help=_LP_HELP,
)
class Oracle(_LPBase):
    name = "oracle"
    clairvoyant = True

    def __init__(
        self, weights: dict | None = None, max_utilisation: float = DEFAULT_MAX_UTILISATION
    ) -> None:
        super().__init__(weights, max_utilisation)
        self.horizon_epochs: int | str = "all"

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        super().reset(cluster, seed)
        self.horizon_epochs = "all"
        self.sol = None
        self.model = None
        self.e0 = 0

    def summary(self) -> dict:
        if self.sol is None:
            return {}
        return {"lp_objective_j": self.lp_value_j, "solve_s": self.sol.solve_s,
                "variables": self.sol.n_vars, "rows": self.sol.n_rows}  # fmt: skip

    def plan(self, obs: Observation) -> Plan:
        if self.sol is None:
            self.model = build_cost_model(obs, self.weights, self.max_util)
            self.sol = solve_horizon_lp(obs, self.model, self.slack, terminal="zero-pool")
            self.solve_times.append(self.sol.solve_s)
            self.e0 = obs.epoch
            self.horizon_epochs = 0  # the rest of the run needs no look-ahead
            self.lp_objective = self.sol.objective
            # the LP's own estimate of J (model, not a bound: the simulator queues and
            # burns energy slightly differently from the linearised model)
            self.lp_value_j = self.sol.objective + fixed_cost(obs, self.model)
        h = min(obs.epoch - self.e0, self.sol.xi.shape[0] - 1)
        plan = plan_from_solution(obs, self.model, self.sol, h, track_pool=True)
        plan.rationale = _rationale(obs, self.sol, h)
        return plan
