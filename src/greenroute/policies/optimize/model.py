"""The linear(ised) cost model shared by the optimising policies (LP-MPC, oracle, ADMM,
NSGA-II): what one request costs, in units of the normalised objective, when it is served in
a region at a horizon step, and the convex congestion cost of loading a region.

Everything here reads only the :class:`Observation`:

- per-request dynamic IT energy ``it_kwh_per_request[c, r]`` times the facility factors
  (g CO₂, L water, $ per IT kWh) of the region and epoch — exact in the simulator's physics;
- TTFT without queueing: 2 x one-way network latency (seed 001 eq. 3) + mean prefill;
- queueing: the simulator's own waiting curve ``wait_curve_s[r, k]`` and SLO-miss curve at
  utilisation ``util_grid[k]``, turned into a convex piecewise-linear cost of the busy slots
  (its lower convex hull), so that an LP can carry it with an epigraph variable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.core.types import ObjectiveWeights, Observation

INTERACTIVE, DEFERRABLE = 0, 1
DEFAULT_MAX_UTILISATION = 0.95  # seed 001 section 6: datacenters run up to 95 % utilisation
SLO_PAIR_SHARE = 0.8  # a pair is usable for interactive work if 2 x net + prefill <= 80 % SLO


@dataclass
class CostModel:
    """Per-request costs ``unit[h, c, o, r]`` (normalised objective units) and congestion."""

    unit: np.ndarray  # [H+1, C, O, R]
    carbon_kg: np.ndarray  # [H+1, C, R] per request
    water_m3: np.ndarray  # [H+1, C, R]
    cost_usd: np.ndarray  # [H+1, C, R]
    ttft_s: np.ndarray  # [C, O, R] network + prefill (no queueing)
    slot_s: np.ndarray  # [C, R] slot-seconds per request
    cap_slots: np.ndarray  # [R] usable slots
    max_util: float
    # congestion: cost(h, r) >= slope[r, k] * busy_slots + icept[r, k] for every piece k
    cong_slope: np.ndarray  # [R, K]
    cong_icept: np.ndarray  # [R, K]
    pair_ok: np.ndarray  # [C, O, R] allowed at some step (constraints + per-pair SLO bound)
    pair_ok_h: np.ndarray  # [H+1, C, O, R] allowed at each step (exclusion windows move)
    coef: dict  # the normalisation factors used (for explanations)
    epoch_s: float = 900.0

    @property
    def horizon(self) -> int:
        return self.unit.shape[0] - 1


def scale(obs: Observation, key: str, needed: bool = True) -> float:
    """The objective's reference scale ``key`` (local-only's value, supplied by the simulator in
    ``obs.objective_scales``). A scale a non-zero weight needs must be present, finite and > 0:
    falling back to 1 would add kg, m³, $ and s raw. An unneeded one is 1 (its term is 0)."""
    v = (obs.objective_scales or {}).get(key)
    if v is not None and np.isfinite(v) and v > 0:
        return float(v)
    if not needed:
        return 1.0
    raise ConfigError(
        f"objective scale {key!r} is missing or invalid ({v!r}); the simulator supplies it from "
        "the local-only reference run (obs.objective_scales)"
    )


def request_counts(obs: Observation, w: ObjectiveWeights) -> tuple[float, float]:
    """(interactive, all) requests of the reference run, which turn per-request costs into the
    mean-TTFT and SLO-share terms; ``requests_total`` defaults to the interactive count."""
    n_int = scale(obs, "interactive_requests", needed=bool(w.latency or w.slo_penalty))
    total = (obs.objective_scales or {}).get("requests_total")
    n_all = scale(obs, "requests_total") if total is not None else n_int
    return n_int, n_all


def build_cost_model(
    obs: Observation,
    weights: ObjectiveWeights | None = None,
    max_util: float = DEFAULT_MAX_UTILISATION,
) -> CostModel:
    w = weights or obs.weights
    n_c, n_o, n_r = obs.allowed.shape
    it = obs.it_kwh_per_request  # [C, R]
    carbon = it[None] * obs.carbon_g_per_it_kwh[:, None, :] / 1e3  # kg [H+1, C, R]
    water = it[None] * obs.water_l_per_it_kwh[:, None, :] / 1e3  # m3
    cost = it[None] * obs.cost_usd_per_it_kwh[:, None, :]
    ttft = np.zeros((n_c, n_o, n_r))
    ttft[INTERACTIVE] = 2.0 * obs.latency_s + obs.prefill_s_per_request[INTERACTIVE][None, :]
    n_int, n_all = request_counts(obs, w)
    k_c = w.carbon / scale(obs, "carbon_kg", needed=w.carbon != 0)
    k_w = w.water / scale(obs, "water_m3", needed=w.water != 0)
    k_d = w.cost / scale(obs, "cost_usd", needed=w.cost != 0)
    k_l = w.latency / (scale(obs, "ttft_mean_s", needed=w.latency != 0) * n_int)  # mean = sum/N
    unit = (k_c * carbon + k_w * water + k_d * cost)[:, :, None, :].repeat(n_o, axis=2)
    unit = unit + (k_l * ttft)[None]
    # the hard constraints at every step of the horizon (exclusion windows move), then a
    # per-pair SLO bound for interactive work (network + prefill must leave queueing room)
    h1 = obs.carbon_intensity_g_per_kwh.shape[0]
    if obs.constraints is not None and not obs.constraints.is_empty():
        masks = [
            obs.constraints.allowed_mask(
                obs.origins,
                obs.regions,
                obs.time_s + h * obs.epoch_s,
                obs.time_s + (h + 1) * obs.epoch_s,
                obs.latency_s,
            )
            for h in range(h1)
        ]
        pair_ok_h = np.stack(masks)
        pair_ok_h[0] &= obs.allowed
    else:
        pair_ok_h = np.broadcast_to(obs.allowed, (h1, *obs.allowed.shape)).copy()
    fast = ttft[INTERACTIVE] <= SLO_PAIR_SHARE * obs.ttft_slo_s  # [O, R]
    for h in range(h1):
        allowed_i = pair_ok_h[h, INTERACTIVE].copy()
        pair_ok_h[h, INTERACTIVE] &= fast
        for o in np.flatnonzero(~pair_ok_h[h, INTERACTIVE].any(axis=1) & allowed_i.any(axis=1)):
            ok = np.flatnonzero(allowed_i[o])  # keep the fastest allowed region
            pair_ok_h[h, INTERACTIVE, o, ok[np.argmin(ttft[INTERACTIVE, o, ok])]] = True
    pair_ok = pair_ok_h.any(axis=0)
    slope, icept = _congestion(obs, k_l, w.slo_penalty / n_all, n_r)
    return CostModel(
        unit=unit,
        carbon_kg=carbon,
        water_m3=water,
        cost_usd=cost,
        ttft_s=ttft,
        slot_s=obs.slot_s_per_request,
        cap_slots=np.maximum(obs.capacity_slots, 0.0),
        max_util=max_util,
        cong_slope=slope,
        cong_icept=icept,
        pair_ok=pair_ok,
        pair_ok_h=pair_ok_h,
        coef={"carbon": k_c, "water": k_w, "cost": k_d, "latency": k_l},
        epoch_s=obs.epoch_s,
    )


def _congestion(obs: Observation, k_latency: float, k_slo: float, n_r: int):
    """Convex PWL of the per-epoch queueing cost of a region as a function of busy slots.

    Requests served per epoch at utilisation u: n(u) = u * cap * epoch_s / E[S]. Their total
    wait is n(u) * wait(u) and their SLO misses n(u) * miss(u); the cost is
    k_latency * n * wait + k_slo * n * miss, replaced by its lower convex hull over the grid.
    """
    grid = obs.util_grid
    if grid is None or obs.wait_curve_s is None:
        return np.zeros((n_r, 1)), np.zeros((n_r, 1))
    pieces_s, pieces_b = [], []
    es = np.maximum(obs.slot_s_per_request[INTERACTIVE], 1e-9)
    for r in range(n_r):
        cap = max(float(obs.capacity_slots[r]), 1e-9)
        n = grid * cap * obs.epoch_s / es[r]
        miss = obs.slo_miss_curve[r] if obs.slo_miss_curve is not None else 0.0
        cost = n * (k_latency * obs.wait_curve_s[r] + k_slo * miss)
        x = grid * cap  # busy slots
        hx, hy = _lower_hull(x, cost)
        s = np.diff(hy) / np.maximum(np.diff(hx), 1e-12)
        b = hy[:-1] - s * hx[:-1]
        pieces_s.append(s)
        pieces_b.append(b)
    k = max(len(p) for p in pieces_s)
    slope = np.zeros((n_r, k))
    icept = np.zeros((n_r, k))
    for r in range(n_r):
        n = len(pieces_s[r])
        slope[r, :n] = pieces_s[r]
        icept[r, :n] = pieces_b[r]
        slope[r, n:] = pieces_s[r][-1]  # duplicate the last piece (harmless)
        icept[r, n:] = pieces_b[r][-1]
    return slope, icept


def _lower_hull(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower convex hull of points sorted by x (monotone chain)."""
    pts: list[tuple[float, float]] = []
    for xi, yi in zip(x, y, strict=True):
        while len(pts) >= 2:
            (x1, y1), (x2, y2) = pts[-2], pts[-1]
            if (x2 - x1) * (yi - y1) - (y2 - y1) * (xi - x1) <= 0:
                pts.pop()
            else:
                break
        pts.append((float(xi), float(yi)))
    arr = np.array(pts)
    return arr[:, 0], arr[:, 1]


def congestion_cost(model: CostModel, busy_slots: np.ndarray) -> np.ndarray:
    """Evaluate the PWL congestion cost ([..., R] busy slots -> [..., R] cost)."""
    b = np.asarray(busy_slots, dtype=float)[..., None]
    return np.max(model.cong_slope * b + model.cong_icept, axis=-1)


def plan_cost(model: CostModel, x: np.ndarray, h: int = 0) -> float:
    """Normalised cost of routing request counts ``x[c, o, r]`` at step ``h`` (incl. congestion)."""
    busy = (x * model.slot_s[:, None, :]).sum(axis=(0, 1)) / model.epoch_s
    return float((model.unit[h] * x).sum() + congestion_cost(model, busy).sum())
