"""Corrections applied on top of the shared data files (documented in data/grid_loaders.py)."""

from __future__ import annotations

import gzip

import pandas as pd
import pytest

from greenroute.data.grid_loaders import AUD_TO_USD, load_region_signals


@pytest.mark.realdata
@pytest.mark.parametrize("region", ["AU-NSW", "AU-VIC"])
def test_au_prices_converted_from_aud(region, data_dir):
    path = data_dir / "grid" / "electricity_prices" / f"{region}_2021-2024_usd_per_mwh.csv.gz"
    with gzip.open(path, "rt") as fh:
        raw = pd.read_csv(fh, nrows=30)
    row = raw.iloc[24]  # 2021-01-02 00:00 UTC
    t = pd.Timestamp(row["Datetime (UTC)"])
    sig = load_region_signals(data_dir, region, t, t + pd.Timedelta(hours=1))
    expect = row["Price (USD/MWh)"] / 1000.0 * AUD_TO_USD
    assert sig["price_usd_per_kwh"].iloc[0] == pytest.approx(expect, rel=1e-9)


@pytest.mark.realdata
def test_other_regions_untouched(data_dir):
    t = pd.Timestamp("2021-01-01 00:00", tz="UTC")
    sig = load_region_signals(data_dir, "DE-LU", t, t + pd.Timedelta(hours=1))
    assert sig["price_usd_per_kwh"].iloc[0] == pytest.approx(53.375509199999996 / 1000.0)
