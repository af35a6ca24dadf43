"""GCOS per-task placement among candidate regions, and hot-object migration.

:func:`place_batch` sends each task of a window to the candidate region with the lowest
estimated objective (:func:`~greenroute.policies.gcos.common.task_cost`: compute, fetches of
uncached objects, wait). ``gcos-greedy`` uses every region as a candidate; MACCS's candidates
are set by its ``candidates`` option (:mod:`~greenroute.policies.gcos.maccs`).

:func:`hot_migrations` copies the objects an origin asked for most in its recent windows into a
target region's caches (up to ``budget_gb`` per window), so later tasks there start warm.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence

import numpy as np

from greenroute.policies.gcos.common import Backlog, Weights, plan_keys, task_cost
from greenroute.policies.gcos.predictor import ExecPredictor, make_backlog
from greenroute.sim.gcos.engine import Decision, Migration


def affinity_region(sim, i: int, planned: set) -> int:
    keys = sim.task_keys(i)
    best, best_gb = int(sim.tasks.origin[i]), -1.0
    for r in range(sim.n_regions):
        gb = sum(sim.size_gb(k) for k in keys if sim.cached(k, r) or (k, r) in planned)
        if gb > best_gb + 1e-12:
            best, best_gb = r, gb
    return best


def place_batch(
    sim,
    backlog: Backlog,
    weights: Weights,
    candidates: Callable[[int, set], Sequence[int]],
    planned: set | None = None,
) -> list[int]:
    """``planned``: (key, region) pairs already on their way this window (migrations), which
    a placement there does not pay for again."""
    planned = set() if planned is None else set(planned)
    out = []
    for i in sim.batch():
        i = int(i)
        best, best_j = -1, np.inf
        for r in candidates(i, planned):
            e_s, wait_s = backlog.energy_est[i], backlog.wait_s(r)
            _, _, j = task_cost(sim, i, r, e_s, planned, weights, wait_s)
            if j < best_j:
                best, best_j = r, j
        backlog.add(i, best)
        plan_keys(sim, i, best, planned)
        out.append(best)
    return out


class HotObjects:
    """Per-origin request counts of objects over the last ``history`` windows."""

    def __init__(self, n_regions: int, history: int = 12) -> None:
        self.windows: list[deque] = [deque(maxlen=history) for _ in range(n_regions)]

    def record(self, sim) -> None:
        per: list[Counter] = [Counter() for _ in self.windows]
        for i in sim.batch():
            for k in sim.task_keys(int(i)):
                per[int(sim.tasks.origin[i])][k] += 1
        for q, c in zip(self.windows, per, strict=True):
            q.append(c)

    def top(self, origin: int) -> list[tuple]:
        total: Counter = Counter()
        for c in self.windows[origin]:
            total.update(c)
        return [k for k, n in total.most_common() if n >= 2]


def hot_migrations(sim, hot: HotObjects, origin: int, dst: int, budget_gb: float) -> list:
    out, used = [], 0.0
    for key in hot.top(origin):
        if sim.cached(key, dst):
            continue
        size = sim.size_gb(key)
        if used + size > budget_gb:
            continue
        out.append(Migration(key, dst))
        used += size
    return out


class GcosGreedy:
    """Every region a candidate; optional migration of each origin's hot objects to the
    region where most of its tasks went last window."""

    name = "gcos-greedy"

    def __init__(self, predictor: ExecPredictor, weights: Weights, migrate: bool = False,
                 budget_gb: float = 20.0) -> None:  # fmt: skip
        self.predictor, self.weights = predictor, weights
        self.migrate, self.budget_gb = migrate, budget_gb

    def reset(self, sim) -> None:
        self.backlog = make_backlog(sim, self.predictor)
        self.hot = HotObjects(sim.n_regions)
        self.last_target = list(range(sim.n_regions))

    def decide(self, sim) -> Decision:
        self.backlog.refresh()
        all_r = range(sim.n_regions)
        placements = place_batch(sim, self.backlog, self.weights, lambda i, p: all_r)
        migs = []
        if self.migrate:
            for o in range(sim.n_regions):
                migs += hot_migrations(sim, self.hot, o, self.last_target[o], self.budget_gb)
        self.hot.record(sim)
        batch = sim.batch()
        for o in range(sim.n_regions):
            mine = [p for i, p in zip(batch, placements, strict=True) if sim.tasks.origin[i] == o]
            if mine:
                self.last_target[o] = Counter(mine).most_common(1)[0][0]
        return Decision(placements, migs)
