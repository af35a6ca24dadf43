"""``greenroute report``: one self-contained HTML file (plotly with its JavaScript inline, so
it opens without a network) or the same figures as PNG/SVG files, from a run, compare or
sweep result; and the notebook views of results (``_repr_html_``, ``.plot()``).

Sections: time series of the signals and of the routing shares (seed 000 Figs. 5-8), metric
bars with 95 % confidence intervals over seeds (seed 001 Fig. 3), the Pareto front with its
hypervolume, the oracle gap, and the scenario, data sources and manifests. Everything is
read and drawn before anything is written, and the output is written to a temporary sibling
and renamed into place, so a bad input leaves nothing half-written.
"""

from __future__ import annotations

import html
import json
import os
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from greenroute.bench.report_data import ReportInput, from_results, load_dir, metric_table
from greenroute.bench.report_figures import BAR_METRICS, Figure, all_figures, pareto_table
from greenroute.core.errors import ConfigError

FORMATS = ("html", "png", "svg")
IMAGE_MARKER = "figures.json"  # lists the figures of an image directory (--force replaces it)
# manifest fields shown in the "Scenario and data" table, in this order (others follow)
SCENARIO_FIELDS = (
    "scenario", "start_utc", "days", "days_requested", "epoch_s", "fidelity", "server_model",
    "facility", "local_policy", "forecast", "forecast_error", "weights", "constraints",
    "signals_source", "workload_source", "data_dir", "greenroute_version", "python", "numpy",
)  # fmt: skip
TABLE_METRICS = (*(m for m, _ in BAR_METRICS), "objective")
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;
max-width:1200px;color:#222;padding:0 16px}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:.9em;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f4f4f4}td.l,th.l{text-align:left}.note{color:#8a5a00}
.caption{color:#555;font-size:.92em}pre{background:#f7f7f7;padding:8px;overflow:auto;
font-size:.8em}nav a{margin-right:12px}
"""


def load(source: str | Path, *, sweep: str | None = None, where: str | None = None) -> ReportInput:
    """The runs of a ``run``/``compare`` output directory (or a folder of them), or of a
    result store (``greenroute sweep --out``): its sweep ``sweep`` (default: its only sweep),
    filtered by the DuckDB condition ``where``."""
    from greenroute.bench.report_store import is_store_dir, load_store

    path = Path(source)
    if path.is_dir() and is_store_dir(path):
        return load_store(path, sweep=sweep, where=where)
    if sweep is not None or where is not None:
        raise ConfigError(
            f"--sweep and --where select runs of a result store; {path} is not one (no runs/)"
        )
    return load_dir(path)


# ------------------------------------------------------------------ HTML
def _e(v) -> str:
    return html.escape(str(v))


def _num(v: float, sig: int = 4) -> str:
    """``sig`` significant digits; from ``10**sig`` on, the whole number with thousands
    separators (81,690 rather than 8.169e+04)."""
    if v != v:
        return "–"
    if abs(v) >= 10**sig:
        return f"{v:,.0f}"
    return f"{v:.{sig}g}"


def _fmt(v) -> str:
    if isinstance(v, float):
        return _num(v)
    if isinstance(v, dict | list):
        return json.dumps(v, sort_keys=True)
    return str(v)


def _table(df: pd.DataFrame, left: Sequence[str] = ()) -> str:
    head = "".join(f'<th class="{"l" if c in left else ""}">{_e(c)}</th>' for c in df.columns)
    body = []
    for _, row in df.iterrows():
        cells = "".join(
            f'<td class="{"l" if c in left else ""}">{_e(_fmt(row[c]))}</td>' for c in df.columns
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def metrics_summary(inp: ReportInput) -> pd.DataFrame:
    """One row per series, one column per metric: ``mean ± ci95`` (``mean`` for one seed)."""
    t = metric_table(inp, TABLE_METRICS)
    rows = []
    for label in inp.labels:
        sub = t[t["label"] == label].set_index("metric")
        row = {"policy": label, "seeds": int(sub["n"].max()) if len(sub) else 0}
        for m in TABLE_METRICS:
            mean, half = sub.loc[m, "mean"], sub.loc[m, "ci95"]
            row[m] = _num(float(mean)) + ("" if half != half else f" ± {_num(float(half), 2)}")
        rows.append(row)
    return pd.DataFrame(rows)


def scenario_tables(inp: ReportInput) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Manifest fields common to every run (field, value) and, per run, the fields that
    differ (with the run's seed and where it was read)."""
    keys = [k for k in SCENARIO_FIELDS if any(k in r.manifest for r in inp.runs)]
    keys += sorted(
        {k for r in inp.runs for k in r.manifest} - set(keys) - {"metrics", "input_files_sha256"}
    )
    same, differ = [], []
    for k in keys:
        vals = {json.dumps(r.manifest.get(k), sort_keys=True) for r in inp.runs}
        (same if len(vals) == 1 else differ).append(k)
    common = pd.DataFrame([{"field": k, "value": _fmt(inp.runs[0].manifest.get(k))} for k in same])
    per_run = pd.DataFrame(
        [
            {"policy": r.label, **{k: _fmt(r.manifest.get(k)) for k in differ}, "source": r.source}
            for r in inp.runs
        ]
    )
    return common, per_run


def _input_files(inp: ReportInput) -> pd.DataFrame:
    files: dict[str, str] = {}
    for r in inp.runs:
        files.update(r.manifest.get("input_files_sha256") or {})
    return pd.DataFrame([{"file": k, "sha256": v} for k, v in sorted(files.items())])


def render_html(inp: ReportInput, figures: list[Figure]) -> str:
    """The whole report as one HTML string, plotly's JavaScript inline."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    scen = ", ".join(sorted({r.scenario for r in inp.runs}))
    title = f"greenroute report: {scen}"
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{CSS}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script>',
        "</head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p>{_e(inp.kind)} result <code>{_e(inp.source)}</code>: {len(inp.runs)} runs, "
        f"{len(inp.labels)} policies, seeds {_e(', '.join(map(str, inp.seeds)))}. "
        f"Made {stamp}.</p>",
    ]
    parts += [f'<p class="note">note: {_e(n)}</p>' for n in inp.notes]
    nav = [(f.slug, f.title) for f in figures] + [("summary", "Metrics table")]
    nav.append(("scenario", "Scenario, data and manifests"))
    parts.append("<nav>" + "".join(f'<a href="#{s}">{_e(t)}</a>' for s, t in nav) + "</nav>")
    for f in figures:
        div = pio.to_html(
            f.fig, full_html=False, include_plotlyjs=False, div_id=f"fig-{f.slug}",
            config={"displaylogo": False, "responsive": True},
        )  # fmt: skip
        parts.append(f'<section id="{f.slug}"><h2>{_e(f.title)}</h2>')
        parts.append(f'<p class="caption">{_e(f.caption)}</p>{div}')
        if f.slug == "pareto":
            table, _ = pareto_table(inp)
            parts.append(_table(table.rename(columns={"label": "policy"}), left=("policy",)))
        parts.append("</section>")
    parts.append('<section id="summary"><h2>Metrics table</h2>')
    parts.append('<p class="caption">Mean over seeds ± half-width of the 95 % interval.</p>')
    parts.append(_table(metrics_summary(inp), left=("policy",)) + "</section>")
    common, per_run = scenario_tables(inp)
    parts.append('<section id="scenario"><h2>Scenario, data and manifests</h2>')
    parts.append(_table(common, left=("field", "value")))
    if len(per_run.columns):
        parts.append("<h3>Per run</h3>" + _table(per_run, left=tuple(per_run.columns)))
    files = _input_files(inp)
    if len(files):
        parts.append("<h3>Input files</h3>" + _table(files, left=("file", "sha256")))
    for r in inp.runs:
        text = json.dumps(r.manifest, indent=2, sort_keys=True, default=str)
        parts.append(
            f"<details><summary>manifest: {_e(r.label)} seed {r.seed}</summary>"
            f"<pre>{_e(text)}</pre></details>"
        )
    parts.append("</section></body></html>")
    return "\n".join(parts)


# ------------------------------------------------------------------ writing
def _check_html_out(out: Path, force: bool) -> None:
    from greenroute.sim.output import check_out_file

    check_out_file(out)  # not a directory, and creatable
    if out.exists() and not force:
        raise ConfigError(f"--out {out} exists; use --force to replace it")


def _write_text_atomic(out: Path, text: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"cannot write --out {out}: {exc.strerror or exc}") from None


def _check_image_out(out: Path, force: bool) -> None:
    from greenroute.sim.output import check_out_file

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is an existing file; --format png/svg writes a directory")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise ConfigError(f"--out {out} exists and is not empty; use --force to replace it")
        if not (out / IMAGE_MARKER).is_file():
            raise ConfigError(
                f"--out {out} is not a report figure directory (no {IMAGE_MARKER}); --force "
                "replaces only those"
            )
    elif not out.exists():
        check_out_file(out)


def write_images(figures: list[Figure], out: Path, fmt: str) -> str:
    """Write each figure as ``SLUG.FMT`` into a new directory ``out`` (atomically); returns
    the engine used: kaleido (plotly's exporter, needs Chrome) or matplotlib (redrawn)."""
    from greenroute.bench.report_static import save_figures

    parent = out.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        paths = [tmp / f"{f.slug}.{fmt}" for f in figures]
        engine = save_figures([f.fig for f in figures], paths, fmt)
        listing = [{"file": f"{f.slug}.{fmt}", "title": f.title, "caption": f.caption}
                   for f in figures]  # fmt: skip
        (tmp / IMAGE_MARKER).write_text(json.dumps({"figures": listing}, indent=2))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return engine


def make_report(
    source: str | Path | ReportInput,
    out: str | Path,
    *,
    fmt: str = "html",
    force: bool = False,
    sweep: str | None = None,
    where: str | None = None,
) -> dict:
    """Read ``source`` (``sweep``/``where``: see :func:`load`), draw every figure and write
    the report to ``out`` (an HTML file, or a directory of images for ``fmt`` png/svg).
    Returns what was written."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown --format {fmt!r}; valid choices: {', '.join(FORMATS)}")
    out = Path(out)
    if fmt == "html":
        _check_html_out(out, force)
    else:
        _check_image_out(out, force)
    inp = source if isinstance(source, ReportInput) else load(source, sweep=sweep, where=where)
    figures = all_figures(inp)
    info = {"out": str(out), "format": fmt, "figures": [f.slug for f in figures],
            "runs": len(inp.runs), "notes": list(inp.notes)}  # fmt: skip
    if fmt == "html":
        _write_text_atomic(out, render_html(inp, figures))
    else:
        info["engine"] = write_images(figures, out, fmt)
    return info


# ------------------------------------------------------------------ notebook views
def results_html(results: Sequence) -> str:
    """An HTML table of results (Jupyter's ``_repr_html_``): a heading, then one row per
    policy with the main metrics."""
    results = list(results)
    if not results:
        return "<p>no results</p>"
    r0 = results[0]
    head = (
        f"<p><b>{_e(r0.scenario)}</b> ({_e(r0.fidelity)}, {r0.metrics.get('days', 0):g} days, "
        f"seed {r0.seed}, forecast {_e(r0.forecast)})</p>"
    )
    cols = [m for m in TABLE_METRICS if any(m in r.metrics for r in results)]
    rows = [{"policy": r.policy, **{m: r.metrics.get(m, float("nan")) for m in cols}}
            for r in results]  # fmt: skip
    return head + _table(pd.DataFrame(rows), left=("policy",))


def results_figure(results: Sequence, kind: str = "auto"):
    """A plotly figure of results: ``series`` (signals), ``shares``, ``metrics``, ``pareto``
    or ``oracle``; ``auto``: the routing shares for one result, the metric bars for several."""
    from greenroute.bench import report_figures as F

    makers = {"series": F.signals_figure, "shares": F.shares_figure,
              "metrics": F.metric_bars_figure, "pareto": F.pareto_figure,
              "oracle": F.oracle_gap_figure}  # fmt: skip
    results = list(results)
    if kind == "auto":
        kind = "shares" if len(results) == 1 else "metrics"
    if kind not in makers:
        raise ConfigError(f"unknown plot kind {kind!r}; valid choices: auto, {', '.join(makers)}")
    fig = makers[kind](from_results(results))
    if fig is None:
        raise ConfigError(f"these results have no data for a {kind!r} plot")
    return fig.fig
