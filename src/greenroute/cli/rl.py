"""``train`` and ``record``: RL agents and expert trajectories (extra ``[rl]`` for training)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from greenroute.cli.app import app, out_console
from greenroute.cli.errors import print_note, user_errors
from greenroute.cli.options import DataDirOpt, DaysOpt, ScenarioOpt, SeedOpt, check_seed
from greenroute.cli.progress import EpochBar, steps_progress
from greenroute.core.errors import ConfigError

# the note ``run`` prints (via the engine) when a real-data scenario falls back to embedded data
EMBEDDED_DATA_NOTE = (
    "no --data-dir: using embedded data (grid signals synthesised from the embedded profiles)"
)


def _uses_embedded_data(data_dir: str | Path | None) -> bool:
    from greenroute.data.paths import resolve_data_dir

    return resolve_data_dir(data_dir) is None


@app.command()
@user_errors
def train(
    env: Annotated[str, typer.Option(help="greenroute/LoadBalancing-v0, GeoManager-v0, ...")],
    algo: Annotated[str, typer.Option(help="ppo | a2c | dqn | sac")] = "ppo",
    steps: Annotated[int, typer.Option(help="training timesteps")] = 20_000,
    seed: SeedOpt = 0,
    out: Annotated[Path, typer.Option(help="model file (.zip)")] = Path("model.zip"),
    data_dir: DataDirOpt = None,
    env_option: Annotated[
        list[str] | None, typer.Option(help="environment option KEY=VALUE (repeatable)")
    ] = None,
    hp: Annotated[
        list[str] | None, typer.Option(help="hyperparameter override KEY=VALUE (repeatable)")
    ] = None,
    tb_log: Annotated[Path | None, typer.Option(help="TensorBoard log directory")] = None,
) -> None:
    """Train an RL agent (stable-baselines3) on a greenroute environment; save it."""
    check_seed(seed)
    try:
        from greenroute.bench.rl_train import parse_overrides
        from greenroute.bench.rl_train import train as _train
    except ImportError as exc:  # pragma: no cover - extra not installed
        raise ConfigError(f"training needs the [rl] extra: {exc}") from None
    from greenroute.sim.output import check_out_file

    if out.suffix != ".zip":
        raise ConfigError(f"--out must end with .zip, got {out}")
    check_out_file(out)
    env_options = parse_overrides(env_option)
    if data_dir is not None:
        given = env_options.get("data_dir")
        if given is not None and Path(str(given)) != data_dir:
            raise ConfigError(
                f"--data-dir {data_dir} and --env-option data_dir={given} disagree; give one"
            )
        env_options["data_dir"] = str(data_dir)
    if _uses_embedded_data(env_options.get("data_dir")):
        print_note(EMBEDDED_DATA_NOTE)
    progress = steps_progress(f"{algo} on {env}", "steps")
    with progress:
        task = progress.add_task("train", total=steps)
        meta = _train(
            env,
            algo,
            steps,
            seed,
            out,
            env_options=env_options,
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
    policy: Annotated[
        str | None, typer.Option("--policy", "--teacher", "-p", help="geo policy (or rl:PATH)")
    ] = None,
    scenario: ScenarioOpt = "geo3",
    out: Annotated[
        Path | None,
        typer.Option(
            help="trajectory file (.parquet; default traj.parquet) or, with --format "
            "text, dataset directory (default dataset)"
        ),
    ] = None,
    days: DaysOpt = None,
    seed: SeedOpt = 0,
    data_dir: DataDirOpt = None,
    format: Annotated[
        str, typer.Option(help="parquet (numerical trajectories) | text (prompt/response JSONL)")
    ] = "parquet",
    val_frac: Annotated[
        float, typer.Option(help="text: share of the last epochs kept for validation")
    ] = 0.2,
) -> None:
    """Record (observation, action, reward) trajectories of a geo policy (for distillation);
    ``--format text`` writes prompt/response pairs and a dataset card (greenroute.agent)."""
    if policy is None:
        raise ConfigError("give the teacher: --teacher/--policy NAME (or rl:PATH)")
    if format not in ("parquet", "text"):
        raise ConfigError(f"unknown --format {format!r}; valid choices: parquet, text")
    if format == "text":
        from greenroute.cli.agent import record_text

        return record_text(policy, scenario, out, days, seed, data_dir, val_frac)
    out = Path("traj.parquet") if out is None else out
    from greenroute.bench.rl_record import record as _record
    from greenroute.bench.rl_record import save_trajectories
    from greenroute.scenarios import get_scenario
    from greenroute.sim.output import check_out_file

    check_seed(seed)
    if out.suffix != ".parquet":
        raise ConfigError(f"--out must end with .parquet, got {out}")
    check_out_file(out)
    if get_scenario(scenario).real_data and _uses_embedded_data(data_dir):
        print_note(EMBEDDED_DATA_NOTE)
    bar = EpochBar(f"record {policy}")
    try:
        ddir = None if data_dir is None else str(data_dir)
        frame = _record(policy, scenario, days=days, seed=seed, data_dir=ddir, progress=bar)
    finally:
        bar.close()
    save_trajectories(frame, out)
    out_console.print(f"saved {len(frame):,} rows ({frame['epoch'].nunique()} epochs) to {out}")


@app.command("train-teacher")
@user_errors
def train_teacher(
    out: Annotated[Path, typer.Option(help="directory for manager.zip, worker.zip, curves")],
    scenario: ScenarioOpt = "geo3",
    data_dir: DataDirOpt = None,
    manager_steps: Annotated[int, typer.Option(help="manager PPO timesteps")] = 400_000,
    worker_steps: Annotated[int, typer.Option(help="worker PPO timesteps (0: manager only)")] = (
        100_000
    ),
    seed: SeedOpt = 0,
    n_envs: Annotated[int, typer.Option(help="parallel environments (processes)")] = 2,
    env_option: Annotated[
        list[str] | None, typer.Option(help="environment option KEY=VALUE (repeatable)")
    ] = None,
    hp: Annotated[
        list[str] | None, typer.Option(help="hyperparameter override KEY=VALUE (repeatable)")
    ] = None,
    manager: Annotated[
        Path | None, typer.Option(help="train only the worker, under this saved manager")
    ] = None,
) -> None:
    """Train seed 000's hierarchical expert (masked manager, then worker) with learning curves
    and a manifest; the teacher is rl:OUT/worker.zip."""
    check_seed(seed)
    try:
        from greenroute.bench.rl_teacher import train_teacher as _train_teacher
        from greenroute.bench.rl_train import parse_overrides
    except ImportError as exc:  # pragma: no cover - extra not installed
        raise ConfigError(f"training needs the [rl] extra: {exc}") from None
    if _uses_embedded_data(data_dir):
        print_note(EMBEDDED_DATA_NOTE)
    progress = steps_progress("teacher", "steps")
    with progress:
        tasks = {}
        if manager is None:
            tasks["manager"] = progress.add_task("manager", total=manager_steps)
        if worker_steps:
            tasks["worker"] = progress.add_task("worker", total=worker_steps)
        manifest = _train_teacher(
            out, scenario=scenario, data_dir=None if data_dir is None else str(data_dir),
            manager_steps=manager_steps, worker_steps=worker_steps, seed=seed, n_envs=n_envs,
            env_options=parse_overrides(env_option), hyperparameters=parse_overrides(hp),
            manager=manager,
            progress=lambda name, done, total: progress.update(tasks[name], completed=done),
        )  # fmt: skip
    out_console.print(
        f"saved teacher {manifest['teacher']} ({manifest['wall_s']:.0f} s); "
        f"manifest {Path(out) / 'manifest.json'}"
    )
