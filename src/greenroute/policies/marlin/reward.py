"""MARLIN's state features and the phase-1 reward (seed 001 §5.2, Algorithm 1 lines 2 and 8).

State (Algorithm 1 line 2, §5.2: "the current epoch's LLM workload ... each datacenter's node
availability, carbon intensity, water intensity, and energy pricing"): the forecast request
rate per origin (line 1, the run's forecaster: ``marlin-ewma`` in the paper's setting), each
datacenter's carbon, water and cost per IT kWh (relative to the mean over datacenters, so the
features are scale-free), its occupancy (busy slots and carried backlog over usable slots),
the overall load (demand slots over usable slots) and the time of day.

Reward (§5.2: ``r_j = EMA + ECO + metric_j - penalty``), each term defined here because the
paper names but does not define them (all coefficients are parameters of
:class:`RewardConfig`):

* the four objectives of a plan are its epoch figures from the fork (TTFT mean s, carbon kg,
  water m³, cost $; eqs. 3, 10, 8, 7 under the ``marlin`` preset) as ratios ``x_k = m_k /
  m_k(local)`` to the local-only plan of the same epoch (1 = as good as serving at home);
* ``metric_j = sum_k w_k (1 / x_k - 1)`` with the agent's weights ``w``: 0 for a plan as good
  as local-only, positive when better. Centred so that the critics need not learn a large
  constant (Q of the uncentred ``sum_k w_k / x_k`` is ``scale sum_k w_k / (1 - gamma)`` = 200
  higher, which Adam at lr 1e-3 would take ~10^5 steps to reach); phase 2 adds that constant
  back to the critics' values to use them as positive utilities (``policy.py``);
* ``EMA = ema_coef * sum_k w_k (ema_k - x_k)``: the gain over the exponential moving average
  (factor ``ema_alpha``) of the agent's own past proposals' ratios;
* ``ECO = eco_coef * H``: the consolidation bonus, ``H`` the normalised Herfindahl index of
  the routed load over the datacenters (0 spread evenly, 1 all in one);
* ``penalty = sla_coef * (SLO misses + drops) / requests + sla_coef * overload``: TTFT beyond
  the set point (the scenario's SLO) and requests the 95 % cap turns away, plus the plan's
  planned utilisation above ``u_max`` (the capacity-weighted excess of ``(carried backlog +
  routed demand) / usable slots`` over ``u_max``, 0.9): a fork simulates one epoch, and the
  backlog an overloaded epoch leaves (its later waits and drops) is not in that epoch's
  figures;
* the whole reward is multiplied by ``scale`` (10): SAC's entropy term is on the scale of the
  action's log-density (64 dimensions on ``marlin8``) and would otherwise swamp differences of
  a few percent between plans (Haarnoja et al. 2018 tune a reward scale for the same reason).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from greenroute.core.types import Observation

OBJECTIVES: tuple[str, ...] = ("ttft", "carbon", "water", "cost")  # agent order (§5, J = 4)
FIGURE_KEYS: tuple[str, ...] = ("ttft_mean_s", "carbon_kg", "water_m3", "cost_usd")


@dataclass(frozen=True)
class RewardConfig:
    ema_coef: float = 0.5
    ema_alpha: float = 0.1
    eco_coef: float = 0.05
    sla_coef: float = 5.0
    u_max: float = 0.9
    scale: float = 10.0
    ratio_floor: float = 0.05  # x_k is clipped to [floor, ceil]: a 20x gain is no plan's,
    ratio_ceil: float = 10.0  # and a 0 (nothing served) must not be worth 1 / 0


def state_features(obs: Observation) -> np.ndarray:
    """The epoch's state vector (module docstring): ``O + 3R + R + R + 3`` floats."""
    dem = np.maximum(obs.demand_rps[0], 0.0)  # [C, O]
    per_origin = dem.sum(axis=0)
    mean_o = per_origin.mean()
    workload = per_origin / mean_o if mean_o > 0 else np.zeros_like(per_origin)
    cap = np.maximum(np.asarray(obs.capacity_slots, dtype=float), 1e-9)
    slots = (dem * obs.slot_s_per_request.max(axis=1)[:, None]).sum()
    load = np.array([slots / cap.sum()])
    busy = np.asarray(obs.busy_slots, dtype=float) / cap
    backlog = np.asarray(obs.backlog_slot_s, dtype=float) / obs.epoch_s / cap
    hour = (obs.time_s / 3600.0) % 24.0
    tod = np.array([np.sin(2 * np.pi * hour / 24.0), np.cos(2 * np.pi * hour / 24.0)])
    return np.concatenate(
        [workload, datacenter_features(obs), np.clip(busy, 0, 2), np.clip(backlog, 0, 2), load,
         tod]
    ).astype(np.float32)  # fmt: skip


def datacenter_features(obs: Observation) -> np.ndarray:
    """``3R``: carbon, water and cost per IT kWh of each datacenter over their mean."""
    out = []
    for sig in (obs.carbon_g_per_it_kwh, obs.water_l_per_it_kwh, obs.cost_usd_per_it_kwh):
        v = np.asarray(sig[0], dtype=float)
        m = v.mean()
        out.append(v / m if m > 0 else np.zeros_like(v))
    return np.concatenate(out)


def film_context(obs: Observation, weights: np.ndarray) -> np.ndarray:
    """What the FiLM layer conditions on (§5.2): the agent's weights, the workload and the
    datacenter attributes."""
    return np.concatenate(
        [np.asarray(weights, dtype=float), state_features(obs)[: obs.n_origins],
         datacenter_features(obs)]
    ).astype(np.float32)  # fmt: skip


def figures_vector(fig) -> np.ndarray:
    """``[4]`` the objectives of an :class:`~greenroute.sim.fork.EpochFigures` (agent order).
    A NaN TTFT (no interactive request served in the epoch: all dropped or queued) is +inf, so
    its ratio is the worst allowed (``ratio_ceil``), never a free 0."""
    v = np.array([getattr(fig, k) for k in FIGURE_KEYS], dtype=float)
    return np.nan_to_num(v, nan=np.inf)


def sla_share(fig) -> float:
    """(SLO misses + drops) / requests of the epoch (0 when nothing was dispatched)."""
    n = float(fig.interactive_requests) + float(fig.dropped)
    return (float(fig.slo_misses) + float(fig.dropped)) / n if n > 0 else 0.0


def consolidation(route_or: np.ndarray, demand_o: np.ndarray) -> float:
    """Normalised Herfindahl index of the routed load over the datacenters (ECO)."""
    load = np.asarray(demand_o, dtype=float) @ np.asarray(route_or, dtype=float)
    total = load.sum()
    n_r = load.size
    if total <= 0 or n_r < 2:
        return 0.0
    s = load / total
    return float(((s * s).sum() - 1.0 / n_r) / (1.0 - 1.0 / n_r))


def overload(route_or: np.ndarray, obs: Observation, u_max: float) -> float:
    """Capacity-weighted planned utilisation above ``u_max`` (module docstring)."""
    dem = np.maximum(obs.demand_rps[0], 0.0) * obs.slot_s_per_request.max(axis=1)[:, None]
    load = dem.sum(axis=0) @ np.asarray(route_or, dtype=float)  # [R] busy slots
    cap = np.maximum(np.asarray(obs.capacity_slots, dtype=float), 1e-9)
    u = (load + np.asarray(obs.backlog_slot_s, dtype=float) / obs.epoch_s) / cap
    return float((cap * np.maximum(u - u_max, 0.0)).sum() / cap.sum())


def ratios(
    values: np.ndarray, reference: np.ndarray, floor: float = 0.05, ceil: float = 10.0
) -> np.ndarray:
    """``x_k = m_k / m_k(local)`` clipped to ``[floor, ceil]`` (1 where the reference is not a
    finite number > 0)."""
    ref = np.asarray(reference, dtype=float)
    ok = np.isfinite(ref) & (ref > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(ok, np.asarray(values, dtype=float) / np.where(ok, ref, 1.0), 1.0)
    return np.clip(x, floor, ceil)


def reward(
    x: np.ndarray,
    weights: np.ndarray,
    ema: np.ndarray,
    eco: float,
    sla: float,
    cfg: RewardConfig = RewardConfig(),
) -> np.ndarray:
    """``r = scale (EMA + ECO + metric - penalty)`` (§5.2) for ratio vectors ``x``
    (``[..., 4]``) under ``weights`` (``[..., 4]``); ``eco`` and ``sla`` (the penalty's share,
    overload included) broadcast."""
    x = np.clip(np.asarray(x, dtype=float), cfg.ratio_floor, cfg.ratio_ceil)
    w = np.asarray(weights, dtype=float)
    metric = (w * (1.0 / x - 1.0)).sum(axis=-1)
    ema_term = cfg.ema_coef * (w * (np.asarray(ema, dtype=float) - x)).sum(axis=-1)
    r = ema_term + cfg.eco_coef * np.asarray(eco) + metric - cfg.sla_coef * np.asarray(sla)
    return cfg.scale * r
