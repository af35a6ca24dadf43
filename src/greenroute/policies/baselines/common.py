"""What the seed 001 baselines share: demand in requests, the per-epoch cost of a routing
plan under the optimisers' cost model, MARLIN's reward shape, a discrete routing action set
and state features for the RL baselines.

Reward (seed 001 §5.2 Algorithm 1 line 8, ``r = EMA + ECO + metric - penalty``; MARLIN gives
no formula for the terms, so the reading below is ours and every RL baseline uses it):

- ``metric`` = 1 - J(plan) / J(local-only plan): the epoch's normalised objective
  (``policies/optimize/model.py``: per-request carbon, water and cost of the region's IT
  energy, TTFT of network + prefill, and the simulator's own queueing curve) relative to
  serving everything locally, so 0 is local-only and 1 a free plan;
- ``EMA`` = ``EMA_GAIN`` x (metric - the exponential moving average of past metrics): a bonus
  for improving on the agent's own recent level (``EMA_DECAY`` per epoch);
- ``ECO`` = ``ECO_GAIN`` x the share of regions left unused (the consolidation bonus);
- ``penalty`` = the objective's ``slo_penalty`` x the share of interactive requests sent to a
  region whose network + prefill + expected wait exceeds the TTFT SLO.

The reward is computed from the observation the plan was made on (the simulator hands a
geo policy no figures of its own past epochs; the cost model is exact for energy, carbon,
water and cost and uses the simulator's queueing curve for waits).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from greenroute.core.types import Observation
from greenroute.policies.heuristics import DEFAULT_TARGET_UTILISATION, greedy_fill
from greenroute.policies.optimize.model import CostModel, build_cost_model, plan_cost

EMA_DECAY = 0.9  # weight of the past in the metric's moving average (our choice)
EMA_GAIN = 0.5  # weight of the improvement over that average in the reward (our choice)
ECO_GAIN = 0.05  # consolidation bonus per share of regions left idle (our choice)
# greedy-fill target utilisation of the routing actions and of the pouring baselines: the
# package heuristics' headroom (heuristics.DEFAULT_TARGET_UTILISATION; filling to §6's 95 % cap
# queues interactive work for minutes on marlin8)
FILL_TARGET = DEFAULT_TARGET_UTILISATION


def demand_requests(obs: Observation) -> np.ndarray:
    """Forecast requests of the current epoch, ``[C, O]``."""
    return obs.demand_rps[0] * obs.epoch_s


def requests_of(obs: Observation, route: np.ndarray) -> np.ndarray:
    """Requests per (class, origin, region) ``[C, O, R]`` that ``route`` sends this epoch."""
    return demand_requests(obs)[:, :, None] * route


def local_route(obs: Observation) -> np.ndarray:
    """Each origin served in its own region when allowed, else spread over what is allowed."""
    from greenroute.sim.reference import LocalOnlyReference

    return LocalOnlyReference().plan(obs).route


def normalise_rows(route: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Zero what ``allowed`` forbids and make each (class, origin) row sum to 1; a row with
    nothing left spreads evenly over its allowed regions (or stays 0 if none is allowed)."""
    r = np.where(allowed, np.maximum(route, 0.0), 0.0)
    s = r.sum(axis=-1, keepdims=True)
    even = allowed / np.maximum(allowed.sum(axis=-1, keepdims=True), 1)
    return np.where(s > 1e-12, r / np.where(s > 1e-12, s, 1.0), even)


@dataclass
class EpochCost:
    """The cost model's figures of one plan for the current epoch."""

    objective: float  # normalised J share of the epoch (incl. congestion)
    carbon_kg: float
    water_m3: float
    cost_usd: float
    ttft_s: float  # mean interactive network + prefill time (no queueing)

    def vector(self) -> np.ndarray:
        return np.array([self.carbon_kg, self.water_m3, self.cost_usd, self.ttft_s])


def epoch_cost(model: CostModel, obs: Observation, route: np.ndarray) -> EpochCost:
    x = requests_of(obs, route)
    n_int = max(float(x[0].sum()), 1e-12)
    return EpochCost(
        objective=plan_cost(model, x),
        carbon_kg=float((model.carbon_kg[0][:, None, :] * x).sum()),
        water_m3=float((model.water_m3[0][:, None, :] * x).sum()),
        cost_usd=float((model.cost_usd[0][:, None, :] * x).sum()),
        ttft_s=float((model.ttft_s[0] * x[0]).sum() / n_int),
    )


def slo_risk_share(model: CostModel, obs: Observation, route: np.ndarray) -> float:
    """Share of interactive requests sent where network + prefill + the expected queueing wait
    at the resulting utilisation exceeds the TTFT SLO."""
    x = requests_of(obs, route)
    busy = (x * model.slot_s[:, None, :]).sum(axis=(0, 1)) / obs.epoch_s
    util = busy / np.maximum(model.cap_slots, 1e-9)
    wait = np.zeros(obs.n_regions)
    if obs.util_grid is not None and obs.wait_curve_s is not None:
        for r in range(obs.n_regions):
            wait[r] = np.interp(util[r], obs.util_grid, obs.wait_curve_s[r])
    late = (model.ttft_s[0] + wait[None, :]) > obs.ttft_slo_s  # [O, R]
    n_int = float(x[0].sum())
    return float(x[0][late].sum() / n_int) if n_int > 0 else 0.0


class Reward:
    """MARLIN's reward shape (module docstring), with its moving average as state."""

    def __init__(self) -> None:
        self.ema: float | None = None

    def __call__(self, obs: Observation, route: np.ndarray, model: CostModel | None = None):
        model = model or build_cost_model(obs)
        j_plan = epoch_cost(model, obs, route).objective
        j_local = epoch_cost(model, obs, local_route(obs)).objective
        metric = 1.0 - j_plan / j_local if j_local > 0 else 0.0
        ema_term = 0.0 if self.ema is None else EMA_GAIN * (metric - self.ema)
        self.ema = metric if self.ema is None else EMA_DECAY * self.ema + (1 - EMA_DECAY) * metric
        used = (requests_of(obs, route).sum(axis=(0, 1)) > 1e-9).mean()
        eco = ECO_GAIN * (1.0 - float(used))
        penalty = obs.weights.slo_penalty * slo_risk_share(model, obs, route)
        return metric + ema_term + eco - penalty


# ------------------------------------------------------------------ RL action set and state
ACTIONS: tuple[str, ...] = ("local", "nearest", "carbon", "water", "cost", "balanced")


def action_scores(obs: Observation, action: str, model: CostModel) -> np.ndarray:
    """Score ``[O, R]`` (lower first) that a discrete routing action greedily fills by."""
    if action == "nearest":
        return obs.latency_s
    if action == "carbon":
        return np.broadcast_to(model.carbon_kg[0, 0], obs.latency_s.shape)
    if action == "water":
        return np.broadcast_to(model.water_m3[0, 0], obs.latency_s.shape)
    if action == "cost":
        return np.broadcast_to(model.cost_usd[0, 0], obs.latency_s.shape)
    if action == "balanced":
        return model.unit[0, 0]  # [O, R] the objective's per-request cost
    raise KeyError(action)


def action_route(obs: Observation, a: int, model: CostModel) -> np.ndarray:
    """The routing ``[C, O, R]`` of discrete action ``a`` (an index into :data:`ACTIONS`)."""
    name = ACTIONS[a]
    if name == "local":
        return local_route(obs)
    score = action_scores(obs, name, model)
    return normalise_rows(greedy_fill(obs, score, FILL_TARGET), obs.allowed)


N_STATE_FEATURES = 6


def state_features(obs: Observation) -> np.ndarray:
    """A small fixed-size state (any number of regions): hour of day (sin, cos), forecast
    load over usable capacity, and the spread (coefficient of variation) of carbon, water and
    price over the regions."""
    hour = (obs.time_utc.hour + obs.time_utc.minute / 60.0) / 24.0
    dem = demand_requests(obs)
    busy = (dem * obs.slot_s_per_request.max(axis=1)[:, None]).sum() / obs.epoch_s
    load = busy / max(float(obs.capacity_slots.sum()), 1e-9)

    def cv(v: np.ndarray) -> float:
        m = float(np.mean(v))
        return float(np.std(v) / m) if m > 0 else 0.0

    return np.array(
        [
            np.sin(2 * np.pi * hour),
            np.cos(2 * np.pi * hour),
            load,
            cv(obs.carbon_g_per_it_kwh[0]),
            cv(obs.water_l_per_it_kwh[0]),
            cv(obs.cost_usd_per_it_kwh[0]),
        ]
    )


def pour(
    allowed: np.ndarray, score: np.ndarray, demand: np.ndarray, free: np.ndarray
) -> np.ndarray:
    """Greedy fill in busy slots: ``demand[o]`` poured into origin ``o``'s allowed regions in
    ascending ``score[o, r]`` up to ``free[r]`` (updated in place), most constrained origins
    first; what does not fit stays unplaced. Returns ``[O, R]`` slots placed."""
    n_o, n_r = allowed.shape
    out = np.zeros((n_o, n_r))
    for o in np.argsort(allowed.sum(axis=1), kind="stable"):
        need = float(demand[o])
        ok = np.flatnonzero(allowed[o])
        for r in ok[np.argsort(score[o, ok], kind="stable")]:
            if need <= 1e-12:
                break
            take = min(need, max(float(free[r]), 0.0))
            out[o, r] += take
            free[r] -= take
            need -= take
    return out


def route_from_alloc(
    obs: Observation, placed: np.ndarray, demand: np.ndarray, fallback: np.ndarray
) -> np.ndarray:
    """Routing ``[C, O, R]`` from work placed ``[C, O, R]`` out of ``demand[C, O]`` (same
    units): the unplaced rest of each row is spread over its allowed regions in proportion to
    capacity (as ``greedy_fill`` does); a row without demand takes ``fallback[c, o]``."""
    cap = np.maximum(obs.capacity_slots, 0.0)
    w = normalise_rows(np.where(obs.allowed, cap[None, None, :], 0.0), obs.allowed)
    rest = np.maximum(demand - placed.sum(axis=-1), 0.0)
    alloc = placed + rest[..., None] * w
    has = alloc.sum(axis=-1, keepdims=True) > 1e-12
    return normalise_rows(np.where(has, alloc, fallback), obs.allowed)
