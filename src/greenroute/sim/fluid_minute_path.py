"""The minute backlog of a region of iteration servers, pathwise: a cohort model of its slots
run on the arrival counts of each minute (the seed's own path, not an expectation over the
noise), with its state carried from one call to the next (epochs, forks).

The region's ``servers x slots`` slots hold cohorts of admitted requests:

* a cohort admitted at progress ``p`` runs while the residence survival ``survival[j]`` (P(R >
  j dt) at the reference load) at ``P - p`` lasts; the progress clock ``P`` runs at ``(r0 + r1
  n_ref) / (r0 + r1 n)`` with ``n`` running per server (the batch slows every decode), times
  the prefill stall's change ``(1 - a prefill_s) / (1 - a_ref prefill_s)``: each admitted
  prompt holds every decode back by its prefill, so a server admitting ``a`` prompts a second
  progresses slower than the stationary ``a_ref = n / (r0 + r1 n)`` that the residence law
  already holds;
* arrivals (spread evenly over their minute) fill free slots first, FCFS behind any queue;
* the region's count ``N`` (running + queued) has the path as its mean and a variance carried
  step to step (``count_variance_step``, a Gaussian moment closure after Rothkopf & Oren, "A
  closure approximation for the nonstationary M/M/s queue", Management Science 25(6), 1979):
  arrivals and completions add ``total_spread`` times their rates, and below the slots the
  delay system pulls the count back to its path at ``1 / R``; on a queue it is a random walk
  and its randomness accumulates;
* an arrival waits ``E[(N - servers slots)^+] / capacity_rps`` for the region's queue and
  ``wait_full_s`` with the chance its own server is full (one server's count ~ Normal(N /
  servers, z N / servers), ``z`` from ``server_count_spread``).

Measured against the iteration engine on the seed's own minutes (``bench/minute_backlog.py``,
docs/fluid_iteration_gap.md, "How closely the noise term can be calibrated"): with the engine's
residence law within -2.6 to +1.5 % of mean TTFT on six noisy least-loaded cases; with the law
the fluid's profile gives, corrected for the slots held at load and the prompt's slot at the
cap (``bench/minute_backlog.fluid_residence_law``), -3.8 to +0.3 % on ten. Split arrivals
(round-robin, random) queue per server and do not fit it yet. The fluid model reads it behind
least-loaded and least-connections (``fluid_path_noise``, with ``path_pieces``: pieces of any
length, the clock in mean residences).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

SECONDS_PER_MINUTE = 60.0
RING_FACTOR = 4  # cohorts kept: this many times the survival's grid (a slowed clock lives longer)
FLAT_VARIANCE_ITERS = 50  # at most, for ``flat_variance``'s fixed point (a few suffice)
STALL_CAP = 0.95  # the most of a server's time one step's admitted prefills may take
# scal[] layout: the progress clock, the queue (requests), the count variance (-1: not yet
# set), the ring's oldest slot, cohorts held, the arrival rate (req/s) of the stationary state
# the ring stands for while it is empty after a free piece (0: none)
CLOCK, QUEUE, VAR, HEAD, HELD, WARM = 0, 1, 2, 3, 4, 5
N_SCALARS = 6


@njit(cache=True)
def normal_excess(mean, var, level):
    """``(E[(X - level)^+], P(X > level))`` for X ~ Normal(mean, var) (a point mass at 0
    variance)."""
    if var <= 0.0:
        return max(mean - level, 0.0), 1.0 if mean > level else 0.0
    sd = math.sqrt(var)
    d = (mean - level) / sd
    p = 0.5 * math.erfc(-d / math.sqrt(2.0))
    return sd * math.exp(-0.5 * d * d) / math.sqrt(2.0 * math.pi) + (mean - level) * p, p


@njit(cache=True)
def server_count_spread(total_spread, server_spread, servers):
    """One server's count variance over its mean, ``z = total_spread / servers + (1 - 1 /
    servers) server_spread``: its share of the region's spread plus its own about that share
    (the count law of ``fluid_route_wait``)."""
    return total_spread / servers + (1.0 - 1.0 / servers) * server_spread


@njit(cache=True)
def count_variance_step(var, arrivals_rps, completions_rps, below, residence_s, spread, dt):
    """One step of the region's count variance about the path: dV/dt = spread (a + c) - 2
    below V / R (module doc). Stationary below the slots (``below`` 1, a = c), V = spread a R
    = spread N, the count law; on a queue (``below`` 0) it grows by spread (a + c) a second."""
    return var + (spread * (arrivals_rps + completions_rps) - 2.0 * below * var / residence_s) * dt


@njit(cache=True)
def readout(n_tot, var, queue, servers, slots, z, capacity_rps, wait_full_s):
    """``(mean wait, chance to wait)`` of an arrival at the region's count ``n_tot`` (running +
    queued) of variance ``var`` about it: ``E[(N - servers slots)^+] / capacity_rps`` for the
    region's queue plus ``wait_full_s`` with the chance its own server is full (one server's
    count ~ Normal(n_tot / servers, z n_tot / servers); with ``z`` 0, full while a queue is
    held); it waits when either holds (the larger chance)."""
    over, p_over = normal_excess(n_tot, var, servers * slots)
    p_full = 1.0 if queue > 0.0 else 0.0
    if z > 0.0:
        mu = n_tot / servers
        p_full = normal_excess(mu, z * mu, slots)[1]
    return over / capacity_rps + p_full * wait_full_s, max(p_over, p_full)


def new_state(survival: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An empty region: ``(mass, admitted_at, scalars)`` for ``path_waits``; ``admitted_at[0]``
    is each cohort's mean admission time on the progress clock, ``admitted_at[1]`` its
    variance (cohorts that merged several steps' admissions)."""
    return empty_state(RING_FACTOR * int(survival.size))


def empty_state(cap: int, rows: tuple[int, ...] = ()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Empty regions with rings of ``cap`` cohorts, ``rows`` of them (``new_state``'s arrays
    with that leading shape)."""
    scal = np.zeros((*rows, N_SCALARS))
    scal[..., VAR] = -1.0
    return np.zeros((*rows, cap)), np.zeros((*rows, 2, cap)), scal


@njit(cache=True)
def path_waits(
    counts, servers, slots, r0, r1, n_ref, survival, capacity_rps, prefill_s, total_spread,
    server_spread, wait_full_s, substeps, variance_state, mass, adm_at, scal,
):  # fmt: skip
    """Mean wait (s) an arrival meets in each minute of ``counts`` (arrivals per minute),
    advancing the state ``mass``/``adm_at``/``scal`` (``new_state``) in place. ``survival``: the
    residence survival at ``n_ref`` running per server on a grid of ``dt = 60 / substeps`` s.
    ``variance_state`` False reads the count's variance as the stationary ``total_spread N``
    instead (the model until 2026-12-06). ``path_pieces`` with whole minutes."""
    dt = SECONDS_PER_MINUTE / substeps
    waits = np.zeros(counts.size)
    pwait = np.zeros(counts.size)
    path_pieces(counts, np.full(counts.size, SECONDS_PER_MINUTE), dt, servers, slots, r0, r1,
                survival, dt / (r0 + r1 * n_ref), capacity_rps, prefill_s, total_spread,
                server_spread, wait_full_s, variance_state, 0.0, 0.0, mass, adm_at, scal, waits,
                pwait)  # fmt: skip
    return waits


@njit(cache=True)
def path_pieces(
    counts, lengths_s, dt_s, servers, slots, r0, r1, survival, grid_step, capacity_rps,
    prefill_s, total_spread, server_spread, wait_full_s, variance_state, free_share, merge_grid,
    mass, adm_at, scal, waits, pwait,
):  # fmt: skip
    """The model over pieces of the path: ``counts[i]`` arrivals spread evenly over
    ``lengths_s[i]`` seconds, in steps of about ``dt_s``; the mean wait (s) and the chance to
    wait an arrival meets in each piece into ``waits``/``pwait``; the state ``mass``/``adm_at``/
    ``scal`` (``new_state``) advanced in place. The progress clock counts mean residences at the
    law ``r0 + r1 n``: ``survival[j]`` is P(R / E[R] > ``j grid_step``), ``grid_step`` the
    progress of one step at the reference load (``dt_s / E[R]``), so a cohort read half a step
    on is half a grid point on.

    A free piece (``free_share`` > 0): no queue, and both the region's running count and the
    flat count at the piece's rate below ``free_share`` of its slots. Its residences (about 10 s)
    are far shorter than a piece (a minute), so the model settles within it at the flat state
    of its rate: the piece reads the stationary readout there, and the ring is emptied to stand
    for that state (``WARM``), rebuilt when a piece is next stepped (``warm_ring``). The cost
    is then that of the pieces near the slots (docs/fluid_iteration_gap.md). ``merge_grid`` >
    0: a step's admissions join the newest cohort while it is younger than that many grid
    steps, at their mean admission time (fewer cohorts to walk)."""
    cap = mass.size
    total_slots = servers * slots
    z = server_count_spread(total_spread, server_spread, servers)
    clock, queue, var = scal[CLOCK], scal[QUEUE], scal[VAR]
    head, held = int(scal[HEAD]), int(scal[HELD])
    warm = scal[WARM]
    n_grid = survival.size
    for i in range(counts.size):
        substeps = max(round(lengths_s[i] / dt_s), 1)
        dt = lengths_s[i] / substeps
        half = 0.5 * dt / dt_s
        arrivals = counts[i] / substeps
        if free_share > 0.0 and queue <= 0.0:
            rate = counts[i] / lengths_s[i]
            n_flat = flat_count(rate, servers, r0, r1)
            level = free_share * total_slots
            if n_flat < level:
                if warm > 0.0:
                    n_now = flat_count(warm, servers, r0, r1)
                else:
                    n_now = ring_count(mass, adm_at, head, held, clock, grid_step, half, survival)
                if n_now < level:
                    var = flat_variance(n_flat, total_spread, total_slots)
                    waits[i], pwait[i] = readout(n_flat, var, 0.0, servers, slots, z,
                                                 capacity_rps, wait_full_s)  # fmt: skip
                    held = 0
                    head = 0
                    warm = rate
                    continue
        if warm > 0.0:
            head, held = warm_ring(mass, adm_at, clock, warm, dt, servers, r0, r1, survival,
                                   grid_step)  # fmt: skip
            warm = 0.0
        acc = 0.0
        acc_p = 0.0
        for _ in range(substeps):
            # the oldest cohorts that have left are dropped; those the survival no longer
            # reaches behind a younger one count nothing until they are oldest
            while held > 0 and (clock - adm_at[0, head]) / grid_step + half >= n_grid - 1:
                head = (head + 1) % cap
                held -= 1
            running = ring_count(mass, adm_at, head, held, clock, grid_step, half, survival)
            free = max(total_slots - running, 0.0)
            admitted = min(queue + arrivals, free)
            queue += arrivals - admitted
            last = (head + held - 1) % cap
            if merge_grid > 0.0 and held > 0 and clock - adm_at[0, last] < merge_grid * grid_step:
                # a young cohort takes this step's admissions: its mean admission time and
                # that time's variance (read by ``_read``'s second-order term)
                m_old = mass[last]
                m_new = m_old + admitted
                if m_new > 0.0:
                    mean = (m_old * adm_at[0, last] + admitted * clock) / m_new
                    d_old = adm_at[0, last] - mean
                    d_new = clock - mean
                    adm_at[1, last] = (m_old * (adm_at[1, last] + d_old * d_old)
                                       + admitted * d_new * d_new) / m_new  # fmt: skip
                    adm_at[0, last] = mean
                mass[last] = m_new
            else:
                if held == cap:  # the ring is full: the oldest is retired early
                    head = (head + 1) % cap
                    held -= 1
                t = (head + held) % cap
                mass[t] = admitted
                adm_at[0, t] = clock
                adm_at[1, t] = 0.0
                held += 1
            busy = running + admitted  # the step's occupancy, its own admissions included
            n_tot = busy + queue
            if variance_state and var < 0.0:
                var = total_spread * n_tot
            v_now = var if variance_state else total_spread * n_tot
            w_now, p_now = readout(n_tot, v_now, queue, servers, slots, z, capacity_rps,
                                   wait_full_s)  # fmt: skip
            acc += w_now
            acc_p += p_now
            n = min(busy / servers, slots)
            res_s = r0 + r1 * n
            stall = 1.0
            if prefill_s > 0.0:
                a_ref = n / res_s
                a_now = min(admitted / servers / dt * prefill_s, STALL_CAP)
                stall = (1.0 - a_now) / (1.0 - a_ref * prefill_s)
            clock += dt / res_s * stall
            if variance_state:
                below = 1.0
                if var > 0.0:
                    below = 0.5 * math.erfc((n_tot - total_slots) / math.sqrt(2.0 * var))
                var = count_variance_step(var, arrivals / dt, busy / res_s, below, res_s,
                                          total_spread, dt)  # fmt: skip
        waits[i] = acc / substeps
        pwait[i] = acc_p / substeps
    scal[CLOCK], scal[QUEUE], scal[VAR] = clock, queue, var
    scal[HEAD], scal[HELD], scal[WARM] = head, held, warm


@njit(cache=True)
def flat_variance(n_tot, spread, total_slots):
    """The count variance the closure (``count_variance_step``) settles at for a flat count
    ``n_tot``: arrivals and completions both at ``n_tot / R``, so ``V = spread n_tot / below``
    with ``below = P(N < total_slots)`` under Normal(n_tot, V): a fixed point (near the slots
    the queue's side of the law relaxes nothing). ``spread n_tot`` far below the slots."""
    var = spread * n_tot
    if not var > 0.0:
        return var
    for _ in range(FLAT_VARIANCE_ITERS):
        below = 0.5 * math.erfc((n_tot - total_slots) / math.sqrt(2.0 * var))
        new = spread * n_tot / max(below, 0.5)
        if abs(new - var) <= 1e-9 * var:
            return new
        var = new
    return var


@njit(cache=True)
def flat_count(rate_rps, servers, r0, r1):
    """The region's count held at a flat arrival rate: ``N = rate (r0 + r1 N / servers)``."""
    den = 1.0 - rate_rps * r1 / servers
    return rate_rps * r0 / den if den > 0.0 else np.inf


@njit(cache=True)
def ring_count(mass, adm_at, head, held, clock, grid_step, half, survival):
    """The ring's running count at ``clock``. The admission step holds its cohort whole (it is
    not in the ring's count then), so a later step reads the survival half a step on
    (``half``, the midpoint rule): the steps a cohort holds its slots sum to its mean
    residence, not half a step more."""
    n_grid = survival.size
    out = 0.0
    first = min(held, mass.size - head)  # the ring from head to its end, then from 0 (no modulo)
    for lo, hi in ((head, head + first), (0, held - first)):
        for c in range(lo, hi):
            x = (clock - adm_at[0, c]) / grid_step + half
            j = int(x)
            if j < n_grid - 1:
                out += mass[c] * _read(survival, x, j, adm_at[1, c] / (grid_step * grid_step))
    return out


@njit(cache=True)
def _read(survival, x, j, var):
    """The survival read at ``x`` (grid units, ``j = int(x)``) by linear interpolation, for a
    cohort whose admission times spread with variance ``var`` (grid units^2) about its mean:
    plus ``var / 2`` times the grid's second difference (the mean of a smooth ``S`` over the
    spread; reading the mean alone took a flat count 0.3 % low with cohorts of about 7 steps,
    the wait 3 %)."""
    f = x - j
    out = survival[j] * (1.0 - f) + survival[j + 1] * f
    if var > 0.0 and j >= 1:
        out += 0.5 * var * (survival[j - 1] - 2.0 * survival[j] + survival[j + 1])
    return out


@njit(cache=True)
def warm_ring(mass, adm_at, clock, rate_rps, dt, servers, r0, r1, survival, grid_step):
    """Fill the ring with the flat state at ``rate_rps``: a cohort of ``rate dt`` admitted at
    each of the steps before ``clock`` that the survival reaches, the clock having run at the
    flat count's speed; returns ``(head, held)``."""
    n_flat = flat_count(rate_rps, servers, r0, r1)
    res_s = r0 + r1 * n_flat / servers
    step = dt / res_s  # progress per step at the flat count
    n = min(int((survival.size - 1) * grid_step / step) + 1, mass.size)
    for t in range(n):
        mass[t] = rate_rps * dt
        adm_at[0, t] = clock - (n - t) * step
        adm_at[1, t] = 0.0
    return 0, n
