"""Embedded signal profiles and the synthetic generator (greenroute.data.profiles)."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from greenroute.catalog.regions import SIGNAL_REGIONS
from greenroute.core.errors import ConfigError, DataFormatError, UnknownNameError
from greenroute.data.grid_loaders import SIGNAL_COLUMNS, load_region_signals
from greenroute.data.paths import file_sha256
from greenroute.data.profile_stats import (
    NORMAL_SCORE_GRID,
    _calibrate_ar1,
    _cells,
    lag1_autocorr,
    standardized_residual,
)
from greenroute.data.profiles import (
    EMBEDDED_PROFILES_PATH,
    PHYSICAL_BOUNDS,
    SignalProfiles,
    build_profiles,
    embedded_regions,
    load_profiles,
    profile_source_series,
    save_profiles,
)
from greenroute.data.synth_signals import synthesize_region_signals

CI, LCA, LOW, REN, PRICE, TEMP, RH = SIGNAL_COLUMNS
YEAR_H = 8760
SYNTH_YEARS = 30  # month x hour means of persistent signals need many years to settle


@pytest.fixture(scope="module")
def profiles() -> SignalProfiles:
    return load_profiles()


@pytest.fixture(scope="module")
def long_synthetic(profiles: SignalProfiles) -> dict[str, pd.DataFrame]:
    return {
        region: synthesize_region_signals(region, "2001-01-01", SYNTH_YEARS * YEAR_H, seed=11)
        for region in profiles.regions
    }


def cell_mean_standard_error(ar1: float, years: int) -> float:
    """Standard error, in units of the cell std, of a month x hour mean over ``years`` years.

    For a residual with lag-1 autocorrelation ``ar1`` (AR(1)), the ~30 daily samples of a cell
    within one month correlate as ``ar1 ** (24 |i - j|)``; different years are independent.
    """
    days = np.arange(30)
    corr = (ar1**24) ** np.abs(days[:, None] - days[None, :])
    return float(np.sqrt(corr.mean() / years))


def cell_stats(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Month x UTC-hour mean and std (ddof=0) of a column, each shape (12, 24)."""
    grouped = frame[column].groupby([frame.index.month, frame.index.hour])
    mean = grouped.mean().to_numpy().reshape(12, 24)
    std = grouped.std(ddof=0).to_numpy().reshape(12, 24)
    return mean, std


# =============================================================================================
# The embedded file
# =============================================================================================
def test_embedded_file_is_small() -> None:
    assert EMBEDDED_PROFILES_PATH.is_file()
    assert EMBEDDED_PROFILES_PATH.stat().st_size < 400 * 1024


def test_embedded_profiles_content(profiles: SignalProfiles) -> None:
    assert embedded_regions() == SIGNAL_REGIONS == profiles.regions
    assert profiles.columns == SIGNAL_COLUMNS
    for region in profiles.regions:
        corr = profiles.innovation_corr(region)
        np.testing.assert_allclose(corr, corr.T, atol=1e-6)
        np.testing.assert_allclose(np.diag(corr), 1.0, atol=1e-6)
        assert np.linalg.eigvalsh(corr).min() > -1e-5  # a valid correlation matrix
        for column in SIGNAL_COLUMNS:
            mean, std = profiles.mean(region, column), profiles.std(region, column)
            assert mean.shape == std.shape == (12, 24)
            assert mean.dtype == std.dtype == np.float64
            assert np.isfinite(mean).all() and (std > 0).all()
            lo, hi = profiles.bounds(region, column)
            assert lo <= mean.min() and mean.max() <= hi
            assert 0.8 < profiles.ar1(region, column) < 1.0  # hourly signals are persistent
            assert 0.8 < profiles.ar1_normal(region, column) < 1.0
            quantiles = profiles.z_quantiles(region, column)
            assert quantiles.shape == (12, NORMAL_SCORE_GRID.size)
            assert (np.diff(quantiles, axis=1) >= 0).all()
            month_lo, month_hi = profiles.month_bounds(region, column)
            assert (month_lo.min(), month_hi.max()) == (lo, hi)
            assert (month_lo[:, None] <= mean).all() and (mean <= month_hi[:, None]).all()
    with pytest.raises(ValueError, match="read-only"):
        profiles.arrays()["mean"][0, 0, 0, 0] = 1.0


def test_metadata_years_and_sources(profiles: SignalProfiles) -> None:
    meta = profiles.metadata
    assert meta["profile_years"] == [2021, 2022, 2023, 2024]
    assert meta["hour_axis"] == "UTC"
    years = meta["years_used"]
    assert years["CL-SIC"][PRICE] == [2021, 2022, 2023]  # 2024 copies 2023 upstream
    assert years["IN-WE"][PRICE] == [2022, 2023, 2024]  # 2021 copies 2020 upstream
    assert years["GB"][PRICE] == [2022, 2023, 2024]  # no GB price before 2022-01-21
    assert years["DE-LU"][PRICE] == [2021, 2022, 2023, 2024]
    assert profiles.n_hours("CL-SIC", PRICE) == 3 * 8760
    assert profiles.n_hours("IN-WE", PRICE) == 8760 * 2 + 8784
    assert profiles.n_hours("GB", PRICE) == 25_800  # observed hours only
    sources = meta["source_sha256"]
    assert len(sources) == 48  # 16 regions x (CI, price, weather)
    assert all(re.fullmatch(r"[0-9a-f]{64}", digest) for digest in sources.values())
    text = json.dumps(meta)
    assert not re.search(r"20[2-9]\d-\d\d-\d\dT", text)  # no build timestamp inside


@pytest.mark.realdata
def test_metadata_hashes_match_the_data(data_dir: Path, profiles: SignalProfiles) -> None:
    for relative, digest in profiles.metadata["source_sha256"].items():
        assert file_sha256(data_dir / relative) == digest, relative


# =============================================================================================
# Statistics against hand computations on the real data
# =============================================================================================
@pytest.mark.realdata
def test_profile_cells_match_pandas_groupby(data_dir: Path, profiles: SignalProfiles) -> None:
    series, _ = profile_source_series(data_dir, "DE-LU")
    ci = series[CI]
    january_midnight = ci[(ci.index.month == 1) & (ci.index.hour == 0)]
    assert len(january_midnight) == 4 * 31
    mean, std = profiles.mean("DE-LU", CI), profiles.std("DE-LU", CI)
    assert mean[0, 0] == pytest.approx(january_midnight.mean(), rel=1e-6)
    assert std[0, 0] == pytest.approx(january_midnight.std(ddof=0), rel=1e-5)
    # CL-SIC price: 2024 excluded, so July 12:00 UTC averages 3 x 31 days.
    price = profile_source_series(data_dir, "CL-SIC")[0][PRICE]
    july_noon = price[(price.index.month == 7) & (price.index.hour == 12)]
    assert len(july_noon) == 3 * 31
    assert profiles.mean("CL-SIC", PRICE)[6, 12] == pytest.approx(july_noon.mean(), rel=1e-6)


@pytest.mark.realdata
def test_profile_ar1_matches_the_residual_autocorrelation(
    data_dir: Path, profiles: SignalProfiles
) -> None:
    temp = profile_source_series(data_dir, "GB")[0][TEMP]
    keys = [temp.index.month, temp.index.hour]
    z = (temp - temp.groupby(keys).transform("mean")) / temp.groupby(keys).transform(
        lambda x: x.std(ddof=0)
    )
    assert z.index.to_series().diff().dropna().eq(pd.Timedelta(hours=1)).all()
    assert profiles.ar1("GB", TEMP) == pytest.approx(z.autocorr(lag=1), abs=1e-5)


@pytest.mark.realdata
@pytest.mark.slow
def test_build_reproduces_embedded_file(data_dir: Path, tmp_path: Path) -> None:
    built = build_profiles(data_dir)
    embedded = load_profiles().arrays()
    assert set(built) == set(embedded)
    assert json.loads(str(built["metadata"])) == json.loads(str(embedded["metadata"]))
    for key in ("regions", "columns", "n_hours"):
        np.testing.assert_array_equal(built[key], embedded[key])
    for key in ("mean", "std", "z_quantiles", "ar1", "ar1_normal", "innovation_corr",
                "score_corr", "month_min", "month_max"):  # fmt: skip
        assert (
            built[key].dtype
            == embedded[key].dtype
            == (np.float16 if key == "z_quantiles" else np.float32)
        )
        np.testing.assert_allclose(built[key], embedded[key], rtol=2e-6, atol=1e-6, err_msg=key)
    save_profiles(built, tmp_path / "rebuilt.npz")
    assert (tmp_path / "rebuilt.npz").stat().st_size < 400 * 1024


def test_save_is_reproducible_and_round_trips(tmp_path: Path, profiles: SignalProfiles) -> None:
    arrays = profiles.arrays()
    save_profiles(arrays, tmp_path / "a.npz")
    save_profiles(arrays, tmp_path / "b.npz")
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.npz") as zf:
        assert {info.date_time for info in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    again = load_profiles(tmp_path / "a.npz")
    assert again.regions == profiles.regions
    np.testing.assert_array_equal(again.mean("SG", TEMP), profiles.mean("SG", TEMP))
    assert again.metadata == profiles.metadata


def test_load_profiles_errors(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="not found"):
        load_profiles(tmp_path / "absent.npz")
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip file")
    with pytest.raises(DataFormatError, match=r"garbage\.npz"):
        load_profiles(garbage)
    partial = tmp_path / "partial.npz"
    np.savez(partial, regions=np.array(["X"]))
    with pytest.raises(DataFormatError, match="lacks arrays"):
        load_profiles(partial)


# =============================================================================================
# Synthetic series reproduce the profile
# =============================================================================================
@pytest.mark.parametrize("region", SIGNAL_REGIONS)
def test_synthetic_statistics_match_profile(
    region: str, profiles: SignalProfiles, long_synthetic: dict[str, pd.DataFrame]
) -> None:
    frame = long_synthetic[region]
    for column in SIGNAL_COLUMNS:
        target_mean, target_std = profiles.mean(region, column), profiles.std(region, column)
        mean, std = cell_stats(frame, column)
        deviation = np.abs(mean - target_mean) / target_std  # in units of the hourly std
        # Sampling error of 30 synthetic years: ~0.03 std for fast signals, ~0.13 for the
        # slowest (BR-SP carbon intensity, lag-1 0.997). E|N(0,1)| = 0.8, so the mean over
        # cells sits near 0.8 se; 0.03 allows the small bias of the observed-range clipping.
        se = cell_mean_standard_error(profiles.ar1(region, column), SYNTH_YEARS)
        assert deviation.mean() < 2.0 * se + 0.03, (column, deviation.mean(), se)
        assert deviation.max() < 8.0 * se + 0.1, (column, deviation.max(), se)
        assert 0.88 < np.median(std / target_std) < 1.12, column
        z = standardized_residual(frame[column].to_numpy(), frame.index, target_mean, target_std)
        assert lag1_autocorr(z) == pytest.approx(profiles.ar1(region, column), abs=0.05)


@pytest.mark.parametrize("region", SIGNAL_REGIONS)
def test_synthetic_bounds(
    region: str, profiles: SignalProfiles, long_synthetic: dict[str, pd.DataFrame]
) -> None:
    frame = long_synthetic[region]
    assert not frame.isna().to_numpy().any()
    month = frame.index.month.to_numpy() - 1
    for column, (lo, hi) in PHYSICAL_BOUNDS.items():
        assert frame[column].between(lo, hi).all(), column
        # ... and within the range the real data showed in that calendar month.
        month_lo, month_hi = profiles.month_bounds(region, column)
        values = frame[column].to_numpy()
        assert (values >= month_lo[month] - 1e-9).all(), column
        assert (values <= month_hi[month] + 1e-9).all(), column
    assert (frame[LCA] >= frame[CI]).all()
    assert (frame[REN] <= frame[LOW]).all()


@pytest.mark.realdata
@pytest.mark.parametrize("region", SIGNAL_REGIONS)
def test_synthetic_co_movement_matches_real(
    data_dir: Path, region: str, profiles: SignalProfiles, long_synthetic: dict[str, pd.DataFrame]
) -> None:
    def residuals(series: dict[str, pd.Series]) -> np.ndarray:
        z = {
            c: pd.Series(
                standardized_residual(
                    s.to_numpy(), s.index, profiles.mean(region, c), profiles.std(region, c)
                ),
                index=s.index,
            )
            for c, s in series.items()
        }
        return pd.concat(z, axis=1, join="inner")[list(SIGNAL_COLUMNS)].to_numpy()

    real = residuals(profile_source_series(data_dir, region)[0])
    frame = long_synthetic[region]
    synthetic = residuals({c: frame[c] for c in SIGNAL_COLUMNS})
    upper = np.triu_indices(len(SIGNAL_COLUMNS), 1)
    # The generator matches co-movement in rank (normal-score) terms ...
    rank_gap = np.abs(stats.spearmanr(real).statistic - stats.spearmanr(synthetic).statistic)
    assert rank_gap[upper].mean() < 0.07
    assert rank_gap[upper].max() < 0.25  # worst: BR-SP price vs CI (~0.2), both very slow
    # ... and carbon intensity against renewables in plain (Pearson) terms too.
    real_corr, synthetic_corr = np.corrcoef(real.T), np.corrcoef(synthetic.T)
    assert synthetic_corr[0, 3] == pytest.approx(real_corr[0, 3], abs=0.1)


def test_synthetic_ci_falls_when_renewables_rise(long_synthetic: dict[str, pd.DataFrame]) -> None:
    frame = long_synthetic["DE-LU"]
    assert np.corrcoef(frame[CI], frame[REN])[0, 1] < -0.8


# =============================================================================================
# Format, determinism, speed
# =============================================================================================
def test_synthetic_frame_format() -> None:
    frame = synthesize_region_signals("DE-LU", "2030-03-01 00:20", 48, seed=0)
    assert tuple(frame.columns) == SIGNAL_COLUMNS
    assert (frame.dtypes == np.float64).all()
    assert str(frame.index.tz) == "UTC" and frame.index.name == "time_utc"
    assert frame.index.freqstr == "h"
    assert frame.index[0] == pd.Timestamp("2030-03-01 01:00", tz="UTC")  # rounded up
    assert len(frame) == 48
    aware = synthesize_region_signals("DE-LU", "2030-03-01T02:00+01:00", 48, seed=0)
    pd.testing.assert_frame_equal(aware, frame)
    empty = synthesize_region_signals("DE-LU", "2030-03-01", 0, seed=0)
    assert empty.empty and tuple(empty.columns) == SIGNAL_COLUMNS


@pytest.mark.realdata
def test_synthetic_frame_format_matches_real(data_dir: Path) -> None:
    real = load_region_signals(data_dir, "GB", "2023-01-01", "2023-01-03")
    synthetic = synthesize_region_signals("GB", "2023-01-01", len(real), seed=5)
    assert (real.dtypes == synthetic.dtypes).all()
    assert real.index.dtype == synthetic.index.dtype
    assert real.index.equals(synthetic.index)
    assert real.index.freq == synthetic.index.freq


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**63 - 1))
def test_synthesis_is_deterministic_and_seed_sensitive(seed: int) -> None:
    first = synthesize_region_signals("US-TEX-ERCO", "2026-07-01", 96, seed=seed)
    np.random.seed(12345)  # the global RNG must not matter
    second = synthesize_region_signals("US-TEX-ERCO", "2026-07-01", 96, seed=seed)
    pd.testing.assert_frame_equal(first, second)
    other = synthesize_region_signals("US-TEX-ERCO", "2026-07-01", 96, seed=seed ^ 1)
    assert not np.allclose(first.to_numpy(), other.to_numpy())


def test_shorter_series_is_a_prefix() -> None:
    long = synthesize_region_signals("JP-TK", "2027-01-01", 500, seed=3)
    short = synthesize_region_signals("JP-TK", "2027-01-01", 100, seed=3)
    pd.testing.assert_frame_equal(short, long.iloc[:100], check_freq=False)


def test_regions_get_independent_streams(profiles: SignalProfiles) -> None:
    hours = 5 * YEAR_H
    a = synthesize_region_signals("DE-LU", "2030-01-01", hours, seed=7)
    b = synthesize_region_signals("GB", "2030-01-01", hours, seed=7)

    def z(frame: pd.DataFrame, region: str) -> np.ndarray:
        return standardized_residual(
            frame[RH].to_numpy(), frame.index, profiles.mean(region, RH), profiles.std(region, RH)
        )

    assert abs(np.corrcoef(z(a, "DE-LU"), z(b, "GB"))[0, 1]) < 0.15


def test_synthesis_argument_errors() -> None:
    with pytest.raises(UnknownNameError) as err:
        synthesize_region_signals("XX", "2030-01-01", 10, seed=0)
    assert "DE-LU" in str(err.value) and "ZA" in str(err.value)
    for hours in (-1, 2.5, True):
        with pytest.raises(ConfigError, match="hours"):
            synthesize_region_signals("ZA", "2030-01-01", hours, seed=0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="seed"):
        synthesize_region_signals("ZA", "2030-01-01", 10, seed=-1)
    with pytest.raises(ConfigError, match="start"):
        synthesize_region_signals("ZA", "not a time", 10, seed=0)


# =============================================================================================
# Helpers: closed forms
# =============================================================================================
def test_lag1_autocorr_closed_forms() -> None:
    assert lag1_autocorr(np.arange(10.0)) == pytest.approx(1.0)
    assert lag1_autocorr(np.array([1.0, -1.0] * 20)) == pytest.approx(-1.0)
    assert lag1_autocorr(np.full(10, 3.0)) == 0.0
    # Only pairs exactly one hour apart count: the jump across the gap is ignored.
    index = pd.DatetimeIndex(
        ["2021-01-01 00:00", "2021-01-01 01:00", "2021-01-01 02:00", "2021-01-01 05:00",
         "2021-01-01 06:00", "2021-01-01 07:00"], tz="UTC",
    )  # fmt: skip
    values = np.array([1.0, 2.0, 3.0, 10.0, 11.0, 12.0])
    assert lag1_autocorr(values, index) == pytest.approx(1.0)
    # An AR(1) with phi = 0.8 has lag-1 autocorrelation 0.8.
    rng = np.random.default_rng(0)
    noise = rng.standard_normal(200_000)
    from scipy.signal import lfilter

    assert lag1_autocorr(lfilter([1.0], [1.0, -0.8], noise)) == pytest.approx(0.8, abs=0.01)


def test_standardized_residual_closed_form() -> None:
    index = pd.date_range("2021-03-01", periods=48, freq="h", tz="UTC")
    mean = np.arange(288.0).reshape(12, 24)
    std = np.full((12, 24), 2.0)
    std[2, 5] = 0.0  # a constant cell gives z = 0
    values = mean.reshape(-1)[_cells(index)] + 2.0 * 1.5
    z = standardized_residual(values, index, mean, std)
    expected = np.where(index.hour == 5, 0.0, 1.5)
    np.testing.assert_allclose(z, expected)
    assert _cells(pd.DatetimeIndex(["2021-12-31 23:00"], tz="UTC"))[0] == 287


def test_cell_mean_standard_error_closed_forms() -> None:
    assert cell_mean_standard_error(0.0, 1) == pytest.approx(np.sqrt(1 / 30))  # independent days
    assert cell_mean_standard_error(1.0, 4) == pytest.approx(0.5)  # one value per month-year


@pytest.mark.parametrize("target", [0.3, 0.9, 0.99])
def test_ar1_calibration_is_identity_for_gaussian_marginal(target: float) -> None:
    # With z quantiles equal to the normal scores the map is the identity (held beyond +-4
    # sigma, which moves the correlation by < 1e-3), so no correction is needed.
    assert _calibrate_ar1(target, NORMAL_SCORE_GRID.copy()) == pytest.approx(target, abs=1e-3)


def test_ar1_calibration_raises_phi_for_a_skewed_marginal() -> None:
    # A spiky (exponential-like) marginal loses lag-1 correlation through the map, so the
    # Gaussian AR(1) coefficient must exceed the target.
    skewed = np.expm1(np.maximum(NORMAL_SCORE_GRID, -1.0))
    phi = _calibrate_ar1(0.9, skewed)
    assert 0.9 < phi < 0.9999
