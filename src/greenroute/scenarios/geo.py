"""Seed 000 appendix C.1: the 3-, 5- and 10-datacenter geo scenarios (31 days, fluid)."""

from __future__ import annotations

import pandas as pd

from greenroute.catalog import get_region
from greenroute.data.workload import WorkloadSpec
from greenroute.scenarios.registry import register_scenario
from greenroute.sim.cluster import uniform_cluster
from greenroute.sim.scenario import Scenario

# Seed 000 appendix C.1: 3-, 5- and 10-datacenter systems, 31-day simulations.
GEO3 = ("DE-LU", "CL-SIC", "US-CAL-CISO")
GEO5 = (*GEO3, "AU-NSW", "SG")
GEO10 = (*GEO5, "US-NY-NYIS", "BR-SP", "ZA", "GB", "KR")
GEO_START = pd.Timestamp("2023-07-01 00:00", tz="UTC")  # a full month of 2023 signals
# Llama-2-70B instances on 4 x H100 (1,360 GPUs per region), sized for ~35 % mean utilisation
# under local-only with the default (iteration-level) server model: geo3, 7 days from the
# start, real data, seed 0 measures 36 % mean, 86 % at the busiest epoch, mean TTFT 0.23 s,
# 0.47 % SLO violations. (200 instances gave ~35 % on the slots model, whose capacity is
# ~1.7x the iteration model's: prefill stalls every running decode there.)
GEO_SERVERS_PER_REGION = 340
GEO_INTERACTIVE_RPS = 280.0  # per origin, day average
GEO_DEFERRABLE_RPS = 40.0  # batch summarisation jobs per origin
# The embedded weekly shape (Alibaba GenAI trace) peaks at 4.8x its mean and idles at night:
# it is an image service. Blending 70 % flat load gives a peak/mean of 2.1 and a trough of 0.7,
# the range reported for LLM chat services (e.g. Splitwise's production traces); a scenario
# choice, not a data fact.
DIURNAL_FLAT_SHARE = 0.7


def _geo(name: str, regions: tuple[str, ...], description: str) -> Scenario:
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
