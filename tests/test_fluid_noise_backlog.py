"""The minute-noise backlog of the fluid iteration model (``fluid_noise_backlog.
lindley_lognormal_mean``): Lindley's recursion W' = max(0, W + X) over minutes, X = (u m - 1) T +
G with m a mean-one lognormal rate multiplier and G ~ N(0, var_q), mean by Spitzer's identity
with Fenton-Wilkinson lognormal sums. Checked against a direct simulation of the recursion."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit

from greenroute.sim import fluid_noise_backlog as NB

PERIOD_S = 60.0  # one noise period (a minute)
GH_NODES = 9  # as fluid.NOISE_NODES


def _gh():
    z, w = np.polynomial.hermite_e.hermegauss(GH_NODES)
    return z, w / w.sum()


@njit(cache=True)
def _simulate(u, sig, period, sd_q, n, seed):
    """Batch means (64 batches) of W over ``n`` minutes of the recursion, after a burn-in."""
    np.random.seed(seed)
    w = 0.0
    burn = n // 10
    batches = np.zeros(64)
    per = (n - burn) // 64
    for i in range(n):
        m = math.exp(sig * np.random.standard_normal() - 0.5 * sig * sig)
        w = max(0.0, w + (u * m - 1.0) * period + sd_q * np.random.standard_normal())
        j = (i - burn) // per
        if i >= burn and j < 64:
            batches[j] += w / per
    return batches


@pytest.mark.parametrize(
    ("u", "sig", "var_q"),
    [
        (0.85, 0.125 * math.sqrt(1 - 1 / 15), 0.0),  # the noise alone
        # u 0.85, 2 pooled servers of w = 0.351 s: var_q = u T w / 2 x (1 - 1/15)
        (0.85, 0.125 * math.sqrt(1 - 1 / 15), 0.85 * 60 * 0.351 / 2 * (1 - 1 / 15)),
        (0.75, 0.125, 0.0),
        (0.95, 0.2126, 5.0),  # the demo's noise, near saturation
    ],
)
def test_backlog_matches_the_simulated_recursion(u, sig, var_q):
    z, wq = _gh()
    got = NB.lindley_lognormal_mean(u, sig, PERIOD_S, var_q, z, wq)
    b = _simulate(u, sig, PERIOD_S, math.sqrt(var_q), 4_000_000, 7)
    mean, se = b.mean(), b.std(ddof=1) / math.sqrt(b.size)
    # Fenton-Wilkinson's lognormal sum is an approximation: 2 % of the mean or 4 standard errors
    assert abs(got - mean) <= max(0.02 * mean, 4 * se), (got, mean, se)


def test_lognormal_backlog_is_heavier_than_the_gaussian_one():
    """The right skew of the multiplier is what the backlog is made of: at the same mean and
    variance of X a Gaussian increment gives a smaller backlog (0.263 vs 0.384 minutes of work
    in the helper's Monte Carlo at u 0.848, docs/fluid_iteration_gap.md)."""
    z, wq = _gh()
    u, sig = 0.85, 0.125
    ln = NB.lindley_lognormal_mean(u, sig, PERIOD_S, 0.0, z, wq)
    sd = u * math.sqrt(math.expm1(sig * sig)) * PERIOD_S
    gauss = NB.lindley_gaussian_mean((u - 1.0) * PERIOD_S, sd)
    assert ln > 1.2 * gauss > 0


def test_backlog_limits():
    z, wq = _gh()
    assert NB.lindley_lognormal_mean(0.85, 0.0, PERIOD_S, 3.0, z, wq) == 0.0
    assert NB.lindley_lognormal_mean(1.0, 0.1, PERIOD_S, 0.0, z, wq) == math.inf
    # more queue noise, more backlog
    lo = NB.lindley_lognormal_mean(0.9, 0.1, PERIOD_S, 0.0, z, wq)
    hi = NB.lindley_lognormal_mean(0.9, 0.1, PERIOD_S, 20.0, z, wq)
    assert hi > lo > 0
