"""A per-request FIFO server farm for the seed-002 throughput model (tokens/s and a concurrency
limit per server), stepped one routing decision at a time by ``greenroute/LoadBalancing-v0``
and shadowed by the ``rl:PATH`` local policy.

It has the request kernel's (``greenroute.sim.kernel``) dynamics for ``ServerGroup(tokens_per_s
=...)`` servers: deterministic service ``tokens / tps``, FIFO per server, the slot that frees
first. It exists beside the kernel because an RL step needs completions and per-server recent
response times between two decisions, which the kernel does not expose;
``tests/test_env_lb.py`` checks that the two agree on a trace.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence

import numpy as np

from greenroute.core.errors import ConfigError

QUEUE_LIMIT = 1000  # section IV
RT_WINDOW = 20  # "recent completions": the last 20 on the server


class ServerFarm:
    """Heterogeneous servers with a token rate, concurrency slots and a FIFO queue each.

    Service is deterministic (``tokens / tps``) and FIFO per server, so a request's start and
    finish are known when it is assigned: it takes the slot that frees first, no earlier than
    its arrival. ``advance(t)`` processes completions up to ``t``.
    """

    def __init__(
        self,
        tps: Sequence[float],
        slots: Sequence[int],
        queue_limit: int = QUEUE_LIMIT,
        rt_window: int = RT_WINDOW,
    ) -> None:
        self.tps = np.asarray(tps, dtype=np.float64)
        self.slots = np.asarray(slots, dtype=np.int64)
        if self.tps.shape != self.slots.shape or self.tps.size == 0:
            raise ConfigError("servers need one (tps, max concurrency) pair each")
        if np.any(self.tps <= 0) or np.any(self.slots < 1):
            raise ConfigError("servers need tps > 0 and max concurrency >= 1")
        self.n = int(self.tps.size)
        self.queue_limit = int(queue_limit)
        self.rt_window = int(rt_window)
        self.reset()

    def reset(self, t: float = 0.0) -> None:
        self.now = float(t)
        self._slot_free = [[-math.inf] * int(c) for c in self.slots]
        self._heap: list = []  # (finish, seq, server, arrival, tokens)
        self._seq = 0
        self._qstarts = [deque() for _ in range(self.n)]  # start times of waiting requests
        self.n_inflight = np.zeros(self.n, dtype=np.int64)  # running + waiting
        self.tokens_in_flight = np.zeros(self.n)
        self._rts = [deque(maxlen=self.rt_window) for _ in range(self.n)]

    # state at ``now``
    def queued(self) -> np.ndarray:
        return np.array([len(q) for q in self._qstarts], dtype=np.int64)

    def active(self) -> np.ndarray:
        return self.n_inflight - self.queued()

    def at_capacity(self, s: int) -> bool:
        return min(self._slot_free[s]) > self.now

    def load(self) -> np.ndarray:
        return self.tokens_in_flight / (self.tps * self.slots)

    def backlog_s(self) -> np.ndarray:
        """Work left (running + queued seconds) per slot, like ``ServerView.backlog_s``."""
        now = self.now
        return (
            np.array([sum(f - now for f in fr if f > now) for fr in self._slot_free]) / self.slots
        )

    def recent_rt(self) -> np.ndarray:
        return np.array([sum(d) / len(d) if d else 0.0 for d in self._rts])

    def advance(self, t: float) -> list[tuple[int, float]]:
        """Move the clock to ``t`` (>= now); return the (server, response time) completed."""
        if t < self.now:
            t = self.now
        done = []
        heap = self._heap
        while heap and heap[0][0] <= t:
            finish, _, s, arrival, tokens = heapq.heappop(heap)
            self.n_inflight[s] -= 1
            self.tokens_in_flight[s] -= tokens
            rt = finish - arrival
            self._rts[s].append(rt)
            done.append((s, rt))
        for q in self._qstarts:
            while q and q[0] <= t:
                q.popleft()
        self.now = float(t)
        return done

    def assign(self, s: int, tokens: float, arrival: float) -> tuple[float, float] | None:
        """Admit a request arriving now on server ``s``: (start, finish), or None if dropped."""
        if len(self._qstarts[s]) >= self.queue_limit:
            return None
        free = self._slot_free[s]
        j = min(range(len(free)), key=free.__getitem__)
        start = max(self.now, free[j])
        finish = start + tokens / self.tps[s]
        free[j] = finish
        if start > self.now:
            self._qstarts[s].append(start)
        self.n_inflight[s] += 1
        self.tokens_in_flight[s] += tokens
        heapq.heappush(self._heap, (finish, self._seq, s, arrival, float(tokens)))
        self._seq += 1
        return start, finish

    def drain(self) -> list[tuple[int, float]]:
        """Run until every admitted request has completed."""
        return self.advance(max((h[0] for h in self._heap), default=self.now))
