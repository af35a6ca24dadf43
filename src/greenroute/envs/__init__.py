"""Gymnasium and PettingZoo environments (extra ``[rl]``).

Importing ``greenroute`` registers the Gymnasium ids (when gymnasium is installed):

- ``greenroute/LoadBalancing-v0`` — seed 002: one request per step over heterogeneous servers;
- ``greenroute/GeoManager-v0`` — seed 000 appendix A: a manager picks a destination datacenter
  for its origin's workload each epoch;
- ``greenroute/GeoWorker-v0`` — seed 000: a worker defers or executes the deferrable work at
  its datacenter;

and, following PettingZoo's convention, :func:`parallel_env` builds the multi-agent version
(one manager and one worker per datacenter).
"""

from __future__ import annotations

ENV_IDS = (
    "greenroute/LoadBalancing-v0",
    "greenroute/GeoManager-v0",
    "greenroute/GeoWorker-v0",
)
_ENTRY_POINTS = {
    "greenroute/LoadBalancing-v0": "greenroute.envs.lb:LoadBalancingEnv",
    "greenroute/GeoManager-v0": "greenroute.envs.geo:GeoManagerEnv",
    "greenroute/GeoWorker-v0": "greenroute.envs.geo:GeoWorkerEnv",
}


def register_envs() -> bool:
    """Register the Gymnasium ids; returns False when gymnasium is not installed."""
    try:
        import gymnasium as gym
    except ModuleNotFoundError as exc:  # the [rl] extra is not installed
        if exc.name != "gymnasium":
            raise
        return False
    for env_id, entry in _ENTRY_POINTS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry)
    return True


def parallel_env(scenario: str = "geo3", **options):
    """PettingZoo ParallelEnv: one manager and one worker agent per datacenter."""
    from greenroute.envs.geo_parallel import GeoParallelEnv

    return GeoParallelEnv(scenario=scenario, **options)
