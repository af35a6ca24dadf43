"""Compiled (numba) inner loop of the fluid model: one epoch of ``FluidBackend.step``.

The arrays are tiny (tens of hardware groups, origins and regions), so the numpy version spent
its time in per-call overhead, about 1 ms per epoch; these loops do the same arithmetic in a
few microseconds. The formulas are those of ``sim/fluid.py``, written out element by element
in the same order; the queueing primitives are in ``sim/queueing_kernel.py``. Only summation
order differs from numpy (which sums pairwise), so results agree to about 1e-15 relative.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from greenroute.sim.fluid_split import decode_at_utilisation, jsq_shares
from greenroute.sim.queueing_kernel import (
    erlang_c,
    fluid_wait_mean,
    gammaincc,
    noise_nodes,
    noise_wait,
    numpy_sum,
    zero_frac,
)

__all__ = [
    "ACC_SIZE", "erlang_c", "fluid_step", "fluid_wait_mean", "gammaincc", "noise_nodes",
    "noise_wait", "numpy_sum", "release", "slo_misses", "zero_frac",
]  # fmt: skip

INTERACTIVE = 0  # greenroute.data.workload.CLASS_INTERACTIVE
DEFERRABLE = 1  # greenroute.data.workload.CLASS_DEFERRABLE

# acc slots (running totals kept by the kernel)
ACC_QUEUE_FULL, ACC_NO_SERVER, ACC_POWER_CAP, ACC_LATE, ACC_MAX_DELAY, ACC_EPOCH_LATE = range(6)
ACC_SIZE = 6


@njit(cache=True)
def release(e, dt, hold, margin, slack_hi, pool, pool_lo, first, fbuf, acc, released, forced_tot):
    """Deferrable releases of epoch ``e`` (``FluidBackend._release``), written into
    ``released`` and ``forced_tot`` [O, M]. Cohorts before ``first[o, m]`` are empty for good
    (a cohort never gains mass after its epoch) and are skipped; ``fbuf`` is scratch [E]."""
    n_o, n_m = pool.shape[0], pool.shape[1]
    t0 = e * dt
    for o in range(n_o):
        for m in range(n_m):
            released[o, m] = 0.0
            forced_tot[o, m] = 0.0
            if n_m == 1:
                # with one model, an empty cohort's lower deadline is never read again
                # (pending_summary weights it by zero mass), so the empty prefix is skipped
                a0 = first[o, m]
                while a0 < e and pool[o, m, a0] == 0.0:
                    a0 += 1
                first[o, m] = a0
            else:  # with several, lo is a min over models: keep every cohort's lo up to date
                a0 = 0
                while a0 < e and pool[o, m, a0] == 0.0:
                    a0 += 1
                a0 = 0 if a0 < e else e
            if a0 >= e:
                continue
            # forced: the share of each cohort whose deadline falls within the margin
            total = 0.0
            forced_sum = 0.0
            for a in range(a0, e):
                hi = a * dt + dt / 2 + slack_hi
                lo = pool_lo[o, m, a]
                span = max(hi - lo, 1e-9)
                ff = min(max((t0 + margin - lo) / span, 0.0), 1.0)
                row = pool[o, m, a]
                fo = row * ff
                fbuf[a] = fo
                pool[o, m, a] = row - fo
                pool_lo[o, m, a] = lo + ff * span
                forced_sum += fo
                total += row - fo
            # voluntary: (1 - hold) of the rest, oldest cohort first
            k = (1.0 - hold[o]) * total
            cum = 0.0
            vol_sum = 0.0
            found = False
            for a in range(a0, e):
                hi = a * dt + dt / 2 + slack_hi
                row = pool[o, m, a]
                cum += row
                vol = min(max(k - (cum - row), 0.0), row)
                vfrac = vol / row if row > 0 else 0.0
                lo = pool_lo[o, m, a]
                pool_lo[o, m, a] = lo + vfrac * (hi - lo)
                pool[o, m, a] = row - vol
                vol_sum += vol
                if not found and fbuf[a] + vol > 0.5:
                    found = True
                    acc[ACC_MAX_DELAY] = max(acc[ACC_MAX_DELAY], t0 - a * dt)
            released[o, m] = forced_sum + vol_sum
            forced_tot[o, m] = forced_sum


@njit(cache=True)
def fluid_step(
    e, cnt, hold, margin, route, frac,
    g_region, type_ok, pooled, gf, moments, e_out2, decode, gh, par, n_regions,
    gstate, ledgers, pools, first, fbuf, acc, outs, n_int, n_gcm,
    idle_kwh, factors, lat, types, e_pf_int, info,
):  # fmt: skip
    """One epoch of ``FluidBackend.step`` (see there for the model). Arrays are packed to keep
    the call cheap (numba checks every argument's type on each call):

    * ``gf`` [4, G]: servers, slots, queue limit, dynamic W per busy slot;
    * ``moments`` [3, G, C, M]: E[prefill], E[prefill^2], E[prefill x output]; ``e_out2``
      [2, C, M]: E[output], E[output^2]; ``gh`` [2, K]: Gauss-Hermite nodes and weights;
    * ``par``: dt, slack low/high, noise sigma, JSQ exponent, noise scale, rho max, noise
      period, TTFT SLO;
    * state, updated in place: ``gstate`` [4, G] (backlog slot-s, backlog requests,
      utilisation, busy slots), ``ledgers`` [4, R, E] (dynamic IT kWh, served requests, busy
      slot-s, dispatched), ``pools`` [2, O, M, E] (held mass, lowest deadline);
    * outputs: ``outs`` [7, G] (b0, slope, capacity, P(wait), wait | waiting, mean service,
      served), ``n_int`` [G, O, M], ``n_gcm`` [G, C, M] (requests routed to each group)
      and ``info`` [8] (see ``FluidBackend._epoch_info``).
    """
    dt, slack_lo, slack_hi, sigma = par[0], par[1], par[2], par[3]
    jsq_exponent, noise_sigma_scale, rho_max, period_s, slo_s = (
        par[4],
        par[5],
        par[6],
        par[7],
        par[8],
    )
    g_servers, g_slots, g_qlimit, g_dyn_w = gf[0], gf[1], gf[2], gf[3]
    e_pf, e_pf2, e_pfout = moments[0], moments[1], moments[2]
    e_out, e_out2_ = e_out2[0], e_out2[1]
    gh_z, gh_w = gh[0], gh[1]
    backlog_s, backlog_req, util, busy_slots = gstate[0], gstate[1], gstate[2], gstate[3]
    it_dyn_kwh, served_req, busy_slot_s, dispatched = ledgers[0], ledgers[1], ledgers[2], ledgers[3]
    pool, pool_lo = pools[0], pools[1]
    out_b0, out_slope, out_cap, out_pw = outs[0], outs[1], outs[2], outs[3]
    out_cond, out_es_mix, out_served = outs[4], outs[5], outs[6]
    n_o, n_c, n_m = cnt.shape
    n_g = g_region.size
    n_r = n_regions
    t0 = e * dt
    released = np.zeros((n_o, n_m))
    forced = np.zeros((n_o, n_m))
    release(e, dt, hold, margin, slack_hi, pool, pool_lo, first, fbuf, acc, released, forced)
    holdable = 1.0 if slack_lo - dt / 2 >= margin else 0.0
    disp = np.zeros((n_c, n_o, n_m))
    forced_sum = 0.0
    def_sum = 0.0
    for o in range(n_o):
        for m in range(n_m):
            d_new = cnt[o, DEFERRABLE, m]
            to_pool = d_new * hold[o] * holdable
            pool[o, m, e] = to_pool
            pool_lo[o, m, e] = t0 + dt / 2 + slack_lo
            disp[INTERACTIVE, o, m] = cnt[o, INTERACTIVE, m]
            disp[DEFERRABLE, o, m] = d_new - to_pool + released[o, m]
            forced_sum += forced[o, m]
            def_sum += disp[DEFERRABLE, o, m]
    forced_share = forced_sum / max(def_sum, 1e-12)
    # flows [C, O, R, M] and per-region totals [C, R, M]
    flows = np.zeros((n_c, n_o, n_r, n_m))
    per_region = np.zeros((n_c, n_r, n_m))
    for c in range(n_c):
        for o in range(n_o):
            for r in range(n_r):
                share_r = route[c, o, r]
                for m in range(n_m):
                    v = disp[c, o, m] * share_r
                    flows[c, o, r, m] = v
                    per_region[c, r, m] += v
    for r in range(n_r):
        tot = 0.0
        for c in range(n_c):
            for m in range(n_m):
                tot += per_region[c, r, m]
        dispatched[r, e] = tot
    # split each region's flow over its hardware groups by usable slots (round robin; JSQ below)
    c_eff = np.empty(n_g)
    eff_slots = np.empty(n_g)
    reg_eff = np.zeros(n_r)
    for g in range(n_g):
        c_eff[g] = math.floor(g_slots[g] * frac[g_region[g]] + 1e-9)
        eff_slots[g] = g_servers[g] * c_eff[g]
        reg_eff[g_region[g]] += eff_slots[g]
    reg_gm = np.zeros((n_r, n_m))
    for g in range(n_g):
        for m in range(n_m):
            if type_ok[g, m]:
                reg_gm[g_region[g], m] += eff_slots[g]
    # work for a model no usable slot can serve is dropped: "power_cap" when servers able to
    # host it exist but a cap left them no slot, else "no server for the model" (the request
    # kernel's precedence, sim/kernel._DROP_RANK)
    host = np.zeros((n_r, n_m))
    for g in range(n_g):
        for m in range(n_m):
            if type_ok[g, m]:
                host[g_region[g], m] += g_servers[g]
    for r in range(n_r):
        for m in range(n_m):
            if reg_gm[r, m] <= 0:
                k = ACC_POWER_CAP if host[r, m] > 0 else ACC_NO_SERVER
                for c in range(n_c):
                    acc[k] += per_region[c, r, m]
    share_gm = np.zeros((n_g, n_m))
    n_gcm[:] = 0.0
    n_req = np.zeros(n_g)
    cap_rate = np.zeros(n_g)
    for g in range(n_g):
        r = g_region[g]
        for m in range(n_m):
            eff_gm = eff_slots[g] if type_ok[g, m] else 0.0
            share_gm[g, m] = eff_gm / reg_gm[r, m] if reg_gm[r, m] > 0 else 0.0
        for c in range(n_c):
            for m in range(n_m):
                v = per_region[c, r, m] * share_gm[g, m]
                n_gcm[g, c, m] = v
                n_req[g] += v
        c_eff[g] = max(c_eff[g], 1.0)
        has_share = reg_eff[r] > 0 and eff_slots[g] / reg_eff[r] > 0
        cap_rate[g] = g_servers[g] * c_eff[g] * (1.0 if has_share else 0.0)
    # least-loaded / least-connections equalise the groups' utilisation (sim/fluid_split.py)
    if pooled.any() and jsq_shares(share_gm, per_region, g_region, type_ok, pooled, eff_slots,
                                   util, c_eff, decode, e_pf, e_out):  # fmt: skip
        for g in range(n_g):
            r = g_region[g]
            n_req[g] = 0.0
            for c in range(n_c):
                for m in range(n_m):
                    v = per_region[c, r, m] * share_gm[g, m]
                    n_gcm[g, c, m] = v
                    n_req[g] += v
    # fixed point: batch size <-> utilisation
    work = np.zeros(n_g)
    work2 = np.zeros(n_g)
    served = np.zeros(n_g)
    for g in range(n_g):
        b0 = backlog_s[g]
        cap_s = cap_rate[g] * dt
        u = util[g]
        for _ in range(3):
            wk = 0.0
            wk2 = 0.0
            for m in range(n_m):
                d = decode_at_utilisation(decode, g, m, u, c_eff[g])
                for c in range(n_c):
                    es = e_pf[g, c, m] + d * e_out[c, m]
                    es2 = e_pf2[g, c, m] + 2 * d * e_pfout[g, c, m] + d**2 * e_out2_[c, m]
                    wk += n_gcm[g, c, m] * es
                    wk2 += n_gcm[g, c, m] * es2
            work[g] = wk
            work2[g] = wk2
            served[g] = min(b0 + wk, cap_s)
            u = served[g] / cap_s if cap_s > 0 else 0.0
        util[g] = u
    # queues
    late_sum = 0.0
    n_go = np.zeros(n_o)
    for g in range(n_g):
        r = g_region[g]
        b0 = backlog_s[g]
        es_mix = work[g] / n_req[g] if n_req[g] > 0 else 0.0
        es2_mix = work2[g] / n_req[g] if n_req[g] > 0 else 0.0
        if es_mix <= 0 and backlog_req[g] > 0:
            es_mix = b0 / max(backlog_req[g], 1e-12)
            es2_mix = es_mix**2
        slope = work[g] / dt - cap_rate[g]
        new_b = b0 + work[g] - served[g]
        lim = g_qlimit[g] * g_servers[g] * es_mix
        if new_b > lim:
            acc[ACC_QUEUE_FULL] += (new_b - lim) / max(es_mix, 1e-12)
            new_b = lim
        backlog_s[g] = new_b
        backlog_req[g] = new_b / max(es_mix, 1e-12) if es_mix > 0 else 0.0
        busy_slots[g] = served[g] / dt
        it_dyn_kwh[r, e] += served[g] * g_dyn_w[g] / 3.6e6
        busy_slot_s[r, e] += served[g]
        served_req[r, e] += served[g] / max(es_mix, 1e-12) if es_mix > 0 else 0.0
        n_srv = max(g_servers[g], 1.0)
        c_q = c_eff[g] * n_srv**jsq_exponent if pooled[g] else c_eff[g]
        scv = max(es2_mix / es_mix**2 - 1.0, 0.0) if es_mix > 0 else 1.0
        rho = n_req[g] / dt * es_mix / cap_rate[g] if cap_rate[g] > 0 else 0.0
        # rate noise felt by the group: sigma sqrt(sum_o f_o^2) over its origins' shares
        tot = 0.0
        for o in range(n_o):
            v = 0.0
            for m in range(n_m):
                fl = 0.0
                for c in range(n_c):
                    fl += flows[c, o, r, m]
                v += fl * share_gm[g, m]
            n_go[o] = v
            tot += v
        sq = 0.0
        if tot > 0:
            for o in range(n_o):
                f = n_go[o] / tot
                sq += f * f
        sigma_g = noise_sigma_scale * sigma * math.sqrt(sq)
        pw, cond = noise_wait(rho, sigma_g, es_mix, scv, c_q, gh_z, gh_w, rho_max, period_s)
        wait_mean = fluid_wait_mean(b0, slope, cap_rate[g], dt) + zero_frac(b0, slope, dt) * (
            pw * cond
        )
        finish_after = wait_mean + es_mix
        n_def = 0.0
        for m in range(n_m):
            n_def += n_gcm[g, DEFERRABLE, m]
        if finish_after > margin:
            late = n_def
        else:
            late = n_def * forced_share * min(1.0, finish_after / margin)
        late_sum += late
        for o in range(n_o):
            for m in range(n_m):
                v = flows[INTERACTIVE, o, r, m] * share_gm[g, m]
                n_int[g, o, m] = v if type_ok[g, m] else 0.0
        out_b0[g] = b0
        out_slope[g] = slope
        out_cap[g] = cap_rate[g]
        out_pw[g] = pw
        out_cond[g] = cond
        out_es_mix[g] = es_mix
        out_served[g] = served[g]
    acc[ACC_LATE] += late_sum
    acc[ACC_EPOCH_LATE] = late_sum
    # the epoch's figures for step-wise consumers (RL rewards, the gateway)
    it_total = 0.0
    carbon = 0.0
    water = 0.0
    cost = 0.0
    for r in range(n_r):
        it_kwh = it_dyn_kwh[r, e] + idle_kwh[r]
        it_total += it_kwh
        carbon += it_kwh * factors[0, e, r]
        water += it_kwh * factors[1, e, r]
        cost += it_kwh * factors[2, e, r]
    completed = 0.0
    backlog_total = 0.0
    for g in range(n_g):
        es_mix = out_es_mix[g]
        completed += out_served[g] / max(es_mix, 1e-12) if es_mix > 0 else 0.0
        backlog_total += backlog_req[g]
    misses = slo_misses(n_int, g_region, types, e_pf_int, lat, out_b0, out_slope, out_cap,
                        out_pw, out_cond, slo_s, dt)  # fmt: skip
    held = 0.0
    for o in range(n_o):
        for m in range(n_m):
            a_from = first[o, m] if n_m == 1 else 0
            for a in range(min(a_from, e), e + 1):
                held += pool[o, m, a]
    info[0] = it_total
    info[1] = carbon / 1e3
    info[2] = water / 1e3
    info[3] = cost
    info[4] = completed
    info[5] = misses + late_sum
    info[6] = held
    info[7] = backlog_total


@njit(cache=True)
def slo_misses(n_int, g_region, types, e_pf_int, lat, b0, slope, cap, pw, cond, slo_s, dt):
    """Expected interactive SLO misses of an epoch (``FluidBackend._epoch_info``)."""
    n_g, n_o, n_m = n_int.shape
    total = 0.0
    for g in range(n_g):
        fw = fluid_wait_mean(b0[g], slope[g], cap[g], dt)
        for o in range(n_o):
            for m in range(n_m):
                n = n_int[g, o, m]
                if not n > 0:
                    continue
                slack = slo_s - 2.0 * lat[o, g_region[g]] - e_pf_int[types[g, m], m] - fw
                if cond[g] > 0:
                    if slack <= 0:
                        tail = 1.0
                    else:
                        tail = pw[g] * math.exp(-max(slack, 0.0) / max(cond[g], 1e-12))
                else:
                    tail = 1.0 if slack <= 0 else 0.0
                total += n * tail
    return total
