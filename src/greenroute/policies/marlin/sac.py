"""One MARLIN agent: soft actor-critic in plain torch (seed 001 §5.2, §6).

Why not stable-baselines3's SAC: MARLIN's agent is trained on counterfactual epoch samples
(K_opt plans per epoch simulated by the fork, Algorithm 1 lines 4-10), not by stepping a
Gymnasium env; it needs two buffers with a 30/70 minibatch split and HER relabelling of
*objective weights* (not of a ``desired_goal`` key of a dict observation, which is what SB3's
``HerReplayBuffer`` relabels), an actor with a FiLM layer conditioned on a separate context,
and critics that score routing plans so that phase 2 can differentiate a blend of proposals.
Each of these replaces an SB3 component (env loop, buffer, policy, critic input), so the
update (Haarnoja et al. 2018: clipped double Q, reparameterised actor loss, learned
temperature with target entropy ``-dim(A)``, Polyak targets) is written here in ~60 lines.

§6 hyper-parameters: actor lr 3e-4, critic lr 1e-3, gamma 0.95, tau 0.005. Not given: the
temperature's learning rate (3e-4, SB3's default of using the actor's) and initial value
(``alpha0``), batch size (``batch_size``) and gradient steps per epoch (``updates``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from greenroute.policies.marlin.buffers import AgentBuffers, Batch
from greenroute.policies.marlin.nets import Actor, Critic, to_plan

LR_ACTOR = 3e-4  # §6
LR_CRITIC = 1e-3  # §6
GAMMA = 0.95  # §6
TAU = 0.005  # §6
ACTOR_HIDDEN = 128  # §6
CRITIC_HIDDEN = 256  # §6


@dataclass(frozen=True)
class SACConfig:
    actor_hidden: int = ACTOR_HIDDEN
    critic_hidden: int = CRITIC_HIDDEN
    lr_actor: float = LR_ACTOR
    lr_critic: float = LR_CRITIC
    lr_alpha: float = LR_ACTOR
    gamma: float = GAMMA
    tau: float = TAU
    alpha0: float = 0.1
    batch_size: int = 128
    temperature: float = 4.0
    film: bool = True


class SACAgent:
    """Actor, twin critics, their targets and the entropy temperature of one objective."""

    def __init__(
        self,
        state_dim: int,
        ctx_dim: int,
        mask: np.ndarray,
        prior: np.ndarray,
        weights: np.ndarray,
        cfg: SACConfig,
        seed: int,
        buffers: AgentBuffers,
    ) -> None:
        self.cfg = cfg
        self.mask = torch.as_tensor(np.asarray(mask, dtype=bool))
        self.prior = torch.as_tensor(np.asarray(prior, dtype=np.float32))
        self.weights = np.asarray(weights, dtype=np.float32)
        act_dim = int(self.mask.numel())
        self.act_dim = act_dim
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.actor = Actor(state_dim, ctx_dim, act_dim, cfg.actor_hidden, cfg.film)
            self.critic = Critic(state_dim, len(self.weights), act_dim, cfg.critic_hidden)
        self.critic_t = copy.deepcopy(self.critic)
        for p in self.critic_t.parameters():
            p.requires_grad_(False)
        self.log_alpha = torch.tensor(np.log(cfg.alpha0), dtype=torch.float32, requires_grad=True)
        self.opt_a = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr_actor)
        self.opt_c = torch.optim.Adam(self.critic.parameters(), lr=cfg.lr_critic)
        self.opt_t = torch.optim.Adam([self.log_alpha], lr=cfg.lr_alpha)
        self.target_entropy = -float(act_dim)
        self.gen = torch.Generator().manual_seed(seed + 1)
        self.buffers = buffers
        self.updates_done = 0

    # ------------------------------------------------------------------ acting
    def plan_of(self, a: torch.Tensor) -> torch.Tensor:
        return to_plan(a, self.prior, self.mask, self.cfg.temperature)

    @torch.no_grad()
    def sample(self, s: np.ndarray, z: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Algorithm 1 line 5: ``k`` actions ``a ~ pi(.|s)`` and their plans (``[k, O*R]``)."""
        st = torch.as_tensor(s).expand(k, -1)
        zt = torch.as_tensor(z).expand(k, -1)
        a, _ = self.actor.sample(st, zt, self.gen)
        return a.numpy(), self.plan_of(a).numpy()

    @torch.no_grad()
    def exploit(self, s: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Algorithm 1 line 11: the deterministic (mean) action and its plan."""
        a = self.actor.mean_action(torch.as_tensor(s)[None], torch.as_tensor(z)[None])
        return a[0].numpy(), self.plan_of(a)[0].numpy()

    def q_value(self, s: np.ndarray, plan: torch.Tensor) -> torch.Tensor:
        """``Q_j(s, plan)`` under the agent's own weights (min of the twin critics), for
        phase 2; ``plan`` may require grad."""
        st = torch.as_tensor(s)[None].expand(plan.shape[0], -1)
        wt = torch.as_tensor(self.weights)[None].expand(plan.shape[0], -1)
        q1, q2 = self.critic(st, wt, plan)
        return torch.minimum(q1, q2)

    # ------------------------------------------------------------------ learning
    def update(self, rng: np.random.Generator, steps: int) -> dict[str, float]:
        """``steps`` SAC gradient steps on minibatches of the agent's buffers."""
        out: dict[str, float] = {}
        for _ in range(int(steps)):
            b = self.buffers.sample(self.cfg.batch_size, rng)
            if b is None:
                break
            out = self._step(b)
        return out

    def _step(self, b: Batch) -> dict[str, float]:
        cfg = self.cfg
        t = {k: torch.as_tensor(getattr(b, k)) for k in ("s", "z", "w", "plan", "r", "s2", "z2")}
        done = torch.as_tensor(b.done)
        alpha = self.log_alpha.exp().detach()
        with torch.no_grad():
            a2, logp2 = self.actor.sample(t["s2"], t["z2"], self.gen)
            q1t, q2t = self.critic_t(t["s2"], t["w"], self.plan_of(a2))
            y = t["r"] + cfg.gamma * (1.0 - done) * (torch.minimum(q1t, q2t) - alpha * logp2)
        q1, q2 = self.critic(t["s"], t["w"], t["plan"])
        loss_c = ((q1 - y) ** 2).mean() + ((q2 - y) ** 2).mean()
        self.opt_c.zero_grad()
        loss_c.backward()
        self.opt_c.step()
        a, logp = self.actor.sample(t["s"], t["z"], self.gen)
        q1p, q2p = self.critic(t["s"], t["w"], self.plan_of(a))
        loss_a = (alpha * logp - torch.minimum(q1p, q2p)).mean()
        self.opt_a.zero_grad()
        loss_a.backward()
        self.opt_a.step()
        loss_t = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self.opt_t.zero_grad()
        loss_t.backward()
        self.opt_t.step()
        with torch.no_grad():
            for p, pt in zip(self.critic.parameters(), self.critic_t.parameters(), strict=True):
                pt.mul_(1.0 - cfg.tau).add_(cfg.tau * p)
        self.updates_done += 1
        return {"loss_critic": loss_c.item(), "loss_actor": loss_a.item(), "alpha": alpha.item()}
