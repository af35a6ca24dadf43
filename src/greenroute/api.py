"""The Python API (the CLI is a thin layer over it).

>>> import greenroute
>>> res = greenroute.run(scenario="demo", policy="lowest-carbon", seed=0)
>>> res.metrics["carbon_kg"], res.epochs.head()
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from greenroute.bench.runner import AUTO_FIDELITY, prepare_checked, run_prepared
from greenroute.constraints import ConstraintSet
from greenroute.core.types import GeoPolicy, LocalPolicy, ObjectiveWeights
from greenroute.scenarios import resolve_scenario
from greenroute.sim.prepare import Prepared
from greenroute.sim.results import CompareResult, RunResult
from greenroute.sim.scenario import Scenario

__all__ = [
    "AUTO_FIDELITY",
    "add_oracle_gaps",
    "compare",
    "metrics_equal",
    "oracle_computable",
    "prepare_checked",
    "reference_scales",
    "report",
    "resolve_scenario",
    "results",
    "run",
    "run_manifest",
    "sweep",
]
# oracle savings below this share of local-only's value make "share of the oracle's savings
# captured" meaningless (a ratio of two numbers near zero): reported NaN with a note
ORACLE_MIN_SAVING_FRACTION = 1e-3  # 0.1 % of the baseline


def reference_scales(prep: Prepared) -> dict:
    """Normalisation of the objective (``local-only`` + ``least-loaded``, fluid, same scenario,
    seed and data), cached in memory and on disk: see :mod:`greenroute.sim.reference`."""
    from greenroute.policies.registry import local_policy_factory
    from greenroute.sim.reference import reference_scales as _reference

    return _reference(prep, local_policy_factory("least-loaded"))


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
    server_model: str | None = None,
    policy_options: dict | None = None,
    on_invalid: str = "raise",
    record_requests: bool = False,
    prepared: Prepared | None = None,
    progress: Callable[[int, int], None] | None = None,
    cache: bool = True,
) -> RunResult:
    """Simulate one geo policy on a scenario and return its metrics and per-epoch frame.

    ``days`` must be a finite number > 0; it is rounded up to whole epochs and the result's
    ``metrics["days"]`` is the simulated span (``days_requested`` what was asked; a note says
    when they differ). A window past the real data or too large for memory is refused before
    anything runs (:mod:`greenroute.sim.bounds`); ``fidelity="auto"`` runs the scenario's
    fidelity, or the fluid model when a request-level run would not fit in memory.
    ``forecast`` (default ``perfect``: the true future) is stated in the result and manifest.
    ``server_model``: ``"iteration"`` (iteration-level continuous batching, the default for
    LLM servers) or ``"slots"`` (one placement per request; the only choice for throughput
    servers); the fluid model follows it; recorded in the result's ``server_model`` and the
    manifest.

    ``cache=False`` (or ``GREENROUTE_NO_CACHE=1``) neither reads nor writes the on-disk cache
    of parsed data files and reference scales (:mod:`greenroute.data.cache`)."""
    from greenroute.data.cache import use_cache

    _policy_plugins([policy])
    with use_cache(cache):
        return _run(scenario, policy, local_policy=local_policy, seed=seed, days=days,
                    data_dir=data_dir, fidelity=fidelity, constraints=constraints,
                    weights=weights, forecast=forecast, forecast_error=forecast_error,
                    facility=facility, server_model=server_model,
                    policy_options=policy_options, on_invalid=on_invalid,
                    record_requests=record_requests, prepared=prepared,
                    progress=progress)  # fmt: skip


def _policy_plugins(policies) -> None:
    """Register the ``llm:`` policies (greenroute.agent, a layer above policies) when asked."""
    if any(isinstance(p, str) and p.startswith("llm:") for p in policies):
        import greenroute.agent.policy  # noqa: F401  (registers the llm: prefix)


def _run(scenario, policy, *, local_policy, seed, days, data_dir, fidelity, constraints, weights,
         forecast, forecast_error, facility, server_model, policy_options, on_invalid,
         record_requests, prepared, progress) -> RunResult:  # fmt: skip
    notes: list[str] = []
    if prepared is None:
        prepared, notes = prepare_checked(
            scenario,
            seed=seed,
            data_dir=data_dir,
            days=days,
            fidelity=fidelity,
            constraints=constraints,
            facility=facility,
            server_model=server_model,
        )
    elif server_model is not None and server_model != prepared.scenario.resolved_server_model:
        from greenroute.core.errors import ConfigError

        raise ConfigError(
            f"server_model={server_model!r} differs from the prepared scenario's "
            f"{prepared.scenario.resolved_server_model!r}; prepare it with that server model"
        )
    res = run_prepared(
        prepared,
        policy,
        local_policy=local_policy,
        seed=seed,
        weights=weights,
        forecast=forecast,
        forecast_error=forecast_error,
        policy_options=policy_options,
        on_invalid=on_invalid,
        record_requests=record_requests,
        progress=progress,
    )
    res.notes[:0] = notes
    return res


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
) -> CompareResult:
    """Run several policies on the same prepared scenario (same workload, signals, seed).

    Returns a :class:`CompareResult`: a list of :class:`RunResult` (one per policy, in order)
    whose ``.table`` / ``.to_frame()`` is a pandas DataFrame with one row per policy.

    With ``oracle_gap`` (default) and a scenario where the oracle is computable (two or more
    regions), each result gains ``oracle_savings_captured_pct`` and
    ``oracle_carbon_savings_captured_pct``: the share (%) of the oracle's savings over
    ``local-only`` in the weighted objective J (resp. carbon) that the policy captures (100 %:
    as good as the oracle, 0 %: no better than local-only, negative: worse than local-only).
    Where the oracle saves less than 0.1 % of local-only's value the share is NaN and the
    result carries a note saying why (:func:`add_oracle_gaps`). ``local-only`` and ``oracle``
    are run for this if they are not in ``policies``. ``cache`` as in :func:`run`.
    """
    from greenroute.data.cache import use_cache

    _policy_plugins(policies)
    with use_cache(cache):
        return _compare(scenario, policies, seed=seed, days=days, data_dir=data_dir,
                        on_result=on_result, oracle_gap=oracle_gap, **kwargs)  # fmt: skip


def _compare(scenario, policies, *, seed, days, data_dir, on_result, oracle_gap, **kwargs):
    prep, notes = prepare_checked(
        scenario,
        seed=seed,
        data_dir=data_dir,
        days=days,
        fidelity=kwargs.pop("fidelity", None),
        constraints=kwargs.pop("constraints", None),
        facility=kwargs.pop("facility", None),
        server_model=kwargs.pop("server_model", None),
    )
    sc = prep.scenario
    out = CompareResult()
    for p in policies:
        res = run(sc, p, seed=seed, prepared=prep, **kwargs)
        res.notes[:0] = notes
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


ORACLE_GAP_KEYS = {
    "objective": "oracle_savings_captured_pct",
    "carbon_kg": "oracle_carbon_savings_captured_pct",
}


def add_oracle_gaps(results: Sequence[RunResult], base: RunResult, orc: RunResult) -> None:
    """Share (%) of the oracle's savings over ``base`` that each result captures.

    ``metrics[out] = 100 x (base - result) / (base - oracle)`` for J (``objective`` ->
    ``oracle_savings_captured_pct``) and carbon (``carbon_kg`` ->
    ``oracle_carbon_savings_captured_pct``). When the oracle saves less than
    :data:`ORACLE_MIN_SAVING_FRACTION` of ``|base|`` (or nothing, or is worse), the ratio would
    divide by about zero: the share is NaN and a note on the result says why.
    """
    for key, out_key in ORACLE_GAP_KEYS.items():
        b = base.metrics.get(key)
        o = orc.metrics.get(key)
        if b is None or o is None:
            continue
        saving = b - o
        threshold = ORACLE_MIN_SAVING_FRACTION * abs(b)
        undefined = not (math.isfinite(saving) and saving > 0 and saving >= threshold)
        for r in results:
            v = r.metrics.get(key)
            if v is None or undefined:
                r.metrics[out_key] = float("nan")
            else:
                r.metrics[out_key] = 100.0 * (b - v) / saving
            if undefined:
                note = (
                    f"{out_key} is NaN: the oracle's {key} saving over local-only "
                    f"({saving:.4g}) is below {100 * ORACLE_MIN_SAVING_FRACTION:g} % of "
                    f"local-only's {key} ({b:.4g}), so a share of it is meaningless"
                )
                notes = getattr(r, "notes", None)
                if isinstance(notes, list) and note not in notes:
                    notes.append(note)
    model_j = (orc.extras.get("policy_summary") or {}).get("lp_objective_j")
    for r in results:
        r.metrics["oracle_objective"] = float(orc.metrics.get("objective", float("nan")))
        if model_j is not None:
            r.metrics["oracle_lp_objective"] = float(model_j)


def run_manifest(path: str | Path, **overrides) -> RunResult:
    """Re-run exactly what a manifest describes (scenario, options, seed, data).

    Before anything runs, every field is type-checked and the data files' checksums are
    compared with the recorded ones (:func:`greenroute.sim.manifest.read_manifest`,
    :func:`~greenroute.sim.manifest.check_input_files`): a bad field, an unknown
    ``manifest_version`` or a changed or missing file is a one-line :class:`DataFormatError`.
    """
    from greenroute.core.errors import DataFormatError
    from greenroute.sim.manifest import check_input_files, read_manifest

    path = Path(path)
    m = read_manifest(path)
    data_dir = overrides.pop("data_dir", m.get("data_dir"))
    check_input_files(m, data_dir, path)
    try:
        constraints = ConstraintSet.from_dict(m.get("constraints"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataFormatError(path, f"field 'constraints' is malformed ({exc!r})") from None
    w = m.get("weights") or {}
    scenario: str | Scenario = m["scenario"]
    if m.get("chunked_prefill"):
        from greenroute.scenarios import get_scenario

        scenario = get_scenario(m["scenario"]).with_options(
            fidelity=m.get("fidelity"), server_model=m.get("server_model"), chunked_prefill=True
        )
    res = run(
        scenario,
        m.get("policy_spec") or m["policy"],
        local_policy=m.get("local_policy", "least-loaded"),
        seed=int(m["seed"]),
        # manifest_version 2 records both; they give the same whole epochs
        days=float(m.get("days_requested", m["days"])),
        data_dir=data_dir,
        fidelity=m.get("fidelity"),
        constraints=constraints,
        weights=ObjectiveWeights(**w) if w else None,
        forecast=m.get("forecast", "perfect"),
        forecast_error=float(m.get("forecast_error", 0.0)),
        facility=m.get("facility"),
        server_model=m.get("server_model"),
        policy_options=m.get("policy_options") or None,
        on_invalid=m.get("on_invalid", "raise"),
        **overrides,
    )
    want = m.get("input_files_sha256") or {}
    got = res.manifest.get("input_files_sha256") or {}
    changed = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    if changed:
        raise DataFormatError(path, f"the re-run read different input data: {changed}")
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


def report(
    source: str | Path | RunResult | Sequence[RunResult],
    out: str | Path = "report.html",
    *,
    fmt: str = "html",
    force: bool = False,
    sweep: str | None = None,
    where: str | None = None,
) -> dict:
    """Write the report of a run/compare output directory, a result store (``sweep``: which
    sweep, ``where``: a DuckDB condition on its runs) or results in memory (a
    :class:`RunResult` or a list of them) to ``out``: one self-contained HTML file, or with
    ``fmt="png"``/``"svg"`` a directory of image files (:mod:`greenroute.bench.report`).
    Returns what was written (``out``, ``figures``, ``runs``, ``notes``)."""
    from greenroute.bench.report import make_report
    from greenroute.bench.report_data import from_results

    if isinstance(source, RunResult):
        source = [source]
    if isinstance(source, list | tuple):
        source = from_results(source)
    return make_report(source, out, fmt=fmt, force=force, sweep=sweep, where=where)


def sweep(
    spec: str | Path | dict,
    *,
    store: str | Path | None = None,
    backend: str = "ray",
    address: str | None = None,
    workers: int | None = None,
    limit: int | None = None,
):
    """Run a sweep (a YAML spec file, or the same mapping) into the result store; cells
    already there are skipped. See :mod:`greenroute.bench.sweep_spec` for the spec and
    :func:`greenroute.bench.sweep.run_sweep` for the arguments; returns a ``SweepSummary``."""
    from greenroute.bench.sweep import run_sweep
    from greenroute.bench.sweep_spec import load_spec, parse_spec

    sp = parse_spec(spec) if isinstance(spec, dict) else load_spec(spec)
    return run_sweep(
        sp, store=store, backend=backend, address=address, workers=workers, limit=limit
    )


def results(
    where: str | None = None,
    *,
    metrics: Sequence[str] | None = None,
    sweep: str | None = None,
    include_failed: bool = False,
    store: str | Path | None = None,
):
    """Runs in the result store as a pandas DataFrame: one row per run (every ``greenroute
    run``/``compare`` and sweep cell), identity columns then metrics. ``where``: a DuckDB SQL
    condition, e.g. ``"policy = 'lp-mpc' and scenario = 'geo3'"``. Default store:
    ``$GREENROUTE_STORE``, else ``./greenroute-results``. Per-epoch series:
    :func:`greenroute.bench.store.load_epochs`."""
    from greenroute.bench.store import load_runs

    return load_runs(
        where, metrics=metrics, sweep=sweep, include_failed=include_failed, store=store
    )
