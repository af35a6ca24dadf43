"""Compiled (numba) building blocks of the fluid model of iteration servers
(``sim/fluid_iteration.py``): the profile tables read at a running count, the running-decode
fixed point ``running``, the fixed part of TTFT (``_fixed_parts``: residual iteration, prompts
ahead, own prefill iteration) and the prefill-stall share. Used by the per-epoch correction
(``fluid_iteration_kernel``) and the split-arrival chain (``fluid_split_chain``).
"""

from __future__ import annotations

import math

from numba import njit

BISECTION_ITERS = 30
FIXED_POINT_STEPS = 60  # at most, for a peakedness fixed point (``bracketed_secant``)
FIXED_POINT_TOL = 1e-10  # |g(z) - z| / z at which a peakedness fixed point stops


@njit(cache=True)
def _at(row, n):
    """``row[n]`` at fractional ``n``, clipped to the row (``fluid_iteration.interp_n``)."""
    k = row.size - 1
    if n < 0.0:
        n = 0.0
    if n > k:
        n = float(k)
    lo = math.floor(n)
    hi = min(lo + 1, k)
    w = n - lo
    return row[lo] * (1 - w) + row[hi] * w


@njit(cache=True)
def _load_sums(n, g, lam, lam_tot, types, tau, adv, decode, e_out, st):
    """Group ``g``'s load at ``n`` running decodes: ``(sum lam tau(n) st`` (the busy share of
    its prefill iterations, stretched by ``st``: a power cap, ``iteration_mode.throttled``),
    ``sum lam E[O - 1 - a(n)]`` (decode steps per second), ``d(n)`` (the arrival-weighted
    decode step))."""
    n_c, n_m = lam.shape[1], lam.shape[2]
    d = 0.0
    need = 0.0
    dec = 0.0
    for m in range(n_m):
        t = types[g, m]
        wm = 0.0
        for c in range(n_c):
            lv = lam[g, c, m]
            wm += lv
            need += lv * _at(tau[t, c], n) * st
            dec += lv * max(max(e_out[c] - 1.0, 0.0) - _at(adv[t, c], n), 0.0)
        d += (wm / lam_tot if lam_tot > 0 else 0.0) * _at(decode[t], n)
    return need, dec, d


@njit(cache=True)
def _excess(n, g, lam, lam_tot, types, tau, adv, decode, e_out, st):
    """Busy time per second the load needs at ``n`` running decodes minus the busy share."""
    need, dec, d = _load_sums(n, g, lam, lam_tot, types, tau, adv, decode, e_out, st)
    return need + dec * d / max(n, 1e-9) - (1.0 - math.exp(-n))


@njit(cache=True)
def running(g, lam, lam_tot, types, tau, adv, decode, e_out, slots, st=1.0):
    """Running decodes ``N`` of group ``g`` (bisection on ``(1e-6, slots)``, as ``predict``;
    exactly ``slots`` when the load needs all of them)."""
    if not lam_tot > 0:
        return 0.0
    if _excess(slots, g, lam, lam_tot, types, tau, adv, decode, e_out, st) >= 0:
        return slots  # saturated: the running cap
    lo = 1e-6
    hi = slots
    for _ in range(BISECTION_ITERS):
        mid = 0.5 * (lo + hi)
        if _excess(mid, g, lam, lam_tot, types, tau, adv, decode, e_out, st) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@njit(cache=True)
def mixed_decode(g, n, lam, lam_tot, types, decode):
    """Group ``g``'s decode step at ``n`` running decodes, weighted by the arrivals of its perf
    types (``lam[g, c, m]``, ``lam_tot`` their sum)."""
    n_c, n_m = lam.shape[1], lam.shape[2]
    d = 0.0
    for m in range(n_m):
        wm = 0.0
        for c in range(n_c):
            wm += lam[g, c, m]
        d += wm / lam_tot * _at(decode[types[g, m]], n)
    return d


@njit(cache=True)
def _fixed_parts(g, n, lam, lam_tot, types, tau, tau2, adv, decode, e_out, ahead, st):
    """The pieces of ``pre`` at ``n`` running decodes and rates ``lam`` (as
    ``iteration_epoch``'s mean-rate ``pre``, without round-robin's Erlang-k residual):
    ``(resid, ahead_rate, own, busy_pf, tau2_sum, d)``: the mean age of the running iteration
    ``0.5 (sum lam E[tau^2] + r_d d^2)``, the prompts-ahead rate ``sum lam ahead``, the
    interactive prompt's own iteration ``E[tau]``, the prefill busy share ``sum lam tau``, its
    ``sum lam E[tau^2]`` and the decode step ``d``."""
    n_c, n_m = lam.shape[1], lam.shape[2]
    d = mixed_decode(g, n, lam, lam_tot, types, decode)
    tau2_sum = 0.0
    tau_sum = 0.0
    dec_sum = 0.0
    ahead_rate = 0.0
    own = 0.0
    lam_i = 0.0
    for m in range(n_m):
        t = types[g, m]
        for c in range(n_c):
            lv = lam[g, c, m]
            tc = _at(tau[t, c], n) * st
            tau2_sum += lv * _at(tau2[t, c], n) * st * st
            tau_sum += lv * tc
            ahead_rate += lv * ahead[t, c] * st
            dec_sum += lv * max(max(e_out[c] - 1.0, 0.0) - _at(adv[t, c], n), 0.0)
            if c == 0:
                own += lv * tc
                lam_i += lv
    r_d = dec_sum / max(n, 1e-9)
    own = own / lam_i if lam_i > 0 else 0.0
    return 0.5 * (tau2_sum + r_d * d * d), ahead_rate, own, tau_sum, tau2_sum, d


@njit(cache=True)
def stall_share(g, n, lam, types, tau, adv, decode, st):
    """Group ``g``'s prefill-stall share at ``n`` running decodes, ``sum_c lam_c (tau_c(n) st -
    a_c(n) d(n) / n)``: the time each admitted prompt's iteration holds every running decode
    back (``a`` of ``n`` decodes carried in it), per second (``fluid_route_wait``)."""
    n_c, n_m = lam.shape[1], lam.shape[2]
    out = 0.0
    for m in range(n_m):
        t = types[g, m]
        d = _at(decode[t], n)
        for c in range(n_c):
            out += lam[g, c, m] * (_at(tau[t, c], n) * st - _at(adv[t, c], n) * d / max(n, 1e-9))
    return max(out, 0.0)


@njit(cache=True)
def bracketed_secant(z, f, z_prev, f_prev, lo, hi):
    """One step towards the root of a decreasing ``F(z) = g(z) - z`` in ``[lo, hi]``: the
    bracket shrinks to the side of ``z`` where the root lies (``f = F(z)``), then the secant
    through ``(z_prev, f_prev)`` and ``(z, f)`` is taken if it falls inside the bracket, else the
    bracket's midpoint. Returns ``(z_next, lo, hi)``. The peakedness fixed points of
    ``fluid_route_wait.routed_wait`` and ``fluid_split_chain.split_chain`` iterate it."""
    if f > 0:
        lo = z
    else:
        hi = z
    step = z - f * (z - z_prev) / (f - f_prev) if f != f_prev else 0.5 * (lo + hi)
    return (step if lo < step < hi else 0.5 * (lo + hi)), lo, hi
