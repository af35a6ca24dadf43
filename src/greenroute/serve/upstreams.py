"""Upstream servers: live load, measured durations, ejection after failures, health checks.

An upstream is ejected after ``failures_to_eject`` consecutive failures (connection errors,
timeouts, 5xx or 429 before the first byte, failed health checks) for at least
``cooldown_s``; after the cooldown a passing health check (``GET url + health_path`` with a
2xx answer) re-admits it. While ejected it gets no requests and its slots leave the capacity
the geo policy sees at the next epoch.

Overload safety (Envoy's ``max_ejection_percent``): an ejection that would leave more than
``max_ejection_percent`` % of all upstreams ejected is refused (at least one upstream may
always be ejected), counted in ``refused_ejections``; the upstream stays admitted and its
failures keep counting, so it is ejected as soon as another one is re-admitted. A gateway
starved of CPU sees timeouts everywhere; without the cap it would eject every upstream and
answer only 503.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from greenroute.serve.config import GatewayConfig, UpstreamConfig

LOG = logging.getLogger("greenroute.serve")
EWMA_ALPHA = 0.2  # weight of the newest duration in the running means (engineering choice)


@dataclass
class Upstream:
    cfg: UpstreamConfig
    index: int  # position in the pool
    region: int  # region index
    usable_slots: int  # capacity under the hard power cap (see Pool.set_power_fractions)
    in_flight: int = 0
    tokens_in_flight: int = 0
    start_sum_s: float = 0.0  # sum of the start times of the requests in flight
    failures: int = 0  # consecutive
    ejected: bool = False
    ejected_at: float = -math.inf
    health_version: int = 0  # the pool's health_version when this replica last changed it
    duration_s: float = math.nan  # EWMA of whole-request durations
    ttfb_s: float = math.nan  # EWMA of times to first byte
    served: int = 0
    models: frozenset[str] = field(default_factory=frozenset)

    @property
    def name(self) -> str:
        return self.cfg.name

    def backlog_s(self, now: float, default_s: float) -> float:
        """Slot-seconds of work left in flight: expected duration minus time already spent."""
        dur = default_s if math.isnan(self.duration_s) else self.duration_s
        spent = self.in_flight * now - self.start_sum_s
        return max(self.in_flight * dur - spent, 0.0)


class UpstreamPool:
    """Every upstream of every region, with its state."""

    def __init__(self, cfg: GatewayConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self.policy = cfg.upstream
        self.clock = clock
        self.health_version = 0  # counts this replica's own ejections and re-admissions
        self.refused_ejections = 0  # ejections refused by max_ejection_percent
        self.upstreams: list[Upstream] = []
        self.by_region: list[list[Upstream]] = []
        for r, reg in enumerate(cfg.regions):
            mine = []
            for u in reg.upstreams:
                up = Upstream(u, len(self.upstreams), r, u.capacity, models=frozenset(u.models))
                self.upstreams.append(up)
                mine.append(up)
            self.by_region.append(mine)
        self.on_eject: Callable[[Upstream, bool], None] | None = None  # (upstream, ejected)
        self.on_release: Callable[[], None] | None = None  # a slot was freed
        self.on_refused: Callable[[Upstream], None] | None = None  # ejection refused (cap)

    # ------------------------------------------------------------------ capacity
    def set_power_fractions(self, frac: np.ndarray) -> None:
        """Usable slots per upstream = floor(capacity x frac[region]) (the simulator's
        ``Simulation.effective_slots``: each busy slot adds (peak - idle) / slots kW)."""
        for up in self.upstreams:
            up.usable_slots = math.floor(up.cfg.capacity * float(frac[up.region]) + 1e-9)

    def region_slots(self, healthy_only: bool = True) -> np.ndarray:
        out = np.zeros(len(self.by_region))
        for up in self.upstreams:
            if not (healthy_only and up.ejected):
                out[up.region] += up.usable_slots
        return out

    # ------------------------------------------------------------------ request accounting
    def start(self, up: Upstream, tokens: int) -> float:
        now = self.clock()
        up.in_flight += 1
        up.tokens_in_flight += tokens
        up.start_sum_s += now
        return now

    def finish(self, up: Upstream, started: float, tokens: int) -> None:
        up.in_flight -= 1
        up.tokens_in_flight -= tokens
        up.start_sum_s -= started
        if up.in_flight == 0:
            up.start_sum_s = 0.0  # no drift from float sums
        if self.on_release is not None:
            self.on_release()

    def success(self, up: Upstream, duration_s: float | None, ttfb_s: float | None) -> None:
        up.failures = 0
        up.served += 1
        if duration_s is not None:
            up.duration_s = _ewma(up.duration_s, duration_s)
        if ttfb_s is not None:
            up.ttfb_s = _ewma(up.ttfb_s, ttfb_s)

    def failure(self, up: Upstream) -> bool:
        """Count a failure; True when it ejects the upstream."""
        up.failures += 1
        if not up.ejected and up.failures >= self.policy.failures_to_eject:
            if not self.may_eject():
                self.refused_ejections += 1
                if self.on_refused is not None:
                    self.on_refused(up)
                return False
            up.ejected = True
            up.ejected_at = self.clock()
            self._changed(up)
            if self.on_eject is not None:
                self.on_eject(up, True)
            return True
        if up.ejected:
            up.ejected_at = self.clock()  # a failed check restarts the cooldown
        return False

    def may_eject(self) -> bool:
        """Whether one more ejection keeps the ejected share within max_ejection_percent (the
        first ejection is always allowed)."""
        ejected = sum(u.ejected for u in self.upstreams)
        if ejected == 0:
            return True
        return 100.0 * (ejected + 1) <= self.policy.max_ejection_percent * len(self.upstreams)

    def _changed(self, up: Upstream) -> None:
        self.health_version += 1
        up.health_version = self.health_version

    def readmit(self, up: Upstream) -> None:
        up.failures = 0
        if up.ejected:
            up.ejected = False
            self._changed(up)
            if self.on_eject is not None:
                self.on_eject(up, False)

    # ------------------------------------------------------------------ health checks
    async def check(self, client, up: Upstream) -> bool:
        """One health check (GET base URL + health_path)."""
        import httpx

        headers = {}
        key = up.cfg.api_key()
        if key:
            headers["authorization"] = f"Bearer {key}"
        try:
            resp = await client.get(up.cfg.url + self.policy.health_path, headers=headers,
                                    timeout=self.policy.connect_timeout_s)  # fmt: skip
            ok = 200 <= resp.status_code < 300
        except httpx.HTTPError:
            ok = False
        return ok

    async def health_round(self, client) -> None:
        """Check every upstream that is healthy, or ejected and past its cooldown."""
        now = self.clock()
        due = [u for u in self.upstreams
               if not u.ejected or now - u.ejected_at >= self.policy.cooldown_s]  # fmt: skip
        results = await asyncio.gather(*(self.check(client, u) for u in due))
        for up, ok in zip(due, results, strict=True):
            if ok:
                self.readmit(up)
            else:
                self.failure(up)

    async def health_loop(self, client) -> None:
        while True:
            await asyncio.sleep(self.policy.health_interval_s)
            try:
                await self.health_round(client)
            except Exception:  # never let the checker die: the next round tries again
                LOG.exception("health check round failed")


def _ewma(old: float, new: float) -> float:
    return new if math.isnan(old) else (1.0 - EWMA_ALPHA) * old + EWMA_ALPHA * new
