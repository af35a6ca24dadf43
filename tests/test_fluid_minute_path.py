"""``sim/fluid_minute_path``: the closure's step by hand, the state carried across calls (an
epoch split in two reads as one), the ring retiring its oldest cohort when full. The model's
readouts are checked by hand through the probe's wrapper in ``tests/test_minute_backlog.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from greenroute.sim import fluid_minute_path as fmp
from greenroute.sim.fluid_path_noise import read_steps

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


def _pieces(counts, surv, free_share=0.0, merge_grid=0.0, state=None):
    """``path_pieces`` over minutes on 16 x 24 slots, the residence law 7 + 0.15 n s (10 s at 20
    held per server); returns ``(waits, chance to wait, state)``."""
    counts = np.asarray(counts, dtype=float)
    state = fmp.new_state(surv) if state is None else state
    waits, pwait = np.zeros(counts.size), np.zeros(counts.size)
    # the grid scaled as the fluid scales it: the mean residence as read is the law's exactly
    grid = 1.0 / read_steps(surv, surv.size)
    fmp.path_pieces(counts, np.full(counts.size, 60.0), DT_S, 16, 24, 7.0, 0.15, surv, grid,
                    50.0, 0.1, 1.6, 0.46, 0.3, True, free_share, merge_grid, *state, waits,
                    pwait)  # fmt: skip
    return waits, pwait, state


SURV_10S = np.exp(-np.arange(0.0, 8.0, DT_S / 10.0))  # exponential residence, mean 10 s


def test_flat_count_by_hand():
    # N = 32 (7 + 0.15 N / 16): N = 224 / (1 - 0.3) = 320 at 32 req/s over 16 servers
    assert fmp.flat_count(32.0, 16, 7.0, 0.15) == pytest.approx(320.0, rel=1e-12)
    assert fmp.flat_count(200.0, 16, 7.0, 0.15) == np.inf  # no flat state: it queues


def test_a_free_minute_reads_the_flat_state_and_the_ring_rebuilds_from_it():
    # minutes holding 70 % of the slots are read off the flat state, not stepped (free below
    # 90 %): the readout the stepped model settles at; a busy minute after them is stepped
    # from the ring the flat state gives, and reads as the fully stepped model within 1 %
    n_light = 0.7 * 384  # the flat count at N / (7 + 0.15 N / 16) req/s
    light = n_light / (7.0 + 0.15 * n_light / 16) * 60.0  # arrivals a minute
    counts = np.r_[np.full(10, light), 1.5 * light, np.full(4, light)]
    stepped, _, _ = _pieces(counts, SURV_10S)
    free, p_free, state = _pieces(counts, SURV_10S, free_share=0.9)
    n_flat = fmp.flat_count(light / 60.0, 16, 7.0, 0.15)
    assert 0.69 * 384 < n_flat < 0.9 * 384
    z = fmp.server_count_spread(1.6, 0.46, 16)
    want = fmp.readout(n_flat, fmp.flat_variance(n_flat, 1.6, 384), 0.0, 16, 24, z, 50.0, 0.3)
    assert want[0] > 1e-4  # a readout that is not nothing
    assert free[3] == want[0] and p_free[3] == want[1]
    # the stepped model settles there: 0.0024 s, deep in the readout's tail, where a tenth of a
    # request held moves it 2.5 % (the stepped flat count is that close to the law's)
    assert free[3] == pytest.approx(stepped[3], rel=0.05)
    assert stepped[10] > 10 * stepped[3]  # the busy minute is what matters
    assert free[10] == pytest.approx(stepped[10], rel=0.01)
    assert state[2][fmp.WARM] == pytest.approx(light / 60.0)  # it ended on a free minute


def test_merged_cohorts_keep_the_flat_count():
    # admissions merged into cohorts up to 3 grid steps old (about 7 steps each), read at their
    # mean admission time plus the second-order term of its spread: the flat state still holds
    # N = rate x mean residence (320 at 32 req/s), so the wait at it is the unmerged one within
    # 0.5 % (the mean alone read it 3 % low: the survival is convex)
    counts = np.full(30, 32.0 * 60.0)
    w_fine, _, fine = _pieces(counts, SURV_10S)
    w_merged, _, state = _pieces(counts, SURV_10S, merge_grid=3.0)
    assert state[2][fmp.HELD] < 0.25 * fine[2][fmp.HELD]  # far fewer cohorts to walk
    assert w_merged[-1] == pytest.approx(w_fine[-1], rel=0.005)


def test_flat_variance_is_the_closures_fixed_point():
    # far below the slots the count law's spread N; near them V = spread N / P(N < slots)
    assert fmp.flat_variance(100.0, 1.6, 384) == pytest.approx(160.0, rel=1e-12)
    n = 358.4
    v = fmp.flat_variance(n, 1.6, 384)
    below = 0.5 * math.erfc((n - 384) / math.sqrt(2.0 * v))
    assert v == pytest.approx(1.6 * n / below, rel=1e-8)
    assert v > 1.15 * 1.6 * n
    # the closure's step leaves it where it is (arrivals = completions = N / R)
    r = 10.0
    assert fmp.count_variance_step(v, n / r, n / r, below, r, 1.6, 0.5) == pytest.approx(v)
