"""MARLIN's networks (seed 001 §5.2, §6): a SAC actor whose MLP carries a FiLM layer, and
twin critics scoring routing plans.

* Actor (§6: "128 hidden dimensions"): ``state -> 128 -> FiLM -> 128 -> (mean, log std)`` of a
  tanh-squashed Gaussian over ``O x R`` logits. The FiLM layer (Perez et al. 2018, the
  paper's [28]) scales and shifts the first hidden layer feature-wise, ``h' = (1 + gamma(z)) *
  h + beta(z)``, with ``gamma, beta`` linear in the context ``z`` = the agent's objective
  weights, the workload and the datacenter attributes (§5.2: "integrates workload data and
  datacenter attributes into a single input"; Algorithm 1 line 6: ``FiLM(a_j, w_j)``).
  ``1 + gamma`` starts the layer at the identity. Without FiLM (§6.3 ablation) the context is
  concatenated to the state instead, so both see the same information.
* Action -> plan: ``plan[o] = softmax_allowed(temperature * a[o] + prior[o])`` per origin
  (``prior``: ``local_prior`` on the origin's own datacenter, a parameter; the paper's initial
  parameters ``theta_j`` are pretrained, ours start from this prior).
* Critic (§6: "the critic was increased to 256"): twin ``Q(state, weights, plan)`` MLPs with two
  hidden layers of 256 (SAC's clipped double Q, Haarnoja et al. 2018). The critic scores the
  routing plan itself (not the raw logits), so phase 2 can score and differentiate a blend of
  plans (Algorithm 2 lines 2, 9, 13).
"""

from __future__ import annotations

import torch
from torch import nn

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # SAC's usual clamp (SB3's LOG_STD_MIN/MAX: -20/2)


class FiLM(nn.Module):
    """Feature-wise linear modulation of ``h`` by context ``z``."""

    def __init__(self, ctx_dim: int, features: int) -> None:
        super().__init__()
        self.lin = nn.Linear(ctx_dim, 2 * features)
        nn.init.zeros_(self.lin.weight)
        nn.init.zeros_(self.lin.bias)

    def forward(self, h: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        gamma, beta = self.lin(z).chunk(2, dim=-1)
        return (1.0 + gamma) * h + beta


class Actor(nn.Module):
    def __init__(self, state_dim: int, ctx_dim: int, act_dim: int, hidden: int, film: bool):
        super().__init__()
        self.film = FiLM(ctx_dim, hidden) if film else None
        in_dim = state_dim if film else state_dim + ctx_dim
        self.l1 = nn.Linear(in_dim, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.mu = nn.Linear(hidden, act_dim)
        self.log_std = nn.Linear(hidden, act_dim)

    def forward(self, s: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.film is None:
            h = torch.relu(self.l1(torch.cat([s, z], dim=-1)))
        else:
            h = torch.relu(self.film(self.l1(s), z))
        h = torch.relu(self.l2(h))
        return self.mu(h), self.log_std(h).clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(
        self, s: torch.Tensor, z: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised tanh-Gaussian draw and its log-probability (SAC appendix C)."""
        mu, log_std = self(s, z)
        std = log_std.exp()
        eps = torch.randn(mu.shape, generator=generator, dtype=mu.dtype)
        u = mu + std * eps
        a = torch.tanh(u)
        logp = (-0.5 * eps.pow(2) - log_std - 0.5 * torch.log(torch.tensor(2 * torch.pi))).sum(-1)
        logp = logp - torch.log(1.0 - a.pow(2) + 1e-6).sum(-1)
        return a, logp

    def mean_action(self, s: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self(s, z)[0])


class Critic(nn.Module):
    def __init__(self, state_dim: int, w_dim: int, plan_dim: int, hidden: int) -> None:
        super().__init__()
        d = state_dim + w_dim + plan_dim

        def mlp() -> nn.Sequential:
            return nn.Sequential(
                nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                nn.Linear(hidden, 1),
            )  # fmt: skip

        self.q1, self.q2 = mlp(), mlp()

    def forward(
        self, s: torch.Tensor, w: torch.Tensor, plan: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat([s, w, plan], dim=-1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


def to_plan(
    a: torch.Tensor, prior: torch.Tensor, mask: torch.Tensor, temperature: float
) -> torch.Tensor:
    """``[..., O*R]`` actions -> ``[..., O*R]`` routing plans (softmax over each origin's
    allowed datacenters)."""
    n_o, n_r = mask.shape
    logits = temperature * a.reshape(*a.shape[:-1], n_o, n_r) + prior
    logits = logits.masked_fill(~mask, float("-inf"))
    return torch.softmax(logits, dim=-1).reshape(a.shape)
