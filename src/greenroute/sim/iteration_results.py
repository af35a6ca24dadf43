"""Metrics, ledgers and frames of a request-fidelity run with the iteration server model.

Latency (per request, seconds):

* TTFT = 2 x one-way network + (end of the iteration that produced the first token - arrival
  at the region). The iteration kernel has no model swap (each server serves its resident
  model), so no cold load enters it.
* end-to-end = end of the iteration of the last token + one-way network - arrival at the
  origin (deferrable requests include the time they were held).
* time between tokens (vLLM's benchmark names in brackets): ``tbt_mean_s`` = mean of every
  token gap of the completed requests; ``tbt_p50_s``/``tbt_p99_s`` = percentiles over every
  token gap (inter-token latency, ITL), read from the kernel's log-binned gap histogram (bins
  1 % wide, value at the bin's geometric centre: within 0.5 % of the exact percentile; the
  histogram also holds the gaps of requests still running or later dropped);
  ``tpot_p99_s`` = 99th percentile over completed requests of each request's mean gap (time
  per output token, TPOT; splitwise-sim's per-request ``tbt``). Requests with one output token
  have no gap.

Energy: per epoch and server, the energy of the iterations that started in the epoch (from the
kernel's cumulative accumulators read at each epoch end) less idle power over their duration
gives the dynamic IT energy; the ledger adds always-on idle power, so carbon, water and cost
follow as in the slots model. Utilisation = occupancy of the running cap: running requests x
seconds / (running cap x seconds), the continuous-batching analogue of busy slots (a server
iterating with one request is 1/32 utilised, not fully busy); ``iterating_share`` = the share
of time the servers run iterations. ``batch_size_mean`` = requests per iteration;
``token_budget_utilisation`` = tokens processed / (iterations x token budget), per region in
the epoch frame and in total.

Conservation: every request is completed (finish <= horizon), dropped with a reason, or in
flight (held, on the network, queued, running, or finishing after the horizon). Tokens: for a
completed request prefill_tokens = prompt tokens and output tokens = output length; recomputed
tokens (after preemption) are counted apart.
"""

from __future__ import annotations

import numpy as np

from greenroute.data.requests import CLASS_DEFERRABLE, CLASS_INTERACTIVE
from greenroute.sim.iteration import kernel as IK
from greenroute.sim.results import (
    RunResult,
    _add_common,
    _epoch_frame,
    _ledger,
    _result,
    _safe,
    _totals,
    request_frame,
    request_metrics,
)


def latencies(sim, be) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(network one way, TTFT, end-to-end) per request (NaN where not applicable)."""
    prep, reqs = sim.prep, be.reqs
    net = np.zeros(len(reqs))
    has = be.region >= 0
    net[has] = prep.latency_s[reqs.origin[has], be.region[has]]
    ttft = 2.0 * net + (be.t_first - be.t_reg)
    e2e = be.finish + net - reqs.arrival_s
    return net, ttft, e2e


def epoch_parts(sim, be, e: int) -> dict:
    """One epoch's figures for forks (``sim/fork.py``): IT energy of the epoch's window, and
    TTFT / SLO misses / drops of the requests whose outcome was logged in the epoch (completed
    or dropped then: in this model a request's latency is known when it finishes)."""
    sc, reqs = sim.sc, be.reqs
    it = be.dyn_kwh[:, e] + be.b.region_idle_kw() * sc.epoch_s / 3600.0
    ids = be.logged_ids
    drop = be.drop[ids]
    ok = ids[drop == 0]
    _, ttft, e2e = latencies(sim, be)
    cls = reqs.cls[ok]
    inter = cls == CLASS_INTERACTIVE
    slo_value = ttft[ok] if sc.slo_kind == "ttft" else e2e[ok]
    late_i = inter & (slo_value > sc.ttft_slo_s)
    late_d = (cls == CLASS_DEFERRABLE) & (be.finish[ok] > reqs.deadline_s[ok])
    return {
        "it_kwh": it,
        "n_int": float(inter.sum()),
        "ttft_sum": float(ttft[ok][inter].sum()),
        "slo_misses": float(late_i.sum() + late_d.sum()),
        "dropped": float((drop > 0).sum()),
    }


def finalize_iteration(sim, be) -> RunResult:
    sc, prep, reqs = sim.sc, sim.prep, be.reqs
    b = prep.built
    n_e, n_r = sc.n_epochs, b.n_regions
    t_end = n_e * sc.epoch_s
    led, _ = _ledger(sim, be.dyn_kwh)
    disp_epoch = np.floor(np.nan_to_num(be.dispatch, nan=-1) / sc.epoch_s).astype(np.int64)
    ok = (be.region >= 0) & (disp_epoch >= 0) & (disp_epoch < n_e)
    dispatched = np.zeros((n_r, n_e))
    np.add.at(dispatched, (be.region[ok], disp_epoch[ok]), 1.0)
    metrics = _totals(led)
    dropped = be.drop > 0
    completed = (be.drop == 0) & (be.finish <= t_end)
    _, ttft, e2e = latencies(sim, be)
    gaps = be.out_tok[completed] - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        tbt_req = be.tbt_sum[completed] / gaps
    tbt_req = tbt_req[gaps > 0]
    ee = e2e[completed]
    acc = be.st.acc.sum(axis=0)
    iters = float(acc[IK.A_ITER])
    budget = float((be.st.acc[:, IK.A_ITER] * be.cfg.max_batched_tokens).sum())
    metrics.update(request_metrics(sc, reqs, be, ttft, e2e, completed, dropped))
    metrics.update(
        {
            "e2e_p50_s": _safe(np.percentile, ee, 50),
            "e2e_p95_s": _safe(np.percentile, ee, 95),
            "e2e_p99_s": _safe(np.percentile, ee, 99),
            "tbt_mean_s": float(be.tbt_sum[completed].sum() / gaps.sum())
            if gaps.sum() > 0
            else float("nan"),
            "tbt_p50_s": hist_percentile(be.st.tbt_hist, 50),
            "tbt_p99_s": hist_percentile(be.st.tbt_hist, 99),
            "tpot_p99_s": _safe(np.percentile, tbt_req, 99),
            "preemptions": float(acc[IK.A_PREEMPT]),
            "iterations": iters,
            "batch_size_mean": float(acc[IK.A_BATCH_SUM] / iters) if iters else float("nan"),
            "token_budget_utilisation": float(acc[IK.A_TOKENS] / budget) if budget else 0.0,
            "prefill_tokens": float(be.prefill_tok.sum()),
            "recomputed_tokens": float(be.recomp_tok.sum()),
            "output_tokens": float(be.out_tok.sum()),
        }
    )
    busy_slot_s = be.run_s  # running request-seconds: utilisation = occupancy of the cap
    _add_common(metrics, sim, busy_slot_s)
    servers = b.region_servers()
    metrics["iterating_share"] = float(be.busy_s.sum() / max(servers.sum() * t_end, 1e-12))
    frame = _epoch_frame(sim, led, dispatched, busy_slot_s)
    frame["iterating_share"] = (
        be.busy_s / np.maximum(servers[:, None] * sc.epoch_s, 1e-12)
    ).ravel()
    with np.errstate(divide="ignore", invalid="ignore"):
        frame["batch_size_mean"] = np.where(be.iters > 0, be.batch_sum / be.iters, np.nan).ravel()
        frame["token_budget_utilisation"] = np.where(
            be.budget_tokens > 0, be.tokens / be.budget_tokens, 0.0
        ).ravel()
    req_frame = None
    if sim.config.record_requests:
        # per request beyond the outcome: when it reached its server, what it met there (the
        # rest of the iteration in progress, the requests queued ahead) and the iteration that
        # produced its first token (its seconds and the decodes batched with it)
        req_frame = request_frame(
            reqs, be, first_token_s=be.t_first, finish_s=be.finish, ttft_s=ttft, e2e_s=e2e,
            preemptions=be.n_preempt, prefill_tokens=be.prefill_tok,
            recomputed_tokens=be.recomp_tok, output_tokens_done=be.out_tok,
            server_arrival_s=be.t_reg, first_iteration_s=be.first_iter_s,
            first_iteration_decodes=be.first_iter_dec, arrival_residual_s=be.arr_resid_s,
            arrival_queue_ahead=be.arr_queued,
        )  # fmt: skip
    res = _result(sim, metrics, frame, req_frame)
    res.extras["servers"] = server_frame(sim, be)
    return res


def hist_percentile(hist: np.ndarray, q: float) -> float:
    """``q``-th percentile of the token gaps counted in ``hist`` (kernel ``tbt_bin``): the
    geometric centre of the bin where the cumulative count reaches ``q`` % (NaN if empty)."""
    total = float(hist.sum())
    if total <= 0:
        return float("nan")
    b = int(np.searchsorted(np.cumsum(hist), q / 100.0 * total))
    r = 1.0 + IK.TBT_BIN_REL
    return float(IK.TBT_LO_S * r**b * np.sqrt(r))


def server_frame(sim, be):
    """Per-server figures of the run: iterations, busy seconds, running request-seconds (and
    their square, for the occupancy's time-average spread), mean batch size, token-budget
    utilisation (tokens processed / (iterations x budget)), iteration energy (J, busy time only),
    preemptions; and of the iterations that carry prefill tokens: how many, their seconds, the
    prompts (chunks) and running decodes they carry and their running request-seconds (the rest
    of the busy time is decode-only); and of the arrivals that found a free slot and nothing
    queued: how many, the residual iteration they met (summed) and how many of them, with what
    residual, met an iteration carrying prefill tokens; and of those that found a free slot
    behind queued prompts: how many, and the prompts ahead of them (summed); in
    ``RunResult.extras["servers"]``."""
    import pandas as pd

    b = sim.prep.built
    acc = be.st.acc
    it = acc[:, IK.A_ITER]
    with np.errstate(divide="ignore", invalid="ignore"):
        batch = np.where(it > 0, acc[:, IK.A_BATCH_SUM] / it, np.nan)
        budget = it * be.cfg.max_batched_tokens
        util = np.where(budget > 0, acc[:, IK.A_TOKENS] / budget, 0.0)
    return pd.DataFrame(
        {
            "region": np.asarray(sim.sc.regions, dtype=object)[b.server_region],
            "iterations": it,
            "busy_s": acc[:, IK.A_BUSY_S],
            "running_request_s": acc[:, IK.A_RUN_S],
            "running_request2_s": acc[:, IK.A_RUN2_S],
            "batch_size_mean": batch,
            "token_budget_utilisation": util,
            "iteration_energy_j": acc[:, IK.A_ENERGY_J],
            "preemptions": acc[:, IK.A_PREEMPT],
            "prefill_iterations": acc[:, IK.A_PF_ITER],
            "prefill_iteration_s": acc[:, IK.A_PF_S],
            "prefill_prompts": acc[:, IK.A_PF_PROMPTS],
            "prefill_carried_decodes": acc[:, IK.A_PF_DECODES],
            "prefill_running_request_s": acc[:, IK.A_PF_RUN_S],
            "free_arrivals": acc[:, IK.A_ARR_FREE],
            "free_arrival_residual_s": acc[:, IK.A_ARR_FREE_RESID_S],
            "free_arrivals_in_prefill": acc[:, IK.A_ARR_FREE_PF],
            "free_arrival_prefill_residual_s": acc[:, IK.A_ARR_FREE_PF_RESID_S],
            "queued_arrivals": acc[:, IK.A_ARR_QUEUED],
            "queued_arrival_prompts_ahead": acc[:, IK.A_ARR_QUEUED_AHEAD],
        }
    )
