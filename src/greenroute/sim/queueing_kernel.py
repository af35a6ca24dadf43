"""Compiled (numba) queueing primitives of the fluid model, one queue at a time: the
regularised incomplete gamma function, Erlang C, the noise-averaged M/G/c wait
(``sim.fluid.noise_averaged_wait``), the fluid backlog wait, and numpy's summation order.

Same formulas, in the same order, as the numpy versions in ``sim/fluid.py`` and
``sim/queueing.py`` (checked by ``tests/test_fluid_kernel.py``). Erlang C needs the
regularised upper incomplete gamma function at real order; it is computed here (series below
``x < a + 1``, Lentz continued fraction above, as in Numerical Recipes §6.2) to about 1e-14
relative, where the numpy path uses ``scipy.special.gammaincc``.
"""

from __future__ import annotations

import math

from numba import njit

_EPS = 2.220446049250313e-16  # float64 machine epsilon: series / fraction convergence
_TINY = 1e-300  # Lentz's guard against division by zero
_MAX_ITER = 10_000


@njit(cache=True)
def gammaincc(a: float, x: float) -> float:
    """Regularised upper incomplete gamma Q(a, x) for a > 0, x >= 0."""
    if x <= 0.0:
        return 1.0
    log_pre = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:  # P(a, x) by its series; Q = 1 - P
        ap = a
        term = 1.0 / a
        total = term
        for _ in range(_MAX_ITER):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * _EPS:
                break
        return 1.0 - total * math.exp(log_pre)
    b = x + 1.0 - a  # Q(a, x) by its continued fraction (modified Lentz)
    c = 1.0 / _TINY
    d = 1.0 / b
    h = d
    for i in range(1, _MAX_ITER):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < _TINY:
            d = _TINY
        c = b + an / c
        if abs(c) < _TINY:
            c = _TINY
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return math.exp(log_pre) * h


@njit(cache=True)
def erlang_c(c: float, a: float) -> float:
    """``sim.queueing.erlang_c`` for one (servers, offered load) pair."""
    if not (a < c and c > 0.0):
        return 1.0
    safe_a = a if a > 0.0 else 1.0
    log_pmf = c * math.log(safe_a) - safe_a - math.lgamma(c + 1.0)
    cdf = gammaincc(c + 1.0, safe_a)
    b = math.exp(log_pmf) / cdf if a > 0.0 else 0.0
    if math.isnan(b):
        b = 1.0
    b = min(max(b, 0.0), 1.0)
    pc = c * b / (c - a * (1.0 - b))
    if math.isnan(pc):
        pc = 1.0
    return min(max(pc, 0.0), 1.0)


@njit(cache=True)
def _noise_node(rho, sigma, es, scv, cq, zk, rho_max, period_s):
    """One Gauss-Hermite node of ``noise_averaged_wait``: (rate multiplier, P(wait), mean
    wait given waiting) with ``cq`` already at least 1."""
    mult = math.exp(sigma * zk - 0.5 * sigma**2)
    raw = rho * mult
    rho_k = min(raw, rho_max)
    lam = rho_k * cq / max(es, 1e-12)
    a = lam * es
    pw = erlang_c(cq, a)
    mu = 1.0 / es if es > 0.0 else math.inf
    denom = cq * mu - lam
    cond = (1.0 / denom if denom > 0.0 else math.inf) * (1.0 + scv) / 2.0
    if not lam > 0.0:
        pw = 0.0
        cond = 0.0
    over = raw > rho_max
    if over:
        pw = 1.0
    if not math.isfinite(cond):
        cond = 0.0
    if over:
        cond += (raw - rho_max) * period_s / 2.0
    return mult, pw, cond


@njit(cache=True)
def noise_wait(rho, sigma, es, scv, cq, z, w, rho_max, period_s):
    """``sim.fluid.noise_averaged_wait`` for one queue: (P(wait), mean wait given waiting)."""
    cq = max(cq, 1.0)
    p_sum = 0.0
    pw_sum = 0.0
    pwc_sum = 0.0
    for k in range(z.size):
        mult, pw, cond = _noise_node(rho, sigma, es, scv, cq, z[k], rho_max, period_s)
        p = w[k] * mult
        p_sum += p
        pw_sum += p * pw
        pwc_sum += p * pw * cond
    pw_mean = pw_sum / p_sum
    cond_mean = (pwc_sum / p_sum) / pw_mean if pw_mean > 0 else 0.0
    if not math.isfinite(cond_mean):
        cond_mean = 0.0
    return pw_mean, cond_mean


@njit(cache=True)
def noise_nodes(rho, sigma, es, scv, cq, z, w, rho_max, period_s, p, pw, cond):
    """``noise_averaged_wait(..., per_node=True)`` for one queue, written into ``p`` (node
    probabilities, normalised as numpy sums), ``pw`` and ``cond`` [K]."""
    cq = max(cq, 1.0)
    for k in range(z.size):
        mult, pw[k], cond[k] = _noise_node(rho, sigma, es, scv, cq, z[k], rho_max, period_s)
        p[k] = w[k] * mult
    total = numpy_sum(p, z.size)
    for k in range(z.size):
        p[k] = p[k] / total


@njit(cache=True)
def numpy_sum(a, n):
    """``a[:n].sum()`` exactly as numpy computes it for a contiguous float64 vector of at most
    128 elements: a plain loop below 8, else eight interleaved partial sums combined as a tree,
    then the remainder (numpy's ``pairwise_sum``; the reduction starts from 0.0)."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[i]
        return 0.0 + res
    r0, r1, r2, r3 = a[0], a[1], a[2], a[3]
    r4, r5, r6, r7 = a[4], a[5], a[6], a[7]
    i = 8
    while i < n - (n % 8):
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[i]
        i += 1
    return 0.0 + res


@njit(cache=True)
def fluid_wait_mean(b0, slope, cap, dt):
    """``sim.fluid._fluid_wait_mean`` for one queue."""
    cap = max(cap, 1e-12)
    end = b0 + slope * dt
    t_empty = min(max(-b0 / slope, 0.0), dt) if slope < 0 else dt
    area = (b0 + max(end, 0.0)) / 2.0 * dt if end >= 0 else b0 * t_empty / 2.0
    return area / dt / cap


@njit(cache=True)
def zero_frac(b0, slope, dt):
    """``sim.fluid._zero_frac`` for one queue."""
    if slope > 0:
        return 0.0
    if b0 <= 0:
        return 1.0
    t_empty = min(max(-b0 / slope, 0.0), dt) if slope < 0 else dt
    return (dt - t_empty) / dt
