"""The Python API (the CLI is a thin layer over it).

>>> import greenroute
>>> res = greenroute.run(scenario="demo", policy="lowest-carbon", seed=0)
>>> res.metrics["carbon_kg"], res.epochs.head()
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from greenroute.constraints import ConstraintSet
from greenroute.core.errors import ConfigError
from greenroute.core.types import GeoPolicy, LocalPolicy, ObjectiveWeights
from greenroute.data.paths import resolve_data_dir
from greenroute.scenarios import resolve_scenario
from greenroute.sim.engine import Prepared, SimConfig, Simulation, prepare
from greenroute.sim.results import RunResult
from greenroute.sim.scenario import Scenario


def reference_scales(prep: Prepared) -> dict:
    """Normalisation of the objective (``local-only`` + ``least-loaded``, fluid, same scenario,
    seed and data), cached in memory and on disk: see :mod:`greenroute.sim.reference`."""
    from greenroute.policies.registry import local_policy_factory
    from greenroute.sim.reference import reference_scales as _reference

    return _reference(prep, local_policy_factory("least-loaded"))


def _policy(policy: str | GeoPolicy, options: dict | None) -> GeoPolicy:
    from greenroute.policies.registry import make_geo_policy

    if isinstance(policy, str):
        return make_geo_policy(policy, **(options or {}))
    if options:
        raise ConfigError(
            f"policy options {sorted(options)} apply to a policy given by name, not to the "
            f"object {getattr(policy, 'name', policy)!r}"
        )
    return policy


def run(
    scenario: str | Scenario = "demo",
    policy: str | GeoPolicy = "lowest-carbon",
    *,
    local_policy: str | LocalPolicy = "least-loaded",
    seed: int = 0,
    days: float | None = None,
    data_dir: str | Path | None = None,
    fidelity: str | None = None,
    constraints: ConstraintSet | None = None,
    weights: ObjectiveWeights | None = None,
    forecast: str = "perfect",
    forecast_error: float = 0.0,
    facility: str | None = None,
    policy_options: dict | None = None,
    on_invalid: str = "raise",
    record_requests: bool = False,
    prepared: Prepared | None = None,
    progress: Callable[[int, int], None] | None = None,
    cache: bool = True,
) -> RunResult:
    """Simulate one geo policy on a scenario and return its metrics and per-epoch frame.

    ``cache=False`` (or ``GREENROUTE_NO_CACHE=1``) neither reads nor writes the on-disk cache
    of parsed data files and reference scales (:mod:`greenroute.data.cache`)."""
    from greenroute.data.cache import use_cache

    with use_cache(cache):
        return _run(scenario, policy, local_policy=local_policy, seed=seed, days=days,
                    data_dir=data_dir, fidelity=fidelity, constraints=constraints,
                    weights=weights, forecast=forecast, forecast_error=forecast_error,
                    facility=facility, policy_options=policy_options, on_invalid=on_invalid,
                    record_requests=record_requests, prepared=prepared,
                    progress=progress)  # fmt: skip


def _run(scenario, policy, *, local_policy, seed, days, data_dir, fidelity, constraints, weights,
         forecast, forecast_error, facility, policy_options, on_invalid, record_requests,
         prepared, progress) -> RunResult:  # fmt: skip
    from greenroute.policies.registry import local_policy_factory
    from greenroute.sim.reference import LazyScales

    if prepared is None:
        sc = resolve_scenario(
            scenario, days=days, fidelity=fidelity, constraints=constraints, facility=facility
        )
        prepared = prepare(sc, seed=seed, data_dir=resolve_data_dir(data_dir))
    if forecast == "noisy" and not forecast_error > 0:
        raise ConfigError("--forecast noisy needs --forecast-error > 0")
    if forecast_error > 0 and forecast == "perfect":
        forecast = "noisy"
    config = SimConfig(
        seed=seed,
        forecast=forecast,
        forecast_error=forecast_error,
        weights=weights or ObjectiveWeights(),
        on_invalid=on_invalid,
        record_requests=record_requests,
        # simulated on first read only (a policy reading obs.objective_scales, or the result's
        # objective), and then cached in memory and on disk: see greenroute.sim.reference
        objective_scales=LazyScales(prepared, local_policy_factory("least-loaded")),
    )
    geo = _policy(policy, policy_options)
    local = local_policy_factory(local_policy)
    sim = Simulation(prepared, geo, local, config, progress=progress)
    return sim.run()


def compare(
    scenario: str | Scenario = "demo",
    policies: Sequence[str | GeoPolicy] = ("local-only", "lowest-carbon"),
    *,
    seed: int = 0,
    days: float | None = None,
    data_dir: str | Path | None = None,
    on_result: Callable[[RunResult], None] | None = None,
    oracle_gap: bool = True,
    cache: bool = True,
    **kwargs,
) -> list[RunResult]:
    """Run several policies on the same prepared scenario (same workload, signals, seed).

    With ``oracle_gap`` (default) and a scenario where the oracle is computable (two or more
    regions), each result gains ``oracle_gap_pct`` and ``oracle_carbon_gap_pct``: the share of
    the oracle's weighted-objective (resp. carbon) savings over ``local-only`` it captures.
    ``local-only`` and ``oracle`` are run for this if they are not in ``policies``.
    ``cache`` as in :func:`run`.
    """
    from greenroute.data.cache import use_cache

    with use_cache(cache):
        return _compare(scenario, policies, seed=seed, days=days, data_dir=data_dir,
                        on_result=on_result, oracle_gap=oracle_gap, **kwargs)  # fmt: skip


def _compare(scenario, policies, *, seed, days, data_dir, on_result, oracle_gap, **kwargs):
    sc = resolve_scenario(
        scenario,
        days=days,
        fidelity=kwargs.pop("fidelity", None),
        constraints=kwargs.pop("constraints", None),
        facility=kwargs.pop("facility", None),
    )
    prep = prepare(sc, seed=seed, data_dir=resolve_data_dir(data_dir))
    out = []
    for p in policies:
        res = run(sc, p, seed=seed, prepared=prep, **kwargs)
        out.append(res)
        if on_result is not None:
            on_result(res)
    if oracle_gap and oracle_computable(sc):
        by_name = {r.policy: r for r in out}
        kw = {k: v for k, v in kwargs.items() if k not in ("policy_options", "progress")}
        base = by_name.get("local-only") or run(sc, "local-only", seed=seed, prepared=prep, **kw)
        orc = by_name.get("oracle") or run(sc, "oracle", seed=seed, prepared=prep, **kw)
        add_oracle_gaps(out, base, orc)
    return out


def oracle_computable(sc: Scenario) -> bool:
    """The oracle needs a choice of regions (spatial) or deferrable work (temporal)."""
    return len(sc.regions) >= 2


def add_oracle_gaps(results: Sequence[RunResult], base: RunResult, orc: RunResult) -> None:
    """Share (%) of the oracle's savings over ``base`` that each result captures."""
    for key, out_key in (("objective", "oracle_gap_pct"), ("carbon_kg", "oracle_carbon_gap_pct")):
        b = base.metrics.get(key)
        o = orc.metrics.get(key)
        if b is None or o is None:
            continue
        saving = b - o
        for r in results:
            v = r.metrics.get(key)
            if v is None or abs(saving) < 1e-12 * max(abs(b), 1.0):
                r.metrics[out_key] = float("nan")
            else:
                r.metrics[out_key] = 100.0 * (b - v) / saving
    model_j = (orc.extras.get("policy_summary") or {}).get("lp_objective_j")
    for r in results:
        r.metrics["oracle_objective"] = float(orc.metrics.get("objective", float("nan")))
        if model_j is not None:
            r.metrics["oracle_lp_objective"] = float(model_j)


def run_manifest(path: str | Path, **overrides) -> RunResult:
    """Re-run exactly what a manifest describes (scenario, options, seed, data)."""
    from greenroute.core.errors import DataFormatError

    path = Path(path)
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataFormatError(path, "manifest not found") from None
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, f"not valid JSON ({exc.msg})", exc.lineno) from None
    required = ("scenario", "policy", "seed", "days")
    missing = [k for k in required if k not in m]
    if missing:
        raise DataFormatError(path, f"manifest lacks {missing}")
    data_dir = overrides.pop("data_dir", m.get("data_dir"))
    w = m.get("weights") or {}
    res = run(
        m["scenario"],
        m["policy"],
        local_policy=m.get("local_policy", "least-loaded"),
        seed=int(m["seed"]),
        days=float(m["days"]),
        data_dir=data_dir,
        fidelity=m.get("fidelity"),
        constraints=ConstraintSet.from_dict(m.get("constraints")),
        weights=ObjectiveWeights(**w) if w else None,
        forecast=m.get("forecast", "perfect"),
        forecast_error=float(m.get("forecast_error", 0.0)),
        facility=m.get("facility"),
        policy_options=m.get("policy_options") or None,
        on_invalid=m.get("on_invalid", "raise"),
        **overrides,
    )
    want = m.get("input_files_sha256") or {}
    got = res.manifest.get("input_files_sha256") or {}
    changed = sorted(k for k in want if want[k] != got.get(k))
    if changed:
        raise DataFormatError(path, f"input data changed since the manifest was written: {changed}")
    return res


def metrics_equal(a: dict, b: dict, rel: float = 1e-9) -> bool:
    for k in a:
        x, y = a[k], b.get(k)
        if isinstance(x, float) and isinstance(y, float):
            if math.isnan(x) and math.isnan(y):
                continue
            if not math.isclose(x, y, rel_tol=rel, abs_tol=1e-12):
                return False
        elif x != y:
            return False
    return True
