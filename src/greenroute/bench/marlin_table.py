"""docs/marlin.md's tables: the MARLIN variants against local-only and lp-mpc on ``marlin8``
with MARLIN's own EWMA workload forecast (seed 001 §5.1), per seed, and MARLIN-Balanced's
ablations (§6.3) on seed 0.

Run::

    python -m greenroute.bench.marlin_table --out DIR [--seeds 3] [--hours 24] [--jobs 1]
        [--data-dir ../shared/data]

Each row is ``greenroute run -s marlin8 -p POLICY --forecast marlin-ewma --seed SEED`` (the
ablations add ``--policy-opt NAME=false``); percentages are against local-only of the same seed.
Without ``--data-dir`` the scenario runs on its synthetic signals, as docs/marlin.md's tables do
(docs/seed001.md has the real-data figures). Writes ``runs.csv``, ``tables.md`` (both tables and
the acceptance lines below them) and ``manifest.json`` into ``--out``; the cells run through
``bench.seed001.run_cells`` (a process pool with ``--jobs``, ``runs.partial.csv`` as they
finish).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.bench.seed001 import (
    ABLATIONS,
    MARLIN_VARIANTS,
    Cell,
    _machine,
    _positive,
    _version,
    run_cells,
)
from greenroute.core.version import __version__

SCENARIO = "marlin8"
FORECAST = "marlin-ewma"
REFERENCE = "local-only"
OPTIMISER = "lp-mpc"
POLICIES = (REFERENCE, OPTIMISER, *(f"marlin-{v}" for v in MARLIN_VARIANTS[1:]), "marlin-balanced")
# each single-objective variant and the metric it minimises (seed 001 §5.2)
OWN_METRIC = {
    "marlin-min-latency": "ttft_mean_s",
    "marlin-min-carbon": "carbon_kg",
    "marlin-min-water": "water_m3",
    "marlin-min-cost": "cost_usd",
}
METRICS = ("ttft_mean_s", "carbon_kg", "water_m3", "cost_usd")
ABLATION_SEED = 0


@dataclass(frozen=True)
class Config:
    seeds: int = 3
    hours: float = 24.0
    data_dir: str | None = None
    jobs: int = 1
    ablations: bool = True


def plan_cells(cfg: Config) -> list[Cell]:
    """The table's rows (every policy on every seed), then the ablations on seed 0."""

    def cell(policy: str, seed: int, options=(), tag="") -> Cell:
        return Cell(
            SCENARIO, policy, seed, cfg.hours, "balanced", options, tag, cfg.data_dir, FORECAST
        )

    cells = [cell(p, s) for p in POLICIES for s in range(cfg.seeds)]
    if cfg.ablations:
        cells += [
            cell("marlin-balanced", ABLATION_SEED, ((a, False),), f"no-{a}") for a in ABLATIONS
        ]
    return cells


def with_changes(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with ``<metric>_vs_local_pct``: 100 x (value / local-only's - 1) on the seed."""
    local = runs[(runs.policy == REFERENCE) & (runs.tag.fillna("") == "")].set_index("seed")
    out = runs.copy()
    for m in METRICS:
        out[f"{m}_vs_local_pct"] = 100.0 * (out[m] / out.seed.map(local[m]) - 1.0)
    return out


def _fmt(v: float, digits: int) -> str:
    return f"{v:,.{digits}f}"


def main_table(runs: pd.DataFrame) -> str:
    """The per-seed table, docs/marlin.md's layout."""
    r = with_changes(runs)
    r = r[r.tag.fillna("") == ""]
    lines = [
        "| policy | seed | TTFT s (vs local) | carbon kg (vs local) | water m³ (vs local) "
        "| cost $ (vs local) | SLO viol. % | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    digits = {"ttft_mean_s": 3, "carbon_kg": 0, "water_m3": 1, "cost_usd": 0}
    for p in POLICIES:
        for _, row in r[r.policy == p].sort_values("seed").iterrows():
            cells = []
            for m in METRICS:
                text = _fmt(row[m], digits[m])
                if p != REFERENCE:
                    text += f" ({row[f'{m}_vs_local_pct']:+.2f} %)"
                cells.append(text)
            lines.append(
                f"| {p} | {int(row.seed)} | {' | '.join(cells)} "
                f"| {row.slo_violation_pct:.2f} | {row.wall_s:.0f} |"
            )
    return "\n".join(lines)


def ablation_table(runs: pd.DataFrame) -> str:
    """MARLIN-Balanced with one part off, against local-only on the ablation seed."""
    r = with_changes(runs)
    r = r[(r.policy == "marlin-balanced") & (r.seed == ABLATION_SEED)]
    lines = ["| ablation | TTFT | carbon | water | cost |", "|---|---|---|---|---|"]
    for tag in ("", *(f"no-{a}" for a in ABLATIONS)):
        row = r[r.tag.fillna("") == tag]
        if row.empty:
            continue
        row = row.iloc[0]
        cells = [
            f"{row[f'{m}_vs_local_pct']:+.{1 if m == 'ttft_mean_s' else 2}f} %" for m in METRICS
        ]
        lines.append(f"| {tag or 'full'} | {' | '.join(cells)} |")
    return "\n".join(lines)


def acceptance(runs: pd.DataFrame) -> list[str]:
    """Does each single-objective variant beat local-only (and lp-mpc) on its own metric, on
    every seed? One line per variant, with the per-seed changes."""
    r = with_changes(runs)
    r = r[r.tag.fillna("") == ""]
    lines = []
    for p, m in OWN_METRIC.items():
        mine = r[r.policy == p].set_index("seed").sort_index()
        opt = r[r.policy == OPTIMISER].set_index("seed")
        if mine.empty:
            continue
        ch = mine[f"{m}_vs_local_pct"]
        beats_local = int((ch < 0).sum())
        beats_opt = int((mine[m] < opt[m].reindex(mine.index)).sum())
        lines.append(
            f"{p}: {m} {' / '.join(f'{v:+.2f}' for v in ch)} % vs local-only "
            f"(beats it on {beats_local} of {len(ch)} seeds; beats {OPTIMISER} on {beats_opt})"
        )
    return lines


def reproduce(cfg: Config, out: Path, log=print) -> pd.DataFrame:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cells = plan_cells(cfg)
    log(f"marlin_table: {len(cells)} simulations on {SCENARIO}, forecast {FORECAST}")
    partial = out / "runs.partial.csv"
    partial.unlink(missing_ok=True)
    runs = run_cells(cells, cfg.jobs, log, partial)
    checksums = next(iter(runs["input_files_sha256"]), {}) if len(runs) else {}
    runs = runs.drop(columns=["input_files_sha256"], errors="ignore")
    runs.to_csv(out / "runs.csv", index=False)
    text = "\n\n".join(
        [main_table(runs), ablation_table(runs) if cfg.ablations else "", *acceptance(runs)]
    )
    (out / "tables.md").write_text(text + "\n")
    manifest = {
        "command": "python -m greenroute.bench.marlin_table " + " ".join(sys.argv[1:]),
        "config": asdict(cfg),
        "greenroute_version": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": _version("torch"),
        "machine": _machine(),  # the learners' floats depend on it (bench.seed001's manifest)
        "input_files_sha256": checksums,
        "wall_s": round(time.perf_counter() - t0, 1),
        "files": ["runs.csv", "tables.md"],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str))
    log(text)
    return runs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--no-ablations", action="store_true")
    a = ap.parse_args(argv)
    seeds, hours = _positive("--seeds", a.seeds), float(_positive("--hours", a.hours))
    cfg = Config(seeds, hours, a.data_dir, max(a.jobs, 1), not a.no_ablations)
    reproduce(cfg, a.out)


if __name__ == "__main__":
    from greenroute.core.errors import exits_on_user_error

    raise SystemExit(exits_on_user_error(main)())
