"""PerLLM baseline (seed 001 §6 [15]: Yang et al., "PerLLM: personalized inference scheduling
with edge-cloud collaboration for diverse LLM services", 2024).

Our reading: PerLLM schedules each service to a server by constraint satisfaction (the
service's latency and the servers' capacity must hold) and learns which feasible server is
best with an upper-confidence-bound bandit. Here a service is a (class, origin) pair and the
arms are regions. Feasible arms: allowed by the hard constraints and, for interactive work,
able to meet the TTFT SLO on network + prefill (the optimisers' ``pair_ok``); each epoch the
origin's demand is poured into feasible regions in descending UCB1 index
``mean reward + c sqrt(2 ln t / n)`` (an unpulled arm first) up to ``max_utilisation`` (0.6)
of their usable slots, and each region that received work is a pull whose reward is 1 - its
per-request cost (the run's weighted objective, ``policies/optimize/model.py``) over the
dearest feasible region's, so rewards lie in [0, 1].
"""

from __future__ import annotations

import math

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.core.types import ClusterInfo, Observation, Plan
from greenroute.policies.baselines.common import FILL_TARGET, local_route, pour, route_from_alloc
from greenroute.policies.heuristics import demand_slots
from greenroute.policies.optimize.model import build_cost_model
from greenroute.policies.registry import register_geo_policy


def ucb_index(mean: np.ndarray, pulls: np.ndarray, t: float, c: float) -> np.ndarray:
    """UCB1 (Auer et al. 2002): ``mean + c sqrt(2 ln t / n)``, +inf for an arm never pulled."""
    n = np.asarray(pulls, dtype=float)
    bonus = c * np.sqrt(2.0 * math.log(max(t, 1.0)) / np.maximum(n, 1.0))
    return np.where(n > 0, np.asarray(mean, dtype=float) + bonus, np.inf)


@register_geo_policy(
    "perllm",
    "Seed 001 baseline [15]: constraint satisfaction + UCB1 bandit over feasible regions per "
    "(class, origin).",
    units={"max_utilisation": "share of usable slots"},
    help={
        "exploration": "UCB1 exploration constant c",
        "max_utilisation": "capacity constraint per region (headroom below §6's 0.95 cap)",
    },
)
class PerLLMPolicy:
    name = "perllm"
    options: dict

    def __init__(self, exploration: float = 1.0, max_utilisation: float = FILL_TARGET) -> None:
        if exploration < 0:
            raise ConfigError(f"exploration must be >= 0, got {exploration}")
        if not 0.0 < max_utilisation <= 1.0:
            raise ConfigError(f"max_utilisation must be in (0, 1], got {max_utilisation}")
        self.c = float(exploration)
        self.max_util = float(max_utilisation)

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        self.cluster = cluster
        self.mean: np.ndarray | None = None
        self.pulls: np.ndarray | None = None

    def plan(self, obs: Observation) -> Plan:
        model = build_cost_model(obs)
        shape = obs.allowed.shape
        if self.mean is None or self.mean.shape != shape:
            self.mean, self.pulls = np.zeros(shape), np.zeros(shape)
        feasible = obs.allowed & model.pair_ok
        feasible = np.where(feasible.any(axis=-1, keepdims=True), feasible, obs.allowed)
        dem = demand_slots(obs)
        carried = obs.backlog_slot_s / obs.epoch_s
        free = np.maximum(self.max_util * obs.capacity_slots - carried, 0.0)
        placed = np.zeros(shape)
        unit = model.unit[0]  # [C, O, R] per-request cost, weighted objective
        for c in range(shape[0]):
            t = self.pulls[c].sum(axis=1) + 1.0  # [O]
            score = np.stack(
                [
                    -ucb_index(self.mean[c, o], self.pulls[c, o], t[o], self.c)
                    for o in range(shape[1])
                ]
            )
            placed[c] = pour(feasible[c], score, dem[c], free)
        # rewards of the pulls: 1 - cost / dearest feasible cost of the row
        dear = np.where(feasible, unit, -np.inf).max(axis=-1, keepdims=True)
        reward = np.where(dear > 0, 1.0 - unit / np.where(dear > 0, dear, 1.0), 0.0)
        pulled = placed > 1e-12
        self.pulls += pulled
        self.mean += np.where(pulled, (reward - self.mean) / np.maximum(self.pulls, 1.0), 0.0)
        route = route_from_alloc(obs, placed, dem, local_route(obs))
        return Plan(route=route, rationale="perllm: UCB1 over feasible regions")
