"""Prepare a checked scenario and run one policy on it: the core shared by
:mod:`greenroute.api` (``run``, ``compare``) and the experiment runners of this package
(``bench/pareto.py``), which may not import the API (imports point down DESIGN's list)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from greenroute.constraints import ConstraintSet
from greenroute.core.errors import ConfigError
from greenroute.core.types import GeoPolicy, LocalPolicy, ObjectiveWeights
from greenroute.data.paths import resolve_data_dir
from greenroute.scenarios import resolve_scenario
from greenroute.sim.engine import SimConfig, Simulation
from greenroute.sim.prepare import Prepared, prepare
from greenroute.sim.results import CompareResult, RunResult
from greenroute.sim.scenario import Scenario

AUTO_FIDELITY = "auto"  # the scenario's fidelity, or fluid when request-level would not fit


def prepare_checked(
    scenario: str | Scenario,
    *,
    seed: int = 0,
    data_dir: str | Path | None = None,
    days: float | None = None,
    fidelity: str | None = None,
    constraints: ConstraintSet | None = None,
    facility: str | None = None,
    server_model: str | None = None,
) -> tuple[Prepared, list[str]]:
    """Resolve the scenario with its options, check its window against the data and memory
    (:func:`greenroute.sim.bounds.check_window`) and prepare it; returns the prepared scenario
    and notes (e.g. an automatic switch to the fluid model)."""
    from greenroute.sim.bounds import check_window

    auto = fidelity == AUTO_FIDELITY
    sc = resolve_scenario(
        scenario,
        days=days,
        fidelity=None if auto else fidelity,
        constraints=constraints,
        facility=facility,
    )
    if server_model is not None:
        sc = sc.with_options(server_model=server_model)
    root = resolve_data_dir(data_dir)
    sc, notes = check_window(sc, root, auto_fidelity=auto)
    return prepare(sc, seed=seed, data_dir=root), notes


def make_policy(policy: str | GeoPolicy, options: dict | None) -> GeoPolicy:
    """A geo policy by name (with its typed options) or the object itself (no options)."""
    from greenroute.policies.registry import make_geo_policy

    if isinstance(policy, str):
        return make_geo_policy(policy, **(options or {}))
    if options:
        raise ConfigError(
            f"policy options {sorted(options)} apply to a policy given by name, not to the "
            f"object {getattr(policy, 'name', policy)!r}"
        )
    return policy


def run_prepared(
    prepared: Prepared,
    policy: str | GeoPolicy,
    *,
    local_policy: str | LocalPolicy = "least-loaded",
    seed: int = 0,
    weights: ObjectiveWeights | None = None,
    forecast: str = "perfect",
    forecast_error: float = 0.0,
    policy_options: dict | None = None,
    on_invalid: str = "raise",
    record_requests: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Simulate ``policy`` on a prepared scenario (see :func:`greenroute.api.run`)."""
    from greenroute.policies.registry import local_policy_factory
    from greenroute.sim.reference import LazyScales

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
    geo = make_policy(policy, policy_options)
    local = local_policy_factory(local_policy)
    return Simulation(prepared, geo, local, config, progress=progress).run()


# Notebook views of results, defined here (bench) because drawing needs plotly, which the
# simulator (sim, where the result classes live) does not import: a result renders as an HTML
# table in Jupyter and ``.plot(kind)`` returns a plotly figure (greenroute.bench.report).
def _results_html(self) -> str:
    from greenroute.bench.report import results_html

    return results_html([self] if isinstance(self, RunResult) else self)


def _results_plot(self, kind: str = "auto"):
    """A plotly figure: ``series`` (signals), ``shares``, ``metrics``, ``pareto``, ``oracle``
    (``auto``: routing shares of one run, metric bars of a comparison)."""
    from greenroute.bench.report import results_figure

    return results_figure([self] if isinstance(self, RunResult) else self, kind)


for _cls in (RunResult, CompareResult):
    _cls._repr_html_ = _results_html
    _cls.plot = _results_plot
