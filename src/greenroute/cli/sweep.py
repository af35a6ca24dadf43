"""``sweep``: run a grid of scenarios x policies x seeds x weights x days into the store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from greenroute.cli.app import app, err_console, out_console
from greenroute.cli.errors import print_note, user_errors

StoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "--store",
        help="result store directory (default: $GREENROUTE_STORE, else ./greenroute-results)",
    ),
]


class SweepBar:
    """Cells done / failed / running and the ETA (from the cells run so far, on stderr)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.progress: Progress | None = None
        self.task = None

    def __call__(self, p) -> None:
        if self.progress is None:
            self.progress = Progress(
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                TextColumn(
                    "{task.completed}/{task.total} cells  done {task.fields[done]}  "
                    "failed {task.fields[failed]}  running {task.fields[running]}"
                    "{task.fields[skipped]}",
                    markup=False,
                ),
                TimeElapsedColumn(),
                TextColumn("ETA", markup=False),
                TimeRemainingColumn(),
                console=err_console,
                transient=False,
            )
            self.progress.start()
            self.task = self.progress.add_task(
                self.name, total=p.to_run, done=0, failed=0, running=0, skipped=""
            )
        skipped = f"  (skipped {p.skipped} in the store)" if p.skipped else ""
        self.progress.update(
            self.task,
            completed=p.done + p.failed,
            total=p.to_run,
            done=p.done,
            failed=p.failed,
            running=p.running,
            skipped=skipped,
        )

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


@app.command()
@user_errors
def sweep(
    spec: Annotated[
        Path, typer.Argument(help="sweep spec (YAML; see greenroute.bench.sweep_spec)")
    ],
    out: StoreOpt = None,
    local: Annotated[
        bool, typer.Option("--local", help="a process pool on this machine instead of Ray")
    ] = False,
    address: Annotated[
        str | None,
        typer.Option(help="address of an existing Ray cluster (default: start a local Ray)"),
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="parallel cells (default: the CPUs of this machine/cluster)")
    ] = None,
    limit: Annotated[
        int | None, typer.Option(help="run at most N missing cells, then stop (rerun continues)")
    ] = None,
) -> None:
    """Run every cell of a sweep spec not yet in the result store (Ray tasks by default).

    Idempotent: a cell whose result is in the store is skipped, so a killed sweep resumes
    where it stopped; a failing cell is recorded with its error and the others go on (exit
    code 1 when a cell failed; running the sweep again retries it).
    """
    from greenroute.bench.store import ResultStore
    from greenroute.bench.sweep import run_sweep
    from greenroute.bench.sweep_spec import load_spec
    from greenroute.core.errors import ConfigError

    if limit is not None and limit < 0:
        raise ConfigError(f"--limit must be >= 0, got {limit}")
    sp = load_spec(spec)
    store = ResultStore(out)
    bar = SweepBar(sp.name)
    try:
        summary = run_sweep(
            sp,
            store=store,
            backend="local" if local else "ray",
            address=address,
            workers=workers,
            limit=limit,
            on_progress=bar,
        )
    finally:
        bar.close()
    for key, label, error in summary.failures:
        print_note(f"cell {key} ({label}): {error}", label="failed", style="red")
    out_console.print(
        f"sweep {summary.name}: {summary.total} cells, {summary.skipped} already in the store, "
        f"{summary.done} run, {summary.failed} failed, in {summary.wall_s:.1f} s "
        f"({summary.backend}, {summary.workers} workers); store {summary.store}"
    )
    out_console.print(
        f"Next: `greenroute results list --store {summary.store} --sweep {summary.name}`"
    )
    if summary.failed:
        raise typer.Exit(1)
