"""QLearning baseline (seed 001 §6 [33]: Guo et al., Q-learning-based workload consolidation,
IEEE TII 2025): tabular Q-learning, learning while it routes.

Our reading: [33] keeps a Q-table over a discretised datacenter state and picks consolidation
actions epsilon-greedily. Here the state is the hour of day (``HOUR_BINS`` bins) and the
forecast load over usable capacity (``LOAD_EDGES``), the actions are the shared discrete
routing actions (``baselines/common.py``), the reward MARLIN's shape, and the update the
Bellman one: ``Q[s, a] += alpha (r + gamma max_a' Q[s', a'] - Q[s, a])``.
"""

from __future__ import annotations

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.policies.baselines.online_rl import GAMMA, OnlineRLPolicy
from greenroute.policies.registry import register_geo_policy

HOUR_BINS = 6  # 4-hour bins of the UTC day
LOAD_EDGES = (0.2, 0.4, 0.6)  # forecast busy slots / usable slots


def discretise(s: np.ndarray) -> int:
    """Table row of a state vector (``state_features``: sin, cos of the hour, load, ...)."""
    hour = (np.arctan2(s[0], s[1]) / (2 * np.pi)) % 1.0
    h = min(int(hour * HOUR_BINS), HOUR_BINS - 1)
    load = int(np.searchsorted(LOAD_EDGES, s[2], side="right"))
    return h * (len(LOAD_EDGES) + 1) + load


@register_geo_policy(
    "qlearning",
    "Seed 001 baseline [33]: tabular Q-learning over discrete routing actions, learning online.",
    help={
        "alpha": "learning rate of the table",
        "gamma": "discount factor (seed 001 §6: 0.95)",
        "epsilon": "exploration share",
    },
)
class QLearningPolicy(OnlineRLPolicy):
    name = "qlearning"

    def __init__(self, alpha: float = 0.1, gamma: float = GAMMA, epsilon: float = 0.1) -> None:
        super().__init__(gamma, epsilon)
        if not 0.0 < alpha <= 1.0:
            raise ConfigError(f"alpha must be in (0, 1], got {alpha}")
        self.alpha = float(alpha)

    def init_agent(self) -> None:
        self.q = np.zeros((HOUR_BINS * (len(LOAD_EDGES) + 1), self.n_actions))

    def act(self, s: np.ndarray) -> int:
        row = self.q[discretise(s)]
        return self.epsilon_greedy(int(np.argmax(row)))  # ties: the first action (local)

    def learn(self, s: np.ndarray, a: int, r: float, s2: np.ndarray) -> None:
        i, j = discretise(s), discretise(s2)
        target = r + self.gamma * float(self.q[j].max())
        self.q[i, a] += self.alpha * (target - self.q[i, a])
