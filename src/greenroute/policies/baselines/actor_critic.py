"""ActorCritic baseline (seed 001 §6 [35]: Hidayat et al., RL-driven hybrid pre/post-copy VM
migration, IEEE Access 2025): one-step advantage actor-critic, learning while it routes.

Our reading: [35] trains an actor (a softmax policy over discrete decisions) and a critic
(state value) online from each transition: the TD error ``delta = r + gamma V(s') - V(s)`` is
the advantage; the critic minimises ``delta^2`` and the actor ascends ``delta log pi(a|s)``
(plus ``entropy`` x the policy's entropy, to keep exploring). Actions are sampled from the
policy (seeded); state, actions and reward are shared with the other RL baselines.
"""

from __future__ import annotations

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.policies.baselines.common import N_STATE_FEATURES
from greenroute.policies.baselines.online_rl import GAMMA, OnlineRLPolicy, seeded_torch
from greenroute.policies.registry import register_geo_policy


def _net(n_in: int, hidden: int, n_out: int):
    from torch import nn

    return nn.Sequential(nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, n_out))


@register_geo_policy(
    "actor-critic",
    "Seed 001 baseline [35]: one-step advantage actor-critic (torch) over discrete routing "
    "actions, learning online.",
    help={
        "lr_actor": "Adam learning rate of the policy",
        "lr_critic": "Adam learning rate of the value net",
        "gamma": "discount factor (seed 001 §6: 0.95)",
        "hidden": "units of the hidden layer",
        "entropy": "entropy bonus weight",
    },
)
class ActorCriticPolicy(OnlineRLPolicy):
    name = "actor-critic"

    def __init__(
        self,
        lr_actor: float = 3e-3,
        lr_critic: float = 1e-2,
        gamma: float = GAMMA,
        hidden: int = 64,
        entropy: float = 0.01,
    ) -> None:
        super().__init__(gamma, epsilon=0.0)
        if lr_actor <= 0 or lr_critic <= 0 or hidden < 1 or entropy < 0:
            raise ConfigError(
                "actor-critic needs lr_actor, lr_critic > 0, hidden >= 1, entropy >= 0"
            )
        self.lr_actor, self.lr_critic = float(lr_actor), float(lr_critic)
        self.hidden, self.entropy = int(hidden), float(entropy)

    def init_agent(self) -> None:
        import torch

        def build():
            return _net(N_STATE_FEATURES, self.hidden, self.n_actions), _net(
                N_STATE_FEATURES, self.hidden, 1
            )

        self.actor, self.critic = seeded_torch(self.seed, build)
        self.opt_actor = torch.optim.Adam(self.actor.parameters(), lr=self.lr_actor)
        self.opt_critic = torch.optim.Adam(self.critic.parameters(), lr=self.lr_critic)

    def probs(self, s: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            logits = self.actor(torch.as_tensor(s, dtype=torch.float32))
            return torch.softmax(logits, dim=-1).numpy().astype(float)

    def act(self, s: np.ndarray) -> int:
        p = self.probs(s)
        return int(self.rng.choice(self.n_actions, p=p / p.sum()))

    def advantage(self, s: np.ndarray, r: float, s2: np.ndarray) -> float:
        """The TD error ``r + gamma V(s') - V(s)`` under the current critic."""
        import torch

        with torch.no_grad():
            v = self.critic(torch.as_tensor(s, dtype=torch.float32)).item()
            v2 = self.critic(torch.as_tensor(s2, dtype=torch.float32)).item()
        return r + self.gamma * v2 - v

    def learn(self, s: np.ndarray, a: int, r: float, s2: np.ndarray) -> None:
        import torch

        delta = self.advantage(s, r, s2)
        st = torch.as_tensor(s, dtype=torch.float32)
        v = self.critic(st).squeeze()
        target = torch.tensor(delta, dtype=torch.float32) + v.detach()  # r + gamma V(s')
        critic_loss = (target - v) ** 2
        self.opt_critic.zero_grad()
        critic_loss.backward()
        self.opt_critic.step()
        logp = torch.log_softmax(self.actor(st), dim=-1)
        ent = -(logp.exp() * logp).sum()
        actor_loss = -(delta * logp[a]) - self.entropy * ent
        self.opt_actor.zero_grad()
        actor_loss.backward()
        self.opt_actor.step()
