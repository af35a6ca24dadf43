"""Water: evaporation, blowdown, Li et al.'s WUE and grid EWIF."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from greenroute.core.errors import UnknownNameError
from greenroute.physics import water as w
from greenroute.physics.psychro import wet_bulb_stull_c

L_PER_KWH_GAS = 300 * 3.785411784 / 1000  # 1.13562 L/kWh
L_PER_KWH_COAL = 450 * 3.785411784 / 1000  # 1.70344 L/kWh
L_PER_KWH_NUCLEAR = 600 * 3.785411784 / 1000  # 2.27125 L/kWh


def test_latent_heat_constant() -> None:
    # 2429.8 kJ/kg at 30 °C (steam tables); sanity range 2.40-2.46 MJ/kg for 15-40 °C.
    assert w.LATENT_HEAT_VAPORIZATION_J_PER_KG == 2_429_800.0


def test_evaporation_by_hand() -> None:
    # 1 kWh = 3.6e6 J; / 2.4298e6 J/kg = 1.48160 kg; / 0.99565 kg/L = 1.48808 L.
    one = 3.6e6 / 2_429_800.0 / 0.99565
    assert float(w.evaporation_l(1.0, 1.0)) == pytest.approx(one)
    assert 1.48 < one < 1.49
    assert float(w.evaporation_l(10.0, 0.85)) == pytest.approx(10.0 * 0.85 * one)
    assert float(w.evaporation_l(10.0, 0.0)) == 0.0


def test_blowdown_by_hand() -> None:
    assert float(w.blowdown_l(100.0)) == pytest.approx(100.0 / (6 - 1))  # 20 L at CoC 6
    assert float(w.blowdown_l(100.0, 3.0)) == pytest.approx(50.0)
    with pytest.raises(ValueError):
        w.blowdown_l(100.0, 1.0)


def test_wue_li2023_by_hand() -> None:
    # Twb = 20 °C = 68 °F: 6e-5 x 68^3 - 0.01 x 68^2 + 0.61 x 68 - 10.4
    #   = 18.86592 - 46.24 + 41.48 - 10.4 = 3.70592; x 6/5 = 4.447104 L/kWh.
    assert float(w.wue_li2023_l_per_kwh(20.0)) == pytest.approx(3.70592 * 1.2)
    # Twb = -10 °C = 14 °F: polynomial negative -> clipped to 0.05.
    assert float(w.wue_li2023_l_per_kwh(-10.0)) == 0.05
    # cycles = 3: x 3/2 instead of x 6/5.
    assert float(w.wue_li2023_l_per_kwh(20.0, cycles=3)) == pytest.approx(3.70592 * 1.5)


def test_ewif_pure_mixes() -> None:
    # All renewable (EWIF 0 in the ren_glb2023 set, hydro included).
    assert float(w.ewif_l_per_kwh(0.0, 100.0, 100.0)) == 0.0
    # All nuclear: 600 gal/MWh.
    assert float(w.ewif_l_per_kwh(0.0, 100.0, 0.0)) == pytest.approx(L_PER_KWH_NUCLEAR)
    # All fossil at the gas emission factor (440 g/kWh) -> all gas; at 968 -> all coal.
    assert float(w.ewif_l_per_kwh(440.0, 0.0, 0.0)) == pytest.approx(L_PER_KWH_GAS)
    assert float(w.ewif_l_per_kwh(968.0, 0.0, 0.0)) == pytest.approx(L_PER_KWH_COAL)
    # Fossil emission factor outside [gas, coal] is clipped.
    assert float(w.ewif_l_per_kwh(300.0, 0.0, 0.0)) == pytest.approx(L_PER_KWH_GAS)
    assert float(w.ewif_l_per_kwh(1200.0, 0.0, 0.0)) == pytest.approx(L_PER_KWH_COAL)


def test_ewif_mixed_by_hand() -> None:
    # CI 300 g/kWh, low-carbon 40 %, renewable 25 %: fossil 60 %, nuclear 15 %, renewable 25 %.
    # Fossil EF = 300 / 0.6 = 500 g/kWh -> coal share (500 - 440) / (968 - 440) = 0.113636.
    coal = (500.0 - 440.0) / (968.0 - 440.0)
    fossil_ewif = coal * L_PER_KWH_COAL + (1 - coal) * L_PER_KWH_GAS
    expected = 0.6 * fossil_ewif + 0.15 * L_PER_KWH_NUCLEAR + 0.25 * 0.0
    assert float(w.ewif_l_per_kwh(300.0, 40.0, 25.0)) == pytest.approx(expected)


def test_ewif_broadcasts_and_rejects_unknown_set() -> None:
    out = w.ewif_l_per_kwh(np.array([[100.0], [500.0]]), np.array([[10.0, 50.0, 90.0]]), 5.0)
    assert out.shape == (2, 3)
    with pytest.raises(UnknownNameError):
        w.ewif_l_per_kwh(300.0, 40.0, 25.0, factor_set="macknick2012_default")


@given(st.floats(0, 1000), st.floats(0, 100), st.floats(0, 100), st.floats(0, 1000))
def test_ewif_bounds(ci: float, low: float, ren: float, ci2: float) -> None:
    e = float(w.ewif_l_per_kwh(ci, low, ren))
    assert 0.0 <= e <= L_PER_KWH_NUCLEAR + 1e-12
    # More fossil CI (same mix) never lowers the EWIF (coal uses more water than gas).
    lo, hi = sorted((ci, ci2))
    assert float(w.ewif_l_per_kwh(lo, low, ren)) <= float(w.ewif_l_per_kwh(hi, low, ren)) + 1e-12


@pytest.mark.realdata
def test_factor_constants_equal_csv(data_dir: Path) -> None:
    df = pd.read_csv(data_dir / "water" / "ewif_by_fuel.csv")
    ren = df[df["factor_set"] == "ren_glb2023"]
    ewif = ren[ren["metric"] == "ewif_consumption"]
    carbon = ren[ren["metric"] == "carbon_intensity"]
    assert set(ewif["fuel"]) == set(w.EWIF_REN_GLB2023_GAL_PER_MWH)
    assert set(carbon["fuel"]) == set(w.CARBON_REN_GLB2023_KG_PER_KWH)
    for row in ewif.itertuples():
        assert row.unit == "gal/MWh"
        assert w.EWIF_REN_GLB2023_GAL_PER_MWH[row.fuel] == float(row.value)
        # the CSV's L/kWh column is rounded to 4 decimals
        assert w.EWIF_REN_GLB2023_GAL_PER_MWH[row.fuel] * w.GAL_PER_MWH_TO_L_PER_KWH == (
            pytest.approx(float(row.value_L_per_kWh), abs=1e-4)
        )
    for row in carbon.itertuples():
        assert row.unit == "kgCO2/kWh"
        assert w.CARBON_REN_GLB2023_KG_PER_KWH[row.fuel] == float(row.value)


@pytest.mark.realdata
def test_order_of_magnitude_against_ren_glb(data_dir: Path) -> None:
    """Qualitative check only: Li et al.'s on-site WUE from our weather + our EWIF from the
    Electricity Maps CI columns, over the same hours, against Ren GLB's total water factor.

    The sites differ (e.g. Ren's "Virginia" vs our PJM zone with Philadelphia weather) and
    their off-site factor comes from EIA fuel mixes, not from CI, so the formulas themselves
    are checked by hand above; here the band is what the two sources support. Measured over
    the 457 shared hours (2022-09-22 onwards): ours / theirs = 0.794 (PJM), 0.869 (ERCOT),
    0.843 (DE-LU), 0.916 (SG); ours is lower everywhere. The band 0.75-1.0 catches, e.g.,
    dropping the off-site term (PJM: (4.743 - 1.526) / 5.975 = 0.54) or the CoC/(CoC-1) = 6/5
    factor of the on-site WUE (PJM: (3.217 / 1.2 + 1.526) / 5.975 = 0.70), which a factor of 2
    would not."""
    pairs = {
        "US-MIDA-PJM": "Virginia",
        "US-TEX-ERCO": "Texas",
        "DE-LU": "Germany",
        "SG": "Singapore",
    }
    for region, site in pairs.items():
        ci = pd.read_csv(
            data_dir / "grid" / "carbon_intensity" / f"{region}_2021-2024_hourly.csv.gz"
        )
        ci["t"] = pd.to_datetime(ci["Datetime (UTC)"])
        wx = pd.read_csv(data_dir / "grid" / "weather" / f"{region}_2021-2024_hourly.csv.gz")
        wx["t"] = pd.to_datetime(wx["datetime_utc"])
        ren = pd.read_csv(data_dir / "water" / "ren_glb_2022" / "water" / f"{site}_water.csv")
        ren["t"] = pd.to_datetime(ren["Time (UTC)"], format="%Y-%m-%d %H")
        m = ren.merge(ci, on="t").merge(wx, on="t")
        assert len(m) > 400
        ewif = w.ewif_l_per_kwh(
            m["Carbon Intensity gCO₂eq/kWh (direct)"],
            m["Low Carbon Percentage"],
            m["Renewable Percentage"],
        )
        wb = wet_bulb_stull_c(m["temperature_2m_C"], m["relative_humidity_2m_pct"])
        ours = float(np.mean(w.wue_li2023_l_per_kwh(wb) + ewif))
        theirs = float(m[" WUE (L/kWh)"].mean())
        assert 0.75 < ours / theirs < 1.0, (region, ours, theirs)
