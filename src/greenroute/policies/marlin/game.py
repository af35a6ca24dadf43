"""MARLIN phase 2: competitive proposals and consensus (seed 001 §5.3, Algorithm 2, eq. 12).

Pure numpy: a plan is an array whose last axis is a routing distribution (``[O, R]``: each
origin's shares over the datacenters); the agents' utility functions ``Q_j`` enter as numbers
(``q_j``) or as callables, and the gradient of the aggregate Q with respect to the critic
weights ``omega`` as a callable (``policies/marlin/policy.py`` passes torch autograd through the
critics), so every step here can be checked by hand (tests/test_marlin_game.py).

Readings where Algorithm 2 leaves a choice open (each is a parameter of :class:`GameConfig`):

* utilities as blend weights (line 5): ``q_j / q_tot`` is a convex weight only when every
  ``q_j > 0``; utilities are clipped at ``utility_floor`` (> 0) before blending.
* line 5 vs line 11: line 5 blends by utility, lines 6-11 rebuild the plan from capital-
  initialised critic weights refined by gradient ascent on ``Q_tot``. Taken as written: with
  the SGD refinement on (``sgd=True``) the line-11 plan is the consensus candidate; with it off
  the line-5 utility blend is. Ablating the blend (``blend=False``, §6.3 "without the blending
  process") makes the consensus the proposal of the agent with the most capital (no mixing).
* line 9's step: §6 gives "a learning rate of 0.05 with 5 steps" (``sgd_lr``, ``sgd_steps``);
  line 9 writes ``1/K_opt``. We use §6's numbers.
* "Project onto feasible set" (line 11): after every step ``omega`` is projected onto the
  probability simplex (Euclidean projection, Duchi et al. 2008), so ``a~`` is a convex mix of
  proposals; each origin's row of ``a~`` is then projected onto the simplex too (a no-op for a
  convex mix of valid plans; it makes any plan a valid routing).
* line 7's ``Q_tot = sum_j Q_j / I``: ``I`` read as the number of agents ``J`` (a mean).
* veto (lines 12-17): ``C_thresh = 150`` and ``Veto_max = 0.5`` from §6; the utility-loss
  threshold ``delta_thresh`` is not given: 0.05 (5 %, a parameter). Agents veto in index order,
  each pulling the current consensus (line 16 as written, sequentially).
* capital (lines 20-23): ``metric`` of agent ``j`` is its own objective (lower is better)
  evaluated on each proposal and on the consensus. ``Perf_j`` (line 21) divides by the gap
  between agent j's proposal and the best proposal, zero when j's own plan is the best; the
  "bounded EMA" of line 23 is read as: ``Perf_j`` and ``Bonus_j`` clipped to ``[0, 1]``
  (``Perf`` = 1 when the denominator is below ``eps``), then
  ``C_j <- eta C_j + (1 - eta) capital_scale (Perf_j + beta Bonus_j)``. ``capital_scale``
  puts the capital on the scale of §6's threshold (150): the update's fixed point is
  ``capital_scale (Perf + beta Bonus)``, between 0 and ``capital_scale (1 + beta)``.
  ``eta`` (0.9), ``beta`` (0.5), ``capital_scale`` (120) and the initial capital (100) are
  not given in the paper (engineering choices: an agent must earn capital before it vetoes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

# §6: "the required threshold was 150 capital, with a 0.5 pull towards the agent's own plan"
C_THRESH = 150.0
VETO_MAX = 0.5
# §6: "For the SGD step, we used a learning rate of 0.05 with 5 steps"
SGD_LR = 0.05
SGD_STEPS = 5


@dataclass(frozen=True)
class GameConfig:
    """Parameters of Algorithm 2 (module docstring: which come from the paper)."""

    c_thresh: float = C_THRESH
    veto_max: float = VETO_MAX
    delta_thresh: float = 0.05
    sgd_lr: float = SGD_LR
    sgd_steps: int = SGD_STEPS
    eta: float = 0.9
    beta: float = 0.5
    capital_scale: float = 120.0
    capital_init: float = 100.0
    utility_floor: float = 1e-6
    eps: float = 1e-12
    # ablation switches (§6.3)
    blend: bool = True
    sgd: bool = True
    veto: bool = True
    capital: bool = True


@dataclass
class GameOutcome:
    """What one round of the game decided (for logs and tests)."""

    plan: np.ndarray
    blend_weights: np.ndarray  # q_j / q_tot (line 5)
    omega: np.ndarray  # critic weights after the SGD steps (line 11)
    vetoes: list[tuple[int, float]] = field(default_factory=list)  # (agent, strength)


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row (last axis) of ``v`` onto the probability simplex
    (Duchi, Shalev-Shwartz, Singer, Chandra 2008, Fig. 1)."""
    v = np.asarray(v, dtype=float)
    shape = v.shape
    x = v.reshape(-1, shape[-1])
    n = x.shape[1]
    u = -np.sort(-x, axis=1)
    css = np.cumsum(u, axis=1) - 1.0
    k = np.arange(1, n + 1)
    cond = u - css / k > 0
    rho = n - 1 - np.argmax(cond[:, ::-1], axis=1)  # last index where cond holds
    theta = css[np.arange(x.shape[0]), rho] / (rho + 1)
    return np.maximum(x - theta[:, None], 0.0).reshape(shape)


def utility_blend(
    plans: np.ndarray, utilities: np.ndarray, floor: float = 1e-6
) -> tuple[np.ndarray, np.ndarray]:
    """Lines 1-5: ``a~ = sum_j (q_j / q_tot) a_j*`` with ``q_j`` clipped at ``floor``.
    ``plans`` is ``[J, ...]``; returns ``(a~, q / q_tot)``."""
    q = np.maximum(np.asarray(utilities, dtype=float), floor)
    w = q / q.sum()
    return np.tensordot(w, plans, axes=1), w


def capital_weights(capital: np.ndarray) -> np.ndarray:
    """Line 6: ``omega_j,1 = C_j / sum_j C_j`` (uniform when no agent has capital)."""
    c = np.maximum(np.asarray(capital, dtype=float), 0.0)
    s = c.sum()
    return c / s if s > 0 else np.full(c.shape, 1.0 / c.size)


def refine_weights(
    omega: np.ndarray,
    grad_q_tot: Callable[[np.ndarray], np.ndarray],
    lr: float = SGD_LR,
    steps: int = SGD_STEPS,
) -> np.ndarray:
    """Lines 8-10: ``steps`` gradient-ascent steps ``omega <- P(omega + lr grad Q_tot(omega))``
    with ``P`` the simplex projection (line 11, module docstring)."""
    w = np.asarray(omega, dtype=float)
    for _ in range(int(steps)):
        w = project_simplex(w + lr * np.asarray(grad_q_tot(w), dtype=float))
    return w


def mix(plans: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """Line 11: ``a~ = sum_j omega_j a_j*`` with each origin's row projected onto the simplex."""
    return project_simplex(np.tensordot(np.asarray(omega, dtype=float), plans, axes=1))


def utility_loss(q_own: float, q_consensus: float, eps: float = 1e-12) -> float:
    """Line 13: ``delta_j = |Q_j(a_j*) - Q_j(a~)| / |Q_j(a_j*)|``."""
    return abs(q_own - q_consensus) / max(abs(q_own), eps)


def apply_vetoes(
    consensus: np.ndarray,
    plans: np.ndarray,
    capital: np.ndarray,
    utility_of: Callable[[int, np.ndarray], float],
    cfg: GameConfig = GameConfig(),
) -> tuple[np.ndarray, list[tuple[int, float]]]:
    """Lines 12-18: each agent with ``C_j >= C_thresh`` whose utility loss ``delta_j`` exceeds
    ``delta_thresh`` pulls the consensus toward its proposal by
    ``Veto_j = min(Veto_max, delta_j C_j)``. ``utility_of(j, plan)`` is ``Q_j(plan)``."""
    a = np.asarray(consensus, dtype=float)
    vetoes: list[tuple[int, float]] = []
    for j in range(len(plans)):
        if capital[j] < cfg.c_thresh:
            continue
        delta = utility_loss(utility_of(j, plans[j]), utility_of(j, a), cfg.eps)
        if delta > cfg.delta_thresh:
            strength = min(cfg.veto_max, delta * float(capital[j]))
            a = (1.0 - strength) * a + strength * plans[j]
            vetoes.append((j, strength))
    return a, vetoes


def performance_scores(
    own_metric: np.ndarray, best_metric: np.ndarray, consensus_metric: np.ndarray, eps: float
) -> np.ndarray:
    """Line 21, bounded: ``Perf_j = |min - metric~| / |min - metric_j|`` clipped to [0, 1]
    (1 where the denominator is below ``eps``: j's own proposal is the best one)."""
    num = np.abs(best_metric - consensus_metric)
    den = np.abs(best_metric - own_metric)
    with np.errstate(divide="ignore", invalid="ignore"):
        perf = np.where(den > eps, num / np.where(den > eps, den, 1.0), 1.0)
    return np.clip(perf, 0.0, 1.0)


def bonus_scores(own_metric: np.ndarray, consensus_metric: np.ndarray, eps: float) -> np.ndarray:
    """Line 22, bounded: ``Bonus_j = 1 - |metric_j - metric~| / |metric_j|`` clipped to
    [0, 1]."""
    rel = np.abs(own_metric - consensus_metric) / np.maximum(np.abs(own_metric), eps)
    return np.clip(1.0 - rel, 0.0, 1.0)


def update_capital(
    capital: np.ndarray,
    proposal_metrics: np.ndarray,
    consensus_metrics: np.ndarray,
    cfg: GameConfig = GameConfig(),
) -> np.ndarray:
    """Lines 20-24. ``proposal_metrics[j, i]`` is agent j's objective (lower is better) on
    agent i's proposal; ``consensus_metrics[j]`` on the consensus. Returns the new capital
    ``eta C + (1 - eta) capital_scale (Perf + beta Bonus)`` (module docstring)."""
    pm = np.asarray(proposal_metrics, dtype=float)
    own = np.diag(pm)
    best = pm.min(axis=1)
    bar = np.asarray(consensus_metrics, dtype=float)
    perf = performance_scores(own, best, bar, cfg.eps)
    bonus = bonus_scores(own, bar, cfg.eps)
    return cfg.eta * np.asarray(capital, dtype=float) + (1.0 - cfg.eta) * cfg.capital_scale * (
        perf + cfg.beta * bonus
    )


def play(
    plans: np.ndarray,
    utilities: Sequence[float],
    capital: np.ndarray,
    utility_of: Callable[[int, np.ndarray], float],
    grad_q_tot: Callable[[np.ndarray], np.ndarray] | None,
    cfg: GameConfig = GameConfig(),
) -> GameOutcome:
    """Lines 1-18 of Algorithm 2 (eq. 12's ``Gamma`` up to the consensus; the caller
    simulates it, line 19, and calls :func:`update_capital`, lines 20-24).

    ``plans`` ``[J, O, R]``: the proposals ``a_j*``; ``utilities[j] = Q_j(a_j*)``;
    ``grad_q_tot(omega)``: ``dQ_tot(sum_j omega_j a_j*)/d omega`` (needed when ``cfg.sgd``)."""
    plans = np.asarray(plans, dtype=float)
    blended, bw = utility_blend(plans, np.asarray(utilities, dtype=float), cfg.utility_floor)
    omega = capital_weights(capital)
    if not cfg.blend:  # §6.3 ablation: no blending, the richest agent's proposal
        omega = np.zeros(len(plans))
        omega[int(np.argmax(capital))] = 1.0
        consensus = plans[int(np.argmax(capital))].copy()
    elif cfg.sgd:
        if grad_q_tot is None:
            raise ValueError("the SGD refinement needs grad_q_tot")
        omega = refine_weights(omega, grad_q_tot, cfg.sgd_lr, cfg.sgd_steps)
        consensus = mix(plans, omega)
    else:
        consensus = project_simplex(blended)
    vetoes: list[tuple[int, float]] = []
    if cfg.veto:
        consensus, vetoes = apply_vetoes(consensus, plans, capital, utility_of, cfg)
    return GameOutcome(project_simplex(consensus), bw, omega, vetoes)
