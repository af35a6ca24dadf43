"""The slot wait behind state-aware routers (``sim/fluid_route_wait.py``): closed forms and limits
computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from greenroute.sim import fluid_route_wait as RW
from greenroute.sim.fluid_iteration import routing
from greenroute.sim.queueing import erlang_c, mgc_wait_s


def test_min_slope_closed_forms():
    # N = 2: int phi^2 = 1 / (2 sqrt(pi)); N = 3: 2 int phi^2 (1 - Phi) = the same (by symmetry
    # int phi^2 Phi = int phi^2 (1 - Phi) = half of int phi^2); one server: no choice
    assert RW.min_slope(2) == pytest.approx(1.0 / (2.0 * math.sqrt(math.pi)), rel=1e-9)
    assert RW.min_slope(3) == pytest.approx(1.0 / (2.0 * math.sqrt(math.pi)), rel=1e-9)
    assert RW.min_slope(1) == 0.0


def test_min_slope_four_servers_against_quadrature():
    from scipy.integrate import quad
    from scipy.stats import norm

    ref = 3.0 * quad(lambda x: norm.pdf(x) ** 2 * norm.sf(x) ** 2, -np.inf, np.inf)[0]
    assert ref == pytest.approx(0.257344, abs=1e-6)
    assert RW.min_slope(4) == pytest.approx(ref, rel=1e-8)


def test_remaining_work_cv_exponential_and_fixed_outputs():
    # exponential outputs (E[O^k] = k! theta^k): the remaining work is exponential, CV 1
    theta = 200.0
    assert RW.remaining_work_cv(theta, 2 * theta**2, 6 * theta**3) == pytest.approx(1.0)
    # every output O: the remaining work is uniform on (0, O), CV 1 / sqrt(3)
    o = 300.0
    assert RW.remaining_work_cv(o, o**2, o**3) == pytest.approx(1.0 / math.sqrt(3.0))


def test_route_peakedness_by_hand():
    h2 = RW.min_slope(2)
    # two servers, 25 running, CV 1, no stall: f = 2 h_2 5 = 5 / sqrt(pi) = 2.82095;
    # z = 1/2 + (1/2) / (1 + f) = 0.630858
    z = RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 2, h2, 25.0, 1.0, 0.0)
    assert z == pytest.approx(0.5 + 0.5 / (1.0 + 5.0 / math.sqrt(math.pi)), rel=1e-12)
    assert z == pytest.approx(0.630858, abs=1e-6)
    # the prefill stall multiplies it by (1 + rho_s)^2
    z_st = RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 2, h2, 25.0, 1.0, 0.25)
    assert z_st == pytest.approx(1.5625 * z, rel=1e-12)


def test_route_peakedness_limits():
    h4 = RW.min_slope(4)
    # least-connections routes on the count itself: the pooled queue's 1 / N
    assert RW.route_peakedness(RW.ROUTE_LEAST_CONNECTIONS, 4, h4, 25.0, 0.8, 0.2) == (
        pytest.approx(1.44 / 4.0)
    )
    # one server: nothing to choose, Poisson arrivals with the stall's overdispersion
    assert RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 1, 0.0, 25.0, 0.8, 0.2) == pytest.approx(1.44)
    # a score that says nothing about the count (CV -> infinity): random routing, z -> 1
    assert RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 2, RW.min_slope(2), 25.0, 1e9, 0.0) == (
        pytest.approx(1.0, abs=1e-8)
    )
    # more servers balance better at the same score noise
    z2 = RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 2, RW.min_slope(2), 25.0, 0.8, 0.0)
    z4 = RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 4, h4, 25.0, 0.8, 0.0)
    assert z4 < z2 < 1.0


def test_hayward_wait_at_unit_peakedness_is_allen_cunneen():
    s, n, lam, scv = 32.0, 24.0, 2.4, 0.6
    _, pw_ref, cond_ref = mgc_wait_s(np.array(lam), np.array(n / lam), np.array(scv), s)
    pw, cond = RW.hayward_mgs(s, n, lam, scv, 1.0)
    assert pw == pytest.approx(float(pw_ref), rel=1e-9)
    assert cond == pytest.approx(float(cond_ref), rel=1e-12)


def test_hayward_wait_at_one_over_n_is_the_pooled_queue():
    # z = 1/2: M/G/(2 S) with twice the arrivals and the same residence n / lam
    s, n, lam, scv = 32.0, 27.0, 2.4, 0.6
    pw, cond = RW.hayward_mgs(s, n, lam, scv, 0.5)
    assert pw == pytest.approx(float(erlang_c(np.array(2 * s), np.array(2 * n))), rel=1e-9)
    mu = lam / n
    assert cond == pytest.approx((1.0 + scv) / 2.0 / (2 * s * mu - 2 * lam), rel=1e-12)


def test_routing_table():
    from greenroute.sim import kernel as K

    codes = np.array([K.LP_LEAST_LOADED, K.LP_LEAST_CONNECTIONS, K.LP_ROUND_ROBIN,
                      K.LP_LEAST_LOADED, K.LP_PYTHON])  # fmt: skip
    g_region = np.array([0, 1, 2, 3, 4])
    g_servers = np.array([4.0, 2.0, 3.0, 1.0, 2.0])
    assert routing(codes, g_region, g_servers).tolist() == [
        [0, RW.ROUTE_LEAST_LOADED, 4],
        [0, RW.ROUTE_LEAST_CONNECTIONS, 2],
        [3, RW.ROUTE_NONE, 3],
        [1, RW.ROUTE_NONE, 1],  # least-loaded over one server: Poisson arrivals
        [0, RW.ROUTE_NONE, 2],  # a Python policy: the M/G/S wait at peakedness 1
    ]


def test_routed_wait_solves_its_fixed_point():
    h2 = RW.min_slope(2)
    s, n, lam, scv, cv, stall = 32.0, 24.0, 2.4, 0.6, 0.8, 0.27
    pw, cond, z = RW.routed_wait(RW.ROUTE_LEAST_LOADED, 2, h2, s, n, lam, scv, cv, stall)
    # only prompts admitted on arrival stall: z is the peakedness at stall x (1 - P(wait at z))
    assert z == pytest.approx(
        RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 2, h2, n, cv, stall * (1.0 - pw)), rel=1e-7
    )
    lo = RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 2, h2, n, cv, 0.0)
    hi = RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 2, h2, n, cv, stall)
    assert lo < z < hi
    assert (pw, cond) == pytest.approx(RW.hayward_mgs(s, n, lam, scv, z), rel=1e-12)
    # no stall: the bracket is one point
    pw0, cond0, z0 = RW.routed_wait(RW.ROUTE_LEAST_LOADED, 2, h2, s, n, lam, scv, cv, 0.0)
    assert z0 == pytest.approx(lo, rel=1e-12)
    assert (pw0, cond0) == pytest.approx(RW.hayward_mgs(s, n, lam, scv, lo), rel=1e-9)


def test_chosen_despite_closed_forms():
    # no handicap: the server is the least of N as often as any other (N x 1/N)
    for n_srv in (2, 3, 5):
        assert RW.chosen_despite(n_srv, 0.0) == pytest.approx(1.0, rel=1e-9)
    # N = 2: P(X1 + d < X2) = P(X2 - X1 > d) = Phi(-d / sqrt(2)), times 2
    for d in (0.7, 1.64):
        want = 2.0 * 0.5 * math.erfc(d / math.sqrt(2.0) / math.sqrt(2.0))
        assert RW.chosen_despite(2, d) == pytest.approx(want, rel=1e-9)
    assert RW.chosen_despite(1, 3.0) == 1.0  # one server: no choice


def test_chosen_despite_three_servers_against_quadrature():
    from scipy.integrate import quad
    from scipy.stats import norm

    d = 1.2
    ref = 3.0 * quad(lambda x: norm.pdf(x) * norm.sf(x + d) ** 2, -np.inf, np.inf)[0]
    assert RW.chosen_despite(3, d) == pytest.approx(ref, rel=1e-8)
    assert RW.chosen_despite(4, d) < RW.chosen_despite(3, d) < RW.chosen_despite(2, d)


def test_queued_prompt_share_by_hand():
    ll, lc = RW.ROUTE_LEAST_LOADED, RW.ROUTE_LEAST_CONNECTIONS
    # exponential outputs of mean 200: remaining work mean m1 = E[O^2] / (2 E[O]) = 200, CV 1;
    # 16 running: sigma = 200 sqrt(16 x 2) = 1131.37 tokens. A queued request adds
    # E[P] + E[O] - 1 = sigma when E[P] = sigma - 199, so delta = 1: 2 Phi(-1 / sqrt 2)
    e_o, e_o2, n = 200.0, 2 * 200.0**2, 16.0
    sigma = 200.0 * math.sqrt(32.0)
    e_p = sigma - 199.0
    got = RW.queued_prompt_share(ll, 2, n, e_p, e_p * e_p, e_o, e_o2, 1.0, 0.0)
    assert got == pytest.approx(math.erfc(0.5), rel=1e-9)  # 2 Phi(-1/sqrt2) = erfc(1/2)
    assert got == pytest.approx(0.4795, abs=1e-4)
    # a prefill iteration in progress a quarter of the time adds its prompt to the spread:
    # 0.25 E[P^2] - (0.25 E[P])^2
    e_p2 = 1.5 * e_p * e_p
    var = sigma**2 + 0.25 * e_p2 - (0.25 * e_p) ** 2
    got = RW.queued_prompt_share(ll, 2, n, e_p, e_p2, e_o, e_o2, 1.0, 0.25)
    assert got == pytest.approx(RW.chosen_despite(2, sigma / math.sqrt(var)), rel=1e-12)
    # least-connections: one request against the Poisson spread sqrt(n) of the count
    assert RW.queued_prompt_share(lc, 4, n, e_p, e_p2, e_o, e_o2, 1.0, 0.25) == pytest.approx(
        RW.chosen_despite(4, 0.25), rel=1e-12
    )
    # no state-aware router, or one server: every queued prompt is met
    assert RW.queued_prompt_share(RW.ROUTE_NONE, 2, n, e_p, e_p2, e_o, e_o2, 1.0, 0.25) == 1.0
    assert RW.queued_prompt_share(ll, 1, n, e_p, e_p2, e_o, e_o2, 1.0, 0.25) == 1.0
