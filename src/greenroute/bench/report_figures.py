"""The report's figures (plotly), from a :class:`~greenroute.bench.report_data.ReportInput`:

- :func:`signals_figure`: per-region carbon intensity, price and temperature over time
  (seed 000 Fig. 5);
- :func:`shares_figure`: the share of requests each policy routed to each region per epoch
  (seed 000 Figs. 7-8: a greedy policy's "bang-bang" routing against a balanced one);
- :func:`metric_bars_figure`: per-policy TTFT, carbon, water, cost, energy and SLO
  violations, mean over seeds with 95 % confidence intervals (seed 001 Fig. 3);
- :func:`improvement_figure`: improvement over local-only, paired by seed (seed 000 Fig. 4);
- :func:`pareto_figure`: the Pareto front over (carbon, water, cost, TTFT) with its
  hypervolume (:mod:`greenroute.bench.pareto`);
- :func:`oracle_gap_figure`: how far each policy is from the oracle.

plotly is imported inside the functions: it is an optional extra (``scale``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from greenroute.bench.report_data import (
    BASELINE,
    ReportInput,
    improvements,
    mean_ci,
    oracle_gaps,
    pareto_table,
)

SIGNALS = (
    ("carbon_intensity_g_per_kwh", "Carbon intensity (gCO₂/kWh)"),
    ("price_usd_per_kwh", "Price ($/kWh)"),
    ("temp_c", "Temperature (°C)"),
)
BAR_METRICS = (
    ("ttft_mean_s", "TTFT mean (s)"),
    ("carbon_kg", "Carbon (kg CO₂e)"),
    ("water_m3", "Water (m³)"),
    ("cost_usd", "Energy cost ($)"),
    ("energy_kwh", "Energy (kWh)"),
    ("slo_violation_pct", "SLO violations (%)"),
)
ORACLE_PANELS = (
    ("oracle_savings_captured_pct", "Oracle's J savings captured (%)"),
    ("oracle_carbon_savings_captured_pct", "Oracle's CO₂ savings captured (%)"),
    ("j_above_oracle_pct", "J above the oracle's (%)"),
)
IMPROVEMENT_METRICS = (
    ("carbon_kg", "Carbon"),
    ("cost_usd", "Energy cost"),
    ("energy_kwh", "Energy"),
    ("water_m3", "Water"),
)
MAX_SHARE_ROWS = 12  # routing-share panels drawn at most (one per series)
ROW_PX = 210  # height of one row of panels
TEMPLATE = "plotly_white"


@dataclass
class Figure:
    """A figure with the id, title and caption the report shows it under."""

    slug: str
    title: str
    caption: str
    fig: object  # plotly.graph_objects.Figure


def _colors(names: list[str]) -> dict[str, str]:
    import plotly.express as px

    pal = px.colors.qualitative.D3 + px.colors.qualitative.Set2
    return {n: pal[i % len(pal)] for i, n in enumerate(names)}


def _layout(fig, height: int, title: str) -> None:
    fig.update_layout(
        template=TEMPLATE,
        height=height,
        title={"text": title, "x": 0.01},
        margin={"l": 70, "r": 20, "t": 70, "b": 40},
        legend={"orientation": "h", "y": -0.08 if height > 500 else -0.2},
    )


# ------------------------------------------------------------------ time series
def _regions(epochs: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(epochs["region"].astype(str)))


def signals_figure(inp: ReportInput) -> Figure | None:
    """Carbon intensity, price and temperature per region (the signals every policy saw)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    run = next((inp.series_run(lb) for lb in inp.labels if inp.series_run(lb)), None)
    if run is None:
        return None
    ep = run.epochs
    regions = _regions(ep)
    color = _colors(regions)
    fig = make_subplots(
        rows=len(SIGNALS), cols=1, shared_xaxes=True, vertical_spacing=0.06,
        subplot_titles=[t for _, t in SIGNALS],
    )  # fmt: skip
    for row, (col, _) in enumerate(SIGNALS, start=1):
        if col not in ep.columns:
            continue
        for reg in regions:
            d = ep[ep["region"].astype(str) == reg]
            fig.add_trace(
                go.Scatter(
                    x=d["time_utc"], y=d[col], mode="lines", name=reg, legendgroup=reg,
                    showlegend=row == 1, line={"color": color[reg], "width": 1.6},
                ),
                row=row, col=1,
            )  # fmt: skip
    _layout(fig, ROW_PX * len(SIGNALS) + 120, f"Signals by region: {run.scenario}")
    return Figure(
        "signals",
        "Carbon intensity, price and temperature by region",
        f"The signals every policy saw ({run.scenario}, seed {run.seed}, "
        f"{run.manifest.get('signals_source', 'unknown')} signals; seed 000 Fig. 5 style).",
        fig,
    )


def routing_shares(epochs: pd.DataFrame) -> pd.DataFrame:
    """Share (0-1) of the requests dispatched in each epoch that went to each region: one
    column per region, one row per epoch time (0 where nothing was dispatched)."""
    wide = epochs.pivot_table(
        index="time_utc", columns="region", values="requests_dispatched", aggfunc="sum",
        sort=False,
    )  # fmt: skip
    wide.columns = [str(c) for c in wide.columns]
    total = wide.sum(axis=1)
    return wide.div(total.where(total > 0), axis=0).fillna(0.0)


def shares_figure(inp: ReportInput) -> Figure | None:
    """One stacked-area panel per series: the share of requests routed to each region."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    runs = [(lb, inp.series_run(lb)) for lb in inp.labels]
    runs = [(lb, r) for lb, r in runs if r is not None and "requests_dispatched" in r.epochs]
    if not runs:
        return None
    shown = runs[:MAX_SHARE_ROWS]
    regions = list(dict.fromkeys(reg for _, r in shown for reg in _regions(r.epochs)))
    color = _colors(regions)
    fig = make_subplots(
        rows=len(shown), cols=1, shared_xaxes=True, vertical_spacing=0.25 / len(shown),
        subplot_titles=[f"{lb} (seed {r.seed})" for lb, r in shown],
    )  # fmt: skip
    for row, (_, run) in enumerate(shown, start=1):
        share = routing_shares(run.epochs)
        for reg in regions:
            if reg not in share:
                continue
            fig.add_trace(
                go.Scatter(
                    x=share.index, y=100 * share[reg], mode="lines", name=reg,
                    legendgroup=reg, showlegend=row == 1, stackgroup=f"row{row}",
                    line={"color": color[reg], "width": 0.5},
                ),
                row=row, col=1,
            )  # fmt: skip
        fig.update_yaxes(range=[0, 100], title_text="%", row=row, col=1)
    _layout(fig, ROW_PX * len(shown) + 120, "Routing shares by policy")
    more = f" The first {MAX_SHARE_ROWS} of {len(runs)} series are drawn." if shown != runs else ""
    return Figure(
        "shares",
        "Routing shares each policy chose",
        "Share of each epoch's dispatched requests sent to each region (seed 000 Figs. 7-8 "
        f"style).{more}",
        fig,
    )


# ------------------------------------------------------------------ bars with intervals
def _bar(go, labels, stats, color):
    means = [s[0] for s in stats]
    halves = [0.0 if math.isnan(s[1]) else s[1] for s in stats]
    return go.Bar(
        x=labels, y=means, marker_color=[color[lb] for lb in labels], showlegend=False,
        error_y={"type": "data", "array": halves, "visible": any(h > 0 for h in halves)},
        customdata=[[s[2], s[1]] for s in stats],
        hovertemplate="%{x}: %{y:.4g} ± %{customdata[1]:.3g} (n=%{customdata[0]})<extra></extra>",
    )  # fmt: skip


def metric_bars_figure(inp: ReportInput) -> Figure:
    """Per-series metric bars: mean over seeds, error bars the 95 % Student-t interval."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    labels = inp.labels
    color = _colors(labels)
    groups = inp.by_label()
    cols = 3
    rows = math.ceil(len(BAR_METRICS) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[t for _, t in BAR_METRICS])
    for i, (m, _) in enumerate(BAR_METRICS):
        stats = [mean_ci(r.metrics.get(m) for r in groups[lb]) for lb in labels]
        fig.add_trace(_bar(go, labels, stats, color), row=i // cols + 1, col=i % cols + 1)
    _layout(fig, 330 * rows + 80, "Metrics by policy")
    n = sorted({len(v) for v in groups.values()})
    seeds = f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"
    ci = (
        f"mean over {seeds} seeds, error bars the 95 % Student-t confidence interval of the mean"
        if n[-1] > 1
        else "one seed per policy, so no confidence interval"
    )
    return Figure(
        "metrics", "Metrics by policy", f"Lower is better; {ci} (seed 001 Fig. 3 style).", fig
    )


# ------------------------------------------------------------------ paired improvement
def improvement_figure(inp: ReportInput) -> Figure | None:
    """Grouped bars: each series' improvement over local-only per metric, mean ± 95 % CI of
    the paired per-seed improvements (seed 000 Fig. 4); None without local-only runs."""
    import plotly.graph_objects as go

    imp = improvements(inp)
    if not imp:
        return None
    names = dict(IMPROVEMENT_METRICS)
    labels = [lb for lb in inp.labels if any(lb in v for v in imp.values())]
    color = _colors(inp.labels)
    fig = go.Figure()
    for lb in labels:
        stats = [mean_ci(imp[m].get(lb, ())) for m in imp]
        halves = [0.0 if math.isnan(s[1]) else s[1] for s in stats]
        fig.add_trace(
            go.Bar(
                x=[names[m] for m in imp], y=[s[0] for s in stats], name=lb,
                marker_color=color[lb],
                error_y={"type": "data", "array": halves, "visible": any(h > 0 for h in halves)},
            )
        )  # fmt: skip
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text=f"improvement over {BASELINE} (%)")
    _layout(fig, 420, f"Improvement over {BASELINE}")
    return Figure(
        "improvement",
        f"Improvement over {BASELINE}",
        f"100 x ({BASELINE} - policy) / {BASELINE}, per seed against the same seed's "
        f"{BASELINE} run; bars the mean, error bars the 95 % interval over seeds; higher is "
        "better (seed 000 Fig. 4 style).",
        fig,
    )


# ------------------------------------------------------------------ Pareto front
def pareto_figure(inp: ReportInput) -> Figure:
    """Two projections of the 4-D front (carbon vs TTFT, carbon vs cost); front points
    filled, dominated ones open; the title gives the front's hypervolume."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    table, front_hv = pareto_table(inp)
    color = _colors(inp.labels)
    pairs = (("carbon_kg", "ttft_mean_s"), ("carbon_kg", "cost_usd"))
    names = {"carbon_kg": "Carbon (kg CO₂e)", "ttft_mean_s": "TTFT mean (s)",
             "cost_usd": "Energy cost ($)"}  # fmt: skip
    fig = make_subplots(rows=1, cols=2, subplot_titles=[f"{names[y]} vs carbon" for _, y in pairs])
    for col, (x, y) in enumerate(pairs, start=1):
        for _, row in table.iterrows():
            on = bool(row["on_front"])
            fig.add_trace(
                go.Scatter(
                    x=[row[x]], y=[row[y]], mode="markers+text", text=[row["label"]],
                    textposition="top center", name=row["label"], legendgroup=row["label"],
                    cliponaxis=False,
                    showlegend=col == 1,
                    marker={"size": 13 if on else 10, "color": color[row["label"]],
                            "symbol": "circle" if on else "circle-open",
                            "line": {"width": 2, "color": "#222" if on else color[row["label"]]}},
                ),
                row=1, col=col,
            )  # fmt: skip
        fig.update_xaxes(title_text=names[x], row=1, col=col)
        fig.update_yaxes(title_text=names[y], row=1, col=col)
    hv = "n/a (pymoo not installed)" if front_hv is None else f"{front_hv:.4f}"
    _layout(fig, 460, f"Pareto front: hypervolume {hv}")
    on = ", ".join(table.loc[table["on_front"], "label"]) or "none"
    return Figure(
        "pareto",
        "Pareto front and hypervolume",
        "Points: each policy's mean (carbon, water, cost, TTFT), all minimised; filled = on "
        f"the 4-D Pareto front ({on}). Hypervolume of the front: {hv}, normalised: each metric "
        "divided by the reference point (worst observed value x 1.1), so 1 is the whole box "
        "(greenroute.bench.pareto).",
        fig,
    )


# ------------------------------------------------------------------ oracle gap
def oracle_gap_figure(inp: ReportInput) -> Figure | None:
    """Bars (mean ± 95 % CI) of the oracle gap metrics; None when the input has neither an
    oracle run nor oracle-gap metrics."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    gaps = oracle_gaps(inp)
    if not gaps:
        return None
    titles = dict(ORACLE_PANELS)
    color = _colors(inp.labels)
    fig = make_subplots(rows=1, cols=len(gaps), subplot_titles=[titles[k] for k in gaps])
    for col, vals in enumerate(gaps.values(), start=1):
        labels = [lb for lb in inp.labels if lb in vals]
        stats = [mean_ci(vals[lb]) for lb in labels]
        fig.add_trace(_bar(go, labels, stats, color), row=1, col=col)
    _layout(fig, 420, "Gap to the oracle")
    return Figure(
        "oracle",
        "Gap to the oracle",
        "Share of the oracle's savings over local-only each policy captures (100 %: as good "
        "as the oracle, 0 %: no better than local-only) and its objective J above the "
        "oracle's (0 %: the oracle's value).",
        fig,
    )


def all_figures(inp: ReportInput) -> list[Figure]:
    """Every figure the input has data for, in report order."""
    figs = [signals_figure(inp), shares_figure(inp), metric_bars_figure(inp)]
    figs.append(improvement_figure(inp))
    figs += [pareto_figure(inp), oracle_gap_figure(inp)]
    return [f for f in figs if f is not None]
