"""Helix baseline (seed 001 §6 [13]: Mei et al., "Helix: serving LLMs over heterogeneous GPUs
and network via max-flow", ASPLOS 2025).

Our reading: Helix models the cluster as a flow network (source -> compute nodes -> sink,
node capacities = their token throughput, edges limited by the network) and serves the
maximum flow; among maximum flows it prefers the cheapest (lowest-latency) routes. At the geo
epoch level the network is source -> (class, origin) with the forecast demand -> region over
each allowed edge, costing the request's latency (2 x one-way network + prefill, seed 001
eq. 3) -> sink with the region's usable slots (heterogeneous GPUs enter through the region's
slot time per request, which differs by GPU mix). Solved as one LP (scipy HiGHS):
``min sum cost x - BIG sum x`` subject to demand and slot capacity, with ``BIG`` above every
edge cost so the flow is maximal first (a min-cost max-flow). Helix is throughput- and
latency-driven: carbon, water and price play no part, as in [13].
"""

from __future__ import annotations

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.core.types import ClusterInfo, Observation, Plan
from greenroute.policies.baselines.common import local_route, route_from_alloc
from greenroute.policies.registry import register_geo_policy


def max_flow_min_cost(
    cost: np.ndarray, allowed: np.ndarray, demand: np.ndarray, slot_s: np.ndarray, cap: np.ndarray
) -> np.ndarray:
    """Requests per second ``x[c, o, r]``: the maximum flow of ``demand[c, o]`` (requests/s)
    through allowed edges into region capacities ``cap[r]`` (busy slots, each request taking
    ``slot_s[c, r]`` seconds), of least total ``cost`` among maximum flows."""
    from scipy.optimize import linprog

    n_c, n_o, n_r = allowed.shape
    idx = np.flatnonzero(allowed.ravel())
    if idx.size == 0:
        return np.zeros(allowed.shape)
    c_idx, o_idx, r_idx = np.unravel_index(idx, allowed.shape)
    big = 1.0 + 2.0 * float(np.abs(cost.ravel()[idx]).max())  # any extra unit of flow pays
    obj = cost.ravel()[idx] - big
    a_dem = np.zeros((n_c * n_o, idx.size))
    a_dem[c_idx * n_o + o_idx, np.arange(idx.size)] = 1.0
    a_cap = np.zeros((n_r, idx.size))
    a_cap[r_idx, np.arange(idx.size)] = slot_s[c_idx, r_idx]
    res = linprog(
        obj,
        A_ub=np.vstack([a_dem, a_cap]),
        b_ub=np.concatenate([demand.ravel(), cap]),
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:
        raise ConfigError(f"helix: flow LP failed ({res.message})")
    x = np.zeros(allowed.size)
    x[idx] = np.maximum(res.x, 0.0)
    return x.reshape(allowed.shape)


@register_geo_policy(
    "helix",
    "Seed 001 baseline [13]: min-cost max-flow of demand into region capacities (latency "
    "costs), LP.",
    units={"max_utilisation": "share of usable slots"},
    help={"max_utilisation": "sink capacity of each region (seed 001 §6 cap: 0.95)"},
)
class HelixPolicy:
    name = "helix"
    options: dict

    def __init__(self, max_utilisation: float = 0.95) -> None:
        if not 0.0 < max_utilisation <= 1.0:
            raise ConfigError(f"max_utilisation must be in (0, 1], got {max_utilisation}")
        self.max_util = float(max_utilisation)

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        self.cluster = cluster

    def flow(self, obs: Observation) -> np.ndarray:
        """The LP's requests/s ``[C, O, R]``."""
        n_c = obs.allowed.shape[0]
        cost = 2.0 * obs.latency_s[None] + obs.prefill_s_per_request[:, None, :]
        cost = np.broadcast_to(cost, obs.allowed.shape)
        carried = obs.backlog_slot_s / obs.epoch_s
        cap = np.maximum(self.max_util * obs.capacity_slots - carried, 0.0)
        slot_s = obs.slot_s_per_request[:n_c]
        return max_flow_min_cost(cost, obs.allowed, obs.demand_rps[0], slot_s, cap)

    def plan(self, obs: Observation) -> Plan:
        x = self.flow(obs)
        route = route_from_alloc(obs, x, obs.demand_rps[0], local_route(obs))
        return Plan(route=route, rationale="helix: min-cost max-flow of demand into capacity")
