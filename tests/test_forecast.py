"""Forecasters: the true EWMA (seed 001 section 5.1) and the honest blend-yesterday, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.sim.forecast import (
    DEFAULT_FORECAST,
    EWMA_ALPHA,
    EWMA_WINDOW_EPOCHS,
    FORECASTERS,
    Forecaster,
    ewma,
    ewma_weights,
)

SERIES = np.array([1.0, 2.0, 3.0, 4.0])[:, None]  # [T=4, 1]


def test_ewma_on_four_values_by_hand():
    assert (EWMA_ALPHA, EWMA_WINDOW_EPOCHS) == (0.5, 8)
    # weights of x0..x3 (oldest first): 0.0625, 0.125, 0.25, 0.5, sum 0.9375
    # (0.0625*1 + 0.125*2 + 0.25*3 + 0.5*4) / 0.9375 = 3.0625 / 0.9375 = 49/15
    assert ewma(SERIES)[0] == pytest.approx(49 / 15, rel=1e-12)
    np.testing.assert_allclose(ewma_weights(4), np.array([1, 2, 4, 8]) / 15, rtol=1e-12)
    # alpha 0.2: weights 0.2*0.8^3, 0.2*0.8^2, 0.2*0.8, 0.2 = 0.1024, 0.128, 0.16, 0.2
    # (0.1024 + 0.256 + 0.48 + 0.8) / 0.5904 = 1.6384 / 0.5904
    assert ewma(SERIES, 0.2)[0] == pytest.approx(1.6384 / 0.5904, rel=1e-12)


def test_ewma_signal_forecast_is_flat_at_the_window_average():
    f = Forecaster("ewma", ewma_window=4).signal(SERIES, 3, 3)
    # index 0 is the measured current value; every lead gets the EWMA of x0..x3
    np.testing.assert_allclose(f[:, 0], [4.0, 49 / 15, 49 / 15, 49 / 15], rtol=1e-12)
    # a window of 2 sees x2, x3 only: (0.25*3 + 0.5*4) / 0.75 = 11/3
    f2 = Forecaster("ewma", ewma_window=2).signal(SERIES, 3, 1)
    np.testing.assert_allclose(f2[:, 0], [4.0, 11 / 3], rtol=1e-12)
    # at epoch 0 only the current value is known
    f0 = Forecaster("ewma").signal(SERIES, 0, 2)
    np.testing.assert_allclose(f0[:, 0], [1.0, 1.0, 1.0], rtol=1e-12)
    # alpha 1 keeps only the newest value: persistence
    pers = Forecaster("persistence").signal(SERIES, 2, 1)
    np.testing.assert_array_equal(Forecaster("ewma", ewma_alpha=1.0).signal(SERIES, 2, 1), pers)


def test_ewma_demand_uses_past_epochs_only():
    observed = np.arange(1.0, 9.0).reshape(8, 1, 1) * np.ones((1, 2, 1))  # [T, C=2, O=1]
    expected = np.full_like(observed, 100.0)
    fc = Forecaster("ewma", ewma_window=4)
    d = fc.demand(observed, expected, 4, 2)
    # epoch 4's requests have not arrived: the EWMA of rows 0..3 = 1, 2, 3, 4 -> 49/15
    assert d.shape == (3, 2, 1)
    np.testing.assert_allclose(d, 49 / 15, rtol=1e-12)
    # before any epoch completed, the workload's expected rate is all there is
    np.testing.assert_array_equal(fc.demand(observed, expected, 0, 2), expected[:3])


def test_blend_yesterday_is_the_old_fixed_blend():
    series = np.arange(20, dtype=float)[:, None]
    f = Forecaster("blend-yesterday", epochs_per_day=2).signal(series, 3, 2)
    # 0.5 x now + 0.5 x the same epoch a day (2 epochs) earlier: h=1 -> 0.5*3 + 0.5*2 = 2.5,
    # h=2 -> 0.5*3 + 0.5*3 = 3
    assert f[:, 0].tolist() == [3.0, 2.5, 3.0]
    # ... and not a moving average: the EWMA of 0..3 is 2.125 / 0.9375 = 2.2667
    g = Forecaster("ewma", epochs_per_day=2).signal(series, 3, 2)
    assert g[1, 0] == pytest.approx((0.0625 * 0 + 0.125 * 1 + 0.25 * 2 + 0.5 * 3) / 0.9375)


def test_names_default_and_bad_parameters():
    assert DEFAULT_FORECAST == "perfect" and DEFAULT_FORECAST in FORECASTERS
    assert {"ewma", "blend-yesterday"} <= set(FORECASTERS)
    with pytest.raises(UnknownNameError, match="valid choices"):
        Forecaster("ewma-blend")
    with pytest.raises(ConfigError, match="alpha"):
        Forecaster("ewma", ewma_alpha=0.0)
    with pytest.raises(ConfigError, match="window"):
        Forecaster("ewma", ewma_window=0)


def test_result_and_manifest_state_the_forecast():
    import greenroute

    res = greenroute.run("demo", "lowest-carbon", days=1 / 24, fidelity="fluid")
    assert res.forecast == "perfect" and res.manifest["forecast"] == "perfect"
    res = greenroute.run("demo", "lowest-carbon", days=1 / 24, fidelity="fluid", forecast="ewma")
    assert res.forecast == "ewma" and res.manifest["forecast"] == "ewma"
