"""Local (per-request, inside a region) policies of seed 002 section V.

Built-ins run inside the compiled kernel (``kernel_code``); their ``pick`` methods implement
the same rule in Python so that user subclasses and the equivalence test can use them.
A user policy is any object with ``name``, ``reset(region)`` and ``pick(request, servers)``.
"""

from __future__ import annotations

import numpy as np

from greenroute.errors import UnknownNameError
from greenroute.sim import kernel as K
from greenroute.sim.types import LocalPolicy, RequestView, ServerView


class _Builtin:
    name = ""
    kernel_code = K.LP_PYTHON

    def reset(self, region: str) -> None:
        self.region = region
        self._rr = 0

    def _candidates(self, servers: ServerView) -> np.ndarray:
        cand = servers.eligible & (servers.slots > 0)
        if (cand & servers.resident).any():
            cand &= servers.resident
        return np.flatnonzero(cand)


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


class LeastConnectionsLocal(_Builtin):
    """Fewest running + queued requests (seed 002 section V)."""

    name = "least-connections"
    kernel_code = K.LP_LEAST_CONNECTIONS

    def pick(self, request: RequestView, servers: ServerView) -> int:
        cand = self._candidates(servers)
        score = (servers.active + servers.queued)[cand]
        return int(cand[np.argmin(score)])


class LeastLoadedLocal(_Builtin):
    """Least assigned work left per usable slot (seed 002's 'lowest current load')."""

    name = "least-loaded"
    kernel_code = K.LP_LEAST_LOADED

    def pick(self, request: RequestView, servers: ServerView) -> int:
        cand = self._candidates(servers)
        return int(cand[np.argmin(servers.backlog_s[cand])])


class RandomLocal(_Builtin):
    """A uniformly random eligible server (sanity baseline)."""

    name = "random"
    kernel_code = K.LP_RANDOM

    def reset(self, region: str) -> None:
        super().reset(region)
        self._rng = np.random.default_rng(abs(hash(region)) % (2**32))

    def pick(self, request: RequestView, servers: ServerView) -> int:
        cand = self._candidates(servers)
        return int(cand[self._rng.integers(cand.size)])


LOCAL_POLICIES: dict[str, type] = {
    cls.name: cls for cls in (RoundRobinLocal, LeastConnectionsLocal, LeastLoadedLocal, RandomLocal)
}


def local_policy_names() -> list[str]:
    return sorted(LOCAL_POLICIES)


def resolve_local_policy(spec: LocalPolicy | str) -> LocalPolicy:
    """A fresh local policy from a name, or the given object (used as is)."""
    if isinstance(spec, str):
        if spec.startswith("rl:"):
            from greenroute.policies.rl.local import load_rl_local_policy

            return load_rl_local_policy(spec[3:])
        try:
            return LOCAL_POLICIES[spec]()
        except KeyError:
            raise UnknownNameError("local policy", spec, LOCAL_POLICIES) from None
    return spec


def local_policy_code(policy: LocalPolicy) -> int:
    """The kernel code of a built-in policy, or LP_PYTHON for anything else (incl. subclasses
    that override ``pick``)."""
    cls = type(policy)
    if cls in LOCAL_POLICIES.values():
        return int(cls.kernel_code)
    return K.LP_PYTHON
