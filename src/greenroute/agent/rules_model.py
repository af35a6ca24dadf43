"""The result of reading a plain-language command: a goal and hard rules, and their checks.

:class:`RuleSet` is what both the deterministic parser (:mod:`greenroute.agent.rules`) and the
LLM path (:mod:`greenroute.agent.rules_json`) produce; :func:`validate_ruleset` is the one set
of checks both apply before a rule set is read back to the user.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from greenroute.agent.rules_errors import (
    UnknownRegionError,
    UnsatisfiableCommandError,
    UnsupportedRuleError,
)
from greenroute.constraints import ConstraintSet
from greenroute.core.types import ObjectiveWeights

GOAL_FIELDS = ("carbon", "water", "cost", "latency")


@dataclass(frozen=True)
class RuleSet:
    """A goal (``None``: the command sets none, keep the current one) and hard rules.

    Exclusions are kept sorted and residency/caps in key order, so two rule sets that mean
    the same compare equal."""

    weights: ObjectiveWeights | None = None
    constraints: ConstraintSet = field(default_factory=ConstraintSet)

    def __post_init__(self) -> None:
        cs = self.constraints
        canon = ConstraintSet(
            tuple(sorted(set(cs.exclusions), key=lambda e: (e.region, e.start_s, e.end_s,
                                                            e.reason))),
            {k: frozenset(cs.residency[k]) for k in sorted(cs.residency)},
            {k: float(cs.power_caps_kw[k]) for k in sorted(cs.power_caps_kw)},
            cs.max_one_way_latency_s,
        )  # fmt: skip
        object.__setattr__(self, "constraints", canon)

    def is_empty(self) -> bool:
        return self.weights is None and self.constraints.is_empty()


def validate_ruleset(
    rs: RuleSet, regions: Sequence[str], origins: Sequence[str] | None = None
) -> None:
    """Raise a :class:`RuleCommandError` if ``rs`` names unknown regions, holds impossible
    numbers, or leaves some origin with no region at some time (unsatisfiable)."""
    regions = tuple(regions)
    origins = tuple(origins) if origins is not None else regions
    cs = rs.constraints
    if rs.weights is not None:
        w = rs.weights.as_dict()
        if not all(math.isfinite(v) and v >= 0 for v in w.values()):
            raise UnsupportedRuleError(f"goal weights must be finite and >= 0, got {w}")
        if sum(w[f] for f in GOAL_FIELDS) <= 0:
            raise UnsupportedRuleError("a goal needs a weight > 0 on cost, carbon, water, latency")
    for ex in cs.exclusions:
        _known(ex.region, regions, "region")
        if not ex.start_s < ex.end_s or math.isnan(ex.start_s) or math.isnan(ex.end_s):
            raise UnsupportedRuleError(
                f"exclusion of {ex.region} must end after it starts ({ex.start_s}, {ex.end_s})"
            )
    for origin, allowed in cs.residency.items():
        _known(origin, origins, "origin")
        for r in allowed:
            _known(r, regions, "region")
    for r, kw in cs.power_caps_kw.items():
        _known(r, regions, "region")
        if not (math.isfinite(kw) and kw >= 0):
            raise UnsupportedRuleError(f"power cap for {r} must be a finite number of kW >= 0")
    lat = cs.max_one_way_latency_s
    if lat is not None and not (math.isfinite(lat) and lat > 0):
        raise UnsupportedRuleError(f"the latency bound must be a positive number of s, got {lat}")
    _check_satisfiable(cs, regions, origins)


def _known(name: str, pool: Sequence[str], what: str) -> None:
    """Unknown names get suggestions by id and by place alias (``Chlie`` -> ``CL-SIC``)."""
    if name in pool:
        return
    from greenroute.agent.rules_lexicon import catalog_places

    names = {p.lower(): (p,) for p in pool}
    for alias, place in catalog_places().items():
        keys = tuple(k for k in place.keys if k in pool)
        if keys and not place.is_group:
            names.setdefault(alias, keys)
    close = difflib.get_close_matches(name.lower(), list(names), n=3, cutoff=0.6)
    sugg = list(dict.fromkeys(k for c in close for k in names[c]))
    raise UnknownRegionError(name, pool, sugg, f"not a {what} of this scenario")


def _check_satisfiable(cs: ConstraintSet, regions: tuple[str, ...], origins: tuple[str, ...]):
    """At every instant an exclusion starts (and always), every origin keeps a region."""
    instants = sorted({-math.inf} | {e.start_s for e in cs.exclusions})
    for t in instants:
        active = [e for e in cs.exclusions if e.start_s <= t < e.end_s]
        out = {e.region for e in active}
        for origin in origins:
            allowed = cs.residency.get(origin, frozenset(regions))
            if not allowed - out:
                rules = [f"residency of {origin}: {sorted(allowed)}"] if origin in cs.residency \
                    else []  # fmt: skip
                rules += sorted({f"{e.region} excluded" for e in active if e.region in allowed})
                label = "+".join(
                    (["residency"] if origin in cs.residency else [])
                    + (["exclusion"] if active else [])
                )
                when = "at all times" if math.isinf(t) else f"at {t / 3600:g} h"
                raise UnsatisfiableCommandError(
                    label or "exclusion",
                    f"work from {origin} has no region left {when} ({'; '.join(rules)}); "
                    f"which region should stay open? regions: {', '.join(regions)}",
                )
