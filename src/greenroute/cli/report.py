"""``report``: an HTML report (or PNG/SVG figures) of a run, compare or sweep result."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from greenroute.cli.app import app, out_console
from greenroute.cli.errors import print_note, user_errors


@app.command()
@user_errors
def report(
    source: Annotated[
        Path,
        typer.Argument(
            help="a directory written by `greenroute run/compare --out` (or a folder of them, "
            "e.g. one compare per seed), or a result store (`greenroute sweep --out`)",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            help="the HTML file to write (default report.html); for --format png/svg a "
            "directory of image files (default report-figures)"
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="html: one self-contained file (plotly, opens offline); png or svg: each "
            "figure as an image file",
        ),
    ] = "html",
    force: Annotated[
        bool, typer.Option("--force", help="replace an existing report at --out")
    ] = False,
    sweep: Annotated[
        str | None,
        typer.Option(help="for a result store: the sweep to report (default: its only sweep)"),
    ] = None,
    where: Annotated[
        str | None,
        typer.Option(help='for a result store: a DuckDB condition on its runs, e.g. "seed < 3"'),
    ] = None,
) -> None:
    """Write the report of a result: signal and routing-share time series, metric bars with
    95 % confidence intervals over seeds, the Pareto front with its hypervolume, the oracle
    gap, and the scenario, data sources and manifests."""
    from greenroute import api

    if out is None:
        out = Path("report.html" if fmt == "html" else "report-figures")
    info = api.report(source, out, fmt=fmt, force=force, sweep=sweep, where=where)
    for note in info["notes"]:
        print_note(note)
    how = f" ({info['engine']})" if info.get("engine") else ""
    out_console.print(
        f"wrote {info['out']}{how}: {len(info['figures'])} figures "
        f"({', '.join(info['figures'])}) from {info['runs']} runs"
    )


def report_hint(out: Path | None, results=(), source: str = "run") -> None:
    """After ``run``/``compare``: the command that makes the report of what was written to
    ``--out``, else of the ``results`` in the result store (selected by their run ids), else
    how to keep a result a report can be made from."""
    if out is not None:
        html_out = out.parent / f"{out.name}-report.html"
        print_note(f"greenroute report {out} --out {html_out}", label="report")
        return
    from greenroute.bench.store import default_store_dir, result_key

    root = default_store_dir()
    if root is None or not results:
        print_note("add --out DIR to keep the result; then `greenroute report DIR`", label="report")
        return
    ids = ", ".join(f"'{result_key(r.manifest, source)}'" for r in results)
    print_note(f'greenroute report {root} --where "run_id IN ({ids})"', label="report")
