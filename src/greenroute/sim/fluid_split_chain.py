"""Compiled slot wait of a server whose arrivals do not depend on its state (round-robin over
``k`` servers, random routing) in the fluid model of iteration servers: a birth-death chain per
server (``split_wait``; rates tabulated once and scaled per noise node, ``chain_tables`` /
``chain_wait``) and round-robin's Erlang-k residual iteration (``erlang_overlap``). Derivations
and measurements: ``docs/fluid_iteration_gap.md``, "Round-robin and random component by
component".

Three parts, each checked against the iteration engine's own (the doc's tables):

* ``P(wait)``: the chain's mass at or above the running cap ``S``, with Hayward's approximation
  (Hayward 1952; Fredericks 1980, BSTJ 59(6)) at the peakedness ``split_peakedness``: the
  arrivals' regularity ``(ca^2 + cs^2) / (1 + cs^2)`` times the prefill stall's spread ``(1 +
  r) (2 + r) / 2``. The cap ``S / z`` is fractional: the chain is solved with the cap at its
  floor and ceiling and interpolated (``chain_wait``), so ``P(wait)`` moves continuously with
  ``z``. Round-robin's arrivals meet full slots less often than the time average does: the
  ratio ``sigma / rho`` of the E_k/M/1 queue at the saturated rate (``arrival_seen_ratio``).
* The wait given waiting: above the cap the queue is a G/G/1 queue served at the saturated rate
  ``1 / w``, each completion one cycle of (the admitted prompt's prefill iteration + decode
  iterations until the next completion, close to exponential): ``(ca^2 + cs^2) / 2 / (1 / w -
  lam)`` (Kingman; ``cs^2`` of the cycle, ``saturated_cycle``).
* The fixed part (residual iteration, Erlang-k overlap) is the kernel's.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from greenroute.sim.fluid_iteration_core import (
    FIXED_POINT_STEPS,
    FIXED_POINT_TOL,
    _at,
    _load_sums,
    bracketed_secant,
)

_SIGMA_STEPS = 500  # at most, for ``arrival_seen_ratio``'s fixed point (a contraction)


@njit(cache=True)
def _completion_rate(k, full, g, lam, lam_tot, types, tau, adv, decode, e_out, s, st):
    """Completion rate (requests/s) of a server with ``k`` running decodes (``k <= s``), per
    ``split_wait``: below the running cap, prompts are admitted as they arrive, so prefill
    iterations take ``sum lam tau`` of the time and decode-only iterations of ``d(k)`` advance
    ``k`` requests: ``(1 - sum lam tau) k / (d(k) E[O - 1 - a])``. With the cap reached
    (``full``), a prompt is admitted only when a request completes, so every completion pays one
    prefill iteration: ``1 / (E[tau] + E[O - 1 - a] d(s) / s)``, the saturated rate ``1 / w``."""
    t_sum, dec_sum, d = _load_sums(k, g, lam, lam_tot, types, tau, adv, decode, e_out, st)
    if full:
        return lam_tot / max(t_sum + dec_sum * d / s, 1e-300)
    return max(1.0 - t_sum, 1e-9) * k / max(d, 1e-300) * lam_tot / max(dec_sum, 1e-300)


@njit(cache=True)
def saturated_cycle(g, lam, lam_tot, types, tau, tau2, adv, decode, e_out, s, st):
    """``(1 / w, cs^2)`` of a server at its running cap ``s`` with prompts queued: each
    completion admits one prompt, so the time between completions is a cycle of that prompt's
    prefill iteration (mean ``E[tau]``, second moment ``E[tau^2]``, over the arrival mix) and
    the decode iterations until the next completion, ``E[O - 1 - a] d(s) / s`` on average and
    close to exponential (a completion ends a decode iteration with a small chance, ``s / E[O]``
    of ~0.1). ``cs^2 = (Var(tau) + D^2) / (E[tau] + D)^2``."""
    t_sum, dec_sum, d = _load_sums(s, g, lam, lam_tot, types, tau, adv, decode, e_out, st)
    t2_sum = 0.0
    for m in range(lam.shape[2]):
        for c in range(lam.shape[1]):
            t2_sum += lam[g, c, m] * _at(tau2[types[g, m], c], s) * st * st
    if not lam_tot > 0:
        return 0.0, 1.0
    e_tau = t_sum / lam_tot
    dec = dec_sum * d / s / lam_tot
    cycle = e_tau + dec
    if not cycle > 0:
        return 0.0, 1.0
    var = max(t2_sum / lam_tot - e_tau * e_tau, 0.0) + dec * dec
    return 1.0 / cycle, var / (cycle * cycle)


@njit(cache=True)
def split_peakedness(k_arr, cs2, stall):
    """Peakedness of the requests at a server that gets every ``k_arr``-th arrival (``k_arr``
    1: Poisson), saturated-cycle ``cs2``, prefill-stall share ``stall`` (of the prompts admitted
    on arrival): ``(ca^2 + cs^2) / (1 + cs^2) (1 + r) (2 + r) / 2`` with ``ca^2 = 1 / k_arr``,
    ``r = stall``.

    Arrivals: near the cap the count moves as a G/G/1 queue's, whose spread goes with ``(ca^2 +
    cs^2) / 2``; relative to Poisson arrivals that is the first factor (engine: the ratio of the
    peakedness round-robin over 2 / 4 servers needs to that random needs, 0.67 / 0.50 at 85 %,
    this 0.66 / 0.50). Stall: each prompt admitted on arrival also holds back ``r`` completions
    (``fluid_iteration_core.stall_share``), so the count jumps ``1 + r`` at an arrival and falls
    by 1 at a completion (``1 + r`` of them per arrival): the jumps' second moment per arrival is
    ``(1 + r)^2 + (1 + r)`` against ``2`` without the stall, the same restoring drift, so the
    count's variance grows by ``(1 + r) (2 + r) / 2`` (engine count spread over the chain's own:
    1.43-1.45 at 75 %, 1.31-1.33 at 85 %; this 1.38 / 1.33)."""
    za = (1.0 / k_arr + cs2) / (1.0 + cs2)
    return za * (1.0 + stall) * (2.0 + stall) / 2.0


@njit(cache=True)
def arrival_seen_ratio(k_arr, lam, mu):
    """``sigma / rho`` of the E_k/M/1 queue (Erlang-``k_arr`` gaps at rate ``lam``, service rate
    ``mu``; GI/M/1: ``sigma = A*(mu (1 - sigma))``, ``A*`` the gap's Laplace transform): the
    chance an arrival finds the server busy over the time-average ``rho = lam / mu``. 1 for
    Poisson arrivals (PASTA). Round-robin's arrivals come a regular gap after the previous one,
    so they meet the queue above the cap less often than its time average (engine, 85 %:
    seen / time-average over random's, 0.95 / 0.89 for 2 / 4 servers; this 0.95 / 0.91)."""
    rho = lam / mu
    if k_arr <= 1 or not 0.0 < rho < 1.0:
        return 1.0
    sig = rho
    a = k_arr * lam
    for _ in range(_SIGMA_STEPS):
        nxt = (a / (a + mu * (1.0 - sig))) ** k_arr
        if abs(nxt - sig) < 1e-13:
            sig = nxt
            break
        sig = nxt
    return sig / rho


@njit(cache=True)
def split_wait(g, lam, lam_tot, types, tau, tau2, adv, decode, e_out, s, st, k_arr, stall):
    """Slot wait of one server that receives its own share of the arrivals whatever the
    state of the others (round-robin over ``k_arr`` servers, random: ``k_arr`` 1):
    ``(P(wait), mean wait of those who wait, z)``, at the peakedness ``split_chain`` solves.

    A birth-death queue over the requests at the server (running + waiting), arrivals
    ``lam_tot``, completions ``_completion_rate`` (state-dependent below the running cap
    ``s``, the saturated rate ``1 / w`` at and above it); the module docstring gives the three
    parts. ``(1, 0)`` when the saturated rate is exceeded (the epoch-level fluid backlog takes
    over)."""
    mu_sat, cs2 = saturated_cycle(g, lam, lam_tot, types, tau, tau2, adv, decode, e_out, s, st)
    tab, z = split_chain(g, lam, lam_tot, types, tau, adv, decode, e_out, s, st, k_arr, stall,
                         mu_sat, cs2)  # fmt: skip
    pw, cond = chain_wait(tab, 1.0, lam_tot, s, z, k_arr)
    return pw, cond, z


@njit(cache=True)
def split_chain(
    g, lam, lam_tot, types, tau, adv, decode, e_out, s, st, k_arr, stall, mu_sat, cs2
):  # fmt: skip
    """``(chain_tables, z)`` at the peakedness that solves ``z = split_peakedness(k_arr, cs^2,
    stall (1 - P(wait at z)))``, the saturated cycle ``(mu_sat, cs2)`` given
    (``saturated_cycle``): only the prompts admitted on arrival stall the running decodes
    (one that meets full slots is admitted when a request completes). ``g(z)``, the right
    side, falls as ``z`` (so ``P(wait)``) grows: one root in ``[g(stall 0), g(stall)]``, found
    by secant steps kept in the shrinking bracket by bisection (as
    ``fluid_route_wait.routed_wait``)."""
    lo = split_peakedness(k_arr, cs2, 0.0)
    hi = split_peakedness(k_arr, cs2, stall)
    z = hi
    tab = chain_tables(g, lam, lam_tot, types, tau, adv, decode, e_out, s, st, z, mu_sat, cs2)
    if not hi > lo:
        return tab, z
    pw, _ = chain_wait(tab, 1.0, lam_tot, s, z, k_arr)
    f = split_peakedness(k_arr, cs2, stall * (1.0 - pw)) - z
    z_prev, f_prev = z, f
    z = z + f  # the plain fixed-point step
    for _ in range(FIXED_POINT_STEPS):
        tab = chain_tables(g, lam, lam_tot, types, tau, adv, decode, e_out, s, st, z, mu_sat,
                           cs2)  # fmt: skip
        pw, _ = chain_wait(tab, 1.0, lam_tot, s, z, k_arr)
        f = split_peakedness(k_arr, cs2, stall * (1.0 - pw)) - z
        if abs(f) <= FIXED_POINT_TOL * z:
            break
        z_next, lo, hi = bracketed_secant(z, f, z_prev, f_prev, lo, hi)
        z_prev, f_prev, z = z, f, z_next
    return tab, z


@njit(cache=True)
def chain_tables(g, lam, lam_tot, types, tau, adv, decode, e_out, s, st, z, mu_sat, cs2):
    """``split_wait``'s rates in a form that scales with the arrival rate: row 0 the prefill
    share ``sum lam tau(j z)``, row 1 ``(j z) / d(j z) lam / sum lam E[O - 1 - a]`` for the
    states below the cap (``mu = (1 - m row0) row1`` at ``m`` times the rates), row 2 the
    saturated cycle ``[1 / w, cs^2]`` (the same at any ``m``, ``saturated_cycle``)."""
    j0 = math.ceil(s / z - 1e-9)  # first state at or above the cap
    tab = np.zeros((3, max(j0, 2)))
    for j in range(1, j0):
        k = j * z
        t_sum, dec_sum, d = _load_sums(k, g, lam, lam_tot, types, tau, adv, decode, e_out, st)
        tab[0, j] = t_sum
        tab[1, j] = k / max(d, 1e-300) * lam_tot / max(dec_sum, 1e-300)
    tab[2, 0] = mu_sat
    tab[2, 1] = cs2
    return tab


@njit(cache=True)
def _tail_share(below, lp_cap, top, r):
    """Share of the chain at or above the cap: ``p_cap`` (``exp(lp_cap - top)``, on the scale of
    ``below``, the sum of the states below it) and the geometric tail ``p_cap r^i`` above it."""
    tail = math.exp(lp_cap - top) / (1.0 - r)
    return tail / (below + tail)


@njit(cache=True)
def chain_wait(tab, mult, lam_tot, s, z, k_arr):
    """``(P(wait), mean wait given waiting)`` of ``split_wait`` at ``mult`` times the rates of
    ``chain_tables`` (module docstring)."""
    lam_m = lam_tot * mult
    mu_sat = tab[2, 0]
    r = lam_m / mu_sat if mu_sat > 0 else 1.0
    if r >= 1.0:
        return 1.0, 0.0
    j0 = math.ceil(s / z - 1e-9)
    # log p_j - log p_0, kept relative to the running maximum
    lp = 0.0
    lp_prev = 0.0
    top = 0.0
    below = 1.0  # sum of p_j / p_0 over j < j0, rescaled as top moves
    for j in range(1, j0):
        mu = max(1.0 - mult * tab[0, j], 1e-9) * tab[1, j]
        lp_prev = lp
        lp += math.log(lam_m / mu)
        if lp > top:
            below *= math.exp(top - lp)
            top = lp
        below += math.exp(lp - top)
    log_r = math.log(r)  # p_cap / p_(cap - 1): the cap is reached
    pw = _tail_share(below, lp + log_r, top, r)  # cap at state j0 (ceil(s / z))
    frac = s / z - (j0 - 1)  # in (0, 1]: 1 when s / z is whole
    if j0 >= 2 and frac < 1.0:  # cap at state j0 - 1 (floor), interpolated
        pw_floor = _tail_share(below - math.exp(lp - top), lp_prev + log_r, top, r)
        pw = (1.0 - frac) * pw_floor + frac * pw
    pw *= arrival_seen_ratio(k_arr, lam_m, mu_sat)
    cs2 = tab[2, 1]
    return pw, 0.5 * (1.0 / k_arr + cs2) / (mu_sat - lam_m)


@njit(cache=True)
def _poisson_sf(k, a):
    """P(Poisson(a) >= k)."""
    term = math.exp(-a)
    cdf = 0.0
    for i in range(k):
        cdf += term
        term *= a / (i + 1)
    return max(1.0 - cdf, 0.0)


@njit(cache=True)
def erlang_overlap(lam, t, k):
    """``E[(t - X)^+]`` with ``X`` ~ Erlang(k, rate k lam), the gap since the previous arrival
    at a server that gets every ``k``-th of a Poisson stream (round-robin over ``k``
    servers, per-server rate ``lam``): the part of that arrival's prefill iteration (length
    ``t``) still to run. ``t P(X < t) - E[X; X < t]`` with ``P(X < t) = P(Pois(k lam t) >= k)``
    and ``E[X; X < t] = P(Pois(k lam t) >= k + 1) / lam``."""
    a = k * lam * t
    return t * _poisson_sf(k, a) - _poisson_sf(k + 1, a) / lam
