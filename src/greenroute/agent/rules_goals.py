"""Goal clauses of the rules parser: metric words -> objective weights.

"minimise cost and carbon" weighs the named metrics equally; "70 % carbon, 30 % cost" or
"carbon 0.6, latency 0.4" gives explicit weights (normalised to sum 1 by the parser);
"prioritise carbon over cost" keeps only what comes before "over"/"than"/"instead"; "energy"
alone is a question (its cost or its emissions?); "maximise" only goes with speed, performance
or savings.
"""

from __future__ import annotations

from greenroute.agent import rules_lexicon as lx
from greenroute.agent.rules_errors import (
    AmbiguousCommandError,
    UnrecognizedCommandError,
    UnsupportedRuleError,
)
from greenroute.agent.rules_split import TIME_KINDS, Clause, ClauseResult, forbid


def metric_words(clause: Clause) -> list[str]:
    return [
        t.low for t in clause.tokens
        if t.kind == "word"
        and (t.low in lx.METRIC_WORDS or t.low in lx.SUPERLATIVE_METRICS
             or t.low in lx.ENERGY_WORDS)
    ]  # fmt: skip


def read_goal(clause: Clause) -> ClauseResult:
    forbid(clause, (*TIME_KINDS, "place", "power", "duration"), "goal")
    if clause.has(lx.NEGATION_WORDS | lx.EXCLUDE_VERBS):
        raise UnsupportedRuleError(
            f"{clause.text!r}: a goal cannot be negated; name what to minimise "
            "(cost, carbon, water, latency)"
        )
    toks = [t for t in clause.tokens if t.kind in ("word", "pct", "num")]
    maximise = clause.has(lx.MAXIMISE_VERBS)
    hint = clause.has(
        lx.GOAL_VERBS | lx.MAXIMISE_VERBS | lx.GOAL_HINTS | lx.BALANCED_WORDS
        | frozenset(lx.SUPERLATIVE_METRICS) | lx.CAP_WORDS
    ) or any(t.kind in ("pct", "num") for t in toks)  # fmt: skip
    if not hint:
        raise UnrecognizedCommandError(
            f"what should happen to {clause.text!r}? say e.g. 'minimise {clause.text}'"
        )
    seq: list[tuple[int, str]] = []  # (token index, metric field)
    dropped = False
    for i, t in enumerate(toks):
        if t.kind != "word":
            continue
        if t.low in lx.OVER_WORDS:
            dropped = True  # "carbon over cost": what follows is not a goal
            continue
        nxt = toks[i + 1].low if i + 1 < len(toks) else ""
        if t.low in lx.ENERGY_WORDS:
            if nxt in lx.METRIC_WORDS:
                continue  # "energy cost", "power bill"
            raise AmbiguousCommandError(
                f"minimise {t.orig!r}: its cost (cost) or its emissions (carbon)? "
                "say 'energy cost' or 'carbon'"
            )
        field_ = lx.METRIC_WORDS.get(t.low) or lx.SUPERLATIVE_METRICS.get(t.low)
        if field_ is None:
            continue
        if maximise and t.low not in ("speed", "performance", "responsiveness", "savings"):
            raise AmbiguousCommandError(
                f"maximise {t.orig!r}? goals minimise cost, carbon, water and latency "
                "(say 'maximise speed' or 'maximise savings')"
            )
        if t.low == "savings" and i > 0 and toks[i - 1].low in lx.METRIC_WORDS:
            continue  # "carbon savings": the metric is the word before
        if not dropped:
            seq.append((i, field_))
    numbers = [(i, t.value) for i, t in enumerate(toks) if t.kind in ("pct", "num")]
    weights = _pair(clause, toks, seq, numbers) if numbers else None
    metrics = list(dict.fromkeys(f for _, f in seq))
    balanced = clause.has(lx.BALANCED_WORDS) and not metrics
    if not metrics and not balanced:
        raise AmbiguousCommandError(
            f"what should {clause.text!r} minimise: cost, carbon, water or latency?"
        )
    return ClauseResult(
        "goal", metrics=metrics, weights=weights, balanced=balanced, text=clause.text
    )


def _pair(clause, toks, seq, numbers) -> dict[str, float]:
    if len(numbers) != len(seq):
        raise AmbiguousCommandError(
            f"{clause.text!r} gives {len(numbers)} numbers for {len(seq)} goals; write "
            "e.g. '70 % carbon, 30 % cost'"
        )
    before = all(ni < mi for (ni, _), (mi, _) in zip(numbers, seq, strict=True))
    after = all(ni > mi for (ni, _), (mi, _) in zip(numbers, seq, strict=True))
    if not (before or after):
        raise AmbiguousCommandError(f"which number goes with which goal in {clause.text!r}?")
    out: dict[str, float] = {}
    for (_, val), (_, f) in zip(numbers, seq, strict=True):
        if f in out:
            raise AmbiguousCommandError(f"{f} is weighted twice in {clause.text!r}")
        out[f] = float(val)
    return out
