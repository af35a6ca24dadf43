"""Compiled slot wait of a server whose arrivals do not depend on its state (round-robin over
``k`` servers, random routing) in the fluid model of iteration servers: a birth-death chain per
server (``split_wait``; rates tabulated once and scaled per noise node, ``chain_tables`` /
``chain_wait``) and round-robin's Erlang-k residual iteration (``erlang_overlap``). Derivations
and measurements: ``docs/fluid_iteration_gap.md``, "The local policy's wait".
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from greenroute.sim.fluid_iteration_core import _load_sums


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
def split_wait(g, lam, lam_tot, types, tau, adv, decode, e_out, s, st, z):
    """Slot wait of one server that receives its own share of the arrivals whatever the
    state of the others (round-robin, random): ``(P(wait), mean wait of those who wait)``.

    A birth-death queue over the requests at the server (running + waiting), arrivals
    ``lam_tot``, completions ``_completion_rate`` (state-dependent below the running cap
    ``s``, the saturated rate ``1 / w`` at and above it); exponential residences, since the
    cap is reached for a short time compared to a residence and the completions of ``s``
    requests of spread ages are then close to Poisson (Palm-Khintchine). Arrival variability
    enters by Hayward's approximation (Hayward 1952; Fredericks 1980, "Congestion in
    blocking systems - a simple approximation technique", BSTJ 59(6)): traffic of peakedness
    ``z`` at ``k`` servers acts as Poisson traffic in units of ``z`` requests, so the chain
    runs over ``j`` with ``k = j z`` requests (birth ``lam / z``, death ``mu(j z) / z``, their
    ratio unchanged) and ``z (j - s / z)^+`` requests wait. Above the cap the rates are
    constant: the tail is geometric, summed in closed form. ``(1, 0)`` when the saturated
    rate is exceeded (the epoch-level fluid backlog takes over)."""
    tab = chain_tables(g, lam, lam_tot, types, tau, adv, decode, e_out, s, st, z)
    return chain_wait(tab, 1.0, lam_tot, s, z)


@njit(cache=True)
def chain_tables(g, lam, lam_tot, types, tau, adv, decode, e_out, s, st, z):
    """``split_wait``'s rates in a form that scales with the arrival rate: row 0 the prefill
    share ``sum lam tau(j z)``, row 1 ``(j z) / d(j z) lam / sum lam E[O - 1 - a]`` for the
    states below the cap (``mu = (1 - m row0) row1`` at ``m`` times the rates), row 2 ``[0]``
    the saturated rate (the same at any ``m``)."""
    j0 = math.ceil(s / z - 1e-9)  # first state at or above the cap
    tab = np.zeros((3, max(j0, 1)))
    for j in range(1, j0 + 1):
        k = min(j * z, s)
        t_sum, dec_sum, d = _load_sums(k, g, lam, lam_tot, types, tau, adv, decode, e_out, st)
        if j < j0:
            tab[0, j] = t_sum
            tab[1, j] = k / max(d, 1e-300) * lam_tot / max(dec_sum, 1e-300)
        else:
            tab[2, 0] = lam_tot / max(t_sum + dec_sum * d / s, 1e-300)
    return tab


@njit(cache=True)
def chain_wait(tab, mult, lam_tot, s, z):
    """``split_wait`` at ``mult`` times the rates of ``chain_tables``."""
    lam_m = lam_tot * mult
    r = lam_m / tab[2, 0]
    if r >= 1.0:
        return 1.0, 0.0
    j0 = math.ceil(s / z - 1e-9)
    # log p_j - log p_0, kept relative to the running maximum
    lp = 0.0
    top = 0.0
    below = 1.0  # sum of p_j / p_0 over j < j0, rescaled as top moves
    for j in range(1, j0):
        mu = max(1.0 - mult * tab[0, j], 1e-9) * tab[1, j]
        lp += math.log(lam_m / mu)
        if lp > top:
            below *= math.exp(top - lp)
            top = lp
        below += math.exp(lp - top)
    lp += math.log(r)  # p_j0 / p_(j0 - 1): the cap is reached
    p0 = math.exp(lp - top)  # p_j0, same scale as ``below``
    tail = p0 / (1.0 - r)
    waiting = p0 * ((j0 * z - s) / (1.0 - r) + z * r / ((1.0 - r) * (1.0 - r)))
    norm = below + tail
    p_wait = tail / norm
    mean_wait = waiting / norm / lam_m
    return p_wait, (mean_wait / p_wait if p_wait > 0 else 0.0)


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
