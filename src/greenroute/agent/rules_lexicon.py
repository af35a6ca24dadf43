"""Vocabulary of the plain-language rules parser: place aliases and word classes.

Places come from the region catalog (key, grid zone, city, name, continent, jurisdiction) plus
hand-written aliases (US states, countries, demonyms, grid operators). A place resolves to a
tuple of catalog keys; the parser intersects it with the scenario's regions. Word classes
(goal verbs, metrics, negations, ...) drive the clause grammar in
:mod:`greenroute.agent.rules_clauses`. Every word the parser accepts is listed here; anything
else in a command is reported, never ignored.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from greenroute.catalog.regions import REGIONS


def words(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` (keeps the vocabularies below readable)."""
    return frozenset(text.split())


# ----------------------------------------------------------------------------- places

# hand-written aliases of catalog regions (lower case; multi-word phrases allowed)
REGION_ALIASES: dict[str, tuple[str, ...]] = {
    "AU-NSW": ("new south wales", "nsw", "sydney"),
    "AU-VIC": ("victoria", "melbourne", "vic"),
    "BR-SP": ("brazil", "brasil", "brazilian", "sao paulo", "são paulo"),
    "CA-ON": ("canada", "canadian", "ontario", "toronto"),
    "CL-SIC": ("chile", "chilean", "santiago"),
    "DE-LU": ("germany", "german", "deutschland", "frankfurt", "luxembourg", "de-lu"),
    "GB": (
        "great britain", "britain", "british", "united kingdom", "uk", "england", "london",
    ),
    "IN-WE": ("india", "indian", "mumbai", "western india"),
    "JP-TK": ("japan", "japanese", "tokyo"),
    "KR": ("south korea", "korea", "korean", "seoul"),
    "SG": ("singapore", "singaporean"),
    "US-CAL-CISO": (
        "california", "californian", "caiso", "san jose", "silicon valley", "bay area", "cali",
    ),
    "US-MIDA-PJM": (
        "mid-atlantic", "pjm", "mid atlantic", "philadelphia", "pennsylvania", "virginia",
        "new jersey", "maryland",
    ),
    "US-NY-NYIS": ("new york", "new york city", "nyc", "nyiso", "manhattan"),
    "US-TEX-ERCO": ("texas", "texan", "ercot", "dallas", "houston", "austin"),
    "ZA": ("south africa", "south african", "johannesburg", "eskom"),
    "AU-QLD-BNE": ("queensland", "brisbane"),
    "AU-SA-ADL": ("south australia", "adelaide"),
    "AU-WA-PER": ("western australia", "perth"),
    "AU-TAS-HBA": ("tasmania", "hobart"),
    "AU-NT-DRW": ("northern territory", "darwin"),
}  # fmt: skip

# groups by catalog continent / jurisdiction (values: continent or jurisdiction codes)
CONTINENT_ALIASES: dict[str, tuple[str, ...]] = {
    "europe": ("europe",),
    "european": ("europe",),
    "north america": ("north-america",),
    "north american": ("north-america",),
    "south america": ("south-america",),
    "south american": ("south-america",),
    "latin america": ("south-america",),
    "the americas": ("north-america", "south-america"),
    "americas": ("north-america", "south-america"),
    "asia": ("asia",),
    "asian": ("asia",),
    "oceania": ("oceania",),
    "asia pacific": ("asia", "oceania"),
    "asia-pacific": ("asia", "oceania"),
    "apac": ("asia", "oceania"),
    "africa": ("africa",),
    "african": ("africa",),
    "emea": ("europe", "africa"),
}
JURISDICTION_ALIASES: dict[str, tuple[str, ...]] = {
    "eu": ("EU",),
    "european union": ("EU",),
    "usa": ("US",),
    "u.s.": ("US",),
    "u.s.a.": ("US",),
    "united states": ("US",),
    "america": ("US",),
    "american": ("US",),
    "australia": ("AU",),
    "australian": ("AU",),
}
# "US" is the pronoun "us" in lower case: it names the country only when written in capitals
CASE_SENSITIVE_ALIASES: dict[str, tuple[str, ...]] = {"US": ("US",)}
# region keys and zone ids this short are matched only as written (DE, SG, GB, ...)
SHORT_KEY_LEN = 3
# words that mean "every region of the scenario"
ALL_REGIONS_WORDS = ("everywhere", "anywhere", "all", "every", "each", "any")


@dataclass(frozen=True)
class Place:
    """A named place: one region or a group; ``keys`` are catalog keys (or scenario ids)."""

    surface: str  # the alias as the lexicon spells it
    keys: tuple[str, ...]
    is_group: bool


@functools.lru_cache(maxsize=1)
def catalog_places() -> dict[str, Place]:
    """Lower-case alias -> place, over the whole catalog."""
    out: dict[str, Place] = {}

    def add(alias: str, keys: Iterable[str], group: bool) -> None:
        alias = alias.lower()
        keys = tuple(sorted(keys))
        if alias not in out:
            out[alias] = Place(alias, keys, group)

    for key, reg in REGIONS.items():
        if len(key) > SHORT_KEY_LEN:
            add(key, (key,), False)
        if len(reg.zone_id) > SHORT_KEY_LEN:
            add(reg.zone_id, (key,), False)
        add(reg.city, (key,), False)
        for alias in REGION_ALIASES.get(key, ()):
            add(alias, (key,), False)
    for alias, conts in CONTINENT_ALIASES.items():
        add(alias, (k for k, r in REGIONS.items() if r.continent in conts), True)
    for alias, juris in JURISDICTION_ALIASES.items():
        add(alias, (k for k, r in REGIONS.items() if r.jurisdiction in juris), True)
    return out


@functools.lru_cache(maxsize=1)
def case_sensitive_places() -> dict[str, Place]:
    """Aliases matched only as written: short region keys and zone ids, and ``US``."""
    out: dict[str, Place] = {}
    for key, reg in REGIONS.items():
        for alias in (key, reg.zone_id):
            if len(alias) <= SHORT_KEY_LEN:
                out.setdefault(alias, Place(alias, (key,), False))
    for alias, juris in CASE_SENSITIVE_ALIASES.items():
        keys = tuple(sorted(k for k, r in REGIONS.items() if r.jurisdiction in juris))
        out[alias] = Place(alias, keys, True)
    return out


def display_name(key: str) -> str:
    """``US-CAL-CISO (California)``-style label used in read-backs and error messages."""
    aliases = REGION_ALIASES.get(key)
    if not aliases:
        return key
    return f"{key} ({aliases[0].title()})"


# ----------------------------------------------------------------------------- word classes

# goal verbs: "minimise cost", "optimise for carbon", "prioritise water"
GOAL_VERBS = words(
    "minimize minimise minimizing minimising reduce reducing cut cutting lower lowering "
    "decrease decreasing optimize optimise optimizing optimising prioritize prioritise "
    "prioritizing prioritising focus favour favor prefer save saving lowest least less "
    "min smallest fewer"
)
MAXIMISE_VERBS = words("maximize maximise maximizing maximising max increase raise")
# metric synonyms -> ObjectiveWeights field
METRIC_WORDS: dict[str, str] = {
    **dict.fromkeys(
        words(
            "cost costs price prices pricing bill bills money spend spending expense expenses "
            "dollars tariff tariffs expensive savings"
        ),
        "cost",
    ),
    **dict.fromkeys(words("carbon co2 co₂ emission emissions ghg greenhouse footprint"), "carbon"),
    **dict.fromkeys(words("water wue"), "water"),
    **dict.fromkeys(
        words("latency latencies ttft speed delay delays responsiveness response performance"),
        "latency",
    ),
}
# one word that is both a goal and its metric
SUPERLATIVE_METRICS: dict[str, str] = {
    "cheapest": "cost",
    "cheaper": "cost",
    "cheap": "cost",
    "greenest": "carbon",
    "greener": "carbon",
    "cleanest": "carbon",
    "cleaner": "carbon",
    "fastest": "latency",
    "faster": "latency",
    "quickest": "latency",
}
# "energy cost" is cost; "energy" alone is a question (cost or carbon?)
ENERGY_WORDS = frozenset(("energy", "power", "electricity"))
BALANCED_WORDS = frozenset(("balanced", "balance", "equally", "equal", "evenly"))
# "prioritise carbon over cost": the metric after these is not a goal
OVER_WORDS = frozenset(("over", "than", "instead"))

NEGATION_WORDS = words("not no never none nothing forbid forbids forbidden prohibit")
EXCLUDE_VERBS = words(
    "avoid avoiding exclude excluding excluded ban banned block blocked skip skipping "
    "blacklist blacklisted drain disable disabled shun without stop cease halt"
)
DOWN_WORDS = words("down offline unavailable outage maintenance closed off off-limits")
# work classes: only the latency bound is per class (interactive); other rules cover all work
CLASS_WORDS = words("interactive latency-sensitive urgent deferrable batch background")
# obligations: "data from Germany has to be processed in Europe" (a residency, not a wish)
OBLIGATION_WORDS = words("must shall has have needs need required requires")
EXCEPT_WORDS = frozenset(("except", "excepting", "but", "besides"))
SEND_VERBS = words(
    "send sending sent route routing routed dispatch dispatching place placing schedule "
    "scheduling run running process processing processed use using move moving forward "
    "forwarding direct serve serving served put shift shifting offload offloading go going "
    "handle handled handling assign assigning receive receives get gets accept accepts"
)
ONLY_WORDS = frozenset(("only", "exclusively", "solely", "just"))
STAY_VERBS = frozenset(("stay", "stays", "remain", "remains", "kept", "keep", "confined"))
LEAVE_VERBS = frozenset(("leave", "leaves", "exit", "outside"))
AWAY_WORDS = frozenset(("out", "away"))
# prepositions that introduce the destination (region set) of a residency rule
DEST_PREPS = frozenset(("in", "within", "inside", "to", "into", "outside", "leave", "exit"))
ORIGIN_PREPS = frozenset(("from", "originating", "origin", "originate", "origins", "at", "of"))
# nouns that make the place before them an origin: "California workloads", "German data"
WORK_NOUNS = words(
    "workload workloads work traffic data job jobs request requests task tasks user users "
    "customers queries query load"
)
POWER_NOUNS = words("power draw consumption usage it")
CAP_WORDS = words(
    "cap capped limit limited max maximum below under within less most exceed exceeding "
    "beyond above than up keep keeping hold holding stay"
)
LATENCY_BOUND_WORDS = frozenset(("latency", "ping", "rtt", "delay", "one-way", "network"))
ROUND_TRIP_WORDS = frozenset(("rtt", "round-trip", "round", "trip"))
REASON_WORDS = frozenset(("due", "because", "owing"))
# references that need a region name: "avoid the dirty one"
VAGUE_WORDS = words("one ones it that this there them those")
# adjectives that pick a region by a property that changes over time: always a question
VAGUE_ADJECTIVES = words(
    "dirty dirtiest dirtier slow slowest slower busy busiest worst bad hot hottest other "
    "problematic congested"
)
# words that make metric words a goal: "keep costs low", "carbon first", "70 % carbon"
GOAL_HINTS = words("keep hold low down minimum minimal first priority matters most optimal focus")
# clause separators that always start a new clause
STRONG_SEPARATORS = frozenset(("but", "however", "while", "additionally"))
# joiners like "and": they start a new clause only when a verb follows ("then the carbon")
SOFT_SEPARATORS = frozenset(("and", "or", "then", "also", "plus"))

FILLER_WORDS = words(
    """a an the our my your their its we you i they please kindly to of in on at for from by
    with into onto towards toward and or nor any all every each region regions datacenter
    datacenters data-center data-centers datacentre datacentres center centre site sites node
    nodes location locations cluster clusters zone zones grid must should shall may can could
    will would be is are being been do does did have has need needs needed make sure ensure
    hard soft constraint constraints rule rules requirement new now from here on going forward
    anything everything else workload workloads work traffic data job jobs request requests task
    tasks user users customers queries query load loads origin origins originating originate
    that which who whose so as much possible overall total whenever always time times while
    also there between until till through during compute computing inference capacity server
    servers please let lets let's allowed allow permitted want wants like would prefer
    our whole entire goal objective target both either
    about residency regulation regulations law laws policy compliance legal sovereignty
    note rule limits bounds"""
)
