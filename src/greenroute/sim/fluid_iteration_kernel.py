"""Compiled (numba) per-epoch correction of the fluid model for iteration servers: the formulas
of ``sim/fluid_iteration.py`` (``predict``) for one hardware group at a time, the slot wait
averaged over the minute rate noise, and the epoch's info figures. ``predict`` in numpy is the
reference (``tests/test_fluid_iteration_calibration.py`` checks that both agree).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from greenroute.sim.fluid_route_wait import (
    min_slope,
    queued_prompt_share,
    remaining_work_cv,
    routed_wait,
)
from greenroute.sim.queueing_kernel import erlang_c

BISECTION_ITERS = 30
# Odoni & Roth (1983), "An empirical investigation of the transient behavior of stationary
# queueing systems", Oper. Res. 31(3): relaxation time ~ (ca^2 + cs^2) E[S] /
# (2.8 (1 - sqrt(rho))^2); a queue of S servers as one S times faster (E[S] / S)
ODONI_ROTH = 2.8


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


@njit(cache=True)
def iteration_epoch(
    e, dt, n_gcm, served, e_sat, w_sat, g_servers, g_slots, g_dyn_w, g_region, types,
    tau, tau2, adv, decode, e_out, e_out2, ahead, run_cap, n_int, gh, par, g_split, e_min,
    it_dyn_kwh, busy_slot_s, pw, cond, pre,
):  # fmt: skip
    """One epoch's correction (``fluid_iteration.correct_epoch``), in place: ``it_dyn_kwh[:, e]``
    (energy at the running batch instead of saturation cost), ``busy_slot_s[:, e]`` (running
    request-seconds ``servers x N x dt`` instead of saturation slot-seconds, so utilisation is the
    occupancy of the running cap as in the engine), ``pw``/``cond`` (slot wait) and
    ``pre`` (residual + own prefill iteration) per group. ``par``: noise sigma, noise period, the
    utilisation at which the noise nodes and the minute backlog are held (``fluid.RHO_MAX_STABLE``;
    above it the epoch-level fluid backlog takes over).

    ``run_cap[g]``: the running cap, ``k`` usable slots of ``S = g_slots[g]`` under a power cap
    (else ``S``). As the engine throttles a capped server (``iteration_mode.throttled``),
    its prefill iterations are stretched by ``S / k`` at ``k / S`` of their dynamic power (the
    same prefill energy); decode-only iterations keep their time and per-slot power.
    ``e_sat``/``w_sat`` are the slot-seconds and server-seconds per request at that cap; a busy
    slot's dynamic power stays ``g_dyn_w`` = (peak - idle) / ``S``."""
    n_g, n_c, n_m = n_gcm.shape
    sigma, period, rho_max = par[0], par[1], par[2]
    z, wq = gh[0], gh[1]
    lam = np.zeros((n_g, n_c, n_m))
    h_tab = np.full(g_split[:, 2].max() + 1 if n_g else 1, -1.0)  # min_slope by server count
    for g in range(n_g):
        srv = max(g_servers[g], 1.0)
        s = max(run_cap[g], 1.0)
        s_nom = max(g_slots[g], 1.0)
        st = s_nom / s  # prefill stretch under a power cap (1 uncapped)
        work = 0.0
        n_req = 0.0
        w_mix = 0.0
        for c in range(n_c):
            for m in range(n_m):
                work += n_gcm[g, c, m] * e_sat[g, c, m]
                n_req += n_gcm[g, c, m]
                w_mix += n_gcm[g, c, m] * w_sat[g, c, m]
        # the kernel charged ``served`` slot-seconds at g_dyn_w each: e_sat / s_nom seconds at
        # peak per request (= w_sat when uncapped)
        charged_mix = work / s_nom
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
        n = running(g, lam, lam_tot, types, tau, adv, decode, e_out, s, st)
        busy_slot_s[g_region[g], e] += srv * n * dt - served[g]
        d = 0.0
        e_mix = 0.0
        tau2_sum = 0.0
        tau_sum = 0.0
        dec_sum = 0.0
        tau_i = 0.0
        n_i = 0.0
        ahead_rate = 0.0  # s of extra prefill per s of age: sum_c lam_c x ahead[t, c]
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
                e_mix += n_gcm[g, c, m] * (tc + dec * d / s_nom)  # prefill energy unstretched
                tau2_sum += lam[g, c, m] * _at(tau2[t, c], n) * st * st
                tau_sum += lam[g, c, m] * tc * st
                ahead_rate += lam[g, c, m] * ahead[t, c] * st
                dec_sum += lam[g, c, m] * dec
                if c == 0:
                    tau_i += n_gcm[g, c, m] * tc * st
                    n_i += n_gcm[g, c, m]
        ratio = e_mix / charged_mix if charged_mix > 0 else 1.0
        it_dyn_kwh[g_region[g], e] += served[g] * g_dyn_w[g] / 3.6e6 * (ratio - 1.0)
        r_d = dec_sum / max(n, 1e-9)
        k_split = g_split[g, 0]
        route = g_split[g, 1]  # state-aware router (``fluid_route_wait``), 0 none
        n_srv = g_split[g, 2]
        h_n = 0.0
        if route > 0:
            if h_tab[n_srv] < 0:  # h_N once per server count met
                h_tab[n_srv] = min_slope(n_srv)
            h_n = h_tab[n_srv]
        if k_split >= 2 and tau_sum > 0:
            # round-robin over k servers: the previous arrival here came an Erlang-k gap ago,
            # not an exponential one, so its prefill iteration is less often still running.
            # That iteration (length-biased mean E[tau^2] / E[tau]) started a delay D after its
            # arrival (D = the start delay the Poisson model gives: residual + prompts ahead),
            # so the part left at this arrival is (D + t - X)^+ - (D - X)^+; the prefill part
            # of the residual is scaled by that overlap's ratio, Erlang-k over Poisson (k = 1)
            t_eff = tau2_sum / tau_sum
            d0 = 0.5 * (tau2_sum + r_d * d * d) * (1.0 + ahead_rate)
            base = erlang_overlap(lam_tot, d0 + t_eff, 1) - erlang_overlap(lam_tot, d0, 1)
            if base > 0:
                k_ov = erlang_overlap(lam_tot, d0 + t_eff, k_split)
                tau2_sum *= (k_ov - erlang_overlap(lam_tot, d0, k_split)) / base
        resid = 0.5 * (tau2_sum + r_d * d * d)  # = the mean age of the running iteration
        # prompts that arrived since the running iteration started are ahead in FCFS: each
        # lengthens the arriving prompt's iteration, or takes one of its own when both
        # prompts overflow the token budget (``IterationProfile.ahead``)
        pre[g] = resid * (1.0 + ahead_rate) + (tau_i / n_i if n_i > 0 else 0.0)
        # slot wait: M/G/S per server, service = residence N / lam, averaged over the noise
        e_o = 0.0
        e_o2 = 0.0
        e_mn = 0.0  # E[min(O1, O2)] of two requests of the group's mix
        e_o3 = 0.0  # E[O^3]: the remaining work's spread (``fluid_route_wait``)
        e_p = 0.0  # E[P], prompt tokens
        e_p2 = 0.0
        for c in range(n_c):
            k = 0.0
            for m in range(n_m):
                k += n_gcm[g, c, m]
            e_o += k * e_out[c] / n_req
            e_o2 += k * e_out2[c] / n_req
            e_mn += k * e_min[c, 0] / n_req
            e_o3 += k * e_min[c, 1] / n_req
            e_p += k * e_min[c, 2] / n_req
            e_p2 += k * e_min[c, 3] / n_req
        scv = max(e_o2 / (e_o * e_o) - 1.0, 0.0) if e_o > 0 else 1.0
        cv = remaining_work_cv(e_o, e_o2, e_o3)  # of the least-loaded router's score
        share_q = 1.0
        if route > 0:
            # a state-aware router seldom sends an arrival to a server whose score carries a
            # queued prompt: only that share of the prompts-ahead term is met
            share_q = queued_prompt_share(route, n_srv, n, e_p, e_p2, e_o, e_o2, cv, tau_sum)
            pre[g] -= resid * ahead_rate * (1.0 - share_q)
        # split arrivals (round-robin over k servers: Erlang-k gaps, ca^2 = 1 / k; random:
        # Poisson): peakedness of the running requests (G/GI/inf, Whitt 1982 / Eick, Massey &
        # Whitt 1993: z = 1 + (ca^2 - 1) mu int Gbar^2 = 1 + (ca^2 - 1) E[min(O1, O2)] / E[O],
        # residences taken proportional to the output length)
        z_split = 1.0
        if k_split >= 1:
            z_split = 1.0 + (1.0 / k_split - 1.0) * (e_mn / e_o if e_o > 0 else 0.0)
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
        # the epoch's counts already carry the mean of its k = dt / period minute multipliers:
        # within the epoch the minutes deviate from that mean with log-variance sig^2 (1 - 1/k)
        # (the variance of k iid draws about their own mean)
        k_min = dt / period if period > 0 else 1.0
        if k_min > 1.0:
            sig *= math.sqrt(1.0 - 1.0 / k_min)
        # stationary slot wait at the epoch's mean rate: split arrivals (round-robin, random)
        # a birth-death queue per server (``split_wait``); least-loaded and least-connections
        # M/G/S per server (service = residence N / lam, the output length's SCV) at the
        # peakedness their balancing leaves (``fluid_route_wait``); Python policies the same
        # M/G/S at peakedness 1 (Allen-Cunneen)
        if k_split >= 1:
            pw[g], cond[g] = split_wait(g, lam, lam_tot, types, tau, adv, decode, e_out, s, st,
                                        z_split)  # fmt: skip
        elif route > 0:
            # least-loaded / least-connections: M/G/S at the peakedness the router leaves
            stall = stall_share(g, n, lam, types, tau, adv, decode, st)
            pw[g], cond[g], _ = routed_wait(route, n_srv, h_n, s, n, lam_tot, scv, cv, stall)
        else:
            pw[g] = erlang_c(s, n)
            denom = s * lam_tot / max(n, 1e-12) - lam_tot
            cond[g] = (1.0 / denom if denom > 0 else 0.0) * (1.0 + scv) / 2.0
        if not sig > 0 or not u > 0:
            continue
        # minute rate noise (lognormal multiplier, Gauss-Hermite nodes weighted by arrivals).
        # Within a minute the queue is near its stationary state at that minute's rate (the
        # slot wait's relaxation time, a few residences, is well below the minute): the wait
        # is the arrival-weighted mean over the nodes of the M/G/S wait at the node's rate
        # (running decodes N re-solved per node; rates held at RHO_MAX_STABLE, above which
        # the overload terms below take over), as the slots model does (``noise_wait``)
        u_st = min(u, rho_max)  # above it the epoch-level fluid backlog takes over
        base = lam[g].copy()
        tab = np.zeros((3, 1))
        if k_split >= 1:  # the chain's rates at the mean rate, scaled per node below
            tab = chain_tables(g, lam, lam_tot, types, tau, adv, decode, e_out, s, st, z_split)
        p_sum = 0.0
        pw_sum = 0.0
        pwc_sum = 0.0
        pre_sum = 0.0  # the fixed part, arrival-weighted over the nodes as the wait
        for k in range(z.size):
            mult = math.exp(sig * z[k] - 0.5 * sig * sig)
            p = wq[k] * mult
            p_sum += p
            m_eff = min(mult, rho_max / u)
            for c in range(n_c):
                for m in range(n_m):
                    lam[g, c, m] = base[c, m] * m_eff
            lam_k = lam_tot * m_eff
            n_k = running(g, lam, lam_k, types, tau, adv, decode, e_out, s, st)
            if k_split <= 1:
                # the residual iteration and the prompts ahead grow with the rate: an arrival
                # meets them at its minute's rate (round-robin keeps the mean rate's, with
                # its Erlang-k residual)
                r_k, a_k, own_k, _ = _fixed_parts(g, n_k, lam, lam_k, types, tau, tau2, adv,
                                                  decode, e_out, ahead, st)  # fmt: skip
                pre_sum += p * (r_k * (1.0 + a_k * share_q) + own_k)  # share at the mean rate
            z_k = 1.0
            if k_split >= 1:
                pw_k, cond_k = chain_wait(tab, m_eff, lam_tot, s, z_split)
            elif route > 0:
                stall = stall_share(g, n_k, lam, types, tau, adv, decode, st)
                pw_k, cond_k, z_k = routed_wait(route, n_srv, h_n, s, n_k, lam_k, scv, cv, stall)
            else:
                pw_k = erlang_c(s, n_k)
                den_k = s * lam_k / max(n_k, 1e-12) - lam_k
                cond_k = (1.0 / den_k if den_k > 0 else 0.0) * (1.0 + scv) / 2.0
            # weight: the share of the minute the queue spends relaxed to the node's wait,
            # 1 - tau/T (1 - exp(-T/tau)) (time-average of 1 - exp(-t/tau) over the minute);
            # at peakedness z (Hayward: S / z servers of the same service time) tau is z times
            # longer
            rho_k = n_k / s
            res_k = n_k / lam_k if lam_k > 0 else 0.0
            gap_k = 1.0 - math.sqrt(min(rho_k, 0.999999))
            tau_k = z_k * (1.0 + scv) * res_k / s / (ODONI_ROTH * gap_k * gap_k)
            relax = 1.0 - tau_k / period * (1.0 - math.exp(-period / tau_k)) if tau_k > 0 else 1.0
            pw_sum += p * relax * pw_k
            pwc_sum += p * relax * pw_k * cond_k
        lam[g] = base
        if k_split <= 1:
            pre[g] = pre_sum / p_sum
        # the share of a minute not yet relaxed to the node's wait is the slow part of the
        # queue, which the minute-to-minute backlog below (with the queue's own variance) holds:
        # arrival-weighted over all the nodes, not renormalised over the relaxed share
        pw[g] = pw_sum / p_sum
        cond[g] = (pwc_sum / p_sum) / pw[g] if pw[g] > 0 else 0.0
        # the fluid backlog carried from minute to minute: Lindley's recursion W' = (W + X)^+
        # over noise periods, X = (u m - 1) period with m the lognormal multiplier (Spitzer's
        # identity, ``lindley_lognormal_mean``). Its value at the minute boundaries is also its
        # mean over the minute: W(t) = (W0 + (u m - 1) t)^+ is linear or clipped within a
        # minute and W at the minute's end has W0's stationary law (trapezoid), so no separate
        # within-minute build-up of an overloaded minute is added (it is the part of W0 that
        # the next minute starts with: counting it too counted an overloaded minute twice)
        # Over a minute the queue in front of full slots also moves by the arrivals' own count:
        # Poisson, variance lam period ca^2 requests (ca^2 = 1; 1 / k for round-robin over k
        # servers), each request worth w / N seconds of wait where N servers share one queue (a
        # state-aware router pools the region's servers; split arrivals and Python policies
        # queue per server). The completions' randomness (the cs^2 of a heavy-traffic G/G/s
        # diffusion) is left out: measured, not derived (the backlog replayed on the engine's
        # own minute counts leaves the rest of TTFT the model's fixed part and slot wait; with
        # cs^2 it leaves less than the fixed part plus the no-noise slot wait). The noise's
        # part of the backlog is the Lindley mean with both terms less the one without noise,
        # which the stationary slot wait already holds.
        w_req = w_mix / n_req
        ca2 = 1.0 / k_split if k_split >= 1 else 1.0
        pool = float(n_srv) if route > 0 else 1.0
        var_q = u_st * period * w_req * ca2 / pool
        if k_min > 1.0:  # the epoch's count fixes the sum of its minutes' arrivals (as sig)
            var_q *= 1.0 - 1.0 / k_min
        extra = lindley_lognormal_mean(u_st, sig, period, var_q, z, wq)
        extra -= lindley_gaussian_mean((u_st - 1.0) * period, math.sqrt(var_q))
        extra = max(extra, 0.0)
        if extra > 0:  # everyone waits the extra: P(wait) = 1, mean = the total
            cond[g] = pw[g] * cond[g] + extra
            pw[g] = 1.0


@njit(cache=True)
def _fixed_parts(g, n, lam, lam_tot, types, tau, tau2, adv, decode, e_out, ahead, st):
    """The pieces of ``pre`` at ``n`` running decodes and rates ``lam`` (as
    ``iteration_epoch``'s mean-rate ``pre``, without round-robin's Erlang-k residual):
    ``(resid, ahead_rate, own, busy_pf)``: the mean age of the running iteration ``0.5 (sum lam
    E[tau^2] + r_d d^2)``, the prompts-ahead rate ``sum lam ahead``, the interactive prompt's
    own iteration ``E[tau]`` and the prefill busy share ``sum lam tau``."""
    n_c, n_m = lam.shape[1], lam.shape[2]
    d = 0.0
    for m in range(n_m):
        wm = 0.0
        for c in range(n_c):
            wm += lam[g, c, m]
        d += wm / lam_tot * _at(decode[types[g, m]], n)
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
    return 0.5 * (tau2_sum + r_d * d * d), ahead_rate, own, tau_sum


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


LINDLEY_TERMS = 4000  # as sim.queueing.lindley_gaussian_mean
_SQRT2 = math.sqrt(2.0)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


@njit(cache=True)
def lindley_lognormal_mean(u, sig, period, var_q, z, wq):
    """Stationary mean of Lindley's W' = max(0, W + X) over noise periods, X = (u m - 1)
    ``period`` + G, ``m`` a mean-one lognormal of log-sd ``sig`` (the minute rate multiplier,
    ``data.workload``), G ~ N(0, ``var_q``) independent (the queue's own randomness), by
    Spitzer's identity E[W] = sum_n E[S_n^+] / n, S_n = period (u Y_n - n) + G_n. Y_n, the sum
    of ``n`` multipliers, is taken lognormal with its exact mean ``n`` and variance ``n (e^sig^2
    - 1)`` (Fenton 1960, "The sum of log-normal probability distributions in scatter
    transmission systems", IRE Trans. Commun. Syst. 8(1): it keeps the right skew that a
    Gaussian X drops, and the backlog is made of that tail): log-variance ``s_n^2 = ln(1 +
    (e^sig^2 - 1) / n)``, and given G_n = g, as Black-Scholes' call on a lognormal,
    E[(u Y_n - K)^+] = u (n Phi(d1) - K Phi(d2)), K = n - g / period, d1 = (ln(n / K) + s_n^2
    / 2) / s_n, d2 = d1 - s_n; G_n ~ N(0, n var_q) by the Gauss-Hermite nodes ``z``/``wq``.
    0 when ``sig`` or ``u`` is 0; inf at ``u >= 1``."""
    if not sig > 0 or not u > 0:
        return 0.0
    if u >= 1.0:
        return math.inf
    ex = math.expm1(sig * sig)
    total = 0.0
    for i in range(1, LINDLEY_TERMS + 1):
        s_n = math.sqrt(math.log1p(ex / i))
        sd_g = math.sqrt(i * var_q) / period
        term = 0.0
        top = -math.inf  # d2 at the largest node: the term's tail
        for j in range(z.size):
            k = i - sd_g * z[j]  # strike, in minutes of work
            if k <= 0.0:
                term += wq[j] * (u * i - k)
                top = math.inf  # a node still past its strike: keep summing
                continue
            d1 = (math.log(u * i / k) + 0.5 * s_n * s_n) / s_n
            d2 = d1 - s_n
            top = max(top, d2)
            term += wq[j] * (
                u * i * 0.5 * math.erfc(-d1 / _SQRT2) - k * 0.5 * math.erfc(-d2 / _SQRT2)
            )
        total += term / i
        if top < -12.0:
            break
    return total * period


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
