"""Requests replayed from a real trace (Azure LLM inference 2023): exact arrivals and lengths."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError
from greenroute.data.requests import CLASS_DEFERRABLE, CLASS_INTERACTIVE, Requests

# ---------------------------------------------------------------------------------------------
# Trace replay
# ---------------------------------------------------------------------------------------------


def _trace_columns(df: pd.DataFrame, first_n: int | None) -> tuple[np.ndarray, ...]:
    missing = [c for c in ("arrival_s", "prompt_tokens", "output_tokens") if c not in df.columns]
    if missing:
        raise ConfigError(f"trace frame lacks column(s) {', '.join(missing)}")
    if first_n is not None:
        if first_n < 1:
            raise ConfigError(f"first_n must be >= 1, got {first_n}")
        df = df.iloc[:first_n]
    arrival = df["arrival_s"].to_numpy(dtype=np.float64)
    prompt = df["prompt_tokens"].to_numpy(dtype=np.int64)
    output = df["output_tokens"].to_numpy(dtype=np.int64)
    if arrival.size and (np.any(np.diff(arrival) < 0) or not np.isfinite(arrival).all()):
        raise ConfigError("trace arrival_s must be finite and sorted")
    if arrival.size and (prompt.min() < 1 or output.min() < 1):
        raise ConfigError("trace token counts must be >= 1 to replay")
    return arrival, prompt, output


def _replay(
    arrival: np.ndarray,
    prompt: np.ndarray,
    output: np.ndarray,
    origin: int,
    cls: int,
    model: int,
    deadline_slack_s: float | None,
) -> Requests:
    n = arrival.size
    if cls not in (CLASS_INTERACTIVE, CLASS_DEFERRABLE):
        raise ConfigError(f"cls must be {CLASS_INTERACTIVE} or {CLASS_DEFERRABLE}, got {cls}")
    if cls == CLASS_DEFERRABLE:
        if deadline_slack_s is None or not deadline_slack_s > 0:
            raise ConfigError("replaying a trace as deferrable needs deadline_slack_s > 0")
        deadline = arrival + float(deadline_slack_s)
    else:
        deadline = np.full(n, np.inf)
    return Requests(
        arrival,
        np.full(n, origin, dtype=np.int32),
        np.full(n, cls, dtype=np.int8),
        np.full(n, model, dtype=np.int16),
        prompt,
        output,
        deadline,
    )


def requests_from_trace(
    df: pd.DataFrame,
    *,
    origin: int = 0,
    cls: int = CLASS_INTERACTIVE,
    model: int = 0,
    time_scale: float = 1.0,
    first_n: int | None = None,
    start_offset_s: float = 0.0,
    deadline_slack_s: float | None = None,
) -> Requests:
    """Replay a loaded trace (columns ``arrival_s, prompt_tokens, output_tokens``).

    Arrival ``i`` becomes ``start_offset_s + (arrival_s[i] - arrival_s[0]) * time_scale``
    (``time_scale < 1`` compresses). ``first_n`` keeps the first rows only. Deferrable replays
    need ``deadline_slack_s`` (deadline = arrival + slack).
    """
    if not (math.isfinite(time_scale) and time_scale > 0):
        raise ConfigError(f"time_scale must be > 0, got {time_scale}")
    arrival, prompt, output = _trace_columns(df, first_n)
    if arrival.size:
        arrival = float(start_offset_s) + (arrival - arrival[0]) * float(time_scale)
    return _replay(arrival, prompt, output, origin, cls, model, deadline_slack_s)


def compress_to_window(
    df: pd.DataFrame,
    first_n: int,
    window_s: float,
    *,
    origin: int = 0,
    cls: int = CLASS_INTERACTIVE,
    model: int = 0,
    start_offset_s: float = 0.0,
    deadline_slack_s: float | None = None,
) -> Requests:
    """The first ``first_n`` trace requests, rescaled so they span exactly ``window_s`` seconds.

    Seed 002 (RL load balancing, §VI.B) replays the first 5,000 requests of the Azure code
    trace compressed into a 1,000 s window: ``compress_to_window(df, 5000, 1000.0)``.
    """
    if not (math.isfinite(window_s) and window_s > 0):
        raise ConfigError(f"window_s must be > 0, got {window_s}")
    arrival, prompt, output = _trace_columns(df, first_n)
    if arrival.size < 2 or arrival[-1] == arrival[0]:
        raise ConfigError("compress_to_window needs at least two distinct arrival times")
    span = arrival[-1] - arrival[0]
    # (x / span) * window is exactly window for the last row (x == span)
    arrival = float(start_offset_s) + ((arrival - arrival[0]) / span) * float(window_s)
    return _replay(arrival, prompt, output, origin, cls, model, deadline_slack_s)
