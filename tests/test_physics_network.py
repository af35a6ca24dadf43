"""Great-circle distance and network latency (MARLIN eq. 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from greenroute.physics import network as net

lats = st.floats(min_value=-90.0, max_value=90.0, allow_nan=False)
lons = st.floats(min_value=-180.0, max_value=180.0, allow_nan=False)


def test_haversine_closed_forms() -> None:
    r = 6371.0088
    assert float(net.great_circle_km(10.0, 20.0, 10.0, 20.0)) == 0.0
    # Quarter meridian: pi/2 x R.
    assert float(net.great_circle_km(0.0, 0.0, 90.0, 0.0)) == pytest.approx(math.pi / 2 * r)
    # One degree of the equator: 2 pi R / 360 = 111.195 km.
    assert float(net.great_circle_km(0.0, 0.0, 0.0, 1.0)) == pytest.approx(2 * math.pi * r / 360)
    # Antipodes: pi x R.
    assert float(net.great_circle_km(0.0, 0.0, 0.0, 180.0)) == pytest.approx(math.pi * r)


def test_london_new_york() -> None:
    # Published great-circle distance London-New York ~5,570 km.
    d = float(net.great_circle_km(51.5074, -0.1278, 40.7128, -74.0060))
    assert 5540 < d < 5600


@given(lats, lons, lats, lons)
def test_symmetric_and_bounded(a: float, b: float, c: float, d: float) -> None:
    d1 = float(net.great_circle_km(a, b, c, d))
    d2 = float(net.great_circle_km(c, d, a, b))
    assert d1 == pytest.approx(d2, abs=1e-6)
    assert 0.0 <= d1 <= math.pi * 6371.0088 + 1e-6


def test_fibre_speed_constant() -> None:
    # c / 1.4682 -> 4.897 µs per km.
    s_per_km = net.FIBRE_S_PER_KM
    assert s_per_km == pytest.approx(1.4682 / 299_792.458)
    assert 4.8e-6 < s_per_km < 5.0e-6


def test_one_way_latency_by_hand() -> None:
    d = 1000.0
    propagation = 1000.0 * (1.4682 / 299_792.458) * 2.1  # 10.284 ms
    hops = 6.0 + 1000.0 / 800.0  # 7.25 hops
    expected = 1e-3 + propagation + hops * 50e-6
    assert float(net.one_way_latency_s(d)) == pytest.approx(expected, rel=1e-12)
    # Zero distance: floor + 6 base hops.
    assert float(net.one_way_latency_s(0.0)) == pytest.approx(1e-3 + 6 * 50e-6)


@given(st.floats(0, 20_000), st.floats(0, 20_000))
def test_latency_monotone_in_distance(d1: float, d2: float) -> None:
    lo, hi = sorted((d1, d2))
    assert float(net.one_way_latency_s(lo)) <= float(net.one_way_latency_s(hi))


def test_latency_matrix_shape_and_values() -> None:
    origins = np.array([[51.5, -0.13], [40.7, -74.0]])
    regions = np.array([[50.1, 8.65], [1.30, 103.86], [37.3, -121.9]])
    m = net.latency_matrix_s(origins, regions)
    assert m.shape == (2, 3)
    d = float(net.great_circle_km(40.7, -74.0, 1.30, 103.86))
    assert m[1, 1] == pytest.approx(float(net.one_way_latency_s(d)))
    # Transatlantic one way: tens of ms; TTFT uses 2 x one way (MARLIN eq. 3).
    assert 0.02 < m[1, 0] < 0.1
    assert (m > 0).all()
