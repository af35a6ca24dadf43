"""MARLIN's replay buffers and HER relabelling (seed 001 §5.2, Algorithm 1 lines 9 and 15, §6).

Each agent keeps a replay buffer ``B_replay`` of recent samples (§6: 20,000) and a cross-epoch
buffer ``B_cross`` (§6: 5,000) filled once per epoch from the epoch's samples with HER
(line 15); minibatches take 30 % from the first and 70 % from the second (§6: "a 30/70
sampling split", read in the order the buffers are named).

HER (Andrychowicz et al. 2017, the paper's [29]) relabels a transition with a goal it did
achieve. MARLIN's goals are the agents' objective weights (the FiLM conditioning), so a sample
is relabelled with the weights of the objective on which its plan did best among the epoch's
candidates (the smallest ratio to the epoch's mean; the "achieved goal") mixed with the agent's
own, ``her_mix * e_achieved + (1 - her_mix) * w`` (0.5: a pure achieved goal pulled a single-
objective agent's actor toward the other objectives on marlin8), with probability
``her_ratio`` (0.8: HER's ``k = 4`` future goals per real one); the reward is recomputed from
the stored objective ratios (:func:`greenroute.policies.marlin.reward.reward`), which is why
samples keep their ratios, consolidation and SLA share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from greenroute.policies.marlin.reward import RewardConfig, reward

REPLAY_SIZE = 20_000  # §6: "20,000 samples for the current epoch"
CROSS_SIZE = 5_000  # §6: "5,000 samples for previous epochs"
CURRENT_SHARE = 0.3  # §6: "a 30/70 sampling split"

FIELDS = ("s", "z", "w", "plan", "a", "r", "s2", "z2", "done", "x", "eco", "sla", "ema")


@dataclass
class Batch:
    s: np.ndarray
    z: np.ndarray
    w: np.ndarray
    plan: np.ndarray
    a: np.ndarray
    r: np.ndarray
    s2: np.ndarray
    z2: np.ndarray
    done: np.ndarray
    x: np.ndarray
    eco: np.ndarray
    sla: np.ndarray
    ema: np.ndarray

    def __len__(self) -> int:
        return int(self.r.shape[0])

    def take(self, idx: np.ndarray) -> Batch:
        return Batch(**{k: getattr(self, k)[idx] for k in FIELDS})

    @staticmethod
    def concat(parts: list[Batch]) -> Batch:
        return Batch(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in FIELDS})


class Ring:
    """A fixed-capacity FIFO of transitions (numpy arrays allocated on the first add)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self.data: dict[str, np.ndarray] = {}
        self.n = 0
        self.pos = 0

    def __len__(self) -> int:
        return self.n

    def add(self, batch: Batch) -> None:
        if not self.data:
            for k in FIELDS:
                v = getattr(batch, k)
                self.data[k] = np.zeros((self.capacity, *v.shape[1:]), dtype=np.float32)
        for i in range(len(batch)):
            for k in FIELDS:
                self.data[k][self.pos] = getattr(batch, k)[i]
            self.pos = (self.pos + 1) % self.capacity
            self.n = min(self.n + 1, self.capacity)

    def sample(self, n: int, rng: np.random.Generator) -> Batch:
        idx = rng.integers(0, self.n, size=n)
        return Batch(**{k: self.data[k][idx] for k in FIELDS})


def her_relabel(
    batch: Batch,
    goals: np.ndarray,
    n_w: int,
    rng: np.random.Generator,
    her_ratio: float = 0.8,
    cfg: RewardConfig = RewardConfig(),
    her_mix: float = 0.5,
) -> Batch:
    """Line 15: a copy of ``batch`` (one epoch's samples) where a share ``her_ratio`` of the
    samples carry the achieved goal's weights (``goals[k]`` for objective k) and its reward.
    The FiLM context's first ``n_w`` entries are the weights and are replaced too."""
    out = batch.take(np.arange(len(batch)))
    if len(out) == 0:
        return out
    mean = out.x.mean(axis=0, keepdims=True)
    achieved = np.argmin(out.x / np.maximum(mean, 1e-12), axis=1)
    pick = rng.random(len(out)) < her_ratio
    relabelled = her_mix * goals[achieved] + (1.0 - her_mix) * out.w
    w_new = np.where(pick[:, None], relabelled, out.w)
    out.w = w_new.astype(np.float32)
    out.z = out.z.copy()
    out.z2 = out.z2.copy()
    out.z[:, :n_w] = w_new
    out.z2[:, :n_w] = w_new
    out.r = reward(out.x, w_new, out.ema, out.eco, out.sla, cfg).astype(np.float32)
    return out


class AgentBuffers:
    """``B_replay`` and ``B_cross`` of one agent with the 30/70 minibatch split."""

    def __init__(
        self,
        replay_size: int = REPLAY_SIZE,
        cross_size: int = CROSS_SIZE,
        current_share: float = CURRENT_SHARE,
    ) -> None:
        self.replay = Ring(replay_size)
        self.cross = Ring(cross_size)
        self.current_share = float(current_share)

    def sample(self, n: int, rng: np.random.Generator) -> Batch | None:
        if len(self.replay) == 0:
            return None
        if len(self.cross) == 0:
            return self.replay.sample(n, rng)
        n_cur = round(self.current_share * n)
        return Batch.concat([self.replay.sample(n_cur, rng), self.cross.sample(n - n_cur, rng)])
