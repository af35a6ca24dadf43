"""The fixed part of the iteration fluid model's TTFT behind a state-aware router or under
minute noise (``fluid_iteration_core._fixed_parts``), on tables computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from greenroute.sim import fluid_iteration_core as IC


def test_fixed_parts_on_flat_tables_by_hand():
    # one type, one class, tables flat in n: tau = 0.14 s (E[tau^2] = tau^2), no carried
    # decodes, decode step 0.035 s, outputs of 201 tokens, 0.11 s per prompt queued ahead
    s_max, tau_s, d_s, o, ahead_s = 32, 0.14, 0.035, 201.0, 0.11
    tau = np.full((1, 1, s_max + 1), tau_s)
    lam = np.array([[[2.0]]])
    types = np.array([[0]])
    decode = np.full((1, s_max + 1), d_s)
    resid, ahead_rate, own, busy, tau2_sum, d = IC._fixed_parts(
        0, 20.0, lam, 2.0, types, tau, tau * tau, np.zeros_like(tau), decode,
        np.array([o]), np.array([[ahead_s]]), 1.0,
    )  # fmt: skip
    # the running iteration's mean age: (lam E[tau^2] + R_d d^2) / 2, R_d = lam (O - 1) / n
    assert resid == pytest.approx(0.5 * (2.0 * tau_s**2 + 2.0 * 200.0 / 20.0 * d_s**2), rel=1e-12)
    assert ahead_rate == pytest.approx(2.0 * ahead_s, rel=1e-12)
    assert own == pytest.approx(tau_s, rel=1e-12)
    assert busy == pytest.approx(2.0 * tau_s, rel=1e-12)
    assert tau2_sum == pytest.approx(2.0 * tau_s**2, rel=1e-12)
    assert d == pytest.approx(d_s, rel=1e-12)
