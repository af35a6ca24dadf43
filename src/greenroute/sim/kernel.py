"""Request-level serving kernel (numba): FIFO multi-slot servers with KV-cache memory.

Each server (one serving instance) has ``slots`` continuous-batching seats and a KV budget.
Requests are placed on arrival at the region (FIFO per server, no preemption), so a request's
start and finish are known the moment it is placed. For times at or after
``t0 = max(arrival, last start on the server)`` every slot holds at most one relevant request
(its last one), which makes the earliest feasible start exact: the first candidate time at
which fewer than ``slots`` requests run and their KV plus the new request's fits.

Service time = prefill(prompt) + output_tokens x decode_step(batch at start), from the perf
tables; TTFT adds queue wait, cold model load (when the server must swap models) and 2x the
one-way network latency (seed 001 eq. 3).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from greenroute.core.errors import ConfigError

# local policy codes used by the compiled path
LP_ROUND_ROBIN = 0
LP_LEAST_CONNECTIONS = 1
LP_LEAST_LOADED = 2
LP_RANDOM = 3
LP_PYTHON = -1  # a user policy: the Python path calls its pick()

# drop reasons
DROP_NONE = 0
DROP_QUEUE_FULL = 1
DROP_KV_OVERFLOW = 2
DROP_NO_SERVER = 3
DROP_POWER_CAP = 4
DROP_PREEMPTION_LIMIT = 5  # iteration server model only (sim/iteration: recompute bound)
DROP_REASONS = (
    "none", "queue_full", "kv_overflow", "no_server_for_model", "power_cap", "preemption_limit",
)  # fmt: skip
# Which ineligibility explains a drop when the region's servers disagree (lower wins): a server
# that could host the request but has no usable slot under a power cap names the cap; one
# whose KV cache is too small comes next; "no server for the model" only when nothing could.
_DROP_RANK = np.array([3, 3, 1, 2, 0, 3], dtype=np.int64)


def kernel_code(policy: object) -> int:
    """The compiled kernel's code for a local policy (its optional ``kernel_code`` attribute),
    or ``LP_PYTHON``: the engine then calls the policy's ``pick`` for every request."""
    code = getattr(policy, "kernel_code", LP_PYTHON)
    if not isinstance(code, int) or code < LP_PYTHON or code > LP_RANDOM:
        raise ConfigError(
            f"local policy {getattr(policy, 'name', policy)!r} has an invalid kernel_code {code!r}"
        )
    return int(code)


class ServerState:
    """Mutable per-server state carried across epochs (plain numpy arrays)."""

    def __init__(
        self, server_slots: np.ndarray, server_model0: np.ndarray, queue_limit: np.ndarray
    ):
        n = server_slots.shape[0]
        bmax = int(server_slots.max()) if n else 1
        qcap = int(queue_limit.max()) + 2 if n else 2
        self.slot_free = np.full((n, bmax), -np.inf)
        self.slot_start = np.full((n, bmax), -np.inf)
        self.slot_prev = np.full((n, bmax), -np.inf)  # free time before the last assignment
        self.slot_kv = np.zeros((n, bmax))
        self.slot_tok = np.zeros((n, bmax))
        self.last_start = np.full(n, -np.inf)
        self.resident = server_model0.astype(np.int64).copy()
        self.qbuf = np.zeros((n, qcap))
        self.qhead = np.zeros(n, dtype=np.int64)
        self.qtail = np.zeros(n, dtype=np.int64)
        self.qtok = np.zeros((n, qcap))
        self.rr = np.zeros(0, dtype=np.int64)

    def ensure_regions(self, n_regions: int) -> None:
        if self.rr.shape[0] != n_regions:
            self.rr = np.zeros(n_regions, dtype=np.int64)


@njit(cache=True)
def _interp(x, xs, ys):
    n = xs.shape[0]
    if x <= xs[0]:
        if n == 1:
            return ys[0]
        slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
        v = ys[0] + slope * (x - xs[0])
        return v if v > 0.0 else 0.0
    if x >= xs[n - 1]:
        slope = (ys[n - 1] - ys[n - 2]) / (xs[n - 1] - xs[n - 2])
        return ys[n - 1] + slope * (x - xs[n - 1])
    lo = 0
    hi = n - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if xs[mid] <= x:
            lo = mid
        else:
            hi = mid
    w = (x - xs[lo]) / (xs[hi] - xs[lo])
    return ys[lo] + w * (ys[hi] - ys[lo])


@njit(cache=True)
def _queued(s, t, qbuf, qhead, qtail):
    cap = qbuf.shape[1]
    h = qhead[s]
    while h < qtail[s] and qbuf[s, h % cap] <= t:
        h += 1
    qhead[s] = h
    return qtail[s] - h


@njit(cache=True)
def _active(s, t, slots_all, slot_start, slot_free, slot_prev):
    """Slots busy at ``t``: running their last request, or still running the one before it
    (a queued request chained on the slot)."""
    n = 0
    for j in range(slots_all):
        if slot_free[s, j] > t and (slot_start[s, j] <= t or slot_prev[s, j] > t):
            n += 1
    return n


# Reassociation lets LLVM vectorise the sum (no other fast-math flag: an idle slot's free time
# is -inf). The score only ranks a region's servers, so a last-bit difference could only move a
# near tie; on the bench (``bench/perf.py``, 1.2M requests, least-loaded) every output was
# bit-identical, and the kernel ran at 700k instead of 480k requests/s.
@njit(cache=True, fastmath={"reassoc", "nsz"})
def _work_left(s, t, slots_all, slot_free):
    """Seconds of assigned work left on server ``s``'s slots at ``t``."""
    w = 0.0
    for j in range(slots_all):
        w += max(slot_free[s, j] - t, 0.0)
    return w


@njit(cache=True)
def _eligible(s, m, kv_req, server_hw, n_models, type_ok, kv_cap, slots_eff):
    t = server_hw[s] * n_models + m
    if not type_ok[t]:
        return 3
    if kv_req > kv_cap[t]:
        return 2
    if slots_eff[s] <= 0:
        return 4
    return 0


@njit(cache=True)
def _place(
    i, s, t_reg, m, prompt, output, kv_bytes_tok,
    server_hw, server_slots, slots_eff, n_models, queue_limit,
    prefill_tok, prefill_s, decode_s, kv_cap, cold_load_s,
    slot_free, slot_start, slot_prev, slot_kv, slot_tok, last_start, resident, qbuf, qhead,
    qtail, qtok, out_server, out_start, out_finish, out_prefill, out_cold, out_batch, out_drop,
):  # fmt: skip
    """Place request ``i`` on server ``s``; fill the outputs."""
    nslot = server_slots[s]
    ty = server_hw[s] * n_models + m
    kv_req = (prompt + output) * kv_bytes_tok
    if _queued(s, t_reg, qbuf, qhead, qtail) >= queue_limit[s]:
        out_drop[i] = 1
        out_server[i] = s
        return
    t0 = t_reg
    if last_start[s] > t0:
        t0 = last_start[s]
    cold = 0.0
    if resident[s] != m:
        # swap models: wait for the server to drain, then load the weights (seed 001 3.1)
        drain = -np.inf
        for j in range(nslot):
            if slot_free[s, j] > drain:
                drain = slot_free[s, j]
        cold = cold_load_s[ty]
        if drain > t0:
            t0 = drain
        t0 += cold
        resident[s] = m
    eff = slots_eff[s]
    cap = kv_cap[ty]
    # fast path: can it start at t0?
    act = 0
    used = 0.0
    for j in range(nslot):
        if slot_free[s, j] > t0:
            act += 1
            used += slot_kv[s, j]
    start = t0
    if not (act < eff and used + kv_req <= cap):
        # scan the slot free times after t0 in increasing order
        frees = np.empty(nslot)
        k = 0
        for j in range(nslot):
            if slot_free[s, j] > t0:
                frees[k] = slot_free[s, j]
                k += 1
        fr = np.sort(frees[:k])
        start = fr[k - 1]
        for q in range(k):
            tau = fr[q]
            a2 = 0
            u2 = 0.0
            for j in range(nslot):
                if slot_free[s, j] > tau:
                    a2 += 1
                    u2 += slot_kv[s, j]
            if a2 < eff and u2 + kv_req <= cap:
                start = tau
                break
    # batch size at start (this request included) and the slot to use
    batch = 1
    best = -1
    best_free = np.inf
    for j in range(nslot):
        f = slot_free[s, j]
        if f > start:
            batch += 1
        elif f < best_free:
            best_free = f
            best = j
    bmax = decode_s.shape[1] - 1
    bidx = batch if batch <= bmax else bmax
    pf = _interp(float(prompt), prefill_tok[ty], prefill_s[ty])
    service = pf + output * decode_s[ty, bidx]
    slot_prev[s, best] = slot_free[s, best]
    slot_free[s, best] = start + service
    slot_start[s, best] = start
    slot_kv[s, best] = kv_req
    slot_tok[s, best] = prompt + output
    last_start[s] = start
    if start > t_reg:
        capq = qbuf.shape[1]
        qbuf[s, qtail[s] % capq] = start
        qtok[s, qtail[s] % capq] = prompt + output
        qtail[s] += 1
    out_server[i] = s
    out_start[i] = start
    out_finish[i] = start + service
    out_prefill[i] = pf
    out_cold[i] = cold
    out_batch[i] = batch
    out_drop[i] = 0


@njit(cache=True)
def run_batch(
    t_reg, region, model, prompt, output, u_local,
    region_start, lp_code, server_hw, server_slots, slots_eff, n_models, queue_limit,
    type_ok, prefill_tok, prefill_s, decode_s, kv_cap, cold_load_s, kv_bytes_per_token,
    slot_free, slot_start, slot_prev, slot_kv, slot_tok, last_start, resident, qbuf, qhead, qtail,
    qtok, rr, out_server, out_start, out_finish, out_prefill, out_cold, out_batch, out_drop,
):  # fmt: skip
    """Place every request of a batch (sorted by ``t_reg``) with the built-in local policies."""
    n = t_reg.shape[0]
    for i in range(n):
        r = region[i]
        m = model[i]
        t = t_reg[i]
        s0 = region_start[r]
        s1 = region_start[r + 1]
        kvb = kv_bytes_per_token[m]
        kv_req = (prompt[i] + output[i]) * kvb
        # candidates: eligible servers, preferring those with the model resident
        n_res = 0
        n_any = 0
        reason = 3
        for s in range(s0, s1):
            e = _eligible(s, m, kv_req, server_hw, n_models, type_ok, kv_cap, slots_eff)
            if e == 0:
                n_any += 1
                if resident[s] == m:
                    n_res += 1
            elif _DROP_RANK[e] < _DROP_RANK[reason]:
                reason = e
        out_server[i] = -1
        out_start[i] = np.nan
        out_finish[i] = np.nan
        out_prefill[i] = np.nan
        out_cold[i] = 0.0
        out_batch[i] = 0
        if n_any == 0:
            out_drop[i] = reason
            continue
        only_res = n_res > 0
        code = lp_code[r]
        chosen = -1
        if code == 0:  # round robin over candidates
            nreg = s1 - s0
            for j in range(nreg):
                s = s0 + (rr[r] + j) % nreg
                if _eligible(s, m, kv_req, server_hw, n_models, type_ok, kv_cap, slots_eff) != 0:
                    continue
                if only_res and resident[s] != m:
                    continue
                chosen = s
                rr[r] = (s - s0 + 1) % nreg
                break
        elif code == 3:  # random candidate
            ncand = n_res if only_res else n_any
            k = int(u_local[i] * ncand)
            if k >= ncand:
                k = ncand - 1
            for s in range(s0, s1):
                if _eligible(s, m, kv_req, server_hw, n_models, type_ok, kv_cap, slots_eff) != 0:
                    continue
                if only_res and resident[s] != m:
                    continue
                if k == 0:
                    chosen = s
                    break
                k -= 1
        else:
            best = np.inf
            for s in range(s0, s1):
                if _eligible(s, m, kv_req, server_hw, n_models, type_ok, kv_cap, slots_eff) != 0:
                    continue
                if only_res and resident[s] != m:
                    continue
                nslot = server_slots[s]
                if code == 1:  # least connections: running + queued
                    score = float(
                        _active(s, t, nslot, slot_start, slot_free, slot_prev)
                        + _queued(s, t, qbuf, qhead, qtail)
                    )
                else:  # least loaded: assigned work left per usable slot
                    score = _work_left(s, t, nslot, slot_free) / slots_eff[s]
                if score < best:
                    best = score
                    chosen = s
        _place(
            i, chosen, t, m, prompt[i], output[i], kvb,
            server_hw, server_slots, slots_eff, n_models, queue_limit,
            prefill_tok, prefill_s, decode_s, kv_cap, cold_load_s,
            slot_free, slot_start, slot_prev, slot_kv, slot_tok, last_start, resident, qbuf, qhead,
            qtail, qtok, out_server, out_start, out_finish, out_prefill, out_cold, out_batch,
            out_drop,
        )  # fmt: skip


@njit(cache=True)
def server_view(
    s0, s1, t, m, kv_req, server_hw, server_slots, slots_eff, n_models, type_ok, kv_cap,
    slot_free, slot_start, slot_prev, slot_tok, resident, qbuf, qhead, qtail, qtok,
):  # fmt: skip
    """Arrays describing servers ``s0..s1`` at time ``t`` for a Python local policy."""
    n = s1 - s0
    active = np.zeros(n, dtype=np.int64)
    queued = np.zeros(n, dtype=np.int64)
    slots = np.zeros(n, dtype=np.int64)
    backlog = np.zeros(n)
    tokens = np.zeros(n)
    eligible = np.zeros(n, dtype=np.bool_)
    res = np.zeros(n, dtype=np.bool_)
    capq = qbuf.shape[1]
    for k in range(n):
        s = s0 + k
        nslot = server_slots[s]
        active[k] = _active(s, t, nslot, slot_start, slot_free, slot_prev)
        queued[k] = _queued(s, t, qbuf, qhead, qtail)
        slots[k] = slots_eff[s]
        eff = slots_eff[s] if slots_eff[s] > 0 else 1
        backlog[k] = _work_left(s, t, nslot, slot_free) / eff
        tok = 0.0
        for j in range(nslot):
            if slot_free[s, j] > t and (slot_start[s, j] <= t or slot_prev[s, j] > t):
                tok += slot_tok[s, j]
        for h in range(qhead[s], qtail[s]):
            tok += qtok[s, h % capq]
        tokens[k] = tok
        eligible[k] = _eligible(s, m, kv_req, server_hw, n_models, type_ok, kv_cap, slots_eff) == 0
        res[k] = resident[s] == m
    return active, queued, slots, backlog, tokens, eligible, res
