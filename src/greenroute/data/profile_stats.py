"""Statistics of the signal profiles: month x hour standardisation, lag-1 autocorrelation, the
Gaussian-copula marginal map and the AR(1) calibration and innovations (see
:mod:`greenroute.data.profiles`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import optimize, special

# Normal scores at which the per-month z quantiles are stored. One month of 4 years holds
# ~2,900 hours, so +-3.5 sigma (probability 2.3e-4 each side) reaches the observed extremes;
# beyond the grid the generator holds the end values. Step 0.25 sigma.
NORMAL_SCORE_GRID: np.ndarray = np.linspace(-3.5, 3.5, 29)
NORMAL_SCORE_GRID.setflags(write=False)

_N_MONTHS, _N_HOURS = 12, 24
# A (month, hour) cell whose std is below this fraction of the signal's largest cell std is
# treated as constant (z = 0 there), so rounding noise is not blown up into residuals.
_MIN_RELATIVE_STD = 1e-6
# Upper bound on an AR(1) coefficient: keeps the stationary variance 1 / (1 - phi^2) finite.
_MAX_AR1 = 0.9999
# Ridge on the lag-0 correlation of the scores (identical signals make it singular); changes
# correlations by at most 1e-4.
_RIDGE = 1e-4


def _cells(index: pd.DatetimeIndex) -> np.ndarray:
    """Flat (month, UTC hour) cell number 0..287 of each stamp."""
    utc = index.tz_convert("UTC") if index.tz is not None else index
    return (np.asarray(utc.month) - 1) * _N_HOURS + np.asarray(utc.hour)


def _cell_mean_std(values: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n_cells = _N_MONTHS * _N_HOURS
    count = np.bincount(cells, minlength=n_cells).astype(np.float64)
    if (count < 2).any():
        raise ValueError("every (month, hour) cell needs at least two values")
    total = np.bincount(cells, weights=values, minlength=n_cells)
    mean = total / count
    dev = values - mean[cells]
    var = np.bincount(cells, weights=dev * dev, minlength=n_cells) / count
    return mean, np.sqrt(var)


def standardized_residual(
    values: np.ndarray, index: pd.DatetimeIndex, mean: np.ndarray, std: np.ndarray
) -> np.ndarray:
    """``(x - mean[month, hour]) / std[month, hour]``; 0 where the cell is (near) constant."""
    cells = _cells(index)
    mu = np.asarray(mean, dtype=np.float64).reshape(-1)[cells]
    sd = np.asarray(std, dtype=np.float64).reshape(-1)[cells]
    floor = _MIN_RELATIVE_STD * max(float(np.max(std)), np.finfo(np.float64).tiny)
    ok = sd > floor
    return np.where(ok, (np.asarray(values, dtype=np.float64) - mu) / np.where(ok, sd, 1.0), 0.0)


def _consecutive(index: pd.DatetimeIndex) -> np.ndarray:
    """Mask over pairs (t-1, t): True where the two stamps are exactly one hour apart."""
    return np.diff(index.asi8) == pd.Timedelta(hours=1).value // _unit_ns(index)


def _unit_ns(index: pd.DatetimeIndex) -> int:
    return {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[index.unit]


def lag1_autocorr(values: np.ndarray, index: pd.DatetimeIndex | None = None) -> float:
    """Pearson correlation of ``x[t]`` with ``x[t-1]`` over pairs one hour apart.

    Without ``index`` all neighbouring pairs count. A constant series gives 0.
    """
    x = np.asarray(values, dtype=np.float64)
    pairs = np.ones(max(x.size - 1, 0), bool) if index is None else _consecutive(index)
    a, b = x[:-1][pairs], x[1:][pairs]
    if a.size < 3 or np.std(a) == 0 or np.std(b) == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


# Gauss-Hermite rule (probabilists', weight exp(-x^2/2)) for expectations over N(0, 1); 96
# nodes integrate the piecewise-linear marginal map to ~1e-4 in correlation.
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(96)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()


def _grid_position(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Left grid node and interpolation weight of each normal score (held beyond the grid)."""
    step = NORMAL_SCORE_GRID[1] - NORMAL_SCORE_GRID[0]
    pos = (np.clip(g, NORMAL_SCORE_GRID[0], NORMAL_SCORE_GRID[-1]) - NORMAL_SCORE_GRID[0]) / step
    left = np.minimum(pos.astype(np.int64), NORMAL_SCORE_GRID.size - 2)
    return left, pos - left


def _marginal_map(g: np.ndarray, z_quantiles: np.ndarray) -> np.ndarray:
    """Normal scores -> standardized residuals through every month's quantile map.

    ``z_quantiles`` is (months, grid); the result is (months, *g.shape).
    """
    left, weight = _grid_position(g)
    return z_quantiles[:, left] * (1.0 - weight) + z_quantiles[:, left + 1] * weight


def _mapped_lag1(rho: float, z_quantiles: np.ndarray) -> float:
    """Lag-1 correlation of ``z[t] = f_m(g[t])`` when ``corr(g[t], g[t-1]) = rho``.

    Months are equally weighted and month changes ignored: the moments are averaged over the
    12 per-month maps ``f_m`` (rows of ``z_quantiles``), as a long series pools them.
    """
    x, w = _GH_NODES, _GH_WEIGHTS
    f1 = _marginal_map(x, z_quantiles)  # (months, n)
    mean = float(np.mean(f1 @ w))
    second = float(np.mean((f1 * f1) @ w))
    var = second - mean * mean
    if var <= 0.0:
        return 0.0
    g2 = rho * x[:, None] + np.sqrt(max(1.0 - rho * rho, 0.0)) * x[None, :]
    inner = _marginal_map(g2, z_quantiles) @ w  # E[f_m(g2) | g1 = x_i], (months, n)
    cross = float(np.mean((f1 * inner) @ w))
    return (cross - mean * mean) / var


def _calibrate_ar1(target: float, z_quantiles: np.ndarray) -> float:
    """AR(1) coefficient of the Gaussian scores whose mapped residual has lag-1 ``target``.

    The maps are non-decreasing, so the mapped lag-1 correlation increases with the Gaussian
    one: Brent's method on [-_MAX_AR1, _MAX_AR1] (targets outside the reachable range give the
    end point).
    """
    quantiles = np.atleast_2d(z_quantiles)

    def gap(rho: float) -> float:
        return _mapped_lag1(rho, quantiles) - target

    if gap(_MAX_AR1) <= 0.0:
        return _MAX_AR1
    if gap(-_MAX_AR1) >= 0.0:
        return -_MAX_AR1
    return float(optimize.brentq(gap, -_MAX_AR1, _MAX_AR1, xtol=1e-10, rtol=1e-12))


def _normal_scores(z: np.ndarray, months: np.ndarray) -> np.ndarray:
    """Gaussian scores of the ranks within each calendar month (ties averaged):
    ``Phi^-1((rank - 0.5) / n_month)``."""
    frame = pd.DataFrame({"z": z, "month": months})
    ranks = frame.groupby("month")["z"].rank(method="average").to_numpy()
    sizes = frame.groupby("month")["z"].transform("size").to_numpy()
    return special.ndtri((ranks - 0.5) / sizes)


def _fit_innovations(scores: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Innovation correlation of per-signal AR(1)s that reproduces lag-0 co-movement.

    ``scores`` (hours x signals) are the normal scores where every signal is present; ``phi``
    the per-signal AR(1) coefficients. With ``g_i[t] = phi_i g_i[t-1] + e_i[t]`` the
    stationary correlation is ``cov(e)_ij / (1 - phi_i phi_j)``, so matching the measured
    lag-0 correlation ``R`` (CI vs renewables, price vs CI, temperature vs humidity, ...) needs
    ``cov(e) = R * (1 - phi phi^T)``. That matrix is not always positive semi-definite (a slow
    and a fast signal cannot be perfectly correlated), so it is projected onto the PSD cone and
    its diagonal restored to ``1 - phi^2`` (unit-variance scores). Returns (innovation
    correlation, measured ``R``). ``R`` gets a small ridge: some signals are identical in the
    data (low-carbon == renewable share where there is no nuclear: AU, CL, JP, SG).
    """
    centred = scores - scores.mean(axis=0)
    r = np.corrcoef(centred.T)
    r = (1.0 - _RIDGE) * r + _RIDGE * np.eye(r.shape[0])
    target = r * (1.0 - np.outer(phi, phi))
    eigval, eigvec = np.linalg.eigh((target + target.T) / 2.0)
    cov = (eigvec * np.clip(eigval, 0.0, None)) @ eigvec.T
    sd = np.sqrt(np.clip(np.diag(cov), np.finfo(np.float64).tiny, None))
    corr = cov / np.outer(sd, sd)
    np.fill_diagonal(corr, 1.0)
    return corr, r


# =============================================================================================
# Building from the real files
# =============================================================================================
