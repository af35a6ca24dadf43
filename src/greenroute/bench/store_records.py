"""The rows of the result store (:mod:`greenroute.bench.store`): its columns, a run's row
and epoch frame from a :class:`~greenroute.sim.results.RunResult`, a failed run's row, the
one-row Arrow table (stable column types) each runs file holds, and JSON records."""

from __future__ import annotations

import hashlib
import json
import math
import traceback
from typing import Any

import pandas as pd

from greenroute.core.objective import WEIGHT_FIELDS

# identity columns of every row (metrics follow, one column each)
IDENTITY_COLUMNS: tuple[str, ...] = (
    "run_id",
    "source",
    "sweep",
    "status",
    "error",
    "created_utc",
    "scenario",
    "policy",
    "label",
    "policy_options",
    "local_policy",
    "seed",
    "days_requested",
    "fidelity",
    "server_model",
    "forecast",
    *(f"weight_{w}" for w in WEIGHT_FIELDS),
    "data_dir",
    "greenroute_version",
    "wall_s",
    "cpu_s",
)
TEXT_COLUMNS = ("manifest", "notes", "traceback")  # JSON / long text, last in each row
EPOCH_IDENTITY = ("run_id", "scenario", "policy", "label", "seed")


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def run_record(
    res,
    *,
    run_id: str,
    source: str,
    sweep: str | None = None,
    label: str | None = None,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """The store row and epoch frame of a :class:`~greenroute.sim.results.RunResult`."""
    from greenroute.core.version import __version__

    m = res.manifest
    weights = m.get("weights") or {}
    row: dict[str, Any] = {
        "run_id": run_id,
        "source": source,
        "sweep": sweep,
        "status": "ok",
        "error": None,
        "created_utc": pd.Timestamp.now(tz="UTC").isoformat(),
        "scenario": res.scenario,
        "policy": res.policy,
        "label": label or res.policy,
        "policy_options": _json(m.get("policy_options") or {}),
        "local_policy": res.local_policy,
        "seed": int(res.seed),
        "days_requested": _float(m.get("days_requested", m.get("days"))),
        "fidelity": res.fidelity,
        "server_model": res.server_model,
        "forecast": res.forecast,
        **{f"weight_{w}": _float(weights.get(w)) for w in WEIGHT_FIELDS},
        "data_dir": m.get("data_dir"),
        "greenroute_version": __version__,
        "wall_s": _float(res.extras.get("wall_s")),
        "cpu_s": math.nan,
    }
    for k, v in res.metrics.items():
        row[k if k not in row else f"metric_{k}"] = _float(v)
    row["manifest"] = _json(m)
    row["notes"] = _json(list(res.notes))
    row["traceback"] = None
    epochs = res.epochs.copy()
    epochs.insert(0, "run_id", run_id)
    return row, epochs


def failure_record(
    identity: dict[str, Any], run_id: str, source: str, error: BaseException, sweep: str | None
) -> dict[str, Any]:
    """The store row of a run that failed: its identity, ``status='failed'`` and the error."""
    from greenroute.core.version import __version__

    row = {c: None for c in IDENTITY_COLUMNS}
    row.update({k: v for k, v in identity.items() if k in row})
    row.update(
        run_id=run_id,
        source=source,
        sweep=sweep,
        status="failed",
        error=f"{type(error).__name__}: {error}",
        created_utc=pd.Timestamp.now(tz="UTC").isoformat(),
        greenroute_version=__version__,
        manifest=None,
        notes=None,
        traceback="".join(traceback.format_exception(error))[-4000:],
    )
    return row


def row_table(row: dict[str, Any]):
    """One-row Arrow table with stable types (text, int64 seed, float64 for the rest)."""
    import pyarrow as pa

    text = {"run_id", "source", "sweep", "status", "error", "created_utc", "scenario", "policy",
            "label", "policy_options", "local_policy", "fidelity", "server_model", "forecast",
            "data_dir", "greenroute_version", "model_path", *TEXT_COLUMNS}  # fmt: skip
    fields, arrays = [], []
    for k, v in row.items():
        if k in text:
            typ = pa.string()
            v = None if v is None else str(v)
        elif k == "seed":
            typ = pa.int64()
        else:
            typ = pa.float64()
            v = None if v is None else _float(v)
        fields.append(pa.field(k, typ))
        arrays.append(pa.array([v], type=typ))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def records_json(frame: pd.DataFrame) -> str:
    """A JSON array of records at full float precision (pandas' ``to_json`` rounds to 10
    digits); NaN is ``null``, timestamps ISO 8601."""

    def plain(v):
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA or v is pd.NaT:
            return None
        if isinstance(v, pd.Timestamp):
            return v.isoformat()
        return v.item() if hasattr(v, "item") else v

    rows = [{k: plain(v) for k, v in r.items()} for r in frame.to_dict(orient="records")]
    return json.dumps(rows, indent=1, default=str)


KEY_HEX_CHARS = 16  # 64 bits of SHA-256: a collision needs ~4e9 keys (birthday bound)


def config_hash(doc: dict[str, Any]) -> str:
    """The store's key of a configuration: SHA-256 of its canonical JSON (sorted keys, no
    spaces), ``KEY_HEX_CHARS`` hex digits. Runs, sweep cells and training cells use it."""
    text = json.dumps(doc, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_HEX_CHARS]


def result_key(manifest: dict[str, Any], source: str) -> str:
    """A run's id from the fields of its manifest that decide its numbers (not the versions)
    and how it was made (``run`` / ``compare``): same command, same id."""
    skip = {"greenroute_version", "python", "numpy"}
    doc = {k: v for k, v in manifest.items() if k not in skip}
    doc["source"] = source
    return f"{source}-{config_hash(doc)}"
