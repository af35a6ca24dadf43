"""Wet-bulb temperature (Stull 2011)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from greenroute.physics.psychro import wet_bulb_stull_c

temps = st.floats(min_value=-20.0, max_value=50.0, allow_nan=False)
rhs = st.floats(min_value=5.0, max_value=99.0, allow_nan=False)


def test_stull_worked_example() -> None:
    # Stull (2011), p. 2267: T = 20 °C, RH = 50 % gives Tw = 13.7 °C.
    assert abs(float(wet_bulb_stull_c(20.0, 50.0)) - 13.7) < 0.05


def test_formula_written_out() -> None:
    # Stull eq. (1) evaluated by hand at T = 30 °C, RH = 70 %.
    t, rh = 30.0, 70.0
    expected = (
        t * np.arctan(0.151977 * (rh + 8.313659) ** 0.5)
        + np.arctan(t + rh)
        - np.arctan(rh - 1.676331)
        + 0.00391838 * rh**1.5 * np.arctan(0.023101 * rh)
        - 4.686035
    )
    assert float(wet_bulb_stull_c(t, rh)) == np.float64(expected)
    assert 25.0 < expected < 26.5  # psychrometric charts: ~25.6 °C


@given(temps, rhs)
def test_wet_bulb_not_above_dry_bulb(t: float, rh: float) -> None:
    assert float(wet_bulb_stull_c(t, rh)) <= t


@given(temps)
def test_saturation_limit(t: float) -> None:
    # At the top of the fit's RH range the wet bulb approaches the dry bulb.
    assert t - float(wet_bulb_stull_c(t, 99.0)) < 0.5


@given(temps, temps, rhs)
def test_monotone_in_temperature(t1: float, t2: float, rh: float) -> None:
    lo, hi = sorted((t1, t2))
    assert float(wet_bulb_stull_c(lo, rh)) <= float(wet_bulb_stull_c(hi, rh)) + 1e-12


@given(st.floats(min_value=5.0, max_value=50.0), rhs, rhs)
def test_monotone_in_rh_when_not_cold(t: float, rh1: float, rh2: float) -> None:
    # The fit is monotone in RH above ~4 °C (documented limitation below).
    lo, hi = sorted((rh1, rh2))
    assert float(wet_bulb_stull_c(t, lo)) <= float(wet_bulb_stull_c(t, hi)) + 1e-12


def test_rh_clipped_to_valid_range() -> None:
    assert wet_bulb_stull_c(25.0, 100.0) == wet_bulb_stull_c(25.0, 99.0)
    assert wet_bulb_stull_c(25.0, 0.0) == wet_bulb_stull_c(25.0, 5.0)


def test_broadcasts_regions_by_epochs() -> None:
    t = np.array([[10.0], [20.0], [30.0]])  # 3 regions
    rh = np.array([[40.0, 60.0, 80.0, 95.0]])  # 4 epochs
    out = wet_bulb_stull_c(t, rh)
    assert out.shape == (3, 4)
    assert out[1, 0] == wet_bulb_stull_c(20.0, 40.0)
