"""Cooling plant COP versus outdoor temperature."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.physics import cooling as c

temps = st.floats(min_value=-40.0, max_value=60.0, allow_nan=False)


def test_default_parameters_by_hand() -> None:
    wc = c.WATER_COOLED
    assert wc.condensing_offset_k == pytest.approx(3.9 + 5.6 + 1.5)  # 11.0 K
    assert wc.economizer_offset_k == pytest.approx(3.9 + 1.1)  # 5.0 K
    # Carnot fractions calibrated so that AHRI-rated chillers meet ASHRAE 90.1 minimums:
    # water: 6.28 / ((6.67 + 273.15) / (29.44 + 5.6 + 1.5 - 6.67)) ≈ 0.670
    carnot_w = (6.67 + 273.15) / (29.44 + 5.6 + 1.5 - 6.67)
    fraction_w = c.WATER_COOLED_CARNOT_FRACTION
    assert fraction_w == pytest.approx((3.517 / 0.560) / carnot_w)
    assert 0.66 < fraction_w < 0.68
    # air: 2.96 / ((6.67 + 273.15) / (35 + 15 - 6.67)) ≈ 0.458
    carnot_a = (6.67 + 273.15) / (35.0 + 15.0 - 6.67)
    fraction_a = c.AIR_COOLED_CARNOT_FRACTION
    assert fraction_a == pytest.approx((10.1 / 3.412) / carnot_a)


def test_chiller_reproduces_ashrae_minimum_at_rating_point() -> None:
    # A plant with the AHRI 44 °F supply, at the wet bulb that gives 85 °F condenser water.
    plant = c.get_cooling_plant("water-cooled", chw_supply_c=6.67)
    wetbulb = 29.44 - 3.9
    assert float(c.chiller_cop(plant, 99.0, wetbulb)) == pytest.approx(3.517 / 0.560)
    air = c.get_cooling_plant("air-cooled", chw_supply_c=6.67)
    assert float(c.chiller_cop(air, 35.0, -99.0)) == pytest.approx(10.1 / 3.412)


def test_water_cooled_point_by_hand() -> None:
    # Wet bulb 20 °C: economizer water 20 + 5 = 25 °C >= return 15 + 6 = 21 °C -> m = 1.
    # Lift = 20 + 11 - 15 = 16 K; Carnot = (15 + 273.15) / 16 = 18.009; chiller = 0.670 x that.
    chiller = c.WATER_COOLED_CARNOT_FRACTION * (288.15 / 16.0)
    expected = 1.0 / (1.0 / 15.0 + 1.0 / chiller)
    assert float(c.mechanical_fraction(c.WATER_COOLED, 30.0, 20.0)) == 1.0
    assert float(c.chiller_cop(c.WATER_COOLED, 30.0, 20.0)) == pytest.approx(chiller)
    assert float(c.cop(c.WATER_COOLED, 30.0, 20.0)) == pytest.approx(expected)
    assert 6.5 < expected < 7.0


def test_partial_economizer_midpoint() -> None:
    # Wet bulb 13 °C: economizer water 18 °C, halfway between supply 15 and return 21.
    assert float(c.mechanical_fraction(c.WATER_COOLED, 20.0, 13.0)) == pytest.approx(0.5)
    lift = 13.0 + 11.0 - 15.0  # 9 K < 10 K minimum lift -> 10 K
    chiller = c.WATER_COOLED_CARNOT_FRACTION * 288.15 / max(lift, c.MIN_LIFT_K)
    assert float(c.cop(c.WATER_COOLED, 20.0, 13.0)) == pytest.approx(
        1.0 / (1.0 / 15.0 + 0.5 / chiller)
    )


def test_full_free_cooling() -> None:
    # Wet bulb <= 15 - 5 = 10 °C: only fans and pumps.
    for wb in (-20.0, 0.0, 10.0):
        assert float(c.mechanical_fraction(c.WATER_COOLED, wb + 3, wb)) == 0.0
        assert float(c.cop(c.WATER_COOLED, wb + 3, wb)) == pytest.approx(c.FANS_PUMPS_COP)
    # Air-cooled: dry bulb <= 15 - 5.6 = 9.4 °C.
    assert float(c.cop(c.AIR_COOLED, 9.4, 0.0)) == pytest.approx(c.FANS_PUMPS_COP)


def test_driving_temperatures() -> None:
    # Water-cooled follows the wet bulb only; air-cooled the dry bulb only.
    assert c.cop(c.WATER_COOLED, 10.0, 20.0) == c.cop(c.WATER_COOLED, 40.0, 20.0)
    assert c.cop(c.AIR_COOLED, 30.0, 5.0) == c.cop(c.AIR_COOLED, 30.0, 25.0)


@pytest.mark.parametrize("plant", [c.WATER_COOLED, c.AIR_COOLED], ids=["water", "air"])
@given(t1=temps, t2=temps)
def test_cop_monotone_non_increasing(plant: c.CoolingPlant, t1: float, t2: float) -> None:
    lo, hi = sorted((t1, t2))
    assert float(c.cop(plant, hi, hi)) <= float(c.cop(plant, lo, lo)) + 1e-12


@pytest.mark.parametrize("plant", [c.WATER_COOLED, c.AIR_COOLED], ids=["water", "air"])
def test_cop_continuous_and_bounded(plant: c.CoolingPlant) -> None:
    t = np.linspace(-60.0, 80.0, 140_001)  # 1 mK steps
    values = c.cop(plant, t, t)
    assert np.all(np.isfinite(values))
    assert np.all(values > 0) and np.all(values <= plant.fans_pumps_cop + 1e-12)
    assert np.max(np.abs(np.diff(values))) < 0.01  # no jumps
    assert np.all(np.diff(values) <= 1e-12)
    # extreme inputs stay bounded
    assert float(c.cop(plant, 1e6, 1e6)) > 0


def test_evaporative_fraction() -> None:
    wc = c.WATER_COOLED
    # Hybrid cooler dry when T_db + 5.6 <= 15 (T_db <= 9.4 °C), wet when >= 21 (T_db >= 15.4).
    assert float(c.evaporative_fraction(wc, 9.4, 5.0)) == 0.0
    assert float(c.evaporative_fraction(wc, 12.4, 5.0)) == pytest.approx(0.5)
    assert float(c.evaporative_fraction(wc, 15.4, 5.0)) == pytest.approx(1.0)
    assert float(c.evaporative_fraction(c.AIR_COOLED, 40.0, 30.0)) == 0.0
    always_wet = c.get_cooling_plant("water-cooled", dry_cooler_approach_k=math.inf)
    assert float(c.evaporative_fraction(always_wet, -30.0, -31.0)) == 1.0


def test_cooling_energy_and_crac_curve() -> None:
    assert float(c.cooling_energy_kwh(100.0, 4.0)) == 25.0
    # Moore et al. (2005): 0.0068 x 25^2 + 0.0008 x 25 + 0.458 = 4.728
    assert float(c.crac_cop_moore2005(25.0)) == pytest.approx(4.728)


def test_broadcast_regions_by_epochs() -> None:
    t = np.array([[5.0], [25.0]])
    wb = np.array([[0.0, 10.0, 20.0]])
    assert c.cop(c.WATER_COOLED, t, wb).shape == (2, 3)
    assert c.evaporative_fraction(c.WATER_COOLED, t, wb).shape == (2, 3)


def test_bad_plants() -> None:
    with pytest.raises(UnknownNameError):
        c.CoolingPlant(kind="immersion")
    with pytest.raises(UnknownNameError):
        c.get_cooling_plant("immersion")
    with pytest.raises(ConfigError):
        c.get_cooling_plant("water-cooled", carnot_fraction=1.5)
    with pytest.raises(ConfigError):
        c.get_cooling_plant("water-cooled", no_such_field=1.0)
