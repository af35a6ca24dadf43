"""Compiled (numba) per-epoch correction of the fluid model for iteration servers: the formulas
of ``sim/fluid_iteration.py`` (``predict``) for one hardware group at a time, the slot wait
averaged over the minute rate noise, and the epoch's info figures. ``predict`` in numpy is the
reference (``tests/test_fluid_iteration_calibration.py`` checks that both agree). Building
blocks: ``fluid_iteration_core`` (running decodes, fixed part), ``fluid_split_chain``
(round-robin / random slot wait), ``fluid_route_wait`` (least-loaded / least-connections),
``fluid_noise_backlog`` (the minute-to-minute backlog).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from greenroute.sim.fluid_iteration_core import (
    _at,
    _fixed_parts,
    mixed_decode,
    running,
    stall_share,
)
from greenroute.sim.fluid_noise_backlog import lookback_lindley, wait_with_backlog
from greenroute.sim.fluid_path_noise import (
    L_AMP,
    L_COND,
    L_LAM,
    L_NOCC,
    L_ON,
    L_PREFILL,
    L_PT,
    L_PW,
    L_R0,
    L_R1,
    L_SERVER,
    L_SHARE0,
    L_TAU0,
    L_WFULL,
)
from greenroute.sim.fluid_route_wait import (
    ROUTE_LEAST_CONNECTIONS,
    first_completion_wait,
    prefill_share,
    queued_prompt_share,
    remaining_work_cv,
    route_peakedness,
    routed_wait,
    slot_occupancy,
)
from greenroute.sim.fluid_split_chain import (
    chain_wait,
    erlang_overlap,
    saturated_cycle,
    split_chain,
)
from greenroute.sim.queueing_kernel import erlang_c

# Odoni & Roth (1983), "An empirical investigation of the transient behavior of stationary
# queueing systems", Oper. Res. 31(3): relaxation time ~ (ca^2 + cs^2) E[S] /
# (2.8 (1 - sqrt(rho))^2); a queue of S servers as one S times faster (E[S] / S)
ODONI_ROTH = 2.8


@njit(cache=True)
def iteration_epoch(
    e, dt, n_gcm, served, e_sat, w_sat, g_servers, g_slots, g_dyn_w, g_region, types,
    tau, tau2, adv, decode, e_out, e_out2, ahead, run_cap, n_int, gh, par, g_split, c_mom,
    g_path, it_dyn_kwh, busy_slot_s, pw, cond, pre, hist, law,
):  # fmt: skip
    """One epoch's correction (``fluid_iteration.correct_epoch``), in place: ``it_dyn_kwh[:, e]``
    (energy at the running batch instead of saturation cost), ``busy_slot_s[:, e]`` (running
    request-seconds ``servers x N x dt`` instead of saturation slot-seconds, so utilisation is the
    occupancy of the running cap as in the engine), ``pw``/``cond`` (slot wait) and
    ``pre`` (residual + own prefill iteration) per group. ``par``: noise sigma, noise period, the
    utilisation at which the noise nodes and the minute backlog are held (``fluid.RHO_MAX_STABLE``;
    above it the epoch-level fluid backlog takes over). ``hist[g, j]``: the utilisation and the
    queue's own per-minute variance of group ``g`` ``j`` epochs back, moved one back here and
    filled for this epoch (the minute backlog looks back over them; ``fluid.noise_hist``).
    ``g_path[g]`` 1: the group's minute noise is the pathwise model's (``fluid_path_noise``):
    its inputs go to ``law[g]`` (``law[g, L_ON]`` 1 where it applies this epoch) and the slot
    wait is left at the mean rate's, for ``fluid_path_noise.path_epoch`` to add the noise.

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
    for g in range(n_g):
        law[g, L_ON] = 0.0
        for j in range(hist.shape[1] - 1, 0, -1):  # the history moves one epoch back
            hist[g, j, 0] = hist[g, j - 1, 0]
            hist[g, j, 1] = hist[g, j - 1, 1]
        hist[g, 0, 0] = 0.0
        hist[g, 0, 1] = 0.0
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
        e_o3 = 0.0  # E[O^3]: the remaining work's spread (``fluid_route_wait``)
        e_p = 0.0  # E[P], prompt tokens
        e_p2 = 0.0
        for c in range(n_c):
            k = 0.0
            for m in range(n_m):
                k += n_gcm[g, c, m]
            e_o += k * e_out[c] / n_req
            e_o2 += k * e_out2[c] / n_req
            e_o3 += k * c_mom[c, 0] / n_req
            e_p += k * c_mom[c, 1] / n_req
            e_p2 += k * c_mom[c, 2] / n_req
        scv = max(e_o2 / (e_o * e_o) - 1.0, 0.0) if e_o > 0 else 1.0
        cv = remaining_work_cv(e_o, e_o2, e_o3)  # of the least-loaded router's score
        share_q = 1.0
        if route > 0:
            # a state-aware router seldom sends an arrival to a server whose score carries a
            # queued prompt: only that share of the prompts-ahead term is met
            share_q = queued_prompt_share(route, n_srv, n, e_p, e_p2, e_o, e_o2, cv, tau_sum)
            pre[g] -= resid * ahead_rate * (1.0 - share_q)
        # least-loaded also seldom sends an arrival to the server in the prefill iteration of
        # the request it got last (that request's output is in its score): that share of the
        # arrivals meets a decode iteration's residual d / 2 instead (``prefill_share``)
        share_pf = prefill_share(route, n_srv, n, e_p, e_p2, e_o, e_o2, cv, tau_sum)
        pre[g] += (
            (1.0 - share_pf)
            * _avoided_residual(tau_sum, tau2_sum, d)
            * (1.0 + ahead_rate * share_q)
        )
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
        sig_minute = sig  # a minute's own log-sd (the minute backlog conditions on the epoch)
        # the epoch's counts already carry the mean of its k = dt / period minute multipliers:
        # within the epoch the minutes deviate from that mean with log-variance sig^2 (1 - 1/k)
        # (the variance of k iid draws about their own mean)
        k_min = dt / period if period > 0 else 1.0
        if k_min > 1.0:
            sig *= math.sqrt(1.0 - 1.0 / k_min)
        # stationary slot wait at the epoch's mean rate: split arrivals (round-robin, random)
        # a birth-death queue per server (``split_wait``); least-loaded and least-connections
        # Erlang C at the slot occupancy and the peakedness their balancing leaves, with their
        # own wait given full (``fluid_route_wait``); Python policies M/G/S at peakedness 1
        # (Allen-Cunneen)
        tab = np.zeros((3, 2))
        z_split = 1.0
        # the saturated completion cycle (a ratio of the mix's rates: the same at every node),
        # read by the split chain and least-connections' wait given full (here) and by the
        # minute backlog's completion variance (below, for the other routers)
        mu_sat, cs2 = 0.0, 1.0
        cs2_read = 1 if k_split >= 1 or route == ROUTE_LEAST_CONNECTIONS else 0
        if cs2_read:
            mu_sat, cs2 = saturated_cycle(g, lam, lam_tot, types, tau, tau2, adv, decode, e_out,
                                          s, st)  # fmt: skip
        if k_split >= 1:  # the chain's rates and peakedness at the mean rate, kept per node
            stall = stall_share(g, n, lam, types, tau, adv, decode, st)
            tab, z_split = split_chain(g, lam, lam_tot, types, tau, adv, decode, e_out, s, st,
                                       k_split, stall, mu_sat, cs2)  # fmt: skip
        pw[g], cond[g], _ = _slot_wait(g, k_split, route, lam, lam_tot, 1.0, n, tau_sum, tab,
                                       types, tau, adv, decode, st, s, z_split, n_srv, scv,
                                       cv, mu_sat, cs2, share_q)  # fmt: skip
        if not sig > 0 or not u > 0:
            continue
        # minute rate noise (lognormal multiplier, Gauss-Hermite nodes weighted by arrivals).
        # Two parts (docs/fluid_iteration_gap.md, "The look-back backlog"): the queue's fast
        # part, relaxing within a minute toward the stationary wait at that minute's rate, and
        # the slow part, the backlog that busy minutes leave to the next ones.
        u_st = min(u, rho_max)  # above it the epoch-level fluid backlog takes over
        if cs2_read == 0:  # least-loaded and Python policies: the cycle for the backlog only
            mu_sat, cs2 = saturated_cycle(g, lam, lam_tot, types, tau, tau2, adv, decode, e_out,
                                          s, st)  # fmt: skip
        pw_u = pw[g]  # the stationary wait at the epoch's mean rate
        pwc_u = pw[g] * cond[g]
        # on the path (``fluid_path_noise.path_epoch`` adds the noise's wait to the mean rate's,
        # which pw / cond keep), the nodes below give the fixed part only
        on_path = g_path[g] and _path_law(g, lam, lam_tot, n, tau_sum, d, types, tau, adv,
                                          decode, e_out, s, st, route, n_srv, cv, scv, pw_u,
                                          pwc_u, mu_sat, cs2, law)  # fmt: skip
        base = lam[g].copy()
        p_sum = 0.0
        pw_sum = 0.0
        pwc_sum = 0.0
        pre_sum = 0.0  # the fixed part, arrival-weighted over the nodes as the wait
        for k in range(z.size):
            mult = math.exp(sig * z[k] - 0.5 * sig * sig)
            p = wq[k] * mult
            p_sum += p
            if u * mult >= 1.0:
                # an overloaded minute: its queue is the backlog below (the fluid build-up and
                # the queue's own variance); the slots start it at the mean rate's wait
                pw_sum += p * pw_u
                pwc_sum += p * pwc_u
                if k_split >= 1:
                    continue
            m_eff = min(mult, rho_max / u)
            for c in range(n_c):
                for m in range(n_m):
                    lam[g, c, m] = base[c, m] * m_eff
            lam_k = lam_tot * m_eff
            n_k = running(g, lam, lam_k, types, tau, adv, decode, e_out, s, st)
            pf_k = 0.0  # prefill-iteration share at the node's rate
            if k_split <= 1:
                # the residual iteration and the prompts ahead grow with the rate: an arrival
                # meets them at its minute's rate (round-robin keeps the mean rate's, with
                # its Erlang-k residual); the shares of the router at the mean rate
                r_k, a_k, own_k, pf_k, t2_k, d_k = _fixed_parts(
                    g, n_k, lam, lam_k, types, tau, tau2, adv, decode, e_out, ahead, st
                )
                r_k += (1.0 - share_pf) * _avoided_residual(pf_k, t2_k, d_k)
                pre_sum += p * (r_k * (1.0 + a_k * share_q) + own_k)
            if u * mult >= 1.0 or on_path:
                continue
            pw_k, cond_k, z_k = _slot_wait(g, k_split, route, lam, lam_tot, m_eff, n_k, pf_k,
                                           tab, types, tau, adv, decode, st, s, z_split, n_srv,
                                           scv, cv, mu_sat, cs2, share_q)  # fmt: skip
            # An underloaded minute starts near the mean rate's wait and relaxes toward its own
            # stationary wait: over the minute it covers the share 1 - tau/T (1 - exp(-T/tau))
            # of the way (the time average of 1 - exp(-t/tau)); at peakedness z (Hayward: S / z
            # servers of the same service time) tau is z times longer
            rho_k = n_k / s
            res_k = n_k / lam_k if lam_k > 0 else 0.0
            gap_k = 1.0 - math.sqrt(min(rho_k, 0.999999))
            tau_k = z_k * (1.0 + scv) * res_k / s / (ODONI_ROTH * gap_k * gap_k)
            relax = 1.0 - tau_k / period * (1.0 - math.exp(-period / tau_k)) if tau_k > 0 else 1.0
            pw_sum += p * (pw_u + relax * (pw_k - pw_u))
            pwc_sum += p * (pwc_u + relax * (pw_k * cond_k - pwc_u))
        lam[g] = base
        if k_split <= 1:
            pre[g] = pre_sum / p_sum
        if on_path:
            continue
        pw[g] = pw_sum / p_sum
        cond[g] = (pwc_sum / p_sum) / pw[g] if pw[g] > 0 else 0.0
        # The slow part: the backlog carried from minute to minute, Lindley's W' = (W + X)^+
        # with X = (u m - 1) period + G over the epoch and the ones before it (the backlog
        # relaxes over tens of minutes near saturation, longer than an epoch), arrival-weighted
        # within each minute (``lookback_lindley``). G is the queue's own randomness over a
        # minute, a heavy-traffic G/G/s diffusion's (Kingman; Whitt, "Stochastic-Process
        # Limits", 2002, ch. 9): arrivals Poisson, lam period ca^2 requests (ca^2 = 1; 1 / k for
        # round-robin over k servers), and completions at the saturated rate with the cycle's
        # cs^2 (``saturated_cycle``), each request worth w / N seconds of wait where N servers
        # share one queue (a state-aware router pools the region's servers; split arrivals and
        # Python policies queue per server). The noise's part is the backlog with the
        # multiplier less the one without, which the stationary wait already holds.
        w_req = w_mix / n_req
        ca2 = 1.0 / k_split if k_split >= 1 else 1.0
        pool = float(n_srv) if route > 0 else 1.0
        hist[g, 0, 0] = u_st
        hist[g, 0, 1] = period * w_req * (u_st * ca2 + cs2) / pool
        k_int = max(round(k_min), 1)
        extra, busy = lookback_lindley(hist[g, :, 0], hist[g, :, 1], sig_minute, period, k_int,
                                       z, wq)  # fmt: skip
        extra0, busy0 = lookback_lindley(hist[g, :, 0], hist[g, :, 1], 0.0, period, k_int, z, wq)
        extra = max(extra - extra0, 0.0)
        if extra > 0:  # P(wait) = 1, mean = the total wait
            # an arrival that meets the noise's backlog (a share busy - busy0) waits for it to
            # clear and for a slot only beyond it: max(backlog, slot wait), not their sum (the
            # sum overstated every router's noise by 7-8 % at 85 %: docs/fluid_iteration_gap.md,
            # "Every calibration case within 5 %")
            cond[g] = wait_with_backlog(pw[g], cond[g], extra, busy - busy0)
            pw[g] = 1.0


@njit(cache=True)
def _path_law(
    g, lam, lam_tot, n, tau_sum, d, types, tau, adv, decode, e_out, s, st, route, n_srv, cv, scv,
    pw_u, pwc_u, mu_sat, cs2, law,
):  # fmt: skip
    """Fill ``law[g]`` (``fluid_path_noise``'s columns) from the group's state at the epoch's
    mean rate: running decodes ``n``, prefill busy share ``tau_sum``, decode step ``d``, the
    router's count law, the stationary wait ``pw_u`` / ``pwc_u`` (its mean). Returns False
    (the law off) where no residence line can be drawn: at or above the cap."""
    n_c, n_m = lam.shape[1], lam.shape[2]
    d1 = mixed_decode(g, n + 1.0, lam, lam_tot, types, decode) - d  # the step's slope at n
    stall = stall_share(g, n, lam, types, tau, adv, decode, st)
    amp = (1.0 + stall) * (1.0 + stall)
    z = route_peakedness(route, n_srv, cv, scv, stall)
    p = min(tau_sum, 0.999)
    n_occ = n + (d1 * z * n / d if d > 0 else 0.0) + p / (1.0 - p)
    # server-seconds per request at the cap, a prefill iteration carrying at most S - 1 decodes
    w_req = 0.0
    share0 = 0.0
    tau_c = np.zeros(n_c)
    e_o = 0.0
    for m in range(n_m):
        t = types[g, m]
        d_s = _at(decode[t], s)
        for c in range(n_c):
            lv = lam[g, c, m] / lam_tot
            adv_s1 = _at(adv[t, c], s - 1.0)
            w_req += lv * (_at(tau[t, c], s) * st + max(e_out[c] - 1.0 - adv_s1, 0.0) * d_s / s)
            tau_c[c] += lv * _at(tau[t, c], n) * st
            e_o += lv * e_out[c]
            if c == 0:
                share0 += lv
    r_occ = n_occ / lam_tot
    r_sat = s * w_req
    if not n_occ < s or not r_sat > r_occ:
        return False
    r1 = (r_sat - r_occ) / (s - n_occ)
    law[g, L_ON] = 1.0
    law[g, L_LAM] = lam_tot
    law[g, L_NOCC] = n_occ
    law[g, L_R1] = r1
    law[g, L_R0] = r_occ - r1 * n_occ
    law[g, L_PREFILL] = max(tau_sum / lam_tot - d, 0.0)
    law[g, L_PT] = max(r_occ - tau_sum / lam_tot, 0.0) / max(e_o - 1.0, 1e-9)
    law[g, L_AMP] = amp
    law[g, L_SERVER] = (z - amp / n_srv) / (1.0 - 1.0 / n_srv) if n_srv > 1 else 0.0
    # a full server's wait for its first slot: its first completion (least-loaded) or mean
    # residual cycle (least-connections); the requests queued, at it or pooled, are in the
    # region's count on the path (adding least-loaded's queue ahead, ``own_server_wait``, read
    # +2.1 / +4.6 / +6.7 % for ll85n, 1/6 deferrable over 2 servers and the demo at 85 % with
    # noise, against -0.4 / +1.5 / +3.5 % without)
    if route == ROUTE_LEAST_CONNECTIONS:
        law[g, L_WFULL] = 0.5 * (1.0 + cs2) / mu_sat if mu_sat > 0 else 0.0
    else:
        n_w = min(slot_occupancy(n, tau_sum), s)
        law[g, L_WFULL] = first_completion_wait(s, n_w, lam_tot)
    law[g, L_PW] = pw_u
    law[g, L_COND] = pwc_u / pw_u if pw_u > 0 else 0.0
    law[g, L_SHARE0] = share0
    for c in range(min(n_c, 2)):
        share = share0 if c == 0 else 1.0 - share0
        law[g, L_TAU0 + c] = tau_c[c] / share if share > 0 else 0.0
    return True


@njit(cache=True)
def _avoided_residual(busy_pf, tau2_sum, d):
    """Change of the mean residual iteration an arrival meets when it avoids every server in a
    prefill iteration (a share ``busy_pf`` of the time, length-biased residual ``tau2_sum / (2
    busy_pf)``) and meets a decode iteration's ``d / 2`` there instead (``prefill_share``)."""
    return 0.5 * (busy_pf * d - tau2_sum)


@njit(cache=True)
def _slot_wait(
    g, k_split, route, lam, lam_base, mult, n_r, busy_pf, tab, types, tau, adv, decode, st, s,
    z_split, n_srv, scv, cv, mu_sat, cs2, share_q,
):  # fmt: skip
    """Stationary slot wait ``(P(wait), mean wait given waiting, z)`` of group ``g`` at ``mult``
    times the rate ``lam_base`` (``lam`` already at that rate, ``n_r`` running decodes and a
    prefill-iteration share ``busy_pf`` there; state-aware routers read the slot occupancy;
    split arrivals (round-robin over ``k_split`` servers, random) the birth-death chain of
    ``tab`` at peakedness ``z_split`` (``split_chain`` at the mean rate); least-loaded /
    least-connections the M/G/S wait at the peakedness the router leaves (``routed_wait``);
    Python policies M/G/S at peakedness 1 (Allen-Cunneen). One code path for the epoch's mean
    rate (``mult`` 1) and every minute-noise node."""
    if k_split >= 1:
        pw, cond = chain_wait(tab, mult, lam_base, s, z_split, k_split)
        return pw, cond, 1.0
    lam_r = lam_base * mult
    if route > 0:
        stall = stall_share(g, n_r, lam, types, tau, adv, decode, st)
        n_w = min(slot_occupancy(n_r, busy_pf), s)
        return routed_wait(route, n_srv, s, n_w, lam_r, scv, cv, stall, mu_sat, cs2, share_q)
    den = s * lam_r / max(n_r, 1e-12) - lam_r
    return erlang_c(s, n_r), (1.0 / den if den > 0 else 0.0) * (1.0 + scv) / 2.0, 1.0


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
