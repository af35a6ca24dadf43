"""The GCOS simulator: tasks arriving during a window are dispatched together at its end.

Each window a policy returns a :class:`Decision`: a region for every task of the batch and
optional migrations (copies of a model or data object into a region's cache). A placed task
looks up its checkpoint, adapters and data object in the region's caches; a miss fetches the
object from the nearest copy (another region's cache or the object's origin storage) and the
slowest fetch is the task's cold start. The task then waits for the region's earliest free GPU
(queueing overlaps the cold start) and runs for its execution time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from greenroute.catalog import get_region
from greenroute.physics.network import great_circle_km, one_way_latency_s
from greenroute.sim.gcos.cache import ObjectCache
from greenroute.sim.gcos.scenario import GcosScenario
from greenroute.sim.gcos.transfer import (
    GCP_EGRESS_USD_PER_GB_BY_DST_CONTINENT,
    ByteLedger,
    Transfer,
    TransferCost,
    transfer_cost,
)
from greenroute.sim.gcos.workload import Tasks, build_catalogue, load_trace, sample_tasks

SIGNAL_MARGIN_H = 48  # signals loaded beyond the horizon (queues may run past it)


@dataclass(frozen=True)
class Migration:
    key: tuple  # ("m", model) | ("a", model, adapter) | ("d", data)
    dst: int


@dataclass
class Decision:
    placements: list[int]
    migrations: list[Migration] = field(default_factory=list)


@dataclass
class WindowResult:
    cost_usd: float = 0.0
    carbon_kg: float = 0.0
    energy_kwh: float = 0.0
    wait_h: float = 0.0  # summed (start - arrival) over the window's tasks
    n_tasks: int = 0


class GcosSim:
    """Stepwise simulator (``reset`` / ``step``) with a :meth:`run` helper for policies."""

    def __init__(self, sc: GcosScenario, period: str = "eval", data_dir: Path | None = None):
        from greenroute.sim.epoch_signals import hourly_signals

        self.sc = sc
        self.period = period
        self.regions = sc.regions
        R = self.n_regions = len(sc.regions)
        start = sc.eval_start_utc if period == "eval" else sc.train_start_utc
        seed = sc.seed if period == "eval" else sc.seed + 1000
        hours = int(np.ceil(sc.hours)) + SIGNAL_MARGIN_H
        frames = [hourly_signals(r, start, hours, sc.seed, data_dir)[0] for r in sc.regions]
        self.signal_source = hourly_signals(sc.regions[0], start, 1, sc.seed, data_dir)[1]
        self.ci = np.stack([f["carbon_intensity_g_per_kwh"].to_numpy() for f in frames], axis=1)
        self.price = np.stack([f["price_usd_per_kwh"].to_numpy() for f in frames], axis=1)
        trace, self.trace_source = load_trace(data_dir, sc.seed)
        self.trace = trace
        home = sc.regions.index(sc.model_home)
        self.cat = build_catalogue(
            trace, n_regions=R, n_models=sc.n_models, adapters_per_model=sc.adapters_per_model,
            model_median_gb=sc.model_median_gb, model_sigma=sc.model_sigma,
            adapter_median_gb=sc.adapter_median_gb, n_data=sc.n_data,
            data_median_gb=sc.data_median_gb, data_sigma=sc.data_sigma,
            data_min_gb=sc.data_min_gb, data_max_gb=sc.data_max_gb, model_home=home,
            seed=sc.seed,
        )  # fmt: skip
        self.tasks: Tasks = sample_tasks(
            trace, self.cat, n_regions=R, hours=sc.hours, tasks_per_hour=sc.tasks_per_hour,
            data_zipf=sc.data_zipf, data_locality=sc.data_locality,
            process_s_per_gb=sc.process_s_per_gb, seed=seed,
        )  # fmt: skip
        regs = [get_region(r) for r in sc.regions]
        lat = np.array([[g.lat_deg, g.lon_deg] for g in regs])
        km = great_circle_km(lat[:, None, 0], lat[:, None, 1], lat[None, :, 0], lat[None, :, 1])
        self.latency_s = one_way_latency_s(km)
        egress = [GCP_EGRESS_USD_PER_GB_BY_DST_CONTINENT[g.continent] for g in regs]
        self.egress_usd_per_gb = np.array([[0.0 if i == j else egress[j] for j in range(R)]
                                           for i in range(R)])  # fmt: skip
        self.n_windows = int(np.ceil(sc.hours * 3600.0 / sc.window_s))
        edges = np.arange(self.n_windows + 1) * sc.window_s
        self._bounds = np.searchsorted(self.tasks.arrival_s, edges)
        self.reset()

    # ---- state -------------------------------------------------------------------------
    def reset(self) -> None:
        sc, R = self.sc, self.n_regions
        self.model_cache = [ObjectCache(sc.model_cache_gb, sc.eviction) for _ in range(R)]
        self.data_cache = [ObjectCache(sc.data_cache_gb, sc.eviction) for _ in range(R)]
        self.gpu_free_s = [np.zeros(sc.gpus_per_region) for _ in range(R)]
        self.ledger = ByteLedger(R)
        self.window = 0
        self.placement = np.full(len(self.tasks), -1, dtype=np.int64)
        self.start_s = np.full(len(self.tasks), np.nan)
        self.ready_s = np.full(len(self.tasks), np.nan)  # dispatch + cold start
        self.finish_s = np.full(len(self.tasks), np.nan)
        self.compute = {"energy_kwh": 0.0, "carbon_kg": 0.0, "cost_usd": 0.0}
        self.busy_s = np.zeros(R)
        # per task: compute plus the copies its misses caused (migrations are not in these)
        self.task_usd = np.zeros(len(self.tasks))
        self.task_kg = np.zeros(len(self.tasks))

    @property
    def done(self) -> bool:
        return self.window >= self.n_windows

    @property
    def now_s(self) -> float:
        """Dispatch time of the current window (its end)."""
        return (self.window + 1) * self.sc.window_s

    def hour(self, t_s: float) -> int:
        return min(int(t_s // 3600.0), self.ci.shape[0] - 1)

    def batch(self, w: int | None = None) -> np.ndarray:
        w = self.window if w is None else w
        return np.arange(self._bounds[w], self._bounds[w + 1])

    def cache_of(self, key: tuple) -> list[ObjectCache]:
        return self.data_cache if key[0] == "d" else self.model_cache

    def size_gb(self, key: tuple) -> float:
        if key[0] == "m":
            return float(self.cat.model_gb[key[1]])
        if key[0] == "a":
            return float(self.cat.adapter_gb[key[1]][key[2]])
        return float(self.cat.data_gb[key[1]])

    def home(self, key: tuple) -> int:
        return int(self.cat.data_home[key[1]]) if key[0] == "d" else self.cat.model_home

    def task_keys(self, i: int) -> list[tuple]:
        m = int(self.tasks.model[i])
        keys: list[tuple] = [("m", m)] + [("a", m, a) for a in self.tasks.adapters[i]]
        return [*keys, ("d", int(self.tasks.data[i]))]

    def cached(self, key: tuple, r: int) -> bool:
        return key in self.cache_of(key)[r]

    def wait_s(self, r: int, t_s: float | None = None) -> float:
        """Time until region ``r``'s earliest GPU is free."""
        t = self.now_s if t_s is None else t_s
        return max(0.0, float(self.gpu_free_s[r].min()) - t)

    def fetch_cost(
        self, key: tuple, dst: int, t_s: float | None = None
    ) -> tuple[int, TransferCost]:
        """Source and cost of copying ``key`` to ``dst`` from its fastest copy: the object's origin
        storage or, with ``peer_fetch``, any region caching it (ties: the cheaper)."""
        t = self.now_s if t_s is None else t_s
        size = self.size_gb(key)
        cands = [self.home(key)]
        if self.sc.peer_fetch:
            cands += [r for r, c in enumerate(self.cache_of(key)) if key in c]
        best: tuple[int, TransferCost] | None = None
        h = self.hour(t)
        for src in cands:
            tc = transfer_cost(
                size, same_region=src == dst, latency_s=float(self.latency_s[src, dst]),
                wan_gbit_per_s=self.sc.wan_gbit_per_s, local_gbit_per_s=self.sc.local_gbit_per_s,
                kwh_per_gb=self.sc.kwh_per_gb, ci_src_g_per_kwh=float(self.ci[h, src]),
                ci_dst_g_per_kwh=float(self.ci[h, dst]),
                egress_usd_per_gb=float(self.egress_usd_per_gb[src, dst]),
                electricity_usd_per_kwh=float(self.price[h, src]),
            )  # fmt: skip
            if best is None or (tc.time_s, tc.cost_usd) < (best[1].time_s, best[1].cost_usd):
                best = (src, tc)
        assert best is not None
        return best

    def _copy(self, key: tuple, dst: int, t_s: float, reason: str) -> float:
        """Copy ``key`` into ``dst``'s cache; returns when it is ready there."""
        src, tc = self.fetch_cost(key, dst, t_s)
        kind = "data" if key[0] == "d" else "model"
        size = self.size_gb(key)
        self.ledger.record(Transfer(key, kind, reason, src, dst, size, t_s, t_s + tc.time_s,
                                    tc.energy_kwh, tc.carbon_kg, tc.cost_usd))  # fmt: skip
        self.ledger.arrive(dst, size)
        self.cache_of(key)[dst].insert(key, size, fetch_cost=tc.time_s, ready_s=t_s + tc.time_s)
        return t_s + tc.time_s

    # ---- stepping ----------------------------------------------------------------------
    def step(self, decision: Decision) -> WindowResult:
        batch = self.batch()
        if len(decision.placements) != len(batch):
            raise ValueError(f"{len(decision.placements)} placements for {len(batch)} tasks")
        t = self.now_s
        out = WindowResult(n_tasks=len(batch))
        before = len(self.ledger.transfers)
        for mig in decision.migrations:
            if not self.cached(mig.key, mig.dst):
                self._copy(mig.key, mig.dst, t, "migrate")
        for i, r in zip(batch, decision.placements, strict=True):
            self._place(int(i), int(r), t, out)
        for tr in self.ledger.transfers[before:]:
            out.cost_usd += tr.cost_usd
            out.carbon_kg += tr.carbon_kg
            out.energy_kwh += tr.energy_kwh
        self.window += 1
        return out

    def _place(self, i: int, r: int, t: float, out: WindowResult) -> None:
        sc = self.sc
        ready = t + float(self.latency_s[self.tasks.origin[i], r])
        n0 = len(self.ledger.transfers)
        for key in self.task_keys(i):
            cache = self.cache_of(key)[r]
            if cache.touch(key):
                ready = max(ready, cache.ready_s(key))
            else:
                ready = max(ready, self._copy(key, r, t, "miss"))
        free = self.gpu_free_s[r]
        g = int(free.argmin())
        start = max(ready, float(free[g]))
        exec_s = float(self.tasks.exec_s[i])
        free[g] = start + exec_s
        self.busy_s[r] += exec_s
        self.placement[i], self.start_s[i], self.finish_s[i] = r, start, start + exec_s
        self.ready_s[i] = ready
        h = self.hour(start)
        energy = exec_s * sc.gpu_busy_w / 1000.0 * sc.pue / 3600.0
        carbon = energy * float(self.ci[h, r]) / 1000.0
        cost = energy * float(self.price[h, r])
        self.compute["energy_kwh"] += energy
        self.compute["carbon_kg"] += carbon
        self.compute["cost_usd"] += cost
        out.energy_kwh += energy
        out.carbon_kg += carbon
        out.cost_usd += cost
        out.wait_h += (start - float(self.tasks.arrival_s[i])) / 3600.0
        fetched = self.ledger.transfers[n0:]
        self.task_usd[i] = cost + sum(x.cost_usd for x in fetched)
        self.task_kg[i] = carbon + sum(x.carbon_kg for x in fetched)

    def run(self, policy) -> dict[str, float]:
        """Reset, let ``policy`` (``reset(sim)``, ``decide(sim) -> Decision``) run every
        window, and return :meth:`metrics`."""
        self.reset()
        policy.reset(self)
        while not self.done:
            self.step(policy.decide(self))
        return self.metrics()

    def _dispatch_s(self, mask: np.ndarray) -> np.ndarray:
        """Dispatch time (end of the arrival's window) of the tasks in ``mask``."""
        w = self.sc.window_s
        return (np.floor(self.tasks.arrival_s[mask] / w) + 1.0) * w

    def metrics(self) -> dict[str, float]:
        led = self.ledger.totals()
        arr = self.tasks.arrival_s
        done = ~np.isnan(self.finish_s)
        latency = self.finish_s[done] - arr[done]
        mh = sum(c.hits for c in self.model_cache)
        mm = sum(c.misses for c in self.model_cache)
        dh = sum(c.hits for c in self.data_cache)
        dm = sum(c.misses for c in self.data_cache)
        return {
            "tasks": float(done.sum()),
            "cost_usd": self.compute["cost_usd"] + led["transfer_cost_usd"],
            "carbon_kg": self.compute["carbon_kg"] + led["transfer_carbon_kg"],
            "energy_kwh": self.compute["energy_kwh"] + led["transfer_energy_kwh"],
            "compute_energy_kwh": self.compute["energy_kwh"],
            "transfer_cost_usd": led["transfer_cost_usd"],
            "transfer_carbon_kg": led["transfer_carbon_kg"],
            "makespan_s": float(np.nanmax(self.finish_s)) if done.any() else 0.0,
            "mean_latency_s": float(latency.mean()) if done.any() else 0.0,
            "p95_latency_s": float(np.percentile(latency, 95)) if done.any() else 0.0,
            "mean_start_s": float(np.mean(self.start_s[done] - arr[done])) if done.any() else 0.0,
            # start = dispatch + max(cold start, wait for a GPU): the two parts of the delay
            "mean_cold_start_s": float(np.mean(self.ready_s[done] - self._dispatch_s(done)))
            if done.any()
            else 0.0,
            "mean_queue_s": float(np.mean(self.start_s[done] - self.ready_s[done]))
            if done.any()
            else 0.0,
            "queued_share": float(np.mean(self.start_s[done] > self.ready_s[done] + 1e-9))
            if done.any()
            else 0.0,
            "model_hit_rate": mh / (mh + mm) if mh + mm else 0.0,
            "data_hit_rate": dh / (dh + dm) if dh + dm else 0.0,
            "bytes_moved_gb": led["bytes_moved_gb"],
            "bytes_migrated_gb": led["bytes_migrated_gb"],
            # misses served by another region's cache instead of the origin storage
            "peer_fetch_gb": sum(
                t.size_gb
                for t in self.ledger.transfers
                if t.reason == "miss" and t.src != self.home(t.key)
            ),
        }
