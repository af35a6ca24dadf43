"""The hierarchical RL expert of seed 000 as a greenroute ``GeoPolicy`` (``rl:PATH``).

A saved manager model (trained on ``greenroute/GeoManager-v0``) picks each origin's destination;
a saved worker model (``greenroute/GeoWorker-v0``) defers or executes each datacenter's
deferrable work. Loading a worker model brings the manager it was trained with (recorded in
its metadata), so ``rl:worker.zip`` is the whole hierarchy; ``rl:manager.zip`` runs the
manager with workers that always execute.

A manager trained with the fixed-size observation (seed 000 Table 3: 12 + 5N) refuses a
scenario with a different number of datacenters — that is seed 000's scalability failure;
one trained with ``obs="scale-free"`` runs on any N.

A manager trained with ``mask=true`` (``envs/geo.py``) decides with the same mask: it takes the
most probable action among the valid ones (:func:`greenroute.policies.rl.masks.manager_mask`),
so it never picks a forbidden or saturated datacenter.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.core.types import ClusterInfo, Observation, Plan
from greenroute.policies.rl import features as F
from greenroute.policies.rl import masks as M

MANAGER_ENV = "greenroute/GeoManager-v0"
WORKER_ENV = "greenroute/GeoWorker-v0"


class Manager:
    def __init__(self, path: str | Path) -> None:
        from greenroute.policies.rl.store import load_model

        self.path = str(path)
        self.model, self.meta = load_model(path, expect_env=MANAGER_ENV)
        opts = self.meta.get("env_options", {})
        em = self.meta.get("env_meta", {})
        self.obs_mode = em.get("obs", opts.get("obs", "fixed"))
        self.k = int(em.get("k", opts.get("k", F.SCALE_FREE_K)))
        self.n_trained = int(em.get("n_datacenters", 0))
        self.regions_trained = em.get("regions", [])
        self.mask = bool(em.get("mask", opts.get("mask", False)))
        self.mask_target = float(em.get("mask_target", M.DEFAULT_MASK_TARGET_UTILISATION))

    def check(self, n_regions: int, scenario: str) -> None:
        if self.obs_mode == "fixed" and self.n_trained and n_regions != self.n_trained:
            raise ConfigError(
                f"model {self.path} is a fixed-size expert trained on {self.n_trained} datacenters "
                f"(observation {F.manager_dim(self.n_trained)}); scenario {scenario} has "
                f"{n_regions} (observation {F.manager_dim(n_regions)}). Seed 000's scalability "
                "failure: train with --env-option obs=scale-free to run on any number of sites"
            )

    def act(self, obs: Observation, o: int, assigned: np.ndarray | None = None) -> int:
        if self.obs_mode == "fixed":
            vec = F.manager_obs(obs, o, assigned)
            if self.mask:
                mask = M.manager_mask(obs, o, assigned, self.mask_target)
                return masked_argmax(self.model, vec, mask)
            a, _ = self.model.predict(vec, deterministic=True)
            return int(a)
        vec, cands = F.scale_free_manager_obs(obs, o, self.k, assigned)
        a, _ = self.model.predict(vec, deterministic=True)
        return int(cands[int(a)])

    def act_all(self, obs: Observation) -> np.ndarray:
        """Managers act in turn, each seeing what the previous ones assigned."""
        assigned = np.zeros(obs.n_regions)
        dest = np.zeros(obs.n_origins, dtype=np.int64)
        for o in range(obs.n_origins):
            dest[o] = self.act(obs, o, assigned)
            assigned[dest[o]] += F.origin_load_slots(obs, o, dest[o])
        return dest

    def destinations(self, core) -> np.ndarray:
        return self.act_all(core.obs)


def action_probabilities(model, vec: np.ndarray) -> np.ndarray:
    """The policy's action probabilities for one observation (SB3 categorical policy)."""
    import torch

    with torch.no_grad():
        t, _ = model.policy.obs_to_tensor(vec)
        dist = model.policy.get_distribution(t)
        return dist.distribution.probs[0].cpu().numpy()


def masked_argmax(model, vec: np.ndarray, mask: np.ndarray) -> int:
    """The most probable action among those ``mask`` allows."""
    p = action_probabilities(model, vec)
    return int(np.argmax(np.where(mask, p, -1.0)))


class Worker:
    def __init__(self, path: str | Path) -> None:
        from greenroute.policies.rl.store import load_model

        self.path = str(path)
        self.model, self.meta = load_model(path, expect_env=WORKER_ENV)
        opts = self.meta.get("env_options", {})
        self.release = opts.get("release", "all")
        self.release_target = float(opts.get("release_target", M.DEFAULT_MASK_TARGET_UTILISATION))

    def plan_hold(self, obs: Observation, memory, dest: np.ndarray) -> np.ndarray:
        """The plan's hold for the workers' decisions given the managers' destinations
        (``release="headroom"``: executing workers release what their destination absorbs)."""
        hold = self.hold_for(obs, memory)
        self.last_defer = hold > 0.5
        if self.release == "all":
            return hold
        return M.release_holds(obs, dest, hold > 0.5, self.release_target)

    def hold_for(self, obs: Observation, memory) -> np.ndarray:
        hold = np.zeros(obs.n_origins)
        for o in range(obs.n_origins):
            j = F.worker_region(obs, o)
            a, _ = self.model.predict(F.worker_obs(obs, j, memory), deterministic=True)
            hold[o] = 0.0 if int(a) == 1 else 1.0
        return hold

    def holds(self, core) -> np.ndarray:
        return self.hold_for(core.obs, core.memory)


def load_manager(path: str | Path) -> Manager:
    return Manager(path)


def load_worker(path: str | Path) -> Worker:
    return Worker(path)


class RLGeoPolicy:
    """Manager + worker models as a GeoPolicy."""

    def __init__(self, manager: Manager | None, worker: Worker | None, name: str) -> None:
        self.manager = manager
        self.worker = worker
        self.name = name
        # ``options`` are what the policy was built with (recorded in the run's manifest and
        # passed back by reproduce and the copilot): an ``rl:`` policy takes none; the paths of
        # its models are information only
        self.options: dict = {}
        self.model_paths = {
            "manager": manager.path if manager else None,
            "worker": worker.path if worker else None,
        }

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        if self.manager is not None:
            self.manager.check(len(cluster.regions), cluster.scenario)
        self.memory = F.TrendMemory(len(cluster.regions))

    def plan(self, obs: Observation) -> Plan:
        self.memory.push(obs)
        n_c, n_o, n_r = obs.allowed.shape
        dest = np.zeros(n_o, dtype=np.int64)
        if self.manager is not None:
            dest = self.manager.act_all(obs)
        else:
            for o, origin in enumerate(obs.origins):
                if origin in obs.regions:
                    dest[o] = obs.regions.index(origin)
        hold = (self.worker.plan_hold(obs, self.memory, dest) if self.worker is not None
                else np.zeros(n_o))  # fmt: skip
        self.last_actions = (dest.copy(), self.worker.last_defer.copy() if self.worker
                             else np.zeros(n_o, dtype=bool))  # fmt: skip
        route = np.zeros((n_c, n_o, n_r))
        for o in range(n_o):
            for c in range(n_c):
                ok = np.flatnonzero(obs.allowed[c, o])
                if ok.size == 0:
                    continue
                d = dest[o] if obs.allowed[c, o, dest[o]] else ok[np.argmin(obs.latency_s[o, ok])]
                route[c, o, d] = 1.0
        moved = [f"{obs.origins[o]}->{obs.regions[dest[o]]}" for o in range(n_o)
                 if obs.origins[o] != obs.regions[dest[o]]]  # fmt: skip
        held = [obs.origins[o] for o in range(n_o) if self.last_actions[1][o]]
        why = f"RL: {', '.join(moved) or 'all local'}; defer at {', '.join(held) or 'none'}"
        return Plan(route=route, hold=hold, rationale=why)


def load_rl_geo_policy(path: str, **_options) -> RLGeoPolicy:
    from greenroute.policies.rl.store import read_meta

    meta = read_meta(path)
    env_id = meta.get("env_id")
    if env_id == "greenroute/LoadBalancing-v0":
        raise ConfigError(
            f"model {path} is a load balancer (greenroute/LoadBalancing-v0): use it as "
            f"--local-policy rl:{path}"
        )
    if env_id == MANAGER_ENV:
        manager = Manager(path)
        wspec = meta.get("env_options", {}).get("worker", "execute")
        worker = Worker(wspec) if wspec not in (None, "", "execute") else None
        return _with_spec(RLGeoPolicy(manager, worker, f"rl:{Path(path).name}"), path)
    if env_id == WORKER_ENV:
        worker = Worker(path)
        mspec = meta.get("env_options", {}).get("manager", "local")
        manager = Manager(mspec) if mspec not in (None, "", "local") else None
        return _with_spec(RLGeoPolicy(manager, worker, f"rl:{Path(path).name}"), path)
    raise ConfigError(f"model {path} was trained on {env_id}, not a geo environment")


def _with_spec(policy: RLGeoPolicy, path: str) -> RLGeoPolicy:
    """``spec``: the name that builds this policy again (``rl:`` + the model's absolute path),
    recorded in a run's manifest beside the short display ``name``."""
    policy.spec = f"rl:{Path(path).resolve()}"
    return policy
