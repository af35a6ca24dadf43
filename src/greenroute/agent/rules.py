"""Plain-language goals and hard rules -> :class:`RuleSet` (seed 000 Table 2 and Appendix D).

>>> rs = parse_command("Minimize energy cost, but do not send workloads to California",
...                    ["DE-LU", "CL-SIC", "US-CAL-CISO"])
>>> rs.weights.cost, [e.region for e in rs.constraints.exclusions]
(1.0, ['US-CAL-CISO'])

:func:`parse_command` is deterministic (the oracle the LLM parser is tested against): it
understands goals ("minimise cost and carbon", "70 % carbon, 30 % cost"), exclusions with
optional time windows ("never route to Chile", "DE-LU is down from 14:00 to 18:00 on the
3rd"), allow-lists ("only use European datacenters"), data residency ("workloads from
California must stay in North America"), power caps ("cap Germany at 5 MW") and a latency bound
("keep network latency under 50 ms"). A command it cannot read completely raises a
:class:`~greenroute.agent.rules_errors.RuleCommandError` naming the problem: it never drops a
clause. :func:`describe` is the read-back shown to the user before the rules take effect; the
simulator's validator (:class:`~greenroute.constraints.ConstraintSet`) then enforces them.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

from greenroute.agent import rules_lexicon as lx
from greenroute.agent.rules_clauses import Reader
from greenroute.agent.rules_errors import (
    AmbiguousCommandError,
    ContradictoryCommandError,
    RuleCommandError,
    UnknownRegionError,
    UnrecognizedCommandError,
    UnsatisfiableCommandError,
    UnsupportedRuleError,
)
from greenroute.agent.rules_json import RULES_JSON_SCHEMA, ruleset_from_json, ruleset_to_json
from greenroute.agent.rules_model import GOAL_FIELDS, RuleSet, validate_ruleset
from greenroute.agent.rules_split import ClauseResult, collapse_reasons, split_clauses
from greenroute.agent.rules_text import fix_typos, match_places, tokenize
from greenroute.agent.rules_time import daily_pattern, fmt_offset, fmt_window, resolve
from greenroute.constraints import ConstraintSet, Exclusion
from greenroute.core.errors import ConfigError
from greenroute.core.objective import DEFAULT_SLO_PENALTY, PRESETS
from greenroute.core.types import ObjectiveWeights

__all__ = [
    "RULES_JSON_SCHEMA",
    "AmbiguousCommandError",
    "ContradictoryCommandError",
    "RuleCommandError",
    "RuleSet",
    "UnknownRegionError",
    "UnrecognizedCommandError",
    "UnsatisfiableCommandError",
    "UnsupportedRuleError",
    "describe",
    "parse_command",
    "ruleset_from_json",
    "ruleset_to_json",
    "validate_ruleset",
]


# ----------------------------------------------------------------------------- parsing


def parse_command(
    text: str,
    regions: Sequence[str],
    now: dt.datetime | None = None,
    *,
    origins: Sequence[str] | None = None,
    horizon_s: float | None = None,
) -> RuleSet:
    """Read ``text`` into a :class:`RuleSet` for a scenario with ``regions`` (and ``origins``,
    default the regions, as in the geo scenarios).

    ``now`` is the instant simulation second 0 stands for (the run's start; naive = UTC); time
    windows become offsets from it (see :mod:`greenroute.agent.rules_time`). ``horizon_s`` (the
    run's length) is needed only by repeating windows ("every day", "business hours").
    """
    regions = tuple(regions)
    origins = tuple(origins) if origins is not None else regions
    if not regions:
        raise ConfigError("parse_command needs the scenario's regions")
    if not text or not text.strip():
        raise UnrecognizedCommandError("empty command: say what to minimise or which rule to add")
    reader = Reader(regions, origins)
    tokens = collapse_reasons(tokenize(text, frozenset(r.lower() for r in regions + origins)))
    fix_typos(tokens)
    tokens = match_places(tokens, reader.places)
    clauses = split_clauses(tokens)
    if not clauses:
        raise UnrecognizedCommandError(f"no goal or rule in {text!r}")
    results = [reader.read(c) for c in clauses]
    rs = _merge(results, regions, now, horizon_s)
    validate_ruleset(rs, regions, origins)
    return rs


def _merge(
    results: list[ClauseResult],
    regions: tuple[str, ...],
    now: dt.datetime | None,
    horizon_s: float | None,
) -> RuleSet:
    metrics: list[str] = []
    weights: dict[str, float] | None = None
    balanced = False
    exclusions: list[Exclusion] = []
    always_out: dict[str, str] = {}  # region -> clause, excluded with no window
    allowed_by: dict[str, str] = {}  # region -> clause, on an allow-list with no window
    residency: dict[str, frozenset[str]] = {}
    caps: dict[str, float] = {}
    latency: float | None = None
    latency_text = ""
    for res in results:
        if res.kind == "goal":
            if res.weights is not None:
                if weights is not None or metrics:
                    raise AmbiguousCommandError(
                        f"two goals with different weights ({res.text!r}); give all weights in "
                        "one clause, e.g. '60 % carbon, 40 % cost'"
                    )
                weights = res.weights
            else:
                if weights is not None:
                    raise AmbiguousCommandError(
                        f"{res.text!r} adds a goal to explicit weights; give all weights in "
                        "one clause"
                    )
                metrics.extend(m for m in res.metrics if m not in metrics)
            balanced = balanced or res.balanced
        elif res.kind in ("exclude", "allow"):
            out = res.regions if res.kind == "exclude" else tuple(
                r for r in regions if r not in res.regions
            )  # fmt: skip
            timeless = res.time.is_empty()
            for r in out:
                for start, end in resolve(res.time, r, now, horizon_s):
                    exclusions.append(Exclusion(r, start, end, res.reason))
            if timeless:
                for r in out:
                    always_out.setdefault(r, res.text)
                if res.kind == "allow":
                    for r in res.regions:
                        allowed_by.setdefault(r, res.text)
        elif res.kind == "residency":
            for origin in res.origins:
                new = frozenset(res.regions)
                if origin in residency:
                    new = residency[origin] & new
                    if not new:
                        raise ContradictoryCommandError(
                            f"the residency rules for {origin} leave it no region "
                            f"({sorted(residency[origin])} and {sorted(res.regions)}); which "
                            "one holds?"
                        )
                residency[origin] = new
        elif res.kind == "cap":
            for r, kw in res.caps_kw.items():
                if r in caps and caps[r] != kw:
                    raise ContradictoryCommandError(
                        f"two power caps for {r} ({caps[r]:g} kW and {kw:g} kW); which one?"
                    )
                caps[r] = kw
        elif res.kind == "latency":
            if latency is not None and latency != res.latency_s:
                raise ContradictoryCommandError(
                    f"two latency bounds ({latency_text!r} and {res.text!r}); which one?"
                )
            latency, latency_text = res.latency_s, res.text
    for r, text in allowed_by.items():
        if r in always_out and always_out[r] != text:
            raise ContradictoryCommandError(
                f"{lx.display_name(r)} is both allowed ({text!r}) and excluded "
                f"({always_out[r]!r}); which one holds?"
            )
    return RuleSet(_weights(metrics, weights, balanced),
                   ConstraintSet(tuple(exclusions), residency, caps, latency))  # fmt: skip


def _weights(
    metrics: list[str], explicit: dict[str, float] | None, balanced: bool
) -> ObjectiveWeights | None:
    if explicit is not None:
        total = sum(explicit.values())
        if not (total > 0 and math.isfinite(total)):
            raise AmbiguousCommandError("the goal weights add up to 0; which goal matters?")
        vals = {f: explicit.get(f, 0.0) / total for f in GOAL_FIELDS}
        return ObjectiveWeights(**vals, slo_penalty=DEFAULT_SLO_PENALTY)
    if metrics:
        vals = {f: (1.0 / len(metrics) if f in metrics else 0.0) for f in GOAL_FIELDS}
        return ObjectiveWeights(**vals, slo_penalty=DEFAULT_SLO_PENALTY)
    if balanced:
        return PRESETS["balanced"]
    return None


# ----------------------------------------------------------------------------- read-back


def describe(rs: RuleSet, now: dt.datetime | None = None) -> str:
    """The read-back shown to the user for confirmation, one line per goal/rule."""
    lines: list[str] = []
    if rs.weights is None:
        lines.append("Goal: unchanged.")
    else:
        w = rs.weights
        active = [f for f in GOAL_FIELDS if getattr(w, f) > 0]
        if len(active) == 1:
            head = f"minimise {_METRIC_NAMES[active[0]]}"
        elif all(getattr(w, f) == getattr(w, active[0]) for f in active):
            head = "minimise " + " and ".join(_METRIC_NAMES[f] for f in active) + " equally"
        else:
            head = "minimise " + ", ".join(
                f"{_METRIC_NAMES[f]} ({getattr(w, f):.0%})" for f in active
            )
        weights = ", ".join(f"{f} {getattr(w, f):.4g}" for f in GOAL_FIELDS)
        lines.append(f"Goal: {head} (weights {weights}; SLO penalty {w.slo_penalty:g}).")
    cs = rs.constraints
    by_region: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for ex in cs.exclusions:
        by_region.setdefault((ex.region, ex.reason), []).append((ex.start_s, ex.end_s))
    for (region, reason), wins in by_region.items():
        why = f" (reason: {reason})" if reason else ""
        lines.append(f"Rule: send no work to {lx.display_name(region)} "
                     f"{_windows_text(wins, now)}{why}.")  # fmt: skip
    for origin, allowed in cs.residency.items():
        names = ", ".join(lx.display_name(r) for r in sorted(allowed))
        lines.append(f"Rule: work from {lx.display_name(origin)} stays in {names}.")
    for region, kw in cs.power_caps_kw.items():
        lines.append(f"Rule: IT power of {lx.display_name(region)} capped at {kw:,.6g} kW "
                     f"({kw / 1000:.6g} MW).")  # fmt: skip
    if cs.max_one_way_latency_s is not None:
        ms = cs.max_one_way_latency_s * 1e3
        lines.append(f"Rule: interactive work only to regions within {ms:.6g} ms one-way "
                     "network latency of its origin.")  # fmt: skip
    if cs.is_empty():
        lines.append("Rules: none.")
    times = any(math.isfinite(e.start_s) or math.isfinite(e.end_s) for e in cs.exclusions)
    if times and now is None:
        lines.append("Times: day 1 starts at the run's start (second 0), clock times UTC.")
    return "\n".join(lines)


_METRIC_NAMES = {"carbon": "carbon", "water": "water", "cost": "cost", "latency": "latency"}


def _windows_text(wins: list[tuple[float, float]], now: dt.datetime | None) -> str:
    wins = sorted(wins)
    if len(wins) == 1:
        return fmt_window(*wins[0], now)
    pattern = daily_pattern(wins)
    if pattern is not None:
        _, dur = pattern
        first, last = fmt_offset(wins[0][0], now), fmt_offset(wins[-1][0], now)
        return (f"every day for {dur / 3600:g} h, {len(wins)} windows from {first} "
                f"to the one starting {last}")  # fmt: skip
    shown = "; ".join(fmt_window(s, e, now) for s, e in wins[:4])
    more = f"; and {len(wins) - 4} more windows" if len(wins) > 4 else ""
    return f"in {len(wins)} windows: {shown}{more}"
