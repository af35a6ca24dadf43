"""What-ifs: "What if latency to Chile doubles?", "What if DE-LU is down from 14:00 to 18:00 on
the 3rd?", "What if prices rise 20 %?".

A question becomes a :class:`Perturbation` of the prepared run (no language model involved):

* ``latency``: one-way network latency to the named regions (all if none) times a factor;
* ``price`` / ``carbon``: the electricity price or grid carbon intensity of the named regions
  (all if none) times a factor; the facility factors (cost and carbon per IT kWh) are
  recomputed from the scaled signals by the scenario's facility model;
* ``outage``: the named regions excluded during a window (read by the rules parser, so the
  same times are understood: "from 14:00 to 18:00 on the 3rd", "between 2pm and 6pm"), a hard
  rule the simulator's validator enforces;
* ``demand``: every origin's request rate times a factor (synthetic workloads; the scenario is
  prepared again with the run's seed).

The perturbed run is simulated with the run's policy, seed, forecast and weights, and compared
with the run re-simulated unperturbed: a before/after table and a sentence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from greenroute.agent.copilot_run import RunContext, region_share_pct
from greenroute.agent.copilot_text import (
    UNDERSTOOD,
    CopilotQuestionError,
    label,
    places_in,
    read_tokens,
)
from greenroute.constraints import ConstraintSet
from greenroute.sim.prepare import Prepared
from greenroute.sim.results import RunResult

KINDS = ("latency", "price", "carbon", "outage", "demand")
_KIND_WORDS = {
    "latency": {"latency", "latencies", "delay", "delays", "rtt", "ping", "network"},
    "price": {"price", "prices", "tariff", "tariffs", "electricity", "cost", "costs"},
    "carbon": {"carbon", "co2", "intensity", "emissions"},
    "outage": {"down", "outage", "offline", "unavailable", "fails", "fail", "dark",
               "maintenance", "unreachable", "lost", "out"},
    "demand": {"demand", "traffic", "load", "requests", "workload", "usage"},
}  # fmt: skip
_UP = {"dearer", "pricier", "costlier", "dirtier", "slower", "worse", "rise", "rises",
       "increase", "increases", "grow", "grows", "up", "higher", "more", "jump", "jumps",
       "climb", "climbs", "goes", "go", "rose", "increased", "grew"}  # fmt: skip
_DOWN = {"cheaper", "cleaner", "faster", "better", "fall", "falls", "drop", "drops", "down",
         "decrease", "decreases", "lower", "less", "cut", "fell", "dropped", "decreased",
         "shrink", "shrinks"}  # fmt: skip
_WORD_FACTORS = {"double": 2.0, "doubles": 2.0, "doubled": 2.0, "triple": 3.0, "triples": 3.0,
                 "tripled": 3.0, "quadruple": 4.0, "quadruples": 4.0, "halve": 0.5,
                 "halves": 0.5, "halved": 0.5, "half": 0.5}  # fmt: skip


@dataclass(frozen=True)
class Perturbation:
    kind: str
    regions: tuple[str, ...]  # the regions it touches (all regions when none was named)
    factor: float = 1.0  # latency, price, carbon, demand
    constraints: ConstraintSet | None = None  # outage
    text: str = ""  # how the answer names it

    def apply(self, ctx: RunContext) -> Prepared:
        prep = ctx.prep
        cols = np.array([r in self.regions for r in ctx.regions])
        if self.kind == "latency":
            lat = prep.latency_s.copy()
            lat[:, cols] *= self.factor
            return replace(prep, latency_s=lat, reference_scales=None)
        if self.kind in ("price", "carbon"):
            from greenroute.sim.prepare import scenario_facility

            sig = prep.signals
            key = "price_usd_per_kwh" if self.kind == "price" else "carbon_intensity_g_per_kwh"
            arr = getattr(sig, key).copy()
            arr[:, cols] *= self.factor
            sig = replace(sig, **{key: arr})
            factors = scenario_facility(prep.scenario).factors(
                temp_c=sig.temp_c, wetbulb_c=sig.wetbulb_c,
                carbon_intensity_g_per_kwh=sig.carbon_intensity_g_per_kwh,
                price_usd_per_kwh=sig.price_usd_per_kwh,
                ewif_l_per_kwh=sig.water_intensity_l_per_kwh,
            )  # fmt: skip
            return replace(prep, signals=sig, factors=factors, reference_scales=None)
        if self.kind == "outage":
            assert self.constraints is not None
            return ctx.with_constraints(self.constraints)
        if self.kind == "demand":
            return _scaled_demand(ctx, self.factor)
        raise AssertionError(self.kind)


def _scaled_demand(ctx: RunContext, factor: float) -> Prepared:
    from greenroute.data.workload import WorkloadSpec
    from greenroute.sim.prepare import prepare

    sc = ctx.prep.scenario
    wl = sc.workload
    if not isinstance(wl, WorkloadSpec):
        raise CopilotQuestionError(
            f"scenario {sc.name} replays a trace: its demand cannot be scaled (what-ifs on "
            "latency, prices, carbon and outages still work)"
        )
    wl = replace(wl, interactive_rps=tuple(x * factor for x in wl.interactive_rps),
                 deferrable_rps=tuple(x * factor for x in wl.deferrable_rps))  # fmt: skip
    return prepare(replace(sc, workload=wl), seed=ctx.prep.seed, data_dir=ctx.prep.data_dir)


def parse_whatif(question: str, ctx: RunContext) -> Perturbation:
    """The perturbation a what-if question asks for (a clear error when none is readable)."""
    body = _strip_lead(question)
    vocab = set().union(*_KIND_WORDS.values(), _UP, _DOWN, _WORD_FACTORS, ("times", "fold"))
    toks = read_tokens(body, ctx.regions, ctx.origins, keep=vocab)
    words = {t.low for t in toks if t.kind == "word"}
    kinds = [k for k in KINDS if words & _KIND_WORDS[k]]
    if "carbon" in kinds and "price" in kinds and "cost" in words and "carbon" in words:
        kinds.remove("price")
    if "intensity" in words and "carbon" not in words:
        kinds = [k for k in kinds if k != "carbon"] + ["carbon"]
    has_factor = _factor(toks) is not None
    if "outage" in kinds and has_factor and len(kinds) > 1:
        kinds.remove("outage")  # "prices go down 20 %"
    if len(kinds) != 1:
        what = "nothing I can simulate" if not kinds else "several changes at once"
        raise CopilotQuestionError(f"{question!r} asks {what}. {UNDERSTOOD}")
    kind = kinds[0]
    _check_unknown_places(toks, ctx)
    places = places_in(toks, ctx.regions, ctx.origins)
    regions = tuple(dict.fromkeys(k for p in places for k in p.ids if k in ctx.regions))
    named = bool(regions)
    if kind == "outage":
        return _outage(body, ctx, regions)
    factor = _factor(toks)
    if factor is None:
        raise CopilotQuestionError(
            f'by how much? say e.g. "doubles", "rises 20 %", "falls 30 %", "x3" ({question!r})'
        )
    if not (factor >= 0 and math.isfinite(factor)):
        raise CopilotQuestionError(f"a factor of {factor:g} is not a change I can simulate")
    if kind == "demand" and named:
        raise CopilotQuestionError("demand can be scaled for every origin at once only")
    if not named:
        regions = ctx.regions
    where = ", ".join(label(r) for r in regions) if named else "every region"
    noun = {"latency": "one-way latency to", "price": "the electricity price in",
            "carbon": "the grid carbon intensity in", "demand": "demand"}[kind]  # fmt: skip
    text = (f"{noun} x{factor:g}" if kind == "demand"
            else f"{noun} {where} x{factor:g}")  # fmt: skip
    return Perturbation(kind, regions, factor, None, text)


def _check_unknown_places(toks, ctx: RunContext) -> None:
    """A word where a place is expected ("latency to Narnia") is an unknown region, never a
    silent "every region"."""
    from greenroute.agent.rules_clauses import Reader
    from greenroute.agent.rules_errors import UnknownRegionError
    from greenroute.agent.rules_split import Clause
    from greenroute.agent.rules_text import known_words

    ours = set().union(*_KIND_WORDS.values(), _UP, _DOWN, _WORD_FACTORS)
    reader = Reader(ctx.regions, ctx.origins)
    for i, t in enumerate(toks):
        if t.kind != "word" or t.low in ours or t.low in known_words():
            continue
        prev = toks[i - 1] if i > 0 else None
        err = reader.unknown_word(t, Clause(toks), prev)
        if isinstance(err, UnknownRegionError):
            raise err


def _strip_lead(q: str) -> str:
    import re

    q = q.strip().rstrip("?").strip()
    return re.sub(
        r"^(what\s+(would\s+happen|happens)\s+if|what\s+if|suppose|imagine|if)\s+", "", q,
        flags=re.I,
    )  # fmt: skip


def _factor(toks) -> float | None:
    for i, t in enumerate(toks):
        if t.kind == "word" and t.low in _WORD_FACTORS:
            return _WORD_FACTORS[t.low]
        if t.kind == "pct":
            ctx_words = {x.low for x in toks[max(0, i - 4) : i + 3] if x.kind == "word"}
            if ctx_words & _DOWN:
                return 1.0 - t.value
            return 1.0 + t.value
        if t.kind == "num":
            nxt = toks[i + 1].low if i + 1 < len(toks) else ""
            prv = toks[i - 1].low if i > 0 else ""
            if nxt in ("times", "x", "fold") or prv == "x":
                return float(t.value)
    for t in toks:  # "x3" reads as one word
        if t.kind == "word" and len(t.low) > 1 and t.low[0] == "x" and t.low[1:].isdigit():
            return float(t.low[1:])
    return None


def _outage(body: str, ctx: RunContext, regions: tuple[str, ...]) -> Perturbation:
    from greenroute.agent.rules import RuleCommandError, parse_command

    try:
        rs = parse_command(body, ctx.regions, now=ctx.start, origins=ctx.origins,
                           horizon_s=ctx.horizon_s)  # fmt: skip
    except RuleCommandError as err:
        if not regions:
            raise CopilotQuestionError(
                f'which region is down? name one of {", ".join(ctx.regions)} (e.g. "What if '
                f'DE-LU is down from 14:00 to 18:00 on the 1st?"); {err}'
            ) from None
        raise CopilotQuestionError(f"could not read the outage: {err}") from None
    cs = rs.constraints
    if rs.weights is not None or cs.residency or cs.power_caps_kw or not cs.exclusions:
        raise CopilotQuestionError(f"{body!r} is more than an outage. {UNDERSTOOD}")
    inside = [e for e in cs.exclusions if e.overlaps(0.0, ctx.horizon_s)]
    if not inside:
        from greenroute.agent.rules_time import fmt_window

        e = cs.exclusions[0]
        raise CopilotQuestionError(
            f"the outage ({fmt_window(e.start_s, e.end_s, ctx.start)}) is outside this run, "
            f"which covers {ctx.start:%Y-%m-%d %H:%M} UTC + {ctx.horizon_s / 86400:g} days"
        )
    from greenroute.agent.rules_time import fmt_window

    text = " and ".join(f"{label(e.region)} down {fmt_window(e.start_s, e.end_s, ctx.start)}"
                        for e in inside)  # fmt: skip
    regs = tuple(dict.fromkeys(e.region for e in cs.exclusions))
    return Perturbation("outage", regs, 1.0, ConstraintSet(tuple(inside)), text)


# ----------------------------------------------------------------------------- answering
@dataclass
class WhatIf:
    perturbation: Perturbation
    before: RunResult
    after: RunResult
    rows: list[tuple[str, float, float]] = field(default_factory=list)  # (name, before, after)
    text: str = ""


def what_if(ctx: RunContext, p: Perturbation) -> WhatIf:
    before = ctx.baseline()
    after = ctx.simulate(p.apply(ctx))
    rows = comparison_rows(ctx, before, after)
    if p.kind == "outage":
        for ex in p.constraints.exclusions:  # type: ignore[union-attr]
            rows.append((f"requests sent to {ex.region} in its outage window",
                         window_dispatched(before, ex), window_dispatched(after, ex)))  # fmt: skip
    out = WhatIf(p, before, after, rows)
    out.text = f"What if {p.text}?\n" + table_text(rows) + "\n" + sentence(ctx, p.text, rows)
    return out


def comparison_rows(ctx: RunContext, before: RunResult, after: RunResult) -> list:
    b, a = before.metrics, after.metrics
    rows = [
        ("carbon (kg CO2)", b["carbon_kg"], a["carbon_kg"]),
        ("energy cost ($)", b["cost_usd"], a["cost_usd"]),
        ("energy (kWh)", b["energy_kwh"], a["energy_kwh"]),
        ("water (m3)", b["water_m3"], a["water_m3"]),
        ("SLO violations (%)", b["slo_violation_pct"], a["slo_violation_pct"]),
        ("mean TTFT (ms)", 1e3 * b["ttft_mean_s"], 1e3 * a["ttft_mean_s"]),
        ("requests dropped", b["requests_dropped"], a["requests_dropped"]),
        ("objective J", b["objective"], a["objective"]),
        ("plans replaced by the validator", b["invalid_plans"], a["invalid_plans"]),
    ]
    sb, sa = region_share_pct(before, ctx.regions), region_share_pct(after, ctx.regions)
    for r, reg in enumerate(ctx.regions):
        rows.append((f"share of work in {reg} (%)", float(sb[r]), float(sa[r])))
    return rows


def window_dispatched(res: RunResult, ex) -> float:
    """Requests the run's epochs frame shows sent to ``ex.region`` in epochs overlapping its
    window."""
    ep = res.epochs
    epoch_s = float(res.manifest["epoch_s"])
    t0 = ep["epoch"].to_numpy() * epoch_s
    inside = (t0 < ex.end_s) & (ex.start_s < t0 + epoch_s) & (ep["region"] == ex.region)
    return float(ep.loc[inside, "requests_dispatched"].sum())


def _num(v: float) -> str:
    if not math.isfinite(v):
        return "n/a"
    if v == 0:
        return "0"
    mag = abs(v)
    if mag >= 100:
        return f"{v:,.0f}"
    if mag >= 1:
        return f"{v:,.2f}"
    return f"{v:.3g}"


def _change(b: float, a: float) -> str:
    if not (math.isfinite(a) and math.isfinite(b)):
        return ""
    if b == 0:
        return "" if a == 0 else "new"
    return f"{100 * (a - b) / abs(b):+.1f} %"


def table_text(rows: list[tuple[str, float, float]]) -> str:
    w = max(len(r[0]) for r in rows)
    head = f"{'metric':<{w}}  {'before':>12}  {'after':>12}  {'change':>9}"
    lines = [head, "-" * len(head)]
    for name, b, a in rows:
        lines.append(f"{name:<{w}}  {_num(b):>12}  {_num(a):>12}  {_change(b, a):>9}")
    return "\n".join(lines)


def sentence(ctx: RunContext, what: str, rows: list[tuple[str, float, float]]) -> str:
    d = {name: (b, a) for name, b, a in rows}
    (cb, ca), (kb, ka), (sb, sa) = (d["carbon (kg CO2)"], d["energy cost ($)"],
                                    d["SLO violations (%)"])  # fmt: skip
    shares = [(n, b, a) for n, b, a in rows if n.startswith("share of work in ")]
    n, b, a = max(shares, key=lambda x: abs(x[2] - x[1]))
    reg = n.removeprefix("share of work in ").removesuffix(" (%)")
    return (
        f"With {what}, {ctx.policy_name} (seed {ctx.seed}, same workload) would emit "
        f"{_num(ca)} kg CO2 instead of {_num(cb)} ({_change(cb, ca) or 'no change'}), spend "
        f"${_num(ka)} instead of ${_num(kb)} ({_change(kb, ka) or 'no change'}) and violate "
        f"{_num(sa)} % of SLOs instead of {_num(sb)} %; the largest shift in routing is "
        f"{label(reg)}: {_num(b)} % -> {_num(a)} % of the work."
    )
