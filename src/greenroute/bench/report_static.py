"""The report's figures as PNG/SVG files.

plotly's own exporter (kaleido) drives a Chrome; where kaleido is missing or cannot start a
browser, the figure is redrawn with matplotlib (installed with pymoo, the ``opt`` extra) from
the plotly figure itself: every subplot at its plotly domain, lines, stacked areas, markers
with labels and bars with error bars, subplot titles, axis titles and one legend. Only the
trace types the report draws (Scatter, Bar) are handled.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError

DPI = 100  # plotly sizes are in CSS pixels: 1 px = 1/100 in at this dpi
DEFAULT_WIDTH_PX = 1100
PNG_SCALE = 2  # PNG resolution multiplier (print quality)


def save_figures(figs: list, paths: list[Path], fmt: str) -> str:
    """Write each figure to its path; returns the engine that did it (kaleido draws them all
    with one Chrome; matplotlib redraws them where kaleido cannot run)."""
    try:
        import kaleido  # noqa: F401
        import plotly.io as pio

        pio.write_images(figs, [str(p) for p in paths], format=fmt,
                         width=[_width(f) for f in figs], scale=PNG_SCALE)  # fmt: skip
        return "kaleido"
    except Exception:  # not installed, or no Chrome it can start: redraw with matplotlib
        for p in paths:
            p.unlink(missing_ok=True)
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
    except ImportError:
        raise ConfigError(
            f"--format {fmt} needs kaleido with Chrome, or matplotlib (pip install "
            "matplotlib); neither is usable here"
        ) from None
    for fig, path in zip(figs, paths, strict=True):
        to_matplotlib(fig).savefig(path, format=fmt, dpi=DPI * PNG_SCALE)
    return "matplotlib"


def _width(fig) -> int:
    return int(fig.layout.width or DEFAULT_WIDTH_PX)


def mpl_color(c, default: str = "#1f77b4"):
    """A plotly colour (``#hex``, ``rgb(r,g,b)``, ``rgba(...)``, a name) as matplotlib's."""
    if c is None or isinstance(c, list | tuple):
        return default
    m = re.fullmatch(r"rgba?\(([^)]*)\)", str(c).replace(" ", ""))
    if m:
        v = [float(x) for x in m.group(1).split(",")]
        return tuple(x / 255 for x in v[:3]) + ((v[3],) if len(v) > 3 else ())
    return str(c)


def _x(values):
    """x values for matplotlib: datetimes (timezone dropped) stay datetimes."""
    arr = np.asarray(values)
    if arr.dtype.kind == "M" or (len(arr) and isinstance(arr[0], pd.Timestamp | str)):
        try:
            t = pd.to_datetime(pd.Series(arr))
            if t.dt.tz is not None:
                t = t.dt.tz_convert("UTC").dt.tz_localize(None)
            return t.to_numpy()
        except (ValueError, TypeError):
            pass
    return arr


def _axes_for(fig, mfig, margin):
    """One matplotlib Axes per plotly (xaxis, yaxis) pair used by a trace, at its domain."""
    w_px, h_px = _width(fig), int(fig.layout.height or 450)
    left, right, top, bottom = margin
    axes = {}
    for tr in fig.data:
        key = (tr.xaxis or "x", tr.yaxis or "y")
        if key in axes:
            continue
        xa = fig.layout[key[0].replace("x", "xaxis", 1)]
        ya = fig.layout[key[1].replace("y", "yaxis", 1)]
        x0, x1 = xa.domain or (0, 1)
        y0, y1 = ya.domain or (0, 1)
        fx = lambda v: (left + v * (w_px - left - right)) / w_px  # noqa: E731
        fy = lambda v: (bottom + v * (h_px - top - bottom)) / h_px  # noqa: E731
        ax = mfig.add_axes((fx(x0), fy(y0), fx(x1) - fx(x0), fy(y1) - fy(y0)))
        ax.grid(True, color="#e5e5e5", linewidth=0.6)
        ax.set_axisbelow(True)
        if xa.title and xa.title.text:
            ax.set_xlabel(xa.title.text)
        if ya.title and ya.title.text:
            ax.set_ylabel(ya.title.text)
        if ya.range:
            ax.set_ylim(*ya.range)
        if xa.showticklabels is False:  # shared x axis: labels on the bottom panel only
            ax.tick_params(axis="x", labelbottom=False)
        axes[key] = ax
    return axes


def _draw_bar(tr, ax, slot: tuple[int, int]):
    """Bars at categorical positions; ``slot`` (i, n): the i-th of n grouped bar traces."""
    i, n = slot
    err = None
    if tr.error_y and tr.error_y.visible and tr.error_y.array is not None:
        err = np.asarray(tr.error_y.array, dtype=float)
    colors = tr.marker.color
    cols = [mpl_color(c) for c in colors] if isinstance(colors, list | tuple) else None
    cats = [str(c) for c in tr.x]
    width = 0.8 / n
    pos = np.arange(len(cats)) - 0.4 + width * (i + 0.5)
    h = ax.bar(pos, np.asarray(tr.y, dtype=float), width=width, yerr=err, capsize=4,
               color=cols or mpl_color(colors), ecolor="#333", label=tr.name or "")  # fmt: skip
    ax.set_xticks(np.arange(len(cats)), cats, rotation=30, fontsize=8)
    return h


def _draw(tr, ax, stacks, handles, slot=(0, 1)) -> None:
    name = tr.name or ""
    if tr.type == "bar":
        h = _draw_bar(tr, ax, slot)
        if tr.showlegend is not False and name and name not in handles:
            handles[name] = h
        return
    x, y = _x(tr.x), np.asarray(tr.y, dtype=float)
    mode = tr.mode or "lines"
    color = mpl_color((tr.line.color if "lines" in mode else None) or tr.marker.color)
    if tr.stackgroup:
        base = stacks.get(id(ax), np.zeros(len(y)))
        top = base + np.nan_to_num(y)
        h = ax.fill_between(x, base, top, color=color, alpha=0.85, linewidth=0, label=name)
        stacks[id(ax)] = top
    elif "markers" in mode:
        filled = "open" not in str(tr.marker.symbol or "")
        face = color if filled else "none"
        size = (tr.marker.size or 8) ** 2
        h = ax.scatter(x, y, s=size, label=name, facecolors=face, edgecolors=color, linewidths=2)
        ax.margins(0.12)  # room for the point labels
        if "text" in mode and tr.text is not None:
            for xi, yi, ti in zip(x, y, tr.text, strict=False):
                ax.annotate(str(ti), (xi, yi), textcoords="offset points", xytext=(0, 8),
                            ha="center", fontsize=8)  # fmt: skip
    else:
        (h,) = ax.plot(x, y, color=color, linewidth=tr.line.width or 1.5, label=name)
    if tr.showlegend is not False and name and name not in handles:
        handles[name] = h


def to_matplotlib(fig):
    """A matplotlib Figure drawing the plotly ``fig`` (see the module docstring)."""
    from matplotlib.figure import Figure

    w_px, h_px = _width(fig), int(fig.layout.height or 450)
    m = fig.layout.margin
    margin = (m.l or 70, m.r or 20, m.t or 70, (m.b or 40) + 40)  # room for the legend
    mfig = Figure(figsize=(w_px / DPI, h_px / DPI), dpi=DPI)
    axes = _axes_for(fig, mfig, margin)
    stacks: dict[int, np.ndarray] = {}
    handles: dict[str, object] = {}
    grouped = fig.layout.barmode == "group"
    bars: dict[tuple, list] = {}
    for tr in fig.data:
        if tr.type == "bar":
            bars.setdefault((tr.xaxis or "x", tr.yaxis or "y"), []).append(tr)
    for tr in fig.data:
        key = (tr.xaxis or "x", tr.yaxis or "y")
        group = bars.get(key, [tr])
        slot = ([id(t) for t in group].index(id(tr)), len(group)) if grouped else (0, 1)
        _draw(tr, axes[key], stacks, handles, slot)
    left, right, top, bottom = margin
    for ann in fig.layout.annotations or ():
        if ann.xref == "paper" and ann.yref == "paper" and ann.text:
            fx = (left + ann.x * (w_px - left - right)) / w_px
            fy = (bottom + ann.y * (h_px - top - bottom)) / h_px
            mfig.text(fx, fy + 4 / h_px, ann.text, ha="center", va="bottom", fontsize=10)
    if fig.layout.title and fig.layout.title.text:
        mfig.text(0.01, 1 - 12 / h_px, fig.layout.title.text, ha="left", va="top", fontsize=13)
    if handles:
        mfig.legend(list(handles.values()), list(handles), loc="lower center",
                    ncol=min(len(handles), 6), frameon=False, fontsize=9)  # fmt: skip
    return mfig
