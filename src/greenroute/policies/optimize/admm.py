"""Temperature-aware ADMM (seed 004): each datacenter solves its own subproblem, and the
regions agree on how to split the demand through the alternating direction method of
multipliers (Boyd et al. 2011).

Seed 004 (only its abstract survives) schedules LLM inference across geo-distributed edge
datacenters with a distributed optimisation algorithm based on ADMM, with each site's cooling
efficiency depending on its own ambient temperature. Here the per-request costs come from the
shared cost model (:mod:`.model`): they already hold each region's cooling through its
facility factors (the COP follows that region's ambient temperature), its carbon, water,
price and network/prefill latency, and a convex piecewise-linear congestion cost of the
region's busy slots from the simulator's queueing curve.

**The epoch problem** (step 0 of the cost model; ``admm`` is spatial only: all deferrable
work is dispatched now, ``hold = 0``; temporal shifting is what ``lp-mpc`` adds). With
``D[c, o]`` the work to place this epoch (interactive: forecast arrivals; deferrable: held +
arriving), choose request counts ``x[c, o, r] >= 0`` on allowed pairs::

    min  sum unit[c, o, r] x[c, o, r] + sum_r phi_r(B_r)
    s.t. sum_r x[c, o, r] = D[c, o]
         B_r = sum_{c, o} x[c, o, r] slot_s[c, r] / epoch_s + backlog_r / epoch_s
    phi_r(B) = max_k (slope[r, k] B + icept[r, k]) + big * max(0, B - max_util cap_r)

(the hinge is the LP's heavily penalised overflow, so the program is always feasible). It is
a linear program: :func:`centralized_epoch_lp` solves it with HiGHS as the reference.

**ADMM, consensus/sharing form.** Region r owns ``x_r = x[:, :, r]`` and
``f_r(x_r) = unit_r . x_r + phi_r(B_r(x_r))`` (+ x_r >= 0, masks). The coupling
``sum_r x_r = D`` is held by a copy ``z`` projected on that affine set: minimise
``sum_r f_r(x_r) + I{sum_r z_r = D}`` s.t. ``x_r = z_r``. With the scaled dual ``u``::

    x_r <- argmin f_r(x_r) + rho/2 ||x_r - z_r + u_r||^2     (each region, in parallel)
    z   <- projection of x + u on {sum_r z_r = D}             (per (c, o): add the mean gap)
    u   <- u + x - z

The region step is a small strictly convex QP with one scalar coupling (its busy slots), solved
exactly by :func:`region_prox`: for a congestion price lambda, ``x_p = max(0, v_p - (a_p +
lambda w_p)/rho)``; the optimum is where the (non-increasing, piecewise linear) busy-slot curve
B(lambda) meets the subdifferential staircase of phi_r, found among a finite candidate set and
one linear interpolation — no iterative inner solver (compiled with numba, like the request
kernel). Residuals and stopping are Boyd section 3.3 (``r = x - z``, ``s = rho (z - z_prev)``,
absolute + relative tolerances, in units scaled so costs and allocations are ~1); rho follows
residual balancing (section 3.4.1) every 10 iterations for the first 500, then only at
500 x 2^k (finitely many changes, which keeps the convergence guarantee, yet lets rho grow
when the prices must climb far, e.g. to a full region's overflow price).

**Plan and certificate.** The plan is the regions' own ``x`` made exactly feasible
(:func:`recover_feasible`: rows over demand scaled down, a region over its capacity scales
its column down, shortfalls go to spare slots cheapest first); its objective is what is
compared with the LP. From ADMM's prices each region also computes its term of the Lagrangian
dual (:func:`_dual_bound`), so ``(objective - dual bound) / objective`` bounds the true gap
without the centralised solve; while it exceeds ``gap_tol`` (default 0.1 %) and iterations
remain, ADMM resumes with tolerances / 10 (at most ``max_refine`` times). Each epoch
warm-starts from the previous one (its shares, its prices and its rho), with ``max_iter``
iterations at most.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.optimize import linprog

from greenroute.core.errors import ConfigError, InfeasibleConstraintsError
from greenroute.core.types import ClusterInfo, Observation, Plan
from greenroute.policies.optimize.lp import (
    OVERFLOW_PENALTY,
    LPSolution,
    _cost_scale,
    _LPBase,
    plan_from_solution,
)
from greenroute.policies.optimize.model import (
    DEFAULT_MAX_UTILISATION,
    DEFERRABLE,
    INTERACTIVE,
    CostModel,
    build_cost_model,
)
from greenroute.policies.registry import register_geo_policy


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


def epoch_problem(obs: Observation, model: CostModel) -> EpochProblem:
    """The step-0 problem of a cost model: interactive forecast arrivals and every deferrable
    request (held + arriving) are placed now."""
    dt = float(obs.epoch_s)
    n_c, n_o, _ = model.pair_ok.shape
    demand = np.zeros((n_c, n_o))
    demand[INTERACTIVE] = np.maximum(obs.demand_rps[0, INTERACTIVE], 0.0) * dt
    demand[DEFERRABLE] = np.maximum(obs.demand_rps[0, DEFERRABLE], 0.0) * dt + np.maximum(
        np.asarray(obs.pending_deferrable, dtype=float), 0.0
    )
    ok = model.pair_ok_h[0] & obs.allowed
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
        unit=np.where(ok, model.unit[0], 0.0),
        w=slot_s / dt,
        b0=np.maximum(np.asarray(obs.backlog_slot_s, dtype=float), 0.0) / dt,
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


# ---------------------------------------------------------------------------- region subproblem
@dataclass
class RegionPWL:
    """Each region's convex PWL cost of ``t = sum w x`` (busy slots minus the backlog), as a
    slope staircase: slopes ``s[r, 0..L-1]`` (non-decreasing, padded by repeating the last)
    and breakpoints ``beta[r, j]`` where the slope changes from s[j-1] to s[j] (``beta[r, 0] =
    -inf``, ``+inf`` past the last real breakpoint)."""

    slopes: np.ndarray  # [R, L]
    beta: np.ndarray  # [R, L + 1]


def _envelope(slopes: np.ndarray, iceps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Upper envelope of lines ``s x + b``: (slopes ascending, breakpoints between them)."""
    order = np.lexsort((iceps, slopes))
    s, b = slopes[order], iceps[order]
    keep = np.append(s[1:] != s[:-1], True)  # equal slopes: the largest intercept (last)
    s, b = s[keep], b[keep]
    hs: list[float] = []
    hb: list[float] = []
    for si, bi in zip(s, b, strict=True):
        while hs:
            # the previous line is never on top if the new one overtakes it before the
            # previous one overtook its own predecessor
            x_new = (hb[-1] - bi) / (si - hs[-1])
            if len(hs) >= 2 and x_new <= (hb[-2] - hb[-1]) / (hs[-1] - hs[-2]):
                hs.pop()
                hb.pop()
            else:
                break
        hs.append(float(si))
        hb.append(float(bi))
    s_out, b_out = np.array(hs), np.array(hb)
    bp = (b_out[:-1] - b_out[1:]) / (s_out[1:] - s_out[:-1])
    return s_out, bp


def region_pwl(prob: EpochProblem, k_obj: float) -> RegionPWL:
    """The staircase of ``k_obj * phi_r(t + b0)`` per region (congestion + overflow hinge)."""
    n_r = prob.b0.size
    stairs = []
    for r in range(n_r):
        s, bp = _envelope(prob.cong_slope[r], prob.cong_icept[r])
        bp = bp - prob.b0[r]  # in t = B - b0
        knee = prob.ucap[r] - prob.b0[r]
        # add the overflow hinge: slope + big right of the knee
        pts = np.concatenate([bp, [knee]])
        pts.sort(kind="stable")
        mids = np.concatenate([[pts[0] - 1.0], (pts[:-1] + pts[1:]) / 2, [pts[-1] + 1.0]])
        idx = np.searchsorted(bp, mids, side="right")
        sl = s[idx] + prob.big * (mids > knee)
        stairs.append((k_obj * sl, pts))
    width = max(len(sl) for sl, _ in stairs)
    slopes = np.empty((n_r, width))
    beta = np.full((n_r, width + 1), np.inf)
    beta[:, 0] = -np.inf
    for r, (sl, pts) in enumerate(stairs):
        slopes[r, : sl.size] = sl
        slopes[r, sl.size :] = sl[-1]
        beta[r, 1 : pts.size + 1] = pts
    return RegionPWL(slopes=slopes, beta=beta)


@njit(cache=True)
def _busy_at(a, w, v, mask, rho, lam):
    """t(lambda) = sum_p w_p max(0, v_p - (a_p + lambda w_p) / rho) over allowed pairs."""
    t = 0.0
    for p in range(a.size):
        if mask[p]:
            xp = v[p] - (a[p] + lam * w[p]) / rho
            if xp > 0.0:
                t += w[p] * xp
    return t


@njit(cache=True)
def _prox_region(a, w, v, mask, rho, s, beta, out):
    """One region's exact prox (see :func:`region_prox`); writes x into ``out``."""
    n_p, n_l = a.size, s.size
    cand = np.empty(n_l + n_p)
    n = 0
    for j in range(n_l):
        cand[n] = s[j]
        n += 1
    for p in range(n_p):  # the kinks of t(lambda) strictly inside [s_0, s_last]
        if mask[p] and w[p] > 0.0:
            k = (rho * v[p] - a[p]) / w[p]
            if s[0] < k < s[n_l - 1]:
                cand[n] = k
                n += 1
    c = np.sort(cand[:n])
    lam = c[n - 1]
    t_prev = 0.0
    for i in range(n):
        t = _busy_at(a, w, v, mask, rho, c[i])
        n_le = 0
        n_lt = 0
        for j in range(n_l):
            if s[j] <= c[i]:
                n_le += 1
            if s[j] < c[i]:
                n_lt += 1
        if t <= beta[n_le] or i == n - 1:  # the first candidate with t <= hi(lambda)
            lo = beta[n_lt]
            if t >= lo or i == 0:
                lam = c[i]
            else:  # t crosses lo on the linear piece (c[i-1], c[i]): t_prev > lo > t
                frac = min(max((t_prev - lo) / (t_prev - t), 0.0), 1.0)
                lam = c[i - 1] + frac * (c[i] - c[i - 1])
            break
        t_prev = t
    for p in range(n_p):
        xp = v[p] - (a[p] + lam * w[p]) / rho
        out[p] = xp if (mask[p] and xp > 0.0) else 0.0


def region_prox(
    a: np.ndarray, w: np.ndarray, v: np.ndarray, mask: np.ndarray, rho: float, pwl: RegionPWL
) -> np.ndarray:
    """Exact ``argmin_x a.x + phi(w.x) + rho/2 ||x - v||^2, x >= 0`` for each region (rows).

    ``a, w, v, mask`` are ``[R, P]``; ``phi`` is the region's convex PWL (``pwl``). For a price
    lambda of the busy slots, ``x(lambda) = max(0, v - (a + lambda w)/rho)`` and
    ``t(lambda) = w.x(lambda)`` is non-increasing and linear between the kinks
    ``(rho v - a)/w``. The optimum is the lambda in [s_0, s_last] with ``t(lambda)`` in the
    subdifferential's inverse ``[lo(lambda), hi(lambda)]``: the first candidate (slopes and
    kinks, sorted) where ``t <= hi``, or, if there ``t < lo``, the exact crossing of
    ``t = lo`` on the linear piece just before it. No iterative inner solver.
    """
    out = np.zeros(np.shape(a))
    for r in range(out.shape[0]):
        _prox_region(
            np.ascontiguousarray(a[r], dtype=float),
            np.ascontiguousarray(w[r], dtype=float),
            np.ascontiguousarray(v[r], dtype=float),
            np.ascontiguousarray(mask[r], dtype=np.bool_),
            float(rho),
            np.ascontiguousarray(pwl.slopes[r], dtype=float),
            np.ascontiguousarray(pwl.beta[r], dtype=float),
            out[r],
        )
    return out


# ---------------------------------------------------------------------------- ADMM
@dataclass
class ADMMResult:
    x: np.ndarray  # [C, O, R] feasible allocation (primal recovery of the regions' proposals)
    objective: float  # of x
    lower_bound: float  # Lagrangian dual bound from ADMM's prices (<= the optimum)
    certified_gap: float  # (objective - lower_bound) / |objective|: >= the true gap
    rounds: int  # tolerance refinements + 1
    iterations: int
    primal_res: float  # ||x - z|| (scaled units)
    dual_res: float  # rho ||z - z_prev||
    eps_pri: float
    eps_dual: float
    converged: bool
    rho: float
    shares: np.ndarray  # [C, O, R] for the next warm start
    price: np.ndarray  # [C, O, R] dual prices per request (unscaled), for the next warm start
    history: np.ndarray | None = None  # [iterations, 3]: primal, dual residual, rho


@njit(cache=True)
def _admm_loop(
    a, w, mask, slopes, beta, d, n_ok, z, u, rho, eps_abs, eps_rel, it0, max_iter,
    adaptive, mu, tau, rho_every, rho_freeze, alpha, hist,
):  # fmt: skip
    """ADMM iterations ``it0 + 1 .. max_iter`` in scaled units (``z`` and ``u`` are updated
    in place; call again to resume). Returns (x, last iteration, converged, rho, ||r||, ||s||,
    eps_pri, eps_dual)."""
    n_r, n_p = a.shape
    x = np.zeros((n_r, n_p))
    v = np.empty(n_p)
    xr = np.empty(n_p)
    n_var = 0
    for r in range(n_r):
        for p in range(n_p):
            if mask[r, p]:
                n_var += 1
    sq = np.sqrt(max(n_var, 1))
    r_norm = s_norm = eps_pri = eps_dual = np.inf
    converged = False
    it = it0
    for it in range(it0 + 1, max_iter + 1):
        # x-update: each region on its own data and the broadcast v_r = z_r - u_r
        for r in range(n_r):
            for p in range(n_p):
                v[p] = z[r, p] - u[r, p]
            _prox_region(a[r], w[r], v, mask[r], rho, slopes[r], beta[r], xr)
            for p in range(n_p):
                x[r, p] = xr[p]
        # z-update (projection on sum_r z_r = d, per pair: add the mean gap) and dual update
        rr = ss = xx = zz = uu = 0.0
        for p in range(n_p):
            q = 0.0
            for r in range(n_r):
                if mask[r, p]:
                    q += alpha * x[r, p] + (1.0 - alpha) * z[r, p] + u[r, p]
            g = (d[p] - q) / n_ok[p]
            for r in range(n_r):
                if mask[r, p]:
                    xh = alpha * x[r, p] + (1.0 - alpha) * z[r, p]  # over-relaxation
                    zn = xh + u[r, p] + g
                    ss += (zn - z[r, p]) ** 2
                    u[r, p] += xh - zn
                    z[r, p] = zn
                    rr += (x[r, p] - zn) ** 2
                    xx += x[r, p] ** 2
                    zz += zn**2
                    uu += u[r, p] ** 2
        # Boyd 3.3: r = x - z, s = rho (z - z_prev); absolute + relative tolerances
        r_norm = np.sqrt(rr)
        s_norm = rho * np.sqrt(ss)
        eps_pri = sq * eps_abs + eps_rel * np.sqrt(max(xx, zz))
        eps_dual = sq * eps_abs + eps_rel * rho * np.sqrt(uu)
        if it <= hist.shape[0]:
            hist[it - 1, 0] = r_norm
            hist[it - 1, 1] = s_norm
            hist[it - 1, 2] = rho
        if r_norm <= eps_pri and s_norm <= eps_dual:
            converged = True
            break
        # Boyd 3.4.1 residual balancing, every rho_every iterations, frozen after rho_freeze
        if it <= rho_freeze:
            adapt = it % rho_every == 0
        else:  # then only at rho_freeze x 2^k: finitely many changes in any run
            k = it // rho_freeze
            adapt = it % rho_freeze == 0 and (k & (k - 1)) == 0
        if adaptive and adapt:
            f = 1.0
            if r_norm > mu * s_norm:
                f = tau
            elif s_norm > mu * r_norm:
                f = 1.0 / tau
            if f != 1.0:
                rho *= f
                for r in range(n_r):
                    for p in range(n_p):
                        u[r, p] /= f
    return x, it, converged, rho, r_norm, s_norm, eps_pri, eps_dual


@njit(cache=True)
def _dual_bound(a, w, mask, slopes, beta, phi0, u, rho, d):
    """A lower bound on the epoch optimum from ADMM's prices (scaled units), -inf if none.

    With ``nu = rho u`` (equal across a pair's regions after every z-update), the Lagrangian
    dual of ``sum_r x_r = d`` is ``sum_r min_{x_r >= 0} [f_r(x_r) + nu . x_r] - nu . d``. A
    region's term is one-dimensional: the cheapest pair per busy slot ``m_r = min_p (a_p +
    nu_p) / w_p`` fills any t, so it is ``min_{t >= 0} m_r t + phi_r(t)``, reached at 0 or at
    a breakpoint. Each region computes its own term: a distributed optimality certificate."""
    n_r, n_p = a.shape
    total = 0.0
    nu = np.zeros(n_p)
    for p in range(n_p):
        for r in range(n_r):
            if mask[r, p]:
                nu[p] = rho * u[r, p]
                break
        # any nu gives a bound; lift it into the dual domain (no region may profit without
        # limit: a_p + nu_p + s_last w_p >= 0), where ADMM's inexact prices may fall short
        for r in range(n_r):
            if mask[r, p]:
                nu[p] = max(nu[p], -a[r, p] - slopes[r, slopes.shape[1] - 1] * w[r, p])
        total -= nu[p] * d[p]
    for r in range(n_r):
        m = np.inf
        for p in range(n_p):
            if mask[r, p]:
                c = a[r, p] + nu[p]
                if w[r, p] > 0.0:
                    m = min(m, c / w[r, p])
                elif c < 0.0:
                    return -np.inf
        s, b = slopes[r], beta[r]
        n_l = s.size
        best = phi0[r]
        if m < np.inf:
            m = max(m, -s[n_l - 1])  # only rounding can leave it below, after the lift
            j = 0  # the slope in force just right of t = 0 is s[j]
            while j + 1 < n_l and b[j + 1] <= 0.0:
                j += 1
            t = 0.0
            val = phi0[r]
            for k in range(j + 1, n_l):
                if not np.isfinite(b[k]):
                    break
                val += (m + s[k - 1]) * (b[k] - t)
                t = b[k]
                best = min(best, val)
        total += best
    return total


def recover_feasible(prob: EpochProblem, x: np.ndarray) -> np.ndarray:
    """A feasible allocation from the regions' proposals ``x`` (>= 0 on allowed pairs).

    ADMM meets the demand rows and the capacity knees only to its tolerance, and the
    overflow penalty is steep: a few requests over a full region's knee cost more than the
    whole residual is worth. So (one round of announcements, no optimisation):
    rows over their demand are scaled down; a region over its capacity scales its column down
    to it; each row's shortfall goes to its allowed regions with spare slots, cheapest first;
    what no spare slot can take goes back where it was cut (else spreads like the row)."""
    ok = prob.ok
    x = np.where(ok, np.maximum(x, 0.0), 0.0)
    tot = x.sum(axis=2)
    x = x * np.where(tot > prob.demand, prob.demand / np.maximum(tot, 1e-300), 1.0)[:, :, None]
    load = busy_slots(prob, x) - prob.b0
    room = np.maximum(prob.ucap - prob.b0, 0.0)
    keep = np.where(load > room, room / np.maximum(load, 1e-300), 1.0)  # [R]
    cut = x * (1.0 - keep)[None, None, :]
    x = x - cut
    short = np.maximum(prob.demand - x.sum(axis=2), 0.0)
    spare = np.maximum(prob.ucap - busy_slots(prob, x), 0.0)
    n_o = ok.shape[1]
    for flat in np.argsort(-short, axis=None, kind="stable"):  # the largest shortfalls first
        c, o = divmod(int(flat), n_o)
        need = short[c, o]
        if need <= 0:
            break
        allowed = np.flatnonzero(ok[c, o])
        for r in allowed[np.argsort(prob.unit[c, o, allowed], kind="stable")]:
            w = prob.w[c, r]
            take = need if w <= 0 else min(need, spare[r] / w)
            if take > 0:
                x[c, o, r] += take
                spare[r] -= take * w
                need -= take
            if need <= 0:
                break
        if need > 0:  # no spare slot left: overflow where it was cut, else like the row
            for row in (cut[c, o], x[c, o], ok[c, o].astype(float)):
                if row.sum() > 0:
                    x[c, o] += need * row / row.sum()
                    break
    return x


def admm_epoch(
    prob: EpochProblem,
    *,
    rho: float = 1.0,
    shares0: np.ndarray | None = None,
    price0: np.ndarray | None = None,
    eps_abs: float = 1e-5,
    eps_rel: float = 1e-4,
    max_iter: int = 5000,
    adaptive_rho: bool = True,
    mu: float = 10.0,
    tau: float = 2.0,
    rho_every: int = 10,
    rho_freeze: int = 500,
    alpha: float = 1.0,
    pair_scale: str = "mean",
    gap_tol: float | None = 1e-3,
    max_refine: int = 4,
    keep_history: bool = False,
) -> ADMMResult:
    """Solve an epoch problem by ADMM (consensus/sharing form, see the module docstring).

    ``shares0`` (``[C, O, R]`` routing shares) and ``price0`` (dual price per request, as
    returned in :class:`ADMMResult`) warm-start ``z`` and ``u``.
    """
    n_c, n_o, n_r = prob.ok.shape
    ok = prob.ok
    # scaled units: y_p = x_p / S_p and objective x cost_scale / S, with S the mean positive
    # demand of a (class, origin), so that per-request costs and y are ~1. S_p = S ("mean"),
    # each pair's own demand ("demand": y are shares) or their geometric mean ("sqrt"); this
    # is ADMM's metric (a diagonal rho), not the problem
    s_x = _count_scale(prob)
    k_sc = prob.cost_scale
    dem = prob.demand.ravel()  # [P], p = c * O + o
    if pair_scale == "demand":
        s_p = np.where(dem > 0, dem, s_x)
    elif pair_scale == "sqrt":
        s_p = np.sqrt(np.where(dem > 0, dem, s_x) * s_x)
    elif pair_scale == "mean":
        s_p = np.full(dem.shape, s_x)
    else:
        raise ConfigError(f"unknown pair_scale {pair_scale!r}; valid choices: demand, mean, sqrt")
    d_flat = dem / s_p
    # region-major layout [R, P]
    mask = np.ascontiguousarray(ok.reshape(n_c * n_o, n_r).T)
    a = (prob.unit * k_sc).reshape(n_c * n_o, n_r).T * (s_p / s_x)[None, :]
    wv = np.repeat(prob.w[:, None, :], n_o, axis=1).reshape(n_c * n_o, n_r).T * s_p[None, :]
    pwl = region_pwl(prob, k_sc / s_x)
    n_ok = np.maximum(mask.sum(axis=0), 1).astype(float)  # allowed regions per pair
    if shares0 is not None:
        sh = np.where(ok, np.maximum(shares0, 0.0), 0.0).reshape(n_c * n_o, n_r).T
        tot = sh.sum(axis=0)
        sh = np.where(tot > 0, sh / np.where(tot > 0, tot, 1.0), mask / n_ok)
    else:
        sh = mask / n_ok
    z = np.ascontiguousarray(sh * d_flat[None, :])
    u = np.zeros_like(z)
    if price0 is not None:
        lam = price0.reshape(n_c * n_o, n_r).T * k_sc * (s_p / s_x)[None, :]
        u = np.ascontiguousarray(np.where(mask, lam / rho, 0.0))
    k_obj = k_sc / s_x  # scaled objective = k_obj x true objective
    phi0 = k_obj * (
        np.max(prob.cong_slope * prob.b0[:, None] + prob.cong_icept, axis=1)
        + prob.big * np.maximum(prob.b0 - prob.ucap, 0.0)
    )
    args = (np.ascontiguousarray(a), np.ascontiguousarray(wv), mask, pwl.slopes, pwl.beta,
            d_flat.astype(float), n_ok, z, u)  # fmt: skip
    hist = np.zeros((max_iter if keep_history else 0, 3))
    it, rounds, cert = 0, 0, np.inf
    e_abs, e_rel = float(eps_abs), float(eps_rel)
    converged = False
    while True:
        x, it, conv, rho, r_norm, s_norm, eps_pri, eps_dual = _admm_loop(
            *args, float(rho), e_abs, e_rel, int(it), int(max_iter), bool(adaptive_rho),
            float(mu), float(tau), int(rho_every), int(rho_freeze), float(alpha), hist,
        )  # fmt: skip
        converged = converged or conv  # Boyd's criteria at the requested tolerances
        rounds += 1
        # primal recovery: the regions' own allocations, made exactly feasible
        xs = np.where(ok, np.maximum((x * s_p[None, :]).T.reshape(n_c, n_o, n_r), 0.0), 0.0)
        x_final = recover_feasible(prob, xs)
        objective = epoch_objective(prob, x_final)
        lower = _dual_bound(*args[:5], phi0, u, float(rho), args[5]) / k_obj
        cert = (objective - lower) / max(abs(objective), 1e-300)
        # refine (tolerances / 10, resuming) until the certificate holds
        if gap_tol is None or cert <= gap_tol or not conv or it >= max_iter:
            break
        if rounds > max_refine:
            break
        e_abs, e_rel = e_abs / 10.0, e_rel / 10.0
    base = x_final / np.maximum(prob.demand[:, :, None], 1e-300)
    empty = prob.demand <= 0  # no demand: keep the proposal's shape (warm start), else even
    tot = xs.sum(axis=2, keepdims=True)
    prop = np.where(
        tot > 0, xs / np.maximum(tot, 1e-300), ok / np.maximum(ok.sum(2, keepdims=True), 1)
    )
    base = np.where(empty[:, :, None], prop, base)
    price = (rho * u * (s_x / s_p)[None, :]).T.reshape(n_c, n_o, n_r) / k_sc
    return ADMMResult(
        x=x_final,
        objective=objective,
        lower_bound=float(lower),
        certified_gap=float(cert),
        rounds=rounds,
        iterations=int(it),
        primal_res=float(r_norm),
        dual_res=float(s_norm),
        eps_pri=float(eps_pri),
        eps_dual=float(eps_dual),
        converged=bool(converged),
        rho=float(rho),
        shares=base,
        price=price,
        history=hist[:it] if keep_history else None,
    )


# ---------------------------------------------------------------------------- the policy
@register_geo_policy(
    "admm",
    "Temperature-aware ADMM (seed 004): per-region subproblems agree on the demand split; "
    "spatial only (no holding).",
    units={
        "rho": "penalty (per normalised request)",
        "max_iter": "iterations",
        "gap_tol": "relative gap",
        "rho_every": "iterations",
        "rho_freeze": "iterations",
        "max_utilisation": "share of usable slots",
        "weights": "objective weights",
    },
    help={
        "check_gap": "also solve the centralised LP each epoch to report ADMM's gap",
        "pair_scale": "scaling of the pair variables: mean | sqrt | demand",
    },
)
class ADMMPolicy(_LPBase):
    """Each epoch, ADMM over the regions on the step-0 cost model (deferrable work is
    dispatched at once: temporal shifting is lp-mpc's). ``check_gap`` also solves the
    centralised LP each epoch to report ADMM's optimality gap (not used for the plan)."""

    name = "admm"

    def __init__(
        self,
        rho: float = 1.0,
        adaptive_rho: bool = True,
        eps_abs: float = 1e-5,
        eps_rel: float = 1e-4,
        max_iter: int = 5000,
        gap_tol: float | None = 1e-3,
        pair_scale: str = "mean",
        warm_start: bool = True,
        check_gap: bool = True,
        mu: float = 10.0,
        tau: float = 2.0,
        rho_every: int = 10,
        rho_freeze: int = 500,
        alpha: float = 1.0,
        max_refine: int = 4,
        weights: dict | None = None,
        max_utilisation: float = DEFAULT_MAX_UTILISATION,
    ) -> None:
        if rho <= 0 or max_iter < 1:
            raise ConfigError(f"admm needs rho > 0 and max_iter >= 1 (got {rho}, {max_iter})")
        admm = {
            "adaptive_rho": adaptive_rho,
            "eps_abs": eps_abs,
            "eps_rel": eps_rel,
            "max_iter": max_iter,
            "gap_tol": gap_tol,
            "pair_scale": pair_scale,
            "mu": mu,
            "tau": tau,
            "rho_every": rho_every,
            "rho_freeze": rho_freeze,
            "alpha": alpha,
            "max_refine": max_refine,
        }
        super().__init__(weights, max_utilisation)
        self.admm_options = admm
        self.rho0 = float(rho)
        self.warm_start = warm_start
        self.check_gap = check_gap
        self._reset_state()

    def _reset_state(self) -> None:
        self.records: list[dict] = []
        self._shares: np.ndarray | None = None
        self._price: np.ndarray | None = None
        self._rho = self.rho0

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        super().reset(cluster, seed)
        self._reset_state()

    def solve(
        self, obs: Observation, model: CostModel | None = None
    ) -> tuple[EpochProblem, ADMMResult, dict]:
        """One epoch: the problem, ADMM's result and its record (the plan is built from it)."""
        if model is None:
            model = build_cost_model(obs, self.weights, self.max_util)
        prob = epoch_problem(obs, model)
        t0 = time.perf_counter()
        warm = self.warm_start and self._shares is not None
        res = admm_epoch(
            prob,
            rho=self._rho if warm else self.rho0,
            shares0=self._shares if warm else None,
            price0=self._price if warm else None,
            **self.admm_options,
        )
        solve_s = time.perf_counter() - t0
        rec = {
            "epoch": int(obs.epoch),
            "iterations": res.iterations,
            "primal_res": res.primal_res,
            "dual_res": res.dual_res,
            "eps_pri": float(res.eps_pri),
            "eps_dual": float(res.eps_dual),
            "converged": res.converged,
            "rounds": res.rounds,
            "rho": res.rho,
            "objective": res.objective,
            "lower_bound": res.lower_bound,
            "certified_gap": res.certified_gap,
            "solve_s": solve_s,
        }
        if self.check_gap:
            _, lp_obj = solve_epoch_lp(prob)
            rec["central_objective"] = lp_obj
            rec["gap"] = (res.objective - lp_obj) / max(abs(lp_obj), 1e-300)
        self.records.append(rec)
        self._shares, self._price, self._rho = res.shares, res.price, res.rho
        return prob, res, rec

    def plan(self, obs: Observation) -> Plan:
        model = build_cost_model(obs, self.weights, self.max_util)
        prob, res, rec = self.solve(obs, model)
        self.solve_times.append(rec["solve_s"])
        n_o = prob.demand.shape[1]
        sol = LPSolution(
            xi=res.x[INTERACTIVE][None],
            xd=res.x[DEFERRABLE][None],
            d=prob.demand[DEFERRABLE][None],
            pool=np.zeros((1, n_o)),
            busy=busy_slots(prob, res.x)[None],
            status=0,
            objective=res.objective,
            solve_s=rec["solve_s"],
            n_vars=int(prob.ok.sum()),
            n_rows=int(prob.demand.size),
        )
        plan = plan_from_solution(obs, model, sol, 0)
        plan.hold = np.zeros(n_o)  # spatial only: everything is dispatched now
        share = res.x.sum(axis=(0, 1))
        tot = share.sum()
        top = [r for r in np.argsort(share)[::-1][:3] if share[r] > 0]
        parts = ", ".join(f"{obs.regions[r]} {100 * share[r] / tot:.0f}%" for r in top)
        plan.rationale = f"ADMM {res.iterations} it: {parts or 'no demand'}"
        return plan

    def summary(self) -> dict:
        if not self.records:
            return {}
        it = np.array([r["iterations"] for r in self.records])
        cert = np.array([r["certified_gap"] for r in self.records])
        out = {
            "epochs": len(self.records),
            "iters_mean": float(it.mean()),
            "iters_max": int(it.max()),
            "converged_share": float(np.mean([r["converged"] for r in self.records])),
            "primal_res_max": float(max(r["primal_res"] for r in self.records)),
            "dual_res_max": float(max(r["dual_res"] for r in self.records)),
            "primal_res_last": float(self.records[-1]["primal_res"]),
            "dual_res_last": float(self.records[-1]["dual_res"]),
            "rho_last": float(self.records[-1]["rho"]),
            "cert_gap_mean": float(np.mean(cert)),
            "cert_gap_max": float(np.max(cert)),
            "admm_ms_mean": 1e3 * float(np.mean([r["solve_s"] for r in self.records])),
        }
        gaps = np.array([r["gap"] for r in self.records if "gap" in r])
        if gaps.size:
            out["gap_mean"] = float(gaps.mean())
            out["gap_max"] = float(gaps.max())
            adm = sum(r["objective"] for r in self.records if "gap" in r)
            cen = sum(r["central_objective"] for r in self.records if "gap" in r)
            out["gap_total"] = (adm - cen) / max(abs(cen), 1e-300)
        return out


__all__ = [
    "ADMMPolicy",
    "ADMMResult",
    "EpochProblem",
    "admm_epoch",
    "centralized_epoch_lp",
    "epoch_objective",
    "epoch_problem",
    "recover_feasible",
    "region_prox",
    "region_pwl",
    "solve_epoch_lp",
]
