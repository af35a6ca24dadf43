"""Time shifting inside ADMM (seed 004): the regions' subproblems span a receding horizon of
H + 1 epochs and deferrable work is held and released within its deadline, as in ``lp-mpc``.

**The horizon problem** is lp-mpc's linear program (:func:`.lp.solve_horizon_lp`), built from
the same pieces: per step h the epoch problem of :mod:`.epoch_problem` (unit costs of step h,
the pairs allowed at step h, the backlog at step 0 only, the congestion PWL and the overflow
hinge), the interactive demand per (step, origin), and for deferrable work per origin the
pool of lp-mpc: with ``C_h`` the requests dispatched by the end of step h, ``P_h = pending +
cum A_h - C_h`` must stay in ``[0, pending + cum A_h - due_h]`` (:func:`.lp._due`: held work
and new arrivals whose deadline falls due), i.e. ``lo_h <= C_h <= hi_h`` with ``lo = min(due,
avail)`` and ``hi = avail``; what is left in the pool at the end costs lp-mpc's terminal price
(:func:`.lp._terminal_cost`), or must be zero when the run ends inside the horizon.

**ADMM** (consensus form, as :mod:`.admm`): each region owns its allocation at every step,
``x_{h,r}``; its cost is separable over steps, so its proximal step is the exact region prox
of :func:`.admm_solver._prox_region` once per step. The copy ``z`` is projected on the
coupling set: interactive rows per (step, origin) exactly as in the spatial ADMM (add the
mean gap), and for each deferrable origin the projection on the cumulative bounds, which
reduces to ``min sum_h (s_h - V_h)^2 s.t. lo <= cumsum(s) <= hi`` for the step totals ``s``
(all regions of a pair share the correction ``(s_h - V_h) / n``), the terminal price
entering as a shift of ``V``. That is a taut string: with ``Y = cumsum(s) - cumsum(V)`` it
minimises the sum of squared increments of a path through a tube, solved exactly by
:func:`taut_string` (the free end is made fixed by mirroring the tube). No inner iterations.

Recovery: the regions' step totals of deferrable work are projected on the cumulative bounds
(same taut string), then each step is made feasible by :func:`.admm_solver.recover_feasible`.
The plan executes step 0 (:func:`.lp.plan_from_solution`, as lp-mpc).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from greenroute.core.types import Observation
from greenroute.policies.optimize.admm_solver import (
    _prox_region,
    balance_rho,
    recover_feasible,
    region_pwl,
)
from greenroute.policies.optimize.epoch_problem import (
    EpochProblem,
    busy_slots,
    epoch_objective,
    epoch_problem,
)
from greenroute.policies.optimize.lp import LPSolution, _due, _terminal_cost
from greenroute.policies.optimize.model import DEFERRABLE, INTERACTIVE, CostModel

TERMINALS: tuple[str, ...] = ("cost", "zero-pool")


@dataclass
class HorizonProblem:
    """lp-mpc's horizon program in the epoch-problem form (request counts, unscaled units)."""

    steps: list[EpochProblem]  # per step: costs, allowed pairs, congestion, capacity
    d_int: np.ndarray  # [H1, O] interactive requests per step
    arrivals: np.ndarray  # [H1, O] deferrable arrivals per step
    pending: np.ndarray  # [O] deferrable requests held at the start
    lo: np.ndarray  # [H1, O] deferrable requests that must be dispatched by the end of step h
    hi: np.ndarray  # [H1, O] ... that can be (held + arrived)
    term: np.ndarray  # [O] cost per request still pooled after the last step
    cost_scale: float

    @property
    def n_steps(self) -> int:
        return len(self.steps)


def horizon_problem(
    obs: Observation,
    model: CostModel,
    slack_s: tuple[float, float],
    *,
    terminal: str = "cost",
    steps: int | None = None,
) -> HorizonProblem:
    """The horizon problem lp-mpc solves at this observation (same ``terminal``/``steps``)."""
    h1 = model.horizon + 1 if steps is None else max(1, min(model.horizon + 1, int(steps)))
    dt = float(obs.epoch_s)
    dem = np.maximum(obs.demand_rps[:h1], 0.0) * dt  # [H1, C, O]
    arr = dem[:, DEFERRABLE, :]
    pending = np.maximum(np.asarray(obs.pending_deferrable, dtype=float), 0.0)
    avail = pending[None, :] + np.cumsum(arr, axis=0)
    lo = np.minimum(_due(obs, arr, slack_s, h1), avail)
    if terminal == "zero-pool":
        lo[-1] = avail[-1]
    term = _terminal_cost(model) if terminal == "cost" else np.zeros(arr.shape[1])
    probs = []
    for h in range(h1):
        d = np.zeros(dem.shape[1:])
        d[INTERACTIVE] = dem[h, INTERACTIVE]
        probs.append(epoch_problem(obs, model, h, demand=d))
    return HorizonProblem(steps=probs, d_int=dem[:, INTERACTIVE, :].copy(), arrivals=arr,
                          pending=pending, lo=lo, hi=avail, term=np.asarray(term, dtype=float),
                          cost_scale=probs[0].cost_scale)  # fmt: skip


# ---------------------------------------------------------------------------- taut string
@njit(cache=True)
def _taut_fixed(a, b, y):
    """Shortest path through the tube ``a[k] <= y[k] <= b[k]``, k = 0..M, with ``a[0] = b[0]``
    and ``a[M] = b[M]`` (fixed ends): the funnel rule, bending at the point of the tightest
    upper (lower) slope from the current anchor when the lower (upper) side crosses it."""
    m = a.size - 1
    i0 = 0
    y0 = a[0]
    y[0] = y0
    while i0 < m:
        lo_s, hi_s = -np.inf, np.inf
        lo_k = hi_k = i0 + 1
        nxt, y_n = m, a[m]
        for j in range(i0 + 1, m + 1):
            d = j - i0
            sl_lo = (a[j] - y0) / d
            sl_hi = (b[j] - y0) / d
            if sl_lo > hi_s:  # the lower side passes the upper funnel: bend down at hi_k
                nxt, y_n = hi_k, b[hi_k]
                break
            if sl_hi < lo_s:  # the upper side passes the lower funnel: bend up at lo_k
                nxt, y_n = lo_k, a[lo_k]
                break
            if sl_lo >= lo_s:
                lo_s, lo_k = sl_lo, j
            if sl_hi <= hi_s:
                hi_s, hi_k = sl_hi, j
        for k in range(i0 + 1, nxt + 1):
            y[k] = y0 + (y_n - y0) * (k - i0) / (nxt - i0)
        i0, y0 = nxt, y_n


@njit(cache=True)
def _taut(v, lo, hi, out):
    """``out = argmin sum_h (s_h - v_h)^2 s.t. lo_h <= cumsum(s)_h <= hi_h`` (exact)."""
    n = v.size
    t = np.empty(n)
    acc = 0.0
    for h in range(n):
        acc += v[h]
        t[h] = acc
    m = 2 * n + 1  # the free end made fixed: the tube mirrored about the last step
    a = np.zeros(m + 1)
    b = np.zeros(m + 1)
    for k in range(1, n + 1):
        a[k] = lo[k - 1] - t[k - 1]
        b[k] = hi[k - 1] - t[k - 1]
        a[m - k] = a[k]
        b[m - k] = b[k]
    y = np.empty(m + 1)
    _taut_fixed(a, b, y)
    prev = 0.0
    for h in range(n):
        c = y[h + 1] + t[h]
        out[h] = c - prev
        prev = c


def taut_string(v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Closest step totals ``s`` to ``v`` whose running sums stay within ``[lo, hi]``."""
    out = np.empty(len(v))
    _taut(np.asarray(v, dtype=float), np.asarray(lo, dtype=float), np.asarray(hi, dtype=float),
          out)  # fmt: skip
    return out


# ---------------------------------------------------------------------------- ADMM loop
@njit(cache=True)
def _horizon_loop(
    a, w, mask, mask_s, slopes, beta, d_int, lo, hi, g, n_ok, z, u, rho, eps_abs, eps_rel,
    max_iter, adaptive, mu, tau, rho_every, rho_freeze, n_r, n_o,
):  # fmt: skip
    """ADMM iterations in scaled units; rows q = h * n_r + r, columns p = c * n_o + o."""
    n_q, n_p = a.shape
    h1 = n_q // n_r
    x = np.zeros((n_q, n_p))
    v = np.empty(n_p)
    xr = np.empty(n_p)
    tot = np.empty(h1)
    s = np.empty(h1)
    n_var = 0
    for q in range(n_q):
        for p in range(n_p):
            if mask[q, p]:
                n_var += 1
    sq = np.sqrt(max(n_var, 1))
    r_norm = s_norm = eps_pri = eps_dual = np.inf
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        for q in range(n_q):
            for p in range(n_p):
                v[p] = z[q, p] - u[q, p]
            _prox_region(a[q], w[q], v, mask[q], rho, slopes[q], beta[q], xr)
            for p in range(n_p):
                x[q, p] = xr[p]
        rr = ss = xx = zz = uu = 0.0
        for p in range(n_p):
            if n_ok[p] == 0:
                continue
            o = p % n_o
            for h in range(h1):
                acc = 0.0
                for r in range(n_r):
                    if mask_s[r, p]:
                        acc += x[h * n_r + r, p] + u[h * n_r + r, p]
                tot[h] = acc
            if p < n_o:  # interactive: each step's row sums to its demand
                for h in range(h1):
                    s[h] = d_int[h, o]
            else:  # deferrable: step totals projected on the cumulative deadline bounds
                for h in range(h1):
                    tot[h] += n_ok[p] * g[o] / rho  # the terminal price as a shift
                _taut(tot, lo[:, o], hi[:, o], s)
                for h in range(h1):
                    tot[h] -= n_ok[p] * g[o] / rho
            for h in range(h1):
                gap = (s[h] - tot[h]) / n_ok[p]
                for r in range(n_r):
                    if mask_s[r, p]:
                        q = h * n_r + r
                        zn = x[q, p] + u[q, p] + gap
                        ss += (zn - z[q, p]) ** 2
                        u[q, p] += x[q, p] - zn
                        z[q, p] = zn
                        rr += (x[q, p] - zn) ** 2
                        xx += x[q, p] ** 2
                        zz += zn**2
                        uu += u[q, p] ** 2
        r_norm = np.sqrt(rr)
        s_norm = rho * np.sqrt(ss)
        eps_pri = sq * eps_abs + eps_rel * np.sqrt(max(xx, zz))
        eps_dual = sq * eps_abs + eps_rel * rho * np.sqrt(uu)
        if r_norm <= eps_pri and s_norm <= eps_dual:
            converged = True
            break
        if adaptive:
            rho = balance_rho(it, r_norm, s_norm, rho, u, mu, tau, rho_every, rho_freeze)
    return x, it, converged, rho, r_norm, s_norm, eps_pri, eps_dual


@dataclass
class HorizonResult:
    x: np.ndarray  # [H1, C, O, R] feasible allocation
    dispatch: np.ndarray  # [H1, O] deferrable requests dispatched per step
    pool: np.ndarray  # [H1, O] held after each step
    objective: float
    iterations: int
    converged: bool
    primal_res: float
    dual_res: float
    eps_pri: float
    eps_dual: float
    rho: float
    x_raw: np.ndarray  # [H1, C, O, R] the regions' own proposals (warm start)
    price: np.ndarray  # [H1, C, O, R] dual prices per request (warm start)


def horizon_objective(hp: HorizonProblem, x: np.ndarray) -> float:
    """lp-mpc's objective of an allocation: every step's epoch objective + the terminal cost."""
    left = hp.pending + hp.arrivals.sum(axis=0) - x[:, DEFERRABLE].sum(axis=(0, 2))
    steps = sum(epoch_objective(p, x[h]) for h, p in enumerate(hp.steps))
    return float(steps + (hp.term * np.maximum(left, 0.0)).sum())


def recover_horizon(hp: HorizonProblem, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A feasible allocation from proposals ``x``: deferrable step totals projected on the
    deadline bounds (taut string), then each step by :func:`recover_feasible`."""
    x = np.maximum(x, 0.0)
    tot = x[:, DEFERRABLE].sum(axis=2)  # [H1, O]
    disp = np.zeros_like(tot)
    for o in range(tot.shape[1]):
        disp[:, o] = np.maximum(taut_string(tot[:, o], hp.lo[:, o], hp.hi[:, o]), 0.0)
    out = np.zeros_like(x)
    for h, p in enumerate(hp.steps):
        demand = p.demand.copy()
        demand[DEFERRABLE] = disp[h]
        out[h] = recover_feasible(replace(p, demand=demand), np.where(p.ok, x[h], 0.0))
    return out, disp


def admm_horizon(
    hp: HorizonProblem,
    *,
    rho: float = 1.0,
    x0: np.ndarray | None = None,
    price0: np.ndarray | None = None,
    eps_abs: float = 1e-5,
    eps_rel: float = 1e-4,
    max_iter: int = 5000,
    adaptive_rho: bool = True,
    mu: float = 10.0,
    tau: float = 2.0,
    rho_every: int = 10,
    rho_freeze: int = 500,
) -> HorizonResult:
    """Solve a horizon problem by ADMM; ``x0``/``price0`` (``[H1, C, O, R]``) warm-start it."""
    h1 = hp.n_steps
    n_c, n_o, n_r = hp.steps[0].ok.shape
    n_p = n_c * n_o
    pos = np.concatenate([hp.d_int.ravel(), (hp.arrivals + 0.0).ravel(), hp.pending])
    s_x = float(pos[pos > 0].mean()) if (pos > 0).any() else 1.0  # requests -> ~1
    k_sc = hp.cost_scale
    k_obj = k_sc / s_x

    def rows(arr4):  # [H1, C, O, R] -> [H1 * R, C * O]
        return np.ascontiguousarray(arr4.reshape(h1, n_p, n_r).transpose(0, 2, 1).reshape(-1, n_p))

    ok = np.stack([p.ok for p in hp.steps])
    mask = rows(ok)
    a = rows(np.stack([p.unit for p in hp.steps]) * k_sc)
    w = rows(np.stack([np.broadcast_to(p.w[:, None, :], p.ok.shape) for p in hp.steps]) * s_x)
    pwls = [region_pwl(p, k_obj) for p in hp.steps]
    width = max(pw.slopes.shape[1] for pw in pwls)
    slopes = np.empty((h1 * n_r, width))
    beta = np.full((h1 * n_r, width + 1), np.inf)
    for h, pw in enumerate(pwls):
        k = pw.slopes.shape[1]
        slopes[h * n_r : (h + 1) * n_r, :k] = pw.slopes
        slopes[h * n_r : (h + 1) * n_r, k:] = pw.slopes[:, -1:]
        beta[h * n_r : (h + 1) * n_r, : k + 1] = pw.beta
    any_ok = ok.any(axis=0)  # [C, O, R] allowed at some step: the copy z's support
    mask_s = np.ascontiguousarray(any_ok.reshape(n_p, n_r).T)  # [R, P]
    n_ok = mask_s.sum(axis=0).astype(float)
    support = rows(np.broadcast_to(any_ok, ok.shape))
    if x0 is not None:
        z = rows(np.maximum(x0, 0.0)) / s_x
    else:  # even split of each step's interactive demand and of the work falling due
        start = np.zeros((h1, n_c, n_o, n_r))
        start[:, INTERACTIVE] = hp.d_int[:, :, None]
        start[:, DEFERRABLE] = np.diff(hp.lo, axis=0, prepend=0.0)[:, :, None]
        z = rows(start * any_ok / np.maximum(any_ok.sum(axis=2, keepdims=True), 1)) / s_x
    u = np.zeros_like(z) if price0 is None else rows(price0) * k_sc / rho
    z, u = np.where(support, z, 0.0), np.where(support, u, 0.0)
    x, it, conv, rho, r_norm, s_norm, eps_pri, eps_dual = _horizon_loop(
        a, w, mask, mask_s, slopes, beta, hp.d_int / s_x, hp.lo / s_x, hp.hi / s_x,
        k_sc * hp.term, n_ok, np.ascontiguousarray(z), np.ascontiguousarray(u), float(rho),
        float(eps_abs), float(eps_rel), int(max_iter), bool(adaptive_rho), float(mu), float(tau),
        int(rho_every), int(rho_freeze), n_r, n_o,
    )  # fmt: skip

    def back(arr2):  # [H1 * R, C * O] -> [H1, C, O, R]
        return arr2.reshape(h1, n_r, n_p).transpose(0, 2, 1).reshape(h1, n_c, n_o, n_r)

    xs = np.where(ok, np.maximum(back(x) * s_x, 0.0), 0.0)
    feas, disp = recover_horizon(hp, xs)
    pool = hp.hi - np.cumsum(disp, axis=0)
    return HorizonResult(
        x=feas, dispatch=disp, pool=pool, objective=horizon_objective(hp, feas),
        iterations=int(it), converged=bool(conv), primal_res=float(r_norm),
        dual_res=float(s_norm), eps_pri=float(eps_pri), eps_dual=float(eps_dual),
        rho=float(rho), x_raw=xs, price=back(u) * rho / k_sc,
    )  # fmt: skip


def horizon_solution(hp: HorizonProblem, res: HorizonResult, solve_s: float) -> LPSolution:
    """The result in lp-mpc's solution form (for :func:`.lp.plan_from_solution`)."""
    busy = np.stack([busy_slots(p, res.x[h]) for h, p in enumerate(hp.steps)])
    return LPSolution(
        xi=res.x[:, INTERACTIVE], xd=res.x[:, DEFERRABLE], d=res.dispatch, pool=res.pool,
        busy=busy, status=0, objective=res.objective, solve_s=solve_s,
        n_vars=int(sum(p.ok.sum() for p in hp.steps)), n_rows=int(hp.d_int.size + hp.lo.size),
    )  # fmt: skip


def shift_warm(arr: np.ndarray | None, h1: int) -> np.ndarray | None:
    """Last epoch's ``[H1, ...]`` plan moved one step on (the last step repeated), resized."""
    if arr is None:
        return None
    out = arr[1:] if arr.shape[0] > 1 else arr
    if out.shape[0] >= h1:
        return out[:h1].copy()
    return np.concatenate([out, np.repeat(out[-1:], h1 - out.shape[0], axis=0)])
