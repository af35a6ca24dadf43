"""SLIT baseline (seed 001 §6 [16]: Moore et al., "Sustainable carbon-aware and water-efficient
LLM scheduling in geo-distributed cloud datacenters", GLSVLSI 2025): the seed's own reference.

MARLIN says SLIT "combined a genetic algorithm and machine learning to generate
Pareto-optimal solutions" for TTFT, carbon, water and cost, and that it "lacks scalability and
has a slow convergence speed". Our reading, kept small:

- ML: SLIT forecasts each origin's next-epoch demand itself with a learned regressor. Here an
  online least-squares autoregression (``lags`` past epochs + intercept, ridge ``RIDGE``) per
  workload class, fitted on the demand the run has observed so far (the observation's current
  demand while there is too little history);
- GA: a generational genetic algorithm over routing matrices ``[C, O, R]`` (softmax of genes,
  masked by the hard constraints): tournament selection (size 2), uniform crossover of
  origin rows, Gaussian mutation, ``elite`` survivors, seeded by local-only, nearest and the
  previous epoch's plan. Fitness = the run's weighted objective of the plan under the
  optimisers' cost model (``policies/optimize/model.py``) on the ML demand: SLIT's Pareto
  set scalarised by its weights, as the run is scored.
"""

from __future__ import annotations

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.core.types import ClusterInfo, Observation, Plan
from greenroute.policies.baselines.common import local_route, normalise_rows
from greenroute.policies.optimize.model import build_cost_model, plan_cost
from greenroute.policies.registry import register_geo_policy

RIDGE = 1e-6  # ridge on the lag coefficients (relative to the normal matrix's mean diagonal)


def ar_forecast(history: np.ndarray, lags: int) -> np.ndarray | None:
    """One-step forecast of each column of ``history`` ``[T, K]`` by a shared least-squares
    AR(``lags``) with intercept; None when fewer than ``lags + 2`` rows exist."""
    t, k = history.shape
    if t < lags + 2:
        return None
    rows, ys = [], []
    for i in range(lags, t):
        for j in range(k):
            rows.append(np.concatenate([history[i - lags : i, j][::-1], [1.0]]))
            ys.append(history[i, j])
    x, y = np.array(rows), np.array(ys)
    a = x.T @ x
    pen = np.eye(a.shape[0])
    pen[-1, -1] = 0.0  # the intercept is not shrunk
    a += RIDGE * np.trace(a) / a.shape[0] * pen
    beta = np.linalg.solve(a, x.T @ y)
    last = np.concatenate([history[t - lags :, :][::-1].T, np.ones((k, 1))], axis=1)
    return np.maximum(last @ beta, 0.0)


@register_geo_policy(
    "slit",
    "Seed 001 baseline [16] (SLIT): genetic algorithm over routing plans scored by the "
    "weighted objective on an ML (autoregressive) demand forecast.",
    units={"population": "plans", "generations": "generations", "lags": "epochs"},
    help={
        "population": "GA population size",
        "generations": "GA generations per epoch",
        "elite": "best plans kept unchanged each generation",
        "mutation": "std of the Gaussian gene mutation",
        "lags": "autoregression order of the demand predictor",
    },
)
class SLITPolicy:
    name = "slit"
    uses_weights = True  # scores plans with obs.weights
    options: dict

    def __init__(
        self,
        population: int = 16,
        generations: int = 10,
        elite: int = 2,
        mutation: float = 0.5,
        lags: int = 3,
    ) -> None:
        if population < 4 or generations < 1 or not 0 <= elite < population or mutation < 0:
            raise ConfigError(
                "slit needs population >= 4, generations >= 1, 0 <= elite < population, "
                "mutation >= 0"
            )
        if lags < 1:
            raise ConfigError(f"lags must be >= 1, got {lags}")
        self.pop, self.gens, self.elite = int(population), int(generations), int(elite)
        self.sigma, self.lags = float(mutation), int(lags)

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        self.cluster = cluster
        self.rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x511]))
        self.history: list[np.ndarray] = []
        self.prev_genes: np.ndarray | None = None

    def predict_demand(self, obs: Observation) -> np.ndarray:
        """Requests ``[C, O]`` of this epoch by the online autoregression (module docstring)."""
        self.history.append(np.asarray(obs.demand_rps[0], dtype=float))
        if len(self.history) < 2:
            return obs.demand_rps[0] * obs.epoch_s
        hist = np.stack(self.history[:-1])  # observed so far, without the epoch to predict
        out = np.array(obs.demand_rps[0], dtype=float)
        for c in range(hist.shape[1]):
            f = ar_forecast(hist[:, c, :], self.lags)
            if f is not None:
                out[c] = f
        return out * obs.epoch_s

    def routes(self, genes: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        z = np.where(allowed, genes, -np.inf)
        z = z - np.where(allowed.any(axis=-1, keepdims=True), z.max(axis=-1, keepdims=True), 0)
        return normalise_rows(np.where(allowed, np.exp(z), 0.0), allowed)

    def plan(self, obs: Observation) -> Plan:
        model = build_cost_model(obs)
        dem = self.predict_demand(obs)  # [C, O]
        allowed = obs.allowed
        shape = allowed.shape

        def fitness(g: np.ndarray) -> float:
            return plan_cost(model, dem[:, :, None] * self.routes(g, allowed))

        seeds = [np.log(np.maximum(local_route(obs), 1e-6))]
        near = np.zeros(shape)
        near[:, np.arange(shape[1]), obs.latency_s.argmin(axis=1)] = 1.0
        seeds.append(np.log(np.maximum(near, 1e-6)))
        if self.prev_genes is not None and self.prev_genes.shape == shape:
            seeds.append(self.prev_genes)
        pop = [*seeds, *self.rng.normal(0.0, 1.0, (self.pop - len(seeds), *shape))]
        fit = np.array([fitness(g) for g in pop])
        for _ in range(self.gens):
            order = np.argsort(fit, kind="stable")
            new = [pop[i] for i in order[: self.elite]]
            while len(new) < self.pop:
                a, b = (self._tournament(fit) for _ in range(2))
                mask = self.rng.random(shape[1]) < 0.5  # uniform crossover of origin rows
                child = np.where(mask[None, :, None], pop[a], pop[b])
                child = child + self.rng.normal(0.0, self.sigma, shape)
                new.append(child)
            pop = new
            fit = np.array([fitness(g) for g in pop])
        best = int(np.argmin(fit))
        self.prev_genes = np.clip(pop[best], -20.0, 20.0)
        route = self.routes(pop[best], allowed)
        return Plan(route=route, rationale=f"slit: GA best objective {fit[best]:.4g}")

    def _tournament(self, fit: np.ndarray) -> int:
        i, j = self.rng.integers(len(fit), size=2)
        return int(i if fit[i] <= fit[j] else j)
