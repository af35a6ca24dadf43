"""A capacity-bounded object cache (models or data of one region) with hit/miss accounting.

Eviction policies:

- ``lru``: least recently used first;
- ``lfu``: least frequently used first (ties: least recently used);
- ``gdsf``: Greedy-Dual-Size-Frequency (Cherkasova 1998): priority
  ``H = L + freq * fetch_cost / size``; evicts the lowest ``H`` and sets the clock ``L`` to it,
  so large, rarely used, cheap-to-refetch objects go first.

Objects larger than the whole capacity are never admitted (they are streamed through).
"""

from __future__ import annotations

from dataclasses import dataclass

from greenroute.core.errors import UnknownNameError

EVICTION_POLICIES = ("lru", "lfu", "gdsf")


@dataclass
class _Entry:
    size_gb: float
    last_use: int
    freq: int
    fetch_cost: float
    ready_s: float  # when the copy has fully arrived
    priority: float = 0.0


class ObjectCache:
    """Keys -> sizes, never holding more than ``capacity_gb``."""

    def __init__(self, capacity_gb: float, policy: str = "lru") -> None:
        if policy not in EVICTION_POLICIES:
            raise UnknownNameError("eviction policy", policy, EVICTION_POLICIES)
        self.capacity_gb = float(capacity_gb)
        self.policy = policy
        self._entries: dict[tuple, _Entry] = {}
        self._tick = 0
        self._clock = 0.0  # GDSF inflation value L
        self.used_gb = 0.0
        self.hits = 0
        self.misses = 0
        self.evicted_gb = 0.0

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def contents(self) -> list[tuple]:
        return list(self._entries)

    def ready_s(self, key: tuple) -> float:
        return self._entries[key].ready_s

    def _gdsf(self, e: _Entry) -> float:
        return self._clock + e.freq * e.fetch_cost / max(e.size_gb, 1e-9)

    def touch(self, key: tuple) -> bool:
        """Look ``key`` up for a task: counts a hit or a miss; a hit refreshes recency."""
        self._tick += 1
        e = self._entries.get(key)
        if e is None:
            self.misses += 1
            return False
        self.hits += 1
        e.last_use = self._tick
        e.freq += 1
        e.priority = self._gdsf(e)
        return True

    def _victim(self) -> tuple:
        if self.policy == "lru":
            return min(self._entries, key=lambda k: self._entries[k].last_use)
        if self.policy == "lfu":
            return min(
                self._entries, key=lambda k: (self._entries[k].freq, self._entries[k].last_use)
            )
        return min(
            self._entries, key=lambda k: (self._entries[k].priority, self._entries[k].last_use)
        )

    def insert(
        self, key: tuple, size_gb: float, fetch_cost: float = 1.0, ready_s: float = 0.0
    ) -> bool:
        """Admit ``key`` (evicting as the policy says); False when it is larger than the cache.
        Re-inserting a cached key only refreshes it."""
        if key in self._entries:
            e = self._entries[key]
            e.ready_s = min(e.ready_s, ready_s)
            return True
        if size_gb > self.capacity_gb:
            return False
        while self.used_gb + size_gb > self.capacity_gb + 1e-9 and self._entries:
            victim = self._victim()
            v = self._entries.pop(victim)
            self.used_gb -= v.size_gb
            self.evicted_gb += v.size_gb
            if self.policy == "gdsf":
                self._clock = max(self._clock, v.priority)
        self._tick += 1
        e = _Entry(size_gb, self._tick, 1, fetch_cost, ready_s)
        e.priority = self._gdsf(e)
        self._entries[key] = e
        self.used_gb += size_gb
        return True

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0
