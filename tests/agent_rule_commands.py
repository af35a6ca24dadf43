"""Phrased operator commands and the rule sets they must become (hand-written expectations).

Used by tests/test_agent_rules.py (the deterministic parser's accuracy) and, later, as the
test set of the LLM rules parser. Each row: (command, scenario regions, expected RuleSet).
Times are read against ``NOW`` = the geo scenarios' start (2023-07-01 00:00 UTC, a Saturday)
with a 31-day horizon; offsets below are worked out by hand in hours from that instant.
"""

from __future__ import annotations

import datetime as dt
import math

from greenroute.agent.rules import RuleSet
from greenroute.constraints import ConstraintSet, Exclusion
from greenroute.core.types import ObjectiveWeights

NOW = dt.datetime(2023, 7, 1, tzinfo=dt.UTC)
HORIZON_S = 31 * 86400.0
G3 = ("DE-LU", "CL-SIC", "US-CAL-CISO")
G10 = (*G3, "AU-NSW", "SG", "US-NY-NYIS", "BR-SP", "ZA", "GB", "KR")
CAL, CL, DE = "US-CAL-CISO", "CL-SIC", "DE-LU"
H = 3600.0


def W(carbon=0.0, water=0.0, cost=0.0, latency=0.0) -> ObjectiveWeights:  # noqa: N802
    return ObjectiveWeights(carbon, water, cost, latency, 5.0)


def X(region: str, start_h: float | None = None, end_h: float | None = None, reason: str = ""):  # noqa: N802
    start = -math.inf if start_h is None else start_h * H
    end = math.inf if end_h is None else end_h * H
    return Exclusion(region, start, end, reason)


def RS(weights=None, excl=(), res=None, caps=None, lat=None) -> RuleSet:  # noqa: N802
    res = {k: frozenset(v) for k, v in (res or {}).items()}
    return RuleSet(weights, ConstraintSet(tuple(excl), res, dict(caps or {}), lat))


def others(regions, *keep):
    return [X(r) for r in regions if r not in keep]


THIRD = 1.0 / 3.0
# July 2023 weekdays (Mon-Fri); business hours 09:00-17:00 Berlin summer time = 07:00-15:00 UTC
JULY_WEEKDAYS = [3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 17, 18, 19, 20, 21, 24, 25, 26, 27, 28, 31]
G5 = (*G3, "AU-NSW", "SG")
NA10 = (CAL, "US-NY-NYIS")  # North America in geo10
EUROPE10 = (DE, "GB")

COMMANDS: list[tuple[str, tuple[str, ...], RuleSet]] = [
    # --- the paper's commands (Table 2, Appendix D.2) and the issue's
    ("Minimize energy cost, but do not send workloads to California", G3, RS(W(cost=1), [X(CAL)])),
    (
        "Minimize energy cost, but under the hard constraint that you may not send workloads to "
        "the California node due to a grid stability alert.",
        G3,
        RS(W(cost=1), [X(CAL, reason="a grid stability alert")]),
    ),
    ("Workloads from California must stay in North America", G3, RS(res={CAL: [CAL]})),
    ("Workloads from California must stay in North America", G10, RS(res={CAL: NA10})),
    (
        "New data residency regulations now forbid workloads originating at our California node "
        "(Node 1) from being processed outside of North America.",
        G10,
        RS(res={CAL: NA10}),
    ),
    # --- goals: synonyms, several metrics, explicit weights
    ("minimise carbon", G3, RS(W(carbon=1))),
    ("Reduce CO2 emissions", G3, RS(W(carbon=1))),
    ("cut the electricity bill", G3, RS(W(cost=1))),
    ("lowest price please", G3, RS(W(cost=1))),
    ("optimise for speed", G3, RS(W(latency=1))),
    ("minimize TTFT", G3, RS(W(latency=1))),
    ("reduce water use", G3, RS(W(water=1))),
    ("minimise cost and carbon", G3, RS(W(carbon=0.5, cost=0.5))),
    ("Cut emissions, water and spending", G3, RS(W(carbon=THIRD, water=THIRD, cost=THIRD))),
    ("70% carbon, 30% cost", G3, RS(W(carbon=0.7, cost=0.3))),
    ("carbon 0.6, latency 0.4", G3, RS(W(carbon=0.6, latency=0.4))),
    ("prioritise carbon over cost", G3, RS(W(carbon=1))),
    ("keep costs low and cut emissions", G3, RS(W(carbon=0.5, cost=0.5))),
    ("prefer the cheapest regions", G3, RS(W(cost=1))),
    ("balanced please", G3, RS(W(0.25, 0.25, 0.25, 0.25))),
    ("maximise performance", G3, RS(W(latency=1))),
    ("use the greenest regions", G3, RS(W(carbon=1))),
    ("Focus on money", G3, RS(W(cost=1))),
    # --- exclusions: negations and aliases
    ("never route to Chile", G3, RS(excl=[X(CL)])),
    ("avoid Germany", G3, RS(excl=[X(DE)])),
    ("Keep out of California and Chile", G3, RS(excl=[X(CAL), X(CL)])),
    ("exclude DE-LU", G3, RS(excl=[X(DE)])),
    ("do not use Frankfurt", G3, RS(excl=[X(DE)])),
    ("route anywhere except Chile", G3, RS(excl=[X(CL)])),
    ("stay away from San Jose", G3, RS(excl=[X(CAL)])),
    ("Avoid Sydney and Johannesburg", G10, RS(excl=[X("AU-NSW"), X("ZA")])),
    ("don't route anything to the UK or to New York", G10, RS(excl=[X("GB"), X("US-NY-NYIS")])),
    ("keep out of Asia", G10, RS(excl=[X("SG"), X("KR")])),
    ("use every region except Singapore and South Korea", G10, RS(excl=[X("SG"), X("KR")])),
    ("ban the Santiago datacenter", G3, RS(excl=[X(CL)])),
    # --- allow-lists
    ("only use Germany and Chile", G3, RS(excl=[X(CAL)])),
    ("only use European datacenters", G10, RS(excl=others(G10, *EUROPE10))),
    ("send everything to Chile", G3, RS(excl=[X(DE), X(CAL)])),
    ("do not use any region except Chile", G3, RS(excl=[X(DE), X(CAL)])),
    # --- time windows
    ("Chile is down from 14:00 to 18:00 on the 3rd", G3, RS(excl=[X(CL, 62, 66)])),
    ("DE-LU is offline between 2pm and 6pm on July 3", G3, RS(excl=[X(DE, 62, 66)])),
    ("avoid Germany from 22:00 to 02:00 on the 5th", G3, RS(excl=[X(DE, 118, 122)])),
    ("block California for the next 6 hours", G3, RS(excl=[X(CAL, 0, 6)])),
    ("avoid Chile tomorrow", G3, RS(excl=[X(CL, 24, 48)])),
    ("no work to Germany from the 3rd to the 5th", G3, RS(excl=[X(DE, 48, 120)])),
    ("exclude Brasil until 18:00", G10, RS(excl=[X("BR-SP", 0, 18)])),
    (
        "never send to Germany between 2pm and 6pm every day",
        G3,
        RS(excl=[X(DE, 24 * k + 14, 24 * k + 18) for k in range(31)]),
    ),
    (
        "avoid DE-LU during business hours",
        G3,
        RS(excl=[X(DE, 24 * (d - 1) + 7, 24 * (d - 1) + 15) for d in JULY_WEEKDAYS]),
    ),
    ("California is under maintenance on day 2", G3, RS(excl=[X(CAL, 24, 48)])),
    # --- typos (edit distance <= 2, unique)
    ("aviod Californa and minimze carbn", G3, RS(W(carbon=1), [X(CAL)])),
    ("Never route to Chlie", G3, RS(excl=[X(CL)])),
    ("exlcude Germnay", G3, RS(excl=[X(DE)])),
    ("minimise emisions", G3, RS(W(carbon=1))),
    ("Do not send workloads to Califronia", G3, RS(excl=[X(CAL)])),
    ("reduce latancy", G3, RS(W(latency=1))),
    ("Workloads from Califonria must stay in Nroth America", G10, RS(res={CAL: NA10})),
    # --- residency
    ("European data must stay in Europe", G10, RS(res={DE: EUROPE10, "GB": EUROPE10})),
    ("keep New York traffic in the US", G10, RS(res={"US-NY-NYIS": NA10})),
    (
        "Don't route California's traffic to Europe",
        G10,
        RS(res={CAL: [r for r in G10 if r not in EUROPE10]}),
    ),
    ("German workloads may only go to the EU", G10, RS(res={DE: [DE]})),
    ("data from Singapore must not leave Asia", G10, RS(res={"SG": ["SG", "KR"]})),
    # --- power caps
    ("cap Germany at 5 MW", G3, RS(caps={DE: 5000.0})),
    ("limit California's power to 800 kW", G3, RS(caps={CAL: 800.0})),
    ("cap Germany at 5 MW and Chile at 2.5 MW", G3, RS(caps={DE: 5000.0, CL: 2500.0})),
    ("no more than 1.5 megawatts in any region", G3, RS(caps=dict.fromkeys(G3, 1500.0))),
    # --- latency bounds
    ("keep latency under 50 ms", G3, RS(lat=0.05)),
    ("keep round-trip latency below 100 ms", G3, RS(lat=0.05)),
    ("network latency must not exceed 40 milliseconds", G3, RS(lat=0.04)),
    # --- several clauses
    (
        "Minimise cost, avoid Chile, and cap Germany at 5 MW",
        G3,
        RS(W(cost=1), [X(CL)], caps={DE: 5000.0}),
    ),
    ("reduce carbon while keeping latency under 60 ms", G3, RS(W(carbon=1), lat=0.06)),
    ("cut CO2 without using Germany", G3, RS(W(carbon=1), [X(DE)])),
    (
        "Minimize cost. Workloads from California must stay in North America.",
        G10,
        RS(W(cost=1), res={CAL: NA10}),
    ),
    ("lowest carbon, but never route to São Paulo", G10, RS(W(carbon=1), [X("BR-SP")])),
    (
        "avoid Chile due to maintenance and reduce water",
        G3,
        RS(W(water=1), [X(CL, reason="maintenance")]),
    ),
    # --- held-out phrasings, written after the parser and run once before any fix
    ("Please minimise our carbon footprint", G3, RS(W(carbon=1))),
    ("We want the lowest possible energy bill", G3, RS(W(cost=1))),
    ("Optimize for latency and water", G3, RS(W(water=0.5, latency=0.5))),
    ("Don't send anything to Germany", G3, RS(excl=[X(DE)])),
    ("Germany is unavailable on the 4th", G3, RS(excl=[X(DE, 72, 96)])),
    ("Take Chile offline from 9am to 5pm on the 10th", G3, RS(excl=[X(CL, 225, 233)])),
    ("exclude Singapore and Sydney", G5, RS(excl=[X("SG"), X("AU-NSW")])),
    ("Never process workloads in Singapore", G5, RS(excl=[X("SG")])),
    ("Requests from Singapore must stay in Asia", G5, RS(res={"SG": ["SG"]})),
    (
        "Australian traffic may only be served in Australia or Singapore",
        G5,
        RS(res={"AU-NSW": ["AU-NSW", "SG"]}),
    ),
    ("Keep the power draw of Chile below 2 MW", G3, RS(caps={CL: 2000.0})),
    ("Each datacenter may draw at most 3 MW", G3, RS(caps=dict.fromkeys(G3, 3000.0))),
    ("one-way latency at most 30 ms", G3, RS(lat=0.03)),
    (
        "minimise cost but keep out of Chile between 14:00 and 16:00 on the 2nd",
        G3,
        RS(W(cost=1), [X(CL, 38, 40)]),
    ),
    ("Reduce emissions and avoid California", G3, RS(W(carbon=1), [X(CAL)])),
    ("Minimise water consumption", G3, RS(W(water=1))),
    ("Lower the cost, then the carbon", G3, RS(W(carbon=0.5, cost=0.5))),
    ("No traffic to California today", G3, RS(excl=[X(CAL, 0, 24)])),
    ("Route nothing to DE-LU from 2023-07-05 to 2023-07-06", G3, RS(excl=[X(DE, 96, 144)])),
    ("Cap California at 750kW", G3, RS(caps={CAL: 750.0})),
    ("Minimise latancy and costs", G3, RS(W(cost=0.5, latency=0.5))),
    ("avoid Germny", G3, RS(excl=[X(DE)])),
    (
        "Minimize cost; California data may not be processed outside the US",
        G5,
        RS(W(cost=1), res={CAL: [CAL]}),
    ),
    ("Use only Chile and California", G3, RS(excl=[X(DE)])),
    ("Shift load away from Germany", G3, RS(excl=[X(DE)])),
    ("Our priority is cost", G3, RS(W(cost=1))),
    ("save money and water", G3, RS(W(water=0.5, cost=0.5))),
    ("Stop sending jobs to Chile", G3, RS(excl=[X(CL)])),
    ("California is off limits", G3, RS(excl=[X(CAL)])),
    ("Do not place any workloads in Germany on the 3rd", G3, RS(excl=[X(DE, 48, 72)])),
    ("From 8pm to 11pm tonight, avoid Chile", G3, RS(excl=[X(CL, 20, 23)])),
    ("Singapore's workloads must never leave Singapore", G5, RS(res={"SG": ["SG"]})),
    ("All data from Germany has to be processed in Europe", G3, RS(res={DE: [DE]})),
    ("limit Germany to 4000 kW", G3, RS(caps={DE: 4000.0})),
    ("make sure latency stays below 45 ms", G3, RS(lat=0.045)),
    ("minimise carbon emissions while avoiding Chile", G3, RS(W(carbon=1), [X(CL)])),
    ("reduce cost by 20%", G3, RS(W(cost=1))),
    ("exclude the Chilean datacenter and the German one", G3, RS(excl=[X(CL), X(DE)])),
    (
        "Avoid Germany and minimise CO2, and cap Chile at 3MW",
        G3,
        RS(W(carbon=1), [X(DE)], caps={CL: 3000.0}),
    ),
    ("send nothing to California during the 2nd", G3, RS(excl=[X(CAL, 24, 48)])),
    ("Minimise cost, prioritise speed", G3, RS(W(cost=0.5, latency=0.5))),
    (
        "Don't use California or Germany for the next 2 hours",
        G3,
        RS(excl=[X(CAL, 0, 2), X(DE, 0, 2)]),
    ),
    ("Workloads from Sydney should remain within Oceania", G5, RS(res={"AU-NSW": ["AU-NSW"]})),
    ("cut carbon by routing away from Germany", G3, RS(W(carbon=1), [X(DE)])),
    (
        "Keep Chile below 1 MW and Germany below 2 MW",
        G3,
        RS(caps={CL: 1000.0, DE: 2000.0}),
    ),
    ("Prefer low-carbon regions", G3, RS(W(carbon=1))),
    ("Chile and Germany are both down on the 2nd", G3, RS(excl=[X(CL, 24, 48), X(DE, 24, 48)])),
    ("Only Chile may receive work from California", G3, RS(res={CAL: [CL]})),
    ("limit every site to 2 MW", G3, RS(caps=dict.fromkeys(G3, 2000.0))),
    (
        "minimise cost, and exclude Chile from the 3rd to the 4th between 1pm and 3pm",
        G3,
        RS(W(cost=1), [X(CL, 61, 63), X(CL, 85, 87)]),
    ),
    ("Water is the priority", G3, RS(W(water=1))),
    ("minimize cost & carbon", G3, RS(W(carbon=0.5, cost=0.5))),
    ("avoid North America except California", G10, RS(excl=[X("US-NY-NYIS")])),
]
