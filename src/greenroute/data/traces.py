"""Loaders for the public request traces in ``shared/data/llm_traces`` (see its PROVENANCE.md §1).

* Azure LLM inference 2023 (Splitwise, Patel et al. ISCA 2024): ``TIMESTAMP, ContextTokens,
  GeneratedTokens``; about one hour on 2023-11-16, code 8,819 rows, conv 19,366 rows. The
  trace states no time zone, so timestamps stay naive.
* vidur arXiv-summarisation lengths (Llama-2 tokenizer): ``num_prefill_tokens,
  num_decode_tokens, ...``; 28,257 rows, no timestamps.
* Alibaba GenAI 2026 Stable-Diffusion LoRA request trace (GenTD26): ``gmt_create,
  predict_type, predict_status, exec_time_seconds, ...``; 26,823 rows over 23 days, with
  anonymised and shifted timestamps. Used only for the shape of load over the week.

Every loader validates the file and turns any defect into one :class:`DataFormatError` that
names the file and the 1-based line (header = line 1) of the first offending row.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.core.errors import DataFormatError

# Paths relative to the data directory (shared/data/PROVENANCE.md §1).
AZURE_CODE_RELPATH = Path("llm_traces/azure_llm_2023_code.csv")
AZURE_CONV_RELPATH = Path("llm_traces/azure_llm_2023_conv.csv")
VIDUR_ARXIV_RELPATH = Path("llm_traces/vidur_arxiv_summarization_lengths_llama2tok.csv.gz")
ALIBABA_GENAI_RELPATH = Path("llm_traces/alibaba_genai2026_sd_lora_request_trace.csv.gz")

# Timestamp layouts of the files (PROVENANCE §1): Azure has 7 decimals
# ("2023-11-16 18:17:03.9799600"), Alibaba whole seconds ("2024-11-15 16:57:50").
_TS_FRACTIONAL = "%Y-%m-%d %H:%M:%S.%f"
_TS_SECONDS = "%Y-%m-%d %H:%M:%S"

_INT32_MAX = np.iinfo(np.int32).max
_INT_RE = r"[+-]?\d+"
_HEADER_LINE = 1  # 1-based line of the header; data row k (0-based) is on line k + 2


class _Problems:
    """Collects (data row, message) defects and raises the earliest one."""

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.row: int | None = None
        self.message = ""

    def add(self, bad: np.ndarray, message_for_row) -> None:
        """``bad`` is a boolean mask over data rows; keep the first bad row overall."""
        hits = np.flatnonzero(bad)
        if hits.size and (self.row is None or hits[0] < self.row):
            self.row = int(hits[0])
            self.message = message_for_row(self.row)

    def raise_first(self) -> None:
        if self.row is not None:
            raise DataFormatError(self.path, self.message, line=self.row + 2)


def _read_raw(path: str | Path, nrows: int | None = None) -> pd.DataFrame:
    return pd.read_csv(
        path,
        dtype=str,
        header=None,
        keep_default_na=False,
        skip_blank_lines=False,
        encoding="utf-8",
        nrows=nrows,
    )


def _read_table(path: str | Path, required: Sequence[str]) -> tuple[pd.DataFrame, _Problems]:
    """Read a CSV (optionally gzip'd) as strings and check that ``required`` columns exist.

    Rows keep their file order, so data row ``k`` (0-based) is line ``k + 2``. A row the CSV
    parser rejects (too many fields, unclosed quote) is recorded in the returned problems and
    only the rows above it are returned, so that an earlier defect is still reported first.
    """
    problems = _Problems(path)
    try:
        try:
            raw = _read_raw(path)
        except pd.errors.ParserError as err:
            text = str(err).strip()
            line = None
            if m := re.search(r"in line (\d+)", text):
                line = int(m.group(1))
            elif m := re.search(r"starting at row (\d+)", text):
                line = int(m.group(1)) + 1
            detail = text.split("C error: ")[-1]
            if line is None or line < 2:
                raise DataFormatError(path, f"malformed row ({detail})", line=line) from None
            problems.row = line - 2
            problems.message = f"malformed row ({detail})"
            raw = _read_raw(path, nrows=line - 1)
    except FileNotFoundError:
        raise DataFormatError(path, "file not found") from None
    except pd.errors.EmptyDataError:
        raise DataFormatError(path, "empty file (no header line)") from None
    except pd.errors.ParserError as err:
        detail = str(err).strip().split("C error: ")[-1]
        raise DataFormatError(path, f"malformed file ({detail})") from None
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as err:
        raise DataFormatError(path, f"cannot read file ({err})") from None

    header = [str(h).strip() for h in raw.iloc[0]]
    missing = [c for c in required if c not in header]
    if missing:
        raise DataFormatError(
            path,
            f"missing column(s) {', '.join(missing)}; found: {', '.join(header)}",
            line=_HEADER_LINE,
        )
    data = raw.iloc[1:].reset_index(drop=True)
    data.columns = header
    if len(data) == 0:
        problems.raise_first()
        raise DataFormatError(path, "no data rows", line=_HEADER_LINE + 1)
    return data, problems


def _column(data: pd.DataFrame, name: str, problems: _Problems) -> pd.Series:
    """The stripped text of a column; empty cells (truncated rows, blank lines) are defects."""
    col = data[name]
    if isinstance(col, pd.DataFrame):  # duplicated header name: use the first
        col = col.iloc[:, 0]
    text = col.fillna("").astype(str).str.strip()
    empty = (text == "").to_numpy()
    problems.add(empty, lambda r: f"missing value in column {name!r} (truncated or blank row)")
    return text


def _int_column(data: pd.DataFrame, name: str, problems: _Problems) -> np.ndarray:
    """Parse a non-negative integer column (int32); defects go to ``problems``."""
    text = _column(data, name, problems)
    empty = (text == "").to_numpy()
    is_int = text.str.fullmatch(_INT_RE).to_numpy(dtype=bool)
    not_int = ~is_int & ~empty
    problems.add(
        not_int, lambda r: f"column {name!r}: {text.iloc[r]!r} is not an integer token count"
    )
    values = np.zeros(len(text), dtype=np.int64)
    if is_int.any():
        digits = text[is_int].str.lstrip("+")
        # 19 digits would overflow int64; anything that long is out of range anyway.
        too_long = digits.str.lstrip("-").str.len().to_numpy() > 12
        parsed = np.where(too_long, _INT32_MAX + 1, 0).astype(np.int64)
        ok = ~too_long
        parsed[ok] = digits[ok].astype(np.int64).to_numpy()
        values[is_int] = parsed
    problems.add(values < 0, lambda r: f"column {name!r}: negative token count {values[r]}")
    problems.add(
        values > _INT32_MAX, lambda r: f"column {name!r}: token count {text.iloc[r]} is too large"
    )
    return values.astype(np.int32)


def _timestamp_column(
    data: pd.DataFrame, name: str, problems: _Problems, formats: Sequence[str]
) -> np.ndarray:
    """Parse a naive timestamp column with the first matching format, as datetime64[ns]."""
    text = _column(data, name, problems)
    parsed = pd.Series(pd.NaT, index=text.index, dtype="datetime64[ns]")
    todo = np.ones(len(text), dtype=bool)
    for fmt in formats:
        if not todo.any():
            break
        got = pd.to_datetime(text[todo], format=fmt, errors="coerce").astype("datetime64[ns]")
        parsed[todo] = got
        todo = parsed.isna().to_numpy()
    empty = (text == "").to_numpy()
    problems.add(
        todo & ~empty,
        lambda r: (
            f"column {name!r}: unparseable timestamp {text.iloc[r]!r} "
            f"(expected {' or '.join(formats)})"
        ),
    )
    return parsed.to_numpy(dtype="datetime64[ns]")


def _check_sorted(ts: np.ndarray, name: str, problems: _Problems) -> None:
    """Timestamps must be non-decreasing; the first row earlier than its predecessor is bad."""
    valid = ~np.isnat(ts)
    if valid.sum() < 2:
        return
    idx = np.flatnonzero(valid)
    back = np.zeros(len(ts), dtype=bool)
    back[idx[1:]] = ts[idx[1:]] < ts[idx[:-1]]
    problems.add(back, lambda r: f"column {name!r}: timestamps not sorted (earlier than row above)")


def load_azure_llm_trace(path: str | Path) -> pd.DataFrame:
    """Load an Azure LLM inference 2023 trace (``AzureLLMInferenceTrace_{code,conv}.csv``).

    Returns columns ``timestamp`` (datetime64[ns], naive: the trace states no zone),
    ``arrival_s`` (float64 seconds since the first row), ``prompt_tokens`` (int32, from
    ``ContextTokens``) and ``output_tokens`` (int32, from ``GeneratedTokens``).
    """
    data, problems = _read_table(path, ("TIMESTAMP", "ContextTokens", "GeneratedTokens"))
    ts = _timestamp_column(data, "TIMESTAMP", problems, (_TS_FRACTIONAL, _TS_SECONDS))
    prompt = _int_column(data, "ContextTokens", problems)
    output = _int_column(data, "GeneratedTokens", problems)
    _check_sorted(ts, "TIMESTAMP", problems)
    problems.raise_first()
    arrival_s = (ts - ts[0]) / np.timedelta64(1, "s")
    return pd.DataFrame(
        {
            "timestamp": ts,
            "arrival_s": arrival_s.astype(np.float64),
            "prompt_tokens": prompt,
            "output_tokens": output,
        }
    )


def load_vidur_lengths(path: str | Path) -> pd.DataFrame:
    """Load vidur's processed length trace: ``prompt_tokens``, ``output_tokens`` (int32).

    They come from ``num_prefill_tokens`` and ``num_decode_tokens`` (Llama-2 tokenizer).
    """
    data, problems = _read_table(path, ("num_prefill_tokens", "num_decode_tokens"))
    prompt = _int_column(data, "num_prefill_tokens", problems)
    output = _int_column(data, "num_decode_tokens", problems)
    problems.raise_first()
    return pd.DataFrame({"prompt_tokens": prompt, "output_tokens": output})


def load_alibaba_genai_trace(path: str | Path) -> pd.DataFrame:
    """Load the Alibaba GenAI 2026 SD-LoRA request trace (``lora_request_trace.csv``).

    Returns ``timestamp`` (datetime64[ns], naive; anonymised and shifted upstream),
    ``status`` (``predict_status``: SUCCEED, FAILED, PENDING, PROCESSING), ``predict_type``
    and ``exec_time_s`` (float64, ``exec_time_seconds``).
    """
    cols = ("gmt_create", "predict_type", "predict_status", "exec_time_seconds")
    data, problems = _read_table(path, cols)
    ts = _timestamp_column(data, "gmt_create", problems, (_TS_SECONDS, _TS_FRACTIONAL))
    status = _column(data, "predict_status", problems)
    kind = _column(data, "predict_type", problems)
    exec_text = _column(data, "exec_time_seconds", problems)
    exec_s = pd.to_numeric(exec_text.where(exec_text != "", "nan"), errors="coerce").to_numpy(
        dtype=np.float64
    )
    bad_exec = ~np.isfinite(exec_s) | (exec_s < 0)
    problems.add(
        bad_exec & (exec_text != "").to_numpy(),
        lambda r: f"column 'exec_time_seconds': {exec_text.iloc[r]!r} is not a duration >= 0",
    )
    _check_sorted(ts, "gmt_create", problems)
    problems.raise_first()
    return pd.DataFrame(
        {
            "timestamp": ts,
            "status": status,
            "predict_type": kind,
            "exec_time_s": exec_s,
        }
    )
