"""Compact per-region signal statistics and a seeded synthetic generator built on them.

The real hourly files (``shared/data/grid``) are not shipped; what ships is
``embedded/signal_profiles.npz``, a few hundred kB of statistics derived from them by
:mod:`greenroute.data.build_profiles`. For each of the 16 regions and each of the
:data:`~greenroute.data.grid_loaders.SIGNAL_COLUMNS` it holds:

* ``mean``, ``std`` (12 x 24): month x UTC-hour mean and standard deviation over 2021-2024;
* the marginal distribution of the standardized residual ``z = (x - mean) / std`` per calendar
  month, stored as ``z`` quantiles at fixed normal scores (12 x 29; a Gaussian-copula / NORTA
  marginal, so skewed and spiky signals such as prices keep their shape instead of becoming
  symmetric Gaussians);
* ``ar1``: lag-1 autocorrelation of ``z`` measured on the real data; ``ar1_normal``: the AR(1)
  coefficient the generator gives the Gaussian scores, calibrated (Gauss-Hermite quadrature +
  Brent's method) so that the *mapped* residual has lag-1 autocorrelation ``ar1``;
* ``score_corr`` (7 x 7): lag-0 correlation of the residuals' normal scores across the region's
  signals (carbon intensity against renewables, price with carbon, temperature against
  humidity, ...), and ``innovation_corr`` (7 x 7): the AR(1) innovation correlation derived from
  it so that the generated signals co-move as measured (where per-signal AR(1)s allow it);
* observed per-month ``month_min``/``month_max`` and the number of hours used, plus a JSON
  ``metadata`` entry (source files' sha256, years used; no build timestamp, so rebuilds are
  byte-identical).

:func:`synthesize_region_signals` draws correlated Gaussian innovations, runs one AR(1) per
signal (``scipy.signal.lfilter``) from its stationary distribution, maps the normal scores to
``z`` through the month's stored quantiles, and returns ``mean + std * z`` clipped to physical
bounds and to the range observed in that calendar month.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from greenroute.core.errors import DataFormatError, UnknownNameError
from greenroute.data.grid_loaders import (
    DUPLICATED_PRICE_YEARS,
    SIGNAL_COLUMNS,
    load_carbon_intensity,
    load_price,
    load_regions_index,
    load_weather,
    price_correction,
)
from greenroute.data.profile_stats import (
    _N_HOURS,
    _N_MONTHS,
    NORMAL_SCORE_GRID,
    _calibrate_ar1,
    _cell_mean_std,
    _cells,
    _fit_innovations,
    _normal_scores,
    lag1_autocorr,
    standardized_residual,
)

EMBEDDED_PROFILES_PATH: Path = Path(__file__).resolve().parent / "embedded" / "signal_profiles.npz"

# Years of shared/data/grid used for the statistics (PROVENANCE.md §2: every CI, price and
# weather file covers 2021-2024; GB price only from 2022-01-21).
PROFILE_YEARS: tuple[int, ...] = (2021, 2022, 2023, 2024)


# Physical bounds the synthetic series are clipped to (per the module brief: percentages in
# [0, 100]; carbon intensity >= 0; relative humidity in [1, 100] -- Open-Meteo RH is an integer
# percent and 1 % is below every observed value (minimum 4 %, ZA); prices may be negative).
PHYSICAL_BOUNDS: dict[str, tuple[float, float]] = {
    "carbon_intensity_g_per_kwh": (0.0, np.inf),
    "carbon_intensity_lca_g_per_kwh": (0.0, np.inf),
    "low_carbon_pct": (0.0, 100.0),
    "renewable_pct": (0.0, 100.0),
    "price_usd_per_kwh": (-np.inf, np.inf),
    "temp_c": (-np.inf, np.inf),
    "rh_pct": (1.0, 100.0),
}

# Which file of a region each signal comes from (keys of regions.csv "<kind>_file").
_SIGNAL_SOURCE: dict[str, str] = {
    "carbon_intensity_g_per_kwh": "ci",
    "carbon_intensity_lca_g_per_kwh": "ci",
    "low_carbon_pct": "ci",
    "renewable_pct": "ci",
    "price_usd_per_kwh": "price",
    "temp_c": "weather",
    "rh_pct": "weather",
}

_FORMAT_VERSION = 1
_ARRAY_KEYS = (
    "regions",
    "columns",
    "mean",
    "std",
    "z_quantiles",
    "ar1",
    "ar1_normal",
    "innovation_corr",
    "score_corr",
    "month_min",
    "month_max",
    "n_hours",
    "metadata",
)


# =============================================================================================
# Statistics shared by the builder, the generator and the tests
# =============================================================================================
def profile_source_series(
    data_dir: str | Path, region: str
) -> tuple[dict[str, pd.Series], dict[str, Path]]:
    """The real hourly series the profiles are built from, and the files they come from.

    Each signal of ``region`` on its own UTC index (weather is shifted against CI by its fixed
    offset), restricted to :data:`PROFILE_YEARS`, without the duplicated price years
    (:data:`~greenroute.data.grid_loaders.DUPLICATED_PRICE_YEARS`) and without price hours that
    :func:`~greenroute.data.grid_loaders.load_price` filled by interpolation.
    """
    index = load_regions_index(data_dir)
    if region not in index.index:
        raise UnknownNameError("region", region, index.index)
    row = index.loc[region]
    grid = Path(data_dir) / "grid"
    paths = {kind: grid / str(row[f"{kind}_file"]).strip() for kind in ("ci", "price", "weather")}
    ci = load_carbon_intensity(paths["ci"])
    tz = str(row["timezone"]).strip()
    price = load_price(paths["price"], local_tz=tz, include_filled=False)
    price = price * price_correction(region)
    weather = load_weather(paths["weather"])
    dropped_years = [y for (r, y) in DUPLICATED_PRICE_YEARS if r == region]
    price = price[~np.isin(price.index.year, dropped_years)]

    series = {
        "carbon_intensity_g_per_kwh": ci["carbon_intensity_g_per_kwh"],
        "carbon_intensity_lca_g_per_kwh": ci["carbon_intensity_lca_g_per_kwh"],
        "low_carbon_pct": ci["low_carbon_pct"],
        "renewable_pct": ci["renewable_pct"],
        "price_usd_per_kwh": price,
        "temp_c": weather["temp_c"],
        "rh_pct": weather["rh_pct"],
    }
    for name, s in series.items():
        series[name] = s[np.isin(s.index.year, PROFILE_YEARS)]
    return series, paths


def build_profiles(data_dir: str | Path) -> dict[str, np.ndarray]:
    """Statistics of all 16 signal regions (see the module docstring) as named arrays.

    The result is what :func:`save_profiles` writes; it depends only on the data files (their
    sha256 is recorded in ``metadata``), so rebuilding from the same data is byte-identical.
    """
    from greenroute.catalog.regions import SIGNAL_REGIONS
    from greenroute.data.paths import file_sha256

    root = Path(data_dir)
    n_reg, n_sig = len(SIGNAL_REGIONS), len(SIGNAL_COLUMNS)
    mean = np.zeros((n_reg, n_sig, _N_MONTHS, _N_HOURS))
    std = np.zeros_like(mean)
    z_quantiles = np.zeros((n_reg, n_sig, _N_MONTHS, NORMAL_SCORE_GRID.size))
    ar1 = np.zeros((n_reg, n_sig))
    ar1_normal = np.zeros((n_reg, n_sig))
    innovation_corr = np.zeros((n_reg, n_sig, n_sig))
    score_corr = np.zeros((n_reg, n_sig, n_sig))
    lo = np.zeros((n_reg, n_sig, _N_MONTHS))
    hi = np.zeros_like(lo)
    n_hours = np.zeros((n_reg, n_sig), dtype=np.int64)
    sources: dict[str, str] = {}
    years_used: dict[str, dict[str, list[int]]] = {}
    grid_probabilities = special.ndtr(NORMAL_SCORE_GRID)

    for r, region in enumerate(SIGNAL_REGIONS):
        series, paths = profile_source_series(root, region)
        for path in paths.values():
            sources[path.relative_to(root).as_posix()] = file_sha256(path)
        scores: dict[str, pd.Series] = {}
        years_used[region] = {}
        for s, name in enumerate(SIGNAL_COLUMNS):
            x = series[name]
            values, idx = x.to_numpy(dtype=np.float64), pd.DatetimeIndex(x.index)
            try:
                m, sd = _cell_mean_std(values, _cells(idx))
            except ValueError as exc:
                raise DataFormatError(paths[_SIGNAL_SOURCE[name]], f"{name}: {exc}") from None
            mean[r, s], std[r, s] = m.reshape(_N_MONTHS, _N_HOURS), sd.reshape(_N_MONTHS, _N_HOURS)
            z = standardized_residual(values, idx, m, sd)
            months = np.asarray(idx.month)
            # Per-month marginals: the residual's shape differs by season (e.g. ERCOT's
            # February holds Winter Storm Uri's 9 USD/kWh hours, other months do not).
            quantiles = np.stack(
                [np.quantile(z[months == m], grid_probabilities) for m in range(1, 13)]
            ).astype(np.float16)
            z_quantiles[r, s] = quantiles
            ar1[r, s] = lag1_autocorr(z, idx)
            # Lag-1 correlation the Gaussian scores need for the *mapped* residual to have the
            # measured lag-1 autocorrelation (the map is not linear for skewed signals).
            ar1_normal[r, s] = _calibrate_ar1(float(np.float32(ar1[r, s])), quantiles)
            scores[name] = pd.Series(_normal_scores(z, months), index=idx)
            lo[r, s] = pd.Series(values).groupby(months).min().to_numpy()
            hi[r, s] = pd.Series(values).groupby(months).max().to_numpy()
            n_hours[r, s] = values.size
            years_used[region][name] = sorted(np.unique(idx.year).tolist())
        joint = pd.concat(scores, axis=1, join="inner")
        innovation_corr[r], score_corr[r] = _fit_innovations(
            joint.to_numpy(), ar1_normal[r].astype(np.float32).astype(np.float64)
        )

    metadata = {
        "format_version": _FORMAT_VERSION,
        "description": "greenroute per-region hourly signal statistics (see profiles.py)",
        "source": "shared/data/grid (SustainCluster: Electricity Maps ODbL, Open-Meteo CC BY 4.0)",
        "profile_years": list(PROFILE_YEARS),
        "excluded_price_years": sorted([list(k) for k in DUPLICATED_PRICE_YEARS]),
        "excluded_price_hours": "hours filled by interpolation in load_price (GB 2022-12-31)",
        "hour_axis": "UTC",
        "years_used": years_used,
        "source_sha256": dict(sorted(sources.items())),
    }
    return {
        "regions": np.array(SIGNAL_REGIONS),
        "columns": np.array(SIGNAL_COLUMNS),
        "mean": mean.astype(np.float32),
        "std": std.astype(np.float32),
        "z_quantiles": z_quantiles.astype(np.float16),
        "ar1": ar1.astype(np.float32),
        "ar1_normal": ar1_normal.astype(np.float32),
        "innovation_corr": innovation_corr.astype(np.float32),
        "score_corr": score_corr.astype(np.float32),
        "month_min": lo.astype(np.float32),
        "month_max": hi.astype(np.float32),
        "n_hours": n_hours.astype(np.int32),
        "metadata": np.array(json.dumps(metadata, sort_keys=True, separators=(",", ":"))),
    }


# =============================================================================================
# Saving and loading
# =============================================================================================
def save_profiles(profiles: Mapping[str, np.ndarray], path: str | Path) -> None:
    """Write ``profiles`` as a deflated ``.npz`` with fixed zip timestamps (reproducible)."""
    import zipfile

    missing = [key for key in _ARRAY_KEYS if key not in profiles]
    if missing:
        raise ValueError(f"profiles lack {missing}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for key in sorted(profiles):
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with zf.open(info, "w") as handle:
                np.lib.format.write_array(handle, np.asarray(profiles[key]), allow_pickle=False)


class SignalProfiles:
    """Read-only view of a profiles file; see the module docstring for the statistics."""

    def __init__(self, arrays: Mapping[str, np.ndarray], source: str = "<memory>") -> None:
        missing = [key for key in _ARRAY_KEYS if key not in arrays]
        if missing:
            raise DataFormatError(source, f"profiles file lacks arrays {missing}")
        self.source = source
        self.regions: tuple[str, ...] = tuple(str(r) for r in arrays["regions"])
        self.columns: tuple[str, ...] = tuple(str(c) for c in arrays["columns"])
        self.metadata: dict[str, Any] = json.loads(str(arrays["metadata"]))
        self._arrays: dict[str, np.ndarray] = {}
        for key in _ARRAY_KEYS[2:-1]:
            arr = np.array(arrays[key])  # own copy
            arr.setflags(write=False)
            self._arrays[key] = arr
        self._region_pos = {r: i for i, r in enumerate(self.regions)}
        self._column_pos = {c: i for i, c in enumerate(self.columns)}

    def _r(self, region: str) -> int:
        try:
            return self._region_pos[region]
        except KeyError:
            raise UnknownNameError("region", region, self.regions) from None

    def _c(self, column: str) -> int:
        try:
            return self._column_pos[column]
        except KeyError:
            raise UnknownNameError("signal column", column, self.columns) from None

    def _get(self, key: str, region: str, column: str | None = None) -> np.ndarray:
        arr = self._arrays[key][self._r(region)]
        return arr if column is None else arr[self._c(column)]

    def mean(self, region: str, column: str) -> np.ndarray:
        """Month x UTC-hour mean, shape (12, 24), float64."""
        return self._get("mean", region, column).astype(np.float64)

    def std(self, region: str, column: str) -> np.ndarray:
        """Month x UTC-hour standard deviation, shape (12, 24), float64."""
        return self._get("std", region, column).astype(np.float64)

    def z_quantiles(self, region: str, column: str) -> np.ndarray:
        """Per-month quantiles of the standardized residual at :data:`NORMAL_SCORE_GRID`,
        shape (12, 29)."""
        return self._get("z_quantiles", region, column).astype(np.float64)

    def ar1(self, region: str, column: str) -> float:
        """Lag-1 autocorrelation of the standardized residual measured on the real data."""
        return float(self._get("ar1", region, column))

    def ar1_normal(self, region: str, column: str) -> float:
        """Lag-1 autocorrelation the generator gives the residual's normal scores."""
        return float(self._get("ar1_normal", region, column))

    def innovation_corr(self, region: str) -> np.ndarray:
        """Correlation of the AR(1) innovations across :attr:`columns`, shape (7, 7)."""
        return self._get("innovation_corr", region).astype(np.float64)

    def score_corr(self, region: str) -> np.ndarray:
        """Lag-0 correlation of the residuals' normal scores measured on the real data."""
        return self._get("score_corr", region).astype(np.float64)

    def bounds(self, region: str, column: str) -> tuple[float, float]:
        """Observed (min, max) over the hours used."""
        return (
            float(self._get("month_min", region, column).min()),
            float(self._get("month_max", region, column).max()),
        )

    def month_bounds(self, region: str, column: str) -> tuple[np.ndarray, np.ndarray]:
        """Observed per-calendar-month (min, max), each shape (12,)."""
        return (
            self._get("month_min", region, column).astype(np.float64),
            self._get("month_max", region, column).astype(np.float64),
        )

    def n_hours(self, region: str, column: str) -> int:
        """Number of real hours behind the statistics."""
        return int(self._get("n_hours", region, column))

    def arrays(self) -> dict[str, np.ndarray]:
        """All arrays (read-only), including ``regions``, ``columns`` and ``metadata``."""
        out = dict(self._arrays)
        out["regions"] = np.array(self.regions)
        out["columns"] = np.array(self.columns)
        out["metadata"] = np.array(json.dumps(self.metadata, sort_keys=True, separators=(",", ":")))
        return out

    def __repr__(self) -> str:
        return f"SignalProfiles({len(self.regions)} regions, {self.source})"


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> SignalProfiles:
    del mtime_ns, size
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (OSError, ValueError) as exc:
        raise DataFormatError(path, f"not a readable profiles .npz ({exc})") from None
    return SignalProfiles(arrays, source=path)


def load_profiles(path: str | Path | None = None) -> SignalProfiles:
    """Profiles from ``path`` (default: the embedded file); cached on path and mtime."""
    file = Path(path) if path is not None else EMBEDDED_PROFILES_PATH
    try:
        stat = file.stat()
    except OSError:
        raise DataFormatError(file, "profiles file not found") from None
    return _load_cached(str(file.resolve()), stat.st_mtime_ns, stat.st_size)


def embedded_regions() -> tuple[str, ...]:
    """Regions the embedded profiles cover."""
    return load_profiles().regions


# =============================================================================================
# Synthesis
# =============================================================================================
