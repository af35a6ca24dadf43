"""GCOS baselines: cache-oblivious lowest-carbon / lowest-price, and greedy cache affinity.

The cache-oblivious ones send each task to the region with the lowest current carbon intensity
(or price) among those whose estimated wait is under ``max_wait_s`` (else the least-waiting
region), ignoring where models and data are. Cache affinity sends a task where the most of its
bytes are already cached (ties and nothing cached: its origin), also subject to ``max_wait_s``.
"""

from __future__ import annotations

import numpy as np

from greenroute.policies.gcos.common import plan_keys
from greenroute.policies.gcos.predictor import ExecPredictor, make_backlog
from greenroute.sim.gcos.engine import Decision


class _Base:
    name = "base"

    def __init__(self, predictor: ExecPredictor, max_wait_s: float = 900.0) -> None:
        self.predictor = predictor
        self.max_wait_s = max_wait_s

    def reset(self, sim) -> None:
        self.backlog = make_backlog(sim, self.predictor)

    def _eligible(self, sim) -> np.ndarray:
        waits = np.array([self.backlog.wait_s(r) for r in range(sim.n_regions)])
        ok = waits <= self.max_wait_s
        return ok if ok.any() else waits == waits.min()

    def decide(self, sim) -> Decision:
        self.backlog.refresh()
        out = []
        planned: set = set()
        for i in sim.batch():
            r = self.pick(sim, int(i), planned)
            self.backlog.add(int(i), r)
            plan_keys(sim, int(i), r, planned)
            out.append(r)
        return Decision(out)

    def pick(self, sim, i: int, planned: set) -> int:
        raise NotImplementedError


class LowestCarbon(_Base):
    name = "lowest-carbon"

    def pick(self, sim, i: int, planned: set) -> int:
        ci = sim.ci[sim.hour(sim.now_s)].astype(float)
        return int(np.argmin(np.where(self._eligible(sim), ci, np.inf)))


class LowestPrice(_Base):
    name = "lowest-price"

    def pick(self, sim, i: int, planned: set) -> int:
        price = sim.price[sim.hour(sim.now_s)].astype(float)
        return int(np.argmin(np.where(self._eligible(sim), price, np.inf)))


class CacheAffinity(_Base):
    name = "cache-affinity"

    def pick(self, sim, i: int, planned: set) -> int:
        keys = sim.task_keys(i)
        ok = self._eligible(sim)
        origin = int(sim.tasks.origin[i])
        score = np.zeros(sim.n_regions)
        for r in range(sim.n_regions):
            score[r] = sum(sim.size_gb(k) for k in keys if sim.cached(k, r) or (k, r) in planned)
        score[origin] += 1e-6  # ties go to the origin
        return int(np.argmax(np.where(ok, score, -np.inf)))


class LocalOnly(_Base):
    name = "local"

    def pick(self, sim, i: int, planned: set) -> int:
        return int(sim.tasks.origin[i])
