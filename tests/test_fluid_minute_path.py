"""``sim/fluid_minute_path``: the closure's step by hand, the state carried across calls (an
epoch split in two reads as one), the ring retiring its oldest cohort when full. The model's
readouts are checked by hand through the probe's wrapper in ``tests/test_minute_backlog.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from greenroute.sim import fluid_minute_path as fmp

DT_S = 0.5
SUBSTEPS = 120


def test_count_variance_step_by_hand():
    # dV = (spread (a + c) - 2 below V / R) dt: 100 + (1.6 * 5 - 2 * 0.5 * 100 / 10) * 0.5
    assert fmp.count_variance_step(100.0, 2.0, 3.0, 0.5, 10.0, 1.6, 0.5) == pytest.approx(99.0)
    # stationary below the slots: V = spread a R (the count law's spread N)
    v = 1.6 * 2.0 * 10.0
    assert fmp.count_variance_step(v, 2.0, 2.0, 1.0, 10.0, 1.6, 0.5) == pytest.approx(v)
    # on a queue (below 0) it grows by spread (a + c) per second
    assert fmp.count_variance_step(50.0, 3.0, 2.0, 0.0, 10.0, 1.6, 0.5) == pytest.approx(54.0)


def test_normal_excess_closed_form():
    # E[(X - 1)^+] for X ~ N(1, 4): sd / sqrt(2 pi) at the mean; P = 1/2
    got, p = fmp.normal_excess(1.0, 4.0, 1.0)
    assert got == pytest.approx(2.0 / math.sqrt(2.0 * math.pi), rel=1e-12)
    assert p == pytest.approx(0.5, rel=1e-12)
    assert fmp.normal_excess(3.0, 0.0, 1.0) == (2.0, 1.0)
    assert fmp.normal_excess(0.5, 0.0, 1.0) == (0.0, 0.0)


def _run(counts, state, survival, **kw):
    args = {"servers": 2, "slots": 10, "r0": 9.0, "r1": 0.2, "n_ref": 5.0, "capacity": 2.0,
            "prefill": 0.1, "total": 1.6, "server": 0.46, "wait_full": 0.3}  # fmt: skip
    args.update(kw)
    return fmp.path_waits(np.asarray(counts, dtype=float), args["servers"], args["slots"],
                          args["r0"], args["r1"], args["n_ref"], survival, args["capacity"],
                          args["prefill"], args["total"], args["server"], args["wait_full"],
                          SUBSTEPS, True, *state)  # fmt: skip


def test_state_carries_across_calls():
    # an epoch split in two calls, the state carried, reads exactly as one call: what lets the
    # fluid run the path epoch by epoch (and fork it); a fresh state for the second half does not
    surv = np.exp(-np.arange(0.0, 300.0, DT_S) / 10.0)
    rng = np.random.default_rng(3)
    counts = rng.poisson(100.0, 40) * rng.lognormal(0.0, 0.3, 40)
    whole = _run(counts, fmp.new_state(surv), surv)
    state = fmp.new_state(surv)
    first = _run(counts[:17], state, surv)
    second = _run(counts[17:], state, surv)
    np.testing.assert_array_equal(np.r_[first, second], whole)
    fresh = _run(counts[17:], fmp.new_state(surv), surv)
    assert np.abs(fresh - whole[17:]).max() > 0.01
    assert whole.max() > 1.0  # a queue formed: the test has something to carry


def test_full_ring_retires_its_oldest_cohort():
    # a residence of 2 s on a grid of 8 points (0.5 s) and a ring of 4 x 8 cohorts: a cohort
    # is read at age + 1/2 step and dropped past the grid's last point, so at the reference
    # speed 7 are held (this step's and the 6 before) and the ring never fills; a clock slowed
    # tenfold and more (the residence r0 + r1 n with n running, against r0 at the reference)
    # keeps cohorts past the ring's 32, and the ring retires its oldest to take the new one
    surv = np.r_[np.ones(4), np.zeros(4)]
    mass, adm_at, scal = fmp.new_state(surv)
    assert mass.size == fmp.RING_FACTOR * surv.size
    fmp.path_waits(np.full(3, 60.0), 1, 1000, 2.0, 0.0, 1.0, surv, 1.0, 0.0, 0.0, 0.0, 0.0,
                   SUBSTEPS, False, mass, adm_at, scal)  # fmt: skip
    assert scal[fmp.HELD] == surv.size - 1
    mass, adm_at, scal = fmp.new_state(surv)
    fmp.path_waits(np.full(3, 60.0), 1, 1000, 2.0, 38.0, 0.0, surv, 1.0, 0.0, 0.0, 0.0, 0.0,
                   SUBSTEPS, False, mass, adm_at, scal)  # fmt: skip
    assert scal[fmp.HELD] == mass.size


def test_server_count_spread_by_hand():
    # 16 servers: 1.6 / 16 + 15 / 16 * 0.46 = 0.1 + 0.43125; one server holds the region's
    assert fmp.server_count_spread(1.6, 0.46, 16) == pytest.approx(0.53125, rel=1e-12)
    assert fmp.server_count_spread(1.6, 0.46, 1) == pytest.approx(1.6, rel=1e-12)
