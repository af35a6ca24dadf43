"""Seed 002 section VI: the load-balancing scenarios over the Azure code trace."""

from __future__ import annotations

import pandas as pd

from greenroute.data.workload import WorkloadSpec
from greenroute.scenarios.registry import register_scenario
from greenroute.sim.cluster import Cluster, RegionCluster, ServerGroup
from greenroute.sim.scenario import Scenario, TraceWorkload

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
