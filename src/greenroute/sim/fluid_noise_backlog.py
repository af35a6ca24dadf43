"""Compiled backlog that minute rate noise carries from one minute to the next in the fluid model
of iteration servers (``fluid_iteration_kernel.iteration_epoch``): Lindley's recursion over
noise periods by Spitzer's identity (``lookback_lindley``): each epoch's minutes
conditioned on its realised count, windows that look back over the epochs before,
arrival-weighted within the minute, with the share of arrivals that meet a backlog; and how an
arrival's wait combines that backlog with the slot wait (``wait_with_backlog``: the larger of
the two, not their sum). Checked against direct simulations in
``tests/test_fluid_noise_backlog.py``, which also keeps the stationary backlog at one rate that
it replaced (``lindley_lognormal_mean``, the model until 2026-11-27) as a yardstick.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from greenroute.sim.fluid_minute_path import normal_excess

_SQRT2 = math.sqrt(2.0)

LOOKBACK_TOL_SD = 8.0  # a window whose mean is this many bounding sds below 0 ends the series
LOOKBACK_NEGLIGIBLE_S = 1e-5  # a history whose busiest single minute backs up less: no backlog
# Gauss-Legendre nodes on [0, 1] (weights 1/2): the time average over a minute
GL2_X = (0.5 - 0.5 / math.sqrt(3.0), 0.5 + 0.5 / math.sqrt(3.0))


@njit(cache=True)
def _skewed_call(mean, var, k3, strike, v_g, z, wq):
    """``(E[(Y - strike + G)^+], P(Y - strike + G > 0))``: Y of the given mean, variance and
    third cumulant ``k3``, taken as a shifted lognormal (``k3 > 0``) or a reflected one (``k3 <
    0``) of that skewness (three-parameter moment matching: skewness (w + 2) sqrt(w - 1) of a
    lognormal with w = e^(s^2)), so Black-Scholes' call or put; Gaussian when ``k3`` is 0.
    G ~ N(0, ``v_g``) by the Gauss-Hermite nodes ``z``/``wq``."""
    if v_g <= 0.01 * var:  # G too small to need its own nodes: folded into Y's variance
        var += v_g
        v_g = 0.0
    sq = math.sqrt(v_g)
    n_q = z.size if v_g > 0.0 else 1
    gam = abs(k3) / var**1.5 if var > 0.0 else 0.0
    if gam < 1e-9:
        return normal_excess(mean, var + v_g, strike)
    # y = sqrt(w - 1) solves y^3 + 3 y = gam (Cardano: one real root)
    r = math.sqrt(0.25 * gam * gam + 1.0)
    y = (0.5 * gam + r) ** (1.0 / 3.0) - (r - 0.5 * gam) ** (1.0 / 3.0)
    s2 = math.log1p(y * y)
    s = math.sqrt(s2)
    m_l = math.sqrt(var) / y  # the lognormal's mean: its variance m_l^2 y^2 is var
    term = 0.0
    prob = 0.0
    for q in range(n_q):
        kk = strike - sq * z[q] if n_q > 1 else strike
        wt = wq[q] if n_q > 1 else 1.0
        if k3 > 0.0:  # Y = mean - m_l + L: a call on L at strike kk - (mean - m_l)
            kl = kk - (mean - m_l)
            if kl <= 0.0:
                term += wt * (m_l - kl)
                prob += wt
                continue
            d1 = (math.log(m_l / kl) + 0.5 * s2) / s
            p2 = 0.5 * math.erfc(-(d1 - s) / _SQRT2)
            term += wt * (m_l * 0.5 * math.erfc(-d1 / _SQRT2) - kl * p2)
            prob += wt * p2
        else:  # Y = mean + m_l - L: a put on L at strike mean + m_l - kk
            kp = mean + m_l - kk
            if kp <= 0.0:
                continue
            d1 = (math.log(m_l / kp) + 0.5 * s2) / s
            p2 = 0.5 * math.erfc((d1 - s) / _SQRT2)
            term += wt * (kp * p2 - m_l * 0.5 * math.erfc(d1 / _SQRT2))
            prob += wt * p2
    return term, prob


@njit(cache=True)
def lookback_lindley_mean(hu, hv, sig, period, k, z, wq):
    """The mean of ``lookback_lindley``."""
    return lookback_lindley(hu, hv, sig, period, k, z, wq)[0]


@njit(cache=True)
def lookback_lindley(hu, hv, sig, period, k, z, wq):
    """``(mean, share)``: the arrival-weighted mean over the current epoch's ``k`` minutes of
    the minute-to-minute backlog: W = max(0, max_n S_n) at a minute's end, S_n the sum of the
    last ``n`` minutes' X = (u m - 1) ``period`` + G, with the utilisation ``hu[j]`` and the
    queue's own per-minute variance ``hv[j]`` (s^2) of the epoch ``j`` back (0 the current
    one), ``m`` a mean-one lognormal of log-sd ``sig`` (iid per minute, ``data.workload``), G
    Gaussian.

    * At the minutes' ends, Spitzer's series E[W] = sum_n E[S_n^+] / n (exact for iid steps)
      over look-back windows that reach into earlier epochs: near saturation the backlog relaxes
      over tens of minutes, so an epoch's own stationary backlog at its realised rate (the
      model until 2026-11-27) averages the backlog's convexity over the epochs' rates as if
      each settled (85 %, sigma 0.2126: 4.1 s against 3.2 s simulated).
    * Each epoch's minutes are conditioned on its realised total (the fluid's counts): ``t`` of
      its ``k`` minutes deviate from ``t`` times its mean by D = sum_i a_i x_i (a_i = 1 - t/k
      for the ``t``, -t/k for the rest; x_i the minutes' iid deviations), so D's variance is
      ``t (k - t) / k`` times a minute's and its third cumulant ``t (1 - t/k)^3 - (k - t)
      (t/k)^3`` times a minute's (none for whole epochs, none at t = k/2). The window's sum is
      taken as a shifted or reflected lognormal with those three cumulants (``_skewed_call``).
    * Within a minute the backlog is W0 + f X (f the minute's elapsed share, clipped at 0), and
      a minute of multiplier ``m`` brings ``m`` times the arrivals: the mean an arrival meets is
      E[m avg_f (W0 + f X)^+] / E[m], W0 independent of the minute's own X (log-sd ``sig sqrt(1
      - 1/k)`` about the epoch's rate). W0 is taken as an atom at 0 of Sparre Andersen's mass
      P(W = 0) = exp(-sum_n P(S_n > 0) / n) and an exponential above it with the series' mean.

    Against a simulation of the minutes fed each epoch's realised rate
    (``tests/test_fluid_noise_backlog.py``): within +5 %; the boundary values alone read 3-5 %
    low and the within-minute weighting adds 10 % at sigma 0.2126. Every ``hu`` is below 1, so
    each minute further back lowers a window's mean: the series stops once that mean is
    ``LOOKBACK_TOL_SD`` bounding sds below 0."""
    n_h = hu.size
    sm2 = math.expm1(sig * sig)  # a mean-one lognormal's variance and third cumulant
    k3m = (math.exp(sig * sig) + 2.0) * sm2 * sm2
    v_max = 0.0  # the largest variance one partial epoch can add
    a_max = 0.0  # the busiest epoch's arrivals per minute (s of work) and queue variance
    v_top = 0.0
    for j in range(n_h):
        v_max = max(v_max, ((hu[j] * period) ** 2 * sm2 + hv[j]) * k / 4.0)
        a_max = max(a_max, hu[j] * period)
        v_top = max(v_top, hv[j])
    sd_b = math.sqrt(2.0 * v_max)
    # a light history: one minute at the busiest epoch's rate, unconditioned (more spread than
    # any window the series sums), leaves nothing measurable; the later terms fall faster
    c1, _ = _skewed_call(a_max, a_max * a_max * sm2, a_max**3 * k3m, period, v_top, z, wq)
    if c1 < LOOKBACK_NEGLIGIBLE_S:
        return 0.0, 0.0
    s_c = sig * math.sqrt(1.0 - 1.0 / k)
    sd_c = math.sqrt(hv[0] * (1.0 - 1.0 / k))
    # the current minute's X over the nodes of its multiplier and of G, arrival-weighted (the
    # nodes of negligible weight left out)
    xs = np.empty(z.size * z.size)
    ws = np.empty(z.size * z.size)
    n_x = 0
    den = 0.0
    for i in range(z.size):
        m = math.exp(s_c * z[i] - 0.5 * s_c * s_c)
        den += wq[i] * m
        for q in range(z.size):
            if wq[i] * wq[q] < 1e-9:
                continue
            xs[n_x] = (hu[0] * m - 1.0) * period + sd_c * z[q]
            ws[n_x] = wq[i] * wq[q] * m
            n_x += 1
    total = 0.0
    total_p = 0.0
    for t in range(1, k + 1):
        b = 0.0  # E[W] at the end of minute t
        log_p0 = 0.0  # -ln P(W = 0)
        for n in range(1, n_h * k + 1):
            rem = n
            my = 0.0  # the window's mean, variance and third cumulant of arrivals (s of work)
            v_ln = 0.0
            k3 = 0.0
            v_g = 0.0
            j = 0
            while rem > 0 and j < n_h:
                take = min(rem, t) if j == 0 else min(rem, k)
                a = hu[j] * period
                tk = take / k
                my += take * a
                v_ln += a * a * sm2 * take * (k - take) / k
                k3 += a * a * a * k3m * (take * (1.0 - tk) ** 3 - (k - take) * tk**3)
                v_g += hv[j] * take * (k - take) / k
                rem -= take
                j += 1
            if rem > 0:
                break
            span = n * period
            if my - span < -LOOKBACK_TOL_SD * sd_b:
                break
            c, p = _skewed_call(my, v_ln, k3, span, v_g, z, wq)
            b += c / n
            log_p0 += p / n
        p0 = math.exp(-log_p0)
        theta = b / (1.0 - p0) if p0 < 1.0 else 0.0
        num = 0.0
        num_p = 0.0
        for i in range(n_x):
            x = xs[i]
            if b == 0.0 and x <= 0.0:
                continue
            avg = 0.0
            avg_p = 0.0
            for a in range(2):
                c = GL2_X[a] * x
                if c > 0.0:
                    avg += 0.5 * (b + c)
                    avg_p += 0.5
                elif c == 0.0:
                    avg += 0.5 * b
                    avg_p += 0.5 * (1.0 - p0)
                elif theta > 0.0:
                    avg += 0.5 * (1.0 - p0) * theta * math.exp(c / theta)
                    avg_p += 0.5 * (1.0 - p0) * math.exp(c / theta)
            num += ws[i] * avg
            num_p += ws[i] * avg_p
        total += num / den
        total_p += num_p / den
    return total / k, total_p / k


@njit(cache=True)
def wait_with_backlog(pw, cond, extra, busy):
    """Mean wait of an arrival given the slot wait (``P(wait)`` ``pw``, mean ``cond`` given
    waiting) and the minute backlog's mean ``extra`` with ``busy`` the share of arrivals that
    meet one: ``E[max(W_b, W_s)]`` for independent ``W_s`` (0, or exponential of mean ``cond``
    with chance ``pw``: Erlang C's wait given waiting) and ``W_b`` (0, or exponential of mean
    ``extra / busy``: the backlog's law above its atom, as ``lookback_lindley`` takes it). An
    arrival that meets a backlog waits for it to clear, and the slot wait it would have met
    without one only beyond it: ``extra + pw cond (1 - busy theta / (theta + cond))``, ``theta =
    extra / busy``. ``busy`` 0: the plain sum."""
    b = min(max(busy, 0.0), 1.0)
    base = pw * cond
    if not b > 0 or not extra > 0:
        return base + max(extra, 0.0)
    theta = extra / b
    return extra + base * (1.0 - b * theta / (theta + cond))
