"""MACCS environments: a PettingZoo ParallelEnv with one agent per GCOS region, and a
parameter-sharing VecEnv view of it for Stable-Baselines3.

:class:`SharedAgentVecEnv` does what SuperSuit's ``pettingzoo_env_to_vec_env_v1`` does (SuperSuit
is not installed): each agent is one "environment" slot of an SB3 ``VecEnv``, so one PPO
network (shared parameters, agent id in the observation) learns from every agent's
transitions; all slots step together and reset together at the end of the run.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv
from stable_baselines3.common.vec_env import VecEnv

from greenroute.policies.gcos.maccs import MaccsCore, obs_dim
from greenroute.sim.gcos.engine import GcosSim


class GcosParallelEnv(ParallelEnv):
    metadata: ClassVar[dict] = {"name": "greenroute_gcos_maccs_v0", "render_modes": []}

    def __init__(self, sim: GcosSim, core: MaccsCore) -> None:
        self.sim, self.core = sim, core
        self.render_mode = None
        R = sim.n_regions
        self.possible_agents = [f"region_{r}" for r in sim.regions]
        self.agents = list(self.possible_agents)
        self._obs = spaces.Box(-1.0, 10.0, shape=(obs_dim(R),), dtype=np.float32)
        self._act = spaces.MultiDiscrete([R, 2])

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs

    def action_space(self, agent: str) -> spaces.Space:
        return self._act

    def _obs_dict(self) -> dict:
        o = self.core.observe()
        return {a: o[k] for k, a in enumerate(self.possible_agents)}

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.agents = list(self.possible_agents)
        self.sim.reset()
        self.core.reset(self.sim)
        return self._obs_dict(), {a: {} for a in self.agents}

    def step(self, actions: dict):
        acts = np.array([actions[a] for a in self.possible_agents])
        batch = self.sim.batch()
        n0 = len(self.sim.ledger.transfers)
        res = self.sim.step(self.core.act(acts))
        migrated = self._migration_objective(n0)
        per_agent = self.core.rewards(res, batch, migrated)
        done = self.sim.done
        obs = self._obs_dict() if not done else {a: np.zeros(self._obs.shape, np.float32)
                                                  for a in self.agents}  # fmt: skip
        rewards = {a: float(per_agent[k]) for k, a in enumerate(self.possible_agents)}
        terms = {a: done for a in self.agents}
        truncs = {a: False for a in self.agents}
        infos = {a: {} for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def _migration_objective(self, n0: int) -> np.ndarray:
        """Objective of this window's migration copies, per agent that ordered them."""
        out = np.zeros(self.sim.n_regions)
        who = {(m.key, m.dst): o for o, m in self.core.ordered}
        w = self.core.weights
        for t in self.sim.ledger.transfers[n0:]:
            if t.reason == "migrate" and (t.key, t.dst) in who:
                out[who[t.key, t.dst]] += t.cost_usd + w.carbon_usd_per_kg * t.carbon_kg
        return out


class SharedAgentVecEnv(VecEnv):
    """Agents of a :class:`GcosParallelEnv` as the slots of one SB3 ``VecEnv``."""

    def __init__(self, env: GcosParallelEnv) -> None:
        self.env = env
        self.names = list(env.possible_agents)
        a0 = self.names[0]
        super().__init__(len(self.names), env.observation_space(a0), env.action_space(a0))
        self._actions: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        obs, _ = self.env.reset()
        return np.stack([obs[a] for a in self.names])

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self):
        assert self._actions is not None
        obs, rew, term, trunc, _ = self.env.step(dict(zip(self.names, self._actions, strict=True)))
        o = np.stack([obs[a] for a in self.names])
        r = np.array([rew[a] for a in self.names], dtype=np.float32)
        d = np.array([term[a] or trunc[a] for a in self.names])
        infos = [{} for _ in self.names]
        if d.all():
            for k in range(len(self.names)):
                infos[k]["terminal_observation"] = o[k]
            o = self.reset()
        return o, r, d, infos

    def close(self) -> None:
        return None

    def get_attr(self, attr_name, indices=None):
        return [getattr(self.env, attr_name)] * len(self._indices(indices))

    def set_attr(self, attr_name, value, indices=None) -> None:
        setattr(self.env, attr_name, value)

    def env_method(self, method_name, *args, indices=None, **kwargs):
        return [getattr(self.env, method_name)(*args, **kwargs)] * len(self._indices(indices))

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False] * len(self._indices(indices))

    def _indices(self, indices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        return [indices] if isinstance(indices, int) else list(indices)
