"""Splitting a command into clauses (the first step of :mod:`greenroute.agent.rules_clauses`).

A command is split at sentence punctuation and at "but", "however", "while", ...; inside a
sentence, at commas, "and", "or", "then" only where the next piece holds a verb of its own
("avoid California and Chile" is one clause, "avoid California and minimise cost" two).
Reasons ("due to a grid alert") become one free-text token first, so their words are neither
typo-corrected nor read as rules.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from greenroute.agent import rules_lexicon as lx
from greenroute.agent.rules_errors import UnrecognizedCommandError, UnsupportedRuleError
from greenroute.agent.rules_text import Token, lexicon_words
from greenroute.agent.rules_time import ClauseTime

TIME_KINDS = frozenset(("window", "daterange", "date", "relday", "daily", "business", "forspan"))
SENTENCE_PUNCT = frozenset(";.!?")
CAP_VERBS = frozenset(("cap", "capped", "limit", "limited", "keep", "keeping", "hold"))
TRIGGERS = (
    lx.GOAL_VERBS | lx.MAXIMISE_VERBS | lx.NEGATION_WORDS | lx.EXCLUDE_VERBS | lx.DOWN_WORDS
    | lx.ONLY_WORDS | lx.STAY_VERBS | lx.LEAVE_VERBS | CAP_VERBS | lx.SEND_VERBS
    | frozenset(lx.SUPERLATIVE_METRICS) | lx.BALANCED_WORDS
)  # fmt: skip
# words that start a new clause even without a comma ("minimise cost without using Chile")
SPLIT_BEFORE = frozenset(("without", "by"))


@functools.lru_cache(maxsize=1)
def class_words() -> frozenset[str]:
    """Words with a role in some clause (word classes and fillers; not bare alias parts)."""
    return frozenset(lexicon_words() | CAP_VERBS)


@dataclass
class Clause:
    tokens: list[Token]
    reason: str = ""

    @property
    def text(self) -> str:
        text = " ".join(t.orig if t.kind in ("word", "place") else t.text for t in self.tokens)
        return text.replace(" ,", ",")

    def words(self) -> list[str]:
        return [t.low for t in self.tokens if t.kind == "word"]

    def has(self, vocab: frozenset[str] | set[str]) -> bool:
        return any(t.kind == "word" and t.low in vocab for t in self.tokens)

    def kinds(self, *kinds: str) -> list[Token]:
        return [t for t in self.tokens if t.kind in kinds]


# ----------------------------------------------------------------------------- splitting


def collapse_reasons(tokens: list[Token]) -> list[Token]:
    """``due to a grid alert`` -> one ``reason`` token holding ``a grid alert`` (free text)."""
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        nxt = tokens[i + 1].low if i + 1 < len(tokens) else ""
        if tok.kind == "word" and (
            (tok.low in ("due", "owing") and nxt == "to") or tok.low == "because"
        ):
            j = i + (2 if tok.low != "because" else 1)
            if tok.low == "because" and nxt == "of":
                j += 1
            k = j
            while k < len(tokens) and not _ends_reason(tokens, k):
                k += 1
            text = " ".join(t.text for t in tokens[j:k])
            out.append(Token("reason", " ".join(t.text for t in tokens[i:k]), value=text))
            i = k
            continue
        out.append(tok)
        i += 1
    return out


def _ends_reason(tokens: list[Token], k: int) -> bool:
    tok = tokens[k]
    if tok.kind == "punct" and tok.text in ",;.!?":
        return True
    if tok.kind == "word" and tok.low in lx.STRONG_SEPARATORS:
        return True
    if tok.kind == "word" and tok.low in lx.SOFT_SEPARATORS and k + 1 < len(tokens):
        return tokens[k + 1].low in TRIGGERS
    return False


def split_clauses(tokens: list[Token]) -> list[Clause]:
    """Sentences, then pieces joined by commas/and/or that carry a verb of their own."""
    clauses: list[Clause] = []
    for sentence in _sentences(tokens):
        pieces: list[list[Token]] = [[]]
        for i, tok in enumerate(sentence):
            sep = (tok.kind == "punct" and tok.text == ",") or (
                tok.kind == "word" and tok.low in lx.SOFT_SEPARATORS
            )
            if sep or (tok.kind == "word" and tok.low in SPLIT_BEFORE and i > 0):
                pieces.append([] if sep else [tok])
                if sep:
                    pieces[-1].append(tok)
                continue
            pieces[-1].append(tok)
        pending: list[Token] = []
        own: list[list[Token]] = []
        for piece in pieces:
            if _has_trigger(piece):
                own.append(pending + piece)
                pending = []
            elif own:
                own[-1].extend(piece)
            else:
                pending.extend(piece)
        if pending:
            own.append(pending)
        for toks in own:
            toks = _strip_joiners(toks)
            if toks:
                reason = " ".join(t.value for t in toks if t.kind == "reason")
                clauses.append(Clause([t for t in toks if t.kind != "reason"], reason))
    return clauses


def _sentences(tokens: list[Token]) -> list[list[Token]]:
    out: list[list[Token]] = [[]]
    prev = ""
    for tok in tokens:
        strong = tok.kind == "word" and tok.low in lx.STRONG_SEPARATORS
        if tok.low == "but" and prev in ("anything", "everything", "nothing", "all", "any"):
            strong = False  # "anything but Chile"
        if (tok.kind == "punct" and tok.text in SENTENCE_PUNCT) or strong:
            out.append([])
        else:
            out[-1].append(tok)
        prev = tok.low if tok.kind == "word" else ""
    return [s for s in out if s]


def _has_trigger(piece: Sequence[Token]) -> bool:
    return any(
        (t.kind == "word" and t.low in TRIGGERS) or t.kind in ("power", "duration") for t in piece
    )


def _strip_joiners(toks: list[Token]) -> list[Token]:
    skip = lx.SOFT_SEPARATORS
    while toks and ((toks[0].kind == "word" and toks[0].low in skip) or toks[0].text == ","):
        toks = toks[1:]
    while toks and ((toks[-1].kind == "word" and toks[-1].low in skip) or toks[-1].text == ","):
        toks = toks[:-1]
    return toks


@dataclass
class ClauseResult:
    """What one clause asks for (the parser merges the results of all clauses)."""

    kind: str  # goal | cap | latency | residency | exclude | allow
    metrics: list[str] = field(default_factory=list)
    weights: dict[str, float] | None = None
    balanced: bool = False
    regions: tuple[str, ...] = ()  # excluded / allowed / capped regions
    origins: tuple[str, ...] = ()  # residency origins
    caps_kw: dict[str, float] = field(default_factory=dict)
    latency_s: float | None = None
    time: ClauseTime = field(default_factory=ClauseTime)
    reason: str = ""
    text: str = ""


def forbid(clause: Clause, kinds: Sequence[str], rule: str) -> None:
    for tok in clause.kinds(*kinds):
        if tok.kind in TIME_KINDS:
            raise UnsupportedRuleError(
                f"a {rule} cannot have a time window ({tok.text!r} in {clause.text!r}); "
                "only exclusions can"
            )
        raise UnrecognizedCommandError(
            f"{tok.text!r} has no place in the {rule} {clause.text!r}; put goals and rules "
            "in separate clauses (joined by 'and' or a comma)"
        )
