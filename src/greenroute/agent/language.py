"""The language API of seed 000 (Appendix B.1): observation -> prompt, action -> response text,
response text -> action, and the valid actions of a decision.

Actions are the numerical expert's own (``policies.rl.geo``, ``envs.geo``, seed 000 A.1):

- **Manager** of origin ``o``: an ``int`` region index ``r`` in ``0..N-1``, the destination of
  all of the origin's work this epoch (both classes; ``GeoManager-v0``'s action, and what
  ``Manager.act`` returns). Rendered ``DC-{r+1} ({region key})``.
- **Worker** of origin ``o`` (at datacenter ``features.worker_region(obs, o)``): ``1`` =
  execute the held deferrable work now (plan ``hold[o] = 0``), ``0`` = defer it (``hold[o] =
  1``); ``GeoWorker-v0``'s action. Rendered ``1 (execute)`` / ``0 (defer)``.

One decision is one agent's (a :class:`Role`); the paper's single prompt for N integers is
split so that an LLM scores at most N candidates per decision (see ``agent.templates``).

Parsing never raises on model output. A response that names no action, names two different
ones, names one that does not exist or one the rules forbid becomes the **fallback action**:
the Manager keeps the work at the origin's own region (or, when that is not allowed, the
allowed region nearest to the origin: what ``local-only`` and ``GeoCore.local_destinations``
do), the Worker executes now (nothing is held, as the expert's ``execute`` worker). Each
fallback is counted in :class:`LanguageCounters`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from greenroute.agent import templates as T
from greenroute.agent.aliases import find_mentions
from greenroute.core.errors import ConfigError
from greenroute.core.types import Observation
from greenroute.policies.rl import features as F

ROLES = ("manager", "worker")
EXECUTE, DEFER = 1, 0  # the Worker's actions (seed 000 A.1: "Defer or Execute")
CAP_TOL_KW = 1e-9  # as constraints.CAP_TOL_KW: a cap this close to idle power leaves no slot

Action = int


@dataclass(frozen=True)
class Role:
    """Whose decision a prompt asks for.

    ``origin``: the origin index whose workload the Manager routes, or whose held deferrable
    work the Worker releases. ``decided`` (Manager): the destinations chosen this epoch by the
    managers of origins ``0..len(decided)-1``, which act before this one. ``memory`` (Worker):
    the past carbon-intensity and temperature values the expert's trend features use
    (``features.TrendMemory``; without it the past trend reads as flat).
    """

    kind: Literal["manager", "worker"]
    origin: int
    decided: tuple[int, ...] = ()
    memory: F.TrendMemory | None = field(default=None, compare=False, repr=False)

    @staticmethod
    def manager(origin: int, decided: Sequence[int] = ()) -> Role:
        return Role("manager", int(origin), tuple(int(d) for d in decided))

    @staticmethod
    def worker(origin: int, memory: F.TrendMemory | None = None) -> Role:
        return Role("worker", int(origin), (), memory)

    def check(self, obs: Observation) -> None:
        if self.kind not in ROLES:
            raise ConfigError(f"role must be one of {', '.join(ROLES)}, got {self.kind!r}")
        if not 0 <= self.origin < obs.n_origins:
            raise ConfigError(
                f"origin index {self.origin} out of range: the observation has "
                f"{obs.n_origins} origins ({', '.join(obs.origins)})"
            )
        bad = [d for d in self.decided if not 0 <= d < obs.n_regions]
        if bad or len(self.decided) > obs.n_origins:
            raise ConfigError(
                f"decided destinations {self.decided} do not fit {obs.n_origins} origins and "
                f"{obs.n_regions} regions"
            )


@dataclass(frozen=True)
class ParseResult:
    """``action`` is always usable: the parsed action when ``valid``, else the fallback.

    ``status``: ``ok``; ``unparseable`` (no action named); ``ambiguous`` (two different
    actions named, or a mention that fits several regions); ``unknown`` (a datacenter that is
    not in this cluster); ``forbidden`` (a datacenter the rules do not allow this decision).
    """

    action: Action
    valid: bool
    status: str
    reason: str
    named: Action | None = None  # the action the text named, when it named exactly one

    @property
    def fallback(self) -> bool:
        return not self.valid

    @property
    def invalid_action(self) -> bool:
        """The text named an action, but not a valid one (unknown or forbidden)."""
        return self.status in ("unknown", "forbidden")


@dataclass
class LanguageCounters:
    """What a policy reports in its metrics: ``llm_invalid_actions`` (responses that named an
    unknown or forbidden action) and ``llm_fallbacks`` (every response replaced by the fallback
    action: invalid, unparseable or ambiguous), out of ``llm_decisions``."""

    llm_decisions: int = 0
    llm_invalid_actions: int = 0
    llm_fallbacks: int = 0

    def record(self, result: ParseResult) -> ParseResult:
        self.llm_decisions += 1
        self.llm_invalid_actions += int(result.invalid_action)
        self.llm_fallbacks += int(result.fallback)
        return result

    def as_metrics(self) -> dict[str, int]:
        return {
            "llm_decisions": self.llm_decisions,
            "llm_invalid_actions": self.llm_invalid_actions,
            "llm_fallbacks": self.llm_fallbacks,
        }


# ------------------------------------------------------------------------- valid actions
def _allowed_regions(obs: Observation, o: int, constraints=None) -> np.ndarray:
    """[R] bool: regions the Manager of origin ``o`` may choose.

    A region qualifies if some class of the origin's work may go there (the simulator's
    ``allowed`` mask, and ``constraints``' mask for this epoch when given: a plan built from
    the action sends a class the region is closed to, e.g. interactive work beyond a latency
    bound, to the nearest region open to it, as ``GeoCore.plan_from_actions`` does), and it has
    usable slots now (``capacity_slots > 0``; with ``constraints``, a power cap at or below
    the region's idle power leaves none). If no allowed region has capacity, the allowed ones
    stay candidates (the work must go somewhere; it queues).
    """
    mask = np.asarray(obs.allowed[:, o, :], dtype=bool).any(axis=0)
    if constraints is not None:
        extra = constraints.allowed_mask(
            obs.origins, obs.regions, obs.time_s, obs.time_s + obs.epoch_s, obs.latency_s
        )
        mask &= extra[:, o, :].any(axis=0)
    has_cap = np.asarray(obs.capacity_slots, dtype=float) > 0
    if constraints is not None:
        for r, reg in enumerate(obs.regions):
            cap = constraints.power_caps_kw.get(reg)
            if cap is not None and cap <= float(obs.idle_power_kw[r]) + CAP_TOL_KW:
                has_cap[r] = False
    return mask & has_cap if (mask & has_cap).any() else mask


def candidate_actions(obs: Observation, role: Role, constraints=None) -> list[Action]:
    """Every action the rules allow for this decision, in index order (Manager: region
    indices, see :func:`_allowed_regions`; Worker: ``[1, 0]``, execute and defer: holding is
    always allowed, deadlines still force release). ``constraints`` (a
    ``greenroute.constraints.ConstraintSet``) adds rules to the observation's own mask."""
    _check(role, obs)
    if role.kind == "worker":
        return [EXECUTE, DEFER]
    return [int(r) for r in np.flatnonzero(_allowed_regions(obs, role.origin, constraints))]


def fallback_action(obs: Observation, role: Role, constraints=None) -> Action:
    """Manager: the origin's own region if allowed, else the allowed region with the lowest
    latency from the origin (the origin's own region when nothing is allowed; the simulator's
    validator then has the last word). Worker: execute."""
    _check(role, obs)
    if role.kind == "worker":
        return EXECUTE
    o = role.origin
    cands = candidate_actions(obs, role, constraints)
    origin = obs.origins[o]
    own = obs.regions.index(origin) if origin in obs.regions else None
    if own is not None and own in cands:
        return own
    if cands:
        return int(min(cands, key=lambda r: (float(obs.latency_s[o, r]), r)))
    return own if own is not None else min(o, obs.n_regions - 1)


def effective_action(action: Action, obs: Observation, role: Role, constraints=None) -> Action:
    """The candidate a teacher's action amounts to (for recording datasets). A Manager
    destination outside :func:`candidate_actions` (a fixed-size expert can pick a forbidden
    region) is replaced by the candidate with the lowest latency from the origin: where the
    plan builders (``GeoCore.plan_from_actions``, ``RLGeoPolicy.plan``) send the work of a
    class its choice is closed to (the nearest allowed region), unless that region has no
    usable slots. A Worker action is 1 (execute) unless it is 0 (defer)."""
    _check(role, obs)
    if role.kind == "worker":
        return DEFER if int(action) == DEFER else EXECUTE
    cands = candidate_actions(obs, role, constraints)
    a = int(action)
    if a in cands or not cands:
        return a
    o = role.origin
    return int(min(cands, key=lambda r: (float(obs.latency_s[o, r]), r)))


# ------------------------------------------------------------------------- text
def textualize(obs: Observation, role: Role, constraints=None) -> str:
    """The Appendix B.1 prompt (``### INSTRUCTION / ### INPUT / ### RESPONSE``) for ``role``;
    see :mod:`greenroute.agent.templates` for the fields and what differs from the paper."""
    _check(role, obs)
    if role.kind == "manager":
        allowed = set(candidate_actions(obs, role, constraints))
        return T.manager_prompt(obs, role.origin, role.decided, allowed)
    return T.worker_prompt(obs, role.origin, role.memory)


def render(action: Action, obs: Observation, role: Role) -> str:
    """The response text of ``action``: ``DC-3 (US-CAL-CISO)`` or ``1 (execute)``/``0 (defer)``
    (the paper's integer answer, with the region key or the action's name beside it)."""
    _check(role, obs)
    a = int(action)
    if role.kind == "worker":
        if a not in (EXECUTE, DEFER):
            raise ConfigError(f"worker action must be 1 (execute) or 0 (defer), got {action!r}")
        return "1 (execute)" if a == EXECUTE else "0 (defer)"
    if not 0 <= a < obs.n_regions:
        raise ConfigError(f"manager action {action!r} is not a region index 0..{obs.n_regions - 1}")
    return T.dc_label(obs.regions, a)


def render_epoch(dest: Sequence[int], execute: Sequence[int], obs: Observation) -> str:
    """One epoch's decisions in the paper's "DECISION MADE" form (Appendix B.1, explanation
    prompt: "DC1 routes to DC3, DC2 routes to DC3"), for the copilot: ``dest[o]`` is origin
    ``o``'s Manager action, ``execute[o]`` its Worker action (1 execute, 0 defer)."""
    routes = ", ".join(
        f"{T.origin_label(obs, o)} routes to {T.dc_label(obs.regions, int(d))}"
        for o, d in enumerate(dest)
    )
    held = [T.origin_label(obs, o) for o, a in enumerate(execute) if int(a) == DEFER]
    return f"{routes}; deferred at {', '.join(held) if held else 'none'}"


# the answer is the response's first sentence: cut at a line break, a sentence end or a reason
_CUT = re.compile(r"\n|[.;!?](?:\s|$)|\b(?:because|since|as|due to|given)\b", re.I)
_BARE_INT = re.compile(r"^\W*?(\d+)\W*$")
_EXEC_WORDS = re.compile(r"\b(?:execute|execute now|run|run now|process|start|now)\b", re.I)
_DEFER_WORDS = re.compile(r"\b(?:defer|wait|hold|delay|postpone|later)\b", re.I)
_NEGATION = re.compile(r"\b(?:not|don'?t|do not|never|no)\b", re.I)
_DIGIT = re.compile(r"(?<![\w.])(\d+)(?!\w|\.\d)")


def answer_span(text: str) -> str:
    """The part of a response that holds the answer: after the last ``### RESPONSE:`` the
    model may have echoed, the first non-empty line, up to its first sentence end or the
    first ``because``/``since``/... (trailing explanations are ignored)."""
    text = str(text)
    if T.RESPONSE_HEADER in text:
        text = text.rsplit(T.RESPONSE_HEADER, 1)[1]
    text = text.replace("\r", "\n").strip()
    m = _CUT.search(text)
    return (text[: m.start()] if m else text).strip()


def parse(text: str, obs: Observation, role: Role, constraints=None) -> ParseResult:
    """The action a response names, or the counted fallback (module docstring); never
    raises on ``text``. Tolerates case, whitespace, markdown, an echoed prompt, trailing
    explanations and region aliases (``agent.aliases``), but picks no region when the answer
    fits two."""
    _check(role, obs)
    cands = candidate_actions(obs, role, constraints)
    try:  # model output must never crash the caller (e.g. int() of a 5000-digit number)
        span = answer_span(text)
        if role.kind == "worker":
            named, status, why = _parse_worker(span)
        else:
            named, status, why = _parse_manager(span, obs)
    except Exception as exc:  # any failure on the text is an unparseable answer
        named, status, why = None, "unparseable", f"unreadable response ({type(exc).__name__})"
    if role.kind == "manager" and status == "ok" and named not in cands:
        status = "forbidden"
        why = f"{T.dc_label(obs.regions, named)} is not allowed for this decision"
    if status == "ok":
        return ParseResult(named, True, "ok", "", named)
    fb = fallback_action(obs, role, constraints)
    return ParseResult(fb, False, status, f"{why}; fallback {render(fb, obs, role)}", named)


def _check(role: Role, obs: Observation) -> None:
    if not isinstance(role, Role):
        raise ConfigError(f"role must be Role.manager(origin) or Role.worker(origin), got {role!r}")
    role.check(obs)


def _parse_manager(span: str, obs: Observation) -> tuple[int | None, str, str]:
    mentions = find_mentions(span, obs.regions)
    rest = span
    for m in reversed(mentions):
        rest = rest[: m.start] + " " + rest[m.end :]
    bare = _BARE_INT.match(rest)
    if bare:  # the paper's bare integer answer: a 1-based DC number (alone, or beside a name)
        k = int(bare.group(1))
        ok = 1 <= k <= obs.n_regions
        mentions.append(_int_mention(k - 1 if ok else None))
    if not mentions:
        return None, "unparseable", f"no datacenter named in {span[:80]!r}"
    present = [m for m in mentions if not m.absent]
    if not present:
        names = ", ".join(m.text for m in mentions)
        return None, "unknown", f"{names} is not a datacenter of this cluster"
    if len(present) < len(mentions):
        return None, "ambiguous", f"{span[:80]!r} names datacenters inside and outside the cluster"
    common = frozenset.intersection(*(m.regions for m in present))
    if len(common) != 1:
        return None, "ambiguous", f"{span[:80]!r} does not name exactly one datacenter"
    return int(next(iter(common))), "ok", ""


def _int_mention(r: int | None):
    from greenroute.agent.aliases import Mention

    if r is None:
        return Mention(frozenset(), 0, 0, "a DC number out of range", absent=True)
    return Mention(frozenset({r}), 0, 0, f"DC-{r + 1}")


def _parse_worker(span: str) -> tuple[int | None, str, str]:
    said: set[int] = set()
    digits = {int(d) for d in _DIGIT.findall(span)}
    if digits - {0, 1}:
        return None, "unknown", f"{sorted(digits - {0, 1})} is not 0 (defer) or 1 (execute)"
    said |= digits
    if _EXEC_WORDS.search(span):
        said.add(EXECUTE)
    if _DEFER_WORDS.search(span):
        said.add(DEFER)
    if not said:
        return None, "unparseable", f"neither execute (1) nor defer (0) in {span[:80]!r}"
    if _NEGATION.search(span):
        return None, "ambiguous", f"negated answer {span[:80]!r}"
    if len(said) > 1:
        return None, "ambiguous", f"{span[:80]!r} says both execute and defer"
    return said.pop(), "ok", ""
