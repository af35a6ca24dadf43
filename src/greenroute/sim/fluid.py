"""Epoch-level fluid model: month-long, many-region runs in seconds.

Per epoch and hardware group the routed requests become work in slot-seconds (expected service
time from the same perf tables and length distributions as the request engine, at the batch
size implied by the group's utilisation). Work beyond the epoch's capacity is carried as
backlog (FIFO), beyond the queue bound it is dropped. Waiting time = the fluid backlog delay
(backlog / service rate, averaged over the epoch) + the stochastic M/G/c wait of
Allen–Cunneen while the backlog is empty. Energy is exact given the served work: each busy
slot draws (peak - idle) / slots on top of idle power, as in the request engine.

Deferrable work held back by the plan is kept per (origin, arrival epoch) cohort, with
deadlines uniform over the workload's slack; releases are earliest-deadline-first within a
cohort and oldest cohort first across cohorts, forced when deadlines come within the margin.
The calibration test (tests/test_fluid_calibration.py) checks carbon, energy and mean TTFT
against the request engine on a window both can run.
"""

from __future__ import annotations

import numpy as np

from greenroute.data.workload import CLASS_DEFERRABLE, CLASS_INTERACTIVE
from greenroute.sim.queueing import mgc_wait_s
from greenroute.sim.scenario import TraceWorkload
from greenroute.sim.types import N_CLASSES


class FluidBackend:
    def __init__(self, sim) -> None:
        self.sim = sim
        prep = sim.prep
        sc = prep.scenario
        b = prep.built
        self.b = b
        self.sc = sc
        self.svc = prep.service
        self.counts = prep.counts  # [E, O, C, M]
        n_e, n_o, n_r, n_m = sc.n_epochs, len(sc.origins), b.n_regions, b.n_models
        self.n_e, self.n_o, self.n_r, self.n_m = n_e, n_o, n_r, n_m
        self.n_g = len(b.hw_groups)
        g_idx = np.arange(self.n_g)
        self.g_region = b.hw_region
        self.g_servers = np.bincount(b.server_hw, minlength=self.n_g).astype(float)
        self.g_slots = np.array([g.max_concurrency for g in b.hw_groups], dtype=float)
        first = np.array([np.flatnonzero(b.server_hw == g)[0] if self.g_servers[g] else 0
                          for g in g_idx])  # fmt: skip
        self.g_idle_w = b.server_idle_w[first] * (self.g_servers > 0)
        self.g_peak_w = b.server_peak_w[first] * (self.g_servers > 0)
        self.g_qlimit = b.queue_limit[first].astype(float)
        self.g_dyn_w_per_slot = (self.g_peak_w - self.g_idle_w) / self.g_slots
        # state
        self.backlog_s = np.zeros(self.n_g)  # slot-seconds waiting
        self.backlog_req = np.zeros(self.n_g)
        self.util = np.full(self.n_g, 0.5)
        self.busy_slots = np.zeros(self.n_g)
        # ledgers
        self.it_dyn_kwh = np.zeros((n_r, n_e))
        self.served_req = np.zeros((n_r, n_e))
        self.busy_slot_s = np.zeros((n_r, n_e))
        self.dispatched = np.zeros((n_r, n_e))
        self.dropped = {"queue_full": 0.0, "no_server_for_model": 0.0, "power_cap": 0.0}
        self.completed = 0.0
        self.completed_by_class = np.zeros(N_CLASSES)
        self.deferrable_late = 0.0
        self.max_defer_delay_s = 0.0
        # TTFT components (interactive): appended per epoch
        self.comp: dict[str, list[np.ndarray]] = {k: [] for k in (
            "w", "net2", "group", "model", "b0", "slope", "cap", "pw", "cond", "epoch", "region"
        )}  # fmt: skip
        # deferrable pool: [O, M, E] remaining mass per arrival cohort, lowest remaining deadline
        wl = sc.workload
        slack = (0.0, 0.0) if isinstance(wl, TraceWorkload) else wl.deadline_slack_s
        self.slack = (float(slack[0]), float(slack[1]))
        self.pool = np.zeros((n_o, n_m, n_e))
        self.pool_lo = np.zeros((n_o, n_m, n_e))  # lowest remaining deadline (absolute s)
        self.lat = prep.latency_s

    # ------------------------------------------------------------------ observation state
    def region_state(self, e: int) -> dict[str, np.ndarray]:
        r = self.g_region
        busy = np.bincount(r, weights=self.busy_slots, minlength=self.n_r)
        queue = np.bincount(r, weights=self.backlog_req, minlength=self.n_r)
        backlog = np.bincount(r, weights=self.backlog_s, minlength=self.n_r)
        return {"busy": busy, "queue": queue, "backlog": backlog, "kv_used": np.zeros(self.n_r)}

    def resident_models(self) -> list[frozenset[int]]:
        b = self.b
        return [frozenset(int(m) for m in np.unique(b.server_model0[b.server_region == r]))
                for r in range(self.n_r)]  # fmt: skip

    def pending_summary(self, e: int) -> tuple[np.ndarray, np.ndarray]:
        count = self.pool.sum(axis=(1, 2))
        earliest = np.full(self.n_o, np.inf)
        has = self.pool > 1e-9
        lo = np.where(has, self.pool_lo, np.inf)
        earliest = lo.min(axis=(1, 2)) if self.pool.size else earliest
        return count, earliest

    # ------------------------------------------------------------------ one epoch
    def step(self, e: int, plan, frac: np.ndarray, obs) -> None:
        sc, svc = self.sc, self.svc
        dt = sc.epoch_s
        t0 = e * dt
        t0 + dt
        cnt = self.counts[e]  # [O, C, M]
        hold = np.zeros(self.n_o) if plan.hold is None else np.asarray(plan.hold, dtype=float)
        margin = 2 * dt + float(np.max(obs.slot_s_per_request[CLASS_DEFERRABLE]))
        s_lo, s_hi = self.slack
        # -- deferrable pool: forced + voluntary releases (EDF within cohort, oldest first)
        released = np.zeros((self.n_o, self.n_m))
        late_release = np.zeros((self.n_o, self.n_m))  # mass whose deadline < t0 + margin
        if e > 0:
            for o in range(self.n_o):
                for m in range(self.n_m):
                    row = self.pool[o, m, :e]
                    if not row.any():
                        continue
                    lo = self.pool_lo[o, m, :e]
                    hi = np.arange(e) * dt + dt / 2 + s_hi
                    span = np.maximum(hi - lo, 1e-9)
                    forced_frac = np.clip((t0 + margin - lo) / span, 0.0, 1.0)
                    forced = row * forced_frac
                    late_release[o, m] += forced.sum()
                    row = row - forced
                    lo = lo + forced_frac * span
                    k = (1.0 - hold[o]) * row.sum()
                    vol = np.zeros_like(row)
                    for a in np.flatnonzero(row > 0):  # oldest cohort first
                        take = min(k, row[a])
                        vol[a] = take
                        k -= take
                        if k <= 1e-12:
                            break
                    with np.errstate(divide="ignore", invalid="ignore"):
                        vfrac = np.where(row > 0, vol / row, 0.0)
                    lo = lo + vfrac * (hi - lo)
                    rel = forced + vol
                    released[o, m] += rel.sum()
                    if rel.max() > 0.5:
                        oldest = np.flatnonzero(rel > 0.5)[0]
                        self.max_defer_delay_s = max(self.max_defer_delay_s, t0 - oldest * dt)
                    self.pool[o, m, :e] = row - vol
                    self.pool_lo[o, m, :e] = lo
        # -- new deferrable arrivals: a share is held (all have slack >= margin?)
        d_new = cnt[:, CLASS_DEFERRABLE, :]
        holdable = 1.0 if s_lo + dt / 2 - dt >= margin else 0.0
        to_pool = d_new * hold[:, None] * holdable
        self.pool[:, :, e] = to_pool
        self.pool_lo[:, :, e] = t0 + dt / 2 + s_lo
        disp = np.zeros((N_CLASSES, self.n_o, self.n_m))
        disp[CLASS_INTERACTIVE] = cnt[:, CLASS_INTERACTIVE, :]
        disp[CLASS_DEFERRABLE] = d_new - to_pool + released
        # -- route: n[c, o, r, m]
        route = np.asarray(plan.route, dtype=float)
        flows = disp[:, :, None, :] * route[:, :, :, None]
        per_region = flows.sum(axis=1)  # [C, R, M]
        self.dispatched[:, e] = per_region.sum(axis=(0, 2))
        # -- split each region's flow over its hardware groups by usable slots
        eff_slots = self.g_servers * np.floor(self.g_slots * frac[self.g_region] + 1e-9)
        reg_eff = np.bincount(self.g_region, weights=eff_slots, minlength=self.n_r)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(reg_eff[self.g_region] > 0, eff_slots / reg_eff[self.g_region], 0.0)
        no_cap = reg_eff <= 0
        if no_cap.any():
            lost = per_region[:, no_cap, :].sum()
            self.dropped["power_cap"] += float(lost)
        b = self.b
        for g in range(self.n_g):
            r = self.g_region[g]
            if share[g] <= 0:
                self.busy_slots[g] = 0.0
                continue
            c_eff = max(1.0, np.floor(self.g_slots[g] * frac[r] + 1e-9))
            n_cm = per_region[:, r, :] * share[g]  # [C, M] requests this epoch
            ok = np.array([b.type_ok[g * self.n_m + m] for m in range(self.n_m)])
            if (~ok).any():
                self.dropped["no_server_for_model"] += float(n_cm[:, ~ok].sum())
                n_cm = n_cm * ok[None, :]
            n_req = n_cm.sum()
            cap_rate = self.g_servers[g] * c_eff  # slot-seconds per second
            es_mix = es2_mix = 0.0
            for _ in range(3):  # fixed point: batch size <-> utilisation
                batch = max(1.0, min(c_eff, self.util[g] * c_eff))
                es_mix = es2_mix = 0.0
                work = 0.0
                for c in range(N_CLASSES):
                    for m in range(self.n_m):
                        if n_cm[c, m] <= 0:
                            continue
                        es, es2 = svc.moments(g * self.n_m + m, c, m, batch)
                        work += n_cm[c, m] * es
                        es_mix += n_cm[c, m] * es
                        es2_mix += n_cm[c, m] * es2
                if n_req > 0:
                    es_mix /= n_req
                    es2_mix /= n_req
                b0 = self.backlog_s[g]
                served = min(b0 + work, cap_rate * dt)
                self.util[g] = served / (cap_rate * dt) if cap_rate > 0 else 0.0
            if n_req <= 0 and self.backlog_s[g] <= 0:
                self.busy_slots[g] = 0.0
                continue
            if es_mix <= 0:  # only backlog: keep the previous mean service
                es_mix = self.backlog_s[g] / max(self.backlog_req[g], 1e-12)
                es2_mix = es_mix**2
            b0 = self.backlog_s[g]
            a_rate = work / dt
            slope = a_rate - cap_rate
            served = min(b0 + work, cap_rate * dt)
            new_b = b0 + work - served
            # queue bound: per-server FIFO limit (requests)
            lim = self.g_qlimit[g] * self.g_servers[g] * es_mix
            if new_b > lim:
                self.dropped["queue_full"] += (new_b - lim) / es_mix
                new_b = lim
            self.backlog_s[g] = new_b
            self.backlog_req[g] = new_b / es_mix if es_mix > 0 else 0.0
            self.busy_slots[g] = served / dt
            kwh = served * self.g_dyn_w_per_slot[g] / 3.6e6
            self.it_dyn_kwh[r, e] += kwh
            self.busy_slot_s[r, e] += served
            served_req = served / es_mix if es_mix > 0 else 0.0
            self.served_req[r, e] += served_req
            self.completed += served_req
            # stochastic wait while the fluid backlog is empty (Allen–Cunneen M/G/c)
            lam_srv = n_req / dt / max(self.g_servers[g], 1.0)
            scv = max(es2_mix / es_mix**2 - 1.0, 0.0) if es_mix > 0 else 1.0
            _, pw, cond = mgc_wait_s(np.array(lam_srv), np.array(es_mix), np.array(scv),
                                     np.array(int(c_eff)))  # fmt: skip
            pw, cond = float(pw), float(cond)
            if not np.isfinite(cond):
                pw, cond = 0.0, 0.0  # unstable: the fluid backlog term carries the delay
            # deferrable deadline misses among released mass (deadline before finish)
            # deferrable deadline misses: released work whose deadline falls before it can
            # finish. Released mass has deadlines >= t0 + margin except the forced share, whose
            # deadlines spread uniformly over [t0, t0 + margin).
            wait_mean = float(_fluid_wait_mean(b0, slope, cap_rate, dt)) + pw * cond
            finish_after = wait_mean + es_mix
            forced_here = (
                float(late_release.sum())
                * float(
                    per_region[CLASS_DEFERRABLE, r].sum() / max(disp[CLASS_DEFERRABLE].sum(), 1e-12)
                )
                * share[g]
            )
            late = forced_here * min(1.0, finish_after / margin)
            if finish_after > margin:
                late = float(n_cm[CLASS_DEFERRABLE].sum())
            self.deferrable_late += late
            # TTFT components per origin (interactive)
            n_int = flows[CLASS_INTERACTIVE, :, r, :] * share[g]  # [O, M]
            oo, mm = np.nonzero(n_int > 0)
            if oo.size:
                k = oo.size
                self.comp["w"].append(n_int[oo, mm])
                self.comp["net2"].append(2.0 * self.lat[oo, r])
                self.comp["group"].append(np.full(k, g))
                self.comp["model"].append(mm)
                self.comp["b0"].append(np.full(k, b0))
                self.comp["slope"].append(np.full(k, slope))
                self.comp["cap"].append(np.full(k, cap_rate))
                self.comp["pw"].append(np.full(k, pw))
                self.comp["cond"].append(np.full(k, cond))
                self.comp["epoch"].append(np.full(k, e))
                self.comp["region"].append(np.full(k, r))

    # ------------------------------------------------------------------ TTFT summary
    def ttft_summary(self, slo_s: float, seed: int, n_samples: int = 200_000) -> dict[str, float]:
        if not self.comp["w"]:
            return {"mean": float("nan"), "p50": float("nan"), "p95": float("nan"),
                    "p99": float("nan"), "viol_frac": 0.0, "n": 0.0}  # fmt: skip
        c = {k: np.concatenate(v) for k, v in self.comp.items()}
        dt = self.sc.epoch_s
        svc = self.svc
        types = c["group"] * self.n_m + c["model"]
        e_pf = svc.e_pf[types, CLASS_INTERACTIVE, c["model"]]
        fluid_w = _fluid_wait_mean(c["b0"], c["slope"], c["cap"], dt)
        mean_each = (
            c["net2"] + e_pf + fluid_w + _zero_frac(c["b0"], c["slope"], dt) * c["pw"] * (c["cond"])
        )
        w = c["w"]
        mean = float((w * mean_each).sum() / w.sum())
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7F7F]))
        p = w / w.sum()
        pick = rng.choice(p.size, size=n_samples, p=p)
        tau = rng.random(n_samples) * dt
        back = np.maximum(0.0, c["b0"][pick] + c["slope"][pick] * tau)
        fluid_part = np.where(c["cap"][pick] > 0, back / np.maximum(c["cap"][pick], 1e-12), 0.0)
        stoch = np.where(
            (back <= 0) & (rng.random(n_samples) < c["pw"][pick]),
            rng.exponential(1.0, n_samples) * c["cond"][pick],
            0.0,
        )
        # prefill sample: draw from the class's length sample through the group's perf table
        pf = self._prefill_sample(types[pick], rng)
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
    # time until the backlog empties (if it shrinks)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_empty = np.where(slope < 0, np.clip(-b0 / slope, 0.0, dt), dt)
    area = np.where(
        end >= 0,
        (b0 + np.maximum(end, 0.0)) / 2.0 * dt,
        b0 * t_empty / 2.0,
    )
    return area / dt / cap


def _zero_frac(b0, slope, dt):
    """Share of the epoch during which the fluid backlog is empty."""
    b0 = np.asarray(b0, dtype=float)
    slope = np.asarray(slope, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_empty = np.where(slope < 0, np.clip(-b0 / slope, 0.0, dt), dt)
    return np.where(slope > 0, 0.0, np.where(b0 <= 0, 1.0, (dt - t_empty) / dt))
