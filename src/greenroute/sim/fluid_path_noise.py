"""Minute rate noise on the seed's own path, for iteration servers behind a state-aware router
(least-loaded, least-connections) in the fluid model: the noise's part of the slot wait is the
pathwise cohort model (``fluid_minute_path.path_pieces``) run on the group's arrivals of each
minute, less the same model's stationary wait at the epoch's mean rate (which the fluid's
stationary slot wait already holds). It replaces, for these routers, the expectation over the
noise (Gauss-Hermite nodes and ``fluid_noise_backlog.lookback_lindley``), which read the engine's
TTFT +8.7 / +15.1 % high over 2 / 16 least-loaded servers at 75 % and the scenarios' default
noise; this reads them -1.8 / -0.2 %, every noisy least-loaded and least-connections case
within 2.7 % (docs/fluid_iteration_gap.md, "The pathwise noise term in the fluid").

The model's inputs come from the fluid's own profile and count law, per group and epoch
(``fluid_iteration_kernel.iteration_epoch`` fills ``law[g]``):

* the residence law ``r0 + r1 n`` (s) at ``n`` slots held per server: the line through the
  epoch's point (``n_occ``, ``n_occ / lam``) and the saturated one (``S``, ``S w'``). ``n_occ =
  N + d1 z N / d(N) + p / (1 - p)``: the running decodes ``N`` (``fluid_iteration_core.
  running``), Jensen's term of the decode step ``d(n) ~ d0 + d1 n`` over one server's count
  spread ``z N`` (decode-only iterations hold the iteration average ``N``, so their time average
  is higher), and the prompt a prefill iteration (a share ``p = lam E[tau]`` of the time) holds
  besides the count an arrival meets. ``w'``: server-seconds per request at the cap when a
  prefill iteration carries at most ``S - 1`` decodes (its prompt holds a slot; the fluid's
  ``saturation_work_s`` lets it carry ``S``, 0.28 % more throughput than the engine's);
* the residence of a class-``c`` request ``tau_c + (O - 1) t``, ``tau_c`` its prefill
  iteration, ``O`` its output length (the service's samples), ``t`` the time per output token
  that gives the mean ``n_occ / lam``;
* the stall of admitted prompts ``E[tau] - d``; the region's count spread ``(1 + stall)^2`` and
  one server's ``z`` (``fluid_route_wait.route_peakedness``); a full server's wait for a slot:
  least-loaded its first completion (``first_completion_wait``), least-connections the mean
  residual cycle; the requests queued ahead there are in the region's count on the path (the
  stationary model's queue-ahead term on top read the noisy cases 2-3 points high).

Each group's arrivals per minute: the group's epoch total spread over the epoch's pieces
(minutes) in the proportions of its origins' own counts (``data.workload.PieceCounts``), each
origin weighted by its interactive requests routed to the group. The state (cohorts, clock,
queue, count variance) is carried from epoch to epoch and forked with the fluid state.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from greenroute.sim.fluid_minute_path import (
    HELD,
    VAR,
    empty_state,
    flat_variance,
    path_pieces,
    readout,
    server_count_spread,
)

# The model's step (s): 1 / 2 s read ll75s -4.2 / -8.4 % where 0.5 s reads -2.4 % (stepping every
# minute, before the free minutes and merged cohorts below)
PATH_STEP_S = 0.5
# A minute with no queue whose running count and flat count stay below this share of the
# group's slots is read off the model's flat state, not stepped (``path_pieces``' free pieces):
# residences of about 10 s settle within a minute. Against stepping every minute, ll16_75s /
# ll75s / ll85n / d_ll85n read -0.26 / -2.27 / +0.01 / +3.69 % (stepped) and -0.21 / -2.22 /
# -0.51 / +3.40 % (free below 0.9); GeoManager-v0's random steps 3,040 -> 4,460 /s (fc52355,
# before the path: 7,250 /s; same machine, back to back)
FREE_OCCUPANCY = 0.9
# A step's admissions join the newest cohort while it is younger than this many grid steps
# (their mean admission time and its variance, read to second order): the ring walk, the
# stepped minutes' cost, is about 4x shorter (343 against 1,316 ns a step over 16 x 24 slots
# at 85 %) and the cases above read within 0.2 points of unmerged cohorts (ll16_75s -0.43,
# ll75s -2.42 %); 6 steps read them 14-16 % low
MERGE_GRID = 3.0
# The residence survival is cut where it falls below this (ll16_75s: 82 of 360 grid points
# hold all but 0.02 % of the mean residence; the ring walk's cost is the points kept)
SURVIVAL_FLOOR = 1e-4
# Cohorts a group's ring holds: merged cohorts (``MERGE_GRID``) over a survival cut at
# ``SURVIVAL_FLOOR`` number about 30-100 (a full ring retires its oldest early); the ring is
# copied with every fork's snapshot, so it is kept to this (geo10's one-epoch fork evaluations,
# `make bench`: 4,433 /s at fc52355, 3,557 with a ring of 4 x 1024, 4,170 with 1024; the
# calibration cases read the same to the printed digit)
RING_CAP = 1024
SURVIVAL_POINTS_MAX = 1024  # grid points of the residence survival at most
# law[g, :] columns, filled by ``fluid_iteration_kernel.iteration_epoch`` for groups on the path
L_ON, L_LAM, L_NOCC, L_R0, L_R1, L_PREFILL, L_PT, L_AMP, L_SERVER, L_WFULL = range(10)
L_PW, L_COND, L_SHARE0, L_TAU0, L_TAU1 = range(10, 15)
N_LAW = 15


def output_survival(outputs: list[np.ndarray]) -> np.ndarray:
    """``sf[c, k] = P(O_c - 1 > k)`` of each class's output-length samples, ``k = 0 .. K`` (the
    longest output; 0 beyond): what the residence survival reads."""
    k_max = max((int(np.max(o)) for o in outputs if np.size(o)), default=1)
    sf = np.zeros((len(outputs), k_max + 1))
    for c, o in enumerate(outputs):
        o = np.asarray(o, dtype=np.int64).ravel()
        if o.size:
            below = np.bincount(np.clip(o - 1, 0, k_max), minlength=k_max + 1).cumsum()
            sf[c] = 1.0 - below / o.size
    return sf


def new_path_state(n_groups: int, on: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Empty regions for ``n_groups`` groups: ``(mass, admitted_at, scalars)``, one row each
    (``fluid_minute_path.new_state``); with ``on`` False (no group on the path) rings of no
    cohorts, so that fork snapshots copy nothing for them."""
    return empty_state(RING_CAP if on else 0, (n_groups,))


@njit(cache=True)
def residence_survival(out_sf, law_row, grid_step, surv):
    """``surv[j] = P(R / E[R] > j grid_step)`` of the group's class mix (``law_row``: class 0's
    share, each class's prefill iteration, the time per output token, the mean residence);
    returns the points used: the survival is 0 at the last (cut below ``SURVIVAL_FLOOR``), or
    the buffer ends."""
    r_mean = law_row[L_NOCC] / law_row[L_LAM]
    pt = law_row[L_PT]
    share0 = law_row[L_SHARE0]
    n_c = out_sf.shape[0]
    k_max = out_sf.shape[1] - 1
    x_max = 0.0
    for c in range(n_c):
        x_max = max(x_max, (law_row[L_TAU0 + c] + k_max * pt) / r_mean)
    n_pts = min(math.ceil(x_max / grid_step) + 2, surv.size)
    for j in range(n_pts):
        s = 0.0
        for c in range(n_c):
            w = share0 if c == 0 else 1.0 - share0
            if w <= 0.0:
                continue
            y = (j * grid_step * r_mean - law_row[L_TAU0 + c]) / pt if pt > 0 else -1.0
            if y < 0.0:
                s += w
            elif y < k_max:
                s += w * out_sf[c, int(y)]
        surv[j] = s
        if s < SURVIVAL_FLOOR:  # the rest of the tail is cut (read_steps restores the mean)
            surv[j] = 0.0
            return j + 1
    return n_pts


@njit(cache=True)
def read_steps(surv, n_pts):
    """Steps a cohort holds its slots as ``fluid_minute_path.path_pieces`` reads ``surv`` at
    the reference speed: whole in its admission step, then at grid points 1.5, 2.5, ... (the
    midpoint rule); its mean residence in grid steps. ``path_epoch`` scales the grid by it so
    that the path's mean residence is the law's exactly (the Normal readout's tail moves about
    12 % per request held at 83 % of the slots: a grid's 0.3 % off the mean read 9 % off the
    stationary wait)."""
    out = 1.0
    for j in range(1, n_pts - 1):
        out += 0.5 * (surv[j] + surv[j + 1])
    return out


@njit(cache=True)
def stationary_wait(law_row, servers, slots):
    """``(mean wait, chance to wait)`` the model reads at the epoch's flat mean rate: ``servers
    n_occ`` in the region, the variance the closure settles at about it
    (``fluid_minute_path.flat_variance``, ``(1 + stall)^2`` times the count below the slots;
    ``readout``; the flat path settles there: ``tests/test_fluid_path_noise.py``)."""
    n_tot = servers * law_row[L_NOCC]
    z = server_count_spread(law_row[L_AMP], law_row[L_SERVER], servers)
    var = flat_variance(n_tot, law_row[L_AMP], servers * slots)
    return readout(n_tot, var, 0.0, servers, slots, z, capacity_rps(law_row, servers, slots),
                   law_row[L_WFULL])  # fmt: skip


@njit(cache=True)
def capacity_rps(law_row, servers, slots):
    """The region's saturated rate (req/s) on the residence law: ``servers slots`` held for
    ``r0 + r1 slots`` s each."""
    return servers * slots / (law_row[L_R0] + law_row[L_R1] * slots)


@njit(cache=True)
def path_epoch(
    law, g_servers, g_slots, pieces, piece_len_s, p0, p1, n_int, epoch_s, out_sf, mass, adm_at,
    scal, pw, cond,
):  # fmt: skip
    """Epoch's noise part of the slot wait for every group with ``law[g, L_ON]``, in place of
    ``pw``/``cond``: the stationary wait at the epoch's mean rate (``law``'s ``L_PW`` x
    ``L_COND``) plus the path's arrival-weighted mean wait over pieces ``p0 .. p1 - 1``
    (``pieces[p, o]`` arrivals of origin ``o``, ``piece_len_s[p]`` long) less its
    ``stationary_wait``; the chance to wait moves by the same difference of the path's. A group
    off the path (saturated at its mean rate: no line to draw) drops its path state."""
    n_g = law.shape[0]
    n_p = p1 - p0
    counts = np.zeros(n_p)
    waits = np.zeros(n_p)
    pwait = np.zeros(n_p)
    surv = np.zeros(SURVIVAL_POINTS_MAX)
    n_o = pieces.shape[1]
    for g in range(n_g):
        if law[g, L_ON] == 0.0:
            if scal[g, HELD] > 0:
                _reset(scal[g])
            continue
        srv = max(g_servers[g], 1.0)
        slots = g_slots[g]
        # the group's arrivals per piece: its total in its origins' proportions
        w_tot = 0.0
        for o in range(n_o):
            for m in range(n_int.shape[2]):
                w_tot += n_int[g, o, m]
        counts[:] = 0.0
        for o in range(n_o):
            w = 0.0
            for m in range(n_int.shape[2]):
                w += n_int[g, o, m]
            if w_tot > 0:
                w /= w_tot
            elif o == 0:
                w = 1.0  # no interactive requests: spread like the first origin
            else:
                continue
            o_tot = 0.0
            for p in range(n_p):
                o_tot += pieces[p0 + p, o]
            for p in range(n_p):
                share = pieces[p0 + p, o] / o_tot if o_tot > 0 else piece_len_s[p0 + p] / epoch_s
                counts[p] += w * share
        total = law[g, L_LAM] * srv * epoch_s
        r_mean = law[g, L_NOCC] / law[g, L_LAM]
        for p in range(n_p):
            counts[p] *= total
        grid = PATH_STEP_S / r_mean
        n_pts = residence_survival(out_sf, law[g], grid, surv)
        grid /= grid * read_steps(surv, n_pts)  # the read mean residence exactly the law's
        path_pieces(counts, piece_len_s[p0:p1], PATH_STEP_S, srv, slots, law[g, L_R0],
                    law[g, L_R1], surv[:n_pts], grid, capacity_rps(law[g], srv, slots),
                    law[g, L_PREFILL], law[g, L_AMP],
                    law[g, L_SERVER], law[g, L_WFULL], True, FREE_OCCUPANCY, MERGE_GRID,
                    mass[g], adm_at[g], scal[g], waits, pwait)  # fmt: skip
        num = 0.0
        num_p = 0.0
        den = 0.0
        for p in range(n_p):
            num += counts[p] * waits[p]
            num_p += counts[p] * pwait[p]
            den += counts[p]
        if not den > 0:
            continue
        w_flat, p_flat = stationary_wait(law[g], srv, slots)
        mean = max(law[g, L_PW] * law[g, L_COND] + num / den - w_flat, 0.0)
        p_wait = min(max(law[g, L_PW] + num_p / den - p_flat, 0.0), 1.0)
        if mean > 0.0 and p_wait <= 0.0:
            p_wait = 1.0
        pw[g] = p_wait
        cond[g] = mean / p_wait if p_wait > 0 else 0.0


@njit(cache=True)
def _reset(scal_row):
    """An empty region (``new_path_state``'s row)."""
    scal_row[:] = 0.0
    scal_row[VAR] = -1.0
