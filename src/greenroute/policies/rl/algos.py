"""Algorithms and their default hyperparameters.

- Geo manager/worker (seed 000 appendix A.2, Table 5): PPO with learning rate 3e-4, n_steps
  2048, batch 64, 10 epochs, gamma 0.99, GAE lambda 0.95, clip 0.2, entropy 0.01, value 0.5.
- Load balancing (seed 002 section V): MLP with two hidden layers of 128 ReLU units, learning
  rate 3e-4, gamma 0.99, replay buffer 50,000 for DQN.
"""

from __future__ import annotations

from greenroute.core.errors import UnknownNameError

ALGOS = ("ppo", "a2c", "dqn", "sac")

SEED000_PPO = {  # seed 000 Table 5
    "learning_rate": 3e-4,
    "n_steps": 2048,
    "batch_size": 64,
    "n_epochs": 10,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_range": 0.2,
    "ent_coef": 0.01,
    "vf_coef": 0.5,
}
SEED002_COMMON = {"learning_rate": 3e-4, "gamma": 0.99}  # seed 002 section V
SEED002_NET = {"net_arch": [128, 128]}  # two hidden layers of 128 (ReLU set below)


def algo_class(name: str):
    import stable_baselines3 as sb3

    classes = {"ppo": sb3.PPO, "a2c": sb3.A2C, "dqn": sb3.DQN, "sac": sb3.SAC}
    try:
        return classes[name]
    except KeyError:
        raise UnknownNameError("algorithm", name, classes) from None


def default_hyperparameters(env_id: str, algo: str) -> tuple[dict, dict]:
    """(algorithm kwargs, policy_kwargs) for an environment family."""
    import torch

    if env_id.endswith("LoadBalancing-v0"):
        kw = dict(SEED002_COMMON)
        if algo == "dqn":
            kw["buffer_size"] = 50_000  # seed 002 section V
        return kw, {**SEED002_NET, "activation_fn": torch.nn.ReLU}
    if algo == "ppo":
        return dict(SEED000_PPO), {}
    return {"learning_rate": 3e-4, "gamma": 0.99}, {}
