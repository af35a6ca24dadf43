"""Slot wait of an iteration server behind a state-aware router (least-loaded, least-connections)
in the fluid model (``fluid_iteration_kernel.iteration_epoch``): how evenly the router spreads
requests sets the peakedness ``z`` of the running count a server sees, and ``z`` enters the
per-server M/G/S wait by Hayward's approximation.

Peakedness of a server's count (``route_peakedness``), a linearised (diffusion) argument:

* Without feedback (random routing), a server's count ``k`` (mean ``n``) relaxes only by
  completions, at rate ``lam / n`` per unit of deviation (M/G/inf), and its variance is ``n``
  (Poisson). Each arriving prompt also holds every running decode back by one prefill
  iteration, ``tau - a d / n`` (``a`` decodes carried in it), so a burst of arrivals adds
  requests and withholds ``rho_s = sum_c lam_c (tau_c - a_c d / n)`` completions per arrival:
  the count moves ``(1 + rho_s)`` per arrival and its variance is ``(1 + rho_s)^2 n``
  (``stall_share``; measured index of dispersion under random routing 1.6 at 75 % load,
  1.32 at 85 % truncated at the cap, ``docs/fluid_iteration_gap.md``). Only prompts admitted
  on arrival move the count so: one that meets a full server is admitted when a request
  completes, its stall replacing nothing in the count (``routed_wait``: ``rho_s (1 -
  P(wait))``, solved with the wait).
* A router that sends each arrival to the least score among ``N`` servers adds a restoring
  force. The score is ``m1 (k + e)``, ``m1`` the mean remaining work of a running request and
  ``e`` a noise of standard deviation ``sigma = c sqrt(n)`` in requests (``c``: coefficient of
  variation of the remaining work; remaining output of a request met at a random time of its
  residence, residence proportional to its output length, so ``E[R] = E[O^2] / (2 E[O])``,
  ``E[R^2] = E[O^3] / (3 E[O])``). A server ``x`` requests above the others is chosen with
  probability ``1/N - h_N x / sigma`` (``min_slope``: ``h_N = (N - 1) int phi^2 (1 -
  Phi)^(N - 2)``, the slope of the chance that a shifted Gaussian is the least of ``N``), so
  its arrival rate falls by ``N lam h_N / sigma`` per unit of deviation.
* The deviation from the servers' mean is then an Ornstein-Uhlenbeck process whose variance is
  the free one times ``(lam / n) / (lam / n + N lam h_N / sigma)`` = ``1 / (1 + f)``,
  ``f = N h_N sqrt(n) / c``. The servers' mean count is the pooled count over ``N`` (variance
  ``1 / N`` of a server's). So ``z = (1 + rho_s)^2 (1 / N + (1 - 1 / N) / (1 + f))``:
  random routing (``f = 0``) ``(1 + rho_s)^2``; least-connections (the count itself, ``c =
  0``, ``f`` infinite) the pooled queue's ``(1 + rho_s)^2 / N``.

Wait (``hayward_mgs``): Hayward's approximation (Hayward 1952; Fredericks 1980, BSTJ 59(6)):
traffic of peakedness ``z`` offered to ``S`` servers behaves as Poisson traffic offered to
``S / z`` servers in units of ``z`` requests: ``P(wait) = C(S / z, a / z)`` and the queue is
``z`` times the Poisson one's, so the wait given waiting is ``z`` times Allen-Cunneen's M/G/S
one (service = the residence ``N / lam``, the output length's SCV), and the relaxation time of
that queue (Odoni & Roth) is ``z`` times longer (``S / z`` servers of the same service time).

No fitted constant: ``N``, ``n``, ``tau``, ``a``, ``d`` come from the profile and the scenario,
``c`` from the output-length samples. Measured against the iteration engine in
``tests/test_fluid_iteration_calibration.py`` (``docs/fluid_iteration_gap.md``).
"""

from __future__ import annotations

import math

from numba import njit

from greenroute.sim.queueing_kernel import erlang_c

ROUTE_NONE = 0  # split arrivals or a Python policy: not this module's wait
ROUTE_LEAST_LOADED = 1  # score = tokens of work left (``iteration/kernel.py`` run_arrivals)
ROUTE_LEAST_CONNECTIONS = 2  # score = running + queued requests
_MIN_SLOPE_STEPS = 160  # trapezoid steps over [-8, 8]: relative error < 1e-12 for N <= 400
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_CHOSEN_STEPS = 64  # trapezoid steps over [-8, 8] for ``chosen_despite`` (h = 1/4; the
# integrand is smooth and Gaussian-weighted, so the trapezoid error is far below the 1e-9 tested)
_FIXED_POINT_STEPS = 60  # at most; a few suffice (contraction)
_FIXED_POINT_TOL = 1e-10  # |g(z) - z| / z at which the iteration stops


@njit(cache=True)
def min_slope(n_srv):
    """``h_N = (N - 1) int phi(x)^2 (1 - Phi(x))^(N - 2) dx``: minus the derivative, at 0, of
    the chance that ``X_1 + delta`` is the least of ``N`` iid standard normals (``1 / (2
    sqrt(pi))`` for ``N = 2`` and 3; 0 for one server)."""
    if n_srv < 2:
        return 0.0
    h = 0.0
    dx = 16.0 / _MIN_SLOPE_STEPS
    for i in range(_MIN_SLOPE_STEPS + 1):
        x = -8.0 + i * dx
        phi = math.exp(-0.5 * x * x) / _SQRT_2PI
        sf = 0.5 * math.erfc(x / math.sqrt(2.0))
        wgt = 0.5 if i == 0 or i == _MIN_SLOPE_STEPS else 1.0
        h += wgt * phi * phi * sf ** (n_srv - 2)
    return (n_srv - 1) * h * dx


@njit(cache=True)
def remaining_work_cv(e_o, e_o2, e_o3):
    """Coefficient of variation of the remaining output of a running request, residence
    proportional to the output length ``O``: ``E[R] = E[O^2] / (2 E[O])``, ``E[R^2] = E[O^3] /
    (3 E[O])`` (``U O`` with ``O`` length-biased and ``U`` uniform)."""
    if not e_o > 0 or not e_o2 > 0:
        return 0.0
    m1 = e_o2 / (2.0 * e_o)
    m2 = e_o3 / (3.0 * e_o)
    return math.sqrt(max(m2 / (m1 * m1) - 1.0, 0.0))


@njit(cache=True)
def chosen_despite(n_srv, delta):
    """``N P(X_1 + delta < min(X_2, ..., X_N))`` for iid standard normals ``X``: how often a
    server whose score is ``delta`` standard deviations above its law is chosen as the least
    of ``N``, relative to a random choice (1 at ``delta = 0``; ``2 Phi(-delta / sqrt(2))`` for
    ``N = 2``). ``N int phi(x) (1 - Phi(x + delta))^(N - 1) dx``, trapezoid over [-8, 8]."""
    if n_srv < 2:
        return 1.0
    if n_srv == 2:  # X_2 - X_1 ~ N(0, 2): closed form (the fluid kernel calls this per epoch)
        return math.erfc(delta / 2.0)
    acc = 0.0
    dx = 16.0 / _CHOSEN_STEPS
    for i in range(_CHOSEN_STEPS + 1):
        x = -8.0 + i * dx
        phi = math.exp(-0.5 * x * x) / _SQRT_2PI
        sf = 0.5 * math.erfc((x + delta) / math.sqrt(2.0))
        wgt = 0.5 if i == 0 or i == _CHOSEN_STEPS else 1.0
        acc += wgt * phi * sf ** (n_srv - 1)
    return n_srv * acc * dx


@njit(cache=True)
def queued_prompt_share(route, n_srv, n, e_p, e_p2, e_o, e_o2, cv, busy_pf):
    """Share of the prompts queued ahead (``IterationProfile.ahead``) that an arrival still
    meets behind a state-aware router, relative to Poisson arrivals at its server.

    A queued prompt sits in its server's score until its prefill iteration ends
    (``iteration/kernel.py``: ``enqueue`` adds ``prompt + output - 1`` tokens to the work
    score, least-connections counts it as one request), so the router sends the next arrival
    there only if that server is still the least despite it: ``chosen_despite(N, Delta /
    sigma)``, ``sigma`` the spread of one server's score.

    Least-loaded: ``Delta = E[P] + E[O] - 1`` tokens. The score sums (a) the remaining outputs
    of the running requests, a compound-Poisson sum (count of mean ``n``, the free spread;
    the router narrows it, which this ignores) of terms of mean ``m1 = E[O^2] / (2 E[O])`` and
    CV ``cv``: variance ``n m1^2 (1 + cv^2)``; (b) the prompt of the prefill iteration in
    progress, there a share ``busy_pf`` of the time (``sum lam tau``): variance ``busy_pf
    E[P^2] - (busy_pf E[P])^2``. Least-connections: ``Delta = 1``, ``sigma = sqrt(n)``.
    Measured (least-loaded, 2 servers, 60 %, docs/fluid_iteration_gap.md): an arrival meets a
    queued prompt at a non-full server 1.4 % of the time against 7.1 % under random routing
    (0.20)."""
    if n_srv < 2 or route == ROUTE_NONE or not n > 0:
        return 1.0
    if route == ROUTE_LEAST_CONNECTIONS:
        return chosen_despite(n_srv, 1.0 / math.sqrt(n))
    if not e_o > 0:
        return 1.0
    m1 = e_o2 / (2.0 * e_o)
    var = n * m1 * m1 * (1.0 + cv * cv) + max(busy_pf * e_p2 - (busy_pf * e_p) ** 2, 0.0)
    return chosen_despite(n_srv, (e_p + e_o - 1.0) / math.sqrt(var)) if var > 0 else 1.0


@njit(cache=True)
def route_peakedness(route, n_srv, h_n, n, cv, stall):
    """Peakedness of the running count at one of ``n_srv`` servers under ``route``, with ``n``
    running on average, remaining-work CV ``cv`` and prefill-stall share ``stall``:
    ``(1 + stall)^2 (1 / N + (1 - 1 / N) / (1 + f))``, ``f = N h_N sqrt(n) / cv`` (infinite
    for least-connections); ``h_n = min_slope(n_srv)``. See the module docstring."""
    amp = (1.0 + stall) * (1.0 + stall)
    if n_srv < 2:
        return amp
    if route == ROUTE_LEAST_CONNECTIONS or not cv > 0:
        return amp / n_srv
    f = n_srv * h_n * math.sqrt(max(n, 0.0)) / cv
    return amp * (1.0 / n_srv + (1.0 - 1.0 / n_srv) / (1.0 + f))


@njit(cache=True)
def hayward_mgs(s, n, lam, scv, z):
    """M/G/S slot wait at peakedness ``z``: ``(P(wait), mean wait given waiting)`` =
    ``(C(S / z, n / z), z (1 + scv) / 2 / (S lam / n - lam))``; the offered load is the running
    count ``n`` (service = residence ``n / lam``, Little). ``z = 1``: Allen-Cunneen."""
    pw = erlang_c(s / z, n / z)
    denom = s * lam / max(n, 1e-12) - lam
    cond = (z / denom if denom > 0 else 0.0) * (1.0 + scv) / 2.0
    return pw, cond


@njit(cache=True)
def routed_wait(route, n_srv, h_n, s, n, lam, scv, cv, stall):
    """``(P(wait), mean wait given waiting, z)`` behind a state-aware router: ``hayward_mgs`` at
    the peakedness ``route_peakedness`` gives when only the prompts admitted on arrival stall
    the running decodes (a share ``1 - P(wait)``; a prompt that meets a full server is admitted
    when a request completes, so the count does not move with its stall). ``z`` solves
    ``z = route_peakedness(..., stall (1 - P(wait at z)))``: ``F(z) = g(z) - z`` with ``g`` the
    right side, which falls as ``z`` (so ``P(wait)``) grows, so ``F`` has one root in ``[g(0
    stall), g(full stall)]``. Secant steps from the full stall (a few suffice: ``g`` moves by a
    few % per unit of ``P(wait)``), kept in the shrinking bracket by bisection."""
    lo = route_peakedness(route, n_srv, h_n, n, cv, 0.0)
    hi = route_peakedness(route, n_srv, h_n, n, cv, stall)
    if not hi > lo:
        pw, cond = hayward_mgs(s, n, lam, scv, lo)
        return pw, cond, lo
    z_prev = hi
    f_prev = _excess_peakedness(route, n_srv, h_n, n, cv, stall, s, lam, scv, hi)
    z = hi + f_prev  # = g(hi), the plain fixed-point step
    for _ in range(_FIXED_POINT_STEPS):
        f = _excess_peakedness(route, n_srv, h_n, n, cv, stall, s, lam, scv, z)
        if abs(f) <= _FIXED_POINT_TOL * z:
            break
        if f > 0:
            lo = z
        else:
            hi = z
        step = z - f * (z - z_prev) / (f - f_prev) if f != f_prev else 0.5 * (lo + hi)
        z_prev, f_prev = z, f
        z = step if lo < step < hi else 0.5 * (lo + hi)
    pw, cond = hayward_mgs(s, n, lam, scv, z)
    return pw, cond, z


@njit(cache=True)
def _excess_peakedness(route, n_srv, h_n, n, cv, stall, s, lam, scv, z):
    """``g(z) - z`` of ``routed_wait``."""
    pw, _ = hayward_mgs(s, n, lam, scv, z)
    return route_peakedness(route, n_srv, h_n, n, cv, stall * (1.0 - pw)) - z
