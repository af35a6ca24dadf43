"""On-disk cache of parsed inputs and derived figures, keyed by content checksums.

Parsing the hourly grid CSVs costs seconds; the parsed arrays load in milliseconds. Entries
live under the user's cache directory (``$GREENROUTE_CACHE_DIR``, else
``$XDG_CACHE_HOME/greenroute``, else ``~/.cache/greenroute``):

* safe to delete: a missing entry is recomputed and written again;
* never stale: a key holds the SHA-256 of the raw input file (not its name or mtime) and the
  format version of the code that produced the entry, so a changed file or parser gets a new
  key; old entries are simply never read again;
* written atomically (temporary file in the same directory, then ``os.replace``), so a
  concurrent reader sees either the whole entry or none; an unreadable or corrupt entry is
  ignored and rewritten;
* bypassed with ``--no-cache`` (CLI), ``cache=False`` (API) or ``GREENROUTE_NO_CACHE=1``:
  nothing is read from or written to the directory.

Entries are ``.npz`` archives of plain arrays (no pickles) or small JSON files.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from greenroute.core.cache_root import CACHE_DIR_ENV as CACHE_DIR_ENV
from greenroute.core.cache_root import cache_root

NO_CACHE_ENV = "GREENROUTE_NO_CACHE"

_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar("greenroute_cache", default=True)
# (resolved path, mtime_ns, size, inode) -> sha256: a file is hashed once per process
_checksums: dict[tuple[str, int, int, int], str] = {}


def cache_dir() -> Path:
    """Root of the on-disk cache (not created here)."""
    return cache_root()


def enabled() -> bool:
    """Whether the disk cache is in use (``GREENROUTE_NO_CACHE=1`` or :func:`use_cache` off)."""
    if os.environ.get(NO_CACHE_ENV, "").strip() not in ("", "0"):
        return False
    return _enabled.get()


@contextlib.contextmanager
def use_cache(on: bool = True) -> Iterator[None]:
    """Turn the disk cache on or off for the code run inside the ``with`` block."""
    token = _enabled.set(bool(on) and _enabled.get())
    try:
        yield
    finally:
        _enabled.reset(token)


def file_checksum(path: str | Path) -> str:
    """SHA-256 of a file's bytes, computed once per process per (path, mtime, size, inode)."""
    from greenroute.data.paths import file_sha256

    resolved = Path(path).resolve()
    st = resolved.stat()
    key = (str(resolved), st.st_mtime_ns, st.st_size, st.st_ino)
    digest = _checksums.get(key)
    if digest is None:
        digest = file_sha256(resolved)
        _checksums[key] = digest
    return digest


def make_key(*parts: object) -> str:
    """A stable hex key from strings/numbers (their ``repr``s, in order)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def _entry(namespace: str, key: str, suffix: str) -> Path:
    return cache_dir() / namespace / f"{key}{suffix}"


def _write_atomic(path: Path, write) -> None:
    """Write through a temporary file in the same directory, then rename over ``path``.
    Failures (read-only or full disk) only mean that nothing is cached."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def load_arrays(namespace: str, key: str) -> dict[str, np.ndarray] | None:
    """The arrays stored under ``key``, or ``None`` (disabled, missing or unreadable)."""
    if not enabled():
        return None
    path = _entry(namespace, key, ".npz")
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        return None  # corrupt or truncated: recomputed and rewritten by the caller


def store_arrays(namespace: str, key: str, arrays: Mapping[str, np.ndarray]) -> None:
    if not enabled():
        return
    _write_atomic(_entry(namespace, key, ".npz"), lambda handle: np.savez(handle, **dict(arrays)))


def load_json(namespace: str, key: str) -> dict | None:
    if not enabled():
        return None
    try:
        value = json.loads(_entry(namespace, key, ".json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def store_json(namespace: str, key: str, value: dict) -> None:
    if not enabled():
        return
    data = json.dumps(value, sort_keys=True).encode("utf-8")
    _write_atomic(_entry(namespace, key, ".json"), lambda handle: handle.write(data))


# Parts of greenroute that can change a simulated figure (the engine, its inputs and the local
# policies it runs); the CLI, API, benches, environments and geo policies cannot.
SIMULATION_CODE = ("core", "catalog", "data", "physics", "constraints.py", "sim", "scenarios",
                   "policies/local.py")  # fmt: skip


def code_fingerprint(exclude: tuple[str, ...] = ()) -> str:
    """SHA-256 over the source and embedded data files of :data:`SIMULATION_CODE`: derived
    figures (such as the objective's reference scales) are recomputed whenever that code
    changes. ``exclude``: files (paths under the package, e.g. ``"sim/fluid_route_wait.py"``)
    left out, for figures that provably do not run them."""
    if exclude not in _CODE_FP:
        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256()
        files = sorted(
            p
            for part in SIMULATION_CODE
            for p in ([root / part] if part.endswith(".py") else (root / part).rglob("*"))
            if p.is_file() and p.suffix in (".py", ".json", ".npz", ".csv")
            and p.relative_to(root).as_posix() not in exclude
        )  # fmt: skip
        for p in files:
            h.update(str(p.relative_to(root)).encode("utf-8"))
            h.update(p.read_bytes())
        _CODE_FP[exclude] = h.hexdigest()
    return _CODE_FP[exclude]


_CODE_FP: dict[tuple[str, ...], str] = {}


# ---------------------------------------------------------------------------------------------
# parsed time series (pandas objects on a UTC index) <-> plain arrays
# ---------------------------------------------------------------------------------------------
def _index_arrays(index) -> dict[str, np.ndarray]:
    return {
        "__index_us__": np.asarray(index.as_unit("us").asi8, dtype=np.int64),
        "__freq__": np.array([index.freqstr or ""]),
    }


def _utc_index(arrays: Mapping[str, np.ndarray], name: str | None):
    import pandas as pd

    ticks = np.asarray(arrays["__index_us__"], dtype=np.int64).astype("datetime64[us]")
    freq = str(arrays["__freq__"][0]) or None
    return pd.DatetimeIndex(ticks, name=name, freq=freq).tz_localize("UTC")


def frame_to_arrays(frame) -> dict[str, np.ndarray]:
    """A float/bool DataFrame on a tz-aware UTC index as plain arrays."""
    out = _index_arrays(frame.index)
    out["__columns__"] = np.array([str(c) for c in frame.columns])
    out["__index_name__"] = np.array([frame.index.name or ""])
    for i, c in enumerate(frame.columns):
        out[f"col{i}"] = frame[c].to_numpy()
    return out


def arrays_to_frame(arrays: Mapping[str, np.ndarray]):
    import pandas as pd

    name = str(arrays["__index_name__"][0]) or None
    columns = [str(c) for c in arrays["__columns__"]]
    data = {c: arrays[f"col{i}"] for i, c in enumerate(columns)}
    return pd.DataFrame(data, index=_utc_index(arrays, name), columns=columns)


def series_to_arrays(series) -> dict[str, np.ndarray]:
    out = _index_arrays(series.index)
    out["__index_name__"] = np.array([series.index.name or ""])
    out["__name__"] = np.array([series.name or ""])
    out["values"] = series.to_numpy()
    return out


def arrays_to_series(arrays: Mapping[str, np.ndarray]):
    import pandas as pd

    index = _utc_index(arrays, str(arrays["__index_name__"][0]) or None)
    return pd.Series(arrays["values"], index=index, name=str(arrays["__name__"][0]) or None)


def cached_parse(kind: str, path: Path, extra: str, version: int, parse):
    """``parse(kind, path, extra)`` through the disk cache. ``kind`` "price" returns
    (Series, filled mask); the others a DataFrame. The key is the file's SHA-256, ``kind``,
    ``extra`` (e.g. the price file's time zone) and the parser's format ``version``."""
    key = make_key("signals", kind, extra, version, file_checksum(path))
    arrays = load_arrays("signals", key)
    if arrays is not None:
        try:
            if kind == "price":
                return arrays_to_series(arrays), np.asarray(arrays["filled"], dtype=bool)
            return arrays_to_frame(arrays)
        except (KeyError, ValueError, TypeError, IndexError):
            pass  # an entry of the wrong shape: parse and overwrite it
    value = parse(kind, path, extra)
    if kind == "price":
        series, filled = value
        out = series_to_arrays(series)
        out["filled"] = np.asarray(filled, dtype=bool)
    else:
        out = frame_to_arrays(value)
    store_arrays("signals", key, out)
    return value
