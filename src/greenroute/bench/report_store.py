"""Report input from the result store (:mod:`greenroute.bench.store`): a sweep's cells, or
any runs a DuckDB condition selects. Each stored row becomes a
:class:`~greenroute.bench.report_data.RunRecord` (its manifest, its metric columns); the
per-epoch series are read only for the runs the time-series figures draw (each series'
lowest seed). A sweep's own policy labels name the series."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from greenroute.bench.report_data import ReportInput, RunRecord, make_input
from greenroute.core.errors import DataFormatError

MAX_FAILURES_LISTED = 5  # failed cells named in the report's notes (then a count)


TRAINING_POLICY_PREFIX = "train:"  # the policy column of a training cell's row


def is_store_dir(d: Path) -> bool:
    """A result store: a ``runs/`` folder of parquet rows."""
    return (d / "runs").is_dir()


def _metrics(row: pd.Series, skip: set[str]) -> dict[str, float]:
    out = {}
    for k, v in row.items():
        if k in skip or not isinstance(v, int | float) or isinstance(v, bool):
            continue
        if isinstance(v, float) and math.isnan(v):
            continue  # a column another scenario's runs have (union of the rows' columns)
        out[k.removeprefix("metric_")] = float(v)
    return out


def _record(row: pd.Series, root: Path, skip: set[str]) -> RunRecord:
    try:
        manifest = json.loads(row["manifest"])
    except (TypeError, ValueError) as exc:
        raise DataFormatError(root / "runs" / f"{row['run_id']}.parquet",
                              f"manifest is not JSON ({exc})") from None  # fmt: skip
    return RunRecord(
        metrics=_metrics(row, skip),
        manifest=manifest,
        source=f"{root}:{row['run_id']}",
        base_label=str(row.get("label") or manifest.get("policy")),
        run_id=str(row["run_id"]),
    )


def load_store(root: Path, *, sweep: str | None = None, where: str | None = None) -> ReportInput:
    """The runs of a store directory: the cells of ``sweep`` (by default the store's only
    sweep, if it holds exactly one; else every run), filtered by the DuckDB condition
    ``where``. Failed cells are left out and named in the notes."""
    from greenroute.bench.store import IDENTITY_COLUMNS, TEXT_COLUMNS, ResultStore
    from greenroute.core.errors import ConfigError

    store = ResultStore(root)
    sweeps = store.sweeps()
    if sweep is None and len(sweeps) == 1:
        sweep = sweeps[0]
    rows = store.runs(where, sweep=sweep, include_failed=True)
    # training cells (policy "train:<agent>", bench/sweep_train.py) have no run metrics to
    # draw: their models are reported through the rl:train/<id> cells that evaluate them
    training = rows["policy"].astype(str).str.startswith(TRAINING_POLICY_PREFIX)
    n_training = int(training.sum())
    rows = rows[~training]
    failed = rows[rows["status"] != "ok"]
    rows = rows[rows["status"] == "ok"]
    what = f"sweep {sweep!r} of store {root}" if sweep else f"store {root}"
    if rows.empty:
        trained = f", {n_training} training cell(s) (not runs)" if n_training else ""
        raise ConfigError(
            f"{what} has no successful run{' matching ' + repr(where) if where else ''}"
            f" ({len(failed)} failed{trained}); sweeps in it: {', '.join(sweeps) or '(none)'}"
        )
    skip = set(IDENTITY_COLUMNS) | set(TEXT_COLUMNS)
    runs = [_record(row, root, skip) for _, row in rows.iterrows()]
    inp = make_input("sweep" if sweep else "store", what, runs)
    wanted = {min(inp.by_label()[lb], key=lambda r: r.seed).run_id for lb in inp.labels}
    epochs = store.epochs(sorted(wanted))
    for r in inp.runs:
        if r.run_id in wanted:
            ep = epochs[epochs["run_id"] == r.run_id]
            keep = [c for c in ep.columns if c not in ("run_id", "scenario", "policy", "label",
                                                        "seed")]  # fmt: skip
            r.epochs = ep[keep].reset_index(drop=True) if len(ep) else None
    if sweep is None and len(sweeps) > 1:
        inp.notes.append(f"every run of the store ({len(sweeps)} sweeps: {', '.join(sweeps)})")
    if n_training:
        inp.notes.append(f"{n_training} training cell(s) left out (their models are reported "
                         "by the rl:train/<id> runs that evaluate them)")  # fmt: skip
    if len(failed):
        named = [f"{r['label']} seed {r['seed']}: {r['error']}" for _, r in failed.iterrows()]
        more = len(named) - MAX_FAILURES_LISTED
        inp.notes.append(
            f"{len(failed)} failed cell(s) left out: {'; '.join(named[:MAX_FAILURES_LISTED])}"
            + (f"; and {more} more" if more > 0 else "")
        )
    return inp
