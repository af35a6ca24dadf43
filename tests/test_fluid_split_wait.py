"""The split-arrival pieces of the iteration fluid model (``fluid_split_chain``): the
Erlang-k overlap, the saturated cycle and the peakedness by hand, the E_k/M/1 arrival-seen
ratio against a polynomial root, and the birth-death slot wait against direct sums."""

from __future__ import annotations

import math

import numpy as np
import pytest

from greenroute.bench.calibrate import calibration_scenario, sustainable_rps
from greenroute.sim import fluid_split_chain as SC
from greenroute.sim import kernel as K
from greenroute.sim.fluid_iteration import IterationProfile, class_moments, split_order
from greenroute.sim.prepare import prepare


def test_erlang_overlap_poisson_closed_form_and_erlang2_integral():
    lam, t = 1.7, 0.14
    # Poisson: int_0^t (t - x) lam e^(-lam x) dx = t - (1 - e^(-lam t)) / lam
    assert SC.erlang_overlap(lam, t, 1) == pytest.approx(t - (1 - math.exp(-lam * t)) / lam)
    # Erlang-2 (rate 2 lam): midpoint rule on int_0^t (t - x) (2 lam)^2 x e^(-2 lam x) dx
    x = (np.arange(200_000) + 0.5) * t / 200_000
    f = (t - x) * (2 * lam) ** 2 * x * np.exp(-2 * lam * x)
    assert SC.erlang_overlap(lam, t, 2) == pytest.approx(f.sum() * t / 200_000, rel=1e-6)
    assert SC.erlang_overlap(lam, 0.0, 3) == 0.0


def test_class_moments_by_hand():
    prompt = np.array([100.0, 300.0])
    output = np.array([1.0, 2.0, 3.0])
    # E[O^3] = (1 + 8 + 27) / 3 = 12; E[P] = 200; E[P^2] = (1e4 + 9e4) / 2 = 5e4
    assert class_moments(prompt, output) == (12.0, 200.0, 50_000.0)


def test_split_order_follows_the_local_policy():
    codes = np.array([K.LP_ROUND_ROBIN, K.LP_RANDOM, K.LP_LEAST_LOADED, K.LP_ROUND_ROBIN])
    g_region = np.array([0, 0, 1, 2, 3])
    g_servers = np.array([2.0, 1.0, 4.0, 2.0, 1.0])
    # region 0 has 3 servers over two groups; round-robin over one server is Poisson
    assert split_order(codes, g_region, g_servers).tolist() == [3, 3, 1, 0, 1]


def _flat(lam, tau=0.1, tau2=0.02, d=0.02, e_out=101.0, s=32):
    """One group, one class, one model on a flat profile: prefill iteration ``tau`` (second
    moment ``tau2``), decode step ``d`` at every batch, no decode carried in a prefill."""
    n = s + 1
    return dict(
        g=0, lam=np.array([[[lam]]]), lam_tot=lam, types=np.array([[0]]),
        tau=np.full((1, 1, n), tau), tau2=np.full((1, 1, n), tau2), adv=np.zeros((1, 1, n)),
        decode=np.full((1, n), d), e_out=np.array([e_out]), s=float(s), st=1.0,
    )  # fmt: skip


def _sat_args(a):
    keys = ("g", "lam", "lam_tot", "types", "tau", "tau2", "adv", "decode", "e_out", "s", "st")
    return tuple(a[k] for k in keys)


def _tab_args(a):
    keys = ("g", "lam", "lam_tot", "types", "tau", "adv", "decode", "e_out", "s", "st")
    return tuple(a[k] for k in keys)


def test_saturated_cycle_by_hand():
    """100 decode steps of 0.02 s shared by 32 requests: 0.0625 s of decode per completion,
    after a 0.1 s prefill (variance 0.02 - 0.01): cycle 0.1625 s, variance 0.01 + 0.0625^2."""
    mu, cs2 = SC.saturated_cycle(*_sat_args(_flat(2.0)))
    assert mu == pytest.approx(1 / 0.1625, rel=1e-12)
    assert cs2 == pytest.approx((0.01 + 0.0625**2) / 0.1625**2, rel=1e-12)
    # the same rate as the chain's completion rate at the cap
    a = _flat(2.0)
    full = SC._completion_rate(32.0, True, *_tab_args(a))
    assert mu == pytest.approx(full, rel=1e-12)


def test_split_peakedness_by_hand():
    # random, cs2 0.5, stall 0.2: (1 + 0.5) / 1.5 x 1.2 x 2.2 / 2 = 1.32
    assert SC.split_peakedness(1, 0.5, 0.2) == pytest.approx(1.32, rel=1e-12)
    # round-robin over 2: (0.5 + 0.5) / 1.5 x 1.32 = 0.88; over 4 with no stall: 0.75 / 1.5
    assert SC.split_peakedness(2, 0.5, 0.2) == pytest.approx(0.88, rel=1e-12)
    assert SC.split_peakedness(4, 0.5, 0.0) == pytest.approx(0.5, rel=1e-12)


@pytest.mark.parametrize(("k", "lam", "mu"), [(2, 2.47, 2.845), (4, 2.2, 2.845), (3, 0.5, 1.0)])
def test_arrival_seen_ratio_solves_ek_m_1(k, lam, mu):
    """sigma = (k lam / (k lam + mu (1 - sigma)))^k: the root in (0, 1) of the polynomial
    sigma (k lam + mu - mu sigma)^k - (k lam)^k (the other real root is 1)."""
    a = k * lam
    poly = np.polynomial.Polynomial([a + mu, -mu]) ** k * np.polynomial.Polynomial([0, 1])
    poly -= a**k
    roots = [r.real for r in poly.roots() if abs(r.imag) < 1e-9 and 1e-9 < r.real < 1 - 1e-9]
    assert len(roots) == 1
    assert SC.arrival_seen_ratio(k, lam, mu) == pytest.approx(roots[0] / (lam / mu), rel=1e-9)
    assert SC.arrival_seen_ratio(k, lam, mu) < 1.0  # regular gaps meet the queue less often
    assert SC.arrival_seen_ratio(1, lam, mu) == 1.0  # Poisson: PASTA


def _direct_p_full(a, z, j_max=20_000):
    """P(at or above the cap) of the chain over ``j`` (``k = j z`` requests) summed state by state
    (no closed-form tail), the cap at ``s / z`` whole."""
    s, lam = a["s"], a["lam_tot"]
    args = _tab_args(a)
    mu = np.array([SC._completion_rate(min(j * z, s), j * z >= s - 1e-9, *args)
                   for j in range(1, j_max + 1)])  # fmt: skip
    lp = np.concatenate([[0.0], np.cumsum(np.log(lam / mu))])
    p = np.exp(lp - lp.max())
    p /= p.sum()
    return p[np.arange(j_max + 1) * z >= s - 1e-9].sum()


@pytest.mark.parametrize("z", [1.0, 0.8, 2.0])
def test_chain_wait_equals_the_chain_summed_state_by_state(z):
    """At a whole cap ``s / z`` (32, 40, 16 states) the closed-form tail and the interpolation
    drop out: ``P(wait)`` is the chain's mass at the cap and above; the wait given waiting is
    the G/G/1 one at the saturated rate (random: ``ca^2`` 1)."""
    a = _flat(5.2)  # 5.2 / (1 / 0.1625) = 84.5 % of the saturated rate
    mu, cs2 = SC.saturated_cycle(*_sat_args(a))
    tab = SC.chain_tables(*_tab_args(a), z, mu, cs2)
    p_wait, cond = SC.chain_wait(tab, 1.0, a["lam_tot"], a["s"], z, 1)
    assert p_wait == pytest.approx(_direct_p_full(a, z), rel=1e-9)
    assert p_wait > 0.01  # the cap is reached: the check is not vacuous
    assert cond == pytest.approx(0.5 * (1 + cs2) / (mu - 5.2), rel=1e-12)


def test_chain_wait_moves_continuously_with_the_peakedness():
    """The cap ``s / z`` is fractional: ``P(wait)`` interpolates between the caps at its floor
    and ceiling, so it rises with ``z`` and jumps nowhere (the cap at the ceiling alone fell by
    up to a fifth each time ``s / z`` crossed a whole number)."""
    a = _flat(5.2)
    mu, cs2 = SC.saturated_cycle(*_sat_args(a))
    zs = np.linspace(0.6, 1.8, 241)
    pw = np.array([SC.chain_wait(SC.chain_tables(*_tab_args(a), z, mu, cs2), 1.0, 5.2, 32.0,
                                 z, 1)[0] for z in zs])  # fmt: skip
    assert np.all(np.diff(pw) > 0)
    assert np.max(np.diff(pw)) < 0.01  # steps of 0.005 in z move P(wait) by < 1 point


def test_split_wait_solves_its_peakedness_and_applies_the_seen_ratio():
    a = _flat(5.2)
    mu, cs2 = SC.saturated_cycle(*_sat_args(a))
    stall = 0.25
    for k in (1, 2, 4):
        p_wait, cond, z = SC.split_wait(*_sat_args(a), k, stall)
        # the fixed point: z = peakedness at the stall of the prompts admitted on arrival
        tab = SC.chain_tables(*_tab_args(a), z, mu, cs2)
        p_time, _ = SC.chain_wait(tab, 1.0, 5.2, 32.0, z, 1)  # time average (no seen ratio)
        assert z == pytest.approx(SC.split_peakedness(k, cs2, stall * (1 - p_wait)), rel=1e-8)
        assert p_wait == pytest.approx(p_time * SC.arrival_seen_ratio(k, 5.2, mu), rel=1e-12)
        assert cond == pytest.approx(0.5 * (1 / k + cs2) / (mu - 5.2), rel=1e-12)
    # above the saturated rate the epoch-level backlog takes over
    assert SC.split_wait(*_sat_args(_flat(6.2)), 1, stall)[:2] == (1.0, 0.0)


@pytest.fixture(scope="module")
def profile():
    prep = prepare(calibration_scenario(1.0, 0.0, days=0.01).with_options(fidelity="fluid"), 0)
    b = prep.built
    t = int((b.server_hw * b.n_models + b.server_model0)[0])
    return IterationProfile(b, *prep.service.samples), t


def test_split_wait_saturated_rate_is_one_over_w(profile):
    """At the cap every completion admits one prompt: the completion rate is 1 / w, the
    sustainable rate of ``bench.calibrate`` (2 servers), whatever the arrival rate."""
    prof, t = profile
    for lam in (1.0, 2.5):
        args = (np.array([[[lam], [0.0]]]), lam, np.array([[t]]), prof.tau, prof.adv,
                prof.decode.astype(float), prof.e_out, 32.0, 1.0)  # fmt: skip
        mu = SC._completion_rate(32.0, True, 0, *args)
        assert 2 * mu == pytest.approx(sustainable_rps(), rel=1e-12)
        sat = (0, *args[:4], prof.tau2, *args[4:])
        assert SC.saturated_cycle(*sat)[0] == pytest.approx(mu, rel=1e-12)


def test_bracketed_secant_step_by_hand():
    from greenroute.sim.fluid_iteration_core import bracketed_secant

    # F(z) = 2 - z: the secant through (3, -1) and (1.5, 0.5) lands on the root, inside the
    # bracket that z = 1.5 (F > 0) shrinks to [1.5, 3]
    assert bracketed_secant(1.5, 0.5, 3.0, -1.0, 1.0, 3.0) == (2.0, 1.5, 3.0)
    # a secant outside the shrunk bracket [1, 1.5] (F(1.5) < 0) falls back to its midpoint
    assert bracketed_secant(1.5, -0.1, 1.2, -0.4, 1.0, 3.0) == (1.25, 1.0, 1.5)
