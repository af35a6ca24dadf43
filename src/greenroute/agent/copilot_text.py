"""Reading the copilot's questions (places, epochs, factors) and checking its numbers.

Places are read with the rules parser's lexicon and tokenizer (:mod:`greenroute.agent.rules_text`,
the same aliases: "California", "Chile", "Germany", "DE-LU", typos within a small edit
distance). :func:`numbers_in` pulls every number out of a text: the copilot uses it to refuse
an LLM phrasing that states a number the facts do not hold, and the tests use it to check that
every number of an explanation matches the simulator.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from greenroute.agent import rules_lexicon as lx
from greenroute.agent.rules_clauses import Reader
from greenroute.agent.rules_errors import UnknownRegionError
from greenroute.agent.rules_text import Token, fix_typos, match_places, tokenize
from greenroute.core.errors import GreenrouteError


class CopilotQuestionError(GreenrouteError):
    """A question the copilot cannot answer as asked; the message says what it understands."""


UNDERSTOOD = (
    "I understand: (1) explanations, e.g. \"Why did epoch 40 send California's traffic to "
    'Chile?"; (2) what-ifs, e.g. "What if latency to Chile doubles?", "What if DE-LU is '
    'down from 14:00 to 18:00 on the 1st?", "What if prices rise 20 %?", "What if carbon '
    'intensity in Germany falls 30 %?"; (3) new goals and rules, e.g. "Minimize energy cost, '
    'but do not send workloads to California".'
)


@dataclass(frozen=True)
class PlaceMention:
    ids: tuple[str, ...]  # scenario ids it covers
    text: str  # as the user wrote it
    index: int  # token index
    before: str  # the word before it (lower case), "" at the start


def read_tokens(
    text: str, regions: Sequence[str], origins: Sequence[str], keep: Iterable[str] = ()
) -> list[Token]:
    """Tokens with places matched; typos corrected except in ``keep`` (the caller's own
    vocabulary, which the rules lexicon does not hold: "halves", "cheaper", ...)."""
    ids = tuple(regions) + tuple(origins)
    tokens = tokenize(text, frozenset(r.lower() for r in ids))
    keep = frozenset(keep)
    own = [t for t in tokens if t.kind == "word" and t.low in keep]
    for t in own:
        t.kind = "own"
    fix_typos(tokens)
    for t in own:
        t.kind = "word"
    return match_places(tokens, Reader(regions, origins).places)


def places_in(
    tokens: list[Token], regions: Sequence[str], origins: Sequence[str]
) -> list[PlaceMention]:
    """Every place token, resolved to the scenario's ids (unknown: an error listing them)."""
    pool = tuple(dict.fromkeys((*regions, *origins)))
    out = []
    for i, tok in enumerate(tokens):
        if tok.kind != "place":
            continue
        keys = tuple(k for k in tok.place.keys if k in pool)
        if not keys:
            raise UnknownRegionError(tok.orig, pool, ())
        prev = tokens[i - 1].low if i > 0 else ""
        out.append(PlaceMention(keys, tok.orig, i, prev))
    return out


def label(key: str) -> str:
    """``Chile (CL-SIC)``: the alias first (how operators speak), the id for precision."""
    aliases = lx.REGION_ALIASES.get(key)
    return f"{aliases[0].title()} ({key})" if aliases else key


_NUMBER_RE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text`` (thousands separators allowed; signs ignored), in
    order. Region ids and words with digits (``geo3``) are not numbers."""
    return [float(m.group(0).replace(",", "")) for m in _NUMBER_RE.finditer(text)]


def unexplained_numbers(text: str, allowed: Iterable[float], rel: float = 1e-9) -> list[float]:
    """The numbers of ``text`` that are not in ``allowed`` (as written)."""
    pool = [abs(a) for a in allowed]
    return [x for x in numbers_in(text) if not any(abs(x - a) <= rel * max(1.0, a) for a in pool)]
