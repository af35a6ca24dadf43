"""The ``greenroute`` command (a thin layer over :mod:`greenroute.api`)."""

from __future__ import annotations

import functools
import json
import math
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from greenroute.core.errors import ConfigError, GreenrouteError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Carbon-, water-, cost- and latency-aware scheduling of LLM inference across regions.",
    pretty_exceptions_enable=False,
)
PIPE_WIDTH = 200  # tables written to a pipe or file are not cut to 80 columns
out_console = Console()
if not out_console.is_terminal:
    out_console = Console(width=PIPE_WIDTH)
err_console = Console(stderr=True)

TABLE_COLUMNS = (
    ("carbon_kg", "Carbon (kg)", "{:,.1f}"),
    ("cost_usd", "Energy cost ($)", "{:,.2f}"),
    ("energy_kwh", "Energy (kWh)", "{:,.1f}"),
    ("water_m3", "Water (m³)", "{:,.2f}"),
    ("slo_violation_pct", "SLO viol. (%)", "{:.2f}"),
    ("max_defer_delay_min", "Max delay (min)", "{:,.0f}"),
    ("ttft_mean_s", "TTFT mean (s)", "{:.3f}"),
    ("ttft_p99_s", "TTFT p99 (s)", "{:.3f}"),
)
EXTENSIVE = ("carbon_kg", "cost_usd", "energy_kwh", "water_m3")


def user_errors(fn):
    """Turn user errors into one line on stderr and exit code 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except GreenrouteError as err:
            err_console.print(f"[bold red]error:[/] {err}", highlight=False, soft_wrap=True)
            raise typer.Exit(err.exit_code) from None

    return wrapper


# ------------------------------------------------------------------ shared options
ScenarioOpt = Annotated[str, typer.Option("--scenario", "-s", help="scenario name")]
DaysOpt = Annotated[float | None, typer.Option(help="override the scenario length (days)")]
SeedOpt = Annotated[int, typer.Option(help="random seed (workload, signals, policies)")]
DataDirOpt = Annotated[
    Path | None,
    typer.Option(help="real data directory (default $GREENROUTE_DATA_DIR; else embedded data)"),
]
OutOpt = Annotated[Path | None, typer.Option(help="write metrics, epochs and manifest here")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON to stdout")]
NoCacheOpt = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="neither read nor write the cache of parsed data files and reference scales "
        "($GREENROUTE_CACHE_DIR, else ~/.cache/greenroute)",
    ),
]


def _no_cache(flag: bool) -> None:
    """--no-cache: the whole command bypasses greenroute.data.cache (via its env variable)."""
    if flag:
        from greenroute.data.cache import NO_CACHE_ENV

        os.environ[NO_CACHE_ENV] = "1"
LocalOpt = Annotated[str, typer.Option(help="local (per-request) policy")]
FidelityOpt = Annotated[str | None, typer.Option(help="request | fluid (default: scenario's)")]
ExcludeOpt = Annotated[
    list[str] | None, typer.Option(help="exclude REGION or REGION@START_H-END_H (repeatable)")
]
ResidencyOpt = Annotated[list[str] | None, typer.Option(help="residency ORIGIN=R1+R2 (repeatable)")]
CapOpt = Annotated[list[str] | None, typer.Option(help="IT power cap REGION=KW (repeatable)")]
WeightsOpt = Annotated[
    str | None,
    typer.Option(help="objective weights, e.g. carbon=0.4,water=0.2,cost=0.2,latency=0.2"),
]
ForecastOpt = Annotated[str, typer.Option(help="perfect | persistence | ewma | noisy")]
ForecastErrOpt = Annotated[float, typer.Option(help="relative forecast error (noisy forecaster)")]
PerDayOpt = Annotated[bool, typer.Option("--per-day", help="show extensive metrics per day")]


def _constraints(exclude, residency, power_cap):
    from greenroute.constraints import (
        ConstraintSet,
        parse_exclusion,
        parse_power_cap,
        parse_residency,
    )

    cs = ConstraintSet()
    for text in exclude or []:
        cs = cs.with_exclusion(parse_exclusion(text))
    for text in residency or []:
        cs = cs.with_residency(*parse_residency(text))
    for text in power_cap or []:
        cs = cs.with_power_cap(*parse_power_cap(text))
    return None if cs.is_empty() else cs


def parse_weights(text: str | None):
    from greenroute.core.objective import parse_weights as _parse

    return _parse(text)


class _Bar:
    """A rich progress bar on stderr, shown only once work has taken more than a second."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.t0 = time.perf_counter()
        self.progress: Progress | None = None
        self.task = None

    def __call__(self, done: int, total: int) -> None:
        if self.progress is None:
            if time.perf_counter() - self.t0 < 1.0:
                return
            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} epochs"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=err_console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=total)
        self.progress.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _options(items: list[str] | None) -> dict | None:
    """``--policy-opt KEY=VALUE`` pairs, values parsed as JSON when possible."""
    from greenroute.core.options import parse_key_values

    return parse_key_values(items, "--policy-opt") or None


def _short(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _fmt(v, spec: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return spec.format(v)


def print_table(results, title: str, per_day: bool = False) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("Policy", style="bold", no_wrap=True)
    for key, label, _ in TABLE_COLUMNS:
        suffix = "/day" if per_day and key in EXTENSIVE else ""
        table.add_column(label + suffix, justify="right")
    extra_gap = any("oracle_gap_pct" in r.metrics for r in results)
    if "objective" in results[0].metrics:
        table.add_column("Objective J", justify="right")
    if extra_gap:
        table.add_column("Oracle gap J (%)", justify="right")
        table.add_column("Oracle gap CO₂ (%)", justify="right")
    for r in results:
        days = r.metrics.get("days", 1.0) or 1.0
        cells = []
        for key, _, spec in TABLE_COLUMNS:
            v = r.metrics.get(key)
            if per_day and key in EXTENSIVE and v is not None:
                v = v / days
            cells.append(_fmt(v, spec))
        if "objective" in results[0].metrics:
            cells.append(_fmt(r.metrics.get("objective"), "{:.4f}"))
        if extra_gap:
            cells.append(_fmt(r.metrics.get("oracle_gap_pct"), "{:.1f}"))
            cells.append(_fmt(r.metrics.get("oracle_carbon_gap_pct"), "{:.1f}"))
        table.add_row(r.policy, *cells)
    out_console.print(table)


# ------------------------------------------------------------------ commands
@app.command()
@user_errors
def run(
    scenario: ScenarioOpt = "demo",
    policy: Annotated[
        str, typer.Option("--policy", "-p", help="geo policy name")
    ] = "lowest-carbon",
    local_policy: LocalOpt = "least-loaded",
    days: DaysOpt = None,
    seed: SeedOpt = 0,
    data_dir: DataDirOpt = None,
    out: OutOpt = None,
    json_out: JsonOpt = False,
    manifest: Annotated[
        Path | None, typer.Option(help="re-run exactly what this manifest.json describes")
    ] = None,
    fidelity: FidelityOpt = None,
    exclude: ExcludeOpt = None,
    residency: ResidencyOpt = None,
    power_cap: CapOpt = None,
    weights: WeightsOpt = None,
    forecast: ForecastOpt = "perfect",
    forecast_error: ForecastErrOpt = 0.0,
    record_requests: Annotated[bool, typer.Option(help="also write requests.parquet")] = False,
    policy_opt: Annotated[
        list[str] | None,
        typer.Option(help="policy option KEY=VALUE, e.g. horizon=96 for lp-mpc (repeatable)"),
    ] = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Simulate one geo policy on a scenario."""
    _no_cache(no_cache)
    from greenroute import api
    from greenroute.sim.output import metrics_json, write_run

    if out is not None and out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out} exists and is not empty; choose a new directory")
    bar = _Bar(f"{scenario}/{policy}")
    try:
        if manifest is not None:
            res = api.run_manifest(manifest, progress=bar)
        else:
            res = api.run(
                scenario,
                policy,
                local_policy=local_policy,
                seed=seed,
                days=days,
                data_dir=data_dir,
                fidelity=fidelity,
                constraints=_constraints(exclude, residency, power_cap),
                weights=parse_weights(weights),
                forecast=forecast,
                forecast_error=forecast_error,
                record_requests=record_requests,
                policy_options=_options(policy_opt),
                progress=bar,
            )
    finally:
        bar.close()
    if out is not None:
        write_run(res, out)
    for note in res.notes:
        err_console.print(f"[yellow]note:[/] {note}", highlight=False)
    summary = res.extras.get("policy_summary")
    if summary:
        text = ", ".join(f"{k}={_short(v)}" for k, v in summary.items())
        err_console.print(f"[cyan]{res.policy}:[/] {text}", highlight=False)
    if json_out:
        payload = {"scenario": res.scenario, "policy": res.policy, "metrics": metrics_json(res)}
        if summary:
            payload["policy_summary"] = summary
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        print_table([res], f"{res.scenario} ({res.fidelity}, {res.metrics['days']:g} days)")


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
    json_out: JsonOpt = False,
    fidelity: FidelityOpt = None,
    exclude: ExcludeOpt = None,
    residency: ResidencyOpt = None,
    power_cap: CapOpt = None,
    weights: WeightsOpt = None,
    forecast: ForecastOpt = "perfect",
    forecast_error: ForecastErrOpt = 0.0,
    per_day: PerDayOpt = False,
    oracle_gap: Annotated[
        bool, typer.Option(help="add the oracle-gap columns (runs local-only and oracle)")
    ] = True,
    no_cache: NoCacheOpt = False,
) -> None:
    """Compare geo policies on one scenario (same workload, signals and seed)."""
    _no_cache(no_cache)
    from greenroute.policies.registry import geo_policy_names
    from greenroute.sim.output import metrics_json, write_compare

    names = [p.strip() for p in policies.split(",") if p.strip()]
    if not names:
        raise ConfigError("--policies is empty")
    valid = geo_policy_names()
    for n in names:
        if n not in valid and not n.startswith("rl:"):
            from greenroute.core.errors import UnknownNameError

            raise UnknownNameError("policy", n, valid)
    if out is not None and out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out} exists and is not empty; choose a new directory")
    results = _compare_with_progress(
        scenario,
        names,
        local_policy=local_policy,
        seed=seed,
        days=days,
        data_dir=data_dir,
        fidelity=fidelity,
        constraints=_constraints(exclude, residency, power_cap),
        weights=parse_weights(weights),
        forecast=forecast,
        forecast_error=forecast_error,
        oracle_gap=oracle_gap,
    )
    if out is not None:
        write_compare(results, out)
    for note in results[0].notes if results else []:
        err_console.print(f"[yellow]note:[/] {note}", highlight=False)
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


class _TwoLevelBar:
    """Runs (outer) and epochs of the current run (inner) on stderr, shown only once the work
    has taken more than a second."""

    def __init__(self, outer_label: str) -> None:
        self.outer_label = outer_label
        self.t0 = time.perf_counter()
        self.progress: Progress | None = None
        self.outer_done, self.outer_total = 0, 1

    def _ensure(self) -> bool:
        if self.progress is None and time.perf_counter() - self.t0 > 1.0:
            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                console=err_console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task(self.outer_label, total=self.outer_total)
            self.sub = self.progress.add_task("epochs", total=1)
        return self.progress is not None

    def outer(self, done: int, total: int) -> None:
        self.outer_done, self.outer_total = done, total
        if self._ensure():
            self.progress.update(self.task, completed=done, total=total)

    def inner(self, done: int, total: int, label: str) -> None:
        if self._ensure():
            self.progress.update(self.sub, completed=done, total=total, description=label)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def _compare_with_progress(scenario, names, **kwargs):
    from greenroute import api

    bar = _TwoLevelBar("policies")
    done = {"n": 0}

    def on_epoch(i, total):
        bar.inner(i, total, f"  {names[min(done['n'], len(names) - 1)]}")

    def on_result(res):
        done["n"] += 1
        bar.outer(done["n"], len(names))

    bar.outer(0, len(names))
    try:
        return api.compare(scenario, names, on_result=on_result, progress=on_epoch, **kwargs)
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

    baselines = [p for p in BASELINES if p in geo_policy_names()]
    results = _compare_with_progress("demo", baselines, seed=seed, oracle_gap=False)
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


@app.command()
@user_errors
def scenarios(json_out: JsonOpt = False) -> None:
    """List the registered scenarios."""
    from greenroute.scenarios import scenario_descriptions

    desc = scenario_descriptions()
    if json_out:
        sys.stdout.write(json.dumps(desc, indent=2) + "\n")
        return
    table = Table(title="scenarios", title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("description")
    for k, v in desc.items():
        table.add_row(k, v)
    out_console.print(table)


@app.command()
@user_errors
def policies(
    json_out: JsonOpt = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show each policy's options (defaults, units).")
    ] = False,
) -> None:
    """List the registered geo and local policies (with --verbose: their options)."""
    from greenroute.policies.registry import GEO_POLICIES, LOCAL_POLICIES

    groups = {"geo": GEO_POLICIES.entries(), "local": LOCAL_POLICIES.entries()}
    if json_out:
        payload = {
            kind: {
                e.name: {
                    "description": e.description,
                    "options": {
                        o.name: {"type": o.type_name, "default": o.default, "unit": o.unit,
                                 "help": o.help}
                        for o in e.options
                    },
                }
                if verbose
                else e.description
                for e in entries
            }
            for kind, entries in groups.items()
        }  # fmt: skip
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    for kind, entries in groups.items():
        table = Table(title=f"{kind} policies", title_justify="left")
        table.add_column("name", style="bold")
        table.add_column("description")
        if verbose:
            table.add_column("options (type = default unit)")
        for e in entries:
            row = [e.name, e.description]
            if verbose:
                row.append("\n".join(o.describe() for o in e.options) or "(none)")
            table.add_row(*row)
        out_console.print(table)


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

    names = [p.strip() for p in policies.split(",") if p.strip()]
    if not names:
        raise ConfigError("--policies is empty")
    weight_set(sweep_weights, seed)  # validates N before any run
    result = _pareto_with_progress(
        scenario, names, sweep_weights, seed=seed, days=days, data_dir=data_dir
    )
    if json_out:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        _print_pareto(result)


def _pareto_with_progress(scenario, names, n_weights, **kwargs):
    from greenroute.bench.pareto import pareto_sweep, weights_label

    bar = _TwoLevelBar("runs")
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


def _print_pareto(result) -> None:
    from greenroute.bench.pareto import METRICS, NORMALISATION, weights_label

    labels = {
        "carbon_kg": "Carbon (kg)",
        "water_m3": "Water (m³)",
        "cost_usd": "Energy cost ($)",
        "ttft_mean_s": "TTFT mean (s)",
    }
    specs = {
        "carbon_kg": "{:,.1f}",
        "water_m3": "{:,.2f}",
        "cost_usd": "{:,.2f}",
        "ttft_mean_s": "{:.3f}",
    }
    title = f"{result.scenario} ({result.days:g} days, seed {result.seed}): points"
    table = Table(title=title, title_justify="left")
    table.add_column("Policy", style="bold", no_wrap=True)
    table.add_column("Weights", no_wrap=True)
    for k in METRICS:
        table.add_column(labels[k], justify="right")
    table.add_column("SLO viol. (%)", justify="right")
    table.add_column("Front", justify="center")
    for p in result.points:
        mark = "★" if p.non_dominated else ("·" if p.non_dominated_in_policy else "")
        table.add_row(
            p.policy,
            weights_label(p.weights),
            *(_fmt(p.metrics[k], specs[k]) for k in METRICS),
            _fmt(p.slo_violation_pct, "{:.2f}"),
            mark,
        )
    table.add_row(
        "reference",
        "worst observed",
        *(_fmt(result.reference_point[k], specs[k]) for k in METRICS),
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
            name,
            str(len(pts)),
            str(own),
            str(sum(p.non_dominated for p in pts)),
            f"{result.hypervolume[name]:.4g}",
            _fmt(100 * result.hypervolume[name] / total if total > 0 else None, "{:.1f}"),
        )
    out_console.print(hv)
    out_console.print(f"★ on the overall front, · on the policy's own front; {NORMALISATION}.")


@app.command()
@user_errors
def train(
    env: Annotated[str, typer.Option(help="greenroute/LoadBalancing-v0, GeoManager-v0, ...")],
    algo: Annotated[str, typer.Option(help="ppo | a2c | dqn | sac")] = "ppo",
    steps: Annotated[int, typer.Option(help="training timesteps")] = 20_000,
    seed: SeedOpt = 0,
    out: Annotated[Path, typer.Option(help="model file (.zip)")] = Path("model.zip"),
    env_option: Annotated[
        list[str] | None, typer.Option(help="environment option KEY=VALUE (repeatable)")
    ] = None,
    hp: Annotated[
        list[str] | None, typer.Option(help="hyperparameter override KEY=VALUE (repeatable)")
    ] = None,
    tb_log: Annotated[Path | None, typer.Option(help="TensorBoard log directory")] = None,
) -> None:
    """Train an RL agent (stable-baselines3) on a greenroute environment; save it."""
    try:
        from greenroute.bench.rl_train import parse_overrides
        from greenroute.bench.rl_train import train as _train
    except ImportError as exc:  # pragma: no cover - extra not installed
        raise ConfigError(f"training needs the [rl] extra: {exc}") from None
    progress = Progress(
        TextColumn(f"{algo} on {env}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} steps"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    )
    with progress:
        task = progress.add_task("train", total=steps)
        meta = _train(
            env,
            algo,
            steps,
            seed,
            out,
            env_options=parse_overrides(env_option),
            hyperparameters=parse_overrides(hp),
            tensorboard_log=tb_log,
            progress=lambda done, total: progress.update(task, completed=done),
        )
    out_console.print(
        f"saved {out}: {algo} on {env}, {steps:,} steps, seed {seed}, {meta['wall_s']:.0f} s"
    )


@app.command()
@user_errors
def record(
    policy: Annotated[str, typer.Option("--policy", "-p", help="geo policy (or rl:PATH)")],
    scenario: ScenarioOpt = "geo3",
    out: Annotated[Path, typer.Option(help="trajectory file (.parquet)")] = Path("traj.parquet"),
    days: DaysOpt = None,
    seed: SeedOpt = 0,
    data_dir: DataDirOpt = None,
) -> None:
    """Record (observation, action, reward) trajectories of a geo policy (for distillation)."""
    from greenroute.bench.rl_record import record as _record
    from greenroute.bench.rl_record import save_trajectories

    if out.suffix != ".parquet":
        raise ConfigError(f"--out must end with .parquet, got {out}")
    bar = _Bar(f"record {policy}")
    try:
        ddir = None if data_dir is None else str(data_dir)
        frame = _record(policy, scenario, days=days, seed=seed, data_dir=ddir, progress=bar)
    finally:
        bar.close()
    save_trajectories(frame, out)
    out_console.print(f"saved {len(frame):,} rows ({frame['epoch'].nunique()} epochs) to {out}")


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
