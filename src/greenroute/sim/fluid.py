"""Epoch-level fluid model: month-long, many-region runs in seconds.

Per epoch and hardware group the routed requests become work in slot-seconds (expected service
time from the same perf tables and length distributions as the request engine, at the batch
size implied by the group's utilisation). Work beyond the epoch's capacity is carried as
backlog (FIFO); beyond the per-server queue bound it is dropped. Energy is exact given the
served work: each busy slot draws (peak - idle) / slots on top of idle power, as in the
request engine.

Waiting time has three parts:

1. the fluid backlog delay (backlog / service rate, averaged over the epoch);
2. while that backlog is empty, the stochastic M/G/c wait of Allen–Cunneen per server;
3. the workload's per-minute rate noise (lognormal, sigma from the workload spec, shrunk by
   the mixing of independent origins): the M/G/c wait is averaged over Gauss–Hermite nodes
   of the minute's rate multiplier, arrivals weighting each node.

Deferrable work held back by the plan is kept per (origin, arrival epoch) cohort, with
deadlines uniform over the workload's slack; releases are earliest-deadline-first within a
cohort and oldest cohort first across cohorts, forced when deadlines come within the margin.
``tests/test_fluid_calibration.py`` checks carbon, energy and mean TTFT against the request
engine on windows both can run.
"""

from __future__ import annotations

import numpy as np

from greenroute.data.workload import CLASS_DEFERRABLE, CLASS_INTERACTIVE
from greenroute.sim.queueing import mgc_wait_s
from greenroute.sim.scenario import TraceWorkload
from greenroute.sim.types import N_CLASSES

NOISE_PERIOD_S = 60.0  # the workload generator's noise is piecewise constant per minute
NOISE_NODES = 9  # Gauss–Hermite nodes over the minute's lognormal rate multiplier
# Join-the-shortest-queue pooling exponent: n servers of c slots under least-loaded queue like
# one M/G/(c n^x). Fitted by ``python -m greenroute.bench.calibrate`` (x = 1 would be perfect
# pooling, 0 independent servers); checked by tests/test_fluid_calibration.py.
JSQ_POOLING_EXPONENT = 0.35
# Share of the minute-scale rate noise the queue feels: a queue does not reach its stationary
# wait within one minute, so it responds to a damped noise. Fitted with the exponent above.
NOISE_SIGMA_SCALE = 0.85
RHO_MAX_STABLE = 0.98  # above this a noise node is an overloaded minute (linear build-up)


class FluidBackend:
    def __init__(self, sim) -> None:
        self.sim = sim
        prep = sim.prep
        sc = prep.scenario
        b = prep.built
        svc = prep.service
        self.b, self.sc, self.svc = b, sc, svc
        self.counts = prep.counts  # [E, O, C, M]
        n_e, n_o, n_r, n_m = sc.n_epochs, len(sc.origins), b.n_regions, b.n_models
        self.n_e, self.n_o, self.n_r, self.n_m = n_e, n_o, n_r, n_m
        n_g = len(b.hw_groups)
        self.n_g = n_g
        self.g_region = b.hw_region
        self.g_servers = np.bincount(b.server_hw, minlength=n_g).astype(float)
        self.g_slots = np.array([g.max_concurrency for g in b.hw_groups], dtype=float)
        first = np.array(
            [np.flatnonzero(b.server_hw == g)[0] if self.g_servers[g] else 0 for g in range(n_g)]
        )
        has = self.g_servers > 0
        self.g_idle_w = b.server_idle_w[first] * has
        self.g_peak_w = b.server_peak_w[first] * has
        self.g_qlimit = b.queue_limit[first].astype(float)
        self.g_dyn_w_per_slot = (self.g_peak_w - self.g_idle_w) / self.g_slots
        # per (group, class, model) service moments; types are g * M + m
        types = np.arange(n_g)[:, None] * n_m + np.arange(n_m)[None, :]  # [G, M]
        self.types = types
        mm = np.arange(n_m)[None, None, :]
        cc = np.arange(N_CLASSES)[None, :, None]
        self.E_pf = svc.e_pf[types[:, None, :], cc, mm]  # [G, C, M]
        self.E_pf2 = svc.e_pf2[types[:, None, :], cc, mm]
        self.E_pfout = svc.e_pfout[types[:, None, :], cc, mm]
        self.E_out = svc.e_out[None]  # [1, C, M]
        self.E_out2 = svc.e_out2[None]
        self.type_ok = b.type_ok[types]  # [G, M]
        self.decode = b.decode_s[types]  # [G, M, B+1]
        # state
        self.backlog_s = np.zeros(n_g)
        self.backlog_req = np.zeros(n_g)
        self.util = np.full(n_g, 0.5)
        self.busy_slots = np.zeros(n_g)
        # ledgers
        self.it_dyn_kwh = np.zeros((n_r, n_e))
        self.served_req = np.zeros((n_r, n_e))
        self.busy_slot_s = np.zeros((n_r, n_e))
        self.dispatched = np.zeros((n_r, n_e))
        self.dropped = {"queue_full": 0.0, "no_server_for_model": 0.0, "power_cap": 0.0}
        self.deferrable_late = 0.0
        self.max_defer_delay_s = 0.0
        # TTFT components of interactive flows (one per epoch, origin, group, model)
        keys = ("w", "net2", "type", "b0", "slope", "cap", "pw", "cond", "epoch", "region")
        self.comp: dict[str, list[np.ndarray]] = {k: [] for k in keys}
        wl = sc.workload
        if isinstance(wl, TraceWorkload):
            self.slack = (0.0, 0.0)
            self.sigma = 0.0
        else:
            self.slack = (float(wl.deadline_slack_s[0]), float(wl.deadline_slack_s[1]))
            self.sigma = float(wl.rate_noise_sigma)
        # deferrable pool: [O, M, E] remaining mass per arrival cohort, lowest remaining deadline
        self.pool = np.zeros((n_o, n_m, n_e))
        self.pool_lo = np.zeros((n_o, n_m, n_e))
        self.lat = prep.latency_s
        z, wq = np.polynomial.hermite_e.hermegauss(NOISE_NODES)
        self.gh_z, self.gh_w = z, wq / wq.sum()
        from greenroute.policies.local import local_policy_code
        from greenroute.sim import kernel as K

        jsq = (K.LP_LEAST_LOADED, K.LP_LEAST_CONNECTIONS)
        codes = np.array([local_policy_code(lp) for lp in sim.local])
        self.pooled = np.isin(codes, jsq)[self.g_region]

    # ------------------------------------------------------------------ observation state
    def region_state(self, e: int) -> dict[str, np.ndarray]:
        r = self.g_region
        return {
            "busy": np.bincount(r, weights=self.busy_slots, minlength=self.n_r),
            "queue": np.bincount(r, weights=self.backlog_req, minlength=self.n_r),
            "backlog": np.bincount(r, weights=self.backlog_s, minlength=self.n_r),
            "kv_used": np.zeros(self.n_r),
        }

    def resident_models(self) -> list[frozenset[int]]:
        b = self.b
        return [
            frozenset(int(m) for m in np.unique(b.server_model0[b.server_region == r]))
            for r in range(self.n_r)
        ]

    def pending_summary(self, e: int):
        """(count [O], earliest deadline [O], due(t0, H) -> [H+1, O]): held cohorts have
        deadlines uniform over [lowest remaining, arrival + max slack]."""
        count = self.pool.sum(axis=(1, 2))
        lo = np.where(self.pool > 1e-9, self.pool_lo, np.inf)
        earliest = lo.min(axis=(1, 2)) if self.pool.size else np.full(self.n_o, np.inf)
        dt = self.sc.epoch_s
        mass = self.pool[:, :, :e].sum(axis=1)  # [O, A]
        lo_a = self.pool_lo[:, :, :e].min(axis=1) if e else np.zeros((self.n_o, 0))
        hi_a = np.arange(e) * dt + dt / 2 + self.slack[1]

        def due(t0: float, h: int) -> np.ndarray:
            if e == 0 or not mass.any():
                return np.zeros((h + 1, self.n_o))
            ends = t0 + (np.arange(h + 1) + 1.0) * dt  # [H+1]
            span = np.maximum(hi_a - lo_a, 1e-9)  # [O, A]
            frac = np.clip((ends[:, None, None] - lo_a[None]) / span[None], 0.0, 1.0)
            return (frac * mass[None]).sum(axis=2)

        return count, earliest, due

    # ------------------------------------------------------------------ deferrable pool
    def _release(self, e: int, hold: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
        """Forced (deadline within ``margin``) and voluntary ((1 - hold) of the rest) releases;
        returns (released [O, M], forced [O, M])."""
        dt = self.sc.epoch_s
        t0 = e * dt
        released = np.zeros((self.n_o, self.n_m))
        forced_tot = np.zeros((self.n_o, self.n_m))
        if e == 0:
            return released, forced_tot
        s_hi = self.slack[1]
        hi = np.arange(e) * dt + dt / 2 + s_hi
        for o in range(self.n_o):
            for m in range(self.n_m):
                row = self.pool[o, m, :e]
                if not row.any():
                    continue
                lo = self.pool_lo[o, m, :e]
                span = np.maximum(hi - lo, 1e-9)
                forced_frac = np.clip((t0 + margin - lo) / span, 0.0, 1.0)
                forced = row * forced_frac
                row = row - forced
                lo = lo + forced_frac * span
                k = (1.0 - hold[o]) * row.sum()
                cum = np.cumsum(row)  # oldest cohort first
                vol = np.clip(k - (cum - row), 0.0, row)
                with np.errstate(divide="ignore", invalid="ignore"):
                    vfrac = np.where(row > 0, vol / row, 0.0)
                lo = lo + vfrac * (hi - lo)
                rel = forced + vol
                released[o, m] = rel.sum()
                forced_tot[o, m] = forced.sum()
                big = np.flatnonzero(rel > 0.5)
                if big.size:
                    self.max_defer_delay_s = max(self.max_defer_delay_s, t0 - big[0] * dt)
                self.pool[o, m, :e] = row - vol
                self.pool_lo[o, m, :e] = lo
        return released, forced_tot

    # ------------------------------------------------------------------ one epoch
    def step(self, e: int, plan, frac: np.ndarray, obs) -> None:
        sc = self.sc
        dt = sc.epoch_s
        t0 = e * dt
        cnt = self.counts[e]  # [O, C, M]
        hold = np.zeros(self.n_o) if plan.hold is None else np.asarray(plan.hold, dtype=float)
        margin = 2 * dt + float(np.max(obs.slot_s_per_request[CLASS_DEFERRABLE]))
        released, forced = self._release(e, hold, margin)
        d_new = cnt[:, CLASS_DEFERRABLE, :]
        holdable = 1.0 if self.slack[0] - dt / 2 >= margin else 0.0
        to_pool = d_new * hold[:, None] * holdable
        self.pool[:, :, e] = to_pool
        self.pool_lo[:, :, e] = t0 + dt / 2 + self.slack[0]
        disp = np.zeros((N_CLASSES, self.n_o, self.n_m))
        disp[CLASS_INTERACTIVE] = cnt[:, CLASS_INTERACTIVE, :]
        disp[CLASS_DEFERRABLE] = d_new - to_pool + released
        forced_share = forced.sum() / max(disp[CLASS_DEFERRABLE].sum(), 1e-12)
        # route: flows[c, o, r, m]
        route = np.asarray(plan.route, dtype=float)
        flows = disp[:, :, None, :] * route[:, :, :, None]
        per_region = flows.sum(axis=1)  # [C, R, M]
        self.dispatched[:, e] = per_region.sum(axis=(0, 2))
        # split each region's flow over its hardware groups by usable slots
        gr = self.g_region
        c_eff = np.floor(self.g_slots * frac[gr] + 1e-9)
        eff_slots = self.g_servers * c_eff
        reg_eff = np.bincount(gr, weights=eff_slots, minlength=self.n_r)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(reg_eff[gr] > 0, eff_slots / reg_eff[gr], 0.0)
        no_cap = reg_eff <= 0
        if no_cap.any():
            self.dropped["power_cap"] += float(per_region[:, no_cap, :].sum())
        # per-model split over the groups that can host the model
        eff_gm = eff_slots[:, None] * self.type_ok  # [G, M]
        reg_gm = np.stack(
            [np.bincount(gr, weights=eff_gm[:, m], minlength=self.n_r) for m in range(self.n_m)],
            axis=1,
        )  # [R, M]
        with np.errstate(divide="ignore", invalid="ignore"):
            share_gm = np.where(reg_gm[gr] > 0, eff_gm / reg_gm[gr], 0.0)  # [G, M]
        lost = (reg_gm <= 0) & ~no_cap[:, None]
        if lost.any():
            self.dropped["no_server_for_model"] += float((per_region * lost[None]).sum())
        n_gcm = per_region[:, gr, :].transpose(1, 0, 2) * share_gm[:, None, :]  # [G, C, M]
        n_req = n_gcm.sum(axis=(1, 2))
        c_eff = np.maximum(c_eff, 1.0)
        cap_rate = self.g_servers * c_eff * (share > 0)  # busy slots the group can hold
        b0 = self.backlog_s.copy()
        cap_s = cap_rate * dt
        with np.errstate(divide="ignore", invalid="ignore"):
            for _ in range(3):  # fixed point: batch size <-> utilisation
                batch = np.clip(self.util * c_eff + 1.0, 1.0, c_eff)  # PASTA: joins u c others
                d = self._decode_at(batch)  # [G, M]
                es = self.E_pf + d[:, None, :] * self.E_out
                es2 = (
                    self.E_pf2
                    + 2 * d[:, None, :] * self.E_pfout
                    + d[:, None, :] ** 2 * (self.E_out2)
                )
                work = (n_gcm * es).sum(axis=(1, 2))
                served = np.minimum(b0 + work, cap_s)
                self.util = np.where(cap_s > 0, served / cap_s, 0.0)
            es_mix = np.where(n_req > 0, work / n_req, 0.0)
            es2_mix = np.where(n_req > 0, (n_gcm * es2).sum(axis=(1, 2)) / n_req, 0.0)
            only_backlog = (es_mix <= 0) & (self.backlog_req > 0)
            es_mix = np.where(only_backlog, b0 / np.maximum(self.backlog_req, 1e-12), es_mix)
            es2_mix = np.where(only_backlog, es_mix**2, es2_mix)
        slope = work / dt - cap_rate
        new_b = b0 + work - served
        lim = self.g_qlimit * self.g_servers * es_mix
        over = new_b > lim
        if over.any():
            self.dropped["queue_full"] += float(
                ((new_b - lim)[over] / np.maximum(es_mix[over], 1e-12)).sum()
            )
            new_b = np.where(over, lim, new_b)
        self.backlog_s = new_b
        self.backlog_req = np.where(es_mix > 0, new_b / np.maximum(es_mix, 1e-12), 0.0)
        self.busy_slots = served / dt
        np.add.at(self.it_dyn_kwh[:, e], gr, served * self.g_dyn_w_per_slot / 3.6e6)
        np.add.at(self.busy_slot_s[:, e], gr, served)
        np.add.at(
            self.served_req[:, e], gr, np.where(es_mix > 0, served / np.maximum(es_mix, 1e-12), 0)
        )
        # Queue structure. Round-robin and random split a group's arrivals into independent
        # per-server M/G/c queues; least-loaded / least-connections (join the shortest queue)
        # sit between that and one pooled M/G/(n c): an effective pool of c * n^JSQ_POOLING
        # slots, with the exponent fitted against the request engine (bench/calibrate.py).
        n_srv = np.maximum(self.g_servers, 1.0)
        c_q = np.where(self.pooled, c_eff * n_srv**JSQ_POOLING_EXPONENT, c_eff)
        with np.errstate(divide="ignore", invalid="ignore"):
            scv = np.where(es_mix > 0, np.maximum(es2_mix / es_mix**2 - 1.0, 0.0), 1.0)
            rho = np.where(cap_rate > 0, n_req / dt * es_mix / cap_rate, 0.0)
        # per-minute rate noise: average the M/G/c wait over Gauss–Hermite nodes of the minute's
        # lognormal rate multiplier (the wait is convex in load), weighting nodes by arrivals.
        # Independent origins mixing into one group shrink the noise: sigma sqrt(sum f_o^2).
        n_go = (flows.sum(axis=0)[:, gr, :] * share_gm[None]).sum(axis=2).T  # [G, O]
        tot = n_go.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(tot > 0, n_go / tot, 0.0)
        sigma_g = NOISE_SIGMA_SCALE * self.sigma * np.sqrt((f**2).sum(axis=1))
        pw, cond = noise_averaged_wait(rho, sigma_g, es_mix, scv, c_q, self.gh_z, self.gh_w)
        wait_mean = _fluid_wait_mean(b0, slope, cap_rate, dt) + _zero_frac(b0, slope, dt) * (
            pw * cond
        )
        # deferrable deadline misses: released work whose deadline falls before it can finish.
        # Released mass has deadlines >= t0 + margin except the forced share, whose deadlines
        # spread uniformly over [t0, t0 + margin).
        finish_after = wait_mean + es_mix
        n_def = n_gcm[:, CLASS_DEFERRABLE, :].sum(axis=1)
        late = np.where(
            finish_after > margin,
            n_def,
            n_def * forced_share * np.minimum(1.0, finish_after / margin),
        )
        self.deferrable_late += float(late.sum())
        # TTFT components per (origin, group, model) for interactive flows
        n_int = flows[CLASS_INTERACTIVE][:, gr, :].transpose(1, 0, 2) * share_gm[:, None, :]
        n_int = np.where(self.type_ok[:, None, :], n_int, 0.0)  # [G, O, M]
        gg, oo, mm = np.nonzero(n_int > 0)
        if gg.size:
            cmp = self.comp
            cmp["w"].append(n_int[gg, oo, mm])
            cmp["net2"].append(2.0 * self.lat[oo, gr[gg]])
            cmp["type"].append(self.types[gg, mm])
            cmp["epoch"].append(np.full(gg.size, e))
            cmp["region"].append(gr[gg])
            cmp["b0"].append(b0[gg])
            cmp["slope"].append(slope[gg])
            cmp["cap"].append(cap_rate[gg])
            cmp["pw"].append(pw[gg])
            cmp["cond"].append(cond[gg])
        return self._epoch_info(e, served, es_mix, n_int, gg, oo, mm, b0, slope, cap_rate,
                                pw, cond, late)  # fmt: skip

    def _epoch_info(self, e, served, es_mix, n_int, gg, oo, mm, b0, slope, cap, pw, cond, late):
        """Figures of epoch ``e`` for step-wise consumers (RL rewards, the gateway)."""
        prep = self.sim.prep
        dt = self.sc.epoch_s
        idle_kwh = prep.built.region_idle_kw() * dt / 3600.0
        it_kwh = self.it_dyn_kwh[:, e] + idle_kwh
        f = prep.factors
        carbon_kg = float((it_kwh * np.asarray(f.carbon_g)[e]).sum() / 1e3)
        water_m3 = float(
            (it_kwh * (np.asarray(f.water_onsite_l)[e] + np.asarray(f.water_offsite_l)[e])).sum()
            / 1e3
        )
        cost_usd = float((it_kwh * np.asarray(f.cost_usd)[e]).sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            completed = float(np.where(es_mix > 0, served / np.maximum(es_mix, 1e-12), 0.0).sum())
        # expected interactive SLO misses: queueing wait beyond the slack left after the
        # network and the mean prefill (exponential tail of the M/G/c wait)
        misses = 0.0
        if gg.size:
            t = self.types[gg, mm]
            e_pf = self.svc.e_pf[t, CLASS_INTERACTIVE, mm]
            fluid_w = _fluid_wait_mean(b0[gg], slope[gg], cap[gg], dt)
            slack = self.sim.sc.ttft_slo_s - 2.0 * self.lat[oo, self.g_region[gg]] - e_pf - fluid_w
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                tail = np.where(
                    slack <= 0,
                    1.0,
                    pw[gg] * np.exp(-np.maximum(slack, 0.0) / np.maximum(cond[gg], 1e-12)),
                )
            tail = np.where(cond[gg] > 0, tail, (slack <= 0).astype(float))
            misses = float((n_int[gg, oo, mm] * tail).sum())
        return {
            "it_energy_kwh": float(it_kwh.sum()),
            "carbon_kg": carbon_kg,
            "water_m3": water_m3,
            "cost_usd": cost_usd,
            "completed": completed,
            "slo_misses": misses + float(late.sum()),
            "held": float(self.pool.sum()),
            "backlog_requests": float(self.backlog_req.sum()),
        }

    def _decode_at(self, batch: np.ndarray) -> np.ndarray:
        """Decode step [G, M] at fractional batch sizes [G] (linear between table entries)."""
        bmax = self.decode.shape[2] - 1
        b = np.clip(batch, 1.0, bmax)
        lo = np.floor(b).astype(np.int64)
        hi = np.minimum(lo + 1, bmax)
        w = (b - lo)[:, None]
        g = np.arange(self.n_g)[:, None]
        m = np.arange(self.n_m)[None, :]
        return self.decode[g, m, lo[:, None]] * (1 - w) + self.decode[g, m, hi[:, None]] * w

    # ------------------------------------------------------------------ TTFT summary
    def ttft_summary(self, slo_s: float, seed: int, n_samples: int = 200_000) -> dict[str, float]:
        nan = float("nan")
        if not self.comp["w"]:
            return {"mean": nan, "p50": nan, "p95": nan, "p99": nan, "viol_frac": 0.0, "n": 0.0}
        c = {k: np.concatenate(v) for k, v in self.comp.items()}
        dt = self.sc.epoch_s
        t = c["type"]
        m = t % self.n_m
        e_pf = self.svc.e_pf[t, CLASS_INTERACTIVE, m]
        stoch_mean = c["pw"] * c["cond"]
        mean_each = (
            c["net2"]
            + e_pf
            + _fluid_wait_mean(c["b0"], c["slope"], c["cap"], dt)
            + _zero_frac(c["b0"], c["slope"], dt) * stoch_mean
        )
        w = c["w"]
        mean = float((w * mean_each).sum() / w.sum())
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7F7F]))
        pick = rng.choice(w.size, size=n_samples, p=w / w.sum())
        tau = rng.random(n_samples) * dt
        back = np.maximum(0.0, c["b0"][pick] + c["slope"][pick] * tau)
        fluid_part = back / np.maximum(c["cap"][pick], 1e-12)
        waits = rng.random(n_samples) < c["pw"][pick]
        stoch = np.where(waits, rng.exponential(1.0, n_samples) * c["cond"][pick], 0.0)
        stoch = np.where(back > 0, 0.0, stoch)
        pf = self._prefill_sample(t[pick], rng)
        ttft = c["net2"][pick] + pf + fluid_part + stoch
        return {
            "mean": mean,
            "p50": float(np.percentile(ttft, 50)),
            "p95": float(np.percentile(ttft, 95)),
            "p99": float(np.percentile(ttft, 99)),
            "viol_frac": float(np.mean(ttft > slo_s)),
            "n": float(w.sum()),
        }

    def _prefill_sample(self, types: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        from greenroute.sim.service import _interp_extrap

        prompts = self.sim.prep.prompt_sample
        out = np.empty(types.size)
        for t in np.unique(types):
            sel = types == t
            p = prompts[rng.integers(0, prompts.size, int(sel.sum()))]
            out[sel] = _interp_extrap(p.astype(float), self.b.prefill_tok[t], self.b.prefill_s[t])
        return out


def _fluid_wait_mean(b0, slope, cap, dt):
    """Mean over the epoch of backlog(τ)/capacity with backlog(τ) = max(0, b0 + slope τ)."""
    b0 = np.asarray(b0, dtype=float)
    slope = np.asarray(slope, dtype=float)
    cap = np.maximum(np.asarray(cap, dtype=float), 1e-12)
    end = b0 + slope * dt
    with np.errstate(divide="ignore", invalid="ignore"):
        t_empty = np.where(slope < 0, np.clip(-b0 / slope, 0.0, dt), dt)
    area = np.where(end >= 0, (b0 + np.maximum(end, 0.0)) / 2.0 * dt, b0 * t_empty / 2.0)
    return area / dt / cap


def _zero_frac(b0, slope, dt):
    """Share of the epoch during which the fluid backlog is empty."""
    b0 = np.asarray(b0, dtype=float)
    slope = np.asarray(slope, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_empty = np.where(slope < 0, np.clip(-b0 / slope, 0.0, dt), dt)
    return np.where(slope > 0, 0.0, np.where(b0 <= 0, 1.0, (dt - t_empty) / dt))


UTIL_GRID = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85,
                      0.9, 0.93, 0.96, 0.98])  # fmt: skip


def queue_curves(built, service, prompt_sample, slo_s: float, sigma: float, n_origins: int):
    """The fluid model's waiting curve per region, for observations: mean queueing wait (s)
    and the probability that an interactive request's wait exceeds its SLO slack (SLO minus
    mean prefill), at each utilisation in :data:`UTIL_GRID`. Assumes least-loaded inside the
    region and the traffic of a single origin (the noisiest case)."""
    n_r = built.n_regions
    k = UTIL_GRID.size
    wait = np.zeros((n_r, k))
    miss = np.zeros((n_r, k))
    z, wq = np.polynomial.hermite_e.hermegauss(NOISE_NODES)
    wq = wq / wq.sum()
    sig = NOISE_SIGMA_SCALE * sigma
    for r in range(n_r):
        servers = np.flatnonzero(built.server_region == r)
        if servers.size == 0:
            continue
        s0 = servers[0]
        n = float(servers.size)
        c = float(built.server_slots[s0])
        t = int(built.server_hw[s0] * built.n_models + built.server_model0[s0])
        m = int(built.server_model0[s0])
        cq = c * n**JSQ_POOLING_EXPONENT
        for i, u in enumerate(UTIL_GRID):
            if u <= 0:
                continue
            es, es2 = service.moments(t, CLASS_INTERACTIVE, m, min(c, u * c + 1.0))
            if es <= 0:
                continue
            scv = max(es2 / es**2 - 1.0, 0.0)
            (p, pw_k, cond_k), _ = noise_averaged_wait(
                np.array([u]), np.array([sig]), np.array([es]), np.array([scv]), np.array([cq]),
                z, wq, per_node=True,
            )  # fmt: skip
            wait[r, i] = float((p * pw_k * cond_k).sum())
            slack = max(slo_s - float(service.e_pf[t, CLASS_INTERACTIVE, m]), 0.0)
            with np.errstate(divide="ignore", over="ignore"):
                tail = np.where(cond_k > 0, np.exp(-slack / np.maximum(cond_k, 1e-12)), 0.0)
            miss[r, i] = float((p * pw_k * tail).sum())
    return UTIL_GRID.copy(), wait, miss


def noise_averaged_wait(rho, sigma, es, scv, cq, z, w, per_node: bool = False):
    """M/G/c wait averaged over Gauss–Hermite nodes of a lognormal rate multiplier.

    Arrays are per queue (leading axis); ``z, w`` are the nodes and normalised weights. Nodes
    are weighted by their arrival rate. A node above :data:`RHO_MAX_STABLE` is an overloaded
    minute: everyone waits the stable-limit wait plus the mean of a linear fluid build-up over
    the noise period, (rho - rho_max) T / 2. Returns (P(wait), mean wait given waiting), or
    with ``per_node`` the node probabilities and per-node values.
    """
    rho = np.asarray(rho, dtype=float)[:, None]
    sigma = np.asarray(sigma, dtype=float)[:, None]
    es = np.asarray(es, dtype=float)[:, None]
    scv = np.asarray(scv, dtype=float)[:, None]
    cq = np.maximum(np.asarray(cq, dtype=float), 1.0)[:, None]
    mult = np.exp(sigma * z[None, :] - 0.5 * sigma**2)
    raw = rho * mult
    rho_k = np.minimum(raw, RHO_MAX_STABLE)
    lam_k = rho_k * cq / np.maximum(es, 1e-12)
    _, pw_k, cond_k = mgc_wait_s(lam_k, es, scv, cq)
    over = raw > RHO_MAX_STABLE
    pw_k = np.where(over, 1.0, pw_k)
    cond_k = np.where(np.isfinite(cond_k), cond_k, 0.0)
    cond_k = cond_k + np.where(over, (raw - RHO_MAX_STABLE) * NOISE_PERIOD_S / 2.0, 0.0)
    p = w[None, :] * mult
    p = p / p.sum(axis=1, keepdims=True)
    if per_node:
        return (p[0], pw_k[0], cond_k[0]), None
    pw = (p * pw_k).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(pw > 0, (p * pw_k * cond_k).sum(axis=1) / pw, 0.0)
    return pw, np.where(np.isfinite(cond), cond, 0.0)
