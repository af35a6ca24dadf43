"""PettingZoo ``ParallelEnv`` of seed 000's hierarchy: one manager and one worker per
datacenter, acting together each epoch and sharing the reward of seed 000 eq. 1.

Agents ``manager_<REGION>`` (Discrete(N), observation 12 + 5N, Table 3) and
``worker_<REGION>`` (Discrete(2): 0 defer, 1 execute; observation 33, Table 4).
"""

from __future__ import annotations

import functools

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from greenroute.envs.geo_core import GeoCore
from greenroute.policies.rl import features as F


class GeoParallelEnv(ParallelEnv):
    metadata = {"render_modes": [], "name": "greenroute_geo_v0"}  # noqa: RUF012

    def __init__(self, scenario: str = "geo3", days: float | None = 7.0,
                 data_dir: str | None = None, reward_weights: dict | None = None,
                 render_mode=None, server_model: str | None = None) -> None:  # fmt: skip
        self.core = GeoCore(scenario, days, data_dir, reward_weights, server_model)
        self.render_mode = render_mode
        regions = self.core.sc.regions
        origins = self.core.sc.origins
        # managers sit at origins, workers at the origins' datacenters
        self.possible_agents = [f"manager_{o}" for o in origins] + [f"worker_{o}" for o in origins]
        self.agents: list[str] = []
        self._n = len(regions)
        self._m_dim = F.manager_dim(self._n)

    @functools.cache  # noqa: B019 (PettingZoo's documented pattern)
    def observation_space(self, agent: str):
        dim = self._m_dim if agent.startswith("manager_") else F.WORKER_DIM
        return spaces.Box(-F.OBS_CLIP, F.OBS_CLIP, shape=(dim,), dtype=np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str):
        return spaces.Discrete(self._n if agent.startswith("manager_") else 2)

    def _observations(self) -> dict:
        obs = self.core.obs
        out = {}
        for o, origin in enumerate(self.core.sc.origins):
            out[f"manager_{origin}"] = F.manager_obs(obs, o)
            j = F.worker_region(obs, o)
            out[f"worker_{origin}"] = F.worker_obs(obs, j, self.core.memory)
        return out

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.core.reset(0 if seed is None else int(seed))
        obs = self._observations()
        return obs, {a: {} for a in self.agents}

    def step(self, actions: dict):
        origins = self.core.sc.origins
        local = self.core.local_destinations()
        dest = np.array([int(actions.get(f"manager_{o}", local[i])) for i, o in enumerate(origins)])
        hold = np.array([0.0 if int(actions.get(f"worker_{o}", 1)) == 1 else 1.0
                         for o in origins])  # fmt: skip
        out = self.core.step(dest, hold)
        done = self.core.done
        rewards = {a: out.reward for a in self.agents}
        terminations = {a: done for a in self.agents}
        truncations = {a: False for a in self.agents}
        infos = {a: {"terms": out.terms} for a in self.agents}
        if done:
            obs = {a: np.zeros(self.observation_space(a).shape, np.float32) for a in self.agents}
            self.agents = []
        else:
            obs = self._observations()
        return obs, rewards, terminations, truncations, infos

    def render(self):  # pragma: no cover
        return None

    def close(self):
        pass
