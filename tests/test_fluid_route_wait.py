"""The slot wait behind state-aware routers (``sim/fluid_route_wait.py``): closed forms and limits
computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from greenroute.sim import fluid_route_wait as RW
from greenroute.sim.fluid_iteration import routing
from greenroute.sim.queueing import erlang_c, mgc_wait_s


def test_remaining_work_cv_exponential_and_fixed_outputs():
    # exponential outputs (E[O^k] = k! theta^k): the remaining work is exponential, CV 1
    theta = 200.0
    assert RW.remaining_work_cv(theta, 2 * theta**2, 6 * theta**3) == pytest.approx(1.0)
    # every output O: the remaining work is uniform on (0, O), CV 1 / sqrt(3)
    o = 300.0
    assert RW.remaining_work_cv(o, o**2, o**3) == pytest.approx(1.0 / math.sqrt(3.0))


def test_route_peakedness_by_hand():
    # the composition share over N servers: 0.906 (1 - 0.512 / N^2); 2 servers 0.906 x 0.872
    assert RW.composition_share(2) == pytest.approx(0.790032, rel=1e-12)
    assert RW.composition_share(8) == pytest.approx(0.906 * 0.992, rel=1e-12)
    assert (RW.COMPOSITION_SHARE, RW.PAIR_NARROWING) == (0.906, 0.512)
    # least-loaded, two servers, remaining-work CV 1 (exponential outputs: SCV 1), no stall:
    # z = 1/2 + (1/2) 0.790032 x 1 x (1 + 1) / 2 = 0.895016
    z = RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 2, 1.0, 1.0, 0.0)
    assert z == pytest.approx(0.895016, rel=1e-12)
    # the prefill stall multiplies the pooled part only: (1.25^2) / 2 + 0.395016
    z_st = RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 2, 1.0, 1.0, 0.25)
    assert z_st == pytest.approx(1.5625 / 2.0 + 0.395016, rel=1e-12)
    # eight servers, CV 0.81, SCV 0.6 (the calibration's interactive class): 1.5 / 8 + (7/8)
    # 0.898752 x 0.6561 x 0.8 = 0.1875 + 0.412770 = 0.600270 (the engine's count spread: 0.599)
    z8 = RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 8, 0.81, 0.6, math.sqrt(1.5) - 1.0)
    assert z8 == pytest.approx(1.5 / 8 + 7 / 8 * 0.898752 * 0.81**2 * 0.8, rel=1e-12)
    assert z8 == pytest.approx(0.600270, abs=1e-6)


def test_route_peakedness_limits():
    # least-connections routes on the count itself: the pooled queue's 1 / N
    assert RW.route_peakedness(RW.ROUTE_LEAST_CONNECTIONS, 4, 0.8, 0.6, 0.2) == (
        pytest.approx(1.44 / 4.0)
    )
    # one server: nothing to choose, Poisson arrivals with the stall's overdispersion
    assert RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 1, 0.8, 0.6, 0.2) == pytest.approx(1.44)
    # many servers: the composition alone; a score that pins the count (CV 0) pools the queue
    z_many = RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 10_000, 1.5, 2.0, 0.2)
    assert z_many == pytest.approx(0.906 * 2.25 * 1.5, rel=1e-3)
    assert RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 4, 0.0, 0.6, 0.2) == pytest.approx(0.36)
    # heavier-tailed work spreads the count wider, and more servers spread it further then
    z2 = RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 2, 1.7, 1.4, 0.0)
    z8 = RW.route_peakedness(RW.ROUTE_LEAST_LOADED, 8, 1.7, 1.4, 0.0)
    assert 1.0 < z2 < z8


def test_slot_occupancy_holds_the_prompt_in_its_prefill_iteration():
    # a prefill iteration 30 % of the time: 0.3 / 0.7 = 0.42857 more slots than decodes
    assert RW.slot_occupancy(20.05, 0.3) == pytest.approx(20.05 + 0.3 / 0.7, rel=1e-12)
    assert RW.slot_occupancy(20.0, 0.0) == 20.0


def test_wait_given_full_pooled_with_the_own_server_floor():
    # 2 servers of 32 slots, 24.93 held, 2.43 arrivals/s each: a full server completes
    # mu = 32 x 2.43 / 24.93 = 3.11913/s; pooled M/M/64: 1 / (2 (3.11913 - 2.43)) = 0.72555 s
    rate = 32 * 2.43 / 24.93
    pooled = 1.0 / (2 * (rate - 2.43))
    assert pooled == pytest.approx(0.72555, abs=1e-5)
    # its own server: first completion (24.93 / 32) / mu = 0.249769 s, then the M/M/1 queue fed
    # at 0.5 x 2.43: 1.215 / (3.11913 x 1.90413) = 0.204571 s; 0.454340 s in all
    own = (24.93 / 32) / rate + 0.5 * 2.43 / (rate * (rate - 0.5 * 2.43))
    assert own == pytest.approx(0.454340, abs=1e-6)
    assert RW.wait_given_full(2, 32.0, 24.93, 2.43, 0.5) == pytest.approx(pooled, rel=1e-12)
    # 8 servers: the pooled 0.18139 s is below the own server's wait
    assert RW.wait_given_full(8, 32.0, 24.93, 2.43, 0.5) == pytest.approx(own, rel=1e-12)
    # no queue fed there: the first completion alone
    assert RW.wait_given_full(8, 32.0, 24.93, 2.43, 0.0) == pytest.approx(0.249769, abs=1e-6)
    # saturated (a full server completes no faster than its arrivals): its first completion, 1 /
    # 2.43 at n = S, with or without a queue that does not drain (the backlog takes over)
    assert RW.wait_given_full(2, 32.0, 32.0, 2.43, 0.0) == pytest.approx(1.0 / 2.43, rel=1e-12)
    assert RW.wait_given_full(2, 32.0, 32.0, 2.43, 1.0) == pytest.approx(1.0 / 2.43, rel=1e-12)


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
    ll, lc = RW.ROUTE_LEAST_LOADED, RW.ROUTE_LEAST_CONNECTIONS
    s, n, lam, scv, cv, stall = 32.0, 24.0, 2.4, 0.6, 0.8, 0.27
    mu, cs2 = 2.8, 0.5  # the saturated rate and its cycle's SCV
    pw, cond, z = RW.routed_wait(ll, 2, s, n, lam, scv, cv, stall, mu, cs2, 0.4)
    # only prompts admitted on arrival stall: z is the peakedness at stall x (1 - P(wait at z))
    assert z == pytest.approx(RW.route_peakedness(ll, 2, cv, scv, stall * (1.0 - pw)), rel=1e-7)
    lo = RW.route_peakedness(ll, 2, cv, scv, 0.0)
    hi = RW.route_peakedness(ll, 2, cv, scv, stall)
    assert lo < z < hi
    # P(wait) by Hayward at z; least-loaded's wait given waiting is the pooled one
    assert pw == pytest.approx(RW.hayward_mgs(s, n, lam, scv, z)[0], rel=1e-12)
    assert cond == pytest.approx(RW.wait_given_full(2, s, n, lam, 0.4), rel=1e-12)
    # least-connections: Hayward's P(wait) at its own peakedness, the pooled G/G/N wait
    pw_c, cond_c, z_c = RW.routed_wait(lc, 2, s, n, lam, scv, cv, stall, mu, cs2, 0.4)
    assert pw_c == pytest.approx(RW.hayward_mgs(s, n, lam, scv, z_c)[0], rel=1e-12)
    assert cond_c == pytest.approx(0.75 / (2 * 0.4), rel=1e-12)
    # no stall: the bracket is one point
    pw0, _, z0 = RW.routed_wait(ll, 2, s, n, lam, scv, cv, 0.0, mu, cs2, 0.4)
    assert z0 == pytest.approx(lo, rel=1e-12)
    assert pw0 == pytest.approx(RW.hayward_mgs(s, n, lam, scv, lo)[0], rel=1e-9)


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


def test_prefill_share_by_hand():
    ll = RW.ROUTE_LEAST_LOADED
    # as queued_prompt_share's case (sigma = 1131.37 tokens) but the handicap is the last
    # request's output only: E[O] - 1 = 199 tokens, delta = 199 / 1131.37 = 0.17589;
    # two servers: erfc(delta / 2) = 0.90102
    e_o, e_o2, n = 200.0, 2 * 200.0**2, 16.0
    sigma = 200.0 * math.sqrt(32.0)
    got = RW.prefill_share(ll, 2, n, 900.0, 900.0**2, e_o, e_o2, 1.0, 0.0)
    assert got == pytest.approx(math.erfc(199.0 / sigma / 2.0), rel=1e-9)
    assert got == pytest.approx(0.90102, abs=1e-5)
    # more servers avoid it more; least-connections: one request more in a count of spread
    # sqrt(16) = 4, erfc(0.25 / 2) = 0.85968; no router or one server: no avoidance
    assert RW.prefill_share(ll, 8, n, 900.0, 900.0**2, e_o, e_o2, 1.0, 0.0) < got
    lc = RW.prefill_share(RW.ROUTE_LEAST_CONNECTIONS, 2, n, 900.0, 900.0**2, e_o, e_o2, 1.0, 0.0)
    assert lc == pytest.approx(math.erfc(0.125), rel=1e-12)
    assert lc == pytest.approx(0.85968, abs=1e-5)
    for route, n_srv in ((RW.ROUTE_NONE, 2), (ll, 1)):
        assert RW.prefill_share(route, n_srv, n, 900.0, 900.0**2, e_o, e_o2, 1.0, 0.0) == 1.0


def test_pooled_wait_given_full_by_hand():
    # 2 servers at 2.8/s each, arrivals 2.4/s, cycle SCV 0.5: (1.5 / 2) / (2 x 0.4) = 0.9375 s
    assert RW.pooled_wait_given_full(2, 2.8, 0.5, 2.4) == pytest.approx(0.9375, rel=1e-12)
    # 8 servers: the pooled 0.75 / 3.2 = 0.234 s is below one server's mean residual cycle,
    # 0.75 / 2.8 = 0.268 s, which the arrival waits at its own server
    assert RW.pooled_wait_given_full(8, 2.8, 0.5, 2.4) == pytest.approx(0.75 / 2.8, rel=1e-12)
    # at or above saturation the epoch-level backlog takes over
    assert RW.pooled_wait_given_full(2, 2.8, 0.5, 2.8) == 0.0
