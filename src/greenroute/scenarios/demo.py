"""``demo``: embedded data, 3 regions, 1 day, request by request (needs no data files)."""

from __future__ import annotations

import pandas as pd

from greenroute.catalog import get_region
from greenroute.data.workload import WorkloadSpec
from greenroute.scenarios.geo import DIURNAL_FLAT_SHARE
from greenroute.scenarios.registry import register_scenario
from greenroute.sim.cluster import uniform_cluster
from greenroute.sim.scenario import Scenario

DEMO_REGIONS = ("DE-LU", "US-CAL-CISO", "SG")


@register_scenario("demo", "Embedded data, 3 regions, 1 day, request by request")
def demo() -> Scenario:
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
