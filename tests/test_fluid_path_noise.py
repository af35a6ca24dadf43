"""``sim/fluid_path_noise``: the output and residence survivals by hand, the flat path settling
at the model's stationary wait (so the noise part of a flat epoch is nothing), a busy minute
raising the epoch's wait, and the group's minutes in its origins' proportions."""

from __future__ import annotations

import numpy as np
import pytest

from greenroute.sim import fluid_path_noise as fpn


def test_output_survival_by_hand():
    # outputs 1, 2, 2, 5: O - 1 = 0, 1, 1, 4; P(O - 1 > k) for k = 0..5
    sf = fpn.output_survival([np.array([1, 2, 2, 5]), np.array([3])])
    np.testing.assert_allclose(sf[0], [0.75, 0.25, 0.25, 0.25, 0.0, 0.0])
    np.testing.assert_allclose(sf[1], [1.0, 1.0, 0.0, 0.0, 0.0, 0.0])


def _law(**kw) -> np.ndarray:
    row = np.zeros(fpn.N_LAW)
    vals = {"ON": 1.0, "LAM": 1.0, "NOCC": 10.0, "R0": 8.0, "R1": 0.2, "PREFILL": 0.1,
            "PT": 0.05, "AMP": 1.6, "SERVER": 0.46, "WFULL": 0.3, "PW": 0.02, "COND": 0.3,
            "SHARE0": 1.0, "TAU0": 0.2, "TAU1": 0.0}  # fmt: skip
    vals.update(kw)
    for k, v in vals.items():
        row[getattr(fpn, "L_" + k)] = v
    return row


def test_residence_survival_by_hand():
    # one class: R = 0.2 + (O - 1) 0.05 s, mean residence NOCC / LAM = 10 s; outputs O - 1 in
    # {0, 100, 300} equally: R = 0.2, 5.2, 15.2 s, R / 10 = 0.02, 0.52, 1.52
    sf = fpn.output_survival([np.array([1, 101, 301])])
    surv = np.zeros(64)
    n = fpn.residence_survival(sf, _law(), 0.25, surv)
    x = np.arange(n) * 0.25
    want = np.where(x < 0.02, 1.0, 0.0) + np.where(x < 0.52, 1, 0) + np.where(x < 1.52, 1, 0)
    # x = 0 reads y = -4 < 0: all three; beyond, P(O - 1 > y) = steps at 100 and 300 tokens
    want = np.where(x <= 0.0, 3.0, (x < 0.52).astype(float) * 2 + (x >= 0.52) * (x < 1.52))
    np.testing.assert_allclose(surv[:n], want / 3.0)
    assert surv[n - 1] == 0.0


SF = fpn.output_survival([np.random.default_rng(0).geometric(1 / 200.0, 20_000)])
# 16 servers x 24 slots at 22.4 held per server (93 % of the slots: above the free pieces'
# share, so every minute is stepped), mean residence 10 s
LAM = 2.24  # per server, req/s
R1 = 0.15
LAW = _law(LAM=LAM, NOCC=22.4, R1=R1, R0=10.0 - R1 * 22.4, PT=9.8 / 199.0, TAU0=0.2)
FLAT_PER_MIN = LAM * 16 * 60.0


def _epoch(pieces, n_int=None, state=None):
    """One epoch of ``pieces[p, o]`` (minutes) on 16 x 24 slots: ``(pw cond, state)``."""
    pieces = np.asarray(pieces, dtype=np.float32)
    if pieces.ndim == 1:
        pieces = pieces[:, None]
    n_min = pieces.shape[0]
    n_int = np.ones((1, pieces.shape[1], 1)) if n_int is None else n_int
    state = fpn.new_path_state(1) if state is None else state
    pw, cond = np.zeros(1), np.zeros(1)
    fpn.path_epoch(LAW[None, :].copy(), np.array([16.0]), np.array([24.0]), pieces,
                   np.full(n_min, 60.0), 0, n_min, n_int, 60.0 * n_min, SF, *state, pw,
                   cond)  # fmt: skip
    return float(pw[0] * cond[0]), state


def test_flat_path_settles_at_the_stationary_wait():
    # a flat path's mean wait converges to ``stationary_wait`` at its rate, so a flat epoch
    # adds no noise part: the epoch's wait is the fluid's stationary one (PW x COND)
    surv = np.zeros(fpn.SURVIVAL_POINTS_MAX)
    n_pts = fpn.residence_survival(SF, LAW, fpn.PATH_STEP_S / 10.0, surv)
    mean_x = (surv[:n_pts].sum() - 0.5) * fpn.PATH_STEP_S / 10.0
    assert mean_x == pytest.approx(1.0, rel=0.01)  # the residence's mean is the law's
    w_flat, _ = fpn.stationary_wait(LAW, 16.0, 24.0)
    assert w_flat > 0.005  # something to settle at
    stationary = LAW[fpn.L_PW] * LAW[fpn.L_COND]
    first, state = _epoch(np.full(60, FLAT_PER_MIN))
    # from an empty region the first minutes read less
    assert first == pytest.approx(stationary, abs=0.05 * w_flat)
    second, _ = _epoch(np.full(60, FLAT_PER_MIN), state=state)
    assert second == pytest.approx(stationary, abs=0.01 * w_flat)


def test_a_busy_minute_raises_the_epochs_wait():
    flat, _ = _epoch(np.full(15, FLAT_PER_MIN))
    # the same epoch total, a third of it in minute 7: the slots fill, a queue forms
    busy = np.full(15, FLAT_PER_MIN * 10.0 / 14.0)
    busy[7] = FLAT_PER_MIN * 5.0
    got, _ = _epoch(busy)
    assert got > flat + 1.0


def test_group_minutes_follow_their_origins():
    # two origins, the group gets only origin 1's interactive requests: its minutes are origin
    # 1's shape, whatever origin 0 does
    flat = np.full((15, 2), 100.0)
    burst = flat.copy()
    burst[3, 0] = 5000.0
    n_int = np.zeros((1, 2, 1))
    n_int[0, 1, 0] = 10.0
    assert _epoch(flat, n_int)[0] == _epoch(burst, n_int)[0]
    # routed from origin 0 instead, the burst shows
    n_int[0, :, 0] = [10.0, 0.0]
    assert _epoch(burst, n_int)[0] > _epoch(flat, n_int)[0] + 1.0
