"""The result store: every run, compare and sweep cell, queryable with DuckDB.

Layout (one directory, by default ``./greenroute-results`` or ``$GREENROUTE_STORE``)::

    runs/<run_id>.parquet     one row: identity (scenario, policy, label, seed, days, weights,
                              ...), status (ok | failed) and error, every metric as a column,
                              the manifest and notes as JSON text
    epochs/<run_id>.parquet   the run's per-epoch frame (one row per epoch and region)
    sweeps/<name>.json        a sweep's spec: its name and the keys of its cells

Why this is safe with many concurrent writers: a writer never modifies a shared file. It
writes its own files under a temporary name (``*.tmp-<random>``, which the ``*.parquet`` glob
does not match) in the same directory and renames them into place with :func:`os.replace`,
which is atomic on POSIX. A reader therefore sees each run completely or not at all, and a
killed writer leaves at most a temporary file, never a torn one. The epochs file is written
before the runs row: the row is the commit marker. Two writers of the same ``run_id`` (the
same sweep cell, whose numbers are deterministic) both leave a complete file: the last wins.
DuckDB reads the files with ``read_parquet(..., union_by_name=true)`` (scenarios with other
regions have other ``utilisation_<region>`` columns).

The Python API (used by :mod:`greenroute.api` and the HTML report):

- :func:`load_runs` -> a pandas DataFrame, one row per run, identity columns then metrics;
- :func:`load_epochs` -> the per-epoch series of chosen runs, with their identity columns;
- :class:`ResultStore` for writing (:meth:`ResultStore.append`) and the rest.

Columns of a runs row: ``run_id`` (a sweep cell's key, or ``run-``/``compare-`` + the hash of
the manifest), ``source`` (run | compare | sweep), ``sweep`` (the sweep that ran it),
``status`` (ok | failed), ``error``, ``created_utc`` (ISO 8601), ``scenario``, ``policy``,
``label`` (the sweep's name for a policy variant, else the policy), ``policy_options`` (JSON),
``local_policy``, ``seed``, ``days_requested``, ``fidelity``, ``server_model``, ``forecast``,
``weight_<carbon|water|cost|latency|slo_penalty>``, ``data_dir``, ``greenroute_version``,
``wall_s`` (seconds; a sweep cell's includes preparing the scenario), ``cpu_s`` (a sweep
cell's CPU seconds; NaN for other runs), then every metric of
:attr:`RunResult.metrics` (``days`` is the simulated span), then ``manifest`` and ``notes``
(JSON) and ``traceback`` (failed runs).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from greenroute.bench.store_records import (
    EPOCH_IDENTITY,
    IDENTITY_COLUMNS,
    TEXT_COLUMNS,
    failure_record,
    records_json,
    result_key,
    row_table,
    run_record,
)
from greenroute.core.errors import ConfigError

__all__ = [
    "EPOCH_IDENTITY",
    "IDENTITY_COLUMNS",
    "ResultStore",
    "default_store_dir",
    "failure_record",
    "load_epochs",
    "load_runs",
    "records_json",
    "result_key",
    "run_record",
]

STORE_ENV = "GREENROUTE_STORE"
DEFAULT_STORE_NAME = "greenroute-results"
DISABLED_VALUES = ("off", "none", "0")  # $GREENROUTE_STORE=off: run/compare append nothing

SUMMARY_COLUMNS = (
    "run_id",
    "source",
    "sweep",
    "scenario",
    "label",
    "seed",
    "days",
    "status",
    "carbon_kg",
    "slo_violation_pct",
    "created_utc",
)
EXPORT_FORMATS = ("csv", "parquet", "json")
TABLES = ("runs", "epochs")


def default_store_dir() -> Path | None:
    """``$GREENROUTE_STORE`` if set (None when it is ``off``/``none``/``0``), else
    ``./greenroute-results``."""
    env = os.environ.get(STORE_ENV)
    if env is not None and env.strip():
        return None if env.strip().lower() in DISABLED_VALUES else Path(env).expanduser()
    return Path.cwd() / DEFAULT_STORE_NAME


def atomic_write(path: Path, write) -> None:
    """``write(tmp_path)`` then rename onto ``path`` (atomic); the temp file never matches
    ``*.parquet`` / ``*.json``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class ResultStore:
    """A result store directory (created on first write). ``root`` None: the default
    (:func:`default_store_dir`)."""

    def __init__(self, root: str | Path | None = None) -> None:
        if root is None:
            root = default_store_dir()
            if root is None:
                raise ConfigError(
                    f"the result store is off (${STORE_ENV}={os.environ.get(STORE_ENV)}); "
                    "name one with --store DIR"
                )
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(f"result store {self.root} is a file, not a directory")

    def __repr__(self) -> str:
        return f"ResultStore({str(self.root)!r})"

    # ------------------------------------------------------------ writing
    def _runs_file(self, run_id: str) -> Path:
        return self.root / "runs" / f"{run_id}.parquet"

    def _epochs_file(self, run_id: str) -> Path:
        return self.root / "epochs" / f"{run_id}.parquet"

    def write(self, row: dict[str, Any], epochs: pd.DataFrame | None = None) -> str:
        """Write one run (its row and, if given, its epoch frame) atomically; returns its id.
        A failed run's row replaces the old epochs file by removing it."""
        import pyarrow.parquet as pq

        run_id = str(row["run_id"])
        if epochs is not None:
            if "run_id" not in epochs.columns:
                epochs = epochs.copy()
                epochs.insert(0, "run_id", run_id)
            atomic_write(self._epochs_file(run_id), lambda p: epochs.to_parquet(p, index=False))
        else:
            self._epochs_file(run_id).unlink(missing_ok=True)
        table = row_table(row)
        atomic_write(self._runs_file(run_id), lambda p: pq.write_table(table, p))
        return run_id

    def append(
        self,
        res,
        *,
        source: str = "run",
        run_id: str | None = None,
        sweep: str | None = None,
        label: str | None = None,
    ) -> str:
        """Record a :class:`~greenroute.sim.results.RunResult`; ``run_id`` defaults to
        :func:`result_key` of its manifest and ``source``, so recording the same run twice
        keeps one row."""
        run_id = run_id or result_key(res.manifest, source)
        row, epochs = run_record(res, run_id=run_id, source=source, sweep=sweep, label=label)
        return self.write(row, epochs)

    def save_sweep(self, name: str, keys: Sequence[str], spec: dict[str, Any]) -> None:
        """Record a sweep's cell keys (what :func:`load_runs` ``sweep=`` selects)."""
        doc = {"name": name, "keys": list(keys), "spec": spec}
        path = self.root / "sweeps" / f"{_safe(name)}.json"
        atomic_write(path, lambda p: p.write_text(json.dumps(doc, indent=1, default=str)))

    # ------------------------------------------------------------ reading
    def _files(self, table: str) -> list[Path]:
        return sorted((self.root / table).glob("*.parquet"))

    def completed(self, keys: Iterable[str]) -> set[str]:
        """Those of ``keys`` that have a successful run in the store."""
        import pyarrow.parquet as pq

        done = set()
        for key in keys:
            f = self._runs_file(key)
            if f.is_file():
                try:
                    status = pq.read_table(f, columns=["status"]).column(0)[0].as_py()
                except Exception:
                    continue
                if status == "ok":
                    done.add(key)
        return done

    def sweeps(self) -> list[str]:
        return sorted(p.stem for p in (self.root / "sweeps").glob("*.json"))

    def sweep_keys(self, name: str) -> list[str]:
        path = self.root / "sweeps" / f"{_safe(name)}.json"
        if not path.is_file():
            raise ConfigError(
                f"no sweep {name!r} in store {self.root}; valid choices: "
                f"{', '.join(self.sweeps()) or '(none)'}"
            )
        return list(json.loads(path.read_text())["keys"])

    def _connect(self):
        import duckdb

        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        return con

    def _runs_relation(self) -> str:
        glob = str(self.root / "runs" / "*.parquet").replace("'", "''")
        return f"read_parquet('{glob}', union_by_name = true)"

    def columns(self) -> list[str]:
        """The columns of the runs table (identity, then every metric any run has)."""
        if not self._files("runs"):
            return list(IDENTITY_COLUMNS)
        con = self._connect()
        try:
            return [
                r[0]
                for r in con.execute(f"DESCRIBE SELECT * FROM {self._runs_relation()}").fetchall()
            ]
        finally:
            con.close()

    def _sql(self, where, metrics, sweep, include_failed) -> str:
        cols = self.columns()
        if metrics:
            unknown = [m for m in metrics if m not in cols]
            if unknown:
                choices = [c for c in cols if c not in IDENTITY_COLUMNS and c not in TEXT_COLUMNS]
                raise ConfigError(
                    f"unknown metric(s) {unknown} in store {self.root}; valid choices: "
                    f"{', '.join(choices)}"
                )
            keep = [c for c in IDENTITY_COLUMNS if c in cols] + ["days"] * ("days" in cols)
            keep += [m for m in metrics if m not in keep]
            select = ", ".join(f'"{c}"' for c in keep)
        else:
            select = "*"
        clauses = [] if include_failed else ["status = 'ok'"]
        if where and where.strip():
            clauses.append(f"({where})")
        if sweep is not None:
            keys = ", ".join(f"'{k}'" for k in self.sweep_keys(sweep))
            clauses.append(f"run_id IN ({keys or 'NULL'})")
        cond = " AND ".join(clauses) or "TRUE"
        order = "ORDER BY created_utc, run_id"
        return f"SELECT {select} FROM {self._runs_relation()} WHERE {cond} {order}"

    def runs(
        self,
        where: str | None = None,
        *,
        metrics: Sequence[str] | None = None,
        sweep: str | None = None,
        include_failed: bool = False,
    ) -> pd.DataFrame:
        """One row per run: identity columns, then metrics (all, or only ``metrics``).

        ``where`` is a DuckDB SQL condition over the columns (``"policy = 'lp-mpc' and
        scenario = 'geo3'"``); ``sweep`` keeps the cells of that sweep; failed runs (``status``
        ``failed``, with ``error``) only with ``include_failed``."""
        if not self._files("runs"):
            if sweep is not None:
                self.sweep_keys(sweep)  # an unknown sweep is an error even in an empty store
            return pd.DataFrame({c: pd.Series(dtype="object") for c in IDENTITY_COLUMNS})
        sql = self._sql(where, metrics, sweep, include_failed)
        return self._query(sql, where)

    def _query(self, sql: str, where: str | None) -> pd.DataFrame:
        import duckdb

        con = self._connect()
        try:
            return con.execute(sql).df()
        except duckdb.Error as err:
            first = str(err).strip().splitlines()[0]
            raise ConfigError(
                f"cannot query store {self.root} with {where!r}: {first}; columns: "
                f"{', '.join(c for c in self.columns() if c not in TEXT_COLUMNS)}"
            ) from None
        finally:
            con.close()

    def epochs(
        self,
        run_ids: Iterable[str] | None = None,
        *,
        where: str | None = None,
        sweep: str | None = None,
    ) -> pd.DataFrame:
        """The per-epoch series (one row per run, epoch and region) of the runs named by
        ``run_ids`` or selected by ``where`` / ``sweep`` (as :meth:`runs`; all runs if none
        is given), with the identity columns ``run_id, scenario, policy, label, seed``."""
        runs = self.runs(where, sweep=sweep)
        if run_ids is not None:
            wanted = set(run_ids)
            runs = runs[runs["run_id"].isin(wanted)]
        files = [self._epochs_file(r) for r in runs["run_id"]]
        files = [f for f in files if f.is_file()]
        if not files:
            return pd.DataFrame({c: pd.Series(dtype="object") for c in EPOCH_IDENTITY})
        frames = [pd.read_parquet(f) for f in files]
        ep = pd.concat(frames, ignore_index=True)
        ident = runs[list(EPOCH_IDENTITY)]
        return ident.merge(ep, on="run_id", how="inner")

    def export(
        self,
        out: str | Path,
        fmt: str,
        *,
        table: str = "runs",
        where: str | None = None,
        metrics: Sequence[str] | None = None,
        sweep: str | None = None,
        include_failed: bool = False,
    ) -> int:
        """Write the selected rows of ``table`` (runs | epochs) to ``out`` as csv, parquet or
        json (an array of records); returns the number of rows."""
        if fmt not in EXPORT_FORMATS:
            raise ConfigError(f"unknown format {fmt!r}; valid choices: {', '.join(EXPORT_FORMATS)}")
        if table not in TABLES:
            raise ConfigError(f"unknown table {table!r}; valid choices: {', '.join(TABLES)}")
        if table == "runs":
            frame = self.runs(where, metrics=metrics, sweep=sweep, include_failed=include_failed)
        else:
            frame = self.epochs(where=where, sweep=sweep)
        out = Path(out)
        if fmt == "csv":
            atomic_write(out, lambda p: frame.to_csv(p, index=False))
        elif fmt == "parquet":
            atomic_write(out, lambda p: frame.to_parquet(p, index=False))
        else:
            atomic_write(out, lambda p: p.write_text(records_json(frame)))
        return len(frame)

    def clean_temporary(self, older_than_s: float = 3600.0) -> int:
        """Remove temporary files left by killed writers (older than ``older_than_s``)."""
        n = 0
        now = time.time()
        for p in self.root.glob("*/*.tmp-*"):
            if now - p.stat().st_mtime > older_than_s:
                p.unlink(missing_ok=True)
                n += 1
        return n


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def load_runs(
    where: str | None = None,
    *,
    metrics: Sequence[str] | None = None,
    sweep: str | None = None,
    include_failed: bool = False,
    store: str | Path | None = None,
) -> pd.DataFrame:
    """Runs in the store as a pandas DataFrame (see :meth:`ResultStore.runs`)."""
    return ResultStore(store).runs(
        where, metrics=metrics, sweep=sweep, include_failed=include_failed
    )


def load_epochs(
    run_ids: Iterable[str] | None = None,
    *,
    where: str | None = None,
    sweep: str | None = None,
    store: str | Path | None = None,
) -> pd.DataFrame:
    """Per-epoch series of runs in the store (see :meth:`ResultStore.epochs`)."""
    return ResultStore(store).epochs(run_ids, where=where, sweep=sweep)
