"""MACCS (Multi-Agent Cache-aware Cooperative Scheduling), our reading of seed 003.

One agent per region. Each window, agent ``i`` sees (:meth:`MaccsCore.observe`) its id, every
region's carbon intensity, price and estimated wait, how many tasks its origin sent this window,
which share of those tasks' bytes each region already caches, and every cache's fill level. It
acts with a pair ``(target, migrate)``:

- ``target``: the region it may forward its tasks to (``target == i`` keeps them home). Each of
  its tasks then goes to the cheapest, by the estimated objective, of its candidate regions
  (``candidates``):

  - ``"estimate"`` (default): {origin, target, the task's best cache-affinity region, the
    estimate's best region}: accept, forward, follow the cache, or follow the estimate. This
    is our reading of the abstract's "cooperative" placement: the agents decide where caches
    go (migration, to their target), and each task takes the best region the shared estimate
    knows of. The estimate's best region is the lowest-objective region of all, so the task
    goes there: the placement is ``gcos-greedy``'s on the same cache state and migrations,
    and the learned parts are the target as a migration destination and the migrate flag;
  - ``"cache"``: {origin, target, best cache-affinity region}; accept, forward, or follow the
    cache (the behaviour before 2026-11-26, when the learned target also limited placement);
- ``migrate``: 1 copies the objects its origin asked for at least twice in the last windows
  into ``target``'s caches (at most ``budget_gb`` per window) before the tasks are placed.

All agents share one reward, minus the window's objective (cost + carbon weight * carbon + wait
penalty) over ``reward_scale``. The estimated wait uses the execution-time predictor's wait
estimate (DiPTree's upper quantile, or the mean in the ablation), the per-task cost its energy
estimate (the predictive mean by default; ``predictor.make_backlog``).
"""

from __future__ import annotations

import numpy as np

from greenroute.core.errors import UnknownNameError
from greenroute.policies.gcos.common import Weights
from greenroute.policies.gcos.greedy import (
    HotObjects,
    affinity_region,
    hot_migrations,
    place_batch,
)
from greenroute.policies.gcos.predictor import ExecPredictor, make_backlog
from greenroute.sim.gcos.engine import Decision, WindowResult

CI_SCALE_G_PER_KWH = 1000.0
PRICE_SCALE_USD_PER_KWH = 0.2
WAIT_SCALE_S = 3600.0
BATCH_SCALE = 50.0
CANDIDATE_SETS = ("estimate", "cache")


def obs_dim(n_regions: int) -> int:
    return 7 * n_regions + 1


class MaccsCore:
    """Observation and action semantics of MACCS over one :class:`GcosSim` run."""

    def __init__(self, predictor: ExecPredictor, weights: Weights, migrate: bool = True,
                 budget_gb: float = 10.0, reward_scale: float = 5.0,
                 local_share: float = 0.0, candidates: str = "estimate") -> None:  # fmt: skip
        if candidates not in CANDIDATE_SETS:
            raise UnknownNameError("MACCS candidate set", candidates, CANDIDATE_SETS)
        self.predictor, self.weights, self.candidates = predictor, weights, candidates
        self.migrate, self.budget_gb, self.reward_scale = migrate, budget_gb, reward_scale
        self.local_share = local_share

    def reset(self, sim) -> None:
        self.sim = sim
        self.backlog = make_backlog(sim, self.predictor)
        self.hot = HotObjects(sim.n_regions)
        self.ordered: list[tuple[int, object]] = []

    def observe(self) -> np.ndarray:
        sim, R = self.sim, self.sim.n_regions
        self.backlog.refresh()
        h = sim.hour(sim.now_s)
        ci = sim.ci[h] / CI_SCALE_G_PER_KWH
        price = sim.price[h] / PRICE_SCALE_USD_PER_KWH
        wait = np.minimum([self.backlog.wait_s(r) / WAIT_SCALE_S for r in range(R)], 3.0)
        fill = [c.used_gb / c.capacity_gb for c in sim.model_cache]
        fill += [c.used_gb / c.capacity_gb for c in sim.data_cache]
        batch = sim.batch()
        counts = np.bincount(sim.tasks.origin[batch], minlength=R) / BATCH_SCALE
        cached = np.zeros((R, R))  # [origin, region] share of the batch's bytes cached there
        need = np.zeros(R)
        for i in batch:
            o = int(sim.tasks.origin[i])
            for key in sim.task_keys(int(i)):
                size = sim.size_gb(key)
                need[o] += size
                for r in range(R):
                    if sim.cached(key, r):
                        cached[o, r] += size
        cached /= np.maximum(need, 1e-9)[:, None]
        shared = np.concatenate([ci, price, wait, fill]).astype(np.float32)
        out = np.zeros((R, obs_dim(R)), dtype=np.float32)
        for i in range(R):
            out[i, :R] = np.eye(R)[i]
            out[i, R : 6 * R] = shared
            out[i, 6 * R : 7 * R] = cached[i]
            out[i, 7 * R] = counts[i]
        return out

    def act(self, actions: np.ndarray) -> Decision:
        """``actions`` [R, 2]: (target region, migrate flag) per agent."""
        sim = self.sim
        acts = np.asarray(actions, dtype=np.int64).reshape(sim.n_regions, 2)
        migs = []
        self.ordered = []
        if self.migrate:
            for o, (target, flag) in enumerate(acts):
                if flag:
                    mine = hot_migrations(sim, self.hot, o, int(target), self.budget_gb)
                    self.ordered += [(o, m) for m in mine]
                    migs += mine

        every = range(sim.n_regions)

        def candidates(i: int, planned: set) -> list[int]:
            o = int(sim.tasks.origin[i])
            if self.candidates == "estimate":
                # origin, target and affinity region are regions too: the union with the
                # estimate's best region is the lowest objective over all regions
                return list(every)
            return sorted({o, int(acts[o, 0]), affinity_region(sim, i, planned)})

        # the copies ordered this window are already paid for: a task placed with them does
        # not pay the fetch again, and the target counts them for cache affinity
        migrated = {(m.key, m.dst) for m in migs}
        placements = place_batch(sim, self.backlog, self.weights, candidates, migrated)
        self.hot.record(sim)
        return Decision(placements, migs)

    def reward(self, res: WindowResult) -> float:
        w = self.weights
        obj = res.cost_usd + w.carbon_usd_per_kg * res.carbon_kg + w.wait_usd_per_h * res.wait_h
        return -obj / self.reward_scale

    def rewards(self, res: WindowResult, batch: np.ndarray, migrated: np.ndarray) -> np.ndarray:
        """Per agent: ``(1 - local_share)`` times the shared reward plus ``local_share`` times
        ``R`` times minus the objective of its own origin's tasks and migrations (0: fully
        cooperative, the default). ``migrated[o]``: objective of the copies agent o ordered."""
        sim, w, R = self.sim, self.weights, self.sim.n_regions
        shared = self.reward(res)
        if self.local_share == 0.0:
            return np.full(R, shared)
        o = sim.tasks.origin[batch]
        wait_h = (sim.start_s[batch] - sim.tasks.arrival_s[batch]) / 3600.0
        per = sim.task_usd[batch] + w.carbon_usd_per_kg * sim.task_kg[batch]
        own = np.bincount(o, weights=per + w.wait_usd_per_h * wait_h, minlength=R) + migrated
        return (1.0 - self.local_share) * shared - self.local_share * R * own / self.reward_scale


class MaccsPolicy:
    """A trained shared actor (anything with SB3's ``predict(obs, deterministic=True)``)
    driving :class:`MaccsCore`."""

    def __init__(self, actor, core: MaccsCore, name: str = "maccs") -> None:
        self.actor, self.core, self.name = actor, core, name

    def reset(self, sim) -> None:
        self.core.reset(sim)

    def decide(self, sim) -> Decision:
        actions, _ = self.actor.predict(self.core.observe(), deterministic=True)
        return self.core.act(actions)
