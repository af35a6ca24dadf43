"""DDQN baseline (seed 001 §6 [34]: Alsalem and Djemame, hierarchical federated deep RL task
scheduling, UCC 2025): double deep Q-learning, learning while it routes.

Our reading: [34]'s agents are double DQNs (van Hasselt et al. 2016): an online network picks
the next action and a target network, copied every ``target_every`` updates, values it:
``y = r + gamma Q_target(s', argmax_a Q_online(s', a))``, Huber loss on ``Q_online(s, a) - y``
over minibatches from a replay buffer. The federated hierarchy of [34] has one agent here (one
geo scheduler). State, actions and reward are shared with the other RL baselines
(``baselines/common.py``); the net is an MLP of ``hidden`` units (two layers).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.policies.baselines.common import N_STATE_FEATURES
from greenroute.policies.baselines.online_rl import GAMMA, OnlineRLPolicy, seeded_torch
from greenroute.policies.registry import register_geo_policy


def mlp(n_in: int, hidden: int, n_out: int):
    from torch import nn

    return nn.Sequential(
        nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, n_out),
    )  # fmt: skip


@register_geo_policy(
    "ddqn",
    "Seed 001 baseline [34]: double DQN (torch) over discrete routing actions, learning online.",
    help={
        "lr": "Adam learning rate",
        "gamma": "discount factor (seed 001 §6: 0.95)",
        "epsilon": "exploration share",
        "hidden": "units per hidden layer",
        "batch": "minibatch size",
        "buffer": "replay buffer size",
        "target_every": "updates between target-network copies",
        "steps_per_epoch": "gradient steps per simulated epoch",
    },
)
class DDQNPolicy(OnlineRLPolicy):
    name = "ddqn"

    def __init__(
        self,
        lr: float = 1e-3,
        gamma: float = GAMMA,
        epsilon: float = 0.1,
        hidden: int = 64,
        batch: int = 32,
        buffer: int = 5000,
        target_every: int = 24,
        steps_per_epoch: int = 4,
    ) -> None:
        super().__init__(gamma, epsilon)
        if lr <= 0 or hidden < 1 or batch < 1 or buffer < batch or target_every < 1:
            raise ConfigError(
                "ddqn needs lr > 0, hidden >= 1, 1 <= batch <= buffer, target_every >= 1"
            )
        self.lr, self.hidden, self.batch = float(lr), int(hidden), int(batch)
        self.buffer_size, self.target_every = int(buffer), int(target_every)
        self.steps_per_epoch = max(int(steps_per_epoch), 1)

    def init_agent(self) -> None:
        import torch

        def build():
            net = mlp(N_STATE_FEATURES, self.hidden, self.n_actions)
            tgt = mlp(N_STATE_FEATURES, self.hidden, self.n_actions)
            tgt.load_state_dict(net.state_dict())
            return net, tgt

        self.net, self.target = seeded_torch(self.seed, build)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.lr)
        self.buffer: deque = deque(maxlen=self.buffer_size)
        self.grad_steps = 0

    def q_values(self, s: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.net(torch.as_tensor(s, dtype=torch.float32)).numpy()

    def act(self, s: np.ndarray) -> int:
        return self.epsilon_greedy(int(np.argmax(self.q_values(s))))

    def td_target(self, r, s2):
        """Double-Q targets ``r + gamma Q_target(s', argmax_a Q_online(s', a))`` (tensors)."""
        import torch

        with torch.no_grad():
            a2 = self.net(s2).argmax(dim=1, keepdim=True)
            return r + self.gamma * self.target(s2).gather(1, a2).squeeze(1)

    def learn(self, s: np.ndarray, a: int, r: float, s2: np.ndarray) -> None:
        import torch

        self.buffer.append((s, a, r, s2))
        n = len(self.buffer)
        for _ in range(self.steps_per_epoch):
            idx = self.rng.integers(n, size=min(self.batch, n))
            b = [self.buffer[i] for i in idx]
            bs = torch.as_tensor(np.array([t[0] for t in b]), dtype=torch.float32)
            ba = torch.as_tensor([t[1] for t in b], dtype=torch.int64)
            br = torch.as_tensor([t[2] for t in b], dtype=torch.float32)
            bs2 = torch.as_tensor(np.array([t[3] for t in b]), dtype=torch.float32)
            y = self.td_target(br, bs2)
            q = self.net(bs).gather(1, ba[:, None]).squeeze(1)
            loss = torch.nn.functional.smooth_l1_loss(q, y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.grad_steps += 1
            if self.grad_steps % self.target_every == 0:
                self.target.load_state_dict(self.net.state_dict())
