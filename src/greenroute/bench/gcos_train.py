"""Train MACCS: parameter-shared PPO (Stable-Baselines3) over the GCOS ParallelEnv.

Why parameter-shared PPO rather than MAPPO: the agents are interchangeable (same observation
layout, same action semantics, one cooperative reward), so one actor-critic with the agent id
in its observation is the standard choice (Terry et al. 2020, "Revisiting parameter sharing in
multi-agent deep RL"); with a fully shared reward and the global signals in every agent's
observation, the critic already sees what a centralised MAPPO critic would, and SB3's PPO is
tested code. Training runs on the scenario's training period (another fortnight's signals and
another task sample than the evaluation period). Deterministic for a seed: one torch thread,
SB3's seeding, a deterministic simulator.
"""

from __future__ import annotations

import time
from pathlib import Path

from greenroute.envs.gcos_env import GcosParallelEnv, SharedAgentVecEnv
from greenroute.policies.gcos.common import Weights
from greenroute.policies.gcos.maccs import MaccsCore
from greenroute.policies.gcos.predictor import ExecPredictor
from greenroute.sim.gcos.engine import GcosSim
from greenroute.sim.gcos.scenario import GcosScenario

PPO_KWARGS = dict(
    n_steps=96,  # per agent slot: 96 * 6 agents = 576 transitions per update
    batch_size=192,
    n_epochs=10,
    # with SB3's 3e-4, 5 epochs and ent_coef 0.01 the policy stayed near uniform after 100k
    # transitions (its argmax: one constant forward target for every agent, two seeds alike);
    # 1e-3, 10 epochs, no entropy bonus learn state-dependent targets and some migration
    learning_rate=1e-3,
    gamma=0.95,
    gae_lambda=0.95,
    ent_coef=0.0,
)


def train_maccs(
    sc: GcosScenario,
    predictor: ExecPredictor,
    *,
    migrate: bool = True,
    steps: int = 60_000,
    seed: int = 0,
    data_dir: Path | None = None,
    save_to: Path | None = None,
    local_share: float = 0.0,
    candidates: str = "estimate",
):
    """(trained PPO model, wall seconds). ``steps`` counts agent transitions."""
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    sim = GcosSim(sc, period="train", data_dir=data_dir)
    core = MaccsCore(predictor, Weights.of(sc), migrate=migrate, local_share=local_share,
                     candidates=candidates)  # fmt: skip
    venv = SharedAgentVecEnv(GcosParallelEnv(sim, core))
    t0 = time.perf_counter()
    model = PPO("MlpPolicy", venv, seed=seed, device="cpu", verbose=0,
                policy_kwargs=dict(net_arch=[64, 64]), **PPO_KWARGS)  # fmt: skip
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - t0
    if save_to is not None:
        model.save(save_to)
    return model, wall
