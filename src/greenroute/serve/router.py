"""Per-request routing: the hard rules for the request's origin and class right now, the
plan's shares among the allowed regions that can take it, then the region's local policy
(the simulator's ``LocalPolicy`` object) picks the server.

A region "can take" a request when one of its upstreams serves the model, is not ejected,
was not already tried for this request and has a free usable slot (its capacity under the
power caps). When the plan gives no share to any region that can take the request (its
favourite region is down or full) the request goes to the allowed regions in proportion to
their free slots: a fallback, counted.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from greenroute.core.types import CLASSES, RequestView, ServerView
from greenroute.serve.config import GatewayConfig
from greenroute.serve.errors import model_not_found, no_allowed_region, unavailable
from greenroute.serve.planner import PlanState
from greenroute.serve.upstreams import Upstream, UpstreamPool


@dataclass(frozen=True)
class Choice:
    region: int
    upstream: Upstream
    shares: tuple[float, ...]  # the plan's row for this origin and class
    allowed: tuple[bool, ...]  # the rules' row right now
    fallback: str = ""  # "" or why the plan's shares were not used


@dataclass
class RuleCheck:
    """What the rules said about one request (for the decision log)."""

    allowed_regions: list[str]
    active_exclusions: list[str] = field(default_factory=list)
    residency: list[str] | None = None
    latency_bound_ms: float | None = None


def describe_exclusion(ex) -> str:
    """An exclusion window in UTC (the gateway's windows are unix seconds)."""
    from datetime import UTC, datetime

    def when(t: float) -> str:
        return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%MZ")

    if math.isinf(ex.start_s) and math.isinf(ex.end_s):
        span = "always"
    else:
        lo = "" if math.isinf(ex.start_s) else f" from {when(ex.start_s)}"
        hi = "" if math.isinf(ex.end_s) else f" until {when(ex.end_s)}"
        span = (lo + hi).strip()
    why = f" ({ex.reason})" if ex.reason else ""
    return f"{ex.region} excluded {span}{why}"


class Router:
    def __init__(self, cfg: GatewayConfig, pool: UpstreamPool, latency_s: np.ndarray) -> None:
        from greenroute.policies.registry import local_policy_factory

        self.cfg, self.pool, self.latency_s = cfg, pool, latency_s
        self.regions, self.origins = cfg.region_names, cfg.origin_names
        self.models = cfg.models
        self.model_index = {m: i for i, m in enumerate(self.models)}
        factory = local_policy_factory(cfg.local_policy)
        self.local = []
        for reg in self.regions:
            lp = factory()
            lp.reset(reg)
            self.local.append(lp)
        self._mask_cache: dict[tuple[int, ...], np.ndarray] = {}
        self._check_cache: dict[tuple, tuple[np.ndarray, RuleCheck]] = {}
        self._ridx = {r: i for i, r in enumerate(self.regions)}
        # model indices some upstream of each region is configured to serve
        self._hosts = [frozenset(self.model_index[m] for u in ups for m in u.models)
                       for ups in pool.by_region]  # fmt: skip
        self._rng = random.Random(cfg.seed)
        self._n = 0
        self.state: PlanState | None = None

    # ------------------------------------------------------------------ rules
    def allowed_now(self, wall_s: float) -> tuple[np.ndarray, tuple[int, ...]]:
        """``[C, O, R]`` mask of the rules at ``wall_s`` (cached per set of active
        exclusion windows) and the indices of the active exclusions."""
        excl = self.cfg.constraints.exclusions
        active = tuple(i for i, e in enumerate(excl) if e.start_s <= wall_s < e.end_s)
        mask = self._mask_cache.get(active)
        if mask is None:
            mask = self.cfg.constraints.allowed_mask(self.origins, self.regions, wall_s,
                                                     math.nextafter(wall_s, math.inf),
                                                     self.latency_s)  # fmt: skip
            self._mask_cache[active] = mask
        return mask, active

    def rule_check(self, origin: int, cls: int, wall_s: float) -> tuple[np.ndarray, RuleCheck]:
        """The rules' row ``[R]`` for this origin and class now, and its description (both
        cached per set of active exclusions: read-only)."""
        mask, active = self.allowed_now(wall_s)
        key = (active, origin, cls)
        hit = self._check_cache.get(key)
        if hit is not None:
            return hit
        row = mask[cls, origin]
        cs = self.cfg.constraints
        res = cs.residency.get(self.origins[origin])
        bound = cs.max_one_way_latency_s
        check = RuleCheck(
            allowed_regions=[self.regions[r] for r in np.flatnonzero(row)],
            active_exclusions=[describe_exclusion(cs.exclusions[i]) for i in active],
            residency=sorted(res) if res is not None else None,
            latency_bound_ms=bound * 1e3 if bound is not None and cls == 0 else None,
        )
        self._check_cache[key] = (row, check)
        return row, check

    def _reject(self, origin: int, cls: int, check: RuleCheck) -> None:
        parts, rules = [], []
        if check.residency is not None:
            parts.append(f"residency allows only {check.residency}")
            rules.append("residency")
        if check.active_exclusions:
            parts.append("; ".join(check.active_exclusions))
            rules.append("exclusion")
        if check.latency_bound_ms is not None:
            o_lat = self.latency_s[origin] * 1e3
            near = [r for r, v in zip(self.regions, o_lat, strict=True)
                    if v <= check.latency_bound_ms]  # fmt: skip
            parts.append(f"latency bound {check.latency_bound_ms:g} ms one-way leaves {near}")
            rules.append("latency")
        raise no_allowed_region(
            f"no region may serve {CLASSES[cls]} requests from origin "
            f"{self.origins[origin]!r} now: " + ("; ".join(parts) or "no rule allows one"),
            "+".join(rules) or "mask",
        )

    # ------------------------------------------------------------------ choice
    def choose(self, origin: int, cls: int, model: str, wall_s: float,
               tried: Sequence[int] = (), tokens: tuple[int, int] = (0, 0),
               ) -> tuple[Choice, RuleCheck]:  # fmt: skip
        """Region and upstream for one request; raises GatewayHTTPError 404/403/503."""
        m = self.model_index.get(model)
        if m is None:
            raise model_not_found(model, self.models)
        row, check = self.rule_check(origin, cls, wall_s)
        if not check.allowed_regions:
            self._reject(origin, cls, check)
        serving = [r for r in self._region_index(check.allowed_regions) if m in self._hosts[r]]
        if not serving:
            where = [r for r, ups in zip(self.regions, self.pool.by_region, strict=True)
                     if any(model in u.models for u in ups)]  # fmt: skip
            raise no_allowed_region(
                f"model {model!r} is served only in {where}, which the rules for origin "
                f"{self.origins[origin]!r} exclude now (allowed: {check.allowed_regions})",
                "model-placement",
            )
        free = {}
        for r in serving:
            f = sum(max(u.usable_slots - u.in_flight, 0) for u in self.pool.by_region[r]
                    if self._can_take(u, model, tried))  # fmt: skip
            if f > 0:
                free[r] = f
        if not free:
            names = [self.regions[r] for r in serving]
            if any(self._can_take(u, model, tried, room=False)
                   for r in serving for u in self.pool.by_region[r]):  # fmt: skip
                raise unavailable(f"every upstream of {names} serving {model!r} is at its "
                                  "capacity", "capacity_exhausted")  # fmt: skip
            raise unavailable(f"no upstream can take a {model!r} request now (allowed regions "
                              f"{names}: all down or already tried)")  # fmt: skip
        state = self.state
        shares = state.plan.route[cls, origin] if state is not None else np.zeros(len(row))
        cand = list(free)
        weights = [float(shares[r]) for r in cand]
        fallback = ""
        if sum(weights) <= 0.0:
            fallback = "plan-share-zero" if state is not None else "no-plan"
            weights = [float(free[r]) for r in cand]
        region = self._sample(cand, weights)
        up = self._pick(region, cls, model, wall_s, tried, tokens)
        return Choice(region, up, tuple(float(s) for s in shares),
                      tuple(bool(a) for a in row), fallback), check  # fmt: skip

    def _region_index(self, names: list[str]) -> list[int]:
        return [self._ridx[n] for n in names]

    def _can_take(self, u: Upstream, model: str, tried: Sequence[int], room: bool = True) -> bool:
        return (not u.ejected and model in u.models and u.index not in tried
                and (u.in_flight < u.usable_slots or not room))  # fmt: skip

    def _sample(self, cand: list[int], weights: list[float]) -> int:
        total = sum(weights)
        x = self._rng.random() * total
        acc = 0.0
        for r, w in zip(cand, weights, strict=True):
            acc += w
            if x < acc and w > 0.0:
                return r
        return next(r for r, w in zip(reversed(cand), reversed(weights), strict=True) if w > 0)

    def _pick(self, region: int, cls: int, model: str, wall_s: float, tried: Sequence[int],
              tokens: tuple[int, int]) -> Upstream:  # fmt: skip
        ups = self.pool.by_region[region]
        mono = self.pool.clock()
        default_s = self.cfg.regions[region].default_request_s
        eligible = np.array([self._can_take(u, model, tried) for u in ups])
        slots = np.array([u.usable_slots for u in ups], dtype=np.int64)
        view = ServerView(
            time_s=wall_s,
            active=np.array([u.in_flight for u in ups], dtype=np.int64),
            queued=np.zeros(len(ups), dtype=np.int64),
            slots=slots,
            backlog_s=np.array([u.backlog_s(mono, default_s) for u in ups]) / np.maximum(slots, 1),
            tokens_in_flight=np.array([u.tokens_in_flight for u in ups], dtype=np.int64),
            eligible=eligible,
            resident=np.array([model in u.models for u in ups]),
        )
        self._n += 1
        req = RequestView(index=self._n, arrival_s=wall_s, cls=cls,
                          model=self.model_index[model], prompt_tokens=tokens[0],
                          output_tokens=tokens[1], uniform=self._rng.random())  # fmt: skip
        k = int(self.local[region].pick(req, view))
        if not (0 <= k < len(ups)) or not eligible[k]:  # a policy must not break the rules
            k = int(np.flatnonzero(eligible)[0])
        return ups[k]
