"""Compiled (numba) per-epoch correction of the fluid model for iteration servers: the formulas
of ``sim/fluid_iteration.py`` (``predict``) for one hardware group at a time, the slot wait
averaged over the minute rate noise, and the epoch's info figures. ``predict`` in numpy is the
reference (``tests/test_fluid_iteration_calibration.py`` checks that both agree).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from greenroute.sim.queueing_kernel import erlang_c

BISECTION_ITERS = 30


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
def _excess(n, g, lam, lam_tot, types, tau, adv, decode, e_out):
    """Busy time per second the load needs at ``n`` running decodes minus the busy share."""
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
            need += lv * _at(tau[t, c], n)
            dec += lv * max(max(e_out[c] - 1.0, 0.0) - _at(adv[t, c], n), 0.0)
        d += (wm / lam_tot if lam_tot > 0 else 0.0) * _at(decode[t], n)
    return need + dec * d / max(n, 1e-9) - (1.0 - math.exp(-n))


@njit(cache=True)
def running(g, lam, lam_tot, types, tau, adv, decode, e_out, slots):
    """Running decodes ``N`` of group ``g`` (bisection on ``(1e-6, slots)``, as ``predict``;
    exactly ``slots`` when the load needs all of them)."""
    if not lam_tot > 0:
        return 0.0
    if _excess(slots, g, lam, lam_tot, types, tau, adv, decode, e_out) >= 0:
        return slots  # saturated: the running cap
    lo = 1e-6
    hi = slots
    for _ in range(BISECTION_ITERS):
        mid = 0.5 * (lo + hi)
        if _excess(mid, g, lam, lam_tot, types, tau, adv, decode, e_out) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@njit(cache=True)
def iteration_epoch(
    e, dt, n_gcm, served, e_sat, w_sat, g_servers, g_slots, g_dyn_w, g_region, types,
    tau, tau2, adv, decode, e_out, e_out2, n_int, gh, par, it_dyn_kwh, pw, cond, pre,
):  # fmt: skip
    """One epoch's correction (``fluid_iteration.correct_epoch``), in place: ``it_dyn_kwh[:, e]``
    (energy at the running batch instead of saturation cost), ``pw``/``cond`` (slot wait) and
    ``pre`` (residual + own prefill iteration) per group. ``par``: noise sigma, noise period, the
    utilisation above which a minute counts as overloaded (``fluid.RHO_MAX_STABLE``)."""
    n_g, n_c, n_m = n_gcm.shape
    sigma, period, rho_max = par[0], par[1], par[2]
    z, wq = gh[0], gh[1]
    lam = np.zeros((n_g, n_c, n_m))
    for g in range(n_g):
        srv = max(g_servers[g], 1.0)
        s = max(g_slots[g], 1.0)
        work = 0.0
        n_req = 0.0
        w_mix = 0.0
        for c in range(n_c):
            for m in range(n_m):
                work += n_gcm[g, c, m] * e_sat[g, c, m]
                n_req += n_gcm[g, c, m]
                w_mix += n_gcm[g, c, m] * w_sat[g, c, m]
        share = min(served[g] / work, 1.0) if work > 0 else 0.0
        lam_tot = 0.0
        for c in range(n_c):
            for m in range(n_m):
                lam[g, c, m] = n_gcm[g, c, m] / dt / srv * share
                lam_tot += lam[g, c, m]
        pre[g] = 0.0
        if not lam_tot > 0:
            pw[g] = 0.0
            cond[g] = 0.0
            continue
        n = running(g, lam, lam_tot, types, tau, adv, decode, e_out, s)
        d = 0.0
        e_mix = 0.0
        tau2_sum = 0.0
        dec_sum = 0.0
        tau_i = 0.0
        n_i = 0.0
        for m in range(n_m):
            t = types[g, m]
            wm = 0.0
            for c in range(n_c):
                wm += lam[g, c, m]
            d += wm / lam_tot * _at(decode[t], n)
        for m in range(n_m):
            t = types[g, m]
            for c in range(n_c):
                tc = _at(tau[t, c], n)
                dec = max(max(e_out[c] - 1.0, 0.0) - _at(adv[t, c], n), 0.0)
                e_mix += n_gcm[g, c, m] * (tc + dec * d / s)
                tau2_sum += lam[g, c, m] * _at(tau2[t, c], n)
                dec_sum += lam[g, c, m] * dec
                if c == 0:
                    tau_i += n_gcm[g, c, m] * tc
                    n_i += n_gcm[g, c, m]
        ratio = e_mix / w_mix if w_mix > 0 else 1.0
        it_dyn_kwh[g_region[g], e] += served[g] * g_dyn_w[g] / 3.6e6 * (ratio - 1.0)
        r_d = dec_sum / max(n, 1e-9)
        pre[g] = 0.5 * (tau2_sum + r_d * d * d) + (tau_i / n_i if n_i > 0 else 0.0)
        # slot wait: M/G/S per server, service = residence N / lam, averaged over the noise
        e_o = 0.0
        e_o2 = 0.0
        for c in range(n_c):
            k = 0.0
            for m in range(n_m):
                k += n_gcm[g, c, m]
            e_o += k * e_out[c] / n_req
            e_o2 += k * e_out2[c] / n_req
        scv = max(e_o2 / (e_o * e_o) - 1.0, 0.0) if e_o > 0 else 1.0
        u = lam_tot * w_mix / n_req
        # the noise's effective sigma for this group (origins mixed)
        tot = 0.0
        sq = 0.0
        for o in range(n_int.shape[1]):
            v = 0.0
            for m in range(n_m):
                v += n_int[g, o, m]
            tot += v
            sq += v * v
        sig = sigma * math.sqrt(sq) / tot if tot > 0 else 0.0
        # stationary slot wait at the epoch's mean rate: M/G/S per server
        pw[g] = erlang_c(s, n)
        denom = s * lam_tot / max(n, 1e-12) - lam_tot
        cond[g] = (1.0 / denom if denom > 0 else 0.0) * (1.0 + scv) / 2.0
        if not sig > 0 or not u > 0:
            continue
        # minute rate noise (lognormal multiplier, Gauss-Hermite nodes weighted by arrivals):
        # the backlog carried from minute to minute (Lindley's recursion over noise periods,
        # Spitzer's identity) plus, in an overloaded minute, the linear build-up within it
        u_st = min(u, rho_max)  # above it the epoch-level fluid backlog takes over
        backlog = lindley_gaussian_mean((u_st - 1.0) * period, u_st * sig * period)
        p_sum = 0.0
        build = 0.0
        for k in range(z.size):
            mult = math.exp(sig * z[k] - 0.5 * sig * sig)
            p = wq[k] * mult
            p_sum += p
            if u * mult > 1.0:
                build += p * (u * mult - 1.0) * period / 2.0
        extra = backlog + build / p_sum
        if extra > 0:  # everyone waits the extra: P(wait) = 1, mean = the total
            cond[g] = pw[g] * cond[g] + extra
            pw[g] = 1.0


LINDLEY_TERMS = 4000  # as sim.queueing.lindley_gaussian_mean
_SQRT_2PI = math.sqrt(2.0 * math.pi)


@njit(cache=True)
def lindley_gaussian_mean(mu, sd):
    """``sim.queueing.lindley_gaussian_mean`` for one (mu, sd): stationary mean of
    W' = max(0, W + X), X ~ N(mu, sd^2), by Spitzer's identity; 0 when negligible."""
    if not sd > 0:
        return 0.0
    if mu >= 0:
        return math.inf
    if mu / sd < -10.0:  # E[S_1^+] < 1e-23 sd: the sum is negligible
        return 0.0
    total = 0.0
    for i in range(1, LINDLEY_TERMS + 1):
        m = i * mu
        sn = math.sqrt(i) * sd
        zz = m / sn
        total += (
            sn * math.exp(-0.5 * zz * zz) / _SQRT_2PI + m * 0.5 * math.erfc(-zz / math.sqrt(2.0))
        ) / i
        if zz < -12.0:
            break
    return total


@njit(cache=True)
def epoch_info(e, it_dyn_kwh, idle_kwh, factors, info, types, pre, e_pf_it):
    """Energy, carbon, water and cost of epoch ``e`` into ``info[0:4]`` (as ``fluid_step``),
    and ``e_pf_it[t, m]`` = ``pre`` of the group of type ``t`` (for ``slo_misses``)."""
    it_total = 0.0
    carbon = 0.0
    water = 0.0
    cost = 0.0
    for r in range(it_dyn_kwh.shape[0]):
        it_kwh = it_dyn_kwh[r, e] + idle_kwh[r]
        it_total += it_kwh
        carbon += it_kwh * factors[0, e, r]
        water += it_kwh * factors[1, e, r]
        cost += it_kwh * factors[2, e, r]
    info[0] = it_total
    info[1] = carbon / 1e3
    info[2] = water / 1e3
    info[3] = cost
    for g in range(types.shape[0]):
        for m in range(types.shape[1]):
            e_pf_it[types[g, m], m] = pre[g]
