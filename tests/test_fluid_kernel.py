"""The compiled fluid step's building blocks against the numpy/scipy functions they replace
(greenroute.sim.fluid_kernel vs sim.fluid and sim.queueing)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import gammaincc

from greenroute.sim import fluid as FL
from greenroute.sim import fluid_kernel as FK
from greenroute.sim.queueing import erlang_c

# a grid of orders and arguments spanning the series and continued-fraction branches
ORDERS = (1.0, 2.5, 5.0, 17.3, 33.0, 64.0, 204.6)
RATIOS = (0.05, 0.3, 0.7, 0.9, 0.98, 1.0, 1.3, 3.0)


@pytest.mark.parametrize("a", ORDERS)
def test_gammaincc_matches_scipy(a):
    for x in (0.0, *(r * a for r in RATIOS)):
        want = float(gammaincc(a, x))
        assert FK.gammaincc(a, x) == pytest.approx(want, rel=1e-12, abs=1e-300)


def test_gammaincc_known_values():
    # Q(1, x) = exp(-x); Q(3, x) = exp(-x) (1 + x + x^2 / 2)
    for x in (0.1, 1.0, 4.0, 30.0):
        assert FK.gammaincc(1.0, x) == pytest.approx(np.exp(-x), rel=1e-13)
        assert FK.gammaincc(3.0, x) == pytest.approx(np.exp(-x) * (1 + x + x * x / 2), rel=1e-13)


def test_erlang_c_matches_numpy_and_closed_form():
    for c in (1.0, 4.0, 32.0, 204.6):
        for rho in (0.0, 0.2, 0.6, 0.95, 1.0, 1.2):
            a = rho * c
            assert FK.erlang_c(c, a) == pytest.approx(float(erlang_c(c, a)), rel=1e-12)
    # M/M/1: P(wait) = rho; M/M/2 at a = 1: C = 1/3
    assert FK.erlang_c(1.0, 0.4) == pytest.approx(0.4, rel=1e-13)
    assert FK.erlang_c(2.0, 1.0) == pytest.approx(1.0 / 3.0, rel=1e-13)


def test_noise_wait_matches_numpy():
    z, w = np.polynomial.hermite_e.hermegauss(FL.NOISE_NODES)
    w = w / w.sum()
    rng = np.random.default_rng(7)
    n = 400
    rho = rng.uniform(0.0, 1.2, n)
    sigma = rng.uniform(0.0, 0.4, n)
    es = rng.uniform(0.0, 20.0, n)
    scv = rng.uniform(0.0, 3.0, n)
    cq = rng.uniform(0.5, 250.0, n)
    pw, cond = FL.noise_averaged_wait(rho, sigma, es, scv, cq, z, w)
    for i in range(n):
        p, c = FK.noise_wait(rho[i], sigma[i], es[i], scv[i], cq[i], z, w,
                             FL.RHO_MAX_STABLE, FL.NOISE_PERIOD_S)  # fmt: skip
        assert p == pytest.approx(pw[i], rel=1e-11, abs=1e-300)
        assert c == pytest.approx(cond[i], rel=1e-11, abs=1e-300)


def test_fluid_wait_and_zero_fraction_match_numpy():
    rng = np.random.default_rng(3)
    b0 = rng.choice([0.0, 1.0, 50.0, 1e4], 200) * rng.random(200)
    slope = rng.normal(0.0, 20.0, 200)
    cap = rng.choice([0.0, 10.0, 6400.0], 200)
    dt = 900.0
    want_w = FL._fluid_wait_mean(b0, slope, cap, dt)
    want_z = FL._zero_frac(b0, slope, dt)
    for i in range(200):
        assert FK.fluid_wait_mean(b0[i], slope[i], cap[i], dt) == want_w[i]
        assert FK.zero_frac(b0[i], slope[i], dt) == want_z[i]
    # closed form: a backlog of 900 slot-s draining at 1 slot-s/s over a 900 s epoch with
    # 1 slot: mean wait = mean backlog / capacity = 450 s, empty at the very end only
    assert FK.fluid_wait_mean(900.0, -1.0, 1.0, 900.0) == pytest.approx(450.0)
    assert FK.zero_frac(900.0, -1.0, 900.0) == 0.0
    assert FK.zero_frac(450.0, -1.0, 900.0) == pytest.approx(0.5)


def test_noise_nodes_match_numpy_per_node():
    z, w = np.polynomial.hermite_e.hermegauss(FL.NOISE_NODES)
    w = w / w.sum()
    rng = np.random.default_rng(11)
    for _ in range(300):
        u, sig = rng.uniform(0.0, 1.1), rng.uniform(0.0, 0.3)
        es, scv, cq = rng.uniform(0.05, 20.0), rng.uniform(0.0, 3.0), rng.uniform(1.0, 250.0)
        (p0, pw0, c0), _ = FL.noise_averaged_wait(
            np.array([u]), np.array([sig]), np.array([es]), np.array([scv]), np.array([cq]),
            z, w, per_node=True,
        )  # fmt: skip
        p, pw, c = np.empty(z.size), np.empty(z.size), np.empty(z.size)
        FK.noise_nodes(u, sig, es, scv, cq, z, w, FL.RHO_MAX_STABLE, FL.NOISE_PERIOD_S, p, pw, c)
        np.testing.assert_allclose(p, p0, rtol=1e-15, atol=0)
        np.testing.assert_allclose(pw, pw0, rtol=1e-11, atol=1e-300)
        np.testing.assert_allclose(c, c0, rtol=1e-11, atol=1e-300)
