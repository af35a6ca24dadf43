"""Loaders for the GPU/LLM performance tables in ``<data-dir>/perf`` (see PROVENANCE.md §3).

* ``perf/splitwise_perf_model.csv``: SplitwiseSim's ``data/perf_model.csv`` (Patel et al.,
  "Splitwise", ISCA 2024; MIT). One row per profiled run: ``prompt_time`` (ms, prefill of the
  whole batch), ``token_time`` (ms per decode iteration of the whole batch), ``e2e_time`` (ms).
* ``perf/vidur/<sku>_<model>_mlp.csv.gz``: vidur's per-layer, per-operator linear-layer
  profiles (Agrawal et al., "Vidur", MLSys 2024; MIT), times in ms per layer.

Every loader checks the columns it needs and the values in them, and raises
:class:`DataFormatError` naming the file and the 1-based line of the first bad
row (line 1 is the header). The frames returned keep the files' own column names and units.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.core.errors import DataFormatError

SPLITWISE_RELPATH = "perf/splitwise_perf_model.csv"
VIDUR_DIR_RELPATH = "perf/vidur"

SPLITWISE_TEXT_COLUMNS: tuple[str, ...] = ("model", "hardware")
SPLITWISE_INT_COLUMNS: tuple[str, ...] = (
    "prompt_size",
    "batch_size",
    "token_size",
    "tensor_parallel",
)
SPLITWISE_TIME_COLUMNS_MS: tuple[str, ...] = ("prompt_time", "token_time", "e2e_time")

# vidur operators that run once per transformer layer (``emb`` runs once per forward pass).
VIDUR_LAYER_OPS: tuple[str, ...] = (
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
VIDUR_ONCE_OPS: tuple[str, ...] = ("emb",)
VIDUR_INT_COLUMNS: tuple[str, ...] = ("num_tokens", "num_tensor_parallel_workers")

# catalog GPU key -> vidur SKU prefix of the file names
VIDUR_SKU_BY_GPU: dict[str, str] = {"a100-80gb": "a100", "h100-80gb": "h100"}

_LINE_RE = re.compile(r"line (\d+)")


def vidur_mean_column(op: str) -> str:
    """Name of vidur's mean-time column (ms) of operator ``op``."""
    return f"time_stats.{op}.mean"


def splitwise_path(data_dir: str | Path) -> Path:
    return Path(data_dir) / SPLITWISE_RELPATH


def vidur_mlp_path(data_dir: str | Path, gpu: str, perf_key: str) -> Path:
    """``<data-dir>/perf/vidur/<sku>_<perf_key>_mlp.csv.gz`` for a catalog GPU key."""
    try:
        sku = VIDUR_SKU_BY_GPU[gpu]
    except KeyError:
        from greenroute.core.errors import UnknownNameError

        raise UnknownNameError("vidur GPU", gpu, VIDUR_SKU_BY_GPU) from None
    return Path(data_dir) / VIDUR_DIR_RELPATH / f"{sku}_{perf_key}_mlp.csv.gz"


def _read_raw(path: Path) -> pd.DataFrame:
    """Read every cell as text, keeping blank lines so row ``i`` is file line ``i + 2``."""
    if not path.is_file():
        raise DataFormatError(path, "file not found")
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=False)
    except pd.errors.ParserError as err:
        match = _LINE_RE.search(str(err))
        line = int(match.group(1)) if match else None
        raise DataFormatError(path, f"malformed CSV row ({err})", line=line) from None
    except (UnicodeDecodeError, OSError, EOFError) as err:
        raise DataFormatError(path, f"cannot read as CSV: {err}") from None
    except pd.errors.EmptyDataError:
        raise DataFormatError(path, "empty file") from None


def _require_columns(path: Path, frame: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DataFormatError(path, f"missing column(s) {missing}", line=1)


def _numeric(
    path: Path, frame: pd.DataFrame, column: str, *, integer: bool, positive: bool
) -> np.ndarray:
    """Column as float64 (or int64); the first bad cell raises with its 1-based line."""
    text = frame[column].str.strip()
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if integer:
        bad |= values != np.round(values)
    if positive:
        bad |= values <= 0
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        want = "a positive " if positive else "a "
        want += "integer" if integer else "finite number"
        raise DataFormatError(
            path, f"column {column!r}: {frame[column].iloc[row]!r} is not {want}", line=row + 2
        )
    return values.astype(np.int64) if integer else values


def _text(path: Path, frame: pd.DataFrame, column: str) -> np.ndarray:
    values = frame[column].str.strip()
    empty = (values == "").to_numpy()
    if empty.any():
        row = int(np.flatnonzero(empty)[0])
        raise DataFormatError(path, f"column {column!r} is empty", line=row + 2)
    return values.to_numpy(dtype=object)


def load_splitwise_perf(path: str | Path) -> pd.DataFrame:
    """SplitwiseSim's ``perf_model.csv``: one row per profiled run, times in ms.

    Returns the checked columns ``model, hardware, prompt_size, batch_size, token_size,
    tensor_parallel`` (int) and ``prompt_time, token_time, e2e_time`` (float ms, > 0), in file
    order. The undocumented, normalised ``peak_power``/``average_power`` columns are not used.
    """
    path = Path(path)
    raw = _read_raw(path)
    _require_columns(
        path, raw, SPLITWISE_TEXT_COLUMNS + SPLITWISE_INT_COLUMNS + SPLITWISE_TIME_COLUMNS_MS
    )
    out: dict[str, np.ndarray] = {}
    for col in SPLITWISE_TEXT_COLUMNS:
        out[col] = _text(path, raw, col)
    for col in SPLITWISE_INT_COLUMNS:
        out[col] = _numeric(path, raw, col, integer=True, positive=True)
    for col in SPLITWISE_TIME_COLUMNS_MS:
        out[col] = _numeric(path, raw, col, integer=False, positive=True)
    if len(raw) == 0:
        raise DataFormatError(path, "no data rows")
    return pd.DataFrame(out)


def load_vidur_mlp(path: str | Path) -> pd.DataFrame:
    """A vidur ``mlp.csv`` profile: per-layer operator mean times (ms) by token count and TP.

    Returns ``num_tokens, num_tensor_parallel_workers`` (int) and one float column
    ``time_stats.<op>.mean`` (ms, >= 0) per operator in ``VIDUR_ONCE_OPS + VIDUR_LAYER_OPS``.
    """
    path = Path(path)
    raw = _read_raw(path)
    time_cols = [vidur_mean_column(op) for op in VIDUR_ONCE_OPS + VIDUR_LAYER_OPS]
    _require_columns(path, raw, list(VIDUR_INT_COLUMNS) + time_cols)
    if len(raw) == 0:
        raise DataFormatError(path, "no data rows")
    out: dict[str, np.ndarray] = {}
    for col in VIDUR_INT_COLUMNS:
        out[col] = _numeric(path, raw, col, integer=True, positive=True)
    for col in time_cols:
        values = _numeric(path, raw, col, integer=False, positive=False)
        if (values < 0).any():
            row = int(np.flatnonzero(values < 0)[0])
            raise DataFormatError(path, f"column {col!r}: negative time", line=row + 2)
        out[col] = values
    return pd.DataFrame(out)


def vidur_linear_time_ms(frame: pd.DataFrame, n_layers: int) -> pd.Series:
    """Linear-layer forward time (ms) per (num_tokens, TP): sum of per-layer operator means
    x ``n_layers`` + the once-per-pass embedding; duplicate profile rows are averaged first.

    vidur has no attention kernels in our snapshot, so this covers the linear layers,
    norms, RoPE and residual adds only (PROVENANCE.md §3).
    """
    keys = list(VIDUR_INT_COLUMNS)
    means = frame.groupby(keys, sort=True).mean()
    per_layer = sum(means[vidur_mean_column(op)] for op in VIDUR_LAYER_OPS)
    once = sum(means[vidur_mean_column(op)] for op in VIDUR_ONCE_OPS)
    total = per_layer * n_layers + once
    total.name = "linear_time_ms"
    return total
