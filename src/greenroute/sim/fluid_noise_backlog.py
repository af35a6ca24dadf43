"""Compiled backlog that minute rate noise carries from one minute to the next in the fluid model
of iteration servers (``fluid_iteration_kernel.iteration_epoch``): Lindley's recursion over
noise periods, its stationary mean by Spitzer's identity, with lognormal increments (the minute
multiplier, ``lindley_lognormal_mean``) or Gaussian ones (``lindley_gaussian_mean``).
Checked against a direct simulation in ``tests/test_fluid_noise_backlog.py``.
"""

from __future__ import annotations

import math

from numba import njit

LINDLEY_TERMS = 4000  # as sim.queueing.lindley_gaussian_mean
_SQRT2 = math.sqrt(2.0)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


@njit(cache=True)
def lindley_lognormal_mean(u, sig, period, var_q, z, wq):
    """Stationary mean of Lindley's W' = max(0, W + X) over noise periods, X = (u m - 1)
    ``period`` + G, ``m`` a mean-one lognormal of log-sd ``sig`` (the minute rate multiplier,
    ``data.workload``), G ~ N(0, ``var_q``) independent (the queue's own randomness), by
    Spitzer's identity E[W] = sum_n E[S_n^+] / n, S_n = period (u Y_n - n) + G_n. Y_n, the sum
    of ``n`` multipliers, is taken lognormal with its exact mean ``n`` and variance ``n (e^sig^2
    - 1)`` (Fenton 1960, "The sum of log-normal probability distributions in scatter
    transmission systems", IRE Trans. Commun. Syst. 8(1): it keeps the right skew that a
    Gaussian X drops, and the backlog is made of that tail): log-variance ``s_n^2 = ln(1 +
    (e^sig^2 - 1) / n)``, and given G_n = g, as Black-Scholes' call on a lognormal,
    E[(u Y_n - K)^+] = u (n Phi(d1) - K Phi(d2)), K = n - g / period, d1 = (ln(n / K) + s_n^2
    / 2) / s_n, d2 = d1 - s_n; G_n ~ N(0, n var_q) by the Gauss-Hermite nodes ``z``/``wq``.
    0 when ``sig`` or ``u`` is 0; inf at ``u >= 1``."""
    if not sig > 0 or not u > 0:
        return 0.0
    if u >= 1.0:
        return math.inf
    ex = math.expm1(sig * sig)
    total = 0.0
    for i in range(1, LINDLEY_TERMS + 1):
        s_n = math.sqrt(math.log1p(ex / i))
        sd_g = math.sqrt(i * var_q) / period
        term = 0.0
        top = -math.inf  # d2 at the largest node: the term's tail
        for j in range(z.size):
            k = i - sd_g * z[j]  # strike, in minutes of work
            if k <= 0.0:
                term += wq[j] * (u * i - k)
                top = math.inf  # a node still past its strike: keep summing
                continue
            d1 = (math.log(u * i / k) + 0.5 * s_n * s_n) / s_n
            d2 = d1 - s_n
            top = max(top, d2)
            term += wq[j] * (
                u * i * 0.5 * math.erfc(-d1 / _SQRT2) - k * 0.5 * math.erfc(-d2 / _SQRT2)
            )
        total += term / i
        if top < -12.0:
            break
    return total * period


@njit(cache=True)
def lindley_gaussian_mean(mu, sd):
    """``sim.queueing.lindley_gaussian_mean`` for one (mu, sd): stationary mean of
    W' = max(0, W + X), X ~ N(mu, sd^2), by Spitzer's identity; 0 when negligible."""
    if not sd > 0:
        return 0.0
    if mu >= 0:
        return math.inf
    if mu / sd < -10.0:  # E[S_1^+] < 1e-23 sd: the sum is negligible
        return 0.0
    total = 0.0
    for i in range(1, LINDLEY_TERMS + 1):
        m = i * mu
        sn = math.sqrt(i) * sd
        zz = m / sn
        total += (
            sn * math.exp(-0.5 * zz * zz) / _SQRT_2PI + m * 0.5 * math.erfc(-zz / math.sqrt(2.0))
        ) / i
        if zz < -12.0:
            break
    return total
