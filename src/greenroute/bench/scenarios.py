"""Scenario registry: ``greenroute scenarios`` lists these; ``get_scenario(name)`` builds one.

Add your own with :func:`register_scenario` (see the README's worked example).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from greenroute.data.workload import WorkloadSpec
from greenroute.errors import UnknownNameError
from greenroute.sim.cluster import Cluster, RegionCluster, ServerGroup, uniform_cluster
from greenroute.sim.scenario import Scenario, TraceWorkload


@dataclass(frozen=True)
class _Entry:
    factory: Callable[[], Scenario]
    description: str


_SCENARIOS: dict[str, _Entry] = {}


def register_scenario(name: str, description: str = ""):
    """Decorator: register a zero-argument factory returning a :class:`Scenario`."""

    def deco(factory: Callable[[], Scenario]) -> Callable[[], Scenario]:
        _SCENARIOS[name] = _Entry(factory, description or (factory.__doc__ or "").strip())
        return factory

    return deco


def scenario_names() -> list[str]:
    _load_optional()
    return sorted(_SCENARIOS)


def scenario_descriptions() -> dict[str, str]:
    _load_optional()
    return {k: _SCENARIOS[k].description for k in sorted(_SCENARIOS)}


def get_scenario(name: str) -> Scenario:
    _load_optional()
    try:
        entry = _SCENARIOS[name]
    except KeyError:
        raise UnknownNameError("scenario", name, _SCENARIOS) from None
    return entry.factory()


def _load_optional() -> None:
    # scenarios contributed by later modules (optimisation extras etc.)
    with contextlib.suppress(ImportError):
        from greenroute.bench import scenarios_extra  # noqa: F401


# ---------------------------------------------------------------------------- geo scenarios
# Seed 000 appendix C.1: 3-, 5- and 10-datacenter systems, 31-day simulations.
GEO3 = ("DE-LU", "CL-SIC", "US-CAL-CISO")
GEO5 = (*GEO3, "AU-NSW", "SG")
GEO10 = (*GEO5, "US-NY-NYIS", "BR-SP", "ZA", "GB", "KR")
GEO_START = pd.Timestamp("2023-07-01 00:00", tz="UTC")  # a full month of 2023 signals
GEO_SERVERS_PER_REGION = 200  # Llama-2-70B instances on 4 x H100 (800 GPUs per region)
GEO_INTERACTIVE_RPS = 280.0  # per origin, day average (~35 % mean utilisation local-only)
GEO_DEFERRABLE_RPS = 40.0  # batch summarisation jobs per origin
# The embedded weekly shape (Alibaba GenAI trace) peaks at 4.8x its mean and idles at night:
# it is an image service. Blending 70 % flat load gives a peak/mean of 2.1 and a trough of 0.7,
# the range reported for LLM chat services (e.g. Splitwise's production traces); a scenario
# choice, not a data fact.
DIURNAL_FLAT_SHARE = 0.7


def _geo(name: str, regions: tuple[str, ...], description: str) -> Scenario:
    from greenroute.catalog import get_region

    spec = WorkloadSpec(
        origins=regions,
        origin_timezones=tuple(get_region(r).timezone for r in regions),
        interactive_rps=tuple(GEO_INTERACTIVE_RPS for _ in regions),
        deferrable_rps=tuple(GEO_DEFERRABLE_RPS for _ in regions),
        diurnal_flat_share=DIURNAL_FLAT_SHARE,
    )
    return Scenario(
        name=name,
        description=description,
        regions=regions,
        origins=regions,
        cluster=uniform_cluster(regions, GEO_SERVERS_PER_REGION),
        workload=spec,
        start_utc=GEO_START,
        days=31.0,
        fidelity="fluid",
    )


@register_scenario("geo3", "Germany, Chile, California; 31 days from 2023-07-01 (seed 000 C.1)")
def geo3() -> Scenario:
    return _geo("geo3", GEO3, "3 datacenters: DE-LU, CL-SIC, US-CAL-CISO")


@register_scenario("geo5", "geo3 + Australia NSW, Singapore; 31 days (seed 000 C.1)")
def geo5() -> Scenario:
    return _geo("geo5", GEO5, "5 datacenters: geo3 + AU-NSW, SG")


@register_scenario(
    "geo10", "geo5 + New York, Brazil, South Africa, UK, South Korea; 31 days (seed 000 C.1)"
)
def geo10() -> Scenario:
    return _geo("geo10", GEO10, "10 datacenters: geo5 + US-NY-NYIS, BR-SP, ZA, GB, KR")


# ---------------------------------------------------------------------------- demo
DEMO_REGIONS = ("DE-LU", "US-CAL-CISO", "SG")


@register_scenario("demo", "Embedded data, 3 regions, 1 day, request by request")
def demo() -> Scenario:
    from greenroute.catalog import get_region

    spec = WorkloadSpec(
        origins=DEMO_REGIONS,
        origin_timezones=tuple(get_region(r).timezone for r in DEMO_REGIONS),
        interactive_rps=(2.0, 2.0, 2.0),
        deferrable_rps=(0.4, 0.4, 0.4),
        diurnal_flat_share=DIURNAL_FLAT_SHARE,
    )
    return Scenario(
        name="demo",
        description="3 regions, 1 day, embedded signals, request-level",
        regions=DEMO_REGIONS,
        origins=DEMO_REGIONS,
        cluster=uniform_cluster(DEMO_REGIONS, 2),
        workload=spec,
        start_utc=pd.Timestamp("2023-07-01 00:00", tz="UTC"),
        days=1.0,
        fidelity="request",
        real_data=False,
    )


# ---------------------------------------------------------------------------- load balancing
# Seed 002 section VI: Azure code trace over three servers with a tokens/s rate and a
# concurrency limit each; FIFO queues up to 1000; 2 s SLO on response time in high load.
LB_REGION = "US-CAL-CISO"
LB_FILE = "llm_traces/azure_llm_2023_code.csv"


def _lb_cluster(servers: tuple[tuple[float, int], ...]) -> Cluster:
    groups = tuple(
        ServerGroup(1, "llama2-70b", "a100-80gb", 1, conc, tokens_per_s=tps)
        for tps, conc in servers
    )
    return Cluster((RegionCluster(LB_REGION, groups, queue_limit=1000),))


def _lb_fallback(rps: float) -> WorkloadSpec:
    return WorkloadSpec(
        origins=("clients",),
        origin_timezones=("UTC",),
        interactive_rps=(rps,),
        deferrable_rps=(0.0,),
        interactive_lengths="azure-code",
        diurnal="flat",
    )


@register_scenario(
    "lb-nominal", "Seed 002 VI.A: Azure code trace, 3 x 5000 TPS / 5 concurrency, one site"
)
def lb_nominal() -> Scenario:
    return Scenario(
        name="lb-nominal",
        description="Azure code trace (8,819 requests, 57 min) over 3 x (5000 TPS, 5 slots)",
        regions=(LB_REGION,),
        origins=("clients",),
        cluster=_lb_cluster(((5000.0, 5), (5000.0, 5), (5000.0, 5))),
        workload=TraceWorkload(LB_FILE, fallback=_lb_fallback(2.58)),
        start_utc=pd.Timestamp("2023-11-16 18:17", tz="UTC"),
        days=3900.0 / 86400.0,  # 57 min of arrivals + time to drain
        epoch_s=300.0,
        fidelity="request",
        ttft_slo_s=2.0,
        slo_kind="e2e",
        origin_latlon=((37.434093, -121.95479),),
        network=False,
        horizon=0,
    )


@register_scenario(
    "lb-highload",
    "Seed 002 VI.B: first 5000 code-trace requests in 1000 s; 3000/3, 5000/5, 7000/7; 2 s SLO",
)
def lb_highload() -> Scenario:
    return Scenario(
        name="lb-highload",
        description="first 5,000 Azure code requests in 1,000 s; heterogeneous servers",
        regions=(LB_REGION,),
        origins=("clients",),
        cluster=_lb_cluster(((3000.0, 3), (5000.0, 5), (7000.0, 7))),
        workload=TraceWorkload(LB_FILE, first_n=5000, window_s=1000.0, fallback=_lb_fallback(5.0)),
        start_utc=pd.Timestamp("2023-11-16 18:17", tz="UTC"),
        days=1200.0 / 86400.0,  # 1000 s of arrivals + 200 s to drain
        epoch_s=100.0,
        fidelity="request",
        ttft_slo_s=2.0,
        slo_kind="e2e",
        origin_latlon=((37.434093, -121.95479),),
        network=False,
        horizon=0,
    )
