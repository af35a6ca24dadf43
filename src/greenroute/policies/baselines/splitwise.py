"""Splitwise baseline (seed 001 §6 [14]: Patel et al., "Splitwise: efficient generative LLM
inference using phase splitting", ISCA 2024).

Our reading: Splitwise runs the compute-bound prompt (prefill) phase and the memory-bound
token (decode) phase on separate machine pools, sized to the phases' shares of the work: the
prompt pool on the machines that give the fastest first token, the token pool on the machines
that generate tokens most cheaply (its A100 token machines for cost and power). At the geo
epoch level the pools are regions: each region's usable slots are split into a prompt pool
(share = the epoch's prefill share of the forecast slot time) and a token pool (the rest).
Each origin's prefill work (demand x prefill_s / slot_s) is poured into prompt pools by TTFT
(2 x one-way network + prefill, seed 001 eq. 3), its decode work into token pools by energy
cost per request (IT kWh x $ per IT kWh); the routing of the origin is the mix of the two.
The simulator serves a request's two phases in one region (a KV-cache transfer between
datacenters is not modelled), so the phase shares become routing shares.
"""

from __future__ import annotations

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.core.types import ClusterInfo, Observation, Plan
from greenroute.policies.baselines.common import FILL_TARGET, local_route, pour, route_from_alloc
from greenroute.policies.registry import register_geo_policy


def phase_shares(obs: Observation) -> np.ndarray:
    """Prefill share of each request's slot time ``[C, R]`` (decode is the rest)."""
    return np.clip(obs.prefill_s_per_request / np.maximum(obs.slot_s_per_request, 1e-12), 0, 1)


@register_geo_policy(
    "splitwise",
    "Seed 001 baseline [14]: prefill work to the fastest-TTFT pools, decode work to the "
    "cheapest token pools, pools sized by phase share.",
    units={"max_utilisation": "share of usable slots"},
    help={"max_utilisation": "usable share of each region's slots (headroom below §6's 0.95 cap)"},
)
class SplitwisePolicy:
    name = "splitwise"
    options: dict

    def __init__(self, max_utilisation: float = FILL_TARGET) -> None:
        if not 0.0 < max_utilisation <= 1.0:
            raise ConfigError(f"max_utilisation must be in (0, 1], got {max_utilisation}")
        self.max_util = float(max_utilisation)

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        self.cluster = cluster

    def plan(self, obs: Observation) -> Plan:
        n_c = obs.allowed.shape[0]
        slot_s = obs.slot_s_per_request.mean(axis=1)  # [C] slot-seconds per request
        dem = obs.demand_rps[0] * slot_s[:, None]  # [C, O] busy slots
        p = phase_shares(obs).mean(axis=1)  # [C] prefill share of the slot time
        prompt_dem, token_dem = dem * p[:, None], dem * (1.0 - p[:, None])
        total = float(dem.sum())
        prompt_share = float(prompt_dem.sum() / total) if total > 0 else 0.5
        carried = obs.backlog_slot_s / obs.epoch_s
        usable = np.maximum(self.max_util * obs.capacity_slots - carried, 0.0)
        free_prompt, free_token = usable * prompt_share, usable * (1.0 - prompt_share)
        ttft = 2.0 * obs.latency_s[None] + obs.prefill_s_per_request[:, None, :]  # [C, O, R]
        token_cost = obs.it_kwh_per_request * obs.cost_usd_per_it_kwh[0][None, :]  # [C, R]
        placed = np.zeros(obs.allowed.shape)
        for c in range(n_c):
            placed[c] += pour(obs.allowed[c], ttft[c], prompt_dem[c], free_prompt)
            score = np.broadcast_to(token_cost[c], obs.latency_s.shape)
            placed[c] += pour(obs.allowed[c], score, token_dem[c], free_token)
        route = route_from_alloc(obs, placed, dem, local_route(obs))
        return Plan(
            route=route,
            rationale=f"splitwise: prompt pool {prompt_share:.0%} of slots, token pool the rest",
        )
