"""Strict CSV reading for the data loaders: gzip by magic bytes, a field count checked on every
line (the first bad one is reported as ``file:line``), required columns and values, numbers,
timestamps on the hour and increasing. Every problem is a :class:`DataFormatError` naming the
file (and line), never a parser traceback."""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.core.errors import DataFormatError

_INDEX_NAME = "time_utc"
_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
    """Whole file, gunzipped when it starts with the gzip magic (whatever its extension)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataFormatError(path, "file not found") from None
    except OSError as exc:
        raise DataFormatError(path, f"cannot read file ({exc.strerror or exc})") from None
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataFormatError(path, f"corrupt gzip stream ({exc})") from None
    if raw.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte-order mark
        raw = raw[3:]
    if b"\x00" in raw[:65536]:
        raise DataFormatError(path, "not a text CSV file (binary content)")
    try:
        raw[:65536].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < 65536 - 4:  # not just a character cut at the probe's end
            raise DataFormatError(path, "not a UTF-8 text CSV file (binary content)") from None
    return raw


def _field_counts(data: bytes) -> np.ndarray:
    """Number of comma-separated fields on each physical line of ``data``."""
    if not data:
        return np.zeros(0, dtype=np.int64)
    if b'"' in data:  # quoted fields may hold commas: let the csv module split (small files)
        rows = csv.reader(io.StringIO(data.decode("utf-8", errors="replace"), newline=""))
        return np.fromiter((len(r) for r in rows), dtype=np.int64)
    buf = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(buf == ord("\n"))
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines, [len(buf)]))
    commas = np.flatnonzero(buf == ord(","))
    return np.searchsorted(commas, ends) - np.searchsorted(commas, starts) + 1


def _read_csv_strict(
    path: Path, required: Sequence[str] | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """Read ``path`` as text columns after checking its shape.

    Returns the frame (all columns ``str``, empty/NaN cells as missing) and the header. Row ``i``
    of the frame is line ``i + 2`` of the file. ``required=None`` returns every column.
    """
    raw = _read_bytes(path)
    data = raw[: len(raw.rstrip(b"\r\n \t"))]  # trailing blank lines are not rows
    counts = _field_counts(data)
    if counts.size == 0:
        raise DataFormatError(path, "empty file (no header)")
    first_line = data.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", errors="replace")
    try:
        header = next(csv.reader([first_line]))
    except csv.Error as exc:
        raise DataFormatError(path, f"unreadable header ({exc})", line=1) from None
    header = [name.strip() for name in header]
    bad = np.flatnonzero(counts[1:] != counts[0])
    if bad.size:
        line = int(bad[0]) + 2
        raise DataFormatError(
            path,
            f"malformed row: expected {counts[0]} comma-separated fields, found {counts[line - 1]}",
            line=line,
        )
    if required is not None:
        _require_columns(path, header, required)
    if counts.size == 1:
        raise DataFormatError(path, "no data rows after the header")
    try:
        frame = pd.read_csv(
            io.BytesIO(data),
            dtype=str,
            usecols=list(required) if required is not None else None,
            encoding="utf-8",
            skipinitialspace=True,
            skip_blank_lines=False,
        )
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise DataFormatError(path, f"cannot parse CSV ({exc})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame, header


def _require_columns(path: Path, header: Sequence[str], required: Sequence[str]) -> None:
    missing = [name for name in required if name not in header]
    if missing:
        raise DataFormatError(path, f"missing required column(s) {missing}; found columns {header}")


def _first_line(mask: np.ndarray) -> int:
    """File line of the first True row of ``mask`` (row i is line i + 2)."""
    return int(np.flatnonzero(mask)[0]) + 2


def _require_values(path: Path, frame: pd.DataFrame, columns: Sequence[str]) -> None:
    for column in columns:
        missing = frame[column].isna().to_numpy()
        if missing.any():
            raise DataFormatError(
                path, f"empty or NaN value in required column {column!r}", _first_line(missing)
            )


def _numeric(path: Path, frame: pd.DataFrame, column: str) -> np.ndarray:
    """Float64 values of a required column; empty, NaN or non-numeric cells are errors."""
    text = frame[column]
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(values)
    if bad.any():
        line = _first_line(bad)
        cell = text.iloc[line - 2]
        what = "empty or NaN value" if pd.isna(cell) or cell.lower() == "nan" else "bad number"
        shown = "" if pd.isna(cell) else f" {cell!r}"
        raise DataFormatError(path, f"{what}{shown} in required column {column!r}", line)
    return values


def _timestamps(path: Path, frame: pd.DataFrame, column: str, *, utc: bool) -> pd.DatetimeIndex:
    """Parse an ISO-8601 time column; naive stamps are UTC when ``utc``."""
    text = frame[column]
    _require_values(path, frame, [column])
    try:
        parsed = pd.to_datetime(text, format="ISO8601", utc=utc, errors="coerce")
    except (ValueError, TypeError) as exc:  # e.g. mixed naive/aware stamps without utc=True
        raise DataFormatError(path, f"cannot parse timestamps in {column!r} ({exc})") from None
    bad = parsed.isna().to_numpy()
    if bad.any():
        line = _first_line(bad)
        raise DataFormatError(
            path, f"unparseable timestamp {text.iloc[line - 2]!r} in {column!r}", line
        )
    return pd.DatetimeIndex(parsed)


def _check_increasing(path: Path, times: pd.DatetimeIndex, what: str = "timestamp") -> None:
    steps = np.diff(times.asi8)
    bad = steps <= 0
    if bad.any():
        row = int(np.flatnonzero(bad)[0]) + 1
        kind = "duplicated" if steps[row - 1] == 0 else "non-increasing"
        raise DataFormatError(path, f"{kind} {what} {times[row]}", row + 2)


def _check_on_the_hour(path: Path, times: pd.DatetimeIndex) -> None:
    off = np.asarray(times != times.floor("h"))
    if off.any():
        line = _first_line(off)
        raise DataFormatError(path, f"timestamp {times[line - 2]} is not on the hour", line)


def _utc_index(times: pd.DatetimeIndex) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(times.tz_convert("UTC").as_unit("us"), name=_INDEX_NAME)
