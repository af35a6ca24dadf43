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


@register_local_policy(
    "modified-round-robin",
    "MARLIN's local balancer (seed 001 §4, after Kushwaha et al. 2021): capacity-weighted "
    "smooth round robin that skips saturated servers.",
)
class ModifiedRoundRobinLocal(_Builtin):
    """The "modified round-robin load balancer based on [26]" that seed 001 §4 runs in every
    datacenter so "that nodes within a datacenter are not asymmetrically overwhelmed".

    [26] (Kushwaha et al., "Advanced weighted round robin procedure for load balancing in cloud
    computing environment", Confluence 2021) weights the round robin by server capacity and
    takes load into account; its exact steps are not in the MARLIN paper, so this is our
    reading, in two rules:

    1. *Weighted* (smooth, interleaved) round robin, the nginx ``ngx_http_upstream`` form: every
       pick adds each candidate's weight to its running credit, picks the largest credit
       (lowest index on ties) and subtracts the candidates' total weight from the winner. The
       weight is the server's usable slots, so a server with twice the slots gets twice the
       requests, interleaved rather than in bursts.
    2. *Modified*: a saturated server (running + queued >= usable slots) is skipped while any
       candidate has a free slot; if all are saturated the rule runs over all candidates.

    Python ``pick`` only (no compiled kernel rule): request fidelity runs it through Python.
    The fluid model splits a region's work over its servers by usable slots, which is what
    rule 1 converges to, so the choice of local policy does not change fluid runs.
    """

    name = "modified-round-robin"

    def reset(self, region: str) -> None:
        super().reset(region)
        self._credit: np.ndarray | None = None

    def pick(self, request: RequestView, servers: ServerView) -> int:
        n = servers.eligible.size
        if self._credit is None or self._credit.size != n:
            self._credit = np.zeros(n)
        cand = self._candidates(servers)
        free = cand[(servers.active + servers.queued)[cand] < servers.slots[cand]]
        if free.size:
            cand = free
        weight = servers.slots[cand].astype(float)
        self._credit[cand] += weight
        s = int(cand[np.argmax(self._credit[cand])])
        self._credit[s] -= weight.sum()
        return s
