"""Server power and the MARLIN p-state energy (eq. 4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from greenroute.physics.power import (
    HOST_IDLE_FRACTION,
    ServerPower,
    pstate_energy_kwh,
    server_power_w,
)


def test_linear_power_by_hand() -> None:
    assert float(server_power_w(0.0, 100.0, 300.0)) == 100.0
    assert float(server_power_w(0.25, 100.0, 300.0)) == 100.0 + 200.0 * 0.25
    assert float(server_power_w(1.0, 100.0, 300.0)) == 300.0
    # Utilisation is clipped to [0, 1].
    assert float(server_power_w(-0.5, 100.0, 300.0)) == 100.0
    assert float(server_power_w(1.7, 100.0, 300.0)) == 300.0


@given(st.floats(0, 1), st.floats(0, 1))
def test_monotone_in_utilisation(u1: float, u2: float) -> None:
    lo, hi = sorted((u1, u2))
    assert float(server_power_w(lo, 50.0, 400.0)) <= float(server_power_w(hi, 50.0, 400.0))


def test_for_gpus_a100_by_hand() -> None:
    # DGX-A100: 6,500 W server TDP, 8 GPUs of 400 W -> host share (6500 - 3200)/8 = 412.5 W.
    host = (6500.0 - 8 * 400.0) / 8
    assert host == 412.5
    sp = ServerPower.for_gpus("a100-80gb", 4)
    assert HOST_IDLE_FRACTION == 0.5
    assert sp.idle_w == pytest.approx(4 * (63.0 + 0.5 * host))  # 1,077 W
    assert sp.peak_w == pytest.approx(4 * (250.0 + host))  # 2,650 W


def test_for_gpus_h100_by_hand() -> None:
    host = (10200.0 - 8 * 700.0) / 8  # 575 W
    sp = ServerPower.for_gpus("h100-80gb", 8)
    assert sp.idle_w == pytest.approx(8 * (75.0 + 0.5 * host))  # 2,900 W
    assert sp.peak_w == pytest.approx(8 * (380.0 + host))  # 7,640 W
    assert float(sp.power_w(0.5)) == pytest.approx((2900.0 + 7640.0) / 2)


def test_for_gpus_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        ServerPower.for_gpus("a100-80gb", 0)
    with pytest.raises(KeyError):
        ServerPower.for_gpus("tpu-v5", 1)


def test_pstate_energy_eq4() -> None:
    # PC = 0.5 of a 400 W TDP for one hour: 0.5 x 400 W x 3600 s / 3.6e6 J/kWh = 0.2 kWh.
    assert float(pstate_energy_kwh(0.5, 400.0, 3600.0)) == pytest.approx(0.2)
    # 15-minute epoch, DGX-H100 at 70 %: 0.7 x 10200 x 900 / 3.6e6 = 1.785 kWh.
    assert float(pstate_energy_kwh(0.7, 10200.0, 900.0)) == pytest.approx(1.785)
