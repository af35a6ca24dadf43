"""Bring-your-own region (issue 7): a row in a data directory's ``grid/regions.csv`` plus its
three hourly files is all a new region needs; the catalog itself is never changed."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from greenroute.catalog import REGIONS
from greenroute.core.errors import ConfigError, DataFormatError, UnknownNameError
from greenroute.data.grid_loaders import load_region_signals
from greenroute.data.regions import data_dir_regions, get_region
from greenroute.data.workload import WorkloadSpec
from greenroute.physics.network import latency_matrix_s
from greenroute.sim.cluster import uniform_cluster
from greenroute.sim.prepare import cluster_info, prepare
from greenroute.sim.scenario import Scenario

NEW = "FR-IDF"
SOURCE = "DE-LU"  # its three files are copied under the new key
START = pd.Timestamp("2023-01-09", tz="UTC")
HEADER = ("region,description,electricitymaps_zone_id,ci_file,price_file,price_market,"
          "weather_file,weather_city,weather_lat,weather_lon,timezone")  # fmt: skip
FILES = {
    "ci_file": f"carbon_intensity/{NEW}_2021-2024_hourly.csv.gz",
    "price_file": f"electricity_prices/{NEW}_2021-2024_usd_per_mwh.csv.gz",
    "weather_file": f"weather/{NEW}_2021-2024_hourly.csv.gz",
}


def _row(tz: str = "Europe/Paris") -> str:
    return (f"{NEW},France - Paris,FR,{FILES['ci_file']},{FILES['price_file']},EPEX,"
            f"{FILES['weather_file']},Paris,48.8566,2.3522,{tz}")  # fmt: skip


def _make_data_dir(shared: Path, dst: Path, rows: list[str]) -> Path:
    """regions.csv with ``rows`` and the source region's three files under the new key."""
    index = pd.read_csv(shared / "grid" / "regions.csv").set_index("region")
    for col, rel in FILES.items():
        (dst / "grid" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared / "grid" / index.loc[SOURCE, col], dst / "grid" / rel)
    (dst / "grid" / "regions.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    return dst


def _scenario(regions=(NEW,)) -> Scenario:
    n = len(regions)
    spec = WorkloadSpec(origins=regions, origin_timezones=("Europe/Paris",) * n,
                        interactive_rps=(5.0,) * n, deferrable_rps=(1.0,) * n)  # fmt: skip
    return Scenario("byo", "one new region", regions, regions, uniform_cluster(regions, 1), spec,
                    START, days=0.25, fidelity="fluid")  # fmt: skip


@pytest.mark.realdata
def test_a_regions_csv_row_is_enough(data_dir, tmp_path):
    dd = _make_data_dir(data_dir, tmp_path, [_row()])
    reg = get_region(NEW, dd)
    assert (reg.lat_deg, reg.lon_deg, reg.timezone, reg.city) == (48.8566, 2.3522, "Europe/Paris",
                                                                   "Paris")  # fmt: skip
    prep = prepare(_scenario(), data_dir=dd)
    assert prep.signals.source == "real"
    # the new region's coordinates are those of its row
    np.testing.assert_array_equal(cluster_info(prep).region_latlon, [[48.8566, 2.3522]])
    # its signals are the copied files': DE-LU's carbon intensity, hour by hour
    want = load_region_signals(data_dir, SOURCE, START, START + pd.Timedelta(hours=6))
    np.testing.assert_array_equal(
        prep.signals.carbon_intensity_g_per_kwh[: 6 * 4 : 4, 0],
        want["carbon_intensity_g_per_kwh"].to_numpy(),
    )
    # the manifest records the files and regions.csv (the row holds coordinates and time zone)
    assert f"grid/{FILES['ci_file']}" in prep.input_files
    assert "grid/regions.csv" in prep.input_files
    # the catalog is untouched: the region exists only for this data directory
    assert NEW not in REGIONS
    with pytest.raises(UnknownNameError):
        get_region(NEW)


@pytest.mark.realdata
def test_two_regions_latency_uses_the_rows_coordinates(data_dir, tmp_path):
    """A second new region 1 degree of longitude east: the network latency between them is
    the great-circle distance of their rows' coordinates (not zero, not a catalog city's)."""
    east = _row().replace(NEW, "FR-EST").replace("2.3522", "3.3522")
    dd = _make_data_dir(data_dir, tmp_path, [_row(), east])
    for rel in FILES.values():
        shutil.copyfile(dd / "grid" / rel, dd / "grid" / rel.replace(NEW, "FR-EST"))
    regs = data_dir_regions(dd)
    assert sorted(regs) == ["FR-EST", NEW]
    prep = prepare(_scenario((NEW, "FR-EST")), data_dir=dd)
    coords = np.array([[48.8566, 2.3522], [48.8566, 3.3522]])
    np.testing.assert_array_equal(prep.latency_s, latency_matrix_s(coords, coords))
    assert prep.latency_s[0, 1] > prep.latency_s[0, 0]


@pytest.mark.realdata
def test_without_the_row_the_error_lists_catalog_and_data_dir_regions(data_dir, tmp_path):
    dd = _make_data_dir(data_dir, tmp_path, [_row().replace(NEW, "FR-OTHER")])
    with pytest.raises(UnknownNameError) as ei:
        prepare(_scenario(), data_dir=dd)
    msg = str(ei.value)
    assert repr(NEW) in msg and "FR-OTHER" in msg and "DE-LU" in msg


@pytest.mark.realdata
def test_bad_rows_name_file_and_line(data_dir, tmp_path):
    dd = _make_data_dir(data_dir, tmp_path, [_row(tz="Paris")])
    with pytest.raises(DataFormatError) as ei:
        get_region(NEW, dd)
    assert "regions.csv:2" in str(ei.value) and "'Paris' is not an IANA time zone" in str(ei.value)
    price_only = f"{NEW},France (price only),,,{FILES['price_file']},EPEX,,,,,"
    dd2 = _make_data_dir(data_dir, tmp_path / "b", [price_only])
    with pytest.raises(ConfigError, match="has no ci_file, weather_file"):
        get_region(NEW, dd2)
