"""The minute-backlog probe's pathwise models (``bench/minute_backlog.py``), on inputs whose
answers can be worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from greenroute.bench import minute_backlog as mb

DT_S = mb.SECONDS_PER_MINUTE / mb.SUBSTEPS_PER_MINUTE


def test_lindley_wait_by_minute_hand_computed():
    # capacity 1 req/s; minute 0 brings 120: the backlog climbs 0 -> 60 s (mean 30), minute 1
    # brings none: 60 -> 0 (mean 30); minute 2 nothing; minute 3 half the capacity: nothing
    counts = np.array([120.0, 0.0, 0.0, 30.0])
    for substeps in (120, 7):
        got = mb.lindley_wait_by_minute(counts, 1.0, substeps)
        np.testing.assert_allclose(got, [30.0, 30.0, 0.0, 0.0], rtol=1e-12, atol=1e-12)


def test_lindley_empties_mid_minute():
    # 90 in minute 0 at 1 req/s: 0 -> 30 s (mean 15); then empty minute: 30 -> 0 at 30 s, the
    # triangle's area 450 s^2 over 60 s = 7.5 s, whatever the step (7 steps: it empties mid-step)
    for substeps in (120, 7, 1):
        got = mb.lindley_wait_by_minute(np.array([90.0, 0.0]), 1.0, substeps)
        np.testing.assert_allclose(got, [15.0, 7.5], rtol=1e-12)


def _exponential_survival(mean_s: float) -> np.ndarray:
    """P(R > j dt) of an exponential residence (smooth: the grid's error is O(dt^2))."""
    return np.exp(-np.arange(0.0, 30 * mean_s, DT_S) / mean_s)


def _cohort(counts, survival, servers=1, slots=10, r0=10.0, r1=0.0, n_ref=5.0, capacity=1.0,
            prefill=0.0, total=0.0, server=0.0, wait_full=0.0, state=False):  # fmt: skip
    return mb.cohort_wait_by_minute(np.asarray(counts, dtype=float), servers, slots, r0, r1,
                                    n_ref, survival, capacity, prefill, total, server, wait_full,
                                    mb.SUBSTEPS_PER_MINUTE, state)  # fmt: skip


def test_cohort_below_capacity_never_waits():
    # 10 slots, a fixed residence of 10 s: 0.5 req/s keeps 5 running
    grid = np.arange(0.0, 12.0, DT_S)
    got = _cohort(np.full(20, 30.0), (grid < 10.0).astype(float))
    assert np.all(got == 0.0)


@pytest.mark.parametrize(("r1", "prefill"), [(0.0, 0.0), (0.2, 0.0), (0.2, 0.1)])
def test_cohort_queue_grows_at_the_excess_over_the_saturated_rate(r1, prefill):
    # 20 slots over 2 servers, residence 10 s at the reference load (r0 + r1 n_ref = 10),
    # stretched to r0 + r1 slots when every slot is busy: the saturated rate is 20 / that; at
    # 3 req/s the queue, once the slots are full, grows by (3 - X) * 60 a minute, so the wait
    # (queue / capacity) by (3 - X) * 60 / capacity. The prefill stall leaves that rate alone:
    # saturated, admissions equal completions, the stationary rate the law holds (X is the
    # fixed point of X = X0 (1 - X tau / S) / (1 - X0 tau / S))
    surv, mean_r = _exponential_survival(10.0), 10.0
    n_ref, slots, servers = 5.0, 10, 2
    r0 = mean_r - r1 * n_ref
    x_sat = servers * slots / (r0 + r1 * slots)  # 2 (r1 = 0) or 1.818 req/s
    capacity = 2.0
    got = _cohort(np.full(12, 180.0), surv, servers=servers, slots=slots, r0=r0, r1=r1,
                  n_ref=n_ref, capacity=capacity, prefill=prefill)  # fmt: skip
    slope = np.diff(got[4:])
    np.testing.assert_allclose(slope, (3.0 - x_sat) * 60.0 / capacity, rtol=5e-3)


def test_cohort_prefill_stall_slows_a_filling_region():
    # a surge from 1 to 3 req/s over 20 slots (residence 10 s): while the slots fill, admissions
    # outrun the stationary rate and each prompt's prefill holds the decodes back, so fewer
    # requests complete and the queue is longer in the first minutes; saturated, the same slope
    surv = _exponential_survival(10.0)
    counts = np.r_[np.full(5, 60.0), np.full(6, 180.0)]
    kw = {"servers": 2, "slots": 10, "r0": 9.0, "r1": 0.2, "n_ref": 5.0, "capacity": 2.0}
    plain = _cohort(counts, surv, **kw)
    stalled = _cohort(counts, surv, prefill=0.1, **kw)
    assert np.all(plain[:5] == 0.0) and np.all(stalled[:5] == 0.0)
    assert stalled[5] > plain[5] + 0.1  # 14.46 against 14.20 s
    np.testing.assert_allclose(np.diff(stalled[8:]), np.diff(plain[8:]), rtol=5e-3)


def test_cohort_total_spread_reads_the_normal_excess():
    # 10 slots on one server at 0.8 req/s (8 running): no queue on the path, yet the total
    # spreads as Normal(8, 1.6 * 8) about it and an arrival meets E[(N - 10)^+] / capacity
    surv = _exponential_survival(10.0)
    got = _cohort(np.full(8, 48.0), surv, capacity=1.0, total=1.6)
    held_s = DT_S * (1.0 + np.sum(0.5 * (surv[1:-1] + surv[2:])))
    n = 0.8 * held_s
    sd = math.sqrt(1.6 * n)
    # E[(N - 10)^+] by the trapezoid rule on a fine grid (independent of the closed form)
    x = np.linspace(10.0, n + 12 * sd, 200001)
    dens = np.exp(-0.5 * ((x - n) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
    expect = float(np.sum(0.5 * ((x[1:] - 10) * dens[1:] + (x[:-1] - 10) * dens[:-1]) * np.diff(x)))
    np.testing.assert_allclose(got[3:], expect, rtol=1e-5)
    assert expect > 0.05


def test_cohort_onset_is_the_normal_count_tail():
    # no queue: the wait is P(full) * wait_full, P(full) = P(N(n, z n) > slots) at the running
    # count n = lam * mean residence per server (2 servers of 10 slots, 1.5 req/s, ~10 s)
    surv, mean_r = _exponential_survival(10.0), 10.0
    lam, servers, slots, z, w_full = 1.5, 2, 10, 0.6, 0.3
    # the server spread alone (the total's 0): z = (1 - 1 / S) server_spread
    got = _cohort(np.full(6, lam * 60), surv, servers=servers, slots=slots,
                  server=z / (1 - 1 / servers), wait_full=w_full, capacity=2.0)  # fmt: skip
    # the model's occupancy of a cohort: its admission step whole, then the survival at the
    # midpoint of each later step, linear between the grid's points: dt (1 + sum_k>=1 (G_k +
    # G_k+1) / 2) = 10.013 s here
    held_s = DT_S * (1.0 + np.sum(0.5 * (surv[1:-1] + surv[2:])))
    assert abs(held_s - mean_r) < 0.02
    n = lam * held_s / servers
    expect = 0.5 * math.erfc((slots - n) / math.sqrt(2.0 * z * n)) * w_full
    np.testing.assert_allclose(got[3:], expect, rtol=1e-6)  # settled after 2 minutes
    assert expect > 0.01  # the tail is not negligible here: the test can fail


def test_minute_sums():
    arrival = np.array([0.5, 59.9, 60.0, 125.0, 130.0])
    ttft = np.array([1.0, 3.0, np.nan, 2.0, 4.0])
    counts, served, sums = mb.minute_sums(arrival, ttft, 3)
    np.testing.assert_array_equal(counts, [2, 1, 2])
    np.testing.assert_array_equal(served, [2, 0, 2])
    np.testing.assert_allclose(sums, [4.0, 0.0, 6.0])


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--case", "nope"], "invalid choice"),
        (["--case", "d_ll75"], "single-region"),
        (["--case", "ll75", "--seeds", "0"], "--seeds must be >= 1"),
        (["--case", "ll75", "--wait-full-s", "-1"], "must be >= 0"),
        (["--case", "ll75", "--prefill-s", "-0.1"], "must be >= 0"),
    ],
)
def test_cli_rejects_bad_arguments(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        mb.main(argv)
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


def test_count_at_counts_arrived_and_not_finished():
    arrival = np.array([0.0, 1.0, 2.0, 5.0])
    finish = np.array([3.0, np.nan, 2.5, 6.0])  # the second never finishes (in flight)
    times = np.array([0.0, 1.5, 2.0, 2.7, 3.0, 5.5, 7.0])
    # at 0: the arrival at 0 not yet; 1.5: two; 2.0: the arrival at 2 not yet -> two; 2.7: the
    # third left at 2.5 -> two; 3.0: the first leaves then -> one; 5.5: one + the fourth; 7: one
    np.testing.assert_array_equal(mb.count_at(times, arrival, finish), [0, 2, 2, 2, 1, 2, 1])


def test_fluid_residence_law_passes_through_the_profiles_two_points(monkeypatch):
    # the line r0 + r1 n holds the fluid's slots at the case's load (N decodes + lam tau in
    # their prefill iteration, residence (N + lam tau) / lam) and the saturated point (S slots,
    # servers S / capacity); the survival's mean is the residence there (0.5 s grid)
    from greenroute.bench import calibration_cases as cc
    from greenroute.sim.fluid_iteration import predict

    monkeypatch.setattr(cc, "DAYS", 0.01)
    case = cc.CalibrationCase("t", "least-loaded", 0.75, servers=4)
    capacity = mb._capacity_rps(case)
    law = mb.fluid_residence_law(case, 32, capacity)
    lam = 0.75 * capacity / 4
    prof = mb.local_simulation(case.scenario(), "fluid", "iteration", case.local, 0)
    p = predict(prof.prep.service.iteration_profile(), np.array([[[lam], [0.0]]]),
                np.zeros((1, 1), dtype=np.int64), np.array([32.0]))  # fmt: skip
    n_slots = p["n"][0] + lam * p["tau"][0, 0, 0]
    assert law.n_ref == pytest.approx(n_slots, rel=1e-12)
    assert law.r0 + law.r1 * law.n_ref == pytest.approx(n_slots / lam, rel=1e-12)
    assert law.r0 + law.r1 * 32 == pytest.approx(4 * 32 / capacity, rel=1e-12)
    mean_s = (law.survival.sum() - 0.5) * 0.5  # trapezoid over the grid
    assert mean_s == pytest.approx(n_slots / lam, rel=0.005)
    assert 0.0 < law.prefill_s < p["tau"][0, 0, 0]
    # with one server's count spread z: N + d1 z N / d(N) + p / (1 - p), p = lam tau, the
    # decode step's slope d1 read off the profile's table at N by hand
    z = 0.6
    spread = mb.fluid_residence_law(case, 32, capacity, z)
    n, tau, d_n = p["n"][0], p["tau"][0, 0, 0], p["d"][0]
    table = prof.prep.service.iteration_profile().decode[0]
    d1 = table[int(n) + 1] - table[int(n)]
    share = lam * tau
    expect = n + d1 * z * n / d_n + share / (1.0 - share)
    assert spread.n_ref == pytest.approx(expect, rel=1e-12)
    assert spread.n_ref > law.n_ref  # both terms add to lam tau's share
    # its saturated point: a prefill iteration at the cap carries 31 decodes, not 32
    ratio = mb.prompt_slot_capacity_ratio(prof.prep.service.iteration_profile(), 32)
    assert 0.99 < ratio < 1.0
    assert spread.r0 + spread.r1 * 32 == pytest.approx(4 * 32 / (capacity * ratio), rel=1e-12)
    assert (spread.survival.sum() - 0.5) * 0.5 == pytest.approx(expect / lam, rel=0.005)


def _normal_excess_by_trapezoid(mean, var, level):
    sd = math.sqrt(var)
    x = np.linspace(level, mean + 12 * sd, 200001)
    dens = np.exp(-0.5 * ((x - mean) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
    f = (x - level) * dens
    return float(np.sum(0.5 * (f[1:] + f[:-1]) * np.diff(x)))


def test_cohort_carried_variance_settles_at_the_closures_fixed_point():
    # the stationary case of test_cohort_total_spread_reads_the_normal_excess, the variance
    # carried: at rest arrivals = completions = 0.8 req/s and the residence is R = 10 s, so
    # V = 1.6 * 1.6 * 10 / (2 P(N < 10)) with P from Normal(n, V) itself: a fixed point, solved
    # here by iteration, wider than the count law's 1.6 n because the slots cut the pull back
    surv = _exponential_survival(10.0)
    got = _cohort(np.full(12, 48.0), surv, capacity=1.0, total=1.6, state=True)
    held_s = DT_S * (1.0 + np.sum(0.5 * (surv[1:-1] + surv[2:])))
    n = 0.8 * held_s
    v = 1.6 * n
    for _ in range(200):
        below = 0.5 * math.erfc((n - 10.0) / math.sqrt(2.0 * v))
        v = 1.6 * (0.8 + n / 10.0) * 10.0 / (2.0 * below)
    expect = _normal_excess_by_trapezoid(n, v, 10.0)
    np.testing.assert_allclose(got[6:], expect, rtol=2e-3)
    stationary = _normal_excess_by_trapezoid(n, 1.6 * n, 10.0)
    assert expect > 1.3 * stationary  # the test can tell the two apart


def test_cohort_carried_variance_widens_a_lasting_queue():
    # 10 slots, 10 s residence (1 req/s saturated), fed 1.05 req/s: the path's queue grows by
    # about 3 a minute, while the count's randomness accumulates at 1.6 (1.05 + 1) per second on it;
    # near the slots' edge E[(N - 10)^+] is convex in the variance, so the carried wait
    # exceeds the stationary one, and the gap shrinks as the queue moves away from the edge
    surv = _exponential_survival(10.0)
    counts = np.full(30, 63.0)
    carried = _cohort(counts, surv, capacity=1.0, total=1.6, state=True)
    stationary = _cohort(counts, surv, capacity=1.0, total=1.6)
    assert np.all(carried[1:] > stationary[1:])
    gap = carried - stationary
    assert gap[-1] < gap[5]
    # far out, both read the path's queue, which grows by (1.05 - 10 / held) 60 s a minute
    # (held = the model's mean residence on its grid, 10.013 s)
    held_s = DT_S * (1.0 + np.sum(0.5 * (surv[1:-1] + surv[2:])))
    np.testing.assert_allclose(np.diff(carried[-5:]), (1.05 - 10.0 / held_s) * 60.0, rtol=2e-3)


def test_prompt_slot_capacity_ratio_by_hand():
    # a profile of one type and class, 4 slots: w(adv) = tau + (E[O] - 1 - adv) d / S with
    # tau = 0.1, E[O] = 11, d = 0.02: adv(4) = 4 gives 0.1 + 6 * 0.005 = 0.13, adv(3) = 3
    # gives 0.1 + 7 * 0.005 = 0.135; the ratio of rates is 0.13 / 0.135
    class Prof:
        tau = np.full((1, 1, 5), 0.1)
        decode = np.full((1, 5), 0.02)
        adv = np.arange(5.0).reshape(1, 1, 5)
        e_out = np.array([11.0])

    assert mb.prompt_slot_capacity_ratio(Prof, 4) == pytest.approx(0.13 / 0.135, rel=1e-12)
