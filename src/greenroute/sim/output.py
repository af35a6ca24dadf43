"""Writing results: atomically (a temp dir renamed into place), so nothing is half-written."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from greenroute.core.errors import ConfigError
from greenroute.sim.results import RunResult


def _clean(v):
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def metrics_json(res: RunResult) -> dict:
    return {k: _clean(v) for k, v in res.metrics.items()}


def write_run(res: RunResult, out: Path) -> None:
    with atomic_dir(out) as tmp:
        _write_one(res, tmp)


def write_compare(results: Sequence[RunResult], out: Path) -> None:
    with atomic_dir(out) as tmp:
        rows = []
        for res in results:
            sub = tmp / _safe_name(res.policy)
            sub.mkdir()
            _write_one(res, sub)
            rows.append(res.summary_row())
        pd.DataFrame(rows).to_csv(tmp / "summary.csv", index=False)
        (tmp / "summary.json").write_text(
            json.dumps(
                {
                    "scenario": results[0].scenario if results else None,
                    "results": [{"policy": r.policy, "metrics": metrics_json(r)} for r in results],
                },
                indent=2,
            )
        )


def _write_one(res: RunResult, d: Path) -> None:
    (d / "metrics.json").write_text(json.dumps(metrics_json(res), indent=2, sort_keys=True))
    pd.DataFrame([res.metrics]).to_csv(d / "metrics.csv", index=False)
    res.epochs.to_parquet(d / "epochs.parquet", index=False)
    manifest = dict(res.manifest)
    manifest["metrics"] = metrics_json(res)
    (d / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    if res.requests is not None:
        res.requests.to_parquet(d / "requests.parquet", index=False)


def _safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


class atomic_dir:  # noqa: N801 (context manager used like a function)
    """Write into a temporary sibling directory; move it to ``out`` only on success."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)

    def __enter__(self) -> Path:
        if self.out.exists() and any(self.out.iterdir()):
            raise ConfigError(f"--out {self.out} exists and is not empty; choose a new directory")
        parent = self.out.parent if str(self.out.parent) else Path(".")
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create {parent}: {exc.strerror}") from None
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.tmp-", dir=parent))
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        if self.out.exists():
            self.out.rmdir()
        os.replace(self.tmp, self.out)
