"""Iteration-level server kernel: hand-computed timelines with flat per-token costs.

Unless a test says otherwise: prefill costs PF = 0.01 s per token, a decode-only iteration
DEC = 0.05 s whatever its size, a mixed iteration PF x (prefill tokens + decodes) (mixed factor
1), so every boundary below is worked out on paper in the comments.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst

from greenroute.sim.iteration import (
    DROP_KV_OVERFLOW,
    DROP_NO_SERVER,
    DROP_NONE,
    DROP_PREEMPTION_LIMIT,
    LP_LEAST_CONNECTIONS,
    LP_LEAST_LOADED,
    LP_RANDOM,
    LP_ROUND_ROBIN,
    IterationConfig,
    IterationState,
    advance,
    enqueue,
    flat_cost_table,
    run_arrivals,
    splitwise_cost_table,
    stack_cost_tables,
)
from greenroute.sim.iteration.cost import iteration_duration_s, iteration_power_w
from greenroute.sim.iteration.kernel import (
    A_ARR_FREE,
    A_ARR_FREE_PF,
    A_ARR_FREE_PF_RESID_S,
    A_ARR_FREE_RESID_S,
    A_ARR_QUEUED,
    A_ARR_QUEUED_AHEAD,
    A_BATCH_SUM,
    A_BUSY_S,
    A_DEC_IN,
    A_ENERGY_J,
    A_ITER,
    A_OUT_TOK,
    A_PF_DECODES,
    A_PF_FIRST,
    A_PF_ITER,
    A_PF_PROMPTS,
    A_PF_RUN_S,
    A_PF_S,
    A_PREEMPT,
    A_RECOMP,
    A_RUN2_S,
    A_RUN_S,
    A_STEPS,
    A_TOKENS,
    TBT_BIN_REL,
    tbt_bin,
)

PF = 0.01
DEC = 0.05
EXACT = 1e-12  # relative: only float rounding


def _flat(**kw):
    return stack_cost_tables([flat_cost_table(PF, DEC, **kw)])


def _run(reqs, cfg, cost=None, t_end=1e6, lp=LP_ROUND_ROBIN, region_start=None, u=None):
    """reqs: list of (t_arrive, prompt, output[, region[, model]]); returns (state, log by id)."""
    cost = _flat() if cost is None else cost
    st = IterationState.empty(cfg, 1 if region_start is None else len(region_start) - 1)
    n = len(reqs)
    t = np.array([r[0] for r in reqs], dtype=float)
    region = np.array([r[3] if len(r) > 3 else 0 for r in reqs])
    model = np.array([r[4] if len(r) > 4 else 0 for r in reqs])
    rs = np.array([0, cfg.n_servers]) if region_start is None else np.asarray(region_start)
    lp_code = np.full(len(rs) - 1, lp)
    u = np.zeros(n) if u is None else np.asarray(u, dtype=float)
    out = run_arrivals(
        st, cfg, cost, t, region, model, np.arange(n), np.array([r[1] for r in reqs]),
        np.array([r[2] for r in reqs]), u, t_end, rs, lp_code,
    )  # fmt: skip
    log = st.drain_log()
    order = np.argsort(log["req"])
    return st, {k: v[order] for k, v in log.items()}, out


def test_iteration_boundaries_ttft_e2e_and_accumulators() -> None:
    # budget 100. A(50,3) and B(30,2) at 0, C(40,2) at 0.1.
    # it1 [0, 0.8]: prefill A+B = 80 tokens -> 0.8; A, B first token at 0.8.
    # it2 [0.8, 1.22]: prefill C (40) + decodes A, B -> mixed 0.01 x 42 = 0.42; B done.
    # it3 [1.22, 1.27]: decodes A, C -> 0.05; A and C done.
    cfg = IterationConfig.uniform(1, blocks_total=1000, max_batched_tokens=100)
    st, log, out = _run(
        [(0.0, 50, 3), (0.0, 30, 2), (0.1, 40, 2)], cfg, _flat(idle_w=100.0, peak_w=500.0)
    )
    assert out.tolist() == [0, 0, 0]
    assert log["t_first_s"] == pytest.approx([0.8, 0.8, 1.22], rel=EXACT)
    assert log["t_finish_s"] == pytest.approx([1.27, 1.22, 1.27], rel=EXACT)
    assert log["tbt_sum_s"] == pytest.approx([0.47, 0.42, 0.05], rel=EXACT)
    assert log["tbt_max_s"] == pytest.approx([0.42, 0.42, 0.05], rel=EXACT)
    # the first token's iteration: A and B it1 (no decodes), C it2 with A's and B's decodes
    assert log["first_iteration_s"] == pytest.approx([0.8, 0.8, 0.42], rel=EXACT)
    assert log["first_iteration_decodes"].tolist() == [0, 0, 2]
    # at arrival: A finds an idle server, B finds A queued (it1 starts at 0, after both), C
    # finds it1 running until 0.8 and nothing queued
    assert log["arrival_residual_s"] == pytest.approx([0.0, 0.0, 0.7], rel=EXACT)
    assert log["arrival_queue_ahead"].tolist() == [0, 1, 0]
    assert log["drop"].tolist() == [DROP_NONE] * 3
    acc = st.acc[0]
    assert acc[A_ITER] == 3
    assert acc[A_BUSY_S] == pytest.approx(1.27, rel=EXACT)
    assert acc[A_BATCH_SUM] == 2 + 3 + 2
    assert acc[A_TOKENS] == 80 + 42 + 2
    # linear fallback power: idle + (peak - idle) x tokens / budget, by iteration
    energy = (100 + 400 * 0.80) * 0.8 + (100 + 400 * 0.42) * 0.42 + (100 + 400 * 0.02) * 0.05
    assert acc[A_ENERGY_J] == pytest.approx(energy, rel=EXACT)
    # running requests x seconds: 2 x 0.8 + 3 x 0.42 + 2 x 0.05 (a request counts in the
    # iteration that completes it)
    assert acc[A_RUN_S] == pytest.approx(2 * 0.8 + 3 * 0.42 + 2 * 0.05, rel=EXACT)
    # and squared (the occupancy's time-average spread): 4 x 0.8 + 9 x 0.42 + 4 x 0.05
    assert acc[A_RUN2_S] == pytest.approx(4 * 0.8 + 9 * 0.42 + 4 * 0.05, rel=EXACT)
    # it1 and it2 carry prefill tokens (prompts A+B, then C with decodes A and B), it3 does not
    assert acc[A_PF_ITER] == 2
    assert acc[A_PF_S] == pytest.approx(0.8 + 0.42, rel=EXACT)
    assert acc[A_PF_PROMPTS] == 2 + 1
    assert acc[A_PF_DECODES] == 0 + 2
    assert acc[A_PF_RUN_S] == pytest.approx(2 * 0.8 + 3 * 0.42, rel=EXACT)
    # arrivals that find a free slot and nothing queued: A (idle server, residual 0) and C
    # (it1 runs until 0.8 and carries prefill: 0.7 s left); B arrives with A still queued
    assert acc[A_ARR_FREE] == 2
    assert acc[A_ARR_FREE_RESID_S] == pytest.approx(0.7, rel=EXACT)
    assert acc[A_ARR_FREE_PF] == 1
    assert acc[A_ARR_FREE_PF_RESID_S] == pytest.approx(0.7, rel=EXACT)
    # B finds a free slot behind one queued prompt (A's)
    assert acc[A_ARR_QUEUED] == 1
    assert acc[A_ARR_QUEUED_AHEAD] == 1
    # token gaps: A 0.42 and 0.05, B 0.42, C 0.05 -> two in each bin, none elsewhere
    assert st.tbt_hist.sum() == 4
    assert st.tbt_hist[tbt_bin(0.42)] == 2
    assert st.tbt_hist[tbt_bin(0.05)] == 2


def test_arrivals_behind_queued_prompts() -> None:
    # A, B, C arrive together at an idle server: A finds nothing queued, B one prompt ahead, C
    # two; D arrives at 10 s, after all three are done, and finds an idle server again
    cfg = IterationConfig.uniform(1, blocks_total=1000, max_batched_tokens=100)
    st, _, _ = _run([(0.0, 10, 2), (0.0, 10, 2), (0.0, 10, 2), (10.0, 10, 2)], cfg)
    acc = st.acc[0]
    assert acc[A_ARR_FREE] == 2
    assert acc[A_ARR_FREE_RESID_S] == 0.0
    assert acc[A_ARR_QUEUED] == 2
    assert acc[A_ARR_QUEUED_AHEAD] == 1 + 2


@pytest.mark.parametrize("fast_forward", [True, False])
def test_free_arrival_meets_a_decode_iteration(fast_forward) -> None:
    # A(10, 50) at 0: prefill [0, 0.1], then decode-only iterations of 0.05 s; B(10, 1) at
    # 0.32 finds a free slot during the one that started at 0.30: 0.03 s left, no prefill. The
    # same whether the decode iterations are run one by one or fast-forwarded.
    cfg = IterationConfig.uniform(
        1, blocks_total=1000, max_batched_tokens=100, fast_forward=fast_forward
    )
    st, log, _ = _run([(0.0, 10, 50), (0.32, 10, 1)], cfg)
    acc = st.acc[0]
    assert acc[A_ARR_FREE] == 2
    assert acc[A_ARR_FREE_RESID_S] == pytest.approx(0.03, rel=1e-9)
    assert acc[A_ARR_FREE_PF] == 0
    assert acc[A_ARR_FREE_PF_RESID_S] == 0.0
    assert acc[A_ARR_QUEUED] == 0
    # B's own prefill is mixed with A's decode in the iteration at 0.35: 0.01 x 11
    assert log["t_first_s"][1] == pytest.approx(0.35 + 0.11, rel=1e-9)


def test_token_gap_percentiles_from_the_histogram() -> None:
    """Percentiles over every gap (not per-request means): one request with 99 gaps of 0.05 s
    and one 10.01 s stall (prefill of a long prompt arriving beside it) has p50 = 0.05 s and
    p99 = 0.05 s, p99.5 = 10.01 s; each within half a bin (0.5 %) of the exact gap."""
    from greenroute.sim.iteration_results import hist_percentile

    cfg = IterationConfig.uniform(1, blocks_total=1000, max_batched_tokens=2048)
    # A(10, 101) at 0: prefill 0.1, decodes every 0.05; L(1000, 1) lands during A's 2nd decode
    st, log, _ = _run([(0.0, 10, 101), (0.17, 1000, 1)], cfg)
    assert st.tbt_hist.sum() == 100  # A's 100 gaps; L has a single token
    assert st.tbt_hist[tbt_bin(10.01)] == 1
    assert st.tbt_hist[tbt_bin(0.05)] == 99
    half_bin = TBT_BIN_REL / 2 + 1e-12
    assert hist_percentile(st.tbt_hist, 50) == pytest.approx(0.05, rel=half_bin)
    assert hist_percentile(st.tbt_hist, 99) == pytest.approx(0.05, rel=half_bin)
    assert hist_percentile(st.tbt_hist, 99.5) == pytest.approx(10.01, rel=half_bin)
    assert log["tbt_max_s"][0] == pytest.approx(10.01, rel=EXACT)


def test_long_prompt_stalls_the_decodes_of_others() -> None:
    # A(10,4) at 0; L(1000,1) arrives at 0.15, exactly when A's third iteration starts.
    # it1 [0, 0.1] A prefill; it2 [0.1, 0.15] A decode; it3 [0.15, 10.16] L prefill + A decode
    # mixed 0.01 x 1001 = 10.01; it4 [10.16, 10.21] A's last decode.
    cfg = IterationConfig.uniform(1, blocks_total=1000, max_batched_tokens=2048)
    _, log, _ = _run([(0.0, 10, 4), (0.15, 1000, 1)], cfg)
    assert log["t_first_s"] == pytest.approx([0.1, 10.16], rel=EXACT)
    assert log["t_finish_s"] == pytest.approx([10.21, 10.16], rel=EXACT)
    assert log["tbt_max_s"][0] == pytest.approx(10.01, rel=EXACT)
    assert log["tbt_sum_s"][0] == pytest.approx(0.05 + 10.01 + 0.05, rel=EXACT)


def test_prompt_longer_than_budget_runs_alone_and_skips_decodes() -> None:
    # budget 100. A(10,5) at 0; L(150,1) at 0.1. it2 [0.1, 1.6]: L alone (first prefill is
    # admitted even over budget; nothing is left for A's decode). Then A's 4 decodes end at
    # 1.65, 1.70, 1.75, 1.80 (0.05 each).
    cfg = IterationConfig.uniform(1, blocks_total=1000, max_batched_tokens=100)
    _, log, _ = _run([(0.0, 10, 5), (0.1, 150, 1)], cfg)
    assert log["t_finish_s"] == pytest.approx([1.80, 1.6], rel=EXACT)
    assert log["tbt_max_s"][0] == pytest.approx(1.55, rel=EXACT)


def test_decodes_left_out_go_first_next_iteration() -> None:
    # budget 100. A, B, C (1 prompt token, 10 output) at 0: it1 [0, 0.03].
    # it2 [0.03, 1.03]: P1 (98) + decodes A, B = 100 tokens; C left out.
    # it3 [1.03, 2.03]: P2 (98) + C (left out before, so first) + A; B left out.
    # it4 [2.03, 2.08]: A, B, C decode. Largest gaps: A 1.0, B 2.08 - 1.03, C 2.03 - 0.03.
    cfg = IterationConfig.uniform(1, blocks_total=1000, max_batched_tokens=100)
    reqs = [(0.0, 1, 10), (0.0, 1, 10), (0.0, 1, 10), (0.03, 98, 1), (0.5, 98, 1)]
    _, log, _ = _run(reqs, cfg)
    assert log["tbt_max_s"][:3] == pytest.approx([1.0, 1.05, 2.0], rel=1e-9)
    assert log["t_finish_s"][3:] == pytest.approx([1.03, 2.03], rel=EXACT)


@pytest.mark.parametrize(
    ("chunked", "l_first", "l_finish", "a_finish"),
    [
        # chunked: it2 [0.1,1.1] A decode + L chunk 99; it3 [1.1,2.1] same; it4 [2.1,2.63]
        # A decode + L's last 52 tokens (first token of L); it5 [2.63,2.68] L decode.
        (True, 2.63, 2.68, 2.63),
        # whole prompts: it2 [0.1,2.6] L (250) alone; it3 [2.6,2.65] A + L decodes; A at 2.70,
        # 2.75.
        (False, 2.6, 2.65, 2.75),
    ],
)
def test_chunked_prefill_splits_a_prompt_over_iterations(chunked, l_first, l_finish, a_finish):
    cfg = IterationConfig.uniform(1, blocks_total=1000, max_batched_tokens=100, chunked=chunked)
    st, log, _ = _run([(0.0, 10, 4), (0.1, 250, 2)], cfg)
    assert log["t_first_s"][1] == pytest.approx(l_first, rel=EXACT)
    assert log["t_finish_s"][1] == pytest.approx(l_finish, rel=EXACT)
    assert log["t_finish_s"][0] == pytest.approx(a_finish, rel=EXACT)
    assert log["prefill_tokens"].tolist() == [10, 250]
    assert st.acc[0, A_ITER] == 5


def _kv_case(max_preemptions):
    # block 4 tokens, 6 blocks (24 tokens). A(8,9), B(8,9) at 0: it1 [0,0.16] both prefill
    # (2 blocks each); it2 both take a 3rd block (0 free); it2..it5 decode to 12 KV tokens each
    # (tokens 2..5 at 0.21 .. 0.36). it6 at 0.36: A needs a 4th block, none free: B (admitted
    # last) is preempted, its 3 blocks freed; A decodes -> 0.41. B (13 tokens = 4 blocks) does
    # not fit the 2 free blocks until A finishes at 0.56 (tokens 7, 8, 9 at 0.46, 0.51, 0.56).
    # B then re-prefills 8 + 5 tokens: 0.13 -> 0.69 (its 6th token), then 0.74, 0.79, 0.84.
    cfg = IterationConfig.uniform(
        1, blocks_total=6, block_tokens=4, max_batched_tokens=100, max_preemptions=max_preemptions
    )
    return _run([(0.0, 8, 9), (0.0, 8, 9)], cfg)


def test_preemption_by_recompute_when_kv_runs_out() -> None:
    st, log, _ = _kv_case(max_preemptions=1)
    assert log["n_preempt"].tolist() == [0, 1]
    assert log["t_finish_s"] == pytest.approx([0.56, 0.84], rel=EXACT)
    assert log["t_first_s"] == pytest.approx([0.16, 0.16], rel=EXACT)
    assert log["tbt_max_s"][1] == pytest.approx(0.69 - 0.36, rel=EXACT)
    assert log["recomputed_tokens"].tolist() == [0, 12]
    assert log["decode_inputs"].tolist() == [8, 8]
    assert st.acc[0, A_PREEMPT] == 1
    assert st.acc[0, A_RECOMP] == 12
    assert st.blocks_free[0] == 6


def test_preemption_bound_drops_with_a_reason() -> None:
    st, log, _ = _kv_case(max_preemptions=0)
    assert log["drop"].tolist() == [DROP_NONE, DROP_PREEMPTION_LIMIT]
    assert log["t_finish_s"][0] == pytest.approx(0.56, rel=EXACT)
    assert np.isnan(log["t_finish_s"][1])
    assert log["output_tokens"][1] == 5  # it had produced 5 tokens when dropped
    assert st.acc[0, A_PREEMPT] == 0
    assert st.blocks_free[0] == 6


def test_request_that_can_never_fit_is_dropped_on_arrival() -> None:
    # 6 blocks x 4 tokens = 24 tokens: (20, 5) needs 7 blocks, (20, 4) exactly 6
    cfg = IterationConfig.uniform(2, blocks_total=6, block_tokens=4)
    _, log, out = _run([(0.0, 20, 5), (0.0, 20, 4)], cfg)
    assert out.tolist() == [-1, 0]
    assert log["drop"].tolist() == [DROP_KV_OVERFLOW, DROP_NONE]
    st2 = IterationState.empty(cfg)
    assert enqueue(st2, cfg, _flat(), 1, 7, 0.0, 20, 5) == DROP_KV_OVERFLOW
    assert st2.drain_log()["drop"].tolist() == [DROP_KV_OVERFLOW]


def test_advance_runs_only_iterations_starting_before_t_until() -> None:
    cfg = IterationConfig.uniform(1, blocks_total=1000, max_batched_tokens=100)
    cost = _flat()
    st = IterationState.empty(cfg)
    enqueue(st, cfg, cost, 0, 0, 0.0, 50, 3)  # it1 [0, 0.5]
    advance(st, cfg, cost, 0, 1, 0.5)
    assert st.clock[0] == pytest.approx(0.5, rel=EXACT)
    assert st.acc[0, A_ITER] == 1
    # B at 0.5 joins the iteration that starts at 0.5: prefill 30 + A decode = 0.31
    enqueue(st, cfg, cost, 0, 1, 0.5, 30, 2)
    advance(st, cfg, cost, 0, 1, 0.5 + 1e-9)
    assert st.clock[0] == pytest.approx(0.81, rel=EXACT)
    advance(st, cfg, cost, 0, 1, 100.0)
    log = st.drain_log()
    assert dict(zip(log["req"].tolist(), log["t_first_s"].tolist(), strict=True)) == pytest.approx(
        {0: 0.5, 1: 0.81}, rel=EXACT
    )


@pytest.mark.parametrize(
    ("lp", "u", "expected"),
    [
        (LP_ROUND_ROBIN, None, [0, 1, 0]),
        # least loaded, tokens of work left: after R0 s0 holds 100 + 10 - 1 = 109, s1 then 11
        (LP_LEAST_LOADED, None, [0, 1, 1]),
        # least connections: 1 vs 1 after two arrivals, tie -> lowest index
        (LP_LEAST_CONNECTIONS, None, [0, 1, 0]),
        (LP_RANDOM, [0.9, 0.1, 0.6], [1, 0, 1]),
    ],
)
def test_local_policies(lp, u, expected) -> None:
    cfg = IterationConfig.uniform(2, blocks_total=1000)
    _, _, out = _run([(0.0, 100, 10), (0.0, 10, 2), (0.0, 10, 2)], cfg, lp=lp, u=u)
    assert out.tolist() == expected


def test_regions_and_models_restrict_the_candidates() -> None:
    cfg = IterationConfig.uniform(3, blocks_total=1000)
    cfg.server_model[2] = 1
    # region 0 = servers 0, 1 (model 0); region 1 = server 2 (model 1)
    reqs = [(0.0, 10, 2, 1, 1), (0.0, 10, 2, 1, 0), (0.0, 10, 2, 0, 0), (0.0, 10, 2, 0, 0)]
    _, log, out = _run(reqs, cfg, region_start=[0, 2, 3])
    assert out.tolist() == [2, -1, 0, 1]
    assert log["drop"].tolist() == [DROP_NONE, DROP_NO_SERVER, DROP_NONE, DROP_NONE]


def _random_case(data):
    n = data.draw(hst.integers(1, 25))
    reqs = []
    t = 0.0
    for _ in range(n):
        t += data.draw(hst.sampled_from([0.0, 0.0123, 0.0517, 0.3071]))
        reqs.append((t, data.draw(hst.integers(1, 40)), data.draw(hst.integers(1, 20))))
    cfg = IterationConfig.uniform(
        2,
        blocks_total=data.draw(hst.integers(8, 30)),
        block_tokens=4,
        max_batched_tokens=data.draw(hst.integers(4, 64)),
        max_running=data.draw(hst.integers(1, 6)),
        chunked=data.draw(hst.booleans()),
        max_preemptions=data.draw(hst.integers(0, 3)),
    )
    return reqs, cfg


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hst.data())
def test_token_conservation(data) -> None:
    reqs, cfg = _random_case(data)
    lp = data.draw(hst.sampled_from([LP_ROUND_ROBIN, LP_LEAST_LOADED, LP_LEAST_CONNECTIONS]))
    st, log, _ = _run(reqs, cfg, lp=lp)
    n = len(reqs)
    assert sorted(log["req"].tolist()) == list(range(n))  # each request reported once
    prompt = np.array([r[1] for r in reqs])
    output = np.array([r[2] for r in reqs])
    ok = log["drop"] == DROP_NONE
    fit = (prompt + output + 3) // 4 <= cfg.blocks_total[0]
    assert (ok | (log["drop"] == DROP_PREEMPTION_LIMIT) == fit).all()
    assert (log["prefill_tokens"][ok] == prompt[ok]).all()
    assert (log["output_tokens"][ok] == output[ok]).all()
    assert (log["decode_inputs"][ok] == output[ok] - 1).all()
    assert (log["n_preempt"] <= cfg.max_preemptions).all()
    pre = log["drop"] == DROP_PREEMPTION_LIMIT
    assert (log["n_preempt"][pre] == cfg.max_preemptions).all()
    assert (log["t_first_s"][ok] >= log["t_arrive_s"][ok]).all()
    assert (log["t_finish_s"][ok] >= log["t_first_s"][ok]).all()
    acc = st.acc.sum(axis=0)
    assert acc[A_PF_FIRST] == log["prefill_tokens"].sum()
    assert acc[A_RECOMP] == log["recomputed_tokens"].sum()
    assert acc[A_DEC_IN] == log["decode_inputs"].sum()
    assert acc[A_OUT_TOK] == log["output_tokens"].sum()
    assert acc[A_TOKENS] == acc[A_PF_FIRST] + acc[A_RECOMP] + acc[A_DEC_IN]
    # everything drained: KV, entries and work counters back to empty
    assert (st.blocks_free == cfg.blocks_total).all()
    assert (st.work_tok == 0).all()
    assert (st.nfree == cfg.queue_limit + cfg.max_running).all()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hst.data())
def test_fast_forward_equals_iteration_by_iteration(data) -> None:
    # costs and times off any common grid, so no arrival ties with an iteration boundary (a
    # tie may fall either side by float rounding, in one mode or the other)
    reqs, cfg = _random_case(data)
    cost = stack_cost_tables([flat_cost_table(0.010137, 0.050731, decode_s_per_seq=0.0013)])
    t_end = data.draw(hst.sampled_from([0.3779, 2.0113, 1e6]))
    lp = data.draw(hst.sampled_from([LP_ROUND_ROBIN, LP_LEAST_LOADED, LP_LEAST_CONNECTIONS]))
    st_fast, fast, _ = _run(reqs, cfg, cost, t_end=t_end, lp=lp)
    cfg.fast_forward = False
    st_slow, slow, _ = _run(reqs, cfg, cost, t_end=t_end, lp=lp)
    for k in fast:
        if k.startswith(("t_", "tbt", "first_iteration_s", "arrival_residual_s")):
            np.testing.assert_allclose(fast[k], slow[k], rtol=1e-9, atol=1e-12)
        else:
            np.testing.assert_array_equal(fast[k], slow[k])
    # all accumulators but the diagnostic step/jump counts
    np.testing.assert_allclose(st_fast.acc[:, :A_STEPS], st_slow.acc[:, :A_STEPS], rtol=1e-9)
    np.testing.assert_allclose(st_fast.acc[:, A_RUN_S], st_slow.acc[:, A_RUN_S], rtol=1e-9)
    np.testing.assert_allclose(st_fast.acc[:, A_RUN2_S], st_slow.acc[:, A_RUN2_S], rtol=1e-9)
    np.testing.assert_array_equal(st_fast.tbt_hist, st_slow.tbt_hist)
    np.testing.assert_allclose(st_fast.clock, st_slow.clock, rtol=1e-9)
    np.testing.assert_array_equal(st_fast.nrun, st_slow.nrun)
    np.testing.assert_array_equal(st_fast.qlen, st_slow.qlen)


def test_copy_forks_identically_and_independently() -> None:
    cfg = IterationConfig.uniform(
        2, blocks_total=12, block_tokens=4, max_batched_tokens=32, max_preemptions=2
    )
    cost = _flat()
    rng = np.random.default_rng(3)
    n = 60
    t = np.sort(rng.uniform(0, 5, n))
    p = rng.integers(1, 30, n)
    o = rng.integers(1, 15, n)
    z = np.zeros(n, dtype=np.int64)
    rs, lp = np.array([0, 2]), np.array([LP_LEAST_LOADED])
    half = n // 2
    st = IterationState.empty(cfg)
    run_arrivals(st, cfg, cost, t[:half], z[:half], z[:half], np.arange(half), p[:half],
                 o[:half], np.zeros(half), t[half], rs, lp)  # fmt: skip
    fork = st.copy()
    snap = st.copy()
    logs = []
    for s in (st, fork):
        run_arrivals(s, cfg, cost, t[half:], z[half:], z[half:], np.arange(half, n), p[half:],
                     o[half:], np.zeros(n - half), 1e6, rs, lp)  # fmt: skip
        logs.append(s.drain_log())
    for k in logs[0]:
        np.testing.assert_array_equal(logs[0][k], logs[1][k])
    np.testing.assert_array_equal(st.acc, fork.acc)
    assert st.acc[:, A_PREEMPT].sum() > 0  # the case exercises preemption
    # the snapshot was not touched by either run
    assert snap.acc[:, A_ITER].sum() < st.acc[:, A_ITER].sum()
    assert snap.in_flight() > 0 and st.in_flight() == 0


def _csv(tmp_path: Path) -> Path:
    # llama2-70b/a100-80gb/tp8; times ms. batch_tokens 128: prompt 60, 70, 80 (median 70),
    # token 40; batch_tokens 512 from 512x1 (prompt 100, 110) and 256x2 (prompt 130): median 110;
    # token medians 40 and 48. peak_power 0.5 at 128 and 0.9 at 512; average_power at
    # prompt 512: 0.4 (batch 1), 0.6 (batch 4, prompt 512 x 4 = 2048 tokens: prompt 400).
    rows = [
        "128,1,60,40,0.5,0.3", "128,1,70,40,0.5,0.3", "128,1,80,40,0.5,0.3",
        "512,1,100,48,0.9,0.4", "512,1,110,48,0.9,0.4", "256,2,130,48,0.9,0.0",
        "512,4,400,60,0.0,0.6",
    ]  # fmt: skip
    head = "model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,"
    head += "prompt_time,token_time,e2e_time,tensor_parallel"
    lines = [head]
    for r in rows:
        ps, bs, pt, tt, pp, ap = r.split(",")
        lines.append(f"llama2-70b,a100-80gb,{ps},{bs},128,{pp},{ap},{pt},{tt},1,8")
    path = tmp_path / "perf.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_splitwise_iteration_cost(tmp_path: Path) -> None:
    tab = splitwise_cost_table(
        _csv(tmp_path), "llama2-70b", "a100-80gb", 8, tdp_w=400.0, host_w=1000.0
    )
    c = stack_cost_tables([tab])
    args = (c.prompt_x, c.prompt_s, c.n_prompt, c.token_x, c.token_s, c.n_token, c.mixed_factor)
    # prefill only: median prompt_time at 128 tokens; at 320 halfway between 0.070 and 0.110
    assert iteration_duration_s(0, 128, 0, *args) == pytest.approx(0.070, rel=EXACT)
    assert iteration_duration_s(0, 320, 0, *args) == pytest.approx(0.090, rel=EXACT)
    # mixed: 1.1 x prompt curve at prefill + decodes (splitwise performance_model.py:253)
    assert iteration_duration_s(0, 300, 20, *args) == pytest.approx(1.1 * 0.090, rel=EXACT)
    # decode only, token curve by decode count; extrapolated below the first knot (128)
    # along the 128 -> 512 segment: 0.040 + (0.048 - 0.040) / 384 x (32 - 128)
    assert iteration_duration_s(0, 0, 32, *args) == pytest.approx(0.038, rel=EXACT)
    pw = (c.pp_x, c.pp_w, c.n_pp, c.pd_x, c.pd_w, c.n_pd, c.has_power, c.idle_w, c.peak_w)
    # prefill: host + peak fraction x TDP x 8 GPUs; held beyond the knots
    assert iteration_power_w(0, 128, 0, 2048.0, *pw) == pytest.approx(1000 + 0.5 * 3200)
    assert iteration_power_w(0, 320, 0, 2048.0, *pw) == pytest.approx(1000 + 0.7 * 3200)
    assert iteration_power_w(0, 9000, 0, 2048.0, *pw) == pytest.approx(1000 + 0.9 * 3200)
    # decode: average fraction by batch size (prompt-512 sweep); batch 2 between 1 and 4
    assert iteration_power_w(0, 0, 2, 2048.0, *pw) == pytest.approx(1000 + (0.4 + 0.2 / 3) * 3200)


@pytest.mark.realdata
def test_splitwise_cost_on_the_shipped_profile(data_dir: Path) -> None:
    tab = splitwise_cost_table(
        data_dir / "perf" / "splitwise_perf_model.csv", "llama2-70b", "a100-80gb", 8,
        tdp_w=400.0, host_w=0.0,
    )  # fmt: skip
    c = stack_cost_tables([tab])
    args = (c.prompt_x, c.prompt_s, c.n_prompt, c.token_x, c.token_s, c.n_token, c.mixed_factor)
    # only 128 x 1 rows have 128 batch tokens: their median prompt_time / token_time (ms)
    assert iteration_duration_s(0, 128, 0, *args) == pytest.approx(0.06534724, rel=1e-6)
    assert iteration_duration_s(0, 0, 128, *args) == pytest.approx(0.043031259, rel=1e-6)
