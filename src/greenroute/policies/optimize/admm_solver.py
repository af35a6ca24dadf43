"""ADMM for the epoch problem (seed 004; Boyd et al. 2011): the compiled region proximal step,
the consensus loop with residual balancing, the dual bound and feasibility recovery. The
formulation is in :mod:`greenroute.policies.optimize.admm`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from greenroute.core.errors import ConfigError
from greenroute.policies.optimize.epoch_problem import (
    EpochProblem,
    _count_scale,
    busy_slots,
    epoch_objective,
)


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
        if adaptive:
            rho = balance_rho(it, r_norm, s_norm, rho, u, mu, tau, rho_every, rho_freeze)
    return x, it, converged, rho, r_norm, s_norm, eps_pri, eps_dual


@njit(cache=True)
def balance_rho(it, r_norm, s_norm, rho, u, mu, tau, rho_every, rho_freeze):
    """Boyd et al. 2011 §3.4.1 residual balancing: every ``rho_every`` iterations, then only at
    ``rho_freeze x 2^k`` (finitely many changes in any run), ``rho`` is scaled by ``tau`` (or
    ``1 / tau``) when one residual exceeds ``mu`` times the other, and the scaled dual ``u``
    (2-D, in place) by the inverse. Returns the new ``rho``."""
    if it <= rho_freeze:
        adapt = it % rho_every == 0
    else:
        k = it // rho_freeze
        adapt = it % rho_freeze == 0 and (k & (k - 1)) == 0
    if not adapt:
        return rho
    f = 1.0
    if r_norm > mu * s_norm:
        f = tau
    elif s_norm > mu * r_norm:
        f = 1.0 / tau
    if f != 1.0:
        rho *= f
        for q in range(u.shape[0]):
            for p in range(u.shape[1]):
                u[q, p] /= f
    return rho


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
