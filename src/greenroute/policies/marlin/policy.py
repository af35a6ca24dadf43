"""The MARLIN geo policy (seed 001 §5): phase 1 online each epoch, phase 2 for Balanced.

Each epoch (``plan``), as Algorithm 1 and 2 do:

1. the state is the observation's features with the run's forecast (line 1-2; the paper runs
   the ``marlin-ewma`` forecaster, ``--forecast marlin-ewma``);
2. the epoch is forked (``Simulation.fork``, bound by :meth:`MarlinPolicy.bind_simulator`, which
   the engine calls after ``reset``); the local-only plan is simulated once as the reference
   of the objective ratios (``reward.py``);
3. each agent samples ``k_opt`` plans, simulates each (line 7), computes its reward (line 8) and
   stores the samples (line 9; pushed to ``B_replay`` at the next epoch, when the next state is
   known), takes ``updates`` SAC gradient steps, and proposes its exploit plan (lines 11-13);
4. Balanced: the game (Algorithm 2) blends the proposals, the consensus is simulated (line 19)
   and the capitals are updated; a single-objective variant routes its agent's proposal;
5. the epoch's samples go to ``B_cross`` with HER (line 15).

"Exploit the best plan" (line 11) is read as: the best, by the agent's simulated reward, of
the deterministic (mean) plan, the epoch's ``k_opt`` sampled plans and (``keep_incumbent``)
the agent's previous proposal re-simulated in this epoch (``exploit="best"``);
``exploit="mean"`` proposes the mean plan only. Keeping the incumbent is our addition: an
online learner that is ~100 epochs old otherwise drifts away from plans it had found good
(seen on marlin8). ``keep_local`` (on by default) adds the local-only plan, which every
epoch already simulates as the reference of the reward's ratios, to the candidates (also our
addition; its action is stored as 0, like the incumbent's). Without it, on marlin8
MARLIN-MinLatency lost to local-only on TTFT on 5 of 5 seeds: the online actor never proposes
an all-home plan, and with every origin's own datacenter uncongested nearly every epoch is best
served at home; a stronger home prior alone (``ttft_home_prior`` 2 or 4) still lost on 4 of 5
(``docs/seed001.md``, "MinLatency after the fluid fix").

The action -> plan map is ``softmax(temperature x a + prior)`` per origin (``nets.to_plan``).
The paper leaves line 6's "FiLM(a_j, w_j)" (the plan modulated by the agent's weights) open; we
make the prior that modulation: the home datacenter's logit is ``local_prior + ttft_home_prior
x w_TTFT`` (:meth:`MarlinPolicy.home_logit`), so an agent that weighs latency starts nearer
the local plan. With the defaults (2, 0) a zero action keeps e^2 / (e^2 + 7) = 51 % at home
on marlin8. ``warmup_epochs``: epochs routed local-only
while the agents already explore and learn (SB3's ``learning_starts``); ``pretrain_epochs``:
Algorithm 1 repeated on epoch 0's fork before the run's first plan (the paper's pretrained
initial parameters ``theta_j``). Deterministic for a seed: every agent's torch networks and
noise come from its own seeded generator, minibatches from a numpy ``Generator``.

The archive of visited points: every simulated plan's objective ratios to local-only, per
epoch. :meth:`MarlinPolicy.front_ratios` (also in ``summary()['front_ratios']``) aggregates it
per candidate slot across epochs (agent j's k-th sample, its proposal, the consensus) and keeps
the non-dominated points; :func:`greenroute.policies.marlin.front.marlin_front` turns them
into run-level metrics with a local-only run's figures (§6.1 hypervolume).
"""

from __future__ import annotations

import time

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.core.types import N_CLASSES, ClusterInfo, Observation, Plan
from greenroute.policies.marlin import game as G
from greenroute.policies.marlin.reward import (
    OBJECTIVES,
    RewardConfig,
    consolidation,
    figures_vector,
    film_context,
    overload,
    ratios,
    reward,
    sla_share,
    state_features,
)

VARIANTS: dict[str, tuple[int, ...]] = {
    "balanced": (0, 1, 2, 3),
    "min-latency": (0,),
    "min-carbon": (1,),
    "min-water": (2,),
    "min-cost": (3,),
}
K_OPT = 8  # not given in §6 (K_opt of Algorithms 1 and 2; 8 samples per agent and epoch)


class MarlinPolicy:
    """See the module docstring; options are documented at registration (``marlin``)."""

    name = "marlin"
    options: dict
    needs_simulator = True  # plans only inside a Simulation (bind_simulator): it forks epochs

    def __init__(
        self,
        variant: str = "balanced",
        k_opt: int = K_OPT,
        updates: int = 8,
        batch_size: int = 64,
        actor_hidden: int = 128,
        critic_hidden: int = 256,
        film: bool = True,
        her: bool = True,
        blend: bool = True,
        sgd: bool = True,
        veto: bool = True,
        capital: bool = True,
        exploit: str = "best",
        warmup_epochs: int = 0,
        pretrain_epochs: int = 8,
        local_prior: float = 2.0,
        ttft_home_prior: float = 0.0,
        temperature: float = 4.0,
        her_ratio: float = 0.8,
        her_mix: float = 0.5,
        keep_incumbent: bool = True,
        keep_local: bool = True,
        sla_coef: float = 5.0,
        eco_coef: float = 0.05,
        ema_coef: float = 0.5,
        u_max: float = 0.9,
        reward_scale: float = 10.0,
        alpha0: float = 0.01,
        delta_thresh: float = 0.05,
        threads: int = 1,
    ) -> None:
        if variant not in VARIANTS:
            raise ConfigError(
                f"unknown MARLIN variant {variant!r}; valid choices: {', '.join(VARIANTS)}"
            )
        if exploit not in ("best", "mean"):
            raise ConfigError(f"exploit must be 'best' or 'mean', got {exploit!r}")
        for key, v in (("k_opt", k_opt), ("updates", updates + 1), ("batch_size", batch_size),
                       ("actor_hidden", actor_hidden), ("critic_hidden", critic_hidden),
                       ("threads", threads), ("warmup_epochs", warmup_epochs + 1),
                       ("pretrain_epochs", pretrain_epochs + 1)):  # fmt: skip
            if v < 1:
                raise ConfigError(f"MARLIN option {key} is out of range ({v})")
        self.variant = variant
        self.agents_idx = VARIANTS[variant]
        self.k_opt = int(k_opt)
        self.updates = int(updates)
        self.exploit_mode = exploit
        self.warmup_epochs = int(warmup_epochs)
        self.pretrain_epochs = int(pretrain_epochs)
        self.local_prior = float(local_prior)
        self.ttft_home_prior = float(ttft_home_prior)
        self.keep_local = bool(keep_local)
        self.her = bool(her)
        self.her_ratio = float(her_ratio)
        self.her_mix = float(her_mix)
        self.keep_incumbent = bool(keep_incumbent)
        self.threads = int(threads)
        self.rcfg = RewardConfig(
            ema_coef=ema_coef, eco_coef=eco_coef, sla_coef=sla_coef, u_max=u_max,
            scale=reward_scale,
        )  # fmt: skip
        self.gcfg = G.GameConfig(
            blend=blend, sgd=sgd, veto=veto, capital=capital, delta_thresh=delta_thresh
        )
        self.sac_options = {
            "actor_hidden": actor_hidden, "critic_hidden": critic_hidden,
            "batch_size": batch_size, "temperature": temperature, "film": film,
            "alpha0": alpha0,
        }  # fmt: skip
        self.sim = None

    # ------------------------------------------------------------------ protocol
    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        self.cluster = cluster
        self.seed = int(seed)
        self.rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0x3A2]))
        self.agents: list = []  # built at the first plan (the state size needs an observation)
        self.capital = np.full(len(self.agents_idx), self.gcfg.capital_init)
        self.ema = np.ones((len(self.agents_idx), len(OBJECTIVES)))
        self.pending: list = [None] * len(self.agents_idx)
        self.incumbent: list = [None] * len(self.agents_idx)
        self.archive: list[tuple[int, str, np.ndarray]] = []
        self.counts = {"vetoes": 0, "forks": 0}
        self.learn_s = self.fork_s = 0.0
        # per epoch: the proposals' ratios to local-only, and (Balanced) the game's outcome
        self.epoch_log: list[dict] = []

    def bind_simulator(self, sim) -> None:
        """The engine calls this after ``reset``: MARLIN simulates candidate plans on forks."""
        self.sim = sim

    def plan(self, obs: Observation) -> Plan:
        if self.sim is None:
            raise ConfigError(
                "MARLIN simulates candidate plans (Algorithm 1 line 7): run it in the "
                "simulator (it calls bind_simulator), not on bare observations"
            )
        if not self.agents:
            self._build(obs)
            for _ in range(self.pretrain_epochs):
                self._phase1(obs, pretrain=True)
        proposals, prop_x, fork, ref = self._phase1(obs)
        agents = [OBJECTIVES[j] for j in self.agents_idx]
        self.epoch_log.append({"epoch": obs.epoch, "agents": agents, "prop_x": prop_x.tolist()})
        if obs.epoch < self.warmup_epochs:
            route = self._local(obs)
            rationale = "MARLIN warm-up: local-only while the agents learn"
        elif len(self.agents) == 1:
            route = proposals[0]
            rationale = f"MARLIN-{self.variant}: agent {OBJECTIVES[self.agents_idx[0]]}'s plan"
        else:
            route, rationale = self._phase2(obs, proposals, prop_x, fork, ref)
        return self._plan(obs, route, rationale)

    # ------------------------------------------------------------------ phase 1
    def _build(self, obs: Observation) -> None:
        import torch

        from greenroute.policies.marlin.buffers import AgentBuffers
        from greenroute.policies.marlin.sac import SACAgent, SACConfig

        torch.set_num_threads(self.threads)
        n_o, n_r = obs.n_origins, obs.n_regions
        mask = obs.allowed[0].copy()
        mask[~mask.any(axis=1)] = True  # an origin with no allowed DC: the validator decides
        self.mask = mask
        home = np.zeros((n_o, n_r), dtype=np.float32)
        for o, name in enumerate(obs.origins):
            if name in obs.regions:
                home[o, obs.regions.index(name)] = 1.0
        self.goals = np.eye(len(OBJECTIVES), dtype=np.float32)
        s = state_features(obs)
        z = film_context(obs, self.goals[0])
        for i, j in enumerate(self.agents_idx):
            prior = home * self.home_logit(self.goals[j])
            self.agents.append(
                SACAgent(s.size, z.size, mask, prior, self.goals[j], SACConfig(**self.sac_options),
                         self.seed * 1009 + 17 * i + 1, AgentBuffers())
            )  # fmt: skip

    def home_logit(self, weights: np.ndarray) -> float:
        """The logit offset of each origin's own datacenter in the agent's action -> plan map
        (line 6's weight-conditioned modulation): ``local_prior + ttft_home_prior x w_TTFT``."""
        return self.local_prior + self.ttft_home_prior * float(weights[OBJECTIVES.index("ttft")])

    def _local(self, obs: Observation) -> np.ndarray:
        route = np.zeros((obs.n_origins, obs.n_regions))
        for o, name in enumerate(obs.origins):
            if name in obs.regions and self.mask[o, obs.regions.index(name)]:
                route[o, obs.regions.index(name)] = 1.0
            else:
                route[o] = self.mask[o] / self.mask[o].sum()
        return route

    def _plan(self, obs: Observation, route_or: np.ndarray, rationale: str = "") -> Plan:
        route = np.repeat(np.asarray(route_or, dtype=float)[None], N_CLASSES, axis=0)
        route = np.where(obs.allowed, route, 0.0)
        sums = route.sum(axis=-1, keepdims=True)
        fallback = obs.allowed / np.maximum(obs.allowed.sum(axis=-1, keepdims=True), 1)
        route = np.where(sums > 1e-12, route / np.where(sums > 1e-12, sums, 1.0), fallback)
        return Plan(route=route, rationale=rationale)

    def _simulate(self, fork, obs: Observation, route_or: np.ndarray):
        t = time.perf_counter()
        fig = fork.evaluate(self._plan(obs, route_or), obs)
        self.fork_s += time.perf_counter() - t
        self.counts["forks"] += 1
        return fig

    def _phase1(self, obs: Observation, pretrain: bool = False):
        """Algorithm 1 for every agent; returns proposals ``[J, O, R]``, their ratio vectors
        ``[J, 4]``, the fork and the local-only reference vector."""
        n_o, n_r = obs.n_origins, obs.n_regions
        s = state_features(obs)
        fork = self.sim.fork()
        local_fig = self._simulate(fork, obs, self._local(obs))
        ref = figures_vector(local_fig)
        demand_o = np.maximum(obs.demand_rps[0], 0.0).sum(axis=0)
        last = obs.epoch >= self.cluster.n_epochs - 1
        proposals = np.zeros((len(self.agents), n_o, n_r))
        prop_x = np.zeros((len(self.agents), len(OBJECTIVES)))
        for i, agent in enumerate(self.agents):
            w = agent.weights
            z = film_context(obs, w)
            if not pretrain:
                self._push_pending(i, s, z)
            acts, plans = agent.sample(s, z, self.k_opt)  # line 5
            a_m, p_m = agent.exploit(s, z)  # line 11
            slots = [f"k{k}" for k in range(len(plans))]
            if self.keep_incumbent and self.incumbent[i] is not None:
                acts = np.vstack([acts, np.zeros_like(a_m)[None]])
                plans = np.vstack([plans, self.incumbent[i][None]])
                slots.append("kept")
            if self.keep_local:  # the local plan; its action is stored as 0, as the incumbent's
                acts = np.vstack([acts, np.zeros_like(a_m)[None]])
                plans = np.vstack([plans, self._local(obs).reshape(1, -1)])
                slots.append("local")
            slots.append("mean")
            acts = np.vstack([acts, a_m[None]])
            plans = np.vstack([plans, p_m[None]])
            xs, ecos, slas = [], [], []
            for slot, p in zip(slots, plans, strict=True):  # lines 7 and 13
                # the local plan was simulated above as the reference (forks replay exactly)
                fig = (
                    local_fig if slot == "local" else self._simulate(fork, obs, p.reshape(n_o, n_r))
                )
                xs.append(
                    ratios(figures_vector(fig), ref, self.rcfg.ratio_floor, self.rcfg.ratio_ceil)
                )
                ecos.append(consolidation(p.reshape(n_o, n_r), demand_o))
                slas.append(sla_share(fig) + overload(p.reshape(n_o, n_r), obs, self.rcfg.u_max))
            xs, ecos, slas = np.array(xs), np.array(ecos), np.array(slas)
            ema = np.repeat(self.ema[i][None], len(xs), axis=0)
            r = reward(xs, np.repeat(w[None], len(xs), axis=0), ema, ecos, slas, self.rcfg)
            samples = _batch(s, z, w, plans, acts, r, xs, ecos, slas, ema)
            if pretrain or last:  # no next epoch: the state is its own successor / terminal
                samples.s2, samples.z2 = samples.s.copy(), samples.z.copy()
                samples.done[:] = 1.0 if last and not pretrain else 0.0
                self._store(i, samples)
            else:
                self.pending[i] = samples  # line 9, completed with the next state
            t = time.perf_counter()
            agent.update(self.rng, self.updates)
            self.learn_s += time.perf_counter() - t
            best = int(np.argmax(r)) if self.exploit_mode == "best" else len(plans) - 1
            proposals[i] = plans[best].reshape(n_o, n_r)
            if not pretrain:
                self.incumbent[i] = plans[best]
            prop_x[i] = xs[best]
            if not pretrain:
                for slot, x in zip(slots, xs, strict=True):
                    self.archive.append((obs.epoch, f"{OBJECTIVES[self.agents_idx[i]]}:{slot}", x))
                a = self.rcfg.ema_alpha
                self.ema[i] = (1 - a) * self.ema[i] + a * xs[best]
        return proposals, prop_x, fork, ref

    def _ratios(self, fig, ref: np.ndarray) -> np.ndarray:
        return ratios(figures_vector(fig), ref, self.rcfg.ratio_floor, self.rcfg.ratio_ceil)

    def _push_pending(self, i: int, s2: np.ndarray, z2: np.ndarray) -> None:
        b = self.pending[i]
        if b is None:
            return
        b.s2 = np.repeat(s2[None], len(b), axis=0)
        b.z2 = np.repeat(z2[None], len(b), axis=0)
        self.pending[i] = None
        self._store(i, b)

    def _store(self, i: int, b) -> None:
        """Line 9 (``B_replay``) and line 15 (``B_cross`` with HER, or as is without)."""
        from greenroute.policies.marlin.buffers import her_relabel

        buf = self.agents[i].buffers
        buf.replay.add(b)
        if self.her:
            buf.cross.add(her_relabel(b, self.goals, len(OBJECTIVES), self.rng, self.her_ratio,
                                      self.rcfg, self.her_mix))  # fmt: skip
        else:
            buf.cross.add(b)

    # ------------------------------------------------------------------ phase 2
    def _phase2(self, obs, proposals, prop_x, fork, ref) -> tuple[np.ndarray, str]:
        import torch

        s = state_features(obs)
        flat = torch.as_tensor(proposals.reshape(len(proposals), -1), dtype=torch.float32)

        # Utilities in units of a plan as good as local-only: the critics learn the centred
        # reward, whose uncentred constant is worth Q0 = scale / (1 - gamma) (reward.py), so
        # Q_j = (critic + Q0) / Q0 (1 = local-only's value). The unit fixes the scale that
        # §6's SGD lr 0.05 acts on; with raw critic values (hundreds) one step already threw
        # omega onto a simplex vertex (the TTFT agent's plan, whose Q varies most) on marlin8.
        q0 = self.rcfg.scale / (1.0 - self.agents[0].cfg.gamma)

        def q_of(j: int, plan: np.ndarray) -> float:
            with torch.no_grad():
                p = torch.as_tensor(np.asarray(plan, dtype=np.float32).reshape(1, -1))
                return (float(self.agents[j].q_value(s, p)[0]) + q0) / q0

        def grad(omega: np.ndarray) -> np.ndarray:
            om = torch.as_tensor(omega, dtype=torch.float32).requires_grad_(True)
            mixed = (om[:, None] * flat).sum(dim=0, keepdim=True)
            q_tot = sum(a.q_value(s, mixed)[0] for a in self.agents) / len(self.agents)
            (g,) = torch.autograd.grad(q_tot / q0, om)
            return g.numpy().astype(float)

        utilities = [q_of(j, proposals[j]) for j in range(len(proposals))]
        out = G.play(proposals, utilities, self.capital, q_of, grad, self.gcfg)
        self.counts["vetoes"] += len(out.vetoes)
        fig = self._simulate(fork, obs, out.plan)  # line 19
        x_bar = self._ratios(fig, ref)
        self.archive.append((obs.epoch, "consensus", x_bar))
        if self.gcfg.capital:
            # agent j's objective on every proposal and on the consensus (lines 20-24)
            own = [self.agents_idx[j] for j in range(len(proposals))]
            pm = prop_x[:, own].T  # pm[j, i]: agent j's objective on proposal i
            self.capital = G.update_capital(self.capital, pm, x_bar[own], self.gcfg)
        self.epoch_log[-1].update(x_bar=x_bar.tolist(), omega=out.omega.tolist(),
                                  vetoes=[[int(j), float(v)] for j, v in out.vetoes],
                                  capital=self.capital.tolist())  # fmt: skip
        why = f"MARLIN-balanced: omega={np.round(out.omega, 3).tolist()}"
        if out.vetoes:
            why += f", vetoes={[(OBJECTIVES[self.agents_idx[j]], v) for j, v in out.vetoes]}"
        return out.plan, why

    # ------------------------------------------------------------------ reporting
    def front_ratios(self) -> tuple[list[str], np.ndarray]:
        """Non-dominated archive points (module docstring): labels and ``[n, 4]`` mean ratios
        to local-only (TTFT, carbon, water, cost) per candidate slot across epochs."""
        if not self.archive:
            return [], np.zeros((0, len(OBJECTIVES)))
        slots: dict[str, list[np.ndarray]] = {}
        for _, label, x in self.archive:
            slots.setdefault(label, []).append(x)
        labels = sorted(slots)
        pts = np.array([np.mean(slots[k], axis=0) for k in labels])
        keep = non_dominated(pts)
        return [labels[i] for i in np.flatnonzero(keep)], pts[keep]

    def summary(self) -> dict:
        labels, pts = self.front_ratios() if hasattr(self, "archive") else ([], None)
        out = {
            "variant": self.variant,
            "forks": self.counts.get("forks", 0) if hasattr(self, "counts") else 0,
            "vetoes": self.counts.get("vetoes", 0) if hasattr(self, "counts") else 0,
            "fork_s": getattr(self, "fork_s", 0.0),
            "learn_s": getattr(self, "learn_s", 0.0),
            "capital": [float(c) for c in getattr(self, "capital", [])],
            "front_labels": labels,
            "front_ratios": [] if pts is None else pts.tolist(),
        }
        return out


def non_dominated(points: np.ndarray) -> np.ndarray:
    """Boolean mask of the points no other point dominates (all objectives minimised)."""
    p = np.asarray(points, dtype=float)
    keep = np.ones(len(p), dtype=bool)
    for i in range(len(p)):
        dom = np.all(p <= p[i], axis=1) & np.any(p < p[i], axis=1)
        keep[i] = not dom.any()
    return keep


def _batch(s, z, w, plans, acts, r, xs, ecos, slas, ema):
    from greenroute.policies.marlin.buffers import Batch

    n = len(plans)

    def rep(v):
        return np.repeat(np.asarray(v, dtype=np.float32)[None], n, axis=0)

    return Batch(
        s=rep(s), z=rep(z), w=rep(w), plan=plans.astype(np.float32), a=acts.astype(np.float32),
        r=r.astype(np.float32), s2=rep(s), z2=rep(z), done=np.zeros(n, dtype=np.float32),
        x=xs.astype(np.float32), eco=ecos.astype(np.float32), sla=slas.astype(np.float32),
        ema=ema.astype(np.float32),
    )  # fmt: skip
