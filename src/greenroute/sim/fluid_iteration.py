"""Fluid model of the iteration-level server (``server_model="iteration"``): profile, then
predict (Vidur's approach, Agrawal et al., MLSys 2024).

Profile (once, from the same cost curves and length samples as the iteration engine,
``sim/iteration_mode.cost_tables``): per perf type ``t``, class ``c`` and number ``n`` of
running decodes, the prefill iteration of one prompt ``P`` (whole-prompt mode, token budget
``B``): the decodes it carries ``a(P, n) = min(n, max(0, B - P))`` and its duration
``tau(P, n) = 1.1 prompt(P + a)`` if ``a > 0`` else ``prompt(P)`` (splitwise-sim
``performance_model.py:238-253``); tables of ``E[tau]``, ``E[tau^2]``, ``E[a]`` over ``n``.

Predict, per server with Poisson arrivals ``lam`` (requests/s) and ``N`` running decodes:

* tokens: every request needs ``O - 1`` decode tokens after the token of its prefill
  iteration; prefill iterations carry ``lam E[a]`` of them per second, decode-only iterations
  (duration ``d(N)``, the decode step) the rest: their rate is ``R_d = lam (O - 1 - E[a]) / N``;
* time: the server iterates whenever a request runs: ``lam E[tau] + R_d d(N) = 1 - exp(-N)``
  (busy share; the M/G/inf chance of an empty server), a fixed point in ``N``;
* capacity (``N`` = the running cap ``S``): one request costs
  ``w = E[tau](S) + (O - 1 - E[a](S)) d(S) / S`` server-seconds; utilisation = ``lam w``.
* dynamic energy per request: prefill iterations draw peak power, a decode-only iteration of
  ``n`` requests ``idle + (peak - idle) n / S`` (``iteration_mode.cost_tables``):
  ``(peak - idle) (E[tau] + (O - 1 - E[a]) d(N) / S)`` joules;
* TTFT = 2 net + the residual of the iteration running at arrival (Poisson arrivals see the
  time average: ``(lam E[tau^2] + R_d d^2) / 2``) + the request's own prefill iteration
  ``E[tau](N)`` + the prompts queued ahead of it (FCFS admission): those that arrived since
  the running iteration started, ``lam_c x E[age]`` of class ``c`` with ``E[age]`` = the mean
  residual, each costing ``ahead[t, c]`` = the prompt curve's marginal time of its tokens in
  the same iteration, or its whole own iteration when the two prompts overflow the token budget
  (profiled over pairs of sampled prompts; what long deferrable prompts do to interactive ones;
  behind least-loaded and least-connections only the share ``fluid_route_wait.
  queued_prompt_share`` of it: the router seldom picks a server whose score holds a queued prompt)
  + a wait for a running slot, per server (no pooling: a request is queued at the server its
  local policy picks on arrival), by local policy: round-robin and random a birth-death queue
  at the peakedness of the prefill stall and the arrivals' regularity, a G/G/1 queue at the
  saturated rate above the cap (``fluid_split_chain.split_wait``); least-connections
  Erlang C at the slot occupancy and the pooled queue's peakedness (Hayward's approximation),
  a pooled G/G/N queue at the saturated rate given full; least-loaded
  Erlang C at the slot occupancy and the peakedness of its measured count law, the pooled
  queue's wait given full with the own server's next completion as floor, and a residual
  shortened by the router avoiding a server in a prefill iteration (``sim/fluid_route_wait.py``);
  Python policies the same M/G/c at peakedness 1.
* minute rate noise (lognormal, piecewise constant per ``NOISE_PERIOD_S``; within an epoch of
  ``k`` minutes its log-sd is ``sigma sqrt(1 - 1/k)``, the epoch's counts holding the mean),
  over Gauss-Hermite nodes ``m_k`` weighted by arrivals. The fast part: each underloaded node's
  minute starts at the mean rate's stationary wait and relaxes toward its own (M/G/S, ``N``
  re-solved at the node's rate, held at ``RHO_MAX_STABLE``) over the share ``1 - tau/T (1 -
  exp(-T/tau))`` of the way, Odoni & Roth's relaxation time ``tau = (1 + scv) (N / lam) / S /
  (2.8 (1 - sqrt(N/S))^2)``; an overloaded node's minute keeps the mean rate's wait. The fixed
  part above (residual, prompts ahead, own iteration) likewise arrival-weighted over the nodes
  at each node's rate (not for round-robin, which keeps the mean rate's Erlang-k residual).
  The slow part: the backlog carried from minute to minute (``fluid_noise_backlog.
  lookback_lindley``: Lindley's recursion with increments ``(u m - 1) T`` plus the queue's own
  arrival and completion variability, each epoch's minutes conditioned on its realised count,
  Spitzer's series over windows that look back over the epochs before, arrival-weighted within
  the minute; less the same without noise). An arrival that meets that backlog waits for it to
  clear and for a slot only beyond it (``wait_with_backlog``: the mean of the larger of the two
  waits, each exponential above its atom; adding them overstated every router's noise by 7-8 %
  at 85 %).
  Behind least-loaded and least-connections, where the scenario has minute noise, the slot
  wait's noise part is instead the pathwise cohort model run on the seed's own minute counts
  (``fluid_path_noise``): the expectation above read 2 / 16 least-loaded servers at 75 % and
  the scenarios' default noise +8.7 / +15.1 % high, the path -1.8 / -0.2 % (its median, p99 and
  SLO share within 12 / 6 / 2 % of the engine's; docs/fluid_iteration_gap.md, "The pathwise
  noise term in the fluid").

Power caps: a cap leaving ``k`` of ``S`` slots usable gives a running cap ``k`` and prefill
iterations stretched by ``S / k`` at ``k / S`` of their dynamic power, as the engine throttles
(``iteration_mode.throttled``; ``FluidBackend._iteration_capped``).

No fitted constant (2.8 is Odoni & Roth's published one). Every calibration case of
``tests/test_fluid_iteration_calibration.py`` is within 5 % (``docs/fluid_iteration_gap.md``,
measured); the class mixes over 4-8 servers under least-loaded pass as a net of parts still off
(arrivals meet the cap 5-21 % more often than Erlang C's time average and wait 13-22 % longer
given it; the fixed part is 6 ms long). Prompts arriving after a request but before its
iteration starts may share that iteration in the engine; the model leaves them out (counting
them too, ``2 resid`` instead of ``resid``, overshot the single region by +7 % at 60 %).
"""

from __future__ import annotations

import numpy as np

from greenroute.sim.iteration.cost import MIXED_FACTOR_SPLITWISE
from greenroute.sim.iteration.state import MAX_BATCHED_TOKENS_DEFAULT
from greenroute.sim.service import interp_extrap

N_PROFILE_SAMPLES = 1 << 14  # prompt lengths per class for the profile tables (mean error ~1 %)
FIXED_POINT_ITERS = 30


class IterationProfile:
    """Profile tables per (perf type, class): ``tau[t, c, n]``, ``tau2``, ``adv``, n = 0..S."""

    def __init__(self, built, prompt: list[np.ndarray], output: list[np.ndarray]) -> None:
        n_t = built.type_ok.shape[0]
        n_c = len(prompt)
        s_max = int(built.decode_s.shape[1] - 1)
        self.s_max = s_max
        self.tau = np.zeros((n_t, n_c, s_max + 1))
        self.tau2 = np.zeros_like(self.tau)
        self.adv = np.zeros_like(self.tau)
        self.e_out = np.zeros(n_c)
        self.e_out2 = np.zeros(n_c)
        self.ahead = np.zeros((n_t, n_c))
        budget = MAX_BATCHED_TOKENS_DEFAULT
        p_int = np.asarray(prompt[0], dtype=float)[:N_PROFILE_SAMPLES] if n_c else np.zeros(0)
        n = np.arange(s_max + 1, dtype=float)
        for c in range(n_c):
            p = np.asarray(prompt[c], dtype=float)[:N_PROFILE_SAMPLES]
            o = np.asarray(output[c], dtype=float)
            if p.size == 0:
                continue
            self.e_out[c] = o.mean()
            self.e_out2[c] = (o * o).mean()
            a = np.minimum(n[None, :], np.maximum(0.0, budget - p[:, None]))  # [P, n]
            for t in range(n_t):
                if not built.type_ok[t]:
                    continue
                x, y = built.prefill_tok[t], built.prefill_s[t]
                mixed = MIXED_FACTOR_SPLITWISE * interp_extrap((p[:, None] + a).ravel(), x, y)
                alone = interp_extrap(p, x, y)
                tau = np.where(a > 0, mixed.reshape(a.shape), alone[:, None])
                self.tau[t, c] = tau.mean(axis=0)
                self.tau2[t, c] = (tau * tau).mean(axis=0)
                self.adv[t, c] = a.mean(axis=0)
                if p_int.size:  # an interactive prompt queued behind a class-c one
                    k = min(p.size, p_int.size)
                    pc, pi = p[:k], p_int[np.arange(k) % p_int.size]
                    own = interp_extrap(pi, x, y)
                    both = interp_extrap(pc + pi, x, y)
                    self.ahead[t, c] = np.where(pc + pi > budget, alone[:k], both - own).mean()
        self.decode = built.decode_s  # [T, B+1]

    @classmethod
    def from_arrays(cls, built, arrays) -> IterationProfile:
        """A profile from its stored tables (``tau``, ``tau2``, ``adv``, ``e_out``, ``e_out2``)."""
        prof = cls.__new__(cls)
        prof.s_max = int(built.decode_s.shape[1] - 1)
        for k in ("tau", "tau2", "adv", "e_out", "e_out2", "ahead"):
            setattr(prof, k, np.asarray(arrays[k], dtype=np.float64))
        prof.decode = built.decode_s
        return prof


def interp_n(table: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``table[..., n]`` at fractional ``n`` (clipped to the table)."""
    k = table.shape[-1] - 1
    n = np.clip(n, 0.0, k)
    lo = np.floor(n).astype(np.int64)
    hi = np.minimum(lo + 1, k)
    w = n - lo
    tl = np.take_along_axis(table, lo[..., None], axis=-1)[..., 0]
    th = np.take_along_axis(table, hi[..., None], axis=-1)[..., 0]
    return tl * (1 - w) + th * w


def predict(prof: IterationProfile, lam: np.ndarray, types: np.ndarray, slots: np.ndarray) -> dict:
    """Steady state of servers with arrival rates ``lam[g, c, m]`` (requests/s per server) of
    perf types ``types[g, m]`` and running cap ``slots[g]``: running decodes ``n``, per-class
    dynamic energy per request over ``peak - idle`` (seconds at peak, ``[G, C, M]``), the mean
    prefill iteration ``tau[G, C, M]`` and the arrival-time residual iteration ``resid[G]``."""
    n_g, n_c, n_m = lam.shape
    s = slots.astype(float)
    lam_tot = lam.sum(axis=(1, 2))

    def parts(n):
        d = np.zeros(n_g)
        tau = np.zeros((n_g, n_c, n_m))
        tau2 = np.zeros_like(tau)
        adv = np.zeros_like(tau)
        for m in range(n_m):
            t = types[:, m]
            dm = interp_n(prof.decode[t], n)
            w = lam[:, :, m].sum(axis=1)
            d += np.where(lam_tot > 0, w / np.maximum(lam_tot, 1e-300), 0.0) * dm
            for c in range(n_c):
                tau[:, c, m] = interp_n(prof.tau[t, c], n)
                tau2[:, c, m] = interp_n(prof.tau2[t, c], n)
                adv[:, c, m] = interp_n(prof.adv[t, c], n)
        return d, tau, tau2, adv

    o1 = np.maximum(prof.e_out[None, :, None] - 1.0, 0.0)

    def excess(n):
        d, tau, _, adv = parts(n)
        dec = (lam * np.maximum(o1 - adv, 0.0)).sum(axis=(1, 2))
        return (lam * tau).sum(axis=(1, 2)) + dec * d / np.maximum(n, 1e-9) - (1 - np.exp(-n))

    lo = np.full(n_g, 1e-6)
    hi = s.copy()
    for _ in range(FIXED_POINT_ITERS):
        mid = 0.5 * (lo + hi)
        pos = excess(mid) > 0
        lo = np.where(pos, mid, lo)
        hi = np.where(pos, hi, mid)
    n = np.where(excess(s) >= 0, s, 0.5 * (lo + hi))  # saturated: the running cap
    n = np.where(lam_tot > 0, n, 0.0)
    d, tau, tau2, adv = parts(n)
    dec_tok = np.maximum(o1 - adv, 0.0)  # decode-only tokens per request
    energy_s = tau + dec_tok * d[:, None, None] / s[:, None, None]
    r_d = (lam * dec_tok).sum(axis=(1, 2)) / np.maximum(n, 1e-9)
    resid = 0.5 * ((lam * tau2).sum(axis=(1, 2)) + r_d * d * d)
    return {"n": n, "d": d, "tau": tau, "energy_s": energy_s, "resid": resid, "r_d": r_d}


def saturation_work_s(
    prof: IterationProfile,
    types: np.ndarray,
    slots: np.ndarray,
    prefill_stretch: np.ndarray | None = None,
) -> np.ndarray:
    """Server-seconds per request at the running cap, ``w[g, c, m]`` (1 / sustainable rate);
    ``prefill_stretch[g]`` lengthens prefill iterations (a power cap: ``S / k``)."""
    n_g, n_m = types.shape
    n_c = prof.e_out.size
    s = slots.astype(float)
    st = np.ones(n_g) if prefill_stretch is None else np.asarray(prefill_stretch, dtype=float)
    w = np.zeros((n_g, n_c, n_m))
    for m in range(n_m):
        t = types[:, m]
        d = interp_n(prof.decode[t], s)
        for c in range(n_c):
            tau = interp_n(prof.tau[t, c], s) * st
            adv = interp_n(prof.adv[t, c], s)
            w[:, c, m] = tau + np.maximum(prof.e_out[c] - 1.0 - adv, 0.0) * d / s
    return w


def class_moments(prompt: np.ndarray, output: np.ndarray) -> tuple[float, float, float]:
    """``(E[O^3], E[P], E[P^2])`` of a class's output and prompt-length samples (the kernel's
    ``c_mom`` row: the remaining work's spread, and the prompt tokens in a least-loaded score,
    ``fluid_route_wait.queued_prompt_share``)."""
    x = np.asarray(output, dtype=float).ravel()
    p = np.asarray(prompt, dtype=float).ravel()
    return (
        float((x**3).mean()) if x.size else 0.0,
        float(p.mean()) if p.size else 0.0,
        float((p * p).mean()) if p.size else 0.0,
    )


def split_order(codes: np.ndarray, g_region: np.ndarray, g_servers: np.ndarray) -> np.ndarray:
    """How each group's servers get their arrivals, from the region's local policy (a declared
    choice, ``fluid_split_chain.split_wait``): ``k >= 2`` round-robin over the region's
    ``k`` servers (Erlang-k gaps), ``1`` random (Poisson thinning), ``0`` state-aware routing
    (least-loaded, least-connections: join-the-shortest-queue) or a Python policy, kept on the
    per-server M/G/S wait. Round-robin over one server is Poisson (``1``)."""
    from greenroute.sim import kernel as K

    per_region = np.bincount(g_region, weights=g_servers, minlength=codes.size)
    code = codes[g_region]
    rr = np.maximum(np.rint(per_region[g_region]), 1.0).astype(np.int64)
    return np.where(code == K.LP_ROUND_ROBIN, rr, np.where(code == K.LP_RANDOM, 1, 0))


def routing(codes: np.ndarray, g_region: np.ndarray, g_servers: np.ndarray) -> np.ndarray:
    """Each group's routing as the kernel reads it, ``[G, 3]`` int: ``split_order``; the
    state-aware router (``fluid_route_wait.ROUTE_LEAST_LOADED`` / ``ROUTE_LEAST_CONNECTIONS``,
    ``ROUTE_NONE`` otherwise); the region's server count ``N``. A state-aware router over one
    server has nothing to choose: it is Poisson arrivals (split ``1``), as round-robin is."""
    from greenroute.sim import fluid_route_wait as RW
    from greenroute.sim import kernel as K

    per_region = np.bincount(g_region, weights=g_servers, minlength=codes.size)
    code = codes[g_region]
    n = np.maximum(np.rint(per_region[g_region]), 1.0).astype(np.int64)
    route = np.where(
        code == K.LP_LEAST_LOADED,
        RW.ROUTE_LEAST_LOADED,
        np.where(code == K.LP_LEAST_CONNECTIONS, RW.ROUTE_LEAST_CONNECTIONS, RW.ROUTE_NONE),
    )
    split = split_order(codes, g_region, g_servers)
    alone = (route != RW.ROUTE_NONE) & (n == 1)
    split = np.where(alone, 1, split)
    route = np.where(alone, RW.ROUTE_NONE, route)
    return np.stack([split, route, n], axis=1).astype(np.int64)


def correct_epoch(fl, e: int) -> np.ndarray:
    """After ``fluid_step`` of epoch ``e`` on iteration servers (compiled:
    ``fluid_iteration_kernel.iteration_epoch``): the dynamic energy of each group at its
    running decodes (the kernel charged saturation cost), the slot wait (M/G/c, ``c`` = running
    cap, service = residence ``N / lam``, averaged over the minute rate noise) in place of the
    kernel's wait, and the epoch's info figures. Returns the fixed part of interactive TTFT per
    group (residual iteration + own prefill iteration)."""
    from greenroute.sim import fluid_iteration_kernel as IK
    from greenroute.sim import fluid_kernel as FK

    b0, slope, cap, pw, cond, _es_mix, served = fl.out
    IK.iteration_epoch(e, float(fl.sc.epoch_s), fl.n_gcm, served, *fl.it_cur, fl.n_int,
                       *fl.it_par, fl.it_dyn_kwh, fl.busy_slot_s, pw, cond, fl.pre,
                       fl.noise_hist, fl.path_law)  # fmt: skip
    if fl.path_on:
        from greenroute.sim.fluid_path_noise import path_epoch

        run_cap = fl.it_cur[-1]
        path_epoch(fl.path_law, fl.g_servers, run_cap, *fl.path_pieces, int(fl.path_first[e]),
                   int(fl.path_first[e + 1]), fl.n_int, float(fl.sc.epoch_s), fl.path_out_sf,
                   fl.path_mass, fl.path_adm, fl.path_scal, pw, cond)  # fmt: skip
    IK.epoch_info(e, fl.it_dyn_kwh, fl.k_info[0], fl.k_info[1], fl.info, fl.it_static[6],
                  fl.pre, fl.e_pf_it)  # fmt: skip
    k = fl.k_info
    misses = FK.slo_misses(fl.n_int, fl.k_static[0], k[3], fl.e_pf_it, k[2], b0, slope, cap,
                           pw, cond, float(fl.k_static[8][8]), float(fl.sc.epoch_s))  # fmt: skip
    fl.info[5] = misses + fl.acc[FK.ACC_EPOCH_LATE]
    return fl.pre
