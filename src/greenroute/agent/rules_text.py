"""Tokens of a plain-language command: words, places, times, quantities; typo correction.

The tokenizer reads quantities and time expressions first (``5 MW``, ``50 ms``, ``70 %``,
``from 14:00 to 18:00``, ``between 2pm and 6pm``, ``on the 3rd``, ``every day``, ``during
business hours``, ``for the next 6 hours``), then words. Words that are not in the lexicon are
corrected to a lexicon word within a small edit distance (optimal string alignment: a swap of
two neighbours counts 1), but only when the correction is unique; places are then matched
greedily, longest alias first.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from greenroute.agent import rules_lexicon as lx
from greenroute.agent.rules_errors import AmbiguousCommandError

_MONTH_NAMES = "january february march april may june july august september october november"
MONTHS = {m: i + 1 for i, m in enumerate((*_MONTH_NAMES.split(" "), "december"))}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})
MONTHS["sept"] = 9
_MONTH = r"(?:" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_ORD = r"(?:st|nd|rd|th)?"
_MER = r"(?:am|pm|a\.m\.|p\.m\.)"
_CLOCK = rf"(?:\d{{1,2}}:\d{{2}}(?:\s*{_MER})?|\d{{1,2}}\s*{_MER}|noon|midnight)"
_LOOSE = r"\d{1,2}(?::\d{2})?"
_SEP = r"\s*(?:to|until|till|and|-|–|—)\s*"
_TZ = r"(?:\s*(?P<tz>utc|gmt|z\b|local\s+time|local))?"
_TZU = _TZ.replace("<tz>", "<tzu>")
_DAY = (
    rf"(?:the\s+\d{{1,2}}{_ORD}(?:\s+of\s+{_MONTH})?|\d{{1,2}}(?:st|nd|rd|th)(?:\s+of\s+{_MONTH})?"
    rf"|{_MONTH}\s+\d{{1,2}}{_ORD}|\d{{1,2}}{_ORD}\s+{_MONTH}|\d{{4}}-\d{{2}}-\d{{2}}"
    rf"|day\s+\d{{1,3}})"
)
_NUM = r"\d+(?:\.\d+)?"

TOKEN_RE = re.compile(
    rf"""
    (?P<label>\(\s*node\s*\d+\s*\))
  | (?P<window>(?:(?:from|between)\s+)?(?:(?P<t0>{_CLOCK}){_SEP}(?P<t1>{_CLOCK}|{_LOOSE})
        |(?P<t0b>{_LOOSE}){_SEP}(?P<t1b>{_CLOCK})){_TZ})
  | (?P<until>(?:until|till)\s+(?P<tu>{_CLOCK}){_TZU})
  | (?P<daterange>(?:from\s+)?(?P<d0>{_DAY})\s*(?:to|until|till|through|-|–)\s*(?P<d1>{_DAY}))
  | (?P<date>(?:on\s+)?(?P<d>{_DAY}))(?![\d:])
  | (?P<relday>today|tomorrow|tonight)
  | (?P<daily>every\s+day|each\s+day|every\s+night|daily|nightly)
  | (?P<business>(?:during\s+|in\s+)?(?:business|office|working)\s+hours)
  | (?P<forspan>for\s+(?:the\s+)?(?:next\s+)?(?P<fn>{_NUM})\s*
        (?P<fu>hours?|hrs?|h|days?|minutes?|mins?)\b)
  | (?P<power>(?P<pn>{_NUM})\s*(?P<pu>gw|mw|kw|gigawatts?|megawatts?|kilowatts?)\b)
  | (?P<duration>(?P<dn>{_NUM})\s*(?P<du>ms|msec|milliseconds?|s|secs?|seconds?)\b)
  | (?P<pct>(?P<cn>{_NUM})\s*(?:%|percent\b|per\s+cent\b))
  | (?P<num>{_NUM})
  | (?P<word>U\.S\.(?:A\.)?|[^\W\d_][\w₂]*(?:[-'][^\W\d_][\w₂]*)*)
  | (?P<punct>[,;.!?()&/])
    """,
    re.IGNORECASE | re.VERBOSE,
)

POWER_KW = {"gw": 1e6, "mw": 1e3, "kw": 1.0}  # kW per unit
DURATION_S = {"ms": 1e-3, "msec": 1e-3, "millisecond": 1e-3, "s": 1.0, "sec": 1.0, "second": 1.0}
SPAN_S = {"h": 3600.0, "hr": 3600.0, "hour": 3600.0, "day": 86400.0, "min": 60.0}
SPAN_S["minute"] = 60.0


@dataclass
class Token:
    """One token. ``kind``: word, place, window, daterange, date, relday, daily, business,
    forspan, power, duration, pct, num, punct. ``text`` is the command's own spelling."""

    kind: str
    text: str
    low: str = ""
    value: Any = None
    fixed_from: str = ""  # the original spelling when a typo was corrected
    place: lx.Place | None = None
    extra: dict = field(default_factory=dict)

    @property
    def orig(self) -> str:
        return self.fixed_from or self.text


def _hours(text: str) -> float:
    """``14:00`` / ``2pm`` / ``2:30 p.m.`` / ``noon`` -> hours after midnight (``None``-safe)."""
    t = text.lower().replace(".", "").replace(" ", "")
    if t == "noon":
        return 12.0
    if t == "midnight":
        return 0.0
    mer = ""
    if t.endswith(("am", "pm")):
        t, mer = t[:-2], t[-2:]
    hh, _, mm = t.partition(":")
    h, m = int(hh), int(mm or 0)
    if mer:
        if not 1 <= h <= 12:
            raise AmbiguousCommandError(f"{text!r} is not a time; use 14:00 or 2pm")
        h = h % 12 + (12 if mer == "pm" else 0)
    if h > 24 or m > 59:
        raise AmbiguousCommandError(f"{text!r} is not a time; use 14:00 or 2pm")
    return h + m / 60.0


def _day(text: str) -> tuple:
    """A day expression -> ("dom", day, month|None) | ("iso", y, m, d) | ("runday", n)."""
    t = text.lower().strip()
    if t.startswith("the "):
        t = t[4:]
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", t)
    if m:
        return ("iso", int(m[1]), int(m[2]), int(m[3]))
    m = re.fullmatch(r"day\s+(\d+)", t)
    if m:
        return ("runday", int(m[1]))
    digits = int(re.search(r"\d+", t)[0])
    month = next((MONTHS[w.rstrip(".")] for w in re.findall(r"[a-z.]+", t)
                  if w.rstrip(".") in MONTHS), None)  # fmt: skip
    if not 1 <= digits <= 31:
        raise AmbiguousCommandError(f"{text!r} is not a day of the month; use 'on the 3rd'")
    return ("dom", digits, month)


def _tz(m: re.Match) -> bool:
    tz = (m["tz"] or m["tzu"] or "").lower()
    return tz.startswith("local")


def _unit(text: str, table: dict[str, float]) -> float:
    u = text.lower()
    for suffix in ("s", ""):
        key = u[: -len(suffix)] if suffix and u.endswith(suffix) and u[:-1] in table else u
        if key in table:
            return table[key]
    raise ValueError(u)


def tokenize(text: str, keep: frozenset[str] = frozenset()) -> list[Token]:
    """Split ``text`` into tokens (quantities and times parsed; words lower-cased in ``low``).

    Hyphenated words stay whole when the lexicon or ``keep`` (lower-case scenario ids) knows
    them, and split into their parts otherwise."""
    text = text.replace("’", "'").replace("‘", "'")
    text = re.sub(r"\b(can)'?t\b", r"\1 not", text, flags=re.I)
    text = re.sub(r"\bwon'?t\b", "will not", text, flags=re.I)
    text = re.sub(r"n't\b", " not", text, flags=re.I)
    text = re.sub(r"\b(do|does|did|must|should|is|are|may)nt\b", r"\1 not", text, flags=re.I)
    text = re.sub(r"'s\b|s'(?=\s)", " ", text)
    out: list[Token] = []
    for m in TOKEN_RE.finditer(text):
        kind = m.lastgroup
        raw = m.group(0)
        if kind == "label":
            continue  # "(Node 1)": the operator's own label; the region name decides
        tok = Token(kind, raw, raw.lower())
        if kind == "window":
            t0, t1 = (m["t0"], m["t1"]) if m["t0"] else (m["t0b"], m["t1b"])
            mer = re.search(r"(am|pm|a\.m\.|p\.m\.)$", t1.strip(), re.I)
            if mer and not re.search(r"(am|pm|m\.)$", t0.strip(), re.I) and ":" not in t0:
                t0 = t0 + mer[1]  # "between 2 and 6pm"
            tok.value = (_hours(t0), _hours(t1), _tz(m))
        elif kind == "until":
            tok = Token("window", raw, raw.lower(), (None, _hours(m["tu"]), _tz(m)))
        elif kind == "daterange":
            tok.value = (_day(m["d0"]), _day(m["d1"]))
        elif kind == "date":
            tok.value = _day(m["d"])
        elif kind == "forspan":
            tok.value = float(m["fn"]) * _unit(m["fu"], SPAN_S)
        elif kind == "power":
            tok.value = float(m["pn"]) * POWER_KW[m["pu"].lower()[0] + "w"]
        elif kind == "duration":
            tok.value = float(m["dn"]) * _unit(m["du"], DURATION_S)
        elif kind == "pct":
            tok.value = float(m["cn"]) / 100.0
        elif kind == "num":
            tok.value = float(raw)
        elif kind == "punct":
            if raw == "&":
                tok = Token("word", raw, "and")
        elif kind == "word":
            out.extend(_split_word(raw, keep))
            continue
        out.append(tok)
    return out


def _split_word(raw: str, keep: frozenset[str]) -> list[Token]:
    """A hyphenated word the lexicon does not know splits into its parts (``lowest-carbon``)."""
    low = raw.lower()
    known = low in known_words() or low in lx.catalog_places() or low in keep
    if "-" in low and not known and raw not in lx.case_sensitive_places():
        return [Token("word", part, part.lower()) for part in raw.split("-") if part]
    return [Token("word", raw, low)]


@functools.lru_cache(maxsize=1)
def lexicon_words() -> frozenset[str]:
    """The words of the lexicon's word classes and fillers (not the parts of place aliases)."""
    words: set[str] = set()
    for name in dir(lx):
        val = getattr(lx, name)
        if isinstance(val, frozenset):
            words |= val
    words |= set(lx.METRIC_WORDS) | set(lx.SUPERLATIVE_METRICS) | set(lx.ALL_REGIONS_WORDS)
    return frozenset(words)


@functools.lru_cache(maxsize=1)
def known_words() -> frozenset[str]:
    """Every single word the lexicon knows (word classes, fillers, parts of place aliases)."""
    words = set(lexicon_words())
    for alias in lx.catalog_places():
        words |= set(alias.split())
        words.add(alias)
    return frozenset(w for w in words if w)


def osa_distance(a: str, b: str) -> int:
    """Optimal string alignment distance (Levenshtein plus adjacent transpositions)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def max_typos(word: str) -> int:
    """Edits allowed when correcting ``word``: none up to 3 letters, 1 up to 5, else 2."""
    n = len(word)
    return 0 if n <= 3 else 1 if n <= 5 else 2


def correct_word(low: str) -> str | None:
    """The unique lexicon word nearest ``low`` within :func:`max_typos`, or ``None``.

    Raises :class:`AmbiguousCommandError` when two different words are equally near."""
    limit = max_typos(low)
    if limit == 0 or not low.isalpha():
        return None
    best: list[str] = []
    best_d = limit + 1
    for cand in known_words():
        if " " in cand or abs(len(cand) - len(low)) > limit:
            continue
        d = osa_distance(low, cand)
        if d > limit:
            continue
        if d < best_d:
            best, best_d = [cand], d
        elif d == best_d:
            best.append(cand)
    if not best:
        return None
    meanings = {_meaning(w) for w in best}
    if len(meanings) > 1:
        raise AmbiguousCommandError(
            f"{low!r} is not a word I know; did you mean {' or '.join(sorted(best))}?"
        )
    return sorted(best)[0]


def _meaning(word: str) -> str:
    """Words that mean the same to the parser (``cost``/``costs``) count as one correction."""
    if word in lx.METRIC_WORDS:
        return "metric:" + lx.METRIC_WORDS[word]
    place = lx.catalog_places().get(word)
    if place is not None:
        return "place:" + ",".join(place.keys)
    return word


def fix_typos(tokens: list[Token]) -> None:
    """Correct unknown words in place (``reason`` tokens are free text and stay as written)."""
    known = known_words()
    for tok in tokens:
        if tok.kind != "word" or tok.low in known:
            continue
        if tok.text in lx.case_sensitive_places():
            continue
        fixed = correct_word(tok.low)
        if fixed is not None:
            tok.fixed_from, tok.low = tok.text, fixed


def match_places(tokens: list[Token], places: dict[str, lx.Place]) -> list[Token]:
    """Merge word runs that spell a place alias into one ``place`` token (longest first)."""
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.kind != "word":
            out.append(tok)
            i += 1
            continue
        exact = lx.case_sensitive_places().get(tok.text) or _scenario_exact(tok, places)
        if exact is not None:
            out.append(Token("place", tok.text, tok.low, place=exact, fixed_from=tok.fixed_from))
            i += 1
            continue
        for n in (4, 3, 2, 1):
            run = tokens[i : i + n]
            if len(run) < n or any(t.kind != "word" for t in run):
                continue
            alias = " ".join(t.low for t in run)
            place = places.get(alias) or places.get(alias.replace(" - ", "-"))
            if place is not None:
                text = " ".join(t.text for t in run)
                fixed = " ".join(t.orig for t in run) if any(t.fixed_from for t in run) else ""
                out.append(Token("place", text, alias, place=place, fixed_from=fixed))
                i += n
                break
        else:
            out.append(tok)
            i += 1
    return out


def _scenario_exact(tok: Token, places: dict[str, lx.Place]) -> lx.Place | None:
    place = places.get(tok.low)
    if place is not None and place.surface.upper() == tok.text.upper() and "-" in tok.text:
        return place
    return None
