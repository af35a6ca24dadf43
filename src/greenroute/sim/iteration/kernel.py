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
``enqueue(s, ...)`` must be called with the server advanced to the arrival time.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from greenroute.sim.iteration.cost import iteration_duration_s, iteration_power_w
from greenroute.sim.iteration.state import (
    A_BATCH_SUM,
    A_BUSY_S,
    A_DEC_IN,
    A_DROP_PREEMPT,
    A_ENERGY_J,
    A_ITER,
    A_OUT_TOK,
    A_PF_FIRST,
    A_PREEMPT,
    A_RECOMP,
    A_TOKENS,
    EF_ARRIVE,
    EF_TBT_MAX,
    EF_TBT_SUM,
    EF_TFIRST,
    EF_TLAST,
    EI_BLOCKS,
    EI_CHUNK,
    EI_DEC,
    EI_DEC_IN,
    EI_GEN,
    EI_KV_TOK,
    EI_NPRE,
    EI_OUTPUT,
    EI_PF_DONE,
    EI_PF_FIRST,
    EI_PF_TARGET,
    EI_PROMPT,
    EI_RECOMP,
    EI_RECOMP_PENDING,
    EI_REQ,
    EI_SKIP,
    LF_ARRIVE,
    LF_FINISH,
    LF_TBT_MAX,
    LF_TBT_SUM,
    LF_TFIRST,
    LI_DEC_IN,
    LI_DROP,
    LI_GEN,
    LI_NPRE,
    LI_PF_FIRST,
    LI_RECOMP,
    LI_REQ,
    LI_SERVER,
)  # fmt: skip

# drop reasons: 0-4 as greenroute.sim.kernel (DROP_REASONS), plus the preemption bound
DROP_NONE = 0
DROP_QUEUE_FULL = 1
DROP_KV_OVERFLOW = 2
DROP_NO_SERVER = 3
DROP_PREEMPTION_LIMIT = 5


@njit(cache=True)
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
    log_n[0] = k + 1


@njit(cache=True)
def _remaining(s, e, ei):
    """Tokens entry ``e`` still has to process: prefill left + decode inputs left."""
    left_pf = ei[s, e, EI_PF_TARGET] - ei[s, e, EI_PF_DONE]
    left_out = ei[s, e, EI_OUTPUT] - ei[s, e, EI_GEN]
    if left_pf > 0:
        return left_pf + left_out - 1
    return left_out


@njit(cache=True)
def _free_entry(s, e, st):
    efree, nfree = st[2], st[3]
    efree[s, nfree[s]] = e
    nfree[s] += 1


@njit(cache=True)
def _remove_run(s, k, st):
    run, nrun = st[7], st[8]
    for j in range(k, nrun[s] - 1):
        run[s, j] = run[s, j + 1]
    nrun[s] -= 1


@njit(cache=True)
def _push_front(s, e, st):
    q, qhead, qlen = st[4], st[5], st[6]
    cap = q.shape[1]
    qhead[s] = (qhead[s] - 1 + cap) % cap
    q[s, qhead[s]] = e
    qlen[s] += 1


@njit(cache=True)
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
    kv = ei[s, e, EI_KV_TOK]
    work_tok[s] += kv
    ei[s, e, EI_NPRE] += 1
    ei[s, e, EI_RECOMP_PENDING] = kv
    ei[s, e, EI_KV_TOK] = 0
    ei[s, e, EI_PF_TARGET] = ei[s, e, EI_PROMPT] + ei[s, e, EI_GEN]
    ei[s, e, EI_PF_DONE] = 0
    acc[s, A_PREEMPT] += 1.0
    _push_front(s, e, st)


@njit(cache=True)
def _victim(s, st):
    """Position in ``run`` of the most recently admitted entry not decoding this iteration."""
    ei, run, nrun = st[0], st[7], st[8]
    for k in range(nrun[s] - 1, -1, -1):
        if ei[s, run[s, k], EI_DEC] == 0:
            return k
    return -1


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def _token_out(s, e, t, ei, ef):
    ei[s, e, EI_GEN] += 1
    if ei[s, e, EI_GEN] == 1:
        ef[s, e, EF_TFIRST] = t
    else:
        gap = t - ef[s, e, EF_TLAST]
        ef[s, e, EF_TBT_SUM] += gap
        if gap > ef[s, e, EF_TBT_MAX]:
            ef[s, e, EF_TBT_MAX] = gap
    ef[s, e, EF_TLAST] = t


@njit(cache=True)
def _iterate(s, cfg, cost, st):
    """Run one iteration of server ``s`` starting at ``clock[s]``; False if nothing ran."""
    (server_type, _m, max_running, _ql, _bt, max_tokens, chunked, block_tokens, max_pre) = cfg
    ei, ef, qlen, run, nrun, clock = st[0], st[1], st[6], st[7], st[8], st[9]
    blocks_free, work_tok, acc = st[10], st[11], st[12]
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
    acc[s, A_ITER] += 1.0
    acc[s, A_BUSY_S] += dur
    acc[s, A_BATCH_SUM] += members
    acc[s, A_TOKENS] += pf_tok + n_dec
    acc[s, A_ENERGY_J] += pw * dur
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
            _token_out(s, e, t_end, ei, ef)
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


@njit(cache=True)
def advance_server(s, t_until, cfg, cost, st):
    """Run the iterations of server ``s`` that start before ``t_until``."""
    qlen, nrun, clock = st[6], st[8], st[9]
    while (qlen[s] > 0 or nrun[s] > 0) and clock[s] < t_until:
        if not _iterate(s, cfg, cost, st):
            break


@njit(cache=True)
def advance(s0, s1, t_until, cfg, cost, st):
    """Advance servers ``s0 .. s1-1`` to ``t_until``."""
    for s in range(s0, s1):
        advance_server(s, t_until, cfg, cost, st)


@njit(cache=True)
def fits(s, prompt, output, cfg):
    """Whether a request can ever fit server ``s``'s KV blocks."""
    bt = cfg[7]
    return (prompt + output + bt - 1) // bt <= cfg[4][s]


@njit(cache=True)
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
    cap = q.shape[1]
    q[s, (qhead[s] + qlen[s]) % cap] = e
    qlen[s] += 1
    work_tok[s] += prompt + output - 1
    if nrun[s] == 0 and qlen[s] == 1 and clock[s] < t:
        clock[s] = t  # an idle server starts at the arrival
    return DROP_NONE


@njit(cache=True)
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
    log_n[0] = k + 1
