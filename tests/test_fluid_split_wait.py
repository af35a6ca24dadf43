"""The split-arrival pieces of the iteration fluid model (``fluid_split_chain``): the
Erlang-k overlap, the peakedness term and the birth-death slot wait against direct sums."""

from __future__ import annotations

import math

import numpy as np
import pytest

from greenroute.bench.calibrate import calibration_scenario, sustainable_rps
from greenroute.sim import fluid_split_chain as SC
from greenroute.sim import kernel as K
from greenroute.sim.fluid_iteration import IterationProfile, min_pair_mean, split_order
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


def test_min_pair_mean_is_the_mean_over_all_ordered_pairs():
    x = np.array([3.0, 1.0, 7.0, 7.0, 2.0])
    brute = np.minimum(x[:, None], x[None, :]).mean()
    assert min_pair_mean(x) == pytest.approx(brute, rel=1e-12)
    assert min_pair_mean(np.full(4, 5.0)) == 5.0  # deterministic: mu int Gbar^2 = 1


def test_split_order_follows_the_local_policy():
    codes = np.array([K.LP_ROUND_ROBIN, K.LP_RANDOM, K.LP_LEAST_LOADED, K.LP_ROUND_ROBIN])
    g_region = np.array([0, 0, 1, 2, 3])
    g_servers = np.array([2.0, 1.0, 4.0, 2.0, 1.0])
    # region 0 has 3 servers over two groups; round-robin over one server is Poisson
    assert split_order(codes, g_region, g_servers).tolist() == [3, 3, 1, 0, 1]


@pytest.fixture(scope="module")
def profile():
    prep = prepare(calibration_scenario(1.0, 0.0, days=0.01).with_options(fidelity="fluid"), 0)
    b = prep.built
    t = int((b.server_hw * b.n_models + b.server_model0)[0])
    return IterationProfile(b, *prep.service.samples), t


def _direct_chain(prof, t, lam, z, s=32, j_max=20_000):
    """The birth-death chain of ``split_wait`` summed state by state (no closed-form tail)."""
    args = (np.array([[[lam], [0.0]]]), lam, np.array([[t]]), prof.tau, prof.adv,
            prof.decode.astype(float), prof.e_out, float(s), 1.0)  # fmt: skip
    mu = np.array([SC._completion_rate(min(j * z, s), j * z >= s, 0, *args)
                   for j in range(1, j_max + 1)])  # fmt: skip
    lp = np.concatenate([[0.0], np.cumsum(np.log(lam / mu))])
    p = np.exp(lp - lp.max())
    p /= p.sum()
    k = np.arange(j_max + 1) * z
    waiting = (p * np.maximum(k - s, 0.0)).sum()
    return p[k >= s].sum(), waiting / lam


@pytest.mark.parametrize("z", [1.0, 0.71, 0.56])
def test_split_wait_equals_the_chain_summed_state_by_state(profile, z):
    prof, t = profile
    lam = 0.85 * sustainable_rps() / 2  # per server
    p_ref, w_ref = _direct_chain(prof, t, lam, z)
    lam_gcm = np.array([[[lam], [0.0]]])
    dec = prof.decode.astype(float)
    p_wait, cond = SC.split_wait(
        0, lam_gcm, lam, np.array([[t]]), prof.tau, prof.adv, dec, prof.e_out, 32.0, 1.0, z
    )
    assert p_wait == pytest.approx(p_ref, rel=1e-9)
    assert p_wait * cond == pytest.approx(w_ref, rel=1e-9)
    assert p_wait > 0.01  # at 85 % the cap is reached: the check is not vacuous


def test_split_wait_saturated_rate_is_one_over_w(profile):
    """At the cap every completion admits one prompt: the completion rate is 1 / w, the
    sustainable rate of ``bench.calibrate`` (2 servers), whatever the arrival rate."""
    prof, t = profile
    for lam in (1.0, 2.5):
        args = (np.array([[[lam], [0.0]]]), lam, np.array([[t]]), prof.tau, prof.adv,
                prof.decode.astype(float), prof.e_out, 32.0, 1.0)  # fmt: skip
        mu = SC._completion_rate(32.0, True, 0, *args)
        assert 2 * mu == pytest.approx(sustainable_rps(), rel=1e-12)
