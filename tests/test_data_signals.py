"""Loaders of the real grid signal files (greenroute.data.grid_loaders).

Expected values are read by hand from specific rows of ``shared/data/grid`` (quoted in the
comments) or follow from PROVENANCE.md §2; the bad-file tests write small files to tmp_path.
"""

from __future__ import annotations

import gzip
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenroute.catalog.regions import SIGNAL_REGIONS
from greenroute.core.errors import ConfigError, DataFormatError, UnknownNameError
from greenroute.data.grid_loaders import (
    DUPLICATED_PRICE_YEARS,
    EUR_TO_USD,
    SIGNAL_COLUMNS,
    load_carbon_intensity,
    load_price,
    load_region_signals,
    load_regions_index,
    load_weather,
    signal_regions,
)

HOURS_2021_2024 = (365 * 3 + 366) * 24  # 35,064
UTC = "UTC"


def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz=UTC)


def grid_file(data_dir: Path, region: str, column: str) -> Path:
    return data_dir / "grid" / load_regions_index(data_dir).loc[region, column]


# =============================================================================================
# Real files: shape, coverage, units
# =============================================================================================
@pytest.mark.realdata
def test_regions_index_and_signal_regions(data_dir: Path) -> None:
    index = load_regions_index(data_dir)
    assert index.index.name == "region"
    assert len(index) == 23  # 16 full regions + 7 price-only (PROVENANCE.md §2)
    assert signal_regions(data_dir) == SIGNAL_REGIONS
    assert index.loc["GB", "timezone"] == "Europe/London"
    assert pd.isna(index.loc["AT", "ci_file"])


@pytest.mark.realdata
@pytest.mark.parametrize("region", SIGNAL_REGIONS)
def test_every_region_loads_complete(data_dir: Path, region: str) -> None:
    ci = load_carbon_intensity(grid_file(data_dir, region, "ci_file"))
    price = load_price(
        grid_file(data_dir, region, "price_file"),
        local_tz=load_regions_index(data_dir).loc[region, "timezone"],
    )
    weather = load_weather(grid_file(data_dir, region, "weather_file"))

    assert len(ci) == HOURS_2021_2024
    assert ci.index[0] == ts("2021-01-01") and ci.index[-1] == ts("2024-12-31 23:00")
    # GB is the one local-time EUR file: 2022-01-21 .. 2024-12-31 = 1,076 days of 24 UTC hours
    # (25,800 source rows; 3 spring filler rows dropped, 3 autumn hours used twice, 24 hours of
    # the missing 2022-12-31 interpolated).
    assert len(price) == (1076 * 24 if region == "GB" else HOURS_2021_2024)
    assert len(weather) == HOURS_2021_2024
    for frame in (ci, price, weather):
        assert str(frame.index.tz) == UTC
        assert frame.index.name == "time_utc"
        assert frame.index.is_monotonic_increasing and frame.index.is_unique
        assert (np.diff(frame.index.asi8) == pd.Timedelta(hours=1).value // 1000).all()
        assert not frame.isna().to_numpy().any()
    assert list(ci.columns) == [*SIGNAL_COLUMNS[:4], "estimated"]
    assert ci["estimated"].dtype == bool
    assert list(weather.columns) == ["temp_c", "rh_pct", "cloudcover_pct", "windspeed_kmh"]
    assert price.name == "price_usd_per_kwh"
    # Physical sanity of the real series.
    assert (ci["carbon_intensity_lca_g_per_kwh"] >= ci["carbon_intensity_g_per_kwh"]).all()
    assert (ci["renewable_pct"] <= ci["low_carbon_pct"]).all()
    assert weather["rh_pct"].between(1, 100).all()


@pytest.mark.realdata
def test_carbon_intensity_row_values(data_dir: Path) -> None:
    # DE-LU line 2:
    # "2021-01-01 00:00:00,Germany,Germany,DE,449.07,526.77,50.01,29.43,entsoe.eu,false,"
    ci = load_carbon_intensity(grid_file(data_dir, "DE-LU", "ci_file"))
    row = ci.loc[ts("2021-01-01 00:00")]
    assert row["carbon_intensity_g_per_kwh"] == 449.07
    assert row["carbon_intensity_lca_g_per_kwh"] == 526.77
    assert row["low_carbon_pct"] == 50.01
    assert row["renewable_pct"] == 29.43
    assert not row["estimated"]
    # PROVENANCE caveat: IN-WE and JP-TK are 100 % Electricity Maps estimates.
    for region in ("IN-WE", "JP-TK"):
        assert load_carbon_intensity(grid_file(data_dir, region, "ci_file"))["estimated"].all()


@pytest.mark.realdata
def test_price_units_standardized(data_dir: Path) -> None:
    # DE-LU line 2: "2021-01-01 00:00:00+00:00,2021-01-01 01:00:00+01:00,53.375509199999996"
    price = load_price(grid_file(data_dir, "DE-LU", "price_file"))
    assert price[ts("2021-01-01 00:00")] == pytest.approx(0.0533755092, rel=1e-12)
    assert price.attrs["filled_hours"] == 0


@pytest.mark.realdata
def test_price_in_we_half_hour_stamps_are_floored(data_dir: Path) -> None:
    # IN-WE line 2: "2021-01-01 00:30:00+00:00,2021-01-01 06:00:00+05:30,29.800628"
    #         line 3: "2021-01-01 01:30:00+00:00,...,36.465367400000005"
    #     last line: "2024-12-31 23:30:00+00:00,...,33.03015650000003"
    price = load_price(grid_file(data_dir, "IN-WE", "price_file"))
    assert price.index[0] == ts("2021-01-01 00:00")
    assert price[ts("2021-01-01 00:00")] == pytest.approx(0.029800628, rel=1e-12)
    assert price[ts("2021-01-01 01:00")] == pytest.approx(0.0364653674, rel=1e-12)
    assert price.index[-1] == ts("2024-12-31 23:00")
    assert price.iloc[-1] == pytest.approx(0.03303015650000003, rel=1e-12)


@pytest.mark.realdata
def test_price_gb_local_time_and_eur(data_dir: Path) -> None:
    path = grid_file(data_dir, "GB", "price_file")
    price = load_price(path, local_tz="Europe/London")
    usd_per_kwh = EUR_TO_USD / 1000.0
    # Winter, local == UTC. Line 2: "2022-01-21 00:00:00,181.63"
    assert price.index[0] == ts("2022-01-21 00:00")
    assert price[ts("2022-01-21 00:00")] == pytest.approx(181.63 * usd_per_kwh, rel=1e-12)
    # Summer, local 01:00 BST == 00:00 UTC. Line 12939: "2023-07-15 01:00:00,61.34"
    assert price[ts("2023-07-15 00:00")] == pytest.approx(61.34 * usd_per_kwh, rel=1e-12)
    assert price[ts("2023-07-14 23:00")] == pytest.approx(73.02 * usd_per_kwh, rel=1e-12)
    # Autumn change 2022-10-30: the file has a single local 01:00 row ("99.74"); it covers both
    # UTC hours 00:00 (01:00 BST) and 01:00 (01:00 GMT). Local 00:00 BST ("101.05") is
    # 2022-10-29 23:00 UTC; local 02:00 GMT ("87.67") is 02:00 UTC.
    autumn = price[ts("2022-10-29 23:00") : ts("2022-10-30 02:00")] / usd_per_kwh
    np.testing.assert_allclose(autumn.to_numpy(), [101.05, 99.74, 99.74, 87.67], rtol=1e-12)
    # Spring change 2022-03-27: the row stamped 01:00 local does not exist in Europe/London (it
    # repeats the 02:00 value, 226.67) and is dropped; 02:00 BST == 01:00 UTC.
    spring = price[ts("2022-03-27 00:00") : ts("2022-03-27 02:00")] / usd_per_kwh
    np.testing.assert_allclose(spring.to_numpy(), [235.67, 226.67, 218.28], rtol=1e-12)
    assert price.index.is_unique
    # 2022-12-31 is absent upstream: 24 hours linearly interpolated between 2022-12-30 23:00
    # ("0.0") and 2023-01-01 00:00 ("58.63"), 25 hours apart.
    assert price.attrs["filled_hours"] == 24
    assert price[ts("2022-12-31 12:00")] == pytest.approx(58.63 * 13 / 25 * usd_per_kwh)
    observed = load_price(path, include_filled=False)
    assert len(observed) == 25_800
    assert ts("2022-12-31 12:00") not in observed.index


@pytest.mark.realdata
def test_weather_utc_shift(data_dir: Path) -> None:
    # AU-NSW line 2: "2021-01-01T00:00,2020-12-31 13:00:00,19.1,79,99,10.5" (offset +11 h)
    nsw = load_weather(grid_file(data_dir, "AU-NSW", "weather_file"))
    assert nsw.index[0] == ts("2020-12-31 13:00")
    assert nsw.index[-1] == ts("2024-12-31 12:00")
    assert nsw.iloc[0].tolist() == [19.1, 79.0, 99.0, 10.5]
    # US-CAL-CISO (offset -7 h) ends 2025-01-01 06:00 UTC; last line temperature 7.5.
    cal = load_weather(grid_file(data_dir, "US-CAL-CISO", "weather_file"))
    assert cal.index[0] == ts("2021-01-01 07:00")
    assert cal.index[-1] == ts("2025-01-01 06:00")
    assert cal["temp_c"].iloc[-1] == 7.5
    # IN-WE (+05:30) stamps fall on :30 UTC and are floored like the IN-WE price.
    # Line 2: "2021-01-01T00:00,2020-12-31 18:30:00,23.2,75,33,10.2"
    mumbai = load_weather(grid_file(data_dir, "IN-WE", "weather_file"))
    assert mumbai.index[0] == ts("2020-12-31 18:00")
    assert mumbai["temp_c"].iloc[0] == 23.2


@pytest.mark.realdata
def test_weather_offsets_match_locations_file(data_dir: Path) -> None:
    locations = pd.read_csv(data_dir / "grid" / "weather" / "weather_locations.csv")
    for region, offset_s in zip(
        locations["region"], locations["utc_offset_seconds_applied"], strict=True
    ):
        weather = load_weather(grid_file(data_dir, region, "weather_file"))
        expected = (ts("2021-01-01") - pd.Timedelta(seconds=int(offset_s))).floor("h")
        assert weather.index[0] == expected, region


# =============================================================================================
# load_region_signals
# =============================================================================================
@pytest.mark.realdata
def test_region_signals_window(data_dir: Path) -> None:
    frame = load_region_signals(data_dir, "DE-LU", "2022-03-01", "2022-03-08")
    assert len(frame) == 7 * 24
    assert tuple(frame.columns) == SIGNAL_COLUMNS
    assert (frame.dtypes == np.float64).all()
    assert not frame.isna().to_numpy().any()
    assert frame.index[0] == ts("2022-03-01") and frame.index[-1] == ts("2022-03-07 23:00")
    assert frame.index.name == "time_utc" and frame.index.freqstr == "h"
    ci = load_carbon_intensity(grid_file(data_dir, "DE-LU", "ci_file"))
    price = load_price(grid_file(data_dir, "DE-LU", "price_file"))
    weather = load_weather(grid_file(data_dir, "DE-LU", "weather_file"))
    when = ts("2022-03-03 17:00")
    assert frame.loc[when, "carbon_intensity_g_per_kwh"] == ci.loc[when, SIGNAL_COLUMNS[0]]
    assert frame.loc[when, "price_usd_per_kwh"] == price[when]
    assert frame.loc[when, "temp_c"] == weather.loc[when, "temp_c"]


@pytest.mark.realdata
def test_region_signals_window_rules(data_dir: Path) -> None:
    # Aware stamps are converted; naive ones are UTC; a partial first hour is skipped.
    aware = load_region_signals(data_dir, "KR", "2023-05-01T09:00+09:00", "2023-05-02T09:00+09:00")
    naive = load_region_signals(data_dir, "KR", "2023-05-01 00:00", "2023-05-02 00:00")
    pd.testing.assert_frame_equal(aware, naive)
    partial = load_region_signals(data_dir, "KR", "2023-05-01 00:30", "2023-05-01 03:00")
    assert partial.index.tolist() == [ts("2023-05-01 01:00"), ts("2023-05-01 02:00")]
    # A whole year across the GB autumn/spring changes is complete.
    assert len(load_region_signals(data_dir, "GB", "2023-01-01", "2024-01-01")) == 8760
    with pytest.raises(ConfigError, match="empty time window"):
        load_region_signals(data_dir, "KR", "2023-05-02", "2023-05-01")


@pytest.mark.realdata
def test_region_signals_gb_price_before_2022_01_21(data_dir: Path) -> None:
    with pytest.raises(DataFormatError) as err:
        load_region_signals(data_dir, "GB", "2022-01-01", "2022-02-01")
    message = str(err.value)
    assert "GB_2022-2024_eur_per_mwh_local_processed.csv.gz" in message
    assert "2022-01-21 00:00:00+00:00 .. 2024-12-31 23:00:00+00:00" in message
    # From 2022-01-21 the same region loads.
    assert len(load_region_signals(data_dir, "GB", "2022-01-21", "2022-02-01")) == 11 * 24


@pytest.mark.realdata
def test_region_signals_weather_shift_at_series_end(data_dir: Path) -> None:
    # AU-NSW weather stops at 2024-12-31 12:00 UTC (local 23:00, +11 h fixed offset).
    with pytest.raises(DataFormatError) as err:
        load_region_signals(data_dir, "AU-NSW", "2024-12-31", "2025-01-01")
    assert "AU-NSW_2021-2024_hourly.csv.gz" in str(err.value)
    assert "weather" in str(err.value)
    assert "2020-12-31 13:00:00+00:00 .. 2024-12-31 12:00:00+00:00" in str(err.value)
    # US-CAL-CISO weather starts at 07:00 UTC on 2021-01-01.
    with pytest.raises(DataFormatError, match="US-CAL-CISO_2021-2024_hourly"):
        load_region_signals(data_dir, "US-CAL-CISO", "2021-01-01", "2021-01-02")


@pytest.mark.realdata
@pytest.mark.parametrize(("region", "year"), sorted(DUPLICATED_PRICE_YEARS))
def test_region_signals_duplicated_price_year_warns(data_dir: Path, region: str, year: int) -> None:
    with pytest.warns(UserWarning, match=rf"{region} price for {year} is a copy"):
        frame = load_region_signals(data_dir, region, f"{year}-06-01", f"{year}-06-02")
    assert len(frame) == 24


@pytest.mark.realdata
def test_region_signals_other_years_do_not_warn(data_dir: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_region_signals(data_dir, "CL-SIC", "2023-06-01", "2023-06-02")
        load_region_signals(data_dir, "IN-WE", "2022-06-01", "2022-06-02")


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["XX", "AT", "de-lu"])
def test_region_signals_unknown_region(data_dir: Path, name: str) -> None:
    with pytest.raises(UnknownNameError) as err:
        load_region_signals(data_dir, name, "2022-01-01", "2022-01-02")
    message = str(err.value)
    for region in SIGNAL_REGIONS:
        assert region in message
    assert "'AT'" not in message.split("valid choices:")[1]


def test_region_signals_need_a_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GREENROUTE_DATA_DIR", raising=False)
    with pytest.raises(ConfigError, match="GREENROUTE_DATA_DIR"):
        load_region_signals(None, "DE-LU", "2022-01-01", "2022-01-02")


# =============================================================================================
# Bad files
# =============================================================================================
CI_HEADER = (
    "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
    "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,"
    "Data Source,Data Estimated,Data Estimation Method"
)


def ci_row(hour: int, direct: str = "300.5") -> str:
    return f"2021-01-01 {hour:02d}:00:00,Germany,Germany,DE,{direct},350.0,50.0,30.0,src,false,"


def write(path: Path, lines: list[str], *, gz: bool = False) -> Path:
    text = "\n".join(lines) + "\n"
    if gz:
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def good_ci_lines(n: int = 6) -> list[str]:
    return [CI_HEADER, *(ci_row(h) for h in range(n))]


def assert_error(path: Path, line: int | None, *fragments: str, loader=load_carbon_intensity):
    with pytest.raises(DataFormatError) as err:
        loader(path)
    message = str(err.value)
    assert path.name in message
    if line is not None:
        assert f"{path.name}:{line}:" in message, message
        assert err.value.line == line
    for fragment in fragments:
        assert fragment in message, message
    return message


@pytest.mark.parametrize("gz", [False, True])
def test_good_small_file_plain_and_gzip(tmp_path: Path, gz: bool) -> None:
    path = write(tmp_path / ("ci.csv.gz" if gz else "ci.csv"), good_ci_lines(), gz=gz)
    frame = load_carbon_intensity(path)
    assert len(frame) == 6
    assert frame["carbon_intensity_g_per_kwh"].tolist() == [300.5] * 6
    assert frame.index[-1] == ts("2021-01-01 05:00")


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_row(tmp_path: Path, gz: bool) -> None:
    lines = good_ci_lines()
    lines[3] = lines[3].rsplit(",", 4)[0]  # line 4 loses its last 4 fields
    path = write(tmp_path / "ci.csv.gz", lines, gz=gz)
    assert_error(path, 4, "expected 11", "found 7")


def test_row_with_an_extra_field(tmp_path: Path) -> None:
    lines = good_ci_lines()
    lines[2] += ",extra"
    assert_error(write(tmp_path / "ci.csv", lines), 3, "expected 11", "found 12")


def test_blank_line_inside_the_file(tmp_path: Path) -> None:
    lines = good_ci_lines()
    lines.insert(4, "")
    assert_error(write(tmp_path / "ci.csv", lines), 5, "found 1")


def test_trailing_blank_lines_are_fine(tmp_path: Path) -> None:
    path = write(tmp_path / "ci.csv", [*good_ci_lines(), "", ""])
    assert len(load_carbon_intensity(path)) == 6


def test_missing_column(tmp_path: Path) -> None:
    # drop the "Renewable Percentage" column (field 7) everywhere
    lines = [",".join(p for i, p in enumerate(row.split(",")) if i != 7) for row in good_ci_lines()]
    message = assert_error(write(tmp_path / "ci.csv", lines), None, "Renewable Percentage")
    assert "missing required column" in message
    assert "found columns" in message and "Low Carbon Percentage" in message


@pytest.mark.parametrize("cell", ["", "NaN", "nan"])
def test_nan_gap(tmp_path: Path, cell: str) -> None:
    lines = good_ci_lines()
    lines[4] = ci_row(3, direct=cell)  # line 5
    assert_error(
        write(tmp_path / "ci.csv", lines),
        5,
        "empty or NaN value",
        "Carbon Intensity gCO₂eq/kWh (direct)",
    )


def test_non_numeric_value(tmp_path: Path) -> None:
    lines = good_ci_lines()
    lines[6] = ci_row(5, direct="12;5")
    assert_error(write(tmp_path / "ci.csv", lines), 7, "bad number '12;5'")


@pytest.mark.parametrize("stamp", ["2021-13-01 00:00:00", "yesterday", "2021-01-01 25:00:00"])
def test_bad_timestamp(tmp_path: Path, stamp: str) -> None:
    lines = good_ci_lines()
    lines[3] = lines[3].replace("2021-01-01 02:00:00", stamp)
    assert_error(write(tmp_path / "ci.csv", lines), 4, "unparseable timestamp", stamp)


def test_duplicated_timestamp(tmp_path: Path) -> None:
    lines = good_ci_lines()
    lines[4] = ci_row(2)  # line 5 repeats line 4's hour
    assert_error(write(tmp_path / "ci.csv", lines), 5, "duplicated timestamp")


def test_non_increasing_timestamp(tmp_path: Path) -> None:
    lines = good_ci_lines()
    lines[5] = ci_row(1)  # line 6 goes back to 01:00
    assert_error(write(tmp_path / "ci.csv", lines), 6, "non-increasing timestamp")


def test_bad_estimated_flag(tmp_path: Path) -> None:
    lines = good_ci_lines()
    lines[2] = lines[2].replace(",false,", ",maybe,")
    assert_error(write(tmp_path / "ci.csv", lines), 3, "'maybe'")


def test_empty_header_only_and_corrupt_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert_error(empty, None, "empty file")
    header_only = write(tmp_path / "header.csv", [CI_HEADER])
    assert_error(header_only, None, "no data rows")
    corrupt = tmp_path / "corrupt.csv.gz"
    corrupt.write_bytes(gzip.compress(("\n".join(good_ci_lines()) + "\n").encode())[:-20])
    assert_error(corrupt, None, "corrupt gzip")
    assert_error(tmp_path / "absent.csv", None, "file not found")


WEATHER_HEADER = (
    "time_local_fixed_offset,datetime_utc,temperature_2m_C,relative_humidity_2m_pct,"
    "cloudcover_pct,windspeed_10m_kmh"
)


def test_weather_bad_rows(tmp_path: Path) -> None:
    rows = [f"2021-01-01T{h:02d}:00,2021-01-01 {h:02d}:00:00,5.0,80,10,3.0" for h in range(5)]
    good = write(tmp_path / "w.csv", [WEATHER_HEADER, *rows])
    assert load_weather(good)["rh_pct"].tolist() == [80.0] * 5
    gap = [WEATHER_HEADER, *rows]
    gap[3] = "2021-01-01T02:00,2021-01-01 02:00:00,,80,10,3.0"
    assert_error(write(tmp_path / "w.csv", gap), 4, "temperature_2m_C", loader=load_weather)
    dup = [WEATHER_HEADER, *rows]
    dup[5] = dup[4]
    assert_error(write(tmp_path / "w.csv", dup), 6, "duplicated", loader=load_weather)
    missing = [",".join(line.split(",")[:-1]) for line in [WEATHER_HEADER, *rows]]
    assert_error(write(tmp_path / "w.csv", missing), None, "windspeed_10m_kmh", loader=load_weather)


def test_price_formats_and_errors(tmp_path: Path) -> None:
    header = "Datetime (UTC),Datetime (Local),Price (USD/MWh)"
    rows = [f"2021-01-01 {h:02d}:30:00+00:00,x,{10 * (h + 1)}.0" for h in range(4)]
    half_hour = load_price(write(tmp_path / "p.csv", [header, *rows]))
    assert half_hour.index[0] == ts("2021-01-01 00:00")
    np.testing.assert_allclose(half_hour.to_numpy(), [0.01, 0.02, 0.03, 0.04])

    bad = [header, *rows]
    bad[3] = "2021-01-01 01:45:00+00:00,x,5.0"  # line 4 floors onto line 3's hour (01:00)
    assert_error(write(tmp_path / "p.csv", bad), 4, "duplicated hour", loader=load_price)

    unknown = write(tmp_path / "p.csv", ["when,Price (GBP/MWh)", "2021-01-01 00:00:00,1"])
    message = assert_error(unknown, None, "Price (USD/MWh)", "Price (EUR/MWh)", loader=load_price)
    assert "found columns ['when', 'Price (GBP/MWh)']" in message


def test_price_local_time_dst_rules(tmp_path: Path) -> None:
    header = "Datetime,Price (EUR/MWh)"
    factor = EUR_TO_USD / 1000.0
    # Autumn 2023-10-29 with the repeated hour present twice: first = BST, second = GMT.
    rows = [("00:00", 1), ("01:00", 2), ("01:00", 3), ("02:00", 4)]
    twice = write(tmp_path / "twice.csv", [header, *(f"2023-10-29 {h}:00,{v}" for h, v in rows)])
    price = load_price(twice) / factor
    expected = ["2023-10-28 23:00", "2023-10-29 00:00", "2023-10-29 01:00", "2023-10-29 02:00"]
    assert price.index.tolist() == [ts(t) for t in expected]
    np.testing.assert_allclose(price.to_numpy(), [1, 2, 3, 4])
    # ... and present once: its value covers both UTC hours.
    once = write(tmp_path / "once.csv", [header, "2023-10-29 01:00:00,7", "2023-10-29 02:00:00,8"])
    price = load_price(once) / factor
    expected = ["2023-10-29 00:00", "2023-10-29 01:00", "2023-10-29 02:00"]
    assert price.index.tolist() == [ts(t) for t in expected]
    np.testing.assert_allclose(price.to_numpy(), [7, 7, 8])
    # Spring 2023-03-26: 01:00 does not exist in London; the row is dropped.
    spring = write(
        tmp_path / "spring.csv", [header, *(f"2023-03-26 0{h}:00:00,{h}" for h in range(4))]
    )
    price = load_price(spring) / factor
    expected = ["2023-03-26 00:00", "2023-03-26 01:00", "2023-03-26 02:00"]
    assert price.index.tolist() == [ts(t) for t in expected]
    np.testing.assert_allclose(price.to_numpy(), [0, 2, 3])
    # A repeated hour that is not ambiguous is an error, as is a third copy.
    dup = write(tmp_path / "dup.csv", [header, "2023-07-01 05:00:00,1", "2023-07-01 05:00:00,1"])
    assert_error(dup, 3, "duplicated timestamp", loader=load_price)
    triple = write(tmp_path / "triple.csv", [header, *["2023-10-29 01:00:00,1"] * 3])
    assert_error(triple, 4, "duplicated timestamp", loader=load_price)
    # The same wall-clock file read in another zone follows that zone's rules (CET: 01:00 on
    # 2023-10-29 is an ordinary hour, 23:00 UTC the day before).
    berlin = load_price(once, local_tz="Europe/Berlin")
    assert berlin.index[0] == ts("2023-10-28 23:00")


def test_price_gap_longer_than_a_day_is_not_filled(tmp_path: Path) -> None:
    # 03:00 .. 03:00 next day missing: 25 hours > MAX_PRICE_FILL_HOURS, left as a gap.
    header = "Datetime (UTC),Datetime (Local),Price (USD/MWh)"
    stamps = [*pd.date_range("2021-01-01", periods=3, freq="h"),
              *pd.date_range("2021-01-02 04:00", periods=2, freq="h")]  # fmt: skip
    path = write(tmp_path / "p.csv", [header, *(f"{t}+00:00,x,1.0" for t in stamps)])
    price = load_price(path)
    assert len(price) == 5 and price.attrs["filled_hours"] == 0


def test_cache_sees_a_rewritten_file(tmp_path: Path) -> None:
    path = write(tmp_path / "ci.csv", good_ci_lines())
    assert load_carbon_intensity(path)["carbon_intensity_g_per_kwh"].iloc[0] == 300.5
    lines = good_ci_lines()
    lines[1] = ci_row(0, direct="111.0")
    write(path, lines)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert load_carbon_intensity(path)["carbon_intensity_g_per_kwh"].iloc[0] == 111.0


def test_cached_frames_are_not_shared_mutably(tmp_path: Path) -> None:
    path = write(tmp_path / "ci.csv", good_ci_lines())
    first = load_carbon_intensity(path)
    first["carbon_intensity_g_per_kwh"] = 0.0
    assert load_carbon_intensity(path)["carbon_intensity_g_per_kwh"].iloc[0] == 300.5


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    row=st.integers(min_value=1, max_value=6),
    field=st.integers(min_value=0, max_value=10),
    text=st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n\x00"), max_size=12),
)
def test_any_corrupted_cell_is_a_data_format_error_or_loads(
    tmp_path: Path, row: int, field: int, text: str
) -> None:
    lines = good_ci_lines()
    parts = lines[row].split(",")
    parts[field] = text
    path = write(
        tmp_path / "fuzz.csv", [lines[0], *lines[1:row], ",".join(parts), *lines[row + 1 :]]
    )
    try:
        frame = load_carbon_intensity(path)
    except DataFormatError as err:
        assert "fuzz.csv" in str(err)
        match = re.search(r"fuzz\.csv:(\d+):", str(err))
        if match:
            assert 2 <= int(match.group(1)) <= 7
    else:
        assert len(frame) == 6


def test_region_signals_from_a_small_data_dir(tmp_path: Path) -> None:
    grid = tmp_path / "grid"
    grid.mkdir()
    (grid / "regions.csv").write_text(
        "region,description,ci_file,price_file,weather_file,timezone\n"
        'XX,"Test, region",ci.csv,price.csv.gz,weather.csv,UTC\n'
        "YY,price only,,price.csv.gz,,\n"
    )
    hours = pd.date_range("2021-01-01", periods=60, freq="h")
    write(grid / "ci.csv", [CI_HEADER, *(ci_row(0).replace("2021-01-01 00:00:00", f"{t}")
                                         for t in hours)])  # fmt: skip
    price_stamps = hours[(hours < "2021-01-01 05:00") | (hours >= "2021-01-02 06:00")]
    write(
        grid / "price.csv.gz",
        ["Datetime (UTC),Datetime (Local),Price (USD/MWh)",
         *(f"{t}+00:00,x,{i}.0" for i, t in enumerate(price_stamps))],
        gz=True,
    )  # fmt: skip
    write(grid / "weather.csv", [WEATHER_HEADER, *(f"x,{t},5.0,80,10,3.0" for t in hours)])
    assert signal_regions(tmp_path) == ("XX",)
    frame = load_region_signals(tmp_path, "XX", "2021-01-01 00:00", "2021-01-01 05:00")
    assert frame["price_usd_per_kwh"].tolist() == [0.0, 0.001, 0.002, 0.003, 0.004]
    assert frame["rh_pct"].tolist() == [80.0] * 5
    # The 25-hour price gap (05:00 .. 05:00 next day) is not filled: a window inside it fails.
    with pytest.raises(DataFormatError, match=r"price\.csv\.gz: 25 hour\(s\) of the requested"):
        load_region_signals(tmp_path, "XX", "2021-01-01", "2021-01-03")
    with pytest.raises(UnknownNameError, match=r"valid choices: XX$"):
        load_region_signals(tmp_path, "YY", "2021-01-01", "2021-01-02")


@pytest.mark.parametrize("name", ["ci.csv.gz", "ci.csv"])
def test_random_bytes_are_a_one_line_data_error(tmp_path, name):
    """A file of random bytes (not gzip, not text) names the file instead of a csv traceback."""
    path = tmp_path / name
    path.write_bytes(np.random.default_rng(7).integers(0, 256, 3000, dtype=np.uint8).tobytes())
    with pytest.raises(DataFormatError, match=r"ci\.csv(\.gz)?: not a (UTF-8 )?text CSV file"):
        load_carbon_intensity(path)
