"""Geo-level baseline heuristics (seed 000 Table 7 RBCs, seed 002 baselines, common practice).

Capacity-aware heuristics share :func:`greedy_fill`: each origin's forecast demand (in
slot-seconds per second) is poured into its allowed regions in order of a score, up to a
target utilisation, most-constrained origins first; what does not fit is spread over the
origin's allowed regions in proportion to their capacity.
"""

from __future__ import annotations

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.core.types import N_CLASSES, ClusterInfo, Observation, Plan
from greenroute.policies.fill_kernel import MAX_REGIONS, greedy_fill_kernel
from greenroute.policies.registry import register_geo_policy
from greenroute.sim.reference import LocalOnlyReference

DEFAULT_TARGET_UTILISATION = 0.6  # headroom so queues stay short: at 0.8 the demo misses its
# 2 s TTFT SLO for 17 % of requests, at 0.6 for 0.4 % with 0.7 % more carbon (engineering choice)


def demand_slots(obs: Observation) -> np.ndarray:
    """Forecast demand of the current epoch in busy slots, ``[C, O]``."""
    per_req = obs.slot_s_per_request.max(axis=1)  # [C] conservative across regions
    return obs.demand_rps[0] * per_req[:, None]


def free_slots(obs: Observation, target: float) -> np.ndarray:
    """Slots available this epoch under ``target`` utilisation, net of carried backlog."""
    carried = obs.backlog_slot_s / obs.epoch_s
    return np.maximum(target * obs.capacity_slots - carried, 0.0)


def greedy_fill(
    obs: Observation,
    score: np.ndarray,
    target: float = DEFAULT_TARGET_UTILISATION,
    demand: np.ndarray | None = None,
    compiled: bool = True,
) -> np.ndarray:
    """Route ``[C, O, R]`` filling lowest-``score`` regions first (score ``[R]`` or ``[O, R]``).
    ``compiled=False`` runs the Python loop (``policies/fill_kernel.py`` compiles it)."""
    n_c, n_o, n_r = obs.allowed.shape
    score = np.broadcast_to(np.asarray(score, dtype=float), (n_o, n_r))
    dem = demand_slots(obs) if demand is None else demand
    free = free_slots(obs, target)
    if compiled and n_r <= MAX_REGIONS:  # the same loop, compiled (bit-identical routes)
        return greedy_fill_kernel(
            np.ascontiguousarray(obs.allowed, dtype=bool),
            np.ascontiguousarray(score, dtype=float),
            np.ascontiguousarray(dem, dtype=float),
            np.array(free, dtype=float),
            np.ascontiguousarray(obs.capacity_slots, dtype=float),
        )
    route = np.zeros((n_c, n_o, n_r))
    for c in range(n_c):
        allowed = obs.allowed[c]
        order_o = np.argsort(allowed.sum(axis=1), kind="stable")  # most constrained first
        for o in order_o:
            ok = np.flatnonzero(allowed[o])
            if ok.size == 0:
                continue
            need = float(dem[c, o])
            alloc = np.zeros(n_r)
            for r in ok[np.argsort(score[o, ok], kind="stable")]:
                if need <= 1e-12:
                    break
                take = min(need, free[r])
                alloc[r] += take
                free[r] -= take
                need -= take
            if need > 1e-12:  # overflow: in proportion to capacity
                cap = obs.capacity_slots[ok]
                w = cap / cap.sum() if cap.sum() > 0 else np.full(ok.size, 1.0 / ok.size)
                alloc[ok] += need * w
            total = alloc.sum()
            if total <= 0:  # no demand forecast: send to the best-scoring region
                alloc[ok[np.argmin(score[o, ok])]] = 1.0
                total = 1.0
            route[c, o] = alloc / total
    return route


def _normalise_mask(mask: np.ndarray) -> np.ndarray:
    sums = mask.sum(axis=-1, keepdims=True)
    return np.where(sums > 0, mask / np.where(sums > 0, sums, 1), 0.0)


class _Base:
    name = ""

    options: dict  # the options that took effect (set by the registry)

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        self.cluster = cluster
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0x6E0]))


@register_geo_policy("local-only", "Serve every request in its origin's own region (no shifting).")
class LocalOnly(_Base):
    """The objective's reference plan (``sim/reference.py``, which the engine runs for the
    normalisation and cannot import this module): one definition of local-only."""

    name = "local-only"

    def plan(self, obs: Observation) -> Plan:
        return LocalOnlyReference().plan(obs)


@register_geo_policy(
    "round-robin", "Rotate each origin's work over its allowed regions, epoch by epoch."
)
class RoundRobinGeo(_Base):
    name = "round-robin"

    def plan(self, obs: Observation) -> Plan:
        route = np.zeros(obs.allowed.shape)
        for c in range(N_CLASSES):
            for o in range(obs.n_origins):
                ok = np.flatnonzero(obs.allowed[c, o])
                if ok.size:
                    route[c, o, ok[(obs.epoch + o) % ok.size]] = 1.0
        return Plan(route=route)


@register_geo_policy("random", "A random allowed region per origin and epoch (sanity baseline).")
class RandomGeo(_Base):
    name = "random"

    def plan(self, obs: Observation) -> Plan:
        route = np.zeros(obs.allowed.shape)
        for c in range(N_CLASSES):
            for o in range(obs.n_origins):
                ok = np.flatnonzero(obs.allowed[c, o])
                if ok.size:
                    route[c, o, ok[self.rng.integers(ok.size)]] = 1.0
        return Plan(route=route)


@register_geo_policy("least-loaded", "Split work to equalise projected utilisation across regions.")
class LeastLoadedGeo(_Base):
    name = "least-loaded"

    def plan(self, obs: Observation) -> Plan:
        # water-filling on utilisation: fill the region with the lowest projected load first
        util = (obs.busy_slots + obs.backlog_slot_s / obs.epoch_s) / np.maximum(
            obs.capacity_slots, 1e-9
        )
        dem = demand_slots(obs)
        route = np.zeros(obs.allowed.shape)
        load = util * obs.capacity_slots
        cap = np.maximum(obs.capacity_slots, 1e-9)
        for c in range(N_CLASSES):
            for o in range(obs.n_origins):
                ok = np.flatnonzero(obs.allowed[c, o])
                if ok.size == 0:
                    continue
                alloc = _water_fill(load[ok], cap[ok], float(dem[c, o]))
                if alloc.sum() <= 0:
                    alloc = cap[ok].copy()
                route[c, o, ok] = alloc / alloc.sum()
                load[ok] += alloc if dem[c, o] > 0 else 0.0
        return Plan(route=route)


def _water_fill(load: np.ndarray, cap: np.ndarray, amount: float) -> np.ndarray:
    """Add ``amount`` so that (load + x) / cap is equalised from the bottom up."""
    if amount <= 0:
        return np.zeros_like(load)
    u = load / cap
    order = np.argsort(u)
    us, cs = u[order], cap[order]
    level = us[0]
    for k in range(1, len(us) + 1):
        c_sum = cs[:k].sum()
        used = float(((level - us[:k]) * cs[:k]).sum())
        nxt = us[k] if k < len(us) else np.inf
        if used + (nxt - level) * c_sum >= amount:
            level = level + (amount - used) / c_sum
            break
        level = nxt
    x = np.maximum(level - u, 0.0) * cap
    return x * (amount / x.sum()) if x.sum() > 0 else x


_GREEDY_OPTIONS = {
    "units": {"target_utilisation": "share of usable slots"},
    "help": {"target_utilisation": "fill each region up to this utilisation, best first"},
}


class _GreedyScore(_Base):
    signal = ""

    def __init__(self, target_utilisation: float = DEFAULT_TARGET_UTILISATION) -> None:
        if not 0.0 < target_utilisation <= 1.0:
            raise ConfigError(f"target_utilisation must be in (0, 1], got {target_utilisation}")
        self.target = float(target_utilisation)

    def score(self, obs: Observation) -> np.ndarray:
        return getattr(obs, self.signal)[0]

    def plan(self, obs: Observation) -> Plan:
        score = self.score(obs)
        route = greedy_fill(obs, score, self.target)
        best = int(np.argmin(score if score.ndim == 1 else score.mean(axis=0)))
        return Plan(
            route=route,
            rationale=f"{self.name}: lowest {self.signal} now in {obs.regions[best]}",
        )


@register_geo_policy(
    "lowest-carbon",
    "Greedy, capacity-aware: fill the lowest carbon-intensity regions first.",
    **_GREEDY_OPTIONS,
)
class LowestCarbon(_GreedyScore):
    name = "lowest-carbon"
    signal = "carbon_intensity_g_per_kwh"


@register_geo_policy(
    "lowest-price",
    "Greedy, capacity-aware: fill the cheapest-electricity regions first.",
    **_GREEDY_OPTIONS,
)
class LowestPrice(_GreedyScore):
    name = "lowest-price"
    signal = "price_usd_per_kwh"


@register_geo_policy(
    "coolest",
    "Greedy, capacity-aware: prioritise low ambient temperature "
    "(seed 000's 'Prioritize Temperature').",
    **_GREEDY_OPTIONS,
)
class Coolest(_GreedyScore):
    name = "coolest"
    signal = "temp_c"


@register_geo_policy(
    "nearest",
    "Greedy, capacity-aware per origin: lowest network latency first.",
    **_GREEDY_OPTIONS,
)
class Nearest(_GreedyScore):
    name = "nearest"
    signal = "latency_s"

    def score(self, obs: Observation) -> np.ndarray:
        return obs.latency_s


@register_geo_policy(
    "carbon-threshold",
    "Temporal shifting: hold deferrable work while carbon intensity is high relative to the "
    "rest of its window, release when low or at the deadline; serve locally.",
    units={"quantile": "quantile of the window's intensity"},
    help={"quantile": "release while intensity is at or below this quantile of its window"},
)
class CarbonThreshold(_Base):
    name = "carbon-threshold"

    def __init__(self, quantile: float = 0.35) -> None:
        if not 0.0 <= quantile <= 1.0:
            raise ConfigError(f"quantile must be in [0, 1], got {quantile}")
        self.quantile = float(quantile)
        self._local = LocalOnly()

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        super().reset(cluster, seed)
        self._local.reset(cluster, seed)

    def plan(self, obs: Observation) -> Plan:
        base = self._local.plan(obs)
        ci = obs.carbon_intensity_g_per_kwh  # [H+1, R]
        hold = np.zeros(obs.n_origins)
        notes = []
        for o in range(obs.n_origins):
            dest = base.route[1, o]
            ci_path = ci @ dest  # intensity where this origin's deferrable work would run
            # window: the forecast horizon, cut at the earliest pending deadline
            left = obs.pending_deadline_s[o] - obs.time_s
            h_max = obs.horizon
            if np.isfinite(left):
                h_max = int(min(obs.horizon, max(left // obs.epoch_s - 1, 0)))
            window = ci_path[: h_max + 1]
            if window.size <= 1:
                continue
            threshold = np.quantile(window, self.quantile)
            if ci_path[0] > threshold:
                hold[o] = 1.0
                notes.append(f"{obs.origins[o]} holds ({ci_path[0]:.0f} > {threshold:.0f} g/kWh)")
        return Plan(route=base.route, hold=hold, rationale="; ".join(notes))
