"""Who plans each epoch, and the upstream ejections kept in step across gateway replicas.

With the in-process state the replica plans every epoch itself. With shared state (Redis) the
leader plans and publishes the plan as JSON::

    {"id", "epoch", "time_s", "leader", "policy", "regions", "origins", "classes",
     "route": {origin: {class: {region: share}}}, "hold": {origin: share} | null,
     "power_cap_kw": {region: kW | null} | null, "rejected", "plan_ms"}

and the followers adopt it: they observe the epoch themselves (signals and estimates for their
metrics and decision log) but route by the leader's shares. A follower whose regions or origins
differ from the leader's ignores the plan and says so in the log.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from greenroute.core.types import CLASSES, Plan
from greenroute.serve.planner import Planner, PlanState, power_fraction
from greenroute.serve.shared_state import SharedState
from greenroute.serve.upstreams import UpstreamPool

LOG = logging.getLogger("greenroute.serve")


def plan_doc(state: PlanState, leader: str, policy: str) -> dict[str, Any]:
    """The JSON form of ``state``'s plan."""
    obs, plan = state.obs, state.plan
    regions, origins = list(obs.regions), list(obs.origins)
    route = {o: {c: {r: float(plan.route[ci, oi, ri]) for ri, r in enumerate(regions)}
                 for ci, c in enumerate(CLASSES)} for oi, o in enumerate(origins)}  # fmt: skip
    hold = None if plan.hold is None else {o: float(plan.hold[i]) for i, o in enumerate(origins)}
    cap = None
    if plan.power_cap_kw is not None:
        pc = np.asarray(plan.power_cap_kw, dtype=float)
        cap = {r: (None if math.isnan(v) else float(v))
               for r, v in zip(regions, pc, strict=True)}  # fmt: skip
    return {
        "id": f"{leader}:{state.epoch}:{state.wall_s!r}", "epoch": state.epoch,
        "time_s": state.wall_s, "leader": leader, "policy": policy, "regions": regions,
        "origins": origins, "classes": list(CLASSES), "route": route, "hold": hold,
        "power_cap_kw": cap, "rejected": state.rejected, "plan_ms": state.plan_ms,
    }  # fmt: skip


def doc_plan(doc: dict[str, Any], regions: tuple[str, ...], origins: tuple[str, ...]) -> Plan:
    """The :class:`Plan` of a published ``doc``; ValueError if it is for other regions."""
    if list(doc["regions"]) != list(regions) or list(doc["origins"]) != list(origins):
        raise ValueError(f"published plan is for regions {doc['regions']} and origins "
                         f"{doc['origins']}, this replica has {list(regions)} and "
                         f"{list(origins)}")  # fmt: skip
    route = np.array([[[doc["route"][o][c][r] for r in regions] for o in origins]
                      for c in CLASSES], dtype=float)  # fmt: skip
    hold = None if doc["hold"] is None else np.array([doc["hold"][o] for o in origins])
    cap = None
    if doc["power_cap_kw"] is not None:
        cap = np.array([np.nan if doc["power_cap_kw"][r] is None else doc["power_cap_kw"][r]
                        for r in regions], dtype=float)  # fmt: skip
    return Plan(route=route, hold=hold, power_cap_kw=cap,
                rationale=f"published by replica {doc['leader']}")  # fmt: skip


class PlanCoordinator:
    """Plans (leader or single replica), adopts (follower), and syncs ejections."""

    def __init__(self, planner: Planner, pool: UpstreamPool, shared: SharedState, policy: str,
                 epoch_s: float, clock: Callable[[], float]) -> None:  # fmt: skip
        self.planner, self.pool, self.shared = planner, pool, shared
        self.policy, self.epoch_s, self.clock = policy, epoch_s, clock
        self.apply: Callable[[PlanState], Any] | None = None  # puts a state in force
        self.last_id: str | None = None  # the published plan in force here
        self.planned = 0  # epochs this replica planned (leader or alone)
        self.adopted = 0  # plans adopted from the leader
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ plans
    def flush_arrivals(self) -> None:
        """Hand the arrivals counted here since the last flush to the fleet's total."""
        pl = self.planner
        counts, pl.arrivals = pl.arrivals, np.zeros_like(pl.arrivals)
        if counts.any() and not self.shared.add_arrivals(counts):
            pl.arrivals += counts  # Redis failed: keep them for this replica's own plan

    def _plan(self, wall_s: float | None = None) -> PlanState:
        if self.shared.distributed:  # the leader forecasts from the whole fleet's arrivals
            total = self.shared.take_arrivals(self.planner.arrivals.shape)
            if total is not None:
                self.planner.arrivals += total
        state = self.planner.replan(wall_s)
        self.planned += 1
        if self.shared.distributed:
            doc = plan_doc(state, self.shared.replica_id, self.policy)
            self.shared.publish_plan(doc)
            self.last_id = doc["id"]
        return state

    def _adopt(self, doc: dict[str, Any], wall_s: float) -> PlanState | None:
        pl = self.planner
        try:
            plan = doc_plan(doc, pl.regions, pl.origins)
        except (KeyError, ValueError, TypeError) as err:
            LOG.error("ignoring the published plan: %s", err)
            return None
        obs, sig = pl.observe(wall_s)
        caps = np.array([pl.cfg.constraints.power_caps_kw.get(r, np.inf) for r in pl.regions])
        if plan.power_cap_kw is not None:  # as Planner.replan: a plan's cap only tightens
            caps = np.where(np.isnan(plan.power_cap_kw), caps,
                            np.minimum(caps, plan.power_cap_kw))  # fmt: skip
        self.pool.set_power_fractions(power_fraction(caps, pl.idle_kw, pl.peak_kw))
        self.last_id = doc["id"]
        self.adopted += 1
        return PlanState(int(doc["epoch"]), wall_s, plan, obs, sig, doc.get("rejected", ""),
                         float(doc.get("plan_ms", 0.0)))  # fmt: skip

    def decide(self, current_epoch: int | None) -> PlanState | None:
        """One coordination step (blocking: run it off the event loop). The leader plans when
        the published plan is older than this epoch; a follower adopts a plan it has not yet
        put in force. None: nothing new. ``current_epoch`` None: the epoch in force is
        unknown (start-up), so a follower with no plan to adopt plans on its own."""
        wall = self.clock()
        if not self.shared.distributed:
            return self._plan(wall)
        epoch = int(wall // self.epoch_s)
        self.flush_arrivals()
        doc = self.shared.read_plan()
        stale = doc is None or int(doc["epoch"]) < epoch or current_epoch is None
        if self.shared.try_lead() and stale:
            return self._plan(wall)
        if doc is not None and doc["id"] != self.last_id and int(doc["epoch"]) == epoch:
            state = self._adopt(doc, wall)
            if state is not None:
                return state
        if current_epoch is None:  # start-up without a leader's plan: plan alone meanwhile
            LOG.warning("no published plan for epoch %d yet; planning locally", epoch)
            state = self.planner.replan(wall)  # from this replica's arrivals only
            self.planned += 1
            return state
        return None

    def initial(self) -> PlanState:
        state = self.decide(None)
        assert state is not None
        return state

    async def step(self, current_epoch: int | None) -> PlanState | None:
        async with self._lock:  # the epoch loop and the sync loop never decide at once
            return await asyncio.to_thread(self.decide, current_epoch)

    # ------------------------------------------------------------------ health
    def sync_health(self, shared: set[str] | None, since: int | None = None) -> None:
        """Eject what another replica ejected; re-admit what was re-admitted elsewhere
        (``shared``: the ejected upstreams, ``SharedState.ejected()``, read when the pool's
        ``health_version`` was ``since``: an upstream this replica ejected or re-admitted after
        that read keeps its own newer state, which it has published itself)."""
        if shared is None:
            return
        for up in self.pool.upstreams:
            if since is not None and up.health_version > since:
                continue
            if up.name in shared and not up.ejected:
                up.failures = max(up.failures, self.pool.policy.failures_to_eject)
                up.ejected = True
                up.ejected_at = self.pool.clock()
                if self.pool.on_eject is not None:
                    self.pool.on_eject(up, True)
            elif up.name not in shared and up.ejected:
                self.pool.readmit(up)

    async def sync_loop(self, current_epoch: Callable[[], int | None], interval_s: float) -> None:
        """Every ``interval_s``: renew or take the lock, adopt or make a plan, sync health."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                since = self.pool.health_version
                self.sync_health(await asyncio.to_thread(self.shared.ejected), since)
                state = await self.step(current_epoch())
                if state is not None and self.apply is not None:
                    self.apply(state)
            except Exception:  # never let the syncer die: the next round tries again
                LOG.exception("shared state sync failed")
