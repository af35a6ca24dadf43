"""Pareto fronts and hypervolume of policies over (carbon, water, cost, latency).

Seed 001 section 6.1 compares frameworks by the Pareto hypervolume (PHV) of their points:
the volume of metric space dominated by a policy's points, up to a reference point "for the
worst observed metrics"; a single-point method gets the volume of the hyperrectangle between
its point and the reference point. Here:

- every weight-parametrised policy (``uses_weights = True``: lp-mpc, oracle, nsga2, ...) runs
  once per weight vector of a deterministic sweep (:func:`weight_set`), every other policy
  once, all on one prepared scenario (same workload, signals and seed);
- each run gives a point (carbon_kg, water_m3, cost_usd, ttft_mean_s), all minimised;
- the reference point is the worst value of each metric over all runs (the nadir) moved
  :data:`REFERENCE_MARGIN` (10 %) beyond it: ``ref = worst + 0.1 x |worst|``. Taken exactly at
  the worst values, every point that is the worst in some metric lies on the reference
  boundary and adds no volume: with few weight vectors (each a corner of the weight simplex,
  hence the worst in some other metric) every policy got hypervolume 0, contrary to seed 001's
  intent that each point's hyperrectangle counts. The margin is the usual remedy (Ishibuchi
  et al., "How to specify a reference point in hypervolume calculation", GECCO 2018, take
  ``1 + 1/H`` of the normalised nadir; we use a fixed 1.1 so values compare across sweeps);
- before the hypervolume, each metric is divided by its reference value, so the reference
  point becomes (1, 1, 1, 1), the hypervolume lies in [0, 1] and no unit dominates (a metric
  whose reference is <= 0 is left out: every point gets 0 in it);
- the hypervolume is pymoo's ``HV`` indicator (``pymoo.indicators.hv``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.core.objective import DEFAULT_SLO_PENALTY, PRESETS
from greenroute.core.types import ObjectiveWeights

METRICS = ("carbon_kg", "water_m3", "cost_usd", "ttft_mean_s")
WEIGHT_KEYS = ("carbon", "water", "cost", "latency")
# reference point = nadir (worst observed) + this share of |nadir| (module docstring)
REFERENCE_MARGIN = 0.1
NORMALISATION = (
    "reference point = worst observed value of each metric x 1.1; each metric divided by it "
    "before HV"
)


# ------------------------------------------------------------------ front and hypervolume
def non_dominated(points: np.ndarray) -> np.ndarray:
    """Boolean mask of the points no other point dominates (all metrics minimised).

    ``a`` dominates ``b`` if it is no worse in every metric and better in one; equal points do
    not dominate each other (both stay). Rows with a non-finite value are never on the front.
    """
    f = np.atleast_2d(np.asarray(points, dtype=float))
    n = len(f)
    if n == 0:
        return np.zeros(0, dtype=bool)
    finite = np.isfinite(f).all(axis=1)
    le = (f[:, None, :] <= f[None, :, :]).all(axis=2)  # le[i, j]: i no worse than j
    lt = (f[:, None, :] < f[None, :, :]).any(axis=2)
    dom = le & lt & finite[:, None]  # dom[i, j]: i dominates j
    return finite & ~dom.any(axis=0)


def nadir(points: np.ndarray) -> np.ndarray:
    """The worst observed value of each metric (seed 001 section 6.1), finite rows only."""
    f = np.atleast_2d(np.asarray(points, dtype=float))
    f = f[np.isfinite(f).all(axis=1)]
    if len(f) == 0:
        raise ConfigError("no run produced finite metrics: no reference point")
    return f.max(axis=0)


def reference_point(points: np.ndarray, margin: float = REFERENCE_MARGIN) -> np.ndarray:
    """The nadir moved ``margin`` beyond it: ``worst + margin x |worst|`` (module docstring),
    so that the worst point in a metric still adds volume."""
    worst = nadir(points)
    return worst + margin * np.abs(worst)


def normalise(points: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Divide each metric by its reference value (a zero reference leaves the metric at 0)."""
    f = np.atleast_2d(np.asarray(points, dtype=float))
    ref = np.asarray(ref, dtype=float)
    return np.where(ref > 0, f / np.where(ref > 0, ref, 1.0), 0.0)


def hypervolume(points: np.ndarray, ref: np.ndarray, *, normalised: bool = True) -> float:
    """Hypervolume of ``points`` up to ``ref`` with pymoo's HV indicator.

    With ``normalised`` (the default) the metrics are first divided by ``ref``, so the result
    is a share of the box [0, ref] (and a single point gives prod(1 - f_i / ref_i)).
    """
    from pymoo.indicators.hv import HV

    ref = np.asarray(ref, dtype=float)
    f = np.asarray(points, dtype=float).reshape(-1, ref.size)
    f = f[np.isfinite(f).all(axis=1)]
    if normalised:
        f = normalise(f, ref)
        ref = np.ones_like(ref)
    f = f[(f < ref).all(axis=1)]  # points on or beyond the reference add no volume
    if len(f) == 0:
        return 0.0
    return float(HV(ref_point=ref)(f))


# ------------------------------------------------------------------ weight sweep
def weight_set(n: int, seed: int = 0) -> list[ObjectiveWeights]:
    """``n`` deterministic weight vectors over (carbon, water, cost, latency), each summing to 1.

    Order: the 4 single-objective corners (min-carbon, min-water, min-cost, min-latency),
    ``balanced``, the 6 edge midpoints and the 4 face centroids of the simplex (a lattice),
    then Dirichlet(1, 1, 1, 1) samples from ``seed``. The SLO penalty is the default one.
    """
    if n < 1:
        raise ConfigError(f"--sweep-weights must be >= 1 (got {n})")
    base: list[tuple[float, ...]] = []
    for k in ("min-carbon", "min-water", "min-cost", "min-latency", "balanced"):
        p = PRESETS[k]
        base.append((p.carbon, p.water, p.cost, p.latency))
    eye = np.eye(4)
    for i in range(4):
        for j in range(i + 1, 4):
            base.append(tuple((eye[i] + eye[j]) / 2))
    for skip in range(3, -1, -1):
        base.append(tuple(np.where(np.arange(4) == skip, 0.0, 1.0 / 3.0)))
    if n > len(base):
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xFA2E]))
        for v in rng.dirichlet(np.ones(4), size=n - len(base)):
            v = np.round(v, 4)
            v[-1] = max(1.0 - v[:-1].sum(), 0.0)
            base.append(tuple(v))
    return [
        ObjectiveWeights(*(float(x) for x in v), slo_penalty=DEFAULT_SLO_PENALTY) for v in base[:n]
    ]


def weights_label(w: ObjectiveWeights | None) -> str:
    """A preset name, or ``c=0.5,w=0.5`` (non-zero weights only)."""
    if w is None:
        return "—"
    for name, p in PRESETS.items():
        if p == w:
            return name
    short = {"carbon": "c", "water": "w", "cost": "$", "latency": "l"}
    return ",".join(f"{short[k]}={getattr(w, k):.2g}" for k in WEIGHT_KEYS if getattr(w, k) > 0)


# ------------------------------------------------------------------ runner
@dataclass
class ParetoPoint:
    policy: str
    weights: ObjectiveWeights | None  # None: the policy does not use weights (one run)
    metrics: dict[str, float]  # the four METRICS
    slo_violation_pct: float = math.nan
    non_dominated: bool = False  # over all runs
    non_dominated_in_policy: bool = False  # among the policy's own runs

    def vector(self) -> np.ndarray:
        return np.array([self.metrics[k] for k in METRICS], dtype=float)

    def to_json(self) -> dict:
        return {
            "policy": self.policy,
            "weights": None if self.weights is None else _weights_dict(self.weights),
            "metrics": {k: _num(v) for k, v in self.metrics.items()},
            "slo_violation_pct": _num(self.slo_violation_pct),
            "non_dominated": self.non_dominated,
            "non_dominated_in_policy": self.non_dominated_in_policy,
        }


@dataclass
class ParetoResult:
    scenario: str
    seed: int
    days: float
    points: list[ParetoPoint]
    reference_point: dict[str, float]  # nadir x (1 + REFERENCE_MARGIN)
    hypervolume: dict[str, float]  # per policy and "all"
    policies: list[str] = field(default_factory=list)
    nadir: dict[str, float] = field(default_factory=dict)  # worst observed value per metric

    @property
    def front(self) -> list[ParetoPoint]:
        return [p for p in self.points if p.non_dominated]

    def to_json(self) -> dict:
        return {
            "scenario": self.scenario,
            "seed": self.seed,
            "days": self.days,
            "metrics": list(METRICS),
            "normalisation": NORMALISATION,
            "reference_point": {k: _num(v) for k, v in self.reference_point.items()},
            "reference_margin": REFERENCE_MARGIN,
            "nadir": {k: _num(v) for k, v in self.nadir.items()},
            "points": [p.to_json() for p in self.points],
            "front": [p.to_json() for p in self.front],
            "hypervolume": dict(self.hypervolume),
            "hypervolume_pct_of_all": {
                k: (100.0 * v / self.hypervolume["all"] if self.hypervolume["all"] > 0 else None)
                for k, v in self.hypervolume.items()
            },
        }


def analyse(points: list[ParetoPoint], policies: Sequence[str]) -> tuple[dict, dict]:
    """Mark the fronts on ``points``; return the reference point and hypervolumes."""
    f = np.array([p.vector() for p in points], dtype=float).reshape(-1, len(METRICS))
    ref = reference_point(f)
    for p, nd in zip(points, non_dominated(f), strict=True):
        p.non_dominated = bool(nd)
    hv: dict[str, float] = {}
    for name in policies:
        idx = [i for i, p in enumerate(points) if p.policy == name]
        for i, nd in zip(idx, non_dominated(f[idx]), strict=True):
            points[i].non_dominated_in_policy = bool(nd)
        hv[name] = hypervolume(f[idx], ref)
    hv["all"] = hypervolume(f, ref)
    return dict(zip(METRICS, (float(x) for x in ref), strict=True)), hv


def pareto_sweep(
    scenario: str = "demo",
    policies: Sequence[str] = ("local-only", "lp-mpc"),
    n_weights: int = 5,
    *,
    seed: int = 0,
    days: float | None = None,
    data_dir: str | Path | None = None,
    on_start: Callable[[str, ObjectiveWeights | None, int, int], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    **run_kwargs,
) -> ParetoResult:
    """Run the sweep on one prepared scenario and analyse the points.

    ``on_start(policy, weights, i, total)`` is called before each run, ``progress`` per epoch
    (as in :func:`greenroute.api.run`). Extra keyword arguments go to
    :func:`greenroute.bench.runner.run_prepared` (``local_policy``, ``forecast``, ...).
    """
    from greenroute.bench.runner import prepare_checked, run_prepared

    names = list(dict.fromkeys(p.strip() for p in policies if p and p.strip()))
    if not names:
        raise ConfigError("--policies is empty")
    weights = weight_set(int(n_weights), seed)
    plan = [(name, _uses_weights(name)) for name in names]
    prep, _notes = prepare_checked(
        scenario,
        seed=seed,
        data_dir=data_dir,
        days=days,
        fidelity=run_kwargs.pop("fidelity", None),
        constraints=run_kwargs.pop("constraints", None),
        facility=run_kwargs.pop("facility", None),
    )
    sc = prep.scenario
    jobs = [(name, w) for name, uses in plan for w in (weights if uses else [None])]
    points: list[ParetoPoint] = []
    result_days = sc.simulated_days  # whole epochs, as in every result's metrics["days"]
    for i, (name, w) in enumerate(jobs):
        if on_start is not None:
            on_start(name, w, i, len(jobs))
        res = run_prepared(prep, name, seed=seed, weights=w, progress=progress, **run_kwargs)
        m = res.metrics
        result_days = float(m.get("days", result_days))
        points.append(
            ParetoPoint(
                policy=name,
                weights=w,
                metrics={k: float(m[k]) for k in METRICS},
                slo_violation_pct=float(m.get("slo_violation_pct", math.nan)),
            )
        )
    ref, hv = analyse(points, names)
    worst = nadir(np.array([p.vector() for p in points]))
    return ParetoResult(
        scenario=sc.name,
        seed=int(seed),
        days=result_days,
        points=points,
        reference_point=ref,
        hypervolume=hv,
        policies=names,
        nadir=dict(zip(METRICS, (float(x) for x in worst), strict=True)),
    )


def _uses_weights(name: str) -> bool:
    from greenroute.policies.registry import geo_policy_names, make_geo_policy

    if name not in geo_policy_names() and not name.startswith("rl:"):
        raise UnknownNameError("policy", name, geo_policy_names())
    return bool(getattr(make_geo_policy(name), "uses_weights", False))


def _weights_dict(w: ObjectiveWeights) -> dict[str, float]:
    return {k: float(v) for k, v in w.as_dict().items()}


def _num(v: float) -> float | None:
    return float(v) if v is not None and math.isfinite(v) else None
