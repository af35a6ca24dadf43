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

from greenroute.core.types import N_CLASSES
from greenroute.data.requests import CLASS_DEFERRABLE, CLASS_INTERACTIVE
from greenroute.sim import fluid_kernel as FK
from greenroute.sim.queueing import mgc_wait_s
from greenroute.sim.scenario import TraceWorkload

NOISE_PERIOD_S = 60.0  # the workload generator's noise is piecewise constant per minute
# minutes of epoch history the minute backlog looks back over: at 85 % and sigma 0.2126 its
# Spitzer series reaches about 60 minutes (the terms fall below 1e-4 s), so 240 leave margin
NOISE_LOOKBACK_MIN = 240
NOISE_NODES = 9  # Gauss–Hermite nodes over the minute's lognormal rate multiplier
# Join-the-shortest-queue pooling exponent: n servers of c slots under least-loaded queue like
# one M/G/(c n^x). Fitted by ``python -m greenroute.bench.calibrate`` (x = 1 would be perfect
# pooling, 0 independent servers); checked by tests/test_fluid_calibration.py.
JSQ_POOLING_EXPONENT = 0.35
# Share of the minute-scale rate noise the queue feels: a queue does not reach its stationary
# wait within one minute, so it responds to a damped noise. Fitted with the exponent above.
NOISE_SIGMA_SCALE = 0.85
RHO_MAX_STABLE = 0.98  # above this a noise node is an overloaded minute (linear build-up)


_INFO_KEYS = ("it_energy_kwh", "carbon_kg", "water_m3", "cost_usd", "completed", "slo_misses",
              "held", "backlog_requests")  # fmt: skip


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
        # state: rows of one array each (the compiled step takes few, packed arguments)
        self.gstate = np.zeros((4, n_g))
        self.backlog_s, self.backlog_req, self.util, self.busy_slots = self.gstate
        self.util[:] = 0.5
        # ledgers [R, E]
        self.ledgers = np.zeros((4, n_r, n_e))
        self.it_dyn_kwh, self.served_req, self.busy_slot_s, self.dispatched = self.ledgers
        # running totals kept by the compiled step (fluid_kernel.ACC_*)
        self.acc = np.zeros(FK.ACC_SIZE)
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
        self.pools = np.zeros((2, n_o, n_m, n_e))
        self.pool, self.pool_lo = self.pools
        self.lat = prep.latency_s
        z, wq = np.polynomial.hermite_e.hermegauss(NOISE_NODES)
        self.gh_z, self.gh_w = z, wq / wq.sum()
        from greenroute.sim import kernel as K

        jsq = (K.LP_LEAST_LOADED, K.LP_LEAST_CONNECTIONS)
        codes = np.array([K.kernel_code(lp) for lp in sim.local])
        self.pooled = np.isin(codes, jsq)[self.g_region]
        self.local_codes = codes
        self._resident: list[frozenset[int]] | None = None
        self.iteration = sc.resolved_server_model == "iteration"
        if self.iteration:
            self._init_iteration()
        self._init_kernel_buffers()

    def _init_iteration(self) -> None:
        """Iteration server model (``sim/fluid_iteration.py``): the kernel's work unit becomes
        slot-seconds at the running cap (a request costs ``S w`` of them, ``w`` = server-seconds
        per request when ``S`` requests run), so its capacity, backlog and utilisation are those
        of the iteration server; energy and the wait are then corrected per epoch."""
        from greenroute.sim import fluid_path_noise as FPN
        from greenroute.sim.fluid_iteration import class_moments, routing, saturation_work_s

        self.prof = self.svc.iteration_profile()
        slots = np.maximum(self.g_slots, 1.0)
        self.w_sat = saturation_work_s(self.prof, self.types, slots)  # [G, C, M]
        es = slots[:, None, None] * self.w_sat * self.type_ok[:, None, :]
        self.E_pf, self.E_pf2, self.E_pfout = es, es * es, np.zeros_like(es)
        self.E_out = np.zeros_like(self.E_out)
        self.E_out2 = np.zeros_like(self.E_out2)
        self.comp["pre"] = []
        c = np.ascontiguousarray
        prof = self.prof
        self.it_static = (
            c(es), c(self.w_sat), c(self.g_servers), c(self.g_slots), c(self.g_dyn_w_per_slot),
            c(self.g_region, dtype=np.int64), c(self.types, dtype=np.int64), c(prof.tau),
            c(prof.tau2), c(prof.adv), c(prof.decode, dtype=float), c(prof.e_out),
            c(prof.e_out2), c(prof.ahead), c(slots),
        )  # fmt: skip
        self.it_cur = self.it_static
        self._capped: dict[bytes, tuple] = {}
        gh = c(np.stack([self.gh_z, self.gh_w]))
        par = np.array([self.sigma, NOISE_PERIOD_S, RHO_MAX_STABLE])
        split = routing(self.local_codes, self.g_region, self.g_servers)
        c_mom = np.array([class_moments(p, o) for p, o in zip(*self.svc.samples, strict=True)])
        # minute noise on the seed's own path behind least-loaded / least-connections
        # (``fluid_path_noise``): where the scenario has minute noise and its minutes
        pieces = self.sim.prep.piece_counts
        g_path = (split[:, 1] > 0) & (self.sigma > 0) & (pieces is not None)
        self.it_par = (gh, par, c(split, dtype=np.int64), c(c_mom, dtype=float),
                       c(g_path, dtype=np.int64))  # fmt: skip
        self.path_on = bool(g_path.any())
        self.path_law = np.zeros((self.n_g, FPN.N_LAW))
        self.path_mass, self.path_adm, self.path_scal = FPN.new_path_state(self.n_g, self.path_on)
        if self.path_on:
            start_s, length_s, per_origin = pieces
            bounds = np.arange(self.n_e + 1) * float(self.sc.epoch_s)
            self.path_first = np.searchsorted(start_s, bounds - 1e-9)
            self.path_pieces = (c(per_origin), c(length_s, dtype=float))
            self.path_out_sf = FPN.output_survival(list(self.svc.samples[1]))
        self.pre = np.zeros(self.n_g)
        # per group, the utilisation and queue variance of the epochs the minute backlog looks
        # back over (``fluid_noise_backlog.lookback_lindley``): forked with the state
        k_min = max(round(self.sc.epoch_s / NOISE_PERIOD_S), 1)
        self.noise_hist = np.zeros((self.n_g, -(-NOISE_LOOKBACK_MIN // k_min) + 1, 2))
        self.e_pf_it = np.zeros_like(self.svc.e_pf[:, CLASS_INTERACTIVE, :])

    def _init_kernel_buffers(self) -> None:
        """Packed inputs and scratch/output arrays of ``fluid_kernel.fluid_step``."""
        n_g, n_o, n_m = self.n_g, self.n_o, self.n_m
        c = np.ascontiguousarray
        f = self.sim.prep.factors
        water = np.asarray(f.water_onsite_l_per_it_kwh) + np.asarray(f.water_offsite_l_per_it_kwh)
        par = np.array([self.sc.epoch_s, self.slack[0], self.slack[1], self.sigma,
                        JSQ_POOLING_EXPONENT, NOISE_SIGMA_SCALE, RHO_MAX_STABLE, NOISE_PERIOD_S,
                        float(self.sc.ttft_slo_s)])  # fmt: skip
        self.first = np.zeros((n_o, n_m), dtype=np.int64)  # first non-empty held cohort
        self.fbuf = np.zeros(max(self.n_e, 1))
        self.outs = np.zeros((7, n_g))
        self.out = tuple(self.outs)  # b0 slope cap pw cond es_mix served (views)
        self.n_int = np.zeros((n_g, n_o, n_m))
        self.n_gcm = np.zeros((n_g, N_CLASSES, n_m))
        self.info = np.zeros(8)
        self.k_static = (
            c(self.g_region, dtype=np.int64), c(self.type_ok, dtype=bool),
            c(self.pooled, dtype=bool),
            c(np.stack([self.g_servers, self.g_slots, self.g_qlimit, self.g_dyn_w_per_slot])),
            c(np.stack([self.E_pf, self.E_pf2, self.E_pfout])),
            c(np.stack([self.E_out[0], self.E_out2[0]])), c(self.decode, dtype=float),
            c(np.stack([self.gh_z, self.gh_w])), par, self.n_r,
        )  # fmt: skip
        self.k_info = (
            c(self.b.region_idle_kw() * self.sc.epoch_s / 3600.0),
            c(np.stack([np.asarray(f.carbon_g_per_it_kwh), water,
                        np.asarray(f.cost_usd_per_it_kwh)]), dtype=float),
            c(self.lat, dtype=float), c(self.types, dtype=np.int64),
            c(self.svc.e_pf[:, CLASS_INTERACTIVE, :], dtype=float),
        )  # fmt: skip
        self.idle_kwh, self.e_pf_int = self.k_info[0], self.k_info[4]  # also read by sim/fork.py

    @property
    def dropped(self) -> dict[str, float]:
        a = self.acc
        return {
            "queue_full": float(a[FK.ACC_QUEUE_FULL]),
            "no_server_for_model": float(a[FK.ACC_NO_SERVER]),
            "power_cap": float(a[FK.ACC_POWER_CAP]),
        }

    @property
    def deferrable_late(self) -> float:
        return float(self.acc[FK.ACC_LATE])

    @property
    def max_defer_delay_s(self) -> float:
        return float(self.acc[FK.ACC_MAX_DELAY])

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
        """Models loaded in each region (fixed for a fluid run: computed once)."""
        if self._resident is None:
            b = self.b
            self._resident = [
                frozenset(int(m) for m in np.unique(b.server_model0[b.server_region == r]))
                for r in range(self.n_r)
            ]
        return self._resident

    def pending_summary(self, e: int):
        """(count [O], earliest deadline [O], due(t0, H) -> [H+1, O]): held cohorts have
        deadlines uniform over [lowest remaining, arrival + max slack]."""
        # cohorts before a0 are empty for good (see fluid_kernel.release) and cohorts from e
        # on not yet filled: only [a0, e) can hold work
        a0 = min(int(self.first.min()), e) if self.n_m == 1 and self.first.size else 0
        pool, pool_lo = self.pool[:, :, a0:e], self.pool_lo[:, :, a0:e]
        if not pool.any():  # nothing held: the same figures as the general case, sooner
            empty = np.zeros(self.n_o)
            return empty, np.full(self.n_o, np.inf), lambda t0, h: np.zeros((h + 1, self.n_o))
        count = pool.sum(axis=(1, 2))
        lo = np.where(pool > 1e-9, pool_lo, np.inf)
        earliest = lo.min(axis=(1, 2)) if pool.size else np.full(self.n_o, np.inf)
        dt = self.sc.epoch_s
        mass = pool.sum(axis=1)  # [O, A]
        lo_a = pool_lo.min(axis=1) if e > a0 else np.zeros((self.n_o, 0))
        hi_a = np.arange(a0, e) * dt + dt / 2 + self.slack[1]

        def due(t0: float, h: int) -> np.ndarray:
            if e == a0 or not mass.any():
                return np.zeros((h + 1, self.n_o))
            ends = t0 + (np.arange(h + 1) + 1.0) * dt  # [H+1]
            span = np.maximum(hi_a - lo_a, 1e-9)  # [O, A]
            frac = np.clip((ends[:, None, None] - lo_a[None]) / span[None], 0.0, 1.0)
            return (frac * mass[None]).sum(axis=2)

        return count, earliest, due

    # ------------------------------------------------------------------ one epoch
    def step(self, e: int, plan, frac: np.ndarray, obs) -> dict:
        """Serve epoch ``e`` under ``plan`` (compiled: ``fluid_kernel.fluid_step``).

        Deferrable work held back by the plan joins the pool; forced (deadline within the
        margin) and voluntary ((1 - hold) of the rest, oldest first) releases leave it. Flows
        are split over each region's hardware groups by usable slots, served up to capacity
        with the batch size at the fixed point of utilisation, the rest carried as backlog
        (dropped beyond the queue bound); waits are the fluid backlog delay plus the
        noise-averaged M/G/c wait while the backlog is empty."""
        dt = self.sc.epoch_s
        hold = np.zeros(self.n_o) if plan.hold is None else np.asarray(plan.hold, dtype=float)
        margin = 2 * dt + float(np.max(obs.slot_s_per_request[CLASS_DEFERRABLE]))
        route = np.ascontiguousarray(plan.route, dtype=float)
        frac = np.ascontiguousarray(frac, dtype=float)
        k_static = self._iteration_capped(frac) if self.iteration else self.k_static
        FK.fluid_step(
            e, self.counts[e], np.ascontiguousarray(hold), margin, route, frac, *k_static,
            self.gstate, self.ledgers, self.pools, self.first, self.fbuf, self.acc, self.outs,
            self.n_int, self.n_gcm, *self.k_info, self.info,
        )  # fmt: skip
        if self.iteration:
            from greenroute.sim.fluid_iteration import correct_epoch

            pre = correct_epoch(self, e)
        b0, slope, cap, pw, cond, _es_mix, _served = self.out
        n_int = self.n_int
        gg, oo, mm = np.nonzero(n_int > 0)
        if gg.size:
            gr = self.g_region
            cmp = self.comp
            cmp["w"].append(n_int[gg, oo, mm])
            cmp["net2"].append(2.0 * self.lat[oo, gr[gg]])
            cmp["type"].append(self.types[gg, mm])
            cmp["epoch"].append(np.full(gg.size, e))
            cmp["region"].append(gr[gg])
            cmp["b0"].append(b0[gg])
            cmp["slope"].append(slope[gg])
            cmp["cap"].append(cap[gg])
            cmp["pw"].append(pw[gg])
            cmp["cond"].append(cond[gg])
            if self.iteration:
                cmp["pre"].append(pre[gg])
        return self._epoch_info()

    def _iteration_capped(self, frac: np.ndarray) -> tuple:
        """Kernel statics of iteration servers under a power cap that leaves ``k`` of ``S``
        slots usable, as the engine runs them (``iteration_mode.throttled``): at most ``k``
        running, prefill iterations stretched by ``S / k``. A request then costs ``k w(k)``
        slot-seconds (``w`` at ``k`` running with stretched prefill, ``saturation_work_s``), not
        ``S w(S)`` scaled by ``k / S``; a saturated capped server runs ``k`` (occupancy
        ``k / S``, as in the engine). Sets ``it_cur`` for ``correct_epoch``; cached per cap."""
        from greenroute.sim.fluid_iteration import saturation_work_s

        c_eff = np.maximum(np.floor(self.g_slots * frac[self.g_region] + 1e-9), 1.0)
        if np.array_equal(c_eff, np.maximum(self.g_slots, 1.0)):
            self.it_cur = self.it_static
            return self.k_static
        key = c_eff.tobytes()
        hit = self._capped.get(key)
        if hit is None:
            w = saturation_work_s(self.prof, self.types, c_eff, self.g_slots / c_eff)
            es = np.ascontiguousarray(c_eff[:, None, None] * w * self.type_ok[:, None, :])
            k_static = list(self.k_static)
            k_static[4] = np.ascontiguousarray(np.stack([es, es * es, np.zeros_like(es)]))
            it = list(self.it_static)
            it[0], it[1], it[-1] = es, np.ascontiguousarray(w), np.ascontiguousarray(c_eff)
            hit = self._capped[key] = (tuple(k_static), tuple(it))
        self.it_cur = hit[1]
        return hit[0]

    def _epoch_info(self) -> dict:
        """Figures of the epoch just served, for step-wise consumers (RL rewards, the gateway):
        IT energy, carbon, water and cost with idle power; completed requests; expected SLO
        misses (interactive queueing wait beyond the slack left after the network and the mean
        prefill, exponential tail of the M/G/c wait, plus late deferrable work); work held
        and backlog (computed by the compiled step)."""
        v = self.info.tolist()
        return dict(zip(_INFO_KEYS, v, strict=True))

    def snapshot(self, e0: int, e1: int) -> dict:
        """State that epochs ``e0..e1-1`` may change (see ``sim/fork.py``)."""
        from greenroute.sim.fork import fluid_snapshot

        return fluid_snapshot(self, e0, e1)

    def restore(self, snap: dict) -> None:
        from greenroute.sim.fork import fluid_restore

        fluid_restore(self, snap)

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
        # iteration servers: the arrival's residual iteration + its own prefill iteration
        pre = c["pre"] if self.iteration else e_pf
        stoch_mean = c["pw"] * c["cond"]
        mean_each = (
            c["net2"]
            + pre
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
        if self.iteration:
            pf = pf + (pre - e_pf)[pick]
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
        from greenroute.sim.service import interp_extrap

        prompts = self.sim.prep.prompt_sample
        out = np.empty(types.size)
        for t in np.unique(types):
            sel = types == t
            p = prompts[rng.integers(0, prompts.size, int(sel.sum()))]
            out[sel] = interp_extrap(p.astype(float), self.b.prefill_tok[t], self.b.prefill_s[t])
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
    done: dict[tuple[int, int, float, float], int] = {}
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
        key = (t, m, c, n)
        if key in done:  # regions with the same servers have the same curve
            wait[r], miss[r] = wait[done[key]], miss[done[key]]
            continue
        done[key] = r
        for i, u in enumerate(UTIL_GRID):
            if u <= 0:
                continue
            es, es2 = service.moments(t, CLASS_INTERACTIVE, m, min(c, u * c + 1.0))
            if es <= 0:
                continue
            scv = max(es2 / es**2 - 1.0, 0.0)
            # compiled (no scipy import on the fluid path); = noise_averaged_wait(per_node=True)
            p, pw_k, cond_k = np.empty(z.size), np.empty(z.size), np.empty(z.size)
            FK.noise_nodes(float(u), sig, es, scv, cq, z, wq, RHO_MAX_STABLE, NOISE_PERIOD_S,
                           p, pw_k, cond_k)  # fmt: skip
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
