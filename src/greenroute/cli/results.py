"""``results list | query | export``: read the result store (:mod:`greenroute.bench.store`).

``run`` and ``compare`` append their results to the default store through
:func:`record_results` (``$GREENROUTE_STORE``, else ``./greenroute-results``;
``GREENROUTE_STORE=off`` turns that off)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from greenroute.cli.app import app, out_console
from greenroute.cli.errors import print_note, user_errors

results_app = typer.Typer(
    help="List, query and export the result store (every run, compare and sweep cell).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(results_app, name="results")

StoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store",
        help="result store directory (default: $GREENROUTE_STORE, else ./greenroute-results)",
    ),
]
SweepOpt = Annotated[str | None, typer.Option(help="only the cells of this sweep")]
MetricsOpt = Annotated[
    str | None, typer.Option(help="comma-separated metric columns to show (default: a summary)")
]
FailedOpt = Annotated[bool, typer.Option("--failed", help="include failed runs")]
LIST_LIMIT = 50  # rows printed by `results list` unless --limit says otherwise


def record_results(results, source: str) -> None:
    """Append ``results`` (RunResults of ``run`` / ``compare``) to the default store; a store
    that cannot be written is a note, never a failed run."""
    from greenroute.bench.store import ResultStore, default_store_dir

    root = default_store_dir()
    if root is None:
        return
    try:
        store = ResultStore(root)
        for res in results:
            store.append(res, source=source)
    except Exception as err:  # (the run itself succeeded)
        print_note(f"results not recorded in the store {root}: {err}")


def _cell(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return "—" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def _print_frame(frame, title: str) -> None:
    table = Table(title=title, title_justify="left")
    for col in frame.columns:
        table.add_column(str(col), justify="right" if frame[col].dtype.kind in "if" else "left")
    for row in frame.itertuples(index=False):
        table.add_row(*(Text(_cell(v)) for v in row))
    out_console.print(table)


def _metrics(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [m.strip() for m in text.split(",") if m.strip()]
    return names or None


@results_app.command("list")
@user_errors
def list_runs(
    store: StoreOpt = None,
    sweep: SweepOpt = None,
    failed: FailedOpt = False,
    limit: Annotated[int, typer.Option(help="print at most the N newest runs")] = LIST_LIMIT,
) -> None:
    """List the runs in the store (newest last), with carbon and SLO violations."""
    from greenroute.bench.store import SUMMARY_COLUMNS, ResultStore

    st = ResultStore(store)
    frame = st.runs(sweep=sweep, include_failed=failed)
    shown = frame[[c for c in SUMMARY_COLUMNS if c in frame.columns]].tail(max(limit, 0))
    _print_frame(
        shown,
        f"{st.root}: {len(frame)} runs"
        + (f" (showing {len(shown)})" if len(shown) < len(frame) else ""),
    )


@results_app.command("query")
@user_errors
def query(
    where: Annotated[
        str, typer.Argument(help="SQL condition, e.g. \"policy = 'lp-mpc' and scenario = 'geo3'\"")
    ],
    metrics: MetricsOpt = None,
    store: StoreOpt = None,
    sweep: SweepOpt = None,
    failed: FailedOpt = False,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON records to stdout")] = False,
) -> None:
    """Runs matching a DuckDB SQL condition over the store's columns."""
    from greenroute.bench.store import SUMMARY_COLUMNS, ResultStore, records_json

    st = ResultStore(store)
    chosen = _metrics(metrics)
    frame = st.runs(where, metrics=chosen, sweep=sweep, include_failed=failed)
    if chosen:
        ident = ["run_id", "scenario", "label", "seed", "days", "status"]
        frame = frame[[c for c in ident if c in frame.columns] + chosen]
    else:
        frame = frame[[c for c in SUMMARY_COLUMNS if c in frame.columns]]
    if json_out:
        sys.stdout.write(records_json(frame) + "\n")
    else:
        _print_frame(frame, f"{len(frame)} runs where {where}")


@results_app.command("export")
@user_errors
def export(
    out: Annotated[Path, typer.Option("--out", "-o", help="file to write")],
    fmt: Annotated[str, typer.Option("--format", help="csv | parquet | json")] = "csv",
    table: Annotated[str, typer.Option(help="runs | epochs (the per-epoch series)")] = "runs",
    where: Annotated[str | None, typer.Option(help="SQL condition selecting runs")] = None,
    metrics: MetricsOpt = None,
    store: StoreOpt = None,
    sweep: SweepOpt = None,
    failed: FailedOpt = False,
) -> None:
    """Write the selected runs (or their per-epoch series) to a CSV, Parquet or JSON file."""
    from greenroute.bench.store import ResultStore
    from greenroute.sim.output import check_out_file

    check_out_file(out)
    n = ResultStore(store).export(
        out, fmt, table=table, where=where, metrics=_metrics(metrics), sweep=sweep,
        include_failed=failed,
    )  # fmt: skip
    out_console.print(f"wrote {n} rows of {table} to {out}")
