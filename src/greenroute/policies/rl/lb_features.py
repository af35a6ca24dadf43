"""Seed 002 (sections III-V) observation of the load-balancing agent: request features (rolling
and lag statistics of token counts, calendar features), per-server features, the RobustScaler
fitted on the training split, and the reward weights of section IV.

The environment (``greenroute.envs.lb``) and the deployed ``rl:PATH`` local policy
(``greenroute.policies.rl.local``) build the same observation from these functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError

ENV_ID = "greenroute/LoadBalancing-v0"
OBS_VERSION = 1
SCENARIOS = ("lb-nominal", "lb-highload")
SPLITS = ("train", "eval")
TRAIN_FRACTION = 0.7  # first 70 % of the stream's time span
DEFAULT_EPISODE_REQUESTS = 1000
SLO_S = 2.0  # section VI.B
SYNTHETIC_SEED = 2002

# Reward weights, section IV.
W_PROCESSING = -0.01
W_QUEUE = -0.1
OVERLOAD_PENALTY = -10.0
W_BALANCE = 0.1
SERVED_REWARD = 1.0
SLO_PENALTY = -5.0
BALANCE_EPS = 1e-6
REWARD_TERMS = ("processing", "queue", "overload", "balance", "served", "slo")

ROLL_WINDOWS = (5, 10, 20)
CALENDAR_FEATURES = ("hour", "day_of_week", "day_of_month", "iso_week")
CALENDAR_PERIODS = {"hour": 24.0, "day_of_week": 7.0, "day_of_month": 31.0, "iso_week": 53.0}
REQUEST_FEATURES = (
    *CALENDAR_FEATURES,
    "total_tokens",
    "context_tokens",
    "generated_tokens",
    *(f"roll_{stat}_{w}" for w in ROLL_WINDOWS for stat in ("mean", "std")),
    "lag1_total",
    "lag1_context",
    "lag1_generated",
)
SERVER_FEATURES = ("queue_per_slot", "load", "recent_rt_per_slo", "active_per_slot")
# obs="extended" adds, per server, two features derived from the same state (not in the
# paper): an at-capacity flag and this request's estimated response time on the server.
EXTENDED_SERVER_FEATURES = (*SERVER_FEATURES, "at_capacity", "est_rt_per_slo")
OBS_MODES = ("paper", "extended")


def server_feature_names(obs: str) -> tuple[str, ...]:
    if obs not in OBS_MODES:
        raise ConfigError(f"obs must be one of {OBS_MODES}, got {obs!r}")
    return SERVER_FEATURES if obs == "paper" else EXTENDED_SERVER_FEATURES


HISTORY_NEEDED = max(ROLL_WINDOWS)  # rows of history that fix the last row's features

# The synthetic fallback's size (the code trace's: PROVENANCE section 1).


# --------------------------------------------------------------------------- scaler
@dataclass(frozen=True)
class RobustScaler:
    """sklearn's RobustScaler (median / interquartile range), without sklearn.

    ``x' = (x - median) / (q75 - q25)``. A column whose IQR is 0 gets ``fallback_scale``
    (sklearn: 1).
    """

    center: np.ndarray
    scale: np.ndarray

    @staticmethod
    def fit(x: np.ndarray, fallback_scale: np.ndarray | None = None) -> RobustScaler:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] == 0:
            raise ConfigError("RobustScaler.fit needs a non-empty 2-D array")
        q25, med, q75 = np.percentile(x, [25.0, 50.0, 75.0], axis=0)
        scale = q75 - q25
        fb = np.ones(x.shape[1]) if fallback_scale is None else np.asarray(fallback_scale, float)
        scale = np.where(scale > 1e-12, scale, fb)
        return RobustScaler(med, scale)

    def transform(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=np.float64) - self.center) / self.scale

    def to_dict(self) -> dict:
        return {"center": self.center.tolist(), "scale": self.scale.tolist()}

    @staticmethod
    def from_dict(d: dict) -> RobustScaler:
        return RobustScaler(np.asarray(d["center"], float), np.asarray(d["scale"], float))


def _rolling(x: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
    """pandas ``rolling(w, min_periods=1)`` mean and std (ddof 1; NaN -> 0), row by row."""
    n = x.size
    pad = np.concatenate([np.full(w - 1, np.nan), x])
    win = np.lib.stride_tricks.sliding_window_view(pad, w)[:n]
    valid = ~np.isnan(win)
    cnt = valid.sum(axis=1)
    vals = np.where(valid, win, 0.0)
    mean = vals.sum(axis=1) / cnt
    dev = np.where(valid, win - mean[:, None], 0.0)
    var = (dev * dev).sum(axis=1) / np.maximum(cnt - 1, 1)
    std = np.where(cnt > 1, np.sqrt(var), 0.0)
    return mean, std


def raw_request_features(
    timestamps: np.ndarray, prompt: np.ndarray, output: np.ndarray
) -> np.ndarray:
    """Unscaled section-III features, one row per request, columns :data:`REQUEST_FEATURES`.

    Row ``i`` depends on rows ``i - 19 .. i`` only, so a caller that keeps the last 20
    requests gets the same last row as one that has the whole history.
    """
    ts = pd.DatetimeIndex(np.asarray(timestamps, dtype="datetime64[ns]"))
    p = np.asarray(prompt, dtype=np.float64)
    o = np.asarray(output, dtype=np.float64)
    total = p + o
    cols = [
        ts.hour.to_numpy(float),
        ts.day_of_week.to_numpy(float),
        ts.day.to_numpy(float),
        ts.isocalendar().week.to_numpy(dtype=float),
        total,
        p,
        o,
    ]
    for w in ROLL_WINDOWS:
        cols.extend(_rolling(total, w))

    def lag(a: np.ndarray) -> np.ndarray:
        return np.concatenate([[0.0], a[:-1]]) if a.size else a

    cols += [lag(total), lag(p), lag(o)]
    return np.column_stack(cols)


def calendar_fallback_scale() -> np.ndarray:
    return np.array([CALENDAR_PERIODS.get(n, 1.0) for n in REQUEST_FEATURES])


def server_features(
    queued: np.ndarray,
    tokens_in_flight: np.ndarray,
    recent_rt_s: np.ndarray,
    active: np.ndarray,
    tps: np.ndarray,
    slots: np.ndarray,
    *,
    obs: str = "paper",
    backlog_s: np.ndarray | None = None,
    tokens: float = 0.0,
) -> np.ndarray:
    """Section IV server state, scaled (module docstring); flattened server by server.

    ``obs="extended"`` also needs ``backlog_s`` (work left on the server / its slots, as the
    simulator's ``ServerView.backlog_s``) and the request's ``tokens``: the estimated
    response time is ``tokens / tps`` plus, when every slot is busy, ``backlog_s`` as the
    wait (an estimate: the exact wait is when the next slot frees after the queue ahead).
    """
    active = np.asarray(active, float)
    cols = [
        np.asarray(queued, float) / slots,
        np.asarray(tokens_in_flight, float) / (tps * slots),
        np.asarray(recent_rt_s, float) / SLO_S,
        active / slots,
    ]
    if obs == "extended":
        full = (active >= slots).astype(float)
        est = tokens / tps + full * np.asarray(backlog_s, float)
        cols += [full, est / SLO_S]
    elif obs != "paper":
        raise ConfigError(f"obs must be one of {OBS_MODES}, got {obs!r}")
    return np.column_stack(cols).reshape(-1)


def balance_metric(load: np.ndarray) -> float:
    """Section IV: ``1 - std(load) / (mean(load) + eps)`` (population std)."""
    load = np.asarray(load, dtype=np.float64)
    return float(1.0 - load.std() / (load.mean() + BALANCE_EPS))
