"""Writing results: atomically (a temp dir renamed into place), so nothing is half-written."""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
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


def write_run(res: RunResult, out: Path, *, force: bool = False) -> None:
    with atomic_dir(out, force=force) as tmp:
        _write_one(res, tmp)


def write_compare(results: Sequence[RunResult], out: Path, *, force: bool = False) -> None:
    with atomic_dir(out, force=force) as tmp:
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


# a directory holding one of these was written by greenroute: --force may replace it
RESULT_MARKERS = ("manifest.json", "summary.json")
DIR_MODE = 0o777  # before the umask, as ``mkdir`` does


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists():
        if p.parent == p:
            break
        p = p.parent
    return p


def _mkdir_umask(parent: Path, prefix: str) -> Path:
    """A new directory in ``parent`` created with the user's umask (``mkdtemp`` uses 0700)."""
    for _ in range(100):
        path = parent / f"{prefix}{secrets.token_hex(4)}"
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free temporary name in {parent}")


def check_out_dir(out: str | Path, *, force: bool = False) -> None:
    """Refuse, before any simulation, an ``--out`` that cannot be written as a result directory.

    ``out`` must not be a file; an existing non-empty directory is refused unless ``force``
    and it holds a greenroute result (``manifest.json`` or ``summary.json``); the nearest
    existing ancestor must be a directory in which a directory can really be created (probed,
    so read-only file systems and ``/proc`` are caught too)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is an existing file, not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise ConfigError(
                f"--out {out} exists and is not empty; use --force to replace it, or choose a "
                "new directory"
            )
        here = Path.cwd().resolve()
        if out.resolve() == here or out.resolve() in here.parents:
            raise ConfigError(
                f"--out {out} is the current directory or contains it; --force will not replace it"
            )
        if not any((out / m).is_file() for m in RESULT_MARKERS):
            raise ConfigError(
                f"--out {out} is not a greenroute result directory (no "
                f"{' or '.join(RESULT_MARKERS)}); --force replaces only result directories"
            )
    _probe_creatable(out)


def _probe_creatable(out: Path) -> None:
    """``out`` can be created: its nearest existing ancestor is a directory in which a
    directory can be made (probed by creating and removing one; as root, permission bits
    alone say nothing)."""
    anchor = _nearest_existing(out.absolute().parent)
    if not anchor.is_dir():
        raise ConfigError(f"cannot create --out {out}: {anchor} is a file, not a directory")
    try:
        probe = _mkdir_umask(anchor, f".{out.name or 'out'}.probe-")
    except OSError as exc:
        raise ConfigError(
            f"cannot create --out {out}: {anchor} is not writable ({exc.strerror})"
        ) from None
    probe.rmdir()


def check_out_file(out: str | Path) -> None:
    """Refuse, before any work, an output file path that is a directory or cannot be created
    (its nearest existing ancestor is probed by creating and removing a directory there)."""
    out = Path(out)
    if out.is_dir():
        raise ConfigError(f"--out {out} is an existing directory, not a file")
    _probe_creatable(out)


class atomic_dir:  # noqa: N801 (context manager used like a function)
    """Write into a temporary sibling directory; move it to ``out`` only on success.

    The directory gets the user's umask. With ``force`` an existing result directory is
    replaced: it is renamed aside, the new one renamed into place, then the old one removed
    (restored if the rename fails), so ``out`` always holds a complete result."""

    def __init__(self, out: Path, *, force: bool = False) -> None:
        self.out = Path(out)
        self.force = force

    def __enter__(self) -> Path:
        check_out_dir(self.out, force=self.force)
        parent = self.out.parent if str(self.out.parent) else Path(".")
        try:
            parent.mkdir(parents=True, exist_ok=True)
            self.tmp = _mkdir_umask(parent, f".{self.out.name}.tmp-")
        except OSError as exc:
            raise ConfigError(f"cannot create --out {self.out}: {exc.strerror}") from None
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            if issubclass(exc_type, OSError):
                reason = exc.strerror or exc
                raise ConfigError(f"cannot write --out {self.out}: {reason}") from None
            return
        try:
            self._move_into_place()
        except OSError as err:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise ConfigError(f"cannot write --out {self.out}: {err.strerror or err}") from None

    def _move_into_place(self) -> None:
        old = None
        if self.out.is_dir():
            if any(self.out.iterdir()):
                old = _mkdir_umask(self.out.parent, f".{self.out.name}.old-")
                old.rmdir()
                os.replace(self.out, old)
            else:
                self.out.rmdir()
        try:
            os.replace(self.tmp, self.out)
        except OSError:
            if old is not None:
                os.replace(old, self.out)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
