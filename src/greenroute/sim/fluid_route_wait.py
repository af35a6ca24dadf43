"""Slot wait of an iteration server behind a state-aware router (least-loaded, least-connections)
in the fluid model (``fluid_iteration_kernel.iteration_epoch``): how the router spreads requests
sets the peakedness ``z`` of the running count a server sees, and ``z`` enters the per-server
M/G/S wait by Hayward's approximation. Measurements: ``docs/fluid_iteration_gap.md``, "Least-
loaded component by component".

Peakedness of a server's count (``route_peakedness``):

* Random routing leaves a server Poisson arrivals; each admitted prompt also holds every running
  decode back by one prefill iteration, ``tau - a d / n`` (``a`` decodes carried in it), so a
  burst of arrivals adds requests and withholds ``rho_s = sum_c lam_c (tau_c - a_c d / n)``
  completions per arrival: the count moves ``(1 + rho_s)`` per arrival and its peakedness is
  ``amp = (1 + rho_s)^2`` (``stall_share``; measured 1.45 / 1.60 at 60 / 75 % load, the model
  1.42 / 1.52). Only prompts admitted on arrival move the count so: one that meets a full
  server is admitted when a request completes (``routed_wait``: ``rho_s (1 - P(wait))``).
* Least-connections routes on the count itself: the pooled queue's ``amp / N``.
* Least-loaded routes on the tokens of work left, which drain as requests decode: the server
  with more running requests sheds score faster and draws the next arrivals, which cancels the
  completions' restoring force on the count, and what pins the count is the balance of work.
  The count of a server then spreads as the number of remaining-work pieces that make up the
  common level: ``z = amp / N + (1 - 1 / N) B_N``, the pooled count's part (the region's total
  count spreads as under random routing: ``amp``, measured 1.5-1.7 at 60 % under both) plus
  the composition ``B_N = composition_share(N) c^2 (1 + SCV(O)) / 2`` (``c`` the CV of a
  running request's remaining output, ``SCV(O)`` the output length's; ``c^2 (1 + SCV(O)) / 2
  = Var(R) / (E[R] E[O])``). The form is measured, not derived: over 4 class mixes (``c^2``
  0.65-2.92, ``SCV(O)`` 0.6-3.3) and 2 / 4 / 8 servers, with the total's spread read directly,
  ``B_N`` follows it within 3 % (``bench/route_spread.py``); the composition alone (``B =
  c^2``, the renewal count at a common work level) is 10-45 % off, in both directions.

Waits of least-loaded (``routed_wait``), each checked against the engine's own:

* ``P(wait)``: Erlang C at ``S / z`` servers and ``n / z`` offered (Hayward 1952; Fredericks
  1980, BSTJ 59(6)), ``n`` the slot occupancy: the running decodes plus the prompts in their
  prefill iteration. By PASTA an arrival sees the time-average occupancy, and a prefill
  iteration (a share ``p = sum lam tau`` of the time) holds its own prompt besides the decodes:
  ``n_occ = n + p / (1 - p)`` (``slot_occupancy``; engine 20.54 / 24.92 at 75 / 85 %, the
  decode fixed point 20.05 / 24.41, ``n_occ`` 20.48 / 24.93).
* Wait given waiting: the router counts a queued prompt's work, so the queue in front of full
  slots is shared as in one pooled queue of ``N S`` slots (M/M/NS, the completions of ``S``
  requests of spread ages being close to Poisson), but a waiting prompt needs a slot of its own
  server, so it waits at least for that server to admit it: its next completion, which comes
  sooner than a full server's mean gap ``1 / mu`` (``mu = S lam / n``) because the router picked
  it by its low work (the common level's work held by ``S`` requests instead of ``n``, so ``n /
  S`` of the usual remaining work each: for exponential remaining work the first of them ends
  after ``(n / S) / mu``; engine 0.70-0.87 / mu over 2-16 servers and the class mixes, ``n / S``
  0.77-0.79 at 85 %), then the prompts queued ahead of it there, an M/M/1 queue that the router
  feeds at ``share_q lam`` (``queued_prompt_share``): ``max(1 / (N (mu - lam)), (n / S) / mu +
  share_q lam / (mu (mu - share_q lam)))`` (``wait_given_full``; 2026-11-28: the floor was ``1
  / mu``, 27-33 % short for the class mixes over 4-8 servers).
* Least-connections (join the shortest queue on the count of running + queued requests): an
  arrival waits only when every server is full, so ``P(wait)`` is Hayward's at the pooled
  count's ``z = amp / N`` and the slot occupancy, and the wait given waiting is a pooled G/G/N
  queue at the saturated rate, ``(1 + cs^2) / 2 / (N (1 / w - lam))`` (``cs^2`` of the
  completion cycle, ``fluid_split_chain.saturated_cycle``), at least one server's mean residual
  cycle ``(1 + cs^2) / (2 / w)`` (``pooled_wait_given_full``). Measured on 2026-11-27 (not
  before: least-connections had no calibration case): TTFT +1.9 / -9.8 / +9.1 % at 2 servers 75 /
  85 % and 8 servers 85 % with Hayward's wait and no occupancy or prefill avoidance, +0.0 / -4.3
  / +3.5 % with them (engine, 2 servers, 85 %: 0.098 of arrivals meet the cap and wait 0.995 s
  given it; the model 0.087 / 0.916 s).

No constant is fitted to TTFT: ``N``, ``n``, ``tau``, ``a``, ``d`` come from the profile and the
scenario, ``c`` and ``SCV(O)`` from the output-length samples, ``COMPOSITION_SHARE`` and
``PAIR_NARROWING`` from the count spread at 60 %. Measured against the iteration engine in
``tests/test_fluid_iteration_calibration.py``.
"""

from __future__ import annotations

import math

from numba import njit

from greenroute.sim.fluid_iteration_core import (
    FIXED_POINT_STEPS,
    FIXED_POINT_TOL,
    bracketed_secant,
)
from greenroute.sim.queueing_kernel import erlang_c

ROUTE_NONE = 0  # split arrivals or a Python policy: not this module's wait
ROUTE_LEAST_LOADED = 1  # score = tokens of work left (``iteration/kernel.py`` run_arrivals)
ROUTE_LEAST_CONNECTIONS = 2  # score = running + queued requests
# B_N / (c^2 (1 + SCV(O)) / 2) = COMPOSITION_SHARE (1 - PAIR_NARROWING / N^2): least-loaded's
# per-server part of the count law over N servers, measured on the engine's count spread at 60 %
# load with the region's total count read directly (``python -m greenroute.bench.route_spread
# --shares 0,0.1667,0.4,1.0``, 2 seeds, 2026-11-27): B_N / comp 0.790 / 0.876 / 0.899 at N = 2
# / 4 / 8 (each within 0.03 over the four mixes), least squares K 0.906, c 0.512. (Until then
# one B from a two-point fit at N = 2 and 8, 0.898 over 8 mixes, which put the N = 2 narrowing
# into a "pooled part" that seemed to fall to 1.0-1.2 for heavy mixes; the total's spread is
# the random-routing one, 1.5-1.7.)
COMPOSITION_SHARE = 0.906
PAIR_NARROWING = 0.512
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_CHOSEN_STEPS = 64  # trapezoid steps over [-8, 8] for ``chosen_despite`` (h = 1/4; the
# integrand is smooth and Gaussian-weighted, so the trapezoid error is far below the 1e-9 tested)


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
    (0.20). The same share feeds the queue of a full server (``wait_given_full``: the engine's
    arrival intensity at a full server with one queued is 0.25 / 0.46 / 0.61-0.63 of the mean
    over 16 / 4 servers of interactive traffic and 8 servers of the demo's mix at 85 %, this
    0.12 / 0.28 / 0.39)."""
    return _share_despite(route, n_srv, n, e_p + e_o - 1.0, e_p, e_p2, e_o, e_o2, cv, busy_pf)


@njit(cache=True)
def prefill_share(route, n_srv, n, e_p, e_p2, e_o, e_o2, cv, busy_pf):
    """The chance, relative to random routing, that an arrival lands on a server in the
    prefill iteration of the request it got last. Least-connections: that request is one more
    in the count, ``chosen_despite(N, 1 / sqrt(n))`` (as ``queued_prompt_share``). Least-loaded:
    that iteration's prompt left the score when it started (the engine runs an iteration
    whole), but its request's ``O - 1`` output tokens are in the score, ``E[O] - 1`` above a
    server that got no arrival: ``chosen_despite(N, (E[O] - 1) / sigma)`` (``sigma`` as
    ``queued_prompt_share``). Such arrivals meet a decode iteration instead, so the residual
    iteration an arrival waits for is shorter than the time average (engine, interactive, 75 /
    85 % load, arrivals meeting neither a full server nor a queue: 0.0437 / 0.0464 s over 2
    servers, 0.0435 s over 8 at 85 %, against a time-average residual of 0.0476 / 0.0522 s).
    No state-aware router, or one server: 1."""
    return _share_despite(route, n_srv, n, max(e_o - 1.0, 0.0), e_p, e_p2, e_o, e_o2, cv, busy_pf)


@njit(cache=True)
def _share_despite(route, n_srv, n, extra_tokens, e_p, e_p2, e_o, e_o2, cv, busy_pf):
    """``chosen_despite`` for a server whose score carries one thing more than the others':
    least-connections one request (``1 / sqrt(n)`` count deviations), least-loaded
    ``extra_tokens`` (over ``_score_sd``); 1 without a state-aware router, with one server or
    with nothing running (``queued_prompt_share``, ``prefill_share``)."""
    if n_srv < 2 or route == ROUTE_NONE or not n > 0:
        return 1.0
    if route == ROUTE_LEAST_CONNECTIONS:
        return chosen_despite(n_srv, 1.0 / math.sqrt(n))
    sd = _score_sd(n, e_p, e_p2, e_o, e_o2, cv, busy_pf)
    return chosen_despite(n_srv, extra_tokens / sd) if sd > 0 else 1.0


@njit(cache=True)
def _score_sd(n, e_p, e_p2, e_o, e_o2, cv, busy_pf):
    """Standard deviation (tokens) of one server's least-loaded score (``queued_prompt_share``);
    0 without outputs."""
    if not e_o > 0:
        return 0.0
    m1 = e_o2 / (2.0 * e_o)
    var = n * m1 * m1 * (1.0 + cv * cv) + max(busy_pf * e_p2 - (busy_pf * e_p) ** 2, 0.0)
    return math.sqrt(var) if var > 0 else 0.0


@njit(cache=True)
def slot_occupancy(n, busy_pf):
    """Slots held at an arrival, ``n`` running decodes and a prefill-iteration share
    ``busy_pf``: ``n + p / (1 - p)`` (module docstring; PASTA)."""
    return n + busy_pf / max(1.0 - busy_pf, 1e-9)


@njit(cache=True)
def route_peakedness(route, n_srv, cv, scv, stall):
    """Peakedness of the running count at one of ``n_srv`` servers under ``route`` (remaining-
    work CV ``cv``, output-length SCV ``scv``, prefill-stall share ``stall``): least-loaded
    ``amp / N + (1 - 1 / N) composition_share(N) cv^2 (1 + scv) / 2``, least-connections ``amp /
    N``, ``amp = (1 + stall)^2``. See the module docstring."""
    amp = (1.0 + stall) * (1.0 + stall)
    if n_srv < 2:
        return amp
    if route == ROUTE_LEAST_CONNECTIONS:
        return amp / n_srv
    comp = composition_share(n_srv) * cv * cv * (1.0 + scv) / 2.0
    return amp / n_srv + (1.0 - 1.0 / n_srv) * comp


@njit(cache=True)
def composition_share(n_srv):
    """``B_N / (c^2 (1 + SCV(O)) / 2)`` of least-loaded's count law over ``n_srv`` servers:
    ``COMPOSITION_SHARE (1 - PAIR_NARROWING / N^2)``, measured and not derived (module
    constants): over 2 servers a server's count strays 12 % less from its share of the
    region's than over 8, for every mix measured."""
    return COMPOSITION_SHARE * (1.0 - PAIR_NARROWING / (n_srv * n_srv))


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
def wait_given_full(n_srv, s, n, lam, share_q):
    """Least-loaded's mean wait of an arrival that meets full slots: the pooled M/M/NS queue's
    ``1 / (N (mu - lam))``, ``mu = S lam / n`` a full server's completions per second, at least
    the wait for its own server to admit it, ``(n / S) / mu + share_q lam / (mu (mu - share_q
    lam))``: that server's first completion (its requests hold ``n / S`` of the usual work each:
    the router picked it by its work) and the prompts queued ahead of it, which the router sends
    there at ``share_q`` times its rate (module docstring; engine, request frame, 2 seeds:
    0.533 / 0.504 / 0.276 s for the demo's class mix over 8 servers at 85 %, 40 % deferrable
    over 4 servers at 75 % and interactive over 16 servers at 85 %). Where the queue it feeds
    does not drain (``mu - share_q lam`` not positive, saturated): the first completion alone,
    the epoch's backlog taking over."""
    rate = s * lam / max(n, 1e-12)  # completions per second of a full server
    own = first_completion_wait(s, n, lam)
    q_rate = rate - share_q * lam
    if rate > 0 and q_rate > 0:
        own += share_q * lam / (rate * q_rate)
    den = n_srv * (rate - lam)
    return max(1.0 / den if den > 0 else 0.0, own)


@njit(cache=True)
def first_completion_wait(s, n, lam):
    """A full server's first completion behind least-loaded, ``(n / S) / mu`` (``mu = S lam /
    n`` its completions per second; its requests hold ``n / S`` of the usual work each: the
    router picked it by its low work): ``wait_given_full``'s own-server floor without the
    prompts queued ahead there (``fluid_path_noise`` counts those in the region's count)."""
    rate = s * lam / max(n, 1e-12)
    return min(n / s, 1.0) / rate if rate > 0 else 0.0


@njit(cache=True)
def routed_wait(route, n_srv, s, n, lam, scv, cv, stall, mu_sat, cs2, share_q):
    """``(P(wait), mean wait given waiting, z)`` behind a state-aware router: ``P(wait)`` by
    Hayward at the peakedness ``route_peakedness`` gives when only the prompts admitted on
    arrival stall the running decodes (a share ``1 - P(wait)``; a prompt that meets a full
    server is admitted when a request completes, so the count does not move with its stall),
    the wait given waiting ``wait_given_full`` for least-loaded (its own server's queue fed at
    ``share_q`` times the rate, ``queued_prompt_share``) and ``pooled_wait_given_full``
    (saturated rate ``mu_sat``, cycle ``cs2``) for least-connections. ``n``: the slot occupancy
    (``slot_occupancy``). ``z`` solves ``z = route_peakedness(..., stall (1 -
    P(wait at z)))``: ``F(z) = g(z) - z`` with ``g`` the right side, which falls as ``z`` (so
    ``P(wait)``) grows, so ``F`` has one root in ``[g(0 stall), g(full stall)]``. Secant steps
    from the full stall (a few suffice: ``g`` moves by a few % per unit of ``P(wait)``), kept
    in the shrinking bracket by bisection."""
    lo = route_peakedness(route, n_srv, cv, scv, 0.0)
    hi = route_peakedness(route, n_srv, cv, scv, stall)
    z = lo
    if hi > lo:
        z_prev = hi
        f_prev = _excess_peakedness(route, n_srv, cv, stall, s, n, lam, scv, hi)
        z = hi + f_prev  # = g(hi), the plain fixed-point step
        for _ in range(FIXED_POINT_STEPS):
            f = _excess_peakedness(route, n_srv, cv, stall, s, n, lam, scv, z)
            if abs(f) <= FIXED_POINT_TOL * z:
                break
            z_next, lo, hi = bracketed_secant(z, f, z_prev, f_prev, lo, hi)
            z_prev, f_prev, z = z, f, z_next
    pw, cond = hayward_mgs(s, n, lam, scv, z)
    if route == ROUTE_LEAST_LOADED and n_srv >= 2:
        cond = wait_given_full(n_srv, s, n, lam, share_q)
    elif route == ROUTE_LEAST_CONNECTIONS and n_srv >= 2 and mu_sat > 0:
        cond = pooled_wait_given_full(n_srv, mu_sat, cs2, lam)
    return pw, cond, z


@njit(cache=True)
def pooled_wait_given_full(n_srv, mu_sat, cs2, lam):
    """Least-connections' mean wait of an arrival that meets every server full: a pooled G/G/N
    queue served at ``n_srv`` times the saturated rate ``mu_sat`` (one completion cycle of SCV
    ``cs2`` per admitted prompt, ``fluid_split_chain.saturated_cycle``), Poisson arrivals:
    ``(1 + cs2) / 2 / (N (mu_sat - lam))`` (Kingman), at least the mean residual cycle of the
    server it queues at, ``(1 + cs2) / (2 mu_sat)``. ``inf``-free: 0 at or above saturation (the
    epoch-level fluid backlog takes over)."""
    floor = 0.5 * (1.0 + cs2) / mu_sat
    head = n_srv * (mu_sat - lam)
    if not head > 0:
        return 0.0
    return max(0.5 * (1.0 + cs2) / head, floor)


@njit(cache=True)
def _excess_peakedness(route, n_srv, cv, stall, s, n, lam, scv, z):
    """``g(z) - z`` of ``routed_wait``."""
    pw, _ = hayward_mgs(s, n, lam, scv, z)
    return route_peakedness(route, n_srv, cv, scv, stall * (1.0 - pw)) - z
