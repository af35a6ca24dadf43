"""``greenroute train-teacher``: the hierarchical expert of seed 000 (manager, then worker).

Two PPO stages (seed 000 appendix A.2 trains the levels of the hierarchy separately):

1. the manager (``greenroute/GeoManager-v0``) with workers that always execute;
2. the worker (``greenroute/GeoWorker-v0``) under the trained manager; ``worker.zip`` names the
   manager in its metadata, so ``rl:OUT/worker.zip`` is the whole hierarchy.

Each stage writes its model, its learning curves (``*_curves.csv`` / ``.png``) under ``out``,
and ``manifest.json`` records every option, the package versions, the git commit, wall times
and the models' SHA-256. Same seed, same options, same ``n_envs``: same models.

What the teacher changes against the paper's setting (each an environment option, see
``envs/geo.py`` and ``envs/geo_core.py``; the paper's defaults stay the environments' defaults):

- ``mask=true``: forbidden and saturated destinations masked (``policies/rl/masks.py``),
  ``invalid_penalty`` 0.1 per masked pick during training;
- ``reward="relative"``: eq. 1 minus local-only's eq. 1 at the same epoch (variance reduction,
  same optimal policy);
- manager weights: ``sla_violations`` 1.0 instead of 0.3 (seed 000 gives no values; one %
  of an epoch's requests missing its SLO then costs as much as the epoch's whole carbon, so the
  manager does not buy carbon with SLO misses). The worker keeps ``geo_core``'s weights (sla
  0.3, aging 0.05): with sla 1.0 it deferred at every load peak to shave SLO misses and gave
  back half of the manager's carbon savings (-1.0 % instead of -1.8 % on geo3/31 days); with
  aging 0.01 it drifted to deferring 99 % of the time (+0.5 % carbon against local-only);
- checkpoint selection: each stage keeps the parameters with the best mean reward per epoch
  over 5 consecutive rollouts (``selected_timesteps`` in the manifest), since the worker's
  reward can drift down late in training;
- ``release="headroom"`` (worker): *execute* releases the deferred pool at the rate the
  destination absorbs instead of all at once (``policies/rl/masks.release_holds``);
- ``start_days``: a curriculum over July (episodes start on days 0, 6, 12, 18 or 23), with
  ``seed_pool`` workload seeds.
"""

from __future__ import annotations

import json
import platform
import subprocess
import time
from pathlib import Path

from greenroute.core.errors import ConfigError
from greenroute.data.paths import file_sha256

TEACHER_DEFAULTS = {
    "days": 7.0,
    "start_days": [0.0, 6.0, 12.0, 18.0, 23.0],
    "seed_pool": 2,
    "reward": "relative",
}
KEEP_BEST = 5  # checkpoint selection: best mean reward per epoch over 5 rollouts
MANAGER_DEFAULTS = {"mask": True, "invalid_penalty": 0.1, "reward_weights": {"sla_violations": 1.0}}
WORKER_DEFAULTS = {"release": "headroom"}
MANAGER_ONLY = ("mask", "mask_target", "invalid_penalty", "obs", "k", "worker")
WORKER_ONLY = ("release", "release_target", "manager")


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=10, check=False)  # fmt: skip
    except OSError:
        return None
    return out.stdout.strip() or None


def _versions() -> dict:
    import gymnasium
    import stable_baselines3
    import torch

    from greenroute.core.version import __version__

    return {"greenroute": __version__,
            "python": platform.python_version(), "torch": torch.__version__,
            "stable_baselines3": stable_baselines3.__version__,
            "gymnasium": gymnasium.__version__}  # fmt: skip


def train_teacher(
    out: str | Path,
    *,
    scenario: str = "geo3",
    data_dir: str | None = None,
    manager_steps: int = 400_000,
    worker_steps: int = 100_000,
    seed: int = 0,
    n_envs: int = 2,
    env_options: dict | None = None,
    hyperparameters: dict | None = None,
    keep_best: int = KEEP_BEST,
    manager: str | Path | None = None,
    progress=None,
) -> dict:
    """Train manager then worker under ``out``; returns the manifest (also ``manifest.json``).
    ``worker_steps=0`` stops after the manager (the teacher is then ``rl:OUT/manager.zip``);
    ``manager=PATH`` skips the first stage and trains the worker under that saved manager."""
    from greenroute.bench.rl_train import train

    if manager is not None and not Path(manager).is_file():
        raise ConfigError(f"--manager {manager}: no such model file")
    if manager is not None and worker_steps < 1:
        raise ConfigError("--manager trains only the worker: give --worker-steps >= 1")
    if manager_steps < 1 or worker_steps < 0:
        raise ConfigError(
            f"--manager-steps must be >= 1 and --worker-steps >= 0, got {manager_steps}, "
            f"{worker_steps}"
        )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    user = dict(env_options or {})
    if data_dir is not None:
        user["data_dir"] = str(data_dir)
    base = {**TEACHER_DEFAULTS, "scenario": scenario}
    # the user's options win; each stage gets only the options its environment takes
    manager_opts = {k: v for k, v in {**base, **MANAGER_DEFAULTS, **user}.items()
                    if k not in WORKER_ONLY}  # fmt: skip
    worker_opts = {k: v for k, v in {**base, **WORKER_DEFAULTS, **user}.items()
                   if k not in MANAGER_ONLY}  # fmt: skip
    manifest: dict = {
        "kind": "greenroute-rl-teacher",
        "scenario": scenario,
        "seed": int(seed),
        "n_envs": int(n_envs),
        "git_commit": _git_commit(),
        "versions": _versions(),
        "stages": [],
    }
    t0 = time.perf_counter()
    stages = [("manager", "greenroute/GeoManager-v0", manager_steps, manager_opts)]
    if manager is not None:
        stages = []
        manifest["given_manager"] = {"model": str(manager), "sha256": file_sha256(Path(manager))}
    if worker_steps:
        worker_opts["manager"] = str(manager or out / "manager.zip")
        stages.append(("worker", "greenroute/GeoWorker-v0", worker_steps, worker_opts))
    for name, env_id, steps, opts in stages:
        model = out / f"{name}.zip"
        report = None if progress is None else (lambda d, t, n=name: progress(n, d, t))
        meta = train(env_id, "ppo", steps, seed, model, env_options=opts,
                     hyperparameters=hyperparameters, n_envs=n_envs,
                     curves=out / f"{name}_curves", progress=report,
                     keep_best=keep_best)  # fmt: skip
        manifest["stages"].append({
            "name": name, "env_id": env_id, "steps": int(steps), "env_options": opts,
            "hyperparameters": meta["hyperparameters"], "wall_s": round(meta["wall_s"], 1),
            "selected_timesteps": meta["selected_timesteps"],
            "final_reward_per_step": meta.get("final_reward_per_step"),
            "model": str(model), "sha256": file_sha256(model),
            "curves": [str(out / f"{name}_curves.csv"), str(out / f"{name}_curves.png")],
        })  # fmt: skip
    manifest["teacher"] = f"rl:{out / ('worker.zip' if worker_steps else 'manager.zip')}"
    manifest["wall_s"] = round(time.perf_counter() - t0, 1)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
    return manifest
