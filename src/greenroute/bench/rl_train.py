"""``greenroute train``: train an SB3 agent on a greenroute environment and save it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from greenroute.core.errors import ConfigError, UnknownNameError

FINAL_REWARD_STEPS = 1000  # "final training reward": mean step reward over the last 1,000 steps


def parse_overrides(items: list[str] | None) -> dict:
    """``key=value`` pairs; values parsed as JSON when possible (numbers, lists, bools)."""
    from greenroute.core.options import parse_key_values

    return parse_key_values(items, "--env-option/--hp")


def make_env(env_id: str, env_options: dict | None = None):
    import gymnasium as gym

    from greenroute.envs import ENV_IDS, register_envs

    register_envs()
    if env_id not in ENV_IDS:
        raise UnknownNameError("environment", env_id, ENV_IDS)
    return gym.make(env_id, **(env_options or {}))


def _monitored(env_id: str, env_options: dict):
    from stable_baselines3.common.monitor import Monitor

    return Monitor(make_env(env_id, env_options))


def make_vec(env_id: str, env_options: dict | None, n_envs: int):
    """``n_envs`` copies of the environment, each in its own process when ``n_envs > 1``
    (SubprocVecEnv: the simulation, not the network, is the cost, so one process per core)."""
    import functools

    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    fns = [functools.partial(_monitored, env_id, dict(env_options or {})) for _ in range(n_envs)]
    if n_envs == 1:
        return DummyVecEnv(fns)
    return SubprocVecEnv(fns, start_method="fork")


def train(
    env_id: str,
    algo: str = "ppo",
    steps: int = 10_000,
    seed: int = 0,
    out: str | Path = "model.zip",
    *,
    env_options: dict | None = None,
    hyperparameters: dict | None = None,
    tensorboard_log: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    n_envs: int = 1,
    curves: str | Path | None = None,
    keep_best: int = 0,
) -> dict:
    """Train and save; returns the metadata written into the model zip.

    ``n_envs`` environments run in parallel processes (each seeded ``seed + i`` by SB3, so a
    run is reproducible for a given seed and ``n_envs``); ``curves`` (a path stem) writes the
    learning curves to ``STEM.csv`` and ``STEM.png`` (:mod:`greenroute.bench.rl_curves`);
    ``keep_best=K`` (needs ``curves``) saves the parameters of the rollout with the best mean
    reward per epoch over the last K rollouts instead of the last ones."""
    from stable_baselines3.common.callbacks import BaseCallback

    from greenroute.policies.rl.algos import algo_class, default_hyperparameters
    from greenroute.policies.rl.store import write_meta

    if steps < 1:
        raise ConfigError(f"--steps must be >= 1, got {steps}")
    import torch

    torch.set_num_threads(1)  # small MLPs: one thread is fastest and leaves a core free
    out = Path(out)
    if out.suffix != ".zip":
        raise ConfigError(f"--out must end with .zip, got {out}")
    if n_envs < 1:
        raise ConfigError(f"--n-envs must be >= 1, got {n_envs}")
    env = make_env(env_id, env_options)
    cls = algo_class(algo)
    kw, policy_kwargs = default_hyperparameters(env_id, algo)
    kw.update(hyperparameters or {})
    if "policy_kwargs" in kw:
        policy_kwargs.update(kw.pop("policy_kwargs"))
    import gymnasium as gym

    if algo == "dqn" and not isinstance(env.action_space, gym.spaces.Discrete):
        raise ConfigError(f"dqn needs a discrete action space; {env_id} has {env.action_space}")
    if algo == "sac" and not isinstance(env.action_space, gym.spaces.Box):
        raise ConfigError(f"sac needs a continuous action space; {env_id} is discrete")
    train_env = env if n_envs == 1 and curves is None else make_vec(env_id, env_options, n_envs)
    try:
        model = cls(
            "MlpPolicy",
            train_env,
            seed=seed,
            verbose=0,
            device="cpu",
            policy_kwargs=policy_kwargs or None,
            tensorboard_log=None if tensorboard_log is None else str(tensorboard_log),
            **kw,
        )
    except TypeError as exc:
        raise ConfigError(f"bad hyperparameter for {algo}: {exc}") from None

    from collections import deque

    last_rewards: deque[float] = deque(maxlen=FINAL_REWARD_STEPS)

    class _Progress(BaseCallback):
        def _on_step(self) -> bool:
            r = self.locals.get("rewards")
            if r is not None:
                last_rewards.extend(np.asarray(r, dtype=np.float64).ravel().tolist())
            if progress is not None and self.num_timesteps % 256 == 0:
                progress(self.num_timesteps, steps)
            return True

    callbacks = [_Progress()]
    if curves is not None:
        from greenroute.bench.rl_curves import make_curve_callback

        stem = Path(curves)
        curve_cb = make_curve_callback(
            stem.with_suffix(".csv"), stem.with_suffix(".png"), keep_best=keep_best
        )
        callbacks.append(curve_cb)
    elif keep_best:
        raise ConfigError("keep_best needs curves (it selects on the learning curve)")
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps, callback=callbacks, tb_log_name=f"{algo}-{seed}")
    wall = time.perf_counter() - t0
    selected = int(model.num_timesteps)
    if keep_best and curve_cb.best_state is not None:
        model.policy.load_state_dict(curve_cb.best_state)
        selected = curve_cb.best_timesteps
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.zip")
    model.save(str(tmp))
    base_env = env.unwrapped
    meta = {
        "env_id": env_id,
        "env_options": env_options or {},
        "algo": algo,
        "steps": int(steps),
        "seed": int(seed),
        "n_envs": int(n_envs),
        "selected_timesteps": selected,
        "wall_s": wall,
        "hyperparameters": {k: v for k, v in kw.items()},
        # in the training reward's units (with its scale); NaN when no step / episode ended
        "final_reward_per_step": float(np.mean(last_rewards)) if last_rewards else float("nan"),
        "final_episode_return": float(np.mean([e["r"] for e in model.ep_info_buffer]))
        if model.ep_info_buffer
        else float("nan"),
        "observation_shape": list(env.observation_space.shape or []),
        "action_space": str(env.action_space),
        "env_meta": base_env.model_meta() if hasattr(base_env, "model_meta") else {},
    }
    write_meta(tmp, meta)
    tmp.replace(out)
    env.close()
    if train_env is not env:
        train_env.close()
    return meta


def evaluate(model, env, episodes: int = 5, deterministic: bool = True, seed: int = 0) -> dict:
    """Mean and std of the episode return over ``episodes`` evaluation episodes."""
    returns = []
    for k in range(episodes):
        obs, _ = env.reset(seed=seed + k)
        done = False
        total = 0.0
        while not done:
            action, _ = model.predict(obs, deterministic=deterministic)
            obs, r, term, trunc, _ = env.step(action)
            total += float(r)
            done = term or trunc
        returns.append(total)
    return {"mean": float(np.mean(returns)), "std": float(np.std(returns)), "returns": returns}
