"""NSGA-II: a per-epoch multi-objective search of the routing plan (pymoo).

Each epoch ``nsga2`` searches the routing shares of the current epoch with pymoo's NSGA-II
on four objectives, all minimised, for the epoch's expected work (forecast arrivals
``demand_rps[0] x epoch_s``, plus the deferrable requests pending, which are all released
because nothing is held):

- carbon kg, water m³ and energy cost $ of the dynamic IT energy (the shared cost model,
  :mod:`.model`: per-request IT kWh x the region's facility factors now);
- latency: the mean TTFT of the epoch's interactive requests = 2 x one-way network latency
  + mean prefill + the mean queueing wait of the region at the utilisation the plan gives it
  (the simulator's own waiting curve, interpolated, not its convex hull; beyond the curve it
  is extrapolated, and past 100 % utilisation the overflow waits half an epoch on average).

**Encoding.** One gene in [0, 1] per allowed (class, origin, region) pair of each row that
has demand and more than one allowed region; a row's shares are its genes divided by their
sum (all zero: equal shares). Pairs that are not allowed (hard constraints, and for
interactive work the per-pair SLO bound of the cost model) have no gene, so they get exactly
0. Rows without a decision (no demand, one region) take the greedy plan's row.

**Spatial only**: the plan never holds deferrable work (``hold = 0``); temporal shifting is
``lp-mpc``'s job.

**Selection.** Every evaluated plan is also scored by the scalar objective J of the active
weights (the ``weights`` option, else ``obs.weights``): each metric divided by the scenario's
scale (``obs.objective_scales``, local-only's run totals, as in :mod:`.model`), plus the
SLO-penalty term from the simulator's SLO-miss curve. The plan returned is the member of the
final non-dominated front with the lowest J (or the best plan seen during the search, if an
elitist step dropped it; a minimiser of a weighted sum is itself Pareto-optimal).

**Speed.** Population 40, at most 25 generations (it stops after ``patience`` = 6 generations
without a better J; ``patience=100`` runs them all). The initial
population is seeded with good candidates: local-only, capacity-proportional, greedy fills
by the active weights' per-request cost at several target utilisations, the greedy fill of
each single-objective corner, and the previous epoch's plan; the rest is random. The seed of
each epoch's search derives from the ``reset`` seed and the epoch, so runs are reproducible.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.core.objective import objective_weights_option
from greenroute.core.types import ClusterInfo, ObjectiveWeights, Observation, Plan
from greenroute.policies.optimize.model import (
    DEFAULT_MAX_UTILISATION,
    DEFERRABLE,
    INTERACTIVE,
    CostModel,
    build_cost_model,
    request_counts,
    scale,
)
from greenroute.policies.registry import register_geo_policy

OBJECTIVES = ("carbon_kg", "water_m3", "cost_usd", "ttft_mean_s")
GREEDY_TARGETS = (0.5, 0.6, 0.7, 0.8, 0.9)  # target utilisations of the seeded greedy fills
CORNERS = (
    ObjectiveWeights(1.0, 0.0, 0.0, 0.0),
    ObjectiveWeights(0.0, 1.0, 0.0, 0.0),
    ObjectiveWeights(0.0, 0.0, 1.0, 0.0),
    ObjectiveWeights(0.0, 0.0, 0.0, 1.0),
)


@dataclass
class EpochProblem:
    """What one epoch's search needs, built from the observation (vectorised evaluation)."""

    mask: np.ndarray  # [C, O, R] bool: pairs the plan may use
    free: np.ndarray  # [C, O] bool: rows carried by genes
    gene_c: np.ndarray  # [G] class, origin, region of each gene
    gene_o: np.ndarray
    gene_r: np.ndarray
    fixed: np.ndarray  # [C, O, R] shares of the rows without genes
    counts: np.ndarray  # [C, O] requests this epoch
    carbon_kg: np.ndarray  # [C, R] per request now
    water_m3: np.ndarray
    cost_usd: np.ndarray
    ttft_s: np.ndarray  # [O, R] interactive, without queueing
    slot_s: np.ndarray  # [C, R]
    base_busy: np.ndarray  # [R] slots kept busy by the carried backlog
    cap_slots: np.ndarray  # [R]
    epoch_s: float
    util_grid: np.ndarray | None
    wait_curve_s: np.ndarray | None  # [R, K]
    slo_miss_curve: np.ndarray | None  # [R, K]
    coef: np.ndarray  # [5] J per kg, m³, $, interactive-TTFT second, SLO miss

    @property
    def n_genes(self) -> int:
        return int(self.gene_c.size)

    def shares(self, genes: np.ndarray) -> np.ndarray:
        """Genes ``[P, G]`` -> routing shares ``[P, C, O, R]`` (rows sum to 1 where allowed)."""
        genes = np.atleast_2d(np.asarray(genes, dtype=float))
        s = np.repeat(np.where(self.free[..., None], 0.0, self.fixed)[None], len(genes), axis=0)
        s[:, self.gene_c, self.gene_o, self.gene_r] = np.maximum(genes, 0.0)
        tot = s.sum(axis=-1, keepdims=True)
        uniform = self.mask / np.maximum(self.mask.sum(axis=-1, keepdims=True), 1)
        free = self.free[None, ..., None]
        normed = np.where(tot > 0, s / np.where(tot > 0, tot, 1.0), uniform[None])
        return np.where(free, normed, s)

    def genes_of(self, shares: np.ndarray) -> np.ndarray:
        """Shares ``[C, O, R]`` -> genes ``[G]`` (the inverse of :meth:`shares`)."""
        return np.asarray(shares, dtype=float)[self.gene_c, self.gene_o, self.gene_r]

    def evaluate(self, shares: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Objectives ``[P, 4]`` (carbon kg, water m³, cost $, mean TTFT s) and J ``[P]``."""
        s = np.asarray(shares, dtype=float)
        if s.ndim == 3:
            s = s[None]
        x = s * self.counts[None, :, :, None]  # [P, C, O, R] requests
        per_region = x.sum(axis=2)  # [P, C, R]
        carbon = np.einsum("pcr,cr->p", per_region, self.carbon_kg)
        water = np.einsum("pcr,cr->p", per_region, self.water_m3)
        cost = np.einsum("pcr,cr->p", per_region, self.cost_usd)
        busy = self.base_busy + np.einsum("pcr,cr->pr", per_region, self.slot_s) / self.epoch_s
        util = np.where(self.cap_slots > 0, busy / np.maximum(self.cap_slots, 1e-12), 10.0)
        wait, miss = self.queueing(util)
        n_int_r = per_region[:, INTERACTIVE]  # [P, R]
        ttft_sum = np.einsum("por,or->p", x[:, INTERACTIVE], self.ttft_s)
        ttft_sum = ttft_sum + (n_int_r * wait).sum(axis=-1)
        misses = (n_int_r * miss).sum(axis=-1)
        n_int = float(self.counts[INTERACTIVE].sum())
        ttft_mean = ttft_sum / n_int if n_int > 0 else np.zeros_like(ttft_sum)
        f = np.stack([carbon, water, cost, ttft_mean], axis=1)
        j = f[:, :3] @ self.coef[:3] + self.coef[3] * ttft_sum + self.coef[4] * misses
        return f, j

    def queueing(self, util: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean wait (s) and SLO-miss share of interactive requests at utilisation ``[P, R]``."""
        overflow = np.maximum(util - 1.0, 0.0) / np.maximum(util, 1e-12)  # share not served now
        wait = overflow * self.epoch_s / 2.0
        miss = overflow.copy()
        grid = self.util_grid
        if grid is None or self.wait_curve_s is None or len(grid) < 2:
            return wait, miss
        beyond = np.maximum(util - grid[-1], 0.0)
        for r in range(util.shape[1]):
            for curve, out in ((self.wait_curve_s, wait), (self.slo_miss_curve, miss)):
                if curve is None:
                    continue
                c = curve[r]
                slope = max((c[-1] - c[-2]) / max(grid[-1] - grid[-2], 1e-12), 0.0)
                val = np.interp(util[:, r], grid, c) + slope * beyond[:, r]
                if out is miss:
                    out[:, r] = np.clip(np.maximum(out[:, r], val), 0.0, 1.0)
                else:
                    out[:, r] += val
        return wait, miss


def build_epoch_problem(
    obs: Observation, model: CostModel, weights: ObjectiveWeights
) -> EpochProblem:
    """The epoch's search space and evaluation (greedy rows fill the rows without genes)."""
    n_c, n_o, n_r = obs.allowed.shape
    mask = model.pair_ok_h[0] & obs.allowed
    lost = ~mask.any(axis=-1) & obs.allowed.any(axis=-1)  # the SLO bound left nothing
    mask[lost] = obs.allowed[lost]
    counts = np.maximum(obs.demand_rps[0], 0.0) * obs.epoch_s
    counts = counts.copy()
    counts[DEFERRABLE] += np.maximum(np.asarray(obs.pending_deferrable, dtype=float), 0.0)
    free = (mask.sum(axis=-1) > 1) & (counts > 0)
    gene_c, gene_o, gene_r = np.nonzero(mask & free[..., None])
    n_all = request_counts(obs, weights)[1]
    ep = EpochProblem(
        mask=mask,
        free=free,
        gene_c=gene_c,
        gene_o=gene_o,
        gene_r=gene_r,
        fixed=np.zeros((n_c, n_o, n_r)),
        counts=counts,
        carbon_kg=model.carbon_kg[0],
        water_m3=model.water_m3[0],
        cost_usd=model.cost_usd[0],
        ttft_s=model.ttft_s[INTERACTIVE],
        slot_s=np.asarray(obs.slot_s_per_request, dtype=float),
        base_busy=np.maximum(np.asarray(obs.backlog_slot_s, dtype=float), 0.0) / obs.epoch_s,
        cap_slots=np.maximum(np.asarray(obs.capacity_slots, dtype=float), 0.0),
        epoch_s=float(obs.epoch_s),
        util_grid=None if obs.util_grid is None else np.asarray(obs.util_grid, dtype=float),
        wait_curve_s=obs.wait_curve_s,
        slo_miss_curve=obs.slo_miss_curve,
        coef=np.array(
            [
                model.coef["carbon"],
                model.coef["water"],
                model.coef["cost"],
                model.coef["latency"],
                weights.slo_penalty / n_all,
            ]
        ),
    )
    ep.fixed = greedy_shares(obs, ep, unit_cost(obs, ep, weights), 0.7)
    return ep


def unit_cost(obs: Observation, ep: EpochProblem, w: ObjectiveWeights) -> np.ndarray:
    """Per-request J of each pair without queueing, ``[C, O, R]``, for weights ``w``."""
    n_int = request_counts(obs, w)[0]
    per_r = (
        w.carbon / scale(obs, "carbon_kg", needed=w.carbon != 0) * ep.carbon_kg
        + w.water / scale(obs, "water_m3", needed=w.water != 0) * ep.water_m3
        + w.cost / scale(obs, "cost_usd", needed=w.cost != 0) * ep.cost_usd
    )  # [C, R]
    unit = np.repeat(per_r[:, None, :], ep.mask.shape[1], axis=1)
    ttft_scale = scale(obs, "ttft_mean_s", needed=w.latency != 0)
    unit[INTERACTIVE] += w.latency / (ttft_scale * n_int) * ep.ttft_s
    return unit


def greedy_shares(
    obs: Observation, ep: EpochProblem, unit: np.ndarray, target: float
) -> np.ndarray:
    """Fill the cheapest allowed regions up to ``target`` utilisation, interactive work first
    and most-constrained origins first; what does not fit goes in proportion to capacity."""
    n_c, n_o, n_r = ep.mask.shape
    free_slots = np.maximum(target * ep.cap_slots - ep.base_busy, 0.0)
    route = np.zeros((n_c, n_o, n_r))
    for c in (INTERACTIVE, DEFERRABLE):
        for o in np.argsort(ep.mask[c].sum(axis=1), kind="stable"):
            ok = np.flatnonzero(ep.mask[c, o])
            if ok.size == 0:
                continue
            order = ok[np.argsort(unit[c, o, ok], kind="stable")]
            need = float(ep.counts[c, o])
            alloc = np.zeros(n_r)
            for r in order:
                if need <= 1e-9:
                    break
                fits = free_slots[r] * ep.epoch_s / max(float(ep.slot_s[c, r]), 1e-9)
                take = min(need, fits)
                alloc[r] += take
                free_slots[r] -= take * ep.slot_s[c, r] / ep.epoch_s
                need -= take
            if need > 1e-9:
                cap = ep.cap_slots[ok]
                alloc[ok] += need * (cap / cap.sum() if cap.sum() > 0 else 1.0 / ok.size)
            if alloc.sum() <= 0:
                alloc[order[0]] = 1.0
            route[c, o] = alloc / alloc.sum()
    return route


def local_shares(obs: Observation, ep: EpochProblem) -> np.ndarray:
    """Each origin's own region when allowed, else the nearest allowed one."""
    route = np.zeros(ep.mask.shape)
    for c in range(ep.mask.shape[0]):
        for o, origin in enumerate(obs.origins):
            ok = np.flatnonzero(ep.mask[c, o])
            if ok.size == 0:
                continue
            r = obs.regions.index(origin) if origin in obs.regions else -1
            if r < 0 or not ep.mask[c, o, r]:
                r = int(ok[np.argmin(obs.latency_s[o, ok])])
            route[c, o, r] = 1.0
    return route


def capacity_shares(ep: EpochProblem) -> np.ndarray:
    w = ep.mask * np.maximum(ep.cap_slots, 1e-9)[None, None, :]
    return w / np.maximum(w.sum(axis=-1, keepdims=True), 1e-12)


@functools.cache
def _pymoo() -> tuple[type, type]:
    """(pymoo's NSGA2, the epoch problem class), imported on first use: pymoo is the optional
    ``[opt]`` extra and takes ~0.3 s to import, which every other policy's run should not pay."""
    try:
        from pymoo.algorithms.moo.nsga2 import NSGA2
        from pymoo.config import Config
        from pymoo.core.problem import Problem
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "pymoo":
            raise
        raise ConfigError(
            "policy 'nsga2' needs pymoo: install the [opt] extra (pip install 'greenroute[opt]')"
        ) from None
    Config.warnings["not_compiled"] = False  # pymoo would print its notice on stdout (--json)

    class EpochMOP(Problem):
        """pymoo problem over the genes; records the best J seen (the incumbent)."""

        def __init__(self, ep: EpochProblem) -> None:
            super().__init__(n_var=ep.n_genes, n_obj=len(OBJECTIVES), xl=0.0, xu=1.0)
            self.ep = ep
            self.best_j = np.inf
            self.best_x: np.ndarray | None = None

        def _evaluate(self, x, out, *args, **kwargs):
            f, j = self.ep.evaluate(self.ep.shares(x))
            k = int(np.argmin(j))
            if j[k] < self.best_j:
                self.best_j, self.best_x = float(j[k]), np.array(x[k], dtype=float)
            out["F"] = f

    return NSGA2, EpochMOP


@register_geo_policy(
    "nsga2",
    "NSGA-II (pymoo) per epoch over carbon, water, cost, TTFT; picks by the weights. Spatial.",
    units={
        "pop_size": "plans",
        "generations": "generations",
        "patience": "generations",
        "max_utilisation": "share of usable slots",
        "weights": "objective weights",
    },
)
class NSGA2Policy:
    """Per-epoch NSGA-II plan search; see the module docstring."""

    name = "nsga2"
    uses_weights = True  # optimises obs.weights (or its own ``weights`` option)

    def __init__(
        self,
        weights: dict | None = None,
        pop_size: int = 40,
        generations: int = 25,
        patience: int = 6,
        max_utilisation: float = DEFAULT_MAX_UTILISATION,
    ) -> None:
        self.weights = objective_weights_option(weights)
        _pymoo()  # the optional extra must be installed (one clear error otherwise)
        self.pop_size = max(int(pop_size), 4)
        self.generations = max(int(generations), 1)
        self.patience = max(int(patience), 1)
        self.max_util = float(max_utilisation)
        self.seed = 0
        self._reset_stats()

    def _reset_stats(self) -> None:
        self.plan_times: list[float] = []
        self.gens: list[int] = []
        self.front_sizes: list[int] = []
        self.prev: np.ndarray | None = None
        self.last_front: np.ndarray | None = None  # [n, 4] objectives of the last front

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        self.cluster = cluster
        self.seed = int(seed)
        self._reset_stats()

    def summary(self) -> dict:
        t = np.asarray(self.plan_times) * 1e3
        if t.size == 0:
            return {}
        return {
            "generations_mean": float(np.mean(self.gens)),
            "front_size_mean": float(np.mean(self.front_sizes)),
            "plan_ms_mean": float(t.mean()),
            "plan_ms_p95": float(np.percentile(t, 95)),
            "epochs": int(t.size),
        }

    def plan(self, obs: Observation) -> Plan:
        t0 = time.perf_counter()
        w = self.weights or obs.weights
        model = build_cost_model(obs, w, self.max_util)
        ep = build_epoch_problem(obs, model, w)
        if ep.n_genes == 0:  # nothing to decide
            route, gens, front = ep.shares(np.zeros((1, 0)))[0], 0, 1
            self.last_front = ep.evaluate(route)[0]
        else:
            route, gens, front = self._search(obs, ep, w)
        route = np.where(obs.allowed, route, 0.0)
        self.prev = route
        self.plan_times.append(time.perf_counter() - t0)
        self.gens.append(gens)
        self.front_sizes.append(front)
        return Plan(
            route=route, hold=np.zeros(obs.n_origins), rationale=_rationale(obs, ep, route, front)
        )

    def _initial(self, obs: Observation, ep: EpochProblem, w, rng) -> np.ndarray:
        cands = [local_shares(obs, ep), capacity_shares(ep), ep.fixed]
        unit = unit_cost(obs, ep, w)
        cands += [greedy_shares(obs, ep, unit, t) for t in GREEDY_TARGETS]
        cands += [greedy_shares(obs, ep, unit_cost(obs, ep, cw), 0.7) for cw in CORNERS]
        if self.prev is not None and self.prev.shape == ep.mask.shape:
            cands.append(self.prev)
        x = np.unique(np.round([ep.genes_of(s) for s in cands], 12), axis=0)
        x = x[: self.pop_size]
        n_rand = self.pop_size - len(x)
        rand = rng.random((n_rand, ep.n_genes))
        rand[1::2] **= 3  # every other one concentrated on fewer regions
        return np.clip(np.vstack([x, rand]), 0.0, 1.0)

    def _search(self, obs: Observation, ep: EpochProblem, w) -> tuple[np.ndarray, int, int]:
        ss = np.random.SeedSequence([self.seed, int(obs.epoch), 0x5A2])
        rng = np.random.default_rng(ss)
        NSGA2, EpochMOP = _pymoo()
        problem = EpochMOP(ep)
        algo = NSGA2(pop_size=self.pop_size, sampling=self._initial(obs, ep, w, rng))
        algo.setup(
            problem,
            termination=("n_gen", self.generations),
            seed=int(ss.generate_state(1)[0]),
            verbose=False,
        )
        gens, best, stale = 0, np.inf, 0
        while algo.has_next():
            algo.next()
            gens += 1
            if not np.isfinite(best) or problem.best_j < best - 1e-9 * max(abs(best), 1.0):
                best, stale = problem.best_j, 0
            else:
                stale += 1
                if stale >= self.patience:
                    break
        front_x = np.atleast_2d(algo.opt.get("X"))
        front_f = np.atleast_2d(algo.opt.get("F"))
        _, j = ep.evaluate(ep.shares(front_x))
        k = int(np.argmin(j))
        chosen = front_x[k]
        if problem.best_x is not None and problem.best_j < j[k]:
            chosen = problem.best_x  # the elitist front dropped the best J seen (crowding)
        self.last_front = front_f
        return ep.shares(chosen)[0], gens, len(front_x)


def _rationale(obs: Observation, ep: EpochProblem, route: np.ndarray, front: int) -> str:
    share = (route * ep.counts[..., None]).sum(axis=(0, 1))
    tot = share.sum()
    if tot <= 0:
        return "NSGA-II: no demand"
    top = np.argsort(share)[::-1][:3]
    parts = [f"{obs.regions[r]} {100 * share[r] / tot:.0f}%" for r in top if share[r] > 0]
    return f"NSGA-II ({front} on the front): {', '.join(parts)}"
