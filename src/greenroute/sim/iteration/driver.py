"""Compiled driver: place a sorted batch of arrivals on iteration-level servers.

For each arrival (sorted by time) the region's candidate servers (serving the request's model,
with KV blocks that can ever hold it) are advanced to the arrival time, one is picked by the
region's built-in local policy, and the request is queued there. At the end every server is
advanced to ``t_end`` (the epoch end); work still in flight stays in the state.

Local policy codes (as ``greenroute.sim.kernel``): 0 round robin over candidates; 1 least
connections (running + queued); 2 least loaded (tokens of work left, queued + running:
prefill tokens left + decode steps left); 3 random (``u_local[i]`` uniform in [0, 1) picks the
candidate ``floor(u x n)``). Ties go to the lowest server index.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from greenroute.sim.iteration.kernel import (
    DROP_KV_OVERFLOW,
    DROP_NO_SERVER,
    _drop_now,
    advance,
    advance_server,
    enqueue,
    fits,
)

LP_ROUND_ROBIN = 0
LP_LEAST_CONNECTIONS = 1
LP_LEAST_LOADED = 2
LP_RANDOM = 3


@njit(cache=True)
def _candidate(s, m, prompt, output, cfg):
    return cfg[1][s] == m and fits(s, prompt, output, cfg)


@njit(cache=True)
def run_arrivals(
    t_arr, region, model, req_id, prompt, output, u_local, t_end, region_start, lp_code, cfg,
    cost, st, out_server,
):  # fmt: skip
    """Place arrivals ``i`` (sorted by ``t_arr``) and advance all servers to ``t_end``.

    ``out_server[i]`` gets the chosen server (-1 when no server could take it); the outcome of
    every request (also later drops) lands in the state's completion log."""
    qlen, nrun, work_tok, rr = st[6], st[8], st[11], st[13]
    n = t_arr.shape[0]
    for i in range(n):
        r = region[i]
        m = model[i]
        t = t_arr[i]
        p = prompt[i]
        o = output[i]
        s0 = region_start[r]
        s1 = region_start[r + 1]
        n_model = 0
        n_cand = 0
        for s in range(s0, s1):
            if cfg[1][s] == m:
                n_model += 1
                if fits(s, p, o, cfg):
                    n_cand += 1
        out_server[i] = -1
        if n_cand == 0:
            reason = DROP_NO_SERVER if n_model == 0 else DROP_KV_OVERFLOW
            _drop_now(-1 if n_model == 0 else s0, req_id[i], t, p, o, reason, st)
            continue
        code = lp_code[r]
        chosen = -1
        if code == LP_ROUND_ROBIN:
            nreg = s1 - s0
            for j in range(nreg):
                s = s0 + (rr[r] + j) % nreg
                if _candidate(s, m, p, o, cfg):
                    chosen = s
                    rr[r] = (s - s0 + 1) % nreg
                    break
        elif code == LP_RANDOM:
            k = int(u_local[i] * n_cand)
            if k >= n_cand:
                k = n_cand - 1
            for s in range(s0, s1):
                if _candidate(s, m, p, o, cfg):
                    if k == 0:
                        chosen = s
                        break
                    k -= 1
        else:
            best = np.inf
            for s in range(s0, s1):
                if not _candidate(s, m, p, o, cfg):
                    continue
                advance_server(s, t, cfg, cost, st)
                if code == LP_LEAST_CONNECTIONS:
                    score = float(nrun[s] + qlen[s])
                else:
                    score = float(work_tok[s])
                if score < best:
                    best = score
                    chosen = s
        out_server[i] = chosen
        enqueue(chosen, req_id[i], t, p, o, cfg, cost, st)
    advance(0, qlen.shape[0], t_end, cfg, cost, st)
