"""The loop the three RL baselines of seed 001 §6 share: learning while they route.

Each epoch the agent observes a state (:func:`~greenroute.policies.baselines.common.
state_features`), completes the previous transition ``(s, a, r, s')`` and learns from it,
picks one of the discrete routing actions (:data:`~greenroute.policies.baselines.common.
ACTIONS`: serve locally, or fill regions greedily by latency, carbon, water, cost or the
balanced objective, up to 60 % of usable slots) and scores it with MARLIN's reward shape
(:class:`~greenroute.policies.baselines.common.Reward`). Deterministic by seed: exploration
draws come from a generator seeded by ``reset``; torch nets are built under a forked torch RNG
seeded the same way, so a run never changes the process's global torch RNG.

The agents keep the reward of every epoch (``rewards``) and report their mean, the share of
exploratory actions and the number of updates as policy metrics.
"""

from __future__ import annotations

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.core.types import ClusterInfo, Observation, Plan
from greenroute.policies.baselines.common import (
    ACTIONS,
    Reward,
    action_route,
    state_features,
)
from greenroute.policies.optimize.model import build_cost_model

GAMMA = 0.95  # seed 001 §6: the agents' discount factor


class OnlineRLPolicy:
    """Base of QLearning, DDQN and ActorCritic (subclasses implement ``act`` and ``learn``)."""

    name = ""
    uses_weights = False  # scores plans with the run's weights (obs.weights)
    options: dict

    def __init__(self, gamma: float = GAMMA, epsilon: float = 0.1) -> None:
        if not 0.0 <= gamma < 1.0:
            raise ConfigError(f"gamma must be in [0, 1), got {gamma}")
        if not 0.0 <= epsilon <= 1.0:
            raise ConfigError(f"epsilon must be in [0, 1], got {epsilon}")
        self.gamma = float(gamma)
        self.epsilon = float(epsilon)
        self.n_actions = len(ACTIONS)

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        self.cluster = cluster
        self.seed = int(seed)
        self.rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0x5E1]))
        self.reward = Reward()
        self.prev: tuple[np.ndarray, int, float] | None = None
        self.rewards: list[float] = []
        self.explored = 0
        self.updates = 0
        self.init_agent()

    # subclasses -------------------------------------------------------------------------
    def init_agent(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def act(self, s: np.ndarray) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def learn(self, s: np.ndarray, a: int, r: float, s2: np.ndarray) -> None:  # pragma: no cover
        raise NotImplementedError

    # shared -----------------------------------------------------------------------------
    def epsilon_greedy(self, greedy: int) -> int:
        if self.rng.random() < self.epsilon:
            self.explored += 1
            return int(self.rng.integers(self.n_actions))
        return int(greedy)

    def plan(self, obs: Observation) -> Plan:
        model = build_cost_model(obs)
        s = state_features(obs)
        if self.prev is not None:
            ps, pa, pr = self.prev
            self.learn(ps, pa, pr, s)
            self.updates += 1
        a = self.act(s)
        route = action_route(obs, a, model)
        r = float(self.reward(obs, route, model))
        self.prev = (s, a, r)
        self.rewards.append(r)
        return Plan(route=route, rationale=f"{self.name}: action {ACTIONS[a]} (reward {r:.3f})")

    def metrics(self) -> dict:
        if not self.rewards:
            return {}
        key = self.name.replace("-", "_")
        return {
            f"{key}_mean_reward": float(np.mean(self.rewards)),
            f"{key}_explored_share": self.explored / len(self.rewards),
            f"{key}_updates": float(self.updates),
        }


def seeded_torch(seed: int, build):
    """``build()`` under a forked torch RNG seeded with ``seed`` (global RNG untouched)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()
