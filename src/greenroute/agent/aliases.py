"""Region mentions in free text: which datacenters of an observation a phrase names.

A datacenter can be named by its position in the prompt (``DC-3``, ``data center 3``), by its
catalog key (``US-CAL-CISO``), its grid zone (``CL-SEN``), its city (``San Jose``), its
catalog display name (``USA - California (CAISO)``) or a part of it (``California``,
``CAISO``). An alias that fits several datacenters of the cluster (``USA`` in geo10, or
``Australia``) names all of them, so a reader that needs exactly one region can refuse it
instead of guessing. Aliases of catalog regions that are *not* in the cluster are kept too, so
a reader can tell "a region this cluster does not have" from "no region at all".

Matching is case-insensitive, except for aliases of two letters or fewer (``SG``, ``KR``,
``GB``), which must be upper case: ``de``/``sg`` are too easily ordinary words. Longer aliases
win over shorter ones that overlap them (``DE-LU`` is one mention, not ``DE`` plus ``LU``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# a few common names the catalog's display names do not contain (ours, not the paper's)
EXTRA_ALIASES: dict[str, tuple[str, ...]] = {
    "GB": ("UK", "United Kingdom", "Britain"),
    "KR": ("Korea",),
    "DE-LU": ("Deutschland",),
}
DC_ID = re.compile(r"(?<![A-Za-z0-9])(?:DC|data[\s-]?cent(?:er|re))[\s#_-]*(\d+)(?!\d)", re.I)
SHORT_ALIAS_CHARS = 2  # aliases this short match in upper case only
ABSENT = -1  # the region index of a catalog region that is not in the cluster


@dataclass(frozen=True)
class Mention:
    """One phrase of the text that names datacenters: the cluster indices it fits
    (empty when it names only a region the cluster does not have), its span and its text."""

    regions: frozenset[int]
    start: int
    end: int
    text: str
    absent: bool = False  # a catalog region (or a DC number) outside the cluster


def _name_parts(name: str) -> list[str]:
    """``"USA - California (CAISO)"`` -> the name, ``USA - California``, ``USA``,
    ``California``, ``CAISO`` (parts that start with a capital letter only)."""
    out = [name]
    head, _, paren = name.partition("(")
    head = head.strip()
    out.append(head)
    out += [p.strip() for p in head.split(" - ")]
    if paren:
        out.append(paren.rstrip(")").strip())
    return [p for p in dict.fromkeys(out) if p and p[0].isupper()]


def aliases_of(key: str) -> list[str]:
    """Every alias of region ``key`` (its key first); a key outside the catalog has only
    itself."""
    from greenroute.catalog.regions import REGIONS

    reg = REGIONS.get(key)
    names = [key]
    if reg is not None:
        names += [reg.zone_id, reg.city, *_name_parts(reg.name)]
    names += list(EXTRA_ALIASES.get(key, ()))
    return list(dict.fromkeys(n for n in names if n))


def alias_table(regions: Sequence[str]) -> dict[str, frozenset[int]]:
    """alias -> indices in ``regions`` it names; aliases of catalog regions outside
    ``regions`` map to ``{ABSENT}``. An alias of both a cluster region and an absent one names
    the cluster region(s) only."""
    from greenroute.catalog.regions import REGIONS

    table: dict[str, set[int]] = {}
    for i, key in enumerate(regions):
        for a in aliases_of(key):
            table.setdefault(a, set()).add(i)
    for key in REGIONS:
        if key in regions:
            continue
        for a in aliases_of(key):
            if a not in table:
                table[a] = {ABSENT}
    return {a: frozenset(v) for a, v in table.items()}


def _alias_pattern(alias: str) -> re.Pattern:
    body = re.escape(alias).replace(r"\ ", r"\s+")
    flags = 0 if len(alias) <= SHORT_ALIAS_CHARS else re.I
    return re.compile(rf"(?<![A-Za-z0-9]){body}(?![A-Za-z0-9])", flags)


_PATTERNS: dict[tuple[str, ...], list[tuple[re.Pattern, frozenset[int]]]] = {}


def _patterns(regions: Sequence[str]) -> list[tuple[re.Pattern, frozenset[int]]]:
    key = tuple(regions)
    if key not in _PATTERNS:
        table = alias_table(regions)
        ordered = sorted(table, key=lambda a: (-len(a), a))  # longest first
        _PATTERNS[key] = [(_alias_pattern(a), table[a]) for a in ordered]
        if len(_PATTERNS) > 64:  # a few clusters per process; keep the cache small
            _PATTERNS.pop(next(iter(_PATTERNS)))
    return _PATTERNS[key]


def find_mentions(text: str, regions: Sequence[str]) -> list[Mention]:
    """Every datacenter mention in ``text``, in order: ``DC-k`` numbers (1-based, as the
    prompts number them) and aliases, non-overlapping, longer aliases first."""
    n = len(regions)
    taken: list[tuple[int, int]] = []
    out: list[Mention] = []

    def free(a: int, b: int) -> bool:
        return all(b <= s or e <= a for s, e in taken)

    for m in DC_ID.finditer(text):
        k = int(m.group(1))
        ok = 1 <= k <= n
        out.append(Mention(frozenset({k - 1}) if ok else frozenset(), m.start(), m.end(),
                           m.group(0), absent=not ok))  # fmt: skip
        taken.append((m.start(), m.end()))
    for pat, idx in _patterns(regions):
        for m in pat.finditer(text):
            if not free(m.start(), m.end()):
                continue
            absent = ABSENT in idx
            regs = frozenset() if absent else idx
            out.append(Mention(regs, m.start(), m.end(), m.group(0), absent=absent))
            taken.append((m.start(), m.end()))
    return sorted(out, key=lambda x: x.start)
