"""Local (per-request, inside a region) policies of seed 002 section V.

Built-ins run inside the compiled kernel: their optional ``kernel_code`` attribute (the
LocalPolicy protocol's hook) names the compiled rule, so the engine never recognises a policy
by its type. Their ``pick`` methods implement the same rule in Python; a subclass that
overrides ``pick`` loses the kernel code and runs through Python. A user policy is any object
with ``name``, ``reset(region)`` and ``pick(request, servers)``.
"""

from __future__ import annotations

import numpy as np

from greenroute.core.types import RequestView, ServerView
from greenroute.policies.registry import register_local_policy
from greenroute.sim import kernel as K


class _Builtin:
    name = ""
    kernel_code = K.LP_PYTHON

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "pick" in cls.__dict__ and "kernel_code" not in cls.__dict__:
            cls.kernel_code = K.LP_PYTHON  # its own rule: the compiled one would ignore it

    def reset(self, region: str) -> None:
        self.region = region
        self._rr = 0

    def _candidates(self, servers: ServerView) -> np.ndarray:
        cand = servers.eligible & (servers.slots > 0)
        if (cand & servers.resident).any():
            cand &= servers.resident
        return np.flatnonzero(cand)


@register_local_policy("round-robin")
class RoundRobinLocal(_Builtin):
    """Cycle through the region's servers regardless of state."""

    name = "round-robin"
    kernel_code = K.LP_ROUND_ROBIN

    def pick(self, request: RequestView, servers: ServerView) -> int:
        n = servers.eligible.size
        cand = set(self._candidates(servers).tolist())
        for j in range(n):
            s = (self._rr + j) % n
            if s in cand:
                self._rr = (s + 1) % n
                return s
        raise AssertionError("no candidate")


@register_local_policy("least-connections")
class LeastConnectionsLocal(_Builtin):
    """Fewest running + queued requests (seed 002 section V)."""

    name = "least-connections"
    kernel_code = K.LP_LEAST_CONNECTIONS

    def pick(self, request: RequestView, servers: ServerView) -> int:
        cand = self._candidates(servers)
        score = (servers.active + servers.queued)[cand]
        return int(cand[np.argmin(score)])


@register_local_policy("least-loaded")
class LeastLoadedLocal(_Builtin):
    """Least assigned work left per usable slot (seed 002's 'lowest current load')."""

    name = "least-loaded"
    kernel_code = K.LP_LEAST_LOADED

    def pick(self, request: RequestView, servers: ServerView) -> int:
        cand = self._candidates(servers)
        return int(cand[np.argmin(servers.backlog_s[cand])])


@register_local_policy("random")
class RandomLocal(_Builtin):
    """A uniformly random eligible server (sanity baseline)."""

    name = "random"
    kernel_code = K.LP_RANDOM

    def pick(self, request: RequestView, servers: ServerView) -> int:
        cand = self._candidates(servers)
        k = min(int(request.uniform * cand.size), cand.size - 1)  # as the kernel draws
        return int(cand[k])
