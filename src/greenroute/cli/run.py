"""``run``, ``compare`` and ``demo``: simulate geo policies on a scenario."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from greenroute.cli.app import app, out_console
from greenroute.cli.errors import print_note, user_errors
from greenroute.cli.options import (
    CapOpt,
    DataDirOpt,
    DaysOpt,
    ExcludeOpt,
    FacilityOpt,
    FidelityOpt,
    ForceOpt,
    ForecastErrOpt,
    ForecastOpt,
    JsonOpt,
    LocalOpt,
    NoCacheOpt,
    OutOpt,
    PerDayOpt,
    PolicyOptOpt,
    ResidencyOpt,
    ScenarioOpt,
    SeedOpt,
    ServerModelOpt,
    WeightsOpt,
    cache_scope,
    check_data_dir,
    check_facility,
    check_forecast,
    check_local_policy,
    check_manifest_flags,
    check_seed,
    constraints_from,
    options_per_policy,
    parse_policy_options,
    parse_weights,
    split_names,
)
from greenroute.cli.progress import EpochBar, TwoLevelBar
from greenroute.cli.report import report_hint
from greenroute.cli.tables import print_table, short

BASELINES = (
    "local-only",
    "round-robin",
    "random",
    "least-loaded",
    "lowest-carbon",
    "lowest-price",
    "coolest",
    "nearest",
    "carbon-threshold",
)


def _print_notes(notes) -> None:
    for note in notes:
        print_note(note)


@app.command()
@user_errors
def run(
    ctx: typer.Context,
    scenario: ScenarioOpt = "demo",
    policy: Annotated[
        str, typer.Option("--policy", "-p", help="geo policy name")
    ] = "lowest-carbon",
    local_policy: LocalOpt = "least-loaded",
    days: DaysOpt = None,
    seed: SeedOpt = 0,
    data_dir: DataDirOpt = None,
    out: OutOpt = None,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
    manifest: Annotated[
        Path | None,
        typer.Option(
            help="re-run exactly what this manifest.json describes (combines only with --out, "
            "--force, --json, --data-dir, --no-cache)"
        ),
    ] = None,
    fidelity: FidelityOpt = None,
    server_model: ServerModelOpt = None,
    facility: FacilityOpt = None,
    exclude: ExcludeOpt = None,
    residency: ResidencyOpt = None,
    power_cap: CapOpt = None,
    weights: WeightsOpt = None,
    forecast: ForecastOpt = "perfect",
    forecast_error: ForecastErrOpt = 0.0,
    record_requests: Annotated[bool, typer.Option(help="also write requests.parquet")] = False,
    policy_opt: PolicyOptOpt = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Simulate one geo policy on a scenario.

    Policies see the perfect forecast (the true future) unless --forecast names another
    forecaster; the forecast used is recorded in the result's manifest.
    """
    from greenroute import api
    from greenroute.sim.output import check_out_dir, metrics_json, write_run

    if manifest is not None:
        check_manifest_flags(ctx)
        if out is not None:
            check_out_dir(out, force=force)
        overrides = {} if data_dir is None else {"data_dir": data_dir}
        bar = EpochBar(f"manifest {manifest.name}")
        try:
            res = api.run_manifest(manifest, progress=bar, cache=not no_cache, **overrides)
        finally:
            bar.close()
    else:
        check_seed(seed)
        check_forecast(forecast, forecast_error)
        check_facility(facility)
        check_data_dir(data_dir)
        check_local_policy(local_policy)
        options = parse_policy_options(policy_opt)
        from greenroute.policies.registry import policy_prefix

        if policy_prefix(policy) is None:  # rl:PATH, llm:PATH: checked when loaded
            from greenroute.policies.registry import geo_policy_entry

            geo_policy_entry(policy).validate(options)
        constraints = constraints_from(exclude, residency, power_cap)
        objective_weights = parse_weights(weights)
        if out is not None:
            check_out_dir(out, force=force)
        bar = EpochBar(f"{scenario}/{policy}")
        try:
            res = api.run(
                scenario,
                policy,
                local_policy=local_policy,
                seed=seed,
                days=days,
                data_dir=data_dir,
                fidelity=fidelity,
                server_model=server_model,
                facility=facility,
                constraints=constraints,
                weights=objective_weights,
                forecast=forecast,
                forecast_error=forecast_error,
                record_requests=record_requests,
                policy_options=options or None,
                progress=bar,
                cache=not no_cache,
            )
        finally:
            bar.close()
    if out is not None:
        write_run(res, out, force=force)
    from greenroute.cli.results import record_results

    record_results([res], "run")  # into the result store ($GREENROUTE_STORE; off: none)
    _print_notes(res.notes)
    summary = res.extras.get("policy_summary")
    if summary:
        text = ", ".join(f"{k}={short(v)}" for k, v in summary.items())
        print_note(text, label=res.policy, style="cyan")
    if json_out:
        payload = {"scenario": res.scenario, "policy": res.policy, "metrics": metrics_json(res)}
        if summary:
            payload["policy_summary"] = summary
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        print_table([res], f"{res.scenario} ({res.fidelity}, {res.metrics['days']:g} days)")
    report_hint(out, [res], "run")


def policy_specs(names: list[str], options: dict) -> list:
    """The policies to run: a name, or the policy built with its share of ``--policy-opt``."""
    from greenroute.policies.registry import make_geo_policy

    per_policy = options_per_policy(names, options)
    return [make_geo_policy(n, **per_policy[n]) if per_policy[n] else n for n in names]


@app.command()
@user_errors
def compare(
    scenario: ScenarioOpt = "demo",
    policies: Annotated[
        str, typer.Option(help="comma-separated geo policies")
    ] = "local-only,lowest-carbon",
    local_policy: LocalOpt = "least-loaded",
    days: DaysOpt = None,
    seed: SeedOpt = 0,
    data_dir: DataDirOpt = None,
    out: OutOpt = None,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
    fidelity: FidelityOpt = None,
    server_model: ServerModelOpt = None,
    facility: FacilityOpt = None,
    exclude: ExcludeOpt = None,
    residency: ResidencyOpt = None,
    power_cap: CapOpt = None,
    weights: WeightsOpt = None,
    forecast: ForecastOpt = "perfect",
    forecast_error: ForecastErrOpt = 0.0,
    per_day: PerDayOpt = False,
    oracle_gap: Annotated[
        bool,
        typer.Option(
            help="add the shares of the oracle's savings over local-only each policy captures "
            "(runs local-only and oracle if not listed)"
        ),
    ] = True,
    policy_opt: Annotated[
        list[str] | None,
        typer.Option(
            "--policy-opt",
            help="geo policy option KEY=VALUE, applied to each listed policy that takes it "
            "(an option none of them takes is an error; repeatable)",
        ),
    ] = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Compare geo policies on one scenario (same workload, signals and seed)."""
    from greenroute.sim.output import check_out_dir, metrics_json, write_compare

    names = split_names(policies)
    check_seed(seed)
    check_forecast(forecast, forecast_error)
    check_facility(facility)
    check_data_dir(data_dir)
    check_local_policy(local_policy)
    specs = policy_specs(names, parse_policy_options(policy_opt))
    constraints = constraints_from(exclude, residency, power_cap)
    objective_weights = parse_weights(weights)
    if out is not None:
        check_out_dir(out, force=force)
    with cache_scope(no_cache):
        results = compare_with_progress(
            scenario,
            specs,
            names,
            local_policy=local_policy,
            seed=seed,
            days=days,
            data_dir=data_dir,
            fidelity=fidelity,
            server_model=server_model,
            facility=facility,
            constraints=constraints,
            weights=objective_weights,
            forecast=forecast,
            forecast_error=forecast_error,
            oracle_gap=oracle_gap,
        )
    if out is not None:
        write_compare(results, out, force=force)
    from greenroute.cli.results import record_results

    record_results(results, "compare")  # into the result store ($GREENROUTE_STORE)
    _print_notes(results[0].notes if results else [])
    if json_out:
        payload = {
            "scenario": results[0].scenario,
            "results": [{"policy": r.policy, "metrics": metrics_json(r)} for r in results],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        r0 = results[0]
        print_table(
            results,
            f"{r0.scenario} ({r0.fidelity}, {r0.metrics['days']:g} days, seed {r0.seed})",
            per_day=per_day,
        )
    report_hint(out, results, "compare")


def compare_with_progress(scenario, specs, names, **kwargs):
    from greenroute import api

    bar = TwoLevelBar("policies")
    done = {"n": 0}

    def on_epoch(i, total):
        bar.inner(i, total, f"  {names[min(done['n'], len(names) - 1)]}")

    def on_result(res):
        done["n"] += 1
        bar.outer(done["n"], len(names))

    bar.outer(0, len(names))
    try:
        return api.compare(scenario, specs, on_result=on_result, progress=on_epoch, **kwargs)
    finally:
        bar.stop()


@app.command()
@user_errors
def demo(
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
) -> None:
    """Compare every geo baseline on the 'demo' scenario (embedded data, about 10-20 s)."""
    from greenroute.policies.registry import geo_policy_names
    from greenroute.sim.output import metrics_json

    check_seed(seed)
    baselines = [p for p in BASELINES if p in geo_policy_names()]
    results = compare_with_progress("demo", baselines, baselines, seed=seed, oracle_gap=False)
    if json_out:
        payload = {
            "scenario": "demo",
            "results": [{"policy": r.policy, "metrics": metrics_json(r)} for r in results],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    print_table(results, "demo: 3 regions (DE-LU, US-CAL-CISO, SG), 1 day, embedded signals")
    out_console.print(
        "Next: `greenroute compare --scenario geo3 --data-dir ../shared/data "
        "--policies local-only,lowest-carbon` (31 days, real signals)."
    )
