"""Result tables on stdout."""

from __future__ import annotations

import math

from rich.table import Table
from rich.text import Text

from greenroute.cli.app import out_console

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


def short(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def fmt(v, spec: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return spec.format(v)


def print_table(results, title: str, per_day: bool = False) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("Policy", style="bold", no_wrap=True)
    for key, label, _ in TABLE_COLUMNS:
        suffix = "/day" if per_day and key in EXTENSIVE else ""
        table.add_column(label + suffix, justify="right")
    extra_gap = any("oracle_savings_captured_pct" in r.metrics for r in results)
    if "objective" in results[0].metrics:
        table.add_column("Objective J", justify="right")
    if extra_gap:
        table.add_column("Oracle J savings captured (%)", justify="right")
        table.add_column("Oracle CO₂ savings captured (%)", justify="right")
    for r in results:
        days = r.metrics.get("days", 1.0) or 1.0
        cells = []
        for key, _, spec in TABLE_COLUMNS:
            v = r.metrics.get(key)
            if per_day and key in EXTENSIVE and v is not None:
                v = v / days
            cells.append(fmt(v, spec))
        if "objective" in results[0].metrics:
            cells.append(fmt(r.metrics.get("objective"), "{:.4f}"))
        if extra_gap:
            cells.append(fmt(r.metrics.get("oracle_savings_captured_pct"), "{:.1f}"))
            cells.append(fmt(r.metrics.get("oracle_carbon_savings_captured_pct"), "{:.1f}"))
        table.add_row(Text(r.policy), *cells)
    out_console.print(table)
