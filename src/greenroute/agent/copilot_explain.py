"""Explain a decision: "Why did epoch 412 send California's traffic to Chile?".

The run is replayed to the epoch (:meth:`RunContext.stepped_to`), the plan the policy took
there is read, and the epoch is re-simulated from the run's own state (a
:class:`~greenroute.sim.fork.Fork`, which restores the run afterwards) once per alternative:
all of the origin's work sent to one other allowed region, everything else as planned. The
answer states the plan's shares, the observation's signals (carbon intensity, price, one-way
latency, utilisation) and each alternative's deltas in carbon, cost, SLO misses and the
objective J. Every number is one of these, formatted with the precision given in
:data:`FORMATS`; nothing is computed by a language model (see ``copilot.py`` for the optional
LLM phrasing and its number check).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from greenroute.agent.copilot_run import RunContext
from greenroute.agent.copilot_text import (
    CopilotQuestionError,
    label,
    numbers_in,
    places_in,
    read_tokens,
)
from greenroute.core.types import CLASSES, Plan
from greenroute.sim.fork import EpochFigures

# decimals of each stated quantity (the tests compare the text with the simulator at these)
FORMATS = {
    "carbon_kg": 1,
    "cost_usd": 2,
    "slo_pp": 2,
    "objective_pct": 1,
    "share_pct": 0,
    "ci_g_per_kwh": 0,
    "price_usd_per_kwh": 3,
    "latency_ms": 0,
    "ttft_ms": 1,
    "util_pct": 0,
    "weight": 2,
    "requests": 0,
}


SMALL_KINDS = ("carbon_kg", "cost_usd")  # small runs: two significant digits below 1
MAX_DECIMALS = 4


def fmt(value: float, kind: str) -> str:
    dec = FORMATS[kind]
    mag = abs(value)
    if kind in SMALL_KINDS and 0 < mag < 1:
        dec = min(MAX_DECIMALS, max(dec, 1 - math.floor(math.log10(mag))))
    return f"{value:,.{dec}f}"


@dataclass(frozen=True)
class Alternative:
    region: str
    figures: EpochFigures
    d_carbon_kg: float
    d_cost_usd: float
    d_misses: float  # SLO misses + drops of the epoch's work
    d_slo_pp: float  # the same in percentage points of the epoch's interactive requests
    d_ttft_ms: float  # mean TTFT of the epoch's interactive requests (NaN: none)
    d_objective_pct: float  # % of the chosen plan's epoch objective (NaN: no objective)


@dataclass
class Explanation:
    epoch: int
    origin: str
    asked_region: str | None
    plan: Plan
    chosen: EpochFigures
    alternatives: list[Alternative]
    signals: dict[str, dict[str, float]]  # region -> signal -> value (the observation's)
    forbidden: list[str] = field(default_factory=list)  # regions a hard rule closed to it
    text: str = ""
    numbers: list[float] = field(default_factory=list)  # every number the text may state


def parse_explain(question: str, ctx: RunContext) -> tuple[int, str, str | None]:
    """(epoch, origin, destination asked about or None) of a "why" question."""
    toks = read_tokens(question, ctx.regions, ctx.origins)
    epoch = None
    for i, t in enumerate(toks):
        if t.kind == "num" and i > 0 and toks[i - 1].low == "epoch":
            epoch = int(t.value)
    if epoch is None:
        raise CopilotQuestionError(
            'which epoch? say e.g. "Why did epoch 40 send California\'s traffic to Chile?" '
            f"(this run has epochs 0..{ctx.n_epochs - 1})"
        )
    places = places_in(toks, ctx.regions, ctx.origins)
    origin = dest = None
    for p in places:
        if p.before in ("to", "towards", "into", "in") and dest is None and origin is not None:
            dest = p
        elif origin is None and p.before not in ("to", "towards", "into"):
            origin = p
        elif dest is None:
            dest = p
    if origin is None:
        raise CopilotQuestionError(
            "whose traffic? name the origin, e.g. \"Why did epoch 40 send California's traffic "
            f'to Chile?" (origins: {", ".join(ctx.origins)})'
        )
    o_ids = [k for k in origin.ids if k in ctx.origins]
    if len(o_ids) != 1:
        raise CopilotQuestionError(
            f"{origin.text!r} is not one origin of this run; origins: {', '.join(ctx.origins)}"
        )
    d = None
    if dest is not None:
        d_ids = [k for k in dest.ids if k in ctx.regions]
        if len(d_ids) != 1:
            raise CopilotQuestionError(
                f"{dest.text!r} is not one region of this run; regions: {', '.join(ctx.regions)}"
            )
        d = d_ids[0]
    return epoch, o_ids[0], d


def explain(ctx: RunContext, epoch: int, origin: str, asked: str | None = None) -> Explanation:
    """Re-simulate ``epoch`` with each alternative for ``origin``'s work (see the module)."""
    sim, obs, plan = ctx.stepped_to(epoch)
    o = ctx.origins.index(origin)
    fork = sim.fork()
    chosen = fork.evaluate(plan, obs)
    alts = []
    for r, region in enumerate(ctx.regions):
        if not obs.allowed[:, o, r].any():
            continue
        route = plan.route.copy()
        for c in range(route.shape[0]):
            if obs.allowed[c, o, r]:
                route[c, o, :] = 0.0
                route[c, o, r] = 1.0
        if np.array_equal(route, plan.route):
            continue  # this is the plan itself
        alt_plan = Plan(route=route, hold=plan.hold, power_cap_kw=plan.power_cap_kw)
        fig = fork.evaluate(alt_plan, obs)
        alts.append(_alternative(region, fig, chosen))
    signals = {
        region: {
            "ci_g_per_kwh": float(obs.carbon_intensity_g_per_kwh[0, r]),
            "price_usd_per_kwh": float(obs.price_usd_per_kwh[0, r]),
            "latency_ms": 1e3 * float(obs.latency_s[o, r]),
            "util_pct": 100.0 * float(obs.busy_slots[r]) / float(obs.capacity_slots[r])
            if obs.capacity_slots[r] > 0 else 0.0,
        }
        for r, region in enumerate(ctx.regions)
    }  # fmt: skip
    forbidden = [reg for r, reg in enumerate(ctx.regions) if not obs.allowed[:, o, r].any()]
    ex = Explanation(epoch, origin, asked, plan, chosen, alts, signals, forbidden)
    ex.text = render(ex, ctx, obs.weights)
    ex.numbers = numbers_in(ex.text)
    return ex


def _alternative(region: str, fig: EpochFigures, chosen: EpochFigures) -> Alternative:
    bad = (fig.slo_misses + fig.dropped) - (chosen.slo_misses + chosen.dropped)
    n = chosen.interactive_requests
    d_obj = fig.objective - chosen.objective
    return Alternative(
        region,
        fig,
        fig.carbon_kg - chosen.carbon_kg,
        fig.cost_usd - chosen.cost_usd,
        bad,
        100.0 * bad / n if n > 0 else float("nan"),
        1e3 * (fig.ttft_mean_s - chosen.ttft_mean_s),
        100.0 * d_obj / abs(chosen.objective) if chosen.objective else float("nan"),
    )


def _verb(delta: float, kind: str, unit: str, pre: str = "") -> str:
    s = fmt(abs(delta), kind)
    if float(s.replace(",", "")) == 0.0:
        return f"changed by {pre}{s}{unit}"
    return f"{'saved' if delta < 0 else 'added'} {pre}{s}{unit}"


def render(ex: Explanation, ctx: RunContext, weights) -> str:
    """The template phrasing (the default; an LLM may rephrase it, numbers checked)."""
    t = ctx.epoch_time(ex.epoch)
    o = ctx.origins.index(ex.origin)
    lines = [f"Epoch {ex.epoch} ({t:%H:%M} UTC on {t:%Y-%m-%d}), work from {label(ex.origin)}:"]
    parts = []
    for c, cls in enumerate(CLASSES):
        row = ex.plan.route[c, o]
        dests = [
            f"{fmt(100 * row[r], 'share_pct')} % to {label(reg)}"
            for r, reg in enumerate(ctx.regions)
            if float(fmt(100 * row[r], "share_pct")) > 0
        ]
        parts.append(f"{cls} work {', '.join(dests)}")
    lines.append("the plan sent " + "; ".join(parts) + ".")
    if ex.plan.hold is not None and float(fmt(100 * ex.plan.hold[o], "share_pct")) > 0:
        lines.append(
            f"It held {fmt(100 * ex.plan.hold[o], 'share_pct')} % of the pending deferrable "
            "work for later epochs."
        )
    if ex.asked_region is not None:
        r = ctx.regions.index(ex.asked_region)
        share = 100 * float(ex.plan.route[:, o, r].max())
        if float(fmt(share, "share_pct")) == 0:
            lines.append(f"It did not send this work to {label(ex.asked_region)}.")
    w = weights
    lines.append(
        "Goal weights: "
        + ", ".join(f"{k} {fmt(getattr(w, k), 'weight')}" for k in ("carbon", "water", "cost",
                                                                    "latency"))
        + f" (SLO penalty {fmt(w.slo_penalty, 'weight')})."
    )  # fmt: skip
    lines.append("Signals at that epoch (the observation):")
    for reg, s in ex.signals.items():
        lines.append(
            f"- {label(reg)}: carbon intensity {fmt(s['ci_g_per_kwh'], 'ci_g_per_kwh')} g/kWh, "
            f"price {fmt(s['price_usd_per_kwh'], 'price_usd_per_kwh')} $/kWh, one-way latency "
            f"from {label(ex.origin)} {fmt(s['latency_ms'], 'latency_ms')} ms, utilisation "
            f"{fmt(s['util_pct'], 'util_pct')} %."
        )
    for reg in ex.forbidden:
        lines.append(f"{label(reg)} was closed to this work at that epoch by a hard rule.")
    n = ex.chosen.interactive_requests
    if not ex.alternatives:
        lines.append("No other region was allowed for this work at that epoch, so there was no "
                     "alternative to compare.")  # fmt: skip
        return "\n".join(lines)
    lines.append(
        f"Re-simulating the epoch from the run's state with all of {label(ex.origin)}'s work "
        f"sent elsewhere (the epoch had {fmt(n, 'requests')} interactive requests):"
    )
    for a in ex.alternatives:
        slo = (
            f"{_verb(a.d_misses, 'requests', ' SLO misses')} "
            f"({_verb(a.d_slo_pp, 'slo_pp', ' percentage points')} of SLO violations)"
            if np.isfinite(a.d_slo_pp) else "no interactive requests to miss an SLO"
        )  # fmt: skip
        if np.isfinite(a.d_ttft_ms):
            slo += f", mean TTFT {'+' if a.d_ttft_ms >= 0 else '-'}"
            slo += fmt(abs(a.d_ttft_ms), "ttft_ms") + " ms"
        obj = ""
        if np.isfinite(a.d_objective_pct):
            obj = (
                f"; objective J {'+' if a.d_objective_pct >= 0 else '-'}"
                + fmt(abs(a.d_objective_pct), "objective_pct")
                + " %"
            )
        lines.append(
            f"- routing it to {label(a.region)} instead would have "
            f"{_verb(a.d_carbon_kg, 'carbon_kg', ' kg CO2')}, "
            f"{_verb(a.d_cost_usd, 'cost_usd', ' of energy cost', '$')}, {slo}{obj}."
        )
    finite = [a for a in ex.alternatives if np.isfinite(a.d_objective_pct)]
    better = [a for a in finite if float(fmt(a.d_objective_pct, "objective_pct")) < 0]
    if finite and not better:
        lines.append("The plan taken has the lowest objective J of these options for this epoch.")
    elif better:
        best = min(better, key=lambda a: a.d_objective_pct)
        lines.append(
            f"{label(best.region)} would have had a lower objective J for this epoch: the "
            "policy's plan was not the best one-epoch choice here (it may be planning ahead, or "
            "be a heuristic)."
        )
    return "\n".join(lines)
