"""What GCOS schedulers share: the per-task cost estimate and a predicted backlog per region.

A scheduler does not see the simulator's true execution times. It knows which of its tasks have
not finished yet (completion is observable) and its own execution-time estimates, so a region's
expected wait is the estimated work still in it divided by its GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Weights:
    """The scheduling objective: USD + ``carbon_usd_per_kg`` * kg + ``wait_usd_per_h`` * h."""

    carbon_usd_per_kg: float
    wait_usd_per_h: float

    @classmethod
    def of(cls, sc) -> Weights:
        return cls(sc.carbon_usd_per_kg, sc.wait_usd_per_h)


class Backlog:
    """Estimated work (s) per region from unfinished placed tasks plus this batch's.

    ``est`` (per task, s) fills the backlog, so it sets the estimated waits; ``energy_est``
    (default: the same) is what a scheduler prices a task's compute energy with
    (``predictor.make_backlog`` gives the upper quantile and the mean)."""

    def __init__(
        self, sim, est_exec_s: np.ndarray, energy_exec_s: np.ndarray | None = None
    ) -> None:
        self.sim = sim
        self.est = est_exec_s
        self.energy_est = est_exec_s if energy_exec_s is None else energy_exec_s
        self.work_s = np.zeros(sim.n_regions)

    def refresh(self) -> None:
        sim = self.sim
        placed = sim.placement >= 0
        live = placed & (sim.finish_s > sim.now_s)
        self.work_s = np.bincount(
            sim.placement[live], weights=self.est[live], minlength=sim.n_regions
        ).astype(float)

    def wait_s(self, r: int) -> float:
        return float(self.work_s[r]) / self.sim.sc.gpus_per_region

    def add(self, i: int, r: int) -> None:
        self.work_s[r] += self.est[i]


def task_cost(sim, i: int, r: int, exec_s: float, planned: set, w: Weights, wait_s: float):
    """Estimated (usd, carbon_kg, objective) of running task ``i`` at region ``r`` now:
    compute at r's current price and intensity, fetches of objects neither cached at r nor
    already planned there this window, and the wait (queue and cold start) priced by ``w``."""
    sc = sim.sc
    h = sim.hour(sim.now_s)
    energy = exec_s * sc.gpu_busy_w / 1000.0 * sc.pue / 3600.0
    usd = energy * float(sim.price[h, r])
    kg = energy * float(sim.ci[h, r]) / 1000.0
    cold = float(sim.latency_s[sim.tasks.origin[i], r])
    for key in sim.task_keys(i):
        if sim.cached(key, r) or (key, r) in planned:
            continue
        _, tc = sim.fetch_cost(key, r)
        usd += tc.cost_usd
        kg += tc.carbon_kg
        cold = max(cold, tc.time_s)
    delay_h = (max(wait_s, cold)) / 3600.0
    return usd, kg, usd + w.carbon_usd_per_kg * kg + w.wait_usd_per_h * delay_h


def plan_keys(sim, i: int, r: int, planned: set) -> None:
    for key in sim.task_keys(i):
        planned.add((key, r))
