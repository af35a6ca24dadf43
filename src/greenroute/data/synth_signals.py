"""Seeded synthetic hourly signals from the embedded profiles (see
:mod:`greenroute.data.profiles` for what the profiles hold and how the generator works)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd
from scipy import signal as sp_signal

from greenroute.core.errors import ConfigError
from greenroute.data.grid_loaders import (
    to_utc_timestamp,
)
from greenroute.data.profile_stats import _N_HOURS, _cells, _grid_position
from greenroute.data.profiles import PHYSICAL_BOUNDS, SignalProfiles, load_profiles


def _region_seed(region: str) -> int:
    """Stable 64-bit hash of a region key (Python's ``hash`` is salted per process)."""
    return int.from_bytes(hashlib.sha256(region.encode("utf-8")).digest()[:8], "little")


def _psd_factor(cov: np.ndarray) -> np.ndarray:
    """Lower-triangular ``L`` with ``L @ L.T ~= cov`` for a (possibly singular) covariance.

    Cholesky, not an eigen-decomposition: it is unique, so the same seed gives the same series
    on every LAPACK build (eigenvectors may come back with other signs). A jitter of 1e-9 of
    the largest variance makes exactly singular matrices (identical signals) factorable.
    """
    sym = (cov + cov.T) / 2.0
    jitter = 1e-9 * max(float(np.max(np.diag(sym))), np.finfo(np.float64).tiny)
    for _ in range(6):
        try:
            return np.linalg.cholesky(sym + jitter * np.eye(sym.shape[0]))
        except np.linalg.LinAlgError:
            jitter *= 100.0
    raise ValueError("covariance matrix is not positive semi-definite")


def synthesize_region_signals(
    region: str,
    start: Any,
    hours: int,
    seed: int,
    profiles: SignalProfiles | None = None,
) -> pd.DataFrame:
    """Synthetic hourly signals for ``region`` over ``hours`` UTC hours from ``start``.

    Same columns, index (tz-aware UTC, ``time_utc``, hourly) and dtype (float64) as
    :func:`~greenroute.data.grid_loaders.load_region_signals`. ``start`` is rounded up to a whole
    hour (naive = UTC). The result depends only on (region, start, hours, seed, profiles); the
    random stream comes from ``SeedSequence([seed, sha256(region)])`` so regions are
    independent under one seed, and a shorter series is a prefix of a longer one.
    """
    prof = profiles if profiles is not None else load_profiles()
    r = prof._r(region)
    if isinstance(hours, bool) or not isinstance(hours, int | np.integer) or hours < 0:
        raise ConfigError(f"hours must be a non-negative integer, got {hours!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    t0 = to_utc_timestamp(start, "start").ceil("h")
    index = pd.date_range(t0, periods=int(hours), freq="h", unit="us", name="time_utc")
    columns = list(prof.columns)
    if hours == 0:
        return pd.DataFrame({c: np.zeros(0) for c in columns}, index=index)

    phi = prof._arrays["ar1_normal"][r].astype(np.float64)
    corr = prof._arrays["innovation_corr"][r].astype(np.float64)
    scale = np.sqrt(1.0 - phi**2)
    innovation_cov = corr * np.outer(scale, scale)
    stationary_cov = innovation_cov / (1.0 - np.outer(phi, phi))

    rng = np.random.default_rng(np.random.SeedSequence([int(seed), _region_seed(region)]))
    g0 = _psd_factor(stationary_cov) @ rng.standard_normal(len(columns))
    shocks = rng.standard_normal((int(hours), len(columns))) @ _psd_factor(innovation_cov).T
    shocks[0] = g0  # g[0] ~ stationary law; g[t] = phi * g[t-1] + e[t] afterwards
    g = np.empty_like(shocks)
    for s in range(len(columns)):  # one IIR filter per signal (7), not per hour
        g[:, s] = sp_signal.lfilter([1.0], [1.0, -phi[s]], shocks[:, s])

    cells = _cells(index)
    month = cells // _N_HOURS
    left, weight = _grid_position(g)
    mean = prof._arrays["mean"][r].astype(np.float64).reshape(len(columns), -1)
    std = prof._arrays["std"][r].astype(np.float64).reshape(len(columns), -1)
    quantiles = prof._arrays["z_quantiles"][r].astype(np.float64)
    month_min = prof._arrays["month_min"][r].astype(np.float64)
    month_max = prof._arrays["month_max"][r].astype(np.float64)
    data: dict[str, np.ndarray] = {}
    for s, name in enumerate(columns):
        q = quantiles[s]  # (12, grid): the month's quantile map
        z = q[month, left[:, s]] * (1.0 - weight[:, s]) + q[month, left[:, s] + 1] * weight[:, s]
        # Clip to the physical bounds and to the range the real data showed in that calendar
        # month: one quantile map per month serves all 24 hours, and where a cell's spread is
        # mostly spikes (ERCOT's February, Singapore's price) its low tail would otherwise
        # reach negative prices that market never had.
        phys_lo, phys_hi = PHYSICAL_BOUNDS.get(name, (-np.inf, np.inf))
        lo = np.maximum(month_min[s, month], phys_lo)
        hi = np.minimum(month_max[s, month], phys_hi)
        data[name] = np.clip(mean[s, cells] + std[s, cells] * z, lo, hi)
    # Orderings that hold in every real hour (checked on all 16 regions, 2021-2024):
    # lifecycle CI >= direct CI, and renewable share <= low-carbon share.
    if {"carbon_intensity_g_per_kwh", "carbon_intensity_lca_g_per_kwh"} <= data.keys():
        data["carbon_intensity_lca_g_per_kwh"] = np.maximum(
            data["carbon_intensity_lca_g_per_kwh"], data["carbon_intensity_g_per_kwh"]
        )
    if {"low_carbon_pct", "renewable_pct"} <= data.keys():
        data["renewable_pct"] = np.minimum(data["renewable_pct"], data["low_carbon_pct"])
    out = pd.DataFrame(data, index=index, columns=columns, dtype=np.float64)
    out.index.freq = "h"
    return out
