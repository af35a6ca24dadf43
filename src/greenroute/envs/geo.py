"""Single-agent Gymnasium views of the seed-000 hierarchy (parameter-shared agents).

``GeoManager-v0``: one step per (epoch, origin); the shared manager policy picks the
destination datacenter of that origin's workload batch (Discrete(N), observation 12 + 5N:
seed 000 Table 3), or with ``obs="scale-free"`` one of K candidate datacenters (observation
independent of N). Workers follow ``worker`` (``"execute"`` or a saved worker model).

``GeoWorker-v0``: one step per (epoch, datacenter); defer (0) or execute (1) the local
deferrable work (observation 33: seed 000 Table 4). Managers follow ``manager``
(``"local"`` or a saved manager model).

The epoch is simulated after the last agent of the epoch has acted; the shared reward of
seed 000 eq. 1 (see ``geo_core``) is returned on that step and 0 on the others (the agents
share one policy and one reward; GAE carries the credit back over the epoch's N steps).

Options beyond seed 000 (all off by default, so the defaults are the paper's setting):

- ``mask=True`` (manager): forbidden and saturated destinations are masked
  (:mod:`greenroute.policies.rl.masks`). ``action_masks()`` returns the mask for maskable
  algorithms (sb3-contrib's MaskablePPO); an action the mask forbids is replaced by the
  origin's fallback (its own region, as ``local-only``) and costs ``invalid_penalty`` on that
  step, so plain PPO learns the mask too, and a saved model picks among valid actions only
  (``policies/rl/geo.py`` masks its action probabilities).
- ``reward="relative"``, ``start_days=[...]``: see ``geo_core``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from greenroute.core.errors import ConfigError
from greenroute.envs.geo_core import GeoCore
from greenroute.policies.rl import features as F
from greenroute.policies.rl import masks as M

OBS_MODES = ("fixed", "scale-free")
RELEASE_MODES = ("all", "headroom")


class _GeoBase(gym.Env):
    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium's convention)

    def __init__(
        self,
        scenario: str = "geo3",
        days: float | None = 7.0,
        data_dir: str | None = None,
        reward_weights: dict | None = None,
        seed_pool: int = 8,
        server_model: str | None = None,
        reward: str = "paper",
        start_days: list[float] | None = None,
    ) -> None:
        self.core = GeoCore(scenario, days, data_dir, reward_weights, server_model, reward,
                            start_days)  # fmt: skip
        self.seed_pool = int(seed_pool)  # episodes cycle over this many workload seeds
        n_starts = len(self.core.start_days)
        self.core.max_prepared = max(self.core.max_prepared, self.seed_pool * n_starts)
        self.options = {"scenario": scenario, "days": days,
                        "reward_weights": reward_weights or {},
                        "server_model": self.core.sc.resolved_server_model}  # fmt: skip
        if reward != "paper":
            self.options["reward"] = reward
        if start_days is not None:
            self.options["start_days"] = list(self.core.start_days)
        self._k = 0
        self._episode_seed = 0
        self.last_terms: dict = {}

    def _begin(self, seed: int | None) -> None:
        """An explicit ``seed`` runs that workload seed from the first start day; otherwise
        the episode draws a (workload seed, start day) pair from the pools."""
        starts = self.core.start_days
        if seed is not None:
            self._episode_seed, start = int(seed), starts[0]
        else:
            k = int(self.np_random.integers(self.seed_pool * len(starts)))
            self._episode_seed, start = k % self.seed_pool, starts[k // self.seed_pool]
        self.core.reset(self._episode_seed, start)
        self._k = 0
        self._step_penalty = 0.0

    def _after_agent(self, actions) -> tuple:
        """Gymnasium step result after one agent acted; once every origin's agent has acted,
        ``actions()`` gives (destinations, holds), the epoch runs and its shared reward is paid."""
        reward = 0.0
        info: dict = {}
        if self._k == self.core.n_origins:
            dest, hold = actions()
            out = self.core.step(dest, hold)
            self.last_terms = out.terms
            info = {"terms": out.terms, "epoch": out.info}
            reward = out.reward
            self._k = 0
        reward -= self._step_penalty
        self._step_penalty = 0.0
        terminated = self.core.done
        obs = np.zeros(self.observation_space.shape, np.float32) if terminated else self._obs()
        return obs, float(reward), terminated, False, info

    def model_meta(self) -> dict:
        return {"n_datacenters": self.core.n, "regions": list(self.core.sc.regions),
                **self.options}  # fmt: skip


class GeoManagerEnv(_GeoBase):
    def __init__(self, obs: str = "fixed", worker: str = "execute", k: int = F.SCALE_FREE_K,
                 mask: bool = False, mask_target: float = M.DEFAULT_MASK_TARGET_UTILISATION,
                 invalid_penalty: float = 0.0, **kw) -> None:  # fmt: skip
        super().__init__(**kw)
        if obs not in OBS_MODES:
            raise ConfigError(f"obs must be one of {OBS_MODES}, got {obs!r}")
        if mask and obs != "fixed":
            raise ConfigError("mask=true needs obs=fixed (the scale-free manager's actions are "
                              "candidates, not regions)")  # fmt: skip
        if not 0.0 < float(mask_target) <= 1.0:
            raise ConfigError(f"mask_target must be in (0, 1], got {mask_target}")
        self.obs_mode = obs
        self.k = int(k)
        self.mask = bool(mask)
        self.mask_target = float(mask_target)
        self.invalid_penalty = float(invalid_penalty)
        self.options.update({"obs": obs, "worker": worker, "k": self.k})
        if self.mask:
            self.options.update({"mask": True, "mask_target": self.mask_target,
                                 "invalid_penalty": self.invalid_penalty})  # fmt: skip
        self.invalid_actions = 0
        n = self.core.n
        dim = F.manager_dim(n) if obs == "fixed" else F.scale_free_dim(self.k)
        self.observation_space = spaces.Box(-F.OBS_CLIP, F.OBS_CLIP, shape=(dim,), dtype=np.float32)
        self.action_space = spaces.Discrete(n if obs == "fixed" else self.k)
        self.worker = _worker_controller(worker)
        self._dest = np.zeros(self.core.n_origins, dtype=np.int64)
        self._cands = None

    def _obs(self) -> np.ndarray:
        o = self._k
        if self._k == 0:
            self._assigned = np.zeros(self.core.n)
        if self.obs_mode == "fixed":
            return F.manager_obs(self.core.obs, o, self._assigned)
        vec, self._cands = F.scale_free_manager_obs(self.core.obs, o, self.k, self._assigned)
        return vec

    def action_masks(self) -> np.ndarray:
        """Valid actions of the manager about to act (all True without ``mask``)."""
        if not self.mask or self.core.done:
            return np.ones(self.action_space.n, dtype=bool)
        return M.manager_mask(self.core.obs, self._k, self._assigned, self.mask_target)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._begin(seed)
        return self._obs(), {}

    def step(self, action):
        a = int(action)
        o = self._k
        invalid = False
        self._obs_of_step = self.core.obs
        if self.mask:
            fb = M.fallback_destination(self.core.obs, o)
            a, invalid = M.masked_choice(self.action_masks(), a, fb)
            if invalid:
                self.invalid_actions += 1
                self._step_penalty = self.invalid_penalty
        self._dest[o] = a if self.obs_mode == "fixed" else int(self._cands[a])
        self._assigned[self._dest[o]] += F.origin_load_slots(self.core.obs, o, self._dest[o])
        self._k += 1
        invalid = self.mask and invalid
        # last manager of the epoch: the workers act and the epoch runs
        out = self._after_agent(lambda: (self._dest.copy(), self.worker(self.core)))
        out[4]["invalid"] = bool(invalid)
        out[4]["moved"] = bool(self._dest[o] != M.fallback_destination(self._obs_of_step, o))
        return out


class GeoWorkerEnv(_GeoBase):
    """``release="headroom"`` (ours): *execute* releases the pending pool at the rate the
    destination can absorb (:func:`greenroute.policies.rl.masks.release_holds`); seed 000's
    *execute* releases all of it at once (``release="all"``, the default)."""

    def __init__(
        self,
        manager: str = "local",
        release: str = "all",
        release_target: float = M.DEFAULT_MASK_TARGET_UTILISATION,
        **kw,
    ) -> None:
        super().__init__(**kw)
        if release not in RELEASE_MODES:
            raise ConfigError(f"release must be one of {RELEASE_MODES}, got {release!r}")
        self.release = release
        self.release_target = float(release_target)
        self.options.update({"manager": manager})
        if release != "all":
            self.options.update({"release": release, "release_target": self.release_target})
        self.observation_space = spaces.Box(
            -F.OBS_CLIP, F.OBS_CLIP, shape=(F.WORKER_DIM,), dtype=np.float32
        )
        self.action_space = spaces.Discrete(2)
        self.manager = _manager_controller(manager)
        self._hold = np.zeros(self.core.n_origins)

    def _obs(self) -> np.ndarray:
        j = F.worker_region(self.core.obs, self._k)
        return F.worker_obs(self.core.obs, j, self.core.memory)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._begin(seed)
        return self._obs(), {}

    def step(self, action):
        o = self._k
        pending = float(self.core.obs.pending_deferrable[o]) + float(
            self.core.obs.demand_rps[0, 1, o]
        )
        self._hold[o] = 0.0 if int(action) == 1 else 1.0  # 0 = defer, 1 = execute
        self._k += 1
        out = self._after_agent(self._epoch_actions)
        out[4]["defer"] = bool(self._hold[o] > 0.5 and pending > 0)
        return out

    def _epoch_actions(self) -> tuple:
        dest = self.manager(self.core)
        if self.release == "all":
            return dest, self._hold.copy()
        hold = M.release_holds(self.core.obs, dest, self._hold > 0.5, self.release_target)
        return dest, hold


def _worker_controller(spec: str):
    """'execute' (release everything) or a saved worker model."""
    if spec in ("execute", None, ""):
        return lambda core: np.zeros(core.n_origins)
    from greenroute.policies.rl.geo import load_worker

    worker = load_worker(spec)
    return worker.holds


def _manager_controller(spec: str):
    """'local' (serve in the origin's region) or a saved manager model."""
    if spec in ("local", None, ""):
        return lambda core: core.local_destinations()
    from greenroute.policies.rl.geo import load_manager

    manager = load_manager(spec)
    return manager.destinations
