"""The one-epoch routing problem shared by ``admm`` (and its centralised LP reference): request
counts per (class, origin, region) under demand, capacity and a convex congestion cost; see
:mod:`greenroute.policies.optimize.admm` for the formulation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from greenroute.core.errors import InfeasibleConstraintsError
from greenroute.core.types import Observation
from greenroute.policies.optimize.lp import (
    OVERFLOW_PENALTY,
    _cost_scale,
)
from greenroute.policies.optimize.model import (
    DEFERRABLE,
    INTERACTIVE,
    CostModel,
)


# ---------------------------------------------------------------------------- the epoch problem
@dataclass
class EpochProblem:
    """One epoch's spatial allocation problem (request counts, unscaled objective units)."""

    demand: np.ndarray  # [C, O] requests to place this epoch
    ok: np.ndarray  # [C, O, R] allowed pairs
    unit: np.ndarray  # [C, O, R] cost per request
    w: np.ndarray  # [C, R] busy slots per request (slot_s / epoch_s)
    b0: np.ndarray  # [R] busy slots of the backlog already assigned
    ucap: np.ndarray  # [R] max_util x usable slots
    cong_slope: np.ndarray  # [R, K] cost per busy slot
    cong_icept: np.ndarray  # [R, K]
    big: float  # overflow penalty per busy slot above ucap
    cost_scale: float  # brings typical per-request costs to ~1 (solver tolerances)


def epoch_problem(
    obs: Observation, model: CostModel, h: int = 0, demand: np.ndarray | None = None
) -> EpochProblem:
    """The step-``h`` problem of a cost model. By default (step 0) interactive forecast
    arrivals and every deferrable request (held + arriving) are placed now; ``demand``
    (``[C, O]`` requests) sets what is placed instead (the per-step dispatch of the horizon
    ADMM, :mod:`.admm_horizon`). The backlog occupies step 0 only, as in lp-mpc."""
    dt = float(obs.epoch_s)
    n_c, n_o, _ = model.pair_ok.shape
    if demand is None:
        demand = np.zeros((n_c, n_o))
        demand[INTERACTIVE] = np.maximum(obs.demand_rps[h, INTERACTIVE], 0.0) * dt
        demand[DEFERRABLE] = np.maximum(obs.demand_rps[h, DEFERRABLE], 0.0) * dt + np.maximum(
            np.asarray(obs.pending_deferrable, dtype=float), 0.0
        )
    ok = model.pair_ok_h[h] & obs.allowed if h == 0 else model.pair_ok_h[h].copy()
    bad = (demand > 0) & ~ok.any(axis=2)
    if bad.any():
        c, o = (int(i[0]) for i in np.nonzero(bad))
        raise InfeasibleConstraintsError(
            "admm", f"epoch {obs.epoch}: class {c} work from {obs.origins[o]} has no allowed region"
        )
    slot_s = np.asarray(model.slot_s, dtype=float)
    slot_cost = np.max(model.unit) * dt / max(float(np.min(slot_s[slot_s > 0])), 1e-9)
    cost_scale = _cost_scale(model)
    # the same overflow price as lp-mpc (there: ``big`` in scaled units)
    big = OVERFLOW_PENALTY * (slot_cost + float(np.max(model.cong_slope))) + 1.0 / cost_scale
    return EpochProblem(
        demand=demand,
        ok=ok,
        unit=np.where(ok, model.unit[h], 0.0),
        w=slot_s / dt,
        b0=np.maximum(np.asarray(obs.backlog_slot_s, dtype=float), 0.0) / dt * (h == 0),
        ucap=model.max_util * np.asarray(model.cap_slots, dtype=float),
        cong_slope=np.asarray(model.cong_slope, dtype=float),
        cong_icept=np.asarray(model.cong_icept, dtype=float),
        big=float(big),
        cost_scale=float(cost_scale),
    )


def busy_slots(prob: EpochProblem, x: np.ndarray) -> np.ndarray:
    """[R] busy slots of an allocation (backlog included)."""
    return (x * prob.w[:, None, :]).sum(axis=(0, 1)) + prob.b0


def region_costs(prob: EpochProblem, x: np.ndarray) -> np.ndarray:
    """[R] each region's own cost f_r: its per-request costs, congestion and overflow."""
    b = busy_slots(prob, x)
    cong = np.max(prob.cong_slope * b[:, None] + prob.cong_icept, axis=1)
    over = prob.big * np.maximum(b - prob.ucap, 0.0)
    return (prob.unit * x).sum(axis=(0, 1)) + cong + over


def epoch_objective(prob: EpochProblem, x: np.ndarray) -> float:
    """The epoch objective of an allocation (the same for the LP and ADMM)."""
    return float(region_costs(prob, x).sum())


def solve_epoch_lp(prob: EpochProblem) -> tuple[np.ndarray, float]:
    """Centralised optimum of the epoch problem with HiGHS (epigraph form, as lp-mpc).

    Solved in the same scaled units as ADMM (``y = x / S``, objective x ``cost_scale / S``):
    HiGHS's tolerances are absolute, and in raw units (counts ~1e5, congestion slopes ~1e-5
    per slot) its epigraph rows were met only to ~1e-5, i.e. a wrong optimum."""
    from scipy.optimize import linprog  # lazy: ~0.3 s import

    n_c, n_o, n_r = prob.ok.shape
    pc, po, pr = np.nonzero(prob.ok)
    n_x = pc.size
    off_t, off_s = n_x, n_x + n_r
    n_var = n_x + 2 * n_r
    s_x = _count_scale(prob)
    k_obj = prob.cost_scale / s_x  # objective multiplier
    c = np.zeros(n_var)
    c[:n_x] = prob.unit[pc, po, pr] * prob.cost_scale
    c[off_t:off_s] = 1.0  # t' = k_obj x congestion cost
    c[off_s:] = prob.big * k_obj  # per overflowing busy slot
    # demand rows: sum_r y[c, o, r] = D[c, o] / S
    a_eq = sp.csr_matrix((np.ones(n_x), (pc * n_o + po, np.arange(n_x))), shape=(n_c * n_o, n_var))
    b_eq = prob.demand.ravel() / s_x
    wy = prob.w[pc, pr] * s_x  # busy slots per unit of y
    k = prob.cong_slope.shape[1]
    rr, kk = np.arange(n_r), np.arange(k)
    # capacity (busy slots): sum w~ y - s_r <= ucap - b0
    r_cap = np.concatenate([pr, rr])
    c_cap = np.concatenate([np.arange(n_x), off_s + rr])
    v_cap = np.concatenate([wy, -np.ones(n_r)])
    # congestion epigraph: k_obj slope_k sum w~ y - t'_r <= -k_obj (icept_k + slope_k b0)
    r_con = n_r + (pr[:, None] * k + kk[None, :]).ravel()
    c_con = np.repeat(np.arange(n_x), k)
    v_con = (k_obj * prob.cong_slope[pr] * wy[:, None]).ravel()
    r_t = n_r + (rr[:, None] * k + kk[None, :]).ravel()
    c_t = np.repeat(off_t + rr, k)
    rows = np.concatenate([r_cap, r_con, r_t])
    cols = np.concatenate([c_cap, c_con, c_t])
    vals = np.concatenate([v_cap, v_con, -np.ones(n_r * k)])
    a_ub = sp.csr_matrix((vals, (rows, cols)), shape=(n_r + n_r * k, n_var))
    b_ub = np.concatenate(
        [
            prob.ucap - prob.b0,
            (-k_obj * (prob.cong_icept + prob.cong_slope * prob.b0[:, None])).ravel(),
        ]
    )
    bounds = np.zeros((n_var, 2))
    bounds[:, 1] = np.inf
    bounds[off_t:off_s, 0] = -np.inf  # the congestion epigraph may be negative in principle
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if res.status != 0 or res.x is None:
        raise InfeasibleConstraintsError("admm", f"the epoch LP failed: {res.message}")
    x = np.zeros((n_c, n_o, n_r))
    x[pc, po, pr] = np.maximum(res.x[:n_x], 0.0) * s_x
    return x, epoch_objective(prob, x)


def _count_scale(prob: EpochProblem) -> float:
    """S: the mean positive demand of a (class, origin), so scaled allocations are ~1."""
    pos = prob.demand > 0
    return float(prob.demand[pos].mean()) if pos.any() else 1.0


def centralized_epoch_lp(obs: Observation, model: CostModel) -> tuple[np.ndarray, float]:
    """The centralised optimum ``(x[c, o, r], objective)`` of this epoch's spatial problem."""
    return solve_epoch_lp(epoch_problem(obs, model))
