"""Clause grammar of the rules parser: read each clause as one goal or rule.

Clauses come from :mod:`greenroute.agent.rules_split`. Each is exactly one of: goal
(:mod:`greenroute.agent.rules_goals`), power cap, latency bound, residency, exclusion or
allow-list. Every word of a clause must play a part in that reading; a word that does not
raises an error naming it, so no clause is ever dropped.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Sequence

from greenroute.agent import rules_lexicon as lx
from greenroute.agent.rules_errors import (
    AmbiguousCommandError,
    UnknownRegionError,
    UnrecognizedCommandError,
    UnsupportedRuleError,
)
from greenroute.agent.rules_goals import metric_words, read_goal
from greenroute.agent.rules_split import TIME_KINDS, Clause, ClauseResult, class_words, forbid
from greenroute.agent.rules_text import Token
from greenroute.agent.rules_time import ClauseTime

EXCEPTS = lx.EXCEPT_WORDS | {"other"}  # "any region other than Chile"
PREP_BEFORE_PLACE = lx.words(
    "to in into from of at avoid exclude except outside within inside and or"
)


class Reader:
    """Reads clauses against one scenario's regions and origins."""

    def __init__(self, regions: Sequence[str], origins: Sequence[str]) -> None:
        self.regions = tuple(regions)
        self.origins = tuple(origins)
        self.places = _places_for(self.regions + self.origins)

    # ---- places
    def resolve(self, tok: Token, pool: Sequence[str], what: str = "region") -> tuple[str, ...]:
        """A place token -> the scenario ids it covers (error naming it when none)."""
        keys = tuple(k for k in tok.place.keys if k in pool)
        if keys:
            return keys
        in_scn = sorted(pool)
        if tok.place.is_group:
            why = f"no {what} of this scenario is in {tok.orig}"
        else:
            why = f"{tok.orig} is {', '.join(tok.place.keys)}, not a {what} of this scenario"
        raise UnknownRegionError(tok.orig, in_scn, (), why)

    def unknown_word(self, tok: Token, clause: Clause, prev: Token | None) -> Exception:
        aliases = {a: p for a, p in self.places.items() if any(k in self.regions for k in p.keys)}
        close = difflib.get_close_matches(tok.low, list(aliases), n=3, cutoff=0.6)
        place_like = (
            bool(close)
            or (tok.text[:1].isupper() and prev is not None)
            or (prev is not None and prev.kind == "word" and prev.low in PREP_BEFORE_PLACE)
        )
        if place_like:
            sugg = []
            for a in close:
                for k in aliases[a].keys:
                    label = lx.display_name(k)
                    if k in self.regions and label not in sugg:
                        sugg.append(label)
            return UnknownRegionError(tok.orig, self.regions, sugg)
        return UnrecognizedCommandError(
            f"did not understand {tok.orig!r} in {clause.text!r}; I understand goals (minimise "
            "cost, carbon, water, latency) and rules (exclude a region, residency, power cap in "
            "MW/kW, latency bound in ms)"
        )

    def check_words(self, clause: Clause) -> None:
        known = class_words()
        prev = None
        for tok in clause.tokens:
            if tok.kind == "word" and tok.low not in known:
                raise self.unknown_word(tok, clause, prev)
            prev = tok

    # ---- dispatch
    def read(self, clause: Clause) -> ClauseResult:
        self.check_words(clause)
        if clause.kinds("power"):
            return self._cap(clause)
        if clause.kinds("duration"):
            return self._latency(clause)
        places = clause.kinds("place")
        if places and self._is_residency(clause):
            return self._residency(clause)
        negated = clause.has(lx.NEGATION_WORDS | lx.EXCLUDE_VERBS | lx.DOWN_WORDS)
        if places or (negated and not metric_words(clause)):
            return self._exclusion(clause)
        if metric_words(clause) or clause.has(lx.BALANCED_WORDS):
            return read_goal(clause)
        raise UnrecognizedCommandError(
            f"did not understand {clause.text!r}: it sets no goal (minimise cost, carbon, water, "
            "latency) and no rule (exclude a region, residency, power cap, latency bound)"
        )

    def _time(self, clause: Clause) -> ClauseTime:
        ct = ClauseTime(text=clause.text)
        for tok in clause.kinds(*TIME_KINDS):
            attr = {"forspan": "forspan_s"}.get(tok.kind, tok.kind)
            cur = getattr(ct, attr)
            if cur not in (None, False):
                raise AmbiguousCommandError(
                    f"{clause.text!r} gives two {tok.kind}s; give one time window per clause"
                )
            val = True if tok.kind in ("daily", "business") else tok.value
            if tok.kind == "relday":
                val = tok.low
            setattr(ct, attr, val)
        return ct

    def _no_metrics(self, clause: Clause, rule: str, allow: frozenset[str] = frozenset()) -> None:
        for tok in clause.tokens:
            if tok.kind == "word" and (
                (tok.low in lx.METRIC_WORDS and lx.METRIC_WORDS[tok.low] not in allow)
                or tok.low in lx.SUPERLATIVE_METRICS
                or tok.low in lx.GOAL_VERBS - lx.CAP_WORDS - lx.ONLY_WORDS
            ):
                raise UnrecognizedCommandError(
                    f"{tok.orig!r} has no place in the {rule} {clause.text!r}; put goals and "
                    "rules in separate clauses (joined by 'and' or a comma)"
                )

    # ---- power caps
    def _cap(self, clause: Clause) -> ClauseResult:
        forbid(clause, (*TIME_KINDS, "duration", "pct", "num"), "power cap")
        self._no_metrics(clause, "power cap")
        self._no_classes(clause, "power cap")
        powers = clause.kinds("power")
        places = clause.kinds("place")
        regions: list[tuple[str, ...]] = [self.resolve(p, self.regions) for p in places]
        if not regions:
            if not clause.has(frozenset(lx.ALL_REGIONS_WORDS)):
                raise AmbiguousCommandError(
                    f"which region should {clause.text!r} cap? regions: {', '.join(self.regions)}"
                    " (or say 'every region')"
                )
            regions = [self.regions]
        caps: dict[str, float] = {}
        if len(powers) == 1:
            for group in regions:
                caps.update(dict.fromkeys(group, powers[0].value))
        elif len(powers) == len(regions):
            for group, p in zip(regions, powers, strict=True):
                caps.update(dict.fromkeys(group, p.value))
        else:
            raise AmbiguousCommandError(
                f"{clause.text!r} names {len(regions)} places and {len(powers)} power values; "
                "which cap goes with which region?"
            )
        return ClauseResult("cap", caps_kw=caps, text=clause.text)

    # ---- latency bound
    def _latency(self, clause: Clause) -> ClauseResult:
        forbid(clause, (*TIME_KINDS, "power", "pct", "num"), "latency bound")
        if clause.has(frozenset(("ttft",))):
            raise UnsupportedRuleError(
                f"{clause.text!r}: a TTFT bound is an SLO, not a routing rule; hard latency "
                "bounds apply to the one-way network latency (e.g. 'latency under 50 ms')"
            )
        if clause.kinds("place"):
            raise UnsupportedRuleError(
                f"{clause.text!r}: a latency bound applies to every origin-region pair; name "
                "no region (e.g. 'keep latency under 50 ms')"
            )
        self._no_metrics(clause, "latency bound", frozenset(("latency",)))
        if not clause.has(lx.LATENCY_BOUND_WORDS | {"latency", "latencies", "delay"}):
            raise UnrecognizedCommandError(
                f"what should {clause.kinds('duration')[0].text!r} bound in {clause.text!r}? "
                "say 'network latency under 50 ms'"
            )
        durations = clause.kinds("duration")
        if len(durations) > 1:
            raise AmbiguousCommandError(f"{clause.text!r} gives two latency values; which one?")
        value = durations[0].value
        if clause.has(lx.ROUND_TRIP_WORDS):
            value = value / 2.0  # the bound is one-way; a round trip is there and back
        return ClauseResult("latency", latency_s=value, text=clause.text)

    # ---- residency
    def _origin_cued(self, clause: Clause, i: int) -> bool:
        toks = clause.tokens
        j = i - 1
        passthrough = {"our", "the", "a", "at", "in", "node", "region", "datacenter", "site"}
        while j >= 0 and toks[j].kind == "word" and j >= i - 4:
            w = toks[j].low
            if w in ("from", "originating", "originate", "originated", "origin"):
                before = toks[j - 1].low if j > 0 and toks[j - 1].kind == "word" else ""
                return before not in lx.AWAY_WORDS  # "stay away from X": not an origin
            if w not in passthrough:
                break
            j -= 1
        k = i + 1
        skip = lx.CLASS_WORDS | {"node", "region"}
        while k < len(toks) and toks[k].kind == "word" and toks[k].low in skip:
            k += 1
        return k < len(toks) and toks[k].kind == "word" and toks[k].low in lx.WORK_NOUNS

    def _is_residency(self, clause: Clause) -> bool:
        idx = [i for i, t in enumerate(clause.tokens) if t.kind == "place"]
        if any(self._origin_cued(clause, i) for i in idx):
            return True
        stay = clause.has(lx.STAY_VERBS | lx.LEAVE_VERBS) and not clause.has(lx.AWAY_WORDS)
        return stay and len(idx) >= 2

    def _residency(self, clause: Clause) -> ClauseResult:
        forbid(clause, (*TIME_KINDS, "power", "duration", "pct", "num"), "residency rule")
        self._no_metrics(clause, "residency rule")
        self._no_classes(clause, "residency rule")
        toks = clause.tokens
        idx = [i for i, t in enumerate(toks) if t.kind == "place"]
        cued = [i for i in idx if self._origin_cued(clause, i)]
        if cued:
            o_idx, d_idx = cued, [i for i in idx if i not in cued]
        else:  # "California must stay in North America": split at the last preposition
            split = max(
                i for i, t in enumerate(toks)
                if t.kind == "word" and t.low in lx.DEST_PREPS | lx.STAY_VERBS
                and any(j < i for j in idx) and any(j > i for j in idx)
            )  # fmt: skip
            o_idx, d_idx = [i for i in idx if i < split], [i for i in idx if i > split]
        origins = tuple(k for i in o_idx for k in self.resolve(toks[i], self.origins, "origin"))
        if not d_idx:
            if clause.has(lx.STAY_VERBS) and not clause.has(lx.NEGATION_WORDS):
                # "California traffic must stay local" is not expressible without a place
                raise AmbiguousCommandError(
                    f"where must work from {', '.join(origins)} stay? ({clause.text!r})"
                )
            dests: tuple[str, ...] = origins
            if not clause.has(lx.NEGATION_WORDS | lx.EXCLUDE_VERBS):
                raise AmbiguousCommandError(
                    f"what should happen to work from {', '.join(origins)}? ({clause.text!r})"
                )
            raise AmbiguousCommandError(
                f"which regions may work from {', '.join(dests)} not go to? ({clause.text!r})"
            )
        dests = tuple(k for i in d_idx for k in self.resolve(toks[i], self.regions))
        neg = clause.has(lx.NEGATION_WORDS | lx.EXCLUDE_VERBS)
        if clause.has(lx.LEAVE_VERBS):
            if not neg and clause.has(frozenset(("leave", "leaves", "exit"))):
                raise AmbiguousCommandError(
                    f"must work from {', '.join(origins)} leave {', '.join(dests)}, or never "
                    f"leave it? ({clause.text!r})"
                )
            inside = neg
        elif clause.has(lx.AWAY_WORDS):
            inside = False
        elif clause.has(lx.STAY_VERBS | lx.ONLY_WORDS):
            inside = not neg
        elif neg:
            inside = False
        elif clause.has(lx.OBLIGATION_WORDS) and clause.has(frozenset(("in", "within", "inside"))):
            inside = True
        else:
            raise AmbiguousCommandError(
                f"should all work from {', '.join(origins)} go to {', '.join(dests)} (and "
                f"nowhere else), or is that a preference? ({clause.text!r}) say 'only' or 'never'"
            )
        allowed = dests if inside else tuple(r for r in self.regions if r not in dests)
        return ClauseResult(
            "residency", regions=allowed, origins=origins, reason=clause.reason, text=clause.text
        )

    # ---- exclusions and allow-lists
    def _exclusion(self, clause: Clause) -> ClauseResult:
        forbid(clause, ("power", "duration", "pct", "num"), "exclusion")
        self._no_metrics(clause, "exclusion")
        self._no_classes(clause, "exclusion")
        for tok in clause.tokens:
            if tok.kind == "word" and tok.low in lx.VAGUE_ADJECTIVES:
                raise AmbiguousCommandError(
                    f"which region do you mean by {tok.orig!r} in {clause.text!r}? name it: "
                    + ", ".join(lx.display_name(r) for r in self.regions)
                )
        toks = clause.tokens
        neg = clause.has(lx.NEGATION_WORDS | lx.EXCLUDE_VERBS | lx.DOWN_WORDS | lx.AWAY_WORDS)
        verb = clause.has(
            lx.SEND_VERBS | lx.EXCLUDE_VERBS | lx.DOWN_WORDS | lx.AWAY_WORDS | lx.WORK_NOUNS
        )
        if neg and not verb:  # "avoid Germany but not Chile": is Chile excluded or spared?
            raise AmbiguousCommandError(
                f"{clause.text!r} has no verb: should those regions be excluded too, or stay "
                "allowed? say 'never use ...' or leave them out"
            )
        ex = next((i for i, t in enumerate(toks) if t.kind == "word" and t.low in EXCEPTS), None)
        if ex is not None:
            nxt = next((t for t in toks[ex + 1 :] if t.low not in lx.FILLER_WORDS), None)
            if nxt is None or nxt.kind != "place":
                raise UnsupportedRuleError(
                    f"{clause.text!r}: 'except' must name regions (e.g. 'avoid every region "
                    "except Chile'); for times, say when the rule applies instead"
                )
        before = [t for i, t in enumerate(toks) if t.kind == "place" and (ex is None or i < ex)]
        after = [t for i, t in enumerate(toks) if t.kind == "place" and ex is not None and i > ex]
        named = self._keys(before)
        spared = self._keys(after)
        if ex is not None and neg:  # "avoid America except California", "no region but Chile"
            scope = named or self.regions
            kept = tuple(r for r in self.regions if r not in scope or r in spared)
            return self._result(clause, "allow", kept)
        if ex is not None:  # "route anywhere except Chile"
            if named:
                raise AmbiguousCommandError(
                    f"{clause.text!r}: use {', '.join(named)} but not {', '.join(spared)}? say "
                    "'only use ...' or 'never use ...'"
                )
            return self._result(clause, "exclude", spared)
        if not named:
            if neg and clause.has(frozenset(lx.ALL_REGIONS_WORDS) | {"everything"}):
                named = self.regions  # "never route anywhere": left to the feasibility check
            else:
                raise AmbiguousCommandError(
                    f"which region does {clause.text!r} mean? name it: "
                    + ", ".join(lx.display_name(r) for r in self.regions)
                )
        only = clause.has(lx.ONLY_WORDS)
        if only:
            return self._result(clause, "allow", named)
        if neg:
            return self._result(clause, "exclude", named)
        if clause.has(lx.SEND_VERBS) and clause.has(frozenset(("all", "everything", "every"))):
            return self._result(clause, "allow", named)  # "send everything to Chile"
        raise AmbiguousCommandError(
            f"should {', '.join(named)} be the only region(s) used, or never used? "
            f"({clause.text!r}) say 'only' or 'never'"
        )

    def _keys(self, places: Sequence[Token]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(k for p in places for k in self.resolve(p, self.regions)))

    def _result(self, clause: Clause, kind: str, regions: tuple[str, ...]) -> ClauseResult:
        return ClauseResult(
            kind, regions=regions, time=self._time(clause), reason=clause.reason, text=clause.text
        )

    def _no_classes(self, clause: Clause, rule: str) -> None:
        for tok in clause.tokens:
            if tok.kind == "word" and tok.low in lx.CLASS_WORDS:
                raise UnsupportedRuleError(
                    f"{clause.text!r}: a {rule} applies to all work; it cannot be limited to "
                    f"{tok.orig!r} work (only the latency bound is for interactive work alone)"
                )


@functools.lru_cache(maxsize=64)
def _places_for(ids: tuple[str, ...]) -> dict[str, lx.Place]:
    """Catalog aliases plus the scenario's own ids (regions a data directory adds)."""
    places = dict(lx.catalog_places())
    for key in ids:
        places.setdefault(key.lower(), lx.Place(key.lower(), (key,), False))
    return places
