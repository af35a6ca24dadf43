"""Iteration-level continuous-batching servers (numba): the hot loop.

Each server runs iterations back to back while it has work. An iteration's batch is chosen at
its start from the requests queued by then:

* whole-prompt mode (default; splitwise-sim ``SplitwiseInstance.select_batch``, instance.py
  717-828, see ``cost.py`` and /work/notes/splitwise_semantics.md): waiting prompts are admitted
  FCFS while they fit the token budget (the first one always does), the running set cap and the
  free KV blocks; then running decodes fill the rest of the budget, those left out of the
  previous iteration first. A decode left out keeps its KV (splitwise's "preemption").
* chunked mode (Sarathi-Serve, Agrawal et al. OSDI 2024): running decodes first, then the
  running partial prefills, then new prompts, each prefill taking a chunk of what budget remains.

KV is paged (vLLM, Kwon et al. SOSP 2023): an admitted prompt holds ceil(prefill tokens /
block_tokens) blocks, a decode that crosses a block boundary takes one more. When none is free,
the most recently admitted running request that is not already decoding in this iteration is
preempted by recompute (vLLM's default): its blocks are freed and it goes back to the head of
the queue, to re-prefill its prompt and the tokens generated so far. A request preempted
``max_preemptions`` times is dropped (``DROP_PREEMPTION_LIMIT``) at the next one; a request whose
prompt + output can never fit the server's blocks is dropped on arrival (``DROP_KV_OVERFLOW``).

The first output token comes out of the iteration that finishes the prompt's prefill (TTFT =
its end - arrival); each decode iteration then yields one token per request.

Event API: ``advance_server(s, t_until)`` runs every iteration that starts before ``t_until``;
``enqueue(s, ...)`` advances the server to the arrival time and queues the request.

Driver ``run_arrivals``: for each arrival (sorted by time) the region's candidate servers
(serving the request's model, with KV blocks that can ever hold it) are advanced to the arrival
time, one is picked by the region's built-in local policy and the request is queued there; at
the end every server is advanced to ``t_end`` (the epoch end), in-flight work stays in the
state. Local policy codes (as ``greenroute.sim.kernel``): 0 round robin over candidates; 1 least
connections (running + queued); 2 least loaded (tokens of work left, queued + running: prefill
tokens left + decode inputs left); 3 random (``u_local[i]`` uniform in [0, 1) picks candidate
``floor(u x n)``). Ties go to the lowest server index.

All compiled code, and the array-layout constants it freezes at compile time, live in this one
module on purpose: numba's on-disk cache (``cache=True``) only checks the source file of the
function it caches, so a jitted caller in another module would keep running stale code after an
edit here.

Speed: the functions that are called rather than inlined (``run_arrivals``, ``enqueue``,
``advance_server``, ``advance``, ``_score_slow`` and the profile-table lookups ``interp_n``,
``iteration_duration_s``, ``iteration_power_w``) are compiled without numba's reference-counting
runtime (``_nrt=False``; numba is pinned in pyproject.toml). They allocate nothing, and with the
runtime every call increfs and decrefs each array it is given at entry and exit, ~46 for the
``cfg``, ``cost`` and state tuples (seen in the LLVM IR); ``perf`` put 39 % of the 10-region
benchmark in those atomic updates. Without it the benchmark runs about 2.5 times as fast
(66-72k -> 176-180k requests/s on one core, 2026-11-27) with bit-identical results, and the
first run compiles no longer than before (57 s against 59 s; inlining the lookups and
``_score_slow`` instead would add 7 % of speed for 10 s more of compilation). An allocation
added to one of them fails to compile (numba: no ``np.empty`` without the runtime); it cannot
misbehave silently.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# --- entry integer fields ei[s, e, :]
EI_REQ = 0  # request id given by the caller
EI_PROMPT = 1  # prompt tokens
EI_OUTPUT = 2  # output tokens
EI_PF_TARGET = 3  # tokens the current prefill must process (prompt, or prompt+generated)
EI_PF_DONE = 4  # tokens of the current prefill already processed
EI_GEN = 5  # output tokens generated so far
EI_KV_TOK = 6  # tokens whose KV is stored
EI_BLOCKS = 7  # KV blocks held
EI_NPRE = 8  # times preempted
EI_SKIP = 9  # 1: a decode left out of the previous iteration (gets priority, as splitwise)
EI_PF_FIRST = 10  # prompt tokens prefilled for the first time
EI_RECOMP = 11  # tokens recomputed after preemptions
EI_RECOMP_PENDING = 12  # tokens of the current prefill that are a recompute
EI_DEC_IN = 13  # decode inputs processed (each produces one output token)
EI_CHUNK = 14  # prefill tokens scheduled in the current iteration
EI_DEC = 15  # 1: decodes in the current iteration
N_EI = 16
# --- entry float fields ef[s, e, :]
EF_ARRIVE = 0
EF_TFIRST = 1
EF_TLAST = 2  # time of the last output token
EF_TBT_SUM = 3
EF_TBT_MAX = 4
EF_FIRST_ITER_S = 5  # duration of the iteration that produced the first token
EF_FIRST_ITER_DEC = 6  # decodes batched with that iteration (its other members' tokens)
EF_ARR_RESID_S = 7  # at arrival: time left of the server's iteration in progress (0: idle)
EF_ARR_QUEUED = 8  # at arrival: requests queued ahead of it
N_EF = 9
# --- per-server accumulators acc[s, :]
A_ITER = 0  # iterations run
A_BUSY_S = 1  # seconds spent in iterations
A_BATCH_SUM = 2  # sum over iterations of requests in the batch
A_TOKENS = 3  # sum over iterations of tokens processed (budget utilisation = A_TOKENS / budget)
A_ENERGY_J = 4  # energy of the iterations (idle time is not included)
A_PF_FIRST = 5  # prompt tokens prefilled the first time
A_RECOMP = 6  # tokens recomputed after preemption
A_DEC_IN = 7  # decode inputs (output tokens after the first)
A_PREEMPT = 8  # preemptions (requeued)
A_DROP_PREEMPT = 9  # requests dropped at the preemption bound
A_OUT_TOK = 10  # output tokens produced
A_STEPS = 11  # iterations simulated one by one (diagnostic)
A_JUMPS = 12  # runs of identical decode iterations simulated in one step (diagnostic)
A_RUN_S = 13  # sum over iterations of running requests x seconds (occupancy of the running cap)
A_RUN2_S = 14  # the same with running requests squared (time-average spread of the occupancy)
# iterations that carry prefill tokens (the rest are decode-only): what the fluid model's
# busy-time balance and slot occupancy stand for (docs/fluid_iteration_gap.md, eighth session)
A_PF_S = 15  # seconds spent in them
A_PF_ITER = 16  # how many
A_PF_PROMPTS = 17  # prompts (chunked mode: prompt chunks) they carry, summed
A_PF_DECODES = 18  # running decodes they carry, summed
A_PF_RUN_S = 19  # running requests x seconds in them (prompts included)
# what an arrival that finds a free slot and nothing queued meets: the residual of the iteration
# in progress, the fixed part of TTFT the fluid model's ``pre`` stands for (ninth session)
A_LAST_PF = 20  # state, not a sum: prefill tokens of the iteration in progress (or last run)
A_ARR_FREE = 21  # such arrivals
A_ARR_FREE_RESID_S = 22  # the residual iteration they meet, summed (0 at an idle server)
A_ARR_FREE_PF = 23  # of them, those whose iteration in progress carries prefill tokens
A_ARR_FREE_PF_RESID_S = 24  # and their residual, summed
A_ARR_QUEUED = 25  # arrivals that find a free slot but prompts queued ahead of them
A_ARR_QUEUED_AHEAD = 26  # the prompts queued ahead of them, summed
N_ACC = 27
# --- token-gap histogram (state ``tbt_hist``): every gap between two consecutive output tokens
# of a request is counted in log-spaced bins, bin b = [TBT_LO_S x r^b, TBT_LO_S x r^(b+1)) with
# r = 1 + TBT_BIN_REL; gaps below TBT_LO_S fall in bin 0, above the last bin in the last. A
# percentile read at a bin's geometric centre is within TBT_BIN_REL / 2 of the exact one.
TBT_LO_S = 1e-4
TBT_BIN_REL = 0.01
TBT_N_BINS = 1800  # 1e-4 s x 1.01^1800 = 6.0e3 s
# --- completion log columns
LI_REQ = 0
LI_SERVER = 1
LI_NPRE = 2
LI_DROP = 3
LI_PF_FIRST = 4
LI_RECOMP = 5
LI_DEC_IN = 6
LI_GEN = 7  # output tokens produced
N_LI = 8
LF_ARRIVE = 0
LF_TFIRST = 1  # NaN if no token was produced
LF_FINISH = 2  # NaN if dropped
LF_TBT_SUM = 3
LF_TBT_MAX = 4
LF_FIRST_ITER_S = 5  # NaN if no token was produced
LF_FIRST_ITER_DEC = 6
LF_ARR_RESID_S = 7
LF_ARR_QUEUED = 8
N_LF = 9


# drop reasons: 0-4 as greenroute.sim.kernel (DROP_REASONS), plus the preemption bound
DROP_NONE = 0
DROP_QUEUE_FULL = 1
DROP_KV_OVERFLOW = 2
DROP_NO_SERVER = 3
DROP_PREEMPTION_LIMIT = 5


@njit(cache=True, _nrt=False)
def interp_n(x, xs, ys, n, extrapolate):
    """Piecewise-linear through the first ``n`` knots; end segments extended when
    ``extrapolate`` (scipy interp1d fill_value="extrapolate"), else held."""
    if n == 1:
        return ys[0]
    if x <= xs[0]:
        if not extrapolate:
            return ys[0]
        return ys[0] + (ys[1] - ys[0]) / (xs[1] - xs[0]) * (x - xs[0])
    if x >= xs[n - 1]:
        if not extrapolate:
            return ys[n - 1]
        return ys[n - 1] + (ys[n - 1] - ys[n - 2]) / (xs[n - 1] - xs[n - 2]) * (x - xs[n - 1])
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


@njit(cache=True, _nrt=False)
def iteration_duration_s(
    t, prefill_tokens, n_decode, prompt_x, prompt_s, n_prompt, token_x, token_s, n_token, mixed
):
    """Seconds of one iteration of perf type ``t`` (splitwise performance_model.py:207-256)."""
    bt = float(prefill_tokens + n_decode)
    if prefill_tokens > 0:
        d = interp_n(bt, prompt_x[t], prompt_s[t], n_prompt[t], True)
        if n_decode > 0:
            d *= mixed[t]
    else:
        d = interp_n(bt, token_x[t], token_s[t], n_token[t], True)
    return d if d > 0.0 else 0.0


@njit(cache=True, _nrt=False)
def iteration_power_w(
    t, prefill_tokens, n_decode, budget, pp_x, pp_w, n_pp, pd_x, pd_w, n_pd, has_power, idle_w,
    peak_w,
):  # fmt: skip
    """Instance watts during one iteration (see the module docstring)."""
    if has_power[t]:
        if prefill_tokens > 0:
            return interp_n(float(prefill_tokens + n_decode), pp_x[t], pp_w[t], n_pp[t], False)
        return interp_n(float(n_decode), pd_x[t], pd_w[t], n_pd[t], False)
    u = float(prefill_tokens + n_decode) / budget
    if u > 1.0:
        u = 1.0
    return idle_w[t] + (peak_w[t] - idle_w[t]) * u


@njit(cache=True, inline="always")
def _log(s, e, drop, t_finish, st):
    ei, ef = st[0], st[1]
    log_i, log_f, log_n = st[14], st[15], st[16]
    k = log_n[0]
    log_i[k, LI_REQ] = ei[s, e, EI_REQ]
    log_i[k, LI_SERVER] = s
    log_i[k, LI_NPRE] = ei[s, e, EI_NPRE]
    log_i[k, LI_DROP] = drop
    log_i[k, LI_PF_FIRST] = ei[s, e, EI_PF_FIRST]
    log_i[k, LI_RECOMP] = ei[s, e, EI_RECOMP]
    log_i[k, LI_DEC_IN] = ei[s, e, EI_DEC_IN]
    log_i[k, LI_GEN] = ei[s, e, EI_GEN]
    log_f[k, LF_ARRIVE] = ef[s, e, EF_ARRIVE]
    log_f[k, LF_TFIRST] = ef[s, e, EF_TFIRST]
    log_f[k, LF_FINISH] = t_finish
    log_f[k, LF_TBT_SUM] = ef[s, e, EF_TBT_SUM]
    log_f[k, LF_TBT_MAX] = ef[s, e, EF_TBT_MAX]
    log_f[k, LF_FIRST_ITER_S] = ef[s, e, EF_FIRST_ITER_S]
    log_f[k, LF_FIRST_ITER_DEC] = ef[s, e, EF_FIRST_ITER_DEC]
    log_f[k, LF_ARR_RESID_S] = ef[s, e, EF_ARR_RESID_S]
    log_f[k, LF_ARR_QUEUED] = ef[s, e, EF_ARR_QUEUED]
    log_n[0] = k + 1


@njit(cache=True, inline="always")
def _remaining(s, e, ei):
    """Tokens entry ``e`` still has to process: prefill left + decode inputs left."""
    left_pf = ei[s, e, EI_PF_TARGET] - ei[s, e, EI_PF_DONE]
    left_out = ei[s, e, EI_OUTPUT] - ei[s, e, EI_GEN]
    if left_pf > 0:
        return left_pf + left_out - 1
    return left_out


@njit(cache=True, inline="always")
def _free_entry(s, e, st):
    efree, nfree = st[2], st[3]
    efree[s, nfree[s]] = e
    nfree[s] += 1


@njit(cache=True, inline="always")
def _remove_run(s, k, st):
    run, nrun = st[7], st[8]
    for j in range(k, nrun[s] - 1):
        run[s, j] = run[s, j + 1]
    nrun[s] -= 1


@njit(cache=True, inline="always")
def _push_front(s, e, st):
    q, qhead, qlen = st[4], st[5], st[6]
    cap = q.shape[1]
    qhead[s] = (qhead[s] - 1 + cap) % cap
    q[s, qhead[s]] = e
    qlen[s] += 1


@njit(cache=True, inline="always")
def _evict(s, k, max_pre, st):
    """Preempt (recompute) or, past the bound, drop the running entry at position ``k``."""
    ei, blocks_free, work_tok, acc = st[0], st[10], st[11], st[12]
    e = st[7][s, k]
    _remove_run(s, k, st)
    blocks_free[s] += ei[s, e, EI_BLOCKS]
    ei[s, e, EI_BLOCKS] = 0
    ei[s, e, EI_CHUNK] = 0
    ei[s, e, EI_DEC] = 0
    ei[s, e, EI_SKIP] = 0
    if ei[s, e, EI_NPRE] >= max_pre:
        work_tok[s] -= _remaining(s, e, ei)
        acc[s, A_DROP_PREEMPT] += 1.0
        _log(s, e, DROP_PREEMPTION_LIMIT, np.nan, st)
        _free_entry(s, e, st)
        return
    work_tok[s] -= _remaining(s, e, ei)
    ei[s, e, EI_NPRE] += 1
    ei[s, e, EI_KV_TOK] = 0
    # re-prefill the prompt and every generated token; all but the newest generated one (or,
    # before the first token, the prompt tokens never prefilled yet) are a recompute
    gen = ei[s, e, EI_GEN]
    ei[s, e, EI_PF_TARGET] = ei[s, e, EI_PROMPT] + gen
    if gen > 0:
        ei[s, e, EI_RECOMP_PENDING] = ei[s, e, EI_PROMPT] + gen - 1
    else:
        ei[s, e, EI_RECOMP_PENDING] = ei[s, e, EI_PF_FIRST]
    ei[s, e, EI_PF_DONE] = 0
    work_tok[s] += _remaining(s, e, ei)
    acc[s, A_PREEMPT] += 1.0
    _push_front(s, e, st)


@njit(cache=True, inline="always")
def _victim(s, st):
    """Position in ``run`` of the most recently admitted entry not decoding this iteration."""
    ei, run, nrun = st[0], st[7], st[8]
    for k in range(nrun[s] - 1, -1, -1):
        if ei[s, run[s, k], EI_DEC] == 0:
            return k
    return -1


@njit(cache=True, inline="always")
def _schedule_decodes(s, tokens, budget, block_tokens, max_pre, st):
    """Give running decodes (skipped ones first) one token each while the budget lasts,
    growing their KV by a block when needed (preempting to find one). Returns tokens used."""
    ei, run, nrun, blocks_free = st[0], st[7], st[8], st[10]
    for pass_skip in (1, 0):
        k = 0
        while k < nrun[s]:
            e = run[s, k]
            if (
                ei[s, e, EI_SKIP] != pass_skip
                or ei[s, e, EI_DEC] == 1
                or ei[s, e, EI_GEN] == 0
                or ei[s, e, EI_PF_DONE] < ei[s, e, EI_PF_TARGET]
            ):
                k += 1
                continue
            if tokens + 1 > budget:
                ei[s, e, EI_SKIP] = 1
                k += 1
                continue
            if ei[s, e, EI_KV_TOK] + 1 > ei[s, e, EI_BLOCKS] * block_tokens:
                self_gone = False
                while blocks_free[s] == 0:
                    v = _victim(s, st)
                    ve = run[s, v]
                    tokens -= ei[s, ve, EI_CHUNK]
                    _evict(s, v, max_pre, st)
                    if ve == e:
                        self_gone = True
                        break
                    if v < k:
                        k -= 1
                if self_gone:
                    continue  # run[s, k] is now the next entry
                blocks_free[s] -= 1
                ei[s, e, EI_BLOCKS] += 1
            ei[s, e, EI_DEC] = 1
            ei[s, e, EI_SKIP] = 0
            tokens += 1
            k += 1
    return tokens


@njit(cache=True, inline="always")
def _admit(s, cap_tokens, block_tokens, reserve, st):
    """Move the queue head to the running set if it fits ``cap_tokens`` of prefill, the
    running cap and the free blocks less ``reserve``; returns the chunk scheduled (0: not)."""
    ei, q, qhead, qlen, run, nrun, blocks_free = st[0], st[4], st[5], st[6], st[7], st[8], st[10]
    e = q[s, qhead[s]]
    need = ei[s, e, EI_PF_TARGET] - ei[s, e, EI_PF_DONE]
    chunk = need if need < cap_tokens else cap_tokens
    nb = (ei[s, e, EI_PF_TARGET] + block_tokens - 1) // block_tokens
    if chunk <= 0 or nb > blocks_free[s] - reserve:
        return 0
    qhead[s] = (qhead[s] + 1) % q.shape[1]
    qlen[s] -= 1
    run[s, nrun[s]] = e
    nrun[s] += 1
    blocks_free[s] -= nb
    ei[s, e, EI_BLOCKS] = nb
    ei[s, e, EI_CHUNK] = chunk
    ei[s, e, EI_DEC] = 0
    ei[s, e, EI_SKIP] = 0
    return chunk


@njit(cache=True, inline="always")
def tbt_bin(gap):
    """Histogram bin of a token gap of ``gap`` seconds (see ``TBT_LO_S``)."""
    if gap <= TBT_LO_S:
        return 0
    b = int(np.log(gap / TBT_LO_S) / np.log1p(TBT_BIN_REL))
    return b if b < TBT_N_BINS else TBT_N_BINS - 1


@njit(cache=True, inline="always")
def _token_out(s, e, t, ei, ef, hist, t0, b0, n_dec):
    """Output a token of entry ``e`` at ``t`` (the end of an iteration that started at ``t0``
    and batched ``n_dec`` decodes; ``b0`` = ``tbt_bin(t - t0)``, the gap of a request that also
    had a token at ``t0``)."""
    ei[s, e, EI_GEN] += 1
    if ei[s, e, EI_GEN] == 1:
        ef[s, e, EF_TFIRST] = t
        ef[s, e, EF_FIRST_ITER_S] = t - t0
        ef[s, e, EF_FIRST_ITER_DEC] = n_dec
    else:
        t_last = ef[s, e, EF_TLAST]
        gap = t - t_last
        ef[s, e, EF_TBT_SUM] += gap
        if gap > ef[s, e, EF_TBT_MAX]:
            ef[s, e, EF_TBT_MAX] = gap
        hist[b0 if t_last == t0 else tbt_bin(gap)] += 1
    ef[s, e, EF_TLAST] = t


@njit(cache=True, inline="always")
def _iterate(s, cfg, cost, st):
    """Run one iteration of server ``s`` starting at ``clock[s]``; False if nothing ran."""
    (server_type, _m, max_running, _ql, _bt, max_tokens, chunked, block_tokens, max_pre, _ff) = cfg
    ei, ef, qlen, run, nrun, clock = st[0], st[1], st[6], st[7], st[8], st[9]
    blocks_free, work_tok, acc = st[10], st[11], st[12]
    st[17][s] = -1
    budget = max_tokens[s]
    rcap = max_running[s]
    for k in range(nrun[s]):
        ei[s, run[s, k], EI_CHUNK] = 0
        ei[s, run[s, k], EI_DEC] = 0
    tokens = 0
    if chunked[s]:
        tokens = _schedule_decodes(s, tokens, budget, block_tokens, max_pre, st)
        for k in range(nrun[s]):  # running partial prefills, admission order
            if tokens >= budget:
                break
            e = run[s, k]
            need = ei[s, e, EI_PF_TARGET] - ei[s, e, EI_PF_DONE]
            if need > 0:
                c = need if need < budget - tokens else budget - tokens
                ei[s, e, EI_CHUNK] = c
                tokens += c
        while qlen[s] > 0 and nrun[s] < rcap and tokens < budget:
            c = _admit(s, budget - tokens, block_tokens, 0, st)
            if c == 0:
                break
            tokens += c
    else:
        # blocks the running decodes will take this iteration stay out of prefill admission
        reserve = 0
        for k in range(nrun[s]):
            e = run[s, k]
            if ei[s, e, EI_KV_TOK] + 1 > ei[s, e, EI_BLOCKS] * block_tokens:
                reserve += 1
        n_pf = 0
        while qlen[s] > 0 and nrun[s] < rcap:
            e = st[4][s, st[5][s]]
            need = ei[s, e, EI_PF_TARGET] - ei[s, e, EI_PF_DONE]
            if n_pf > 0 and tokens + need > budget:
                break
            c = _admit(s, need, block_tokens, reserve, st)
            if c == 0:
                break
            tokens += c
            n_pf += 1
        tokens = _schedule_decodes(s, tokens, budget, block_tokens, max_pre, st)
    # what was scheduled (evictions may have removed some)
    pf_tok = 0
    n_dec = 0
    members = 0
    for k in range(nrun[s]):
        e = run[s, k]
        if ei[s, e, EI_CHUNK] > 0:
            pf_tok += ei[s, e, EI_CHUNK]
            members += 1
        elif ei[s, e, EI_DEC] == 1:
            n_dec += 1
            members += 1
    if members == 0:
        return False
    t = server_type[s]
    dur = iteration_duration_s(
        t, pf_tok, n_dec, cost[0], cost[1], cost[2], cost[3], cost[4], cost[5], cost[6]
    )
    pw = iteration_power_w(
        t, pf_tok, n_dec, float(budget), cost[7], cost[8], cost[9], cost[10], cost[11],
        cost[12], cost[13], cost[14], cost[15],
    )  # fmt: skip
    t_end = clock[s] + dur
    acc[s, A_LAST_PF] = pf_tok
    acc[s, A_STEPS] += 1.0
    acc[s, A_ITER] += 1.0
    acc[s, A_BUSY_S] += dur
    acc[s, A_BATCH_SUM] += members
    acc[s, A_TOKENS] += pf_tok + n_dec
    acc[s, A_ENERGY_J] += pw * dur
    acc[s, A_RUN_S] += nrun[s] * dur
    acc[s, A_RUN2_S] += nrun[s] * nrun[s] * dur
    if pf_tok > 0:
        acc[s, A_PF_S] += dur
        acc[s, A_PF_ITER] += 1.0
        acc[s, A_PF_PROMPTS] += members - n_dec
        acc[s, A_PF_DECODES] += n_dec
        acc[s, A_PF_RUN_S] += nrun[s] * dur
    t_start = clock[s]
    b_start = tbt_bin(t_end - t_start)
    k = 0
    while k < nrun[s]:
        e = run[s, k]
        c = ei[s, e, EI_CHUNK]
        produced = False
        if c > 0:
            r = ei[s, e, EI_RECOMP_PENDING]
            if r > c:
                r = c
            ei[s, e, EI_RECOMP_PENDING] -= r
            ei[s, e, EI_RECOMP] += r
            acc[s, A_RECOMP] += r
            fresh = c - r
            if ei[s, e, EI_GEN] == 0:
                ei[s, e, EI_PF_FIRST] += fresh
                acc[s, A_PF_FIRST] += fresh
            else:  # the last generated token, re-fed after a recompute
                ei[s, e, EI_DEC_IN] += fresh
                acc[s, A_DEC_IN] += fresh
            ei[s, e, EI_PF_DONE] += c
            ei[s, e, EI_KV_TOK] += c
            work_tok[s] -= c
            ei[s, e, EI_CHUNK] = 0
            produced = ei[s, e, EI_PF_DONE] == ei[s, e, EI_PF_TARGET]
        elif ei[s, e, EI_DEC] == 1:
            ei[s, e, EI_KV_TOK] += 1
            ei[s, e, EI_DEC_IN] += 1
            acc[s, A_DEC_IN] += 1.0
            work_tok[s] -= 1
            ei[s, e, EI_DEC] = 0
            produced = True
        if produced:
            _token_out(s, e, t_end, ei, ef, st[19], t_start, b_start, n_dec)
            acc[s, A_OUT_TOK] += 1.0
            if ei[s, e, EI_GEN] >= ei[s, e, EI_OUTPUT]:
                blocks_free[s] += ei[s, e, EI_BLOCKS]
                ei[s, e, EI_BLOCKS] = 0
                _log(s, e, DROP_NONE, t_end, st)
                _remove_run(s, k, st)
                _free_entry(s, e, st)
                continue
        k += 1
    clock[s] = t_end
    return True


@njit(cache=True, inline="always")
def _steady(s, cfg, cost, st):
    """``_steady_scan`` cached in ``ff_k``/``ff_d`` until the server's state changes."""
    ff_k, ff_d = st[17], st[18]
    if ff_k[s] < 0:
        k, d = _steady_scan(s, cfg, cost, st)
        ff_k[s] = k
        ff_d[s] = d
    return ff_k[s], ff_d[s]


@njit(cache=True, inline="always")
def _steady_scan(s, cfg, cost, st):
    """``(k, d)``: the server's next ``k`` iterations are identical decode-only ones of ``d``
    seconds, whatever the time, unless a request arrives: queue empty (or the running set
    full, so nothing queued can be admitted before a completion), every running request
    decoding within the token budget, no completion before the ``k``-th, KV blocks enough for
    all. ``k = 0`` when that does not hold."""
    ei, qlen, run, nrun, blocks_free = st[0], st[6], st[7], st[8], st[10]
    n = nrun[s]
    if (qlen[s] > 0 and n < cfg[2][s]) or n == 0 or n > cfg[5][s]:
        return np.int64(0), 0.0
    bt = cfg[7]
    k = np.int64(1) << 40
    k_safe = k
    for j in range(n):
        e = run[s, j]
        if ei[s, e, EI_GEN] == 0 or ei[s, e, EI_PF_DONE] < ei[s, e, EI_PF_TARGET]:
            return np.int64(0), 0.0
        left = ei[s, e, EI_OUTPUT] - ei[s, e, EI_GEN]
        if left < k:
            k = left
        room = ei[s, e, EI_BLOCKS] * bt - ei[s, e, EI_KV_TOK]
        if room < k_safe:
            k_safe = room
    d = iteration_duration_s(cfg[0][s], 0, n, cost[0], cost[1], cost[2], cost[3], cost[4],
                             cost[5], cost[6])  # fmt: skip
    if d <= 0.0:
        return np.int64(0), 0.0
    if k > k_safe:
        need = 0
        for j in range(n):
            e = run[s, j]
            nb = (ei[s, e, EI_KV_TOK] + k + bt - 1) // bt - ei[s, e, EI_BLOCKS]
            if nb > 0:
                need += nb
        if need > blocks_free[s]:
            k = k_safe
    return k, d


@njit(cache=True, inline="always")
def _fast_forward(s, t_until, cfg, cost, st):
    """Run ``k > 1`` identical decode-only iterations (``_steady``) that start before
    ``t_until`` at once; splitwise-sim does the same ("contiguous iterations",
    instance.py:412-421). Returns False (nothing done) when fewer than 2 qualify."""
    ei, ef, run, nrun, clock = st[0], st[1], st[7], st[8], st[9]
    blocks_free, work_tok, acc = st[10], st[11], st[12]
    k, d = _steady(s, cfg, cost, st)
    if k < 2:
        return False
    if t_until < np.inf:
        k_time = np.int64(np.ceil((t_until - clock[s]) / d))
        if k_time < k:
            k = k_time
    if k < 2:
        return False
    k_steady = st[17][s]
    st[17][s] = k_steady - k if k < k_steady else -1
    n = nrun[s]
    bt = cfg[7]
    t = cfg[0][s]
    pw = iteration_power_w(
        t, 0, n, float(cfg[5][s]), cost[7], cost[8], cost[9], cost[10], cost[11], cost[12],
        cost[13], cost[14], cost[15],
    )  # fmt: skip
    t0 = clock[s]
    t_end = t0 + k * d
    acc[s, A_LAST_PF] = 0.0
    acc[s, A_ITER] += k
    acc[s, A_JUMPS] += 1.0
    acc[s, A_BUSY_S] += k * d
    acc[s, A_BATCH_SUM] += k * n
    acc[s, A_TOKENS] += k * n
    acc[s, A_ENERGY_J] += pw * k * d
    acc[s, A_RUN_S] += n * k * d
    acc[s, A_RUN2_S] += n * n * k * d
    acc[s, A_DEC_IN] += k * n
    hist = st[19]
    hist[tbt_bin(d)] += (k - 1) * n
    acc[s, A_OUT_TOK] += k * n
    work_tok[s] -= k * n
    j = 0
    while j < nrun[s]:
        e = run[s, j]
        nb = (ei[s, e, EI_KV_TOK] + k + bt - 1) // bt - ei[s, e, EI_BLOCKS]
        if nb > 0:
            ei[s, e, EI_BLOCKS] += nb
            blocks_free[s] -= nb
        ei[s, e, EI_KV_TOK] += k
        ei[s, e, EI_DEC_IN] += k
        ei[s, e, EI_GEN] += k
        ei[s, e, EI_SKIP] = 0
        first = t0 + d - ef[s, e, EF_TLAST]
        hist[tbt_bin(first)] += 1
        ef[s, e, EF_TBT_SUM] += first + (k - 1) * d
        if first > ef[s, e, EF_TBT_MAX]:
            ef[s, e, EF_TBT_MAX] = first
        if d > ef[s, e, EF_TBT_MAX]:
            ef[s, e, EF_TBT_MAX] = d
        ef[s, e, EF_TLAST] = t_end
        if ei[s, e, EI_GEN] >= ei[s, e, EI_OUTPUT]:
            blocks_free[s] += ei[s, e, EI_BLOCKS]
            ei[s, e, EI_BLOCKS] = 0
            _log(s, e, DROP_NONE, t_end, st)
            _remove_run(s, j, st)
            _free_entry(s, e, st)
            continue
        j += 1
    clock[s] = t_end
    return True


@njit(cache=True, _nrt=False)
def advance_server(s, t_until, cfg, cost, st):
    """Run the iterations of server ``s`` that start before ``t_until``."""
    qlen, nrun, clock = st[6], st[8], st[9]
    while (qlen[s] > 0 or nrun[s] > 0) and clock[s] < t_until:
        if cfg[9] and _fast_forward(s, t_until, cfg, cost, st):
            continue
        if not _iterate(s, cfg, cost, st):
            break


@njit(cache=True, _nrt=False)
def advance(s0, s1, t_until, cfg, cost, st):
    """Advance servers ``s0 .. s1-1`` to ``t_until``."""
    for s in range(s0, s1):
        advance_server(s, t_until, cfg, cost, st)


@njit(cache=True, inline="always")
def fits(s, prompt, output, cfg):
    """Whether a request can ever fit server ``s``'s KV blocks."""
    bt = cfg[7]
    return (prompt + output + bt - 1) // bt <= cfg[4][s]


@njit(cache=True, _nrt=False)
def enqueue(s, req, t, prompt, output, cfg, cost, st):
    """Queue request ``req`` (arriving at ``t``) on server ``s``; returns its drop code.

    The server must have been advanced to ``t`` (``advance_server(s, t, ...)``)."""
    ei, ef, efree, nfree, q, qhead, qlen = st[0], st[1], st[2], st[3], st[4], st[5], st[6]
    nrun, clock, work_tok = st[8], st[9], st[11]
    advance_server(s, t, cfg, cost, st)
    drop = DROP_NONE
    if not fits(s, prompt, output, cfg):
        drop = DROP_KV_OVERFLOW
    elif qlen[s] >= cfg[3][s]:
        drop = DROP_QUEUE_FULL
    if drop != DROP_NONE:
        _drop_now(s, req, t, prompt, output, drop, st)
        return drop
    resid = max(clock[s] - t, 0.0)  # the rest of the iteration in progress (0: idle)
    if nrun[s] < cfg[2][s]:  # a free slot
        acc = st[12]
        if qlen[s] == 0:  # and nothing queued ahead
            acc[s, A_ARR_FREE] += 1.0
            if resid > 0.0:
                acc[s, A_ARR_FREE_RESID_S] += resid
                if acc[s, A_LAST_PF] > 0.0:
                    acc[s, A_ARR_FREE_PF] += 1.0
                    acc[s, A_ARR_FREE_PF_RESID_S] += resid
        else:
            acc[s, A_ARR_QUEUED] += 1.0
            acc[s, A_ARR_QUEUED_AHEAD] += qlen[s]
    nfree[s] -= 1
    e = efree[s, nfree[s]]
    ei[s, e, :] = 0
    ei[s, e, EI_REQ] = req
    ei[s, e, EI_PROMPT] = prompt
    ei[s, e, EI_OUTPUT] = output
    ei[s, e, EI_PF_TARGET] = prompt
    ef[s, e, EF_ARRIVE] = t
    ef[s, e, EF_TFIRST] = np.nan
    ef[s, e, EF_TLAST] = np.nan
    ef[s, e, EF_TBT_SUM] = 0.0
    ef[s, e, EF_TBT_MAX] = 0.0
    ef[s, e, EF_FIRST_ITER_S] = np.nan
    ef[s, e, EF_FIRST_ITER_DEC] = np.nan
    ef[s, e, EF_ARR_RESID_S] = resid
    ef[s, e, EF_ARR_QUEUED] = qlen[s]
    st[17][s] = -1
    cap = q.shape[1]
    q[s, (qhead[s] + qlen[s]) % cap] = e
    qlen[s] += 1
    work_tok[s] += prompt + output - 1
    if nrun[s] == 0 and qlen[s] == 1 and clock[s] < t:
        clock[s] = t  # an idle server starts at the arrival
    return DROP_NONE


@njit(cache=True, inline="always")
def _drop_now(s, req, t, prompt, output, drop, st):
    log_i, log_f, log_n = st[14], st[15], st[16]
    k = log_n[0]
    log_i[k, :] = 0
    log_i[k, LI_REQ] = req
    log_i[k, LI_SERVER] = s
    log_i[k, LI_DROP] = drop
    log_f[k, LF_ARRIVE] = t
    log_f[k, LF_TFIRST] = np.nan
    log_f[k, LF_FINISH] = np.nan
    log_f[k, LF_TBT_SUM] = 0.0
    log_f[k, LF_TBT_MAX] = 0.0
    log_f[k, LF_FIRST_ITER_S] = np.nan
    log_f[k, LF_FIRST_ITER_DEC] = np.nan
    log_f[k, LF_ARR_RESID_S] = np.nan
    log_f[k, LF_ARR_QUEUED] = np.nan
    log_n[0] = k + 1


# --- driver: place a sorted batch of arrivals with the built-in local policies

LP_ROUND_ROBIN = 0
LP_LEAST_CONNECTIONS = 1
LP_LEAST_LOADED = 2
LP_RANDOM = 3


@njit(cache=True, _nrt=False)
def _score_slow(s, t, code, cfg, cost, st):
    """Least-connections or least-loaded score of server ``s`` advanced to ``t``, when the
    closed form in ``run_arrivals`` does not apply (its steady run unknown, or too short)."""
    qlen, nrun, clock, work_tok = st[6], st[8], st[9], st[11]
    if clock[s] < t:
        k, d = _steady(s, cfg, cost, st)
        m = np.int64(np.ceil((t - clock[s]) / d)) if k > 0 else k
        if k > 0 and m < k:
            if code == LP_LEAST_CONNECTIONS:
                return float(nrun[s] + qlen[s])
            return float(work_tok[s] - m * nrun[s])
        advance_server(s, t, cfg, cost, st)
    if code == LP_LEAST_CONNECTIONS:
        return float(nrun[s] + qlen[s])
    return float(work_tok[s])


@njit(cache=True, _nrt=False)
def run_arrivals(
    t_arr, region, model, req_id, prompt, output, u_local, t_end, region_start, lp_code, cfg,
    cost, st, out_server,
):  # fmt: skip
    """Place arrivals ``i`` (sorted by ``t_arr``) and advance all servers to ``t_end``.

    ``out_server[i]`` gets the chosen server (-1 when no server could take it); the outcome of
    every request (also later drops) lands in the state's completion log."""
    qlen, nrun, clock, work_tok, rr = st[6], st[8], st[9], st[11], st[13]
    ff_k, ff_d = st[17], st[18]
    server_model, blocks_total, bt = cfg[1], cfg[4], cfg[7]
    n = t_arr.shape[0]
    for i in range(n):
        r = region[i]
        m = model[i]
        t = t_arr[i]
        p = prompt[i]
        o = output[i]
        nb = (p + o + bt - 1) // bt  # KV blocks the request can come to hold (``fits``)
        s0 = region_start[r]
        s1 = region_start[r + 1]
        n_model = 0
        n_cand = 0
        for s in range(s0, s1):
            if server_model[s] == m:
                n_model += 1
                if nb <= blocks_total[s]:
                    n_cand += 1
        out_server[i] = -1
        if n_cand == 0:
            reason = DROP_NO_SERVER if n_model == 0 else DROP_KV_OVERFLOW
            _drop_now(-1 if n_model == 0 else s0, req_id[i], t, p, o, reason, st)
            continue
        all_cand = n_cand == s1 - s0
        code = lp_code[r]
        chosen = -1
        if code == LP_ROUND_ROBIN:
            nreg = s1 - s0
            for j in range(nreg):
                s = s0 + (rr[r] + j) % nreg
                if all_cand or (server_model[s] == m and nb <= blocks_total[s]):
                    chosen = s
                    rr[r] = (s - s0 + 1) % nreg
                    break
        elif code == LP_RANDOM:
            k = int(u_local[i] * n_cand)
            if k >= n_cand:
                k = n_cand - 1
            for s in range(s0, s1):
                if all_cand or (server_model[s] == m and nb <= blocks_total[s]):
                    if k == 0:
                        chosen = s
                        break
                    k -= 1
        else:
            best = np.inf
            for s in range(s0, s1):
                if not (all_cand or (server_model[s] == m and nb <= blocks_total[s])):
                    continue
                # a steady server (``_steady``, cached in ff_k/ff_d) is not advanced: its state
                # at ``t`` follows in closed form, so it later runs many iterations in one step.
                # Inline on purpose: a call taking the state tuples cost ~90 atomic
                # reference-count updates (perf: most of the run time) before the callers
                # dropped numba's runtime (module docstring); it still saves the call.
                k_it = np.int64(0)  # iterations run by ``t`` (not ``m``: that is the model)
                if clock[s] >= t:
                    steady = True
                else:
                    steady = False
                    if ff_k[s] > 0:
                        k_it = np.int64(np.ceil((t - clock[s]) / ff_d[s]))
                        steady = k_it < ff_k[s]
                if steady:
                    if code == LP_LEAST_CONNECTIONS:
                        score = float(nrun[s] + qlen[s])
                    else:
                        score = float(work_tok[s] - k_it * nrun[s])
                else:
                    score = _score_slow(s, t, code, cfg, cost, st)
                if score < best:
                    best = score
                    chosen = s
        out_server[i] = chosen
        enqueue(chosen, req_id[i], t, p, o, cfg, cost, st)
    advance(0, qlen.shape[0], t_end, cfg, cost, st)
