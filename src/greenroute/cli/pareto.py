"""``pareto``: Pareto front and hypervolume of policies over carbon, water, cost and TTFT."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from greenroute.cli.app import app, out_console
from greenroute.cli.errors import user_errors
from greenroute.cli.options import (
    DataDirOpt,
    DaysOpt,
    FacilityOpt,
    JsonOpt,
    NoCacheOpt,
    ScenarioOpt,
    SeedOpt,
    cache_scope,
    check_data_dir,
    check_facility,
    check_seed,
    options_per_policy,
    parse_policy_options,
    split_names,
)
from greenroute.cli.progress import TwoLevelBar
from greenroute.cli.tables import fmt
from greenroute.core.errors import ConfigError


def uniform_options(names: list[str], options: dict) -> dict:
    """``--policy-opt`` for a sweep: :func:`greenroute.bench.pareto.pareto_sweep` gives every
    policy the same options, so each option must be one that every listed policy takes."""
    from greenroute.policies.registry import geo_policy_entry, policy_prefix, prefix_options

    def takes(n: str) -> set[str]:
        head = policy_prefix(n)
        if head is not None:
            return set(prefix_options(head))
        return {o.name for o in geo_policy_entry(n).options}

    per_policy = options_per_policy(names, options)
    for key in options:
        without = [n for n in names if key not in per_policy[n]]
        if without:
            shared = set.intersection(*(takes(n) for n in names))
            raise ConfigError(
                f"--policy-opt {key!r} on pareto goes to every listed policy, and "
                f"{', '.join(without)} {'does' if len(without) == 1 else 'do'} not take it "
                f"(list only policies that take it, or use compare); valid choices: "
                f"{', '.join(sorted(shared)) or '(none)'}"
            )
    return options


@app.command()
@user_errors
def pareto(
    scenario: ScenarioOpt = "demo",
    policies: Annotated[
        str, typer.Option(help="comma-separated geo policies")
    ] = "local-only,lowest-carbon,lp-mpc",
    sweep_weights: Annotated[
        int,
        typer.Option(
            "--sweep-weights",
            help="weight vectors per weight-parametrised policy (4 corners, balanced, lattice, "
            "then Dirichlet samples)",
        ),
    ] = 5,
    days: DaysOpt = None,
    seed: SeedOpt = 0,
    data_dir: DataDirOpt = None,
    facility: FacilityOpt = None,
    policy_opt: Annotated[
        list[str] | None,
        typer.Option(
            "--policy-opt",
            help="geo policy option KEY=VALUE for every listed policy (each must take it; "
            "repeatable)",
        ),
    ] = None,
    json_out: JsonOpt = False,
    no_cache: NoCacheOpt = False,
) -> None:
    """Pareto front and hypervolume of policies over carbon, water, cost and mean TTFT.

    Policies that optimise objective weights (lp-mpc, oracle, nsga2, ...) run once per weight
    vector, the others once, all on the same prepared scenario. The hypervolume uses the worst
    observed value of each metric as the reference point (seed 001 section 6.1), after dividing
    each metric by it.
    """
    from greenroute.bench.pareto import weight_set

    names = split_names(policies)
    check_seed(seed)
    check_facility(facility)
    check_data_dir(data_dir)
    options = uniform_options(names, parse_policy_options(policy_opt))
    weight_set(sweep_weights, seed)  # validates N before any run
    run_kwargs = {"facility": facility}
    if options:
        run_kwargs["policy_options"] = options
    with cache_scope(no_cache):
        result = _pareto_with_progress(
            scenario, names, sweep_weights, seed=seed, days=days, data_dir=data_dir, **run_kwargs
        )
    if json_out:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        _print_pareto(result)


def _pareto_with_progress(scenario, names, n_weights, **kwargs):
    from greenroute.bench.pareto import pareto_sweep, weights_label

    bar = TwoLevelBar("runs")
    label = {"text": ""}

    def on_start(name, w, i, total):
        label["text"] = f"  {name} {weights_label(w)}"
        bar.outer(i, total)

    def on_epoch(i, total):
        bar.inner(i, total, label["text"])

    try:
        return pareto_sweep(
            scenario, names, n_weights, on_start=on_start, progress=on_epoch, **kwargs
        )
    finally:
        bar.stop()


LABELS = {
    "carbon_kg": "Carbon (kg)",
    "water_m3": "Water (m³)",
    "cost_usd": "Energy cost ($)",
    "ttft_mean_s": "TTFT mean (s)",
}
SPECS = {
    "carbon_kg": "{:,.1f}",
    "water_m3": "{:,.2f}",
    "cost_usd": "{:,.2f}",
    "ttft_mean_s": "{:.3f}",
}


def _print_pareto(result) -> None:
    from greenroute.bench.pareto import METRICS, NORMALISATION, weights_label

    title = f"{result.scenario} ({result.days:g} days, seed {result.seed}): points"
    table = Table(title=title, title_justify="left")
    table.add_column("Policy", style="bold", no_wrap=True)
    table.add_column("Weights", no_wrap=True)
    for k in METRICS:
        table.add_column(LABELS[k], justify="right")
    table.add_column("SLO viol. (%)", justify="right")
    table.add_column("Front", justify="center")
    for p in result.points:
        mark = "★" if p.non_dominated else ("·" if p.non_dominated_in_policy else "")
        table.add_row(
            Text(p.policy),
            weights_label(p.weights),
            *(fmt(p.metrics[k], SPECS[k]) for k in METRICS),
            fmt(p.slo_violation_pct, "{:.2f}"),
            mark,
        )
    table.add_row(
        "reference",
        "worst observed",
        *(fmt(result.reference_point[k], SPECS[k]) for k in METRICS),
        "",
        "",
        style="dim",
    )
    out_console.print(table)
    hv = Table(
        title="hypervolume (share of the box up to the reference point)", title_justify="left"
    )
    hv.add_column("Policy", style="bold")
    hv.add_column("Points", justify="right")
    hv.add_column("On own front", justify="right")
    hv.add_column("On overall front", justify="right")
    hv.add_column("Hypervolume", justify="right")
    hv.add_column("% of all", justify="right")
    total = result.hypervolume["all"]
    for name in [*result.policies, "all"]:
        pts = [p for p in result.points if name in ("all", p.policy)]
        own = sum(p.non_dominated if name == "all" else p.non_dominated_in_policy for p in pts)
        hv.add_row(
            Text(name),
            str(len(pts)),
            str(own),
            str(sum(p.non_dominated for p in pts)),
            f"{result.hypervolume[name]:.4g}",
            fmt(100 * result.hypervolume[name] / total if total > 0 else None, "{:.1f}"),
        )
    out_console.print(hv)
    out_console.print(f"★ on the overall front, · on the policy's own front; {NORMALISATION}.")
