"""``greenroute explain DECISION_ID``: why the gateway sent one request where it did, from its
decision log record (the rules in force, the plan's shares for the request's origin and
class, a fallback when the plan's regions could not take it, each attempt, the signals of
the chosen region and the estimated footprint).

A template over the record's own numbers, formatted as the copilot formats its answers
(``agent.copilot_explain.fmt``). The copilot's explain itself re-simulates an epoch of a
simulated run, which a live decision does not have; ``greenroute replay LOG`` compares the
whole log with other policies in the simulator instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from greenroute.core.errors import GreenrouteError

FALLBACK_WHY = {
    "plan-share-zero": "the plan gives no share to any region that could take it (its "
    "favourite regions were down, full or already tried), so it went to the allowed regions "
    "in proportion to their free slots",
    "no-plan": "no plan was in force yet, so it went to the allowed regions in proportion to "
    "their free slots",
}


class UnknownDecisionError(GreenrouteError):
    """A decision id that the decision log does not hold."""


def find_decision(log: Path, decision_id: str) -> dict[str, Any]:
    """The record of ``decision_id`` in the JSONL decision log ``log`` (a unique prefix of
    at least 8 characters is enough)."""
    want = decision_id.strip().lower()
    if not want:
        raise UnknownDecisionError("empty decision id")
    try:
        fh = open(log, encoding="utf-8")  # noqa: SIM115
    except OSError as err:
        raise GreenrouteError(f"cannot read decision log {log}: {err.strerror or err}") from None
    matches, n, last = [], 0, None
    with fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line still being written
            n += 1
            did = str(rec.get("decision_id", ""))
            last = did
            if did == want or (len(want) >= 8 and did.startswith(want)):
                matches.append(rec)
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise UnknownDecisionError(
            f"decision id prefix {decision_id!r} matches {len(matches)} decisions in {log}; "
            "give more of it"
        )
    hint = f"the latest is {last}" if last else "it is empty"
    raise UnknownDecisionError(
        f"no decision {decision_id!r} in {log} ({n} decisions; {hint}; the id is the "
        "x-greenroute-decision-id response header)"
    )


def _pct(shares: dict[str, float]) -> str:
    from greenroute.agent.copilot_explain import fmt

    return ", ".join(f"{r} {fmt(100.0 * s, 'share_pct')} %" for r, s in shares.items())


def explain_record(rec: dict[str, Any]) -> str:
    """Plain-language explanation of one decision log record."""
    from greenroute.agent.copilot_explain import fmt

    cls, origin = rec.get("class", "interactive"), rec.get("origin")
    stream = " (streamed)" if rec.get("stream") else ""
    lines = [f"Decision {rec['decision_id']} at {rec.get('time_utc', rec.get('time_s'))}: "
             f"{cls} request from origin {origin!r} for model {rec.get('model')!r} "
             f"on {rec.get('endpoint')}{stream}."]  # fmt: skip
    held = rec.get("held_s") or 0.0
    if held > 0:
        lines.append(f"Deferrable: held {held:.1f} s by the plan before routing (deadline "
                     f"{rec.get('deadline_s')}).")  # fmt: skip
    region, status = rec.get("region"), rec.get("status")
    if region is None:
        lines.append(f"Not routed: HTTP {status} ({rec.get('error') or 'error'}).")
    else:
        lines.append(f"Routed to {region} (upstream {rec.get('upstream')}), HTTP {status} "
                     f"after {1e3 * float(rec.get('duration_s') or 0.0):.1f} ms.")  # fmt: skip
    rules = rec.get("rules")
    if rules:
        parts = [f"allowed regions {', '.join(rules.get('allowed') or []) or 'none'}"]
        if rules.get("residency") is not None:
            parts.append(f"residency of {origin}: {', '.join(rules['residency'])}")
        parts.append("active exclusions: " + ("; ".join(rules.get("exclusions") or []) or "none"))
        if rules.get("latency_bound_ms") is not None:
            bound = fmt(rules["latency_bound_ms"], "latency_ms")
            parts.append(f"one-way latency bound {bound} ms")
        lines.append("Rules: " + "; ".join(parts) + ".")
    plan = rec.get("plan")
    if plan:
        shares = plan.get("shares") or {}
        lines.append(f"Plan of epoch {plan.get('epoch')} ({plan.get('policy')}) for {origin}'s "
                     f"{cls} work: {_pct(shares)}.")  # fmt: skip
        if plan.get("rejected"):
            lines.append(f"The policy's own plan was replaced by the safe plan: "
                         f"{plan['rejected']}.")  # fmt: skip
        fb = plan.get("fallback")
        if fb:
            lines.append(f"Fallback {fb!r}: {FALLBACK_WHY.get(fb, fb)}.")
        elif region is not None and shares:
            best = max(shares, key=lambda r: shares[r])
            p = fmt(100.0 * shares.get(region, 0.0), "share_pct")
            lines.append(f"{region} was drawn with probability {p} % (the plan's largest "
                         f"share is {best}'s).")  # fmt: skip
    attempts = rec.get("attempts") or []
    if len(attempts) > 1:
        steps = " -> ".join(f"{a['region']}/{a['upstream']} {a['outcome']}" for a in attempts)
        lines.append(f"Attempts (failures before the first byte are retried within the rules): "
                     f"{steps}.")  # fmt: skip
    sig = rec.get("signals")
    if sig:
        lines.append(
            f"Signals in {region} (provider {sig.get('provider')}, {sig.get('age_s', 0):.0f} s "
            f"old): carbon intensity {fmt(sig['carbon_intensity_g_per_kwh'], 'ci_g_per_kwh')} "
            f"g/kWh, price {fmt(sig['price_usd_per_kwh'], 'price_usd_per_kwh')} $/kWh, grid "
            f"water {sig['water_intensity_l_per_kwh']:.2f} L/kWh, {sig['temp_c']:.1f} degC."
        )
    if rec.get("co2_g") is not None:
        lines.append(f"Estimated footprint: {rec['co2_g']:.3g} g CO2 and "
                     f"{rec.get('water_l') or 0.0:.3g} L of water (dynamic IT energy of the "
                     "request x the region's factors).")  # fmt: skip
    return "\n".join(lines)
