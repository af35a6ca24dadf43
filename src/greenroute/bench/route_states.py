"""The states a state-aware router leaves, read from the iteration engine's per-request frame:
what the fluid model's slot wait has to reproduce (``docs/fluid_iteration_gap.md``, "Least-loaded
above the cap from the request frame").

A server's state is ``k``, the requests dispatched to it and not yet finished (running plus
queued; the cap on running requests is ``S``), rebuilt from each request's ``dispatch_s`` and
``finish_s`` (``record_requests``), so no kernel instrumentation is needed. Per case it reports:

* ``P(meets cap)``: the share of arrivals whose server holds ``k >= S``, and of those the share
  that had a server with ``k < S`` in the same region ("room elsewhere");
* the queue ahead of such an arrival (``k - S``), its mean TTFT by that queue, and the wait
  given full read as ``E[TTFT | full] - E[TTFT | not full]``;
* the time-average law ``pi(k)`` of a server's state, the completion rate ``mu(k)`` in state
  ``k`` (completions per second spent there) and the router's preference ``theta(k)`` (arrivals
  per second spent in state ``k``, over the mean arrival rate per server);
* Little's law above the cap: ``W = E[(k - S)^+] / (lam P(meets cap))`` (time averages), which
  must agree with the TTFT-based wait given full up to the base TTFT's own difference;
* the count law the fluid model's Erlang C stands for: the time-average ``P(k >= S)``, the
  spread ``z = Var(k) / E[k]``, the running count ``E[min(k, S)]`` and Hayward's ``C(S / z, n /
  z)`` at those two (the time-average P the law gives when its ``z`` and ``n`` are right); and
  how the router's arrivals depart from the time average: the mean state they see less
  ``E[k]``, and the slope ``beta`` of ``theta(k) = 1 + beta (k - E[k])`` below the cap
  (``theta_slope``; ``beta E[k]`` is 0 for random routing).

Dropped requests are left out; one still running at the end holds its server to the end; the
first ``SKIP_S`` seconds (a warm-up) are left out of every average. It also prints the fluid
model's parts of the same TTFT beside the engine's (``model_parts``, ``engine_parts``).

``python -m greenroute.bench.route_states --cases m17_8_85,ll8_85 --seeds 2`` (about 1 min per
case and seed on one core).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
import pandas as pd

from greenroute.bench.calibrate import local_simulation
from greenroute.bench.calibration_cases import ALL_CASES, CalibrationCase
from greenroute.data.requests import CLASS_INTERACTIVE
from greenroute.sim.queueing_kernel import erlang_c

CAP = 32  # running requests per server in the calibration scenarios (``IterationConfig``)
SKIP_S = 1800.0  # warm-up left out of the averages (two epochs of 900 s)
K_MAX = 256  # states above this are pooled into the last bin


@dataclass
class ServerStates:
    """Per arrival: ``k_own`` (its server's state before it), ``k_min_other`` (the least state
    of the other servers of its region; ``K_MAX`` with none), ``ttft_s``, ``interactive``; per
    state ``k``
    (servers pooled): ``time_s``, ``completions``, ``arrivals``; ``servers`` counted."""

    k_own: np.ndarray
    k_min_other: np.ndarray
    ttft_s: np.ndarray
    interactive: np.ndarray
    first_iter_s: np.ndarray  # the iteration that produced its first token (NaN: none)
    first_iter_dec: np.ndarray  # the decodes batched with it
    start_delay_s: np.ndarray  # from reaching its server to the start of that iteration
    arr_resid_s: np.ndarray  # what was left of its server's iteration in progress then
    arr_queued: np.ndarray  # and the requests queued ahead of it
    time_s: np.ndarray
    completions: np.ndarray
    arrivals: np.ndarray
    servers: int


def count_events(dispatch_s: np.ndarray, finish_s: np.ndarray):
    """Event times of a set of requests (one server's, or a region's), sorted (a finish before
    a dispatch at the same instant), the step (+1 dispatch, -1 finish), the count before each
    event and the dispatch's row (-1 for a finish)."""
    t = np.concatenate([dispatch_s, finish_s])
    d = np.concatenate([np.ones(dispatch_s.size, np.int64), -np.ones(finish_s.size, np.int64)])
    row = np.concatenate([np.arange(dispatch_s.size), -np.ones(finish_s.size, np.int64)])
    order = np.lexsort((d, t))
    t, d, row = t[order], d[order], row[order]
    k_before = np.cumsum(d) - d
    return t, d, row, k_before


def state_durations(t: np.ndarray, t_end: float, skip_s: float) -> np.ndarray:
    """Time spent after each event of sorted ``t`` until the next one (the last until
    ``t_end``), counted only within ``skip_s <= t <= t_end``."""
    t_next = np.append(t[1:], t_end)
    return np.clip(t_next, skip_s, t_end) - np.clip(t, skip_s, t_end)


def on_servers(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` that reached a server: dropped requests left out, and so are those
    still on the network at the run's end (dispatched less than their network latency before
    it, so never queued: ``server`` -1, no drop reason)."""
    return frame[(frame["drop_reason"] == "none") & (frame["server"] >= 0)]


def server_states(frame: pd.DataFrame, skip_s: float = SKIP_S) -> ServerStates:
    """Rebuild every server's state from ``frame`` (``RunResult.requests`` of an iteration run
    with ``record_requests``): only requests that reached a server (``on_servers``), averages
    over ``skip_s <= t <=`` the last finish. Only servers that received a request are
    counted."""
    done = on_servers(frame)
    t_end = float(done["finish_s"].max())  # NaN-skipping: requests still running at the end
    # have no finish and hold their server to the end
    keep = done["dispatch_s"].to_numpy() >= skip_s
    n = len(done)
    k_own = np.zeros(n, np.int64)
    k_min_other = np.full(n, K_MAX, np.int64)
    time_s = np.zeros(K_MAX + 1)
    completions = np.zeros(K_MAX + 1)
    arrivals = np.zeros(K_MAX + 1)
    region = done["region"].to_numpy()
    server = done["server"].to_numpy()
    dispatch = done["dispatch_s"].to_numpy(dtype=float)
    finish = np.nan_to_num(done["finish_s"].to_numpy(dtype=float), nan=np.inf)
    servers = 0
    for reg in np.unique(region):
        in_reg = np.flatnonzero(region == reg)
        ids = np.unique(server[in_reg])
        servers += ids.size
        # each server's state after each of its events, to read at the region's arrivals
        steps = {}
        for s in ids:
            rows = in_reg[server[in_reg] == s]
            t, d, row, kb = count_events(dispatch[rows], finish[rows])
            steps[s] = (rows, t, kb + d)
            time_s[0] += max(min(t[0], t_end) - skip_s, 0.0)  # empty until its first request
            arr = row >= 0
            k_own[rows[row[arr]]] = kb[arr]
            k_clip = np.minimum(kb, K_MAX)
            late = (t >= skip_s) & (t <= t_end)
            np.add.at(arrivals, k_clip[arr & late], 1.0)
            np.add.at(completions, k_clip[~arr & late], 1.0)
            # time in the state after each event until the next one (or the run's end)
            dur = state_durations(t, t_end, skip_s)
            np.add.at(time_s, np.minimum(kb + d, K_MAX), np.maximum(dur, 0.0))
        for s in ids:
            rows = steps[s][0]
            for o in ids:
                if o == s:
                    continue
                _, t_o, k_after = steps[o]
                idx = np.searchsorted(t_o, dispatch[rows], side="left") - 1
                k_o = np.where(idx >= 0, k_after[np.maximum(idx, 0)], 0)
                k_min_other[rows] = np.minimum(k_min_other[rows], k_o)
    start_delay = (
        done["first_token_s"] - done["first_iteration_s"] - done["server_arrival_s"]
    ).to_numpy(dtype=float)
    return ServerStates(
        k_own=k_own[keep],
        k_min_other=k_min_other[keep],
        ttft_s=done["ttft_s"].to_numpy(dtype=float)[keep],
        interactive=(done["cls"].to_numpy() == CLASS_INTERACTIVE)[keep],
        first_iter_s=done["first_iteration_s"].to_numpy(dtype=float)[keep],
        first_iter_dec=done["first_iteration_decodes"].to_numpy(dtype=float)[keep],
        start_delay_s=start_delay[keep],
        arr_resid_s=done["arrival_residual_s"].to_numpy(dtype=float)[keep],
        arr_queued=done["arrival_queue_ahead"].to_numpy(dtype=float)[keep],
        time_s=time_s,
        completions=completions,
        arrivals=arrivals,
        servers=servers,
    )


def summarise(st: ServerStates, cap: int = CAP) -> dict:
    """The figures of the module docstring from ``st``."""
    full = st.k_own >= cap
    lam = st.arrivals.sum() / st.time_s.sum()  # arrivals per server-second
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = np.where(st.time_s > 0, st.completions / st.time_s, np.nan)
        theta = np.where(st.time_s > 0, st.arrivals / st.time_s / lam, np.nan)
    pi = st.time_s / st.time_s.sum()
    k = np.arange(pi.size)
    queue_avg = float(np.dot(pi, np.maximum(k - cap, 0)))
    p_cap = float(full.mean())
    q = st.k_own[full] - cap
    ttft_by_q = [float(np.nanmean(st.ttft_s[full][q == j])) if np.any(q == j) else np.nan
                 for j in range(4)]  # fmt: skip
    k_mean = float(np.dot(pi, k))
    var_k = float(np.dot(pi, (k - k_mean) ** 2))
    n_run = float(np.dot(pi, np.minimum(k, cap)))
    z_time = var_k / k_mean if k_mean > 0 else np.nan
    seen = float(st.k_own.mean()) if st.k_own.size else np.nan
    return {
        "lam_per_server": float(lam),
        "p_meets_cap": p_cap,
        "room_elsewhere": float(np.mean(st.k_min_other[full] < cap)) if full.any() else np.nan,
        "queue_ahead_mean": float(q.mean()) if q.size else np.nan,
        "ttft_mean_s": float(np.nanmean(st.ttft_s)),
        "ttft_full_s": float(np.nanmean(st.ttft_s[full])) if full.any() else np.nan,
        "ttft_not_full_s": float(np.nanmean(st.ttft_s[~full])),
        "ttft_by_queue_s": ttft_by_q,
        "wait_full_little_s": queue_avg / (lam * p_cap) if p_cap > 0 else np.nan,
        "k_mean": k_mean,
        "p_time": float(pi[cap:].sum()),
        "z_time": z_time,
        "n_run": n_run,
        "hayward_p": float(erlang_c(cap / z_time, n_run / z_time)) if z_time > 0 else np.nan,
        "k_seen": seen,
        "seen_excess": seen - k_mean,
        "theta_slope": theta_slope(pi, theta, k_mean, cap),
        "pi": pi,
        "mu": mu,
        "theta": theta,
    }


def theta_slope(pi: np.ndarray, theta: np.ndarray, k_mean: float, cap: int) -> float:
    """Slope ``beta`` of the router's preference ``theta(k) = 1 + beta (k - E[k])`` below the cap,
    least squares weighted by ``pi`` over the states below ``cap`` that hold time (nan with fewer
    than two). ``beta E[k]`` is the preference's elasticity to the count: 0 for random routing."""
    k = np.arange(pi.size, dtype=float)
    sel = (k < cap) & (pi > 0) & np.isfinite(theta)
    if sel.sum() < 2:
        return float("nan")
    x = k[sel] - k_mean
    w = pi[sel]
    return float(np.sum(w * x * (theta[sel] - 1.0)) / np.sum(w * x * x))


def case_states(case: CalibrationCase, seed: int) -> tuple[ServerStates, pd.DataFrame]:
    """Run ``case``'s iteration engine for ``seed`` with the request frame: its rebuilt states
    and its per-server figures (``RunResult.extras["servers"]``)."""
    sim = local_simulation(case.scenario(), "request", "iteration", case.local, seed,
                           record_requests=True)  # fmt: skip
    res = sim.run()
    return server_states(res.requests), res.extras["servers"]


def iteration_split(servers: pd.DataFrame) -> dict:
    """The busy time split into iterations that carry prefill tokens and decode-only ones, over
    every row of ``servers`` (``extras["servers"]`` of one or more runs, whole runs: no warm-up
    is left out): the prefill iterations' share of the busy time, the prompts and running
    decodes each carries, the time-average running count in decode-only iterations, in prefill
    iterations (prompts included) and over the busy time. The fluid model's counterparts: its
    ``sum lam tau(n)``, ``E[a](n)``, ``n`` (busy-time balance) and slot occupancy ``n + p / (1 -
    p)`` (``fluid_route_wait.slot_occupancy``)."""
    tot = servers[["busy_s", "running_request_s", "prefill_iteration_s", "prefill_iterations",
                   "prefill_prompts", "prefill_carried_decodes",
                   "prefill_running_request_s"]].sum()  # fmt: skip
    pf_s, busy = tot["prefill_iteration_s"], tot["busy_s"]
    n_pf = tot["prefill_iterations"]
    nan = float("nan")
    return {
        "prefill_busy_share": float(pf_s / busy) if busy > 0 else nan,
        "prompts_per_prefill": float(tot["prefill_prompts"] / n_pf) if n_pf > 0 else nan,
        "decodes_per_prefill": float(tot["prefill_carried_decodes"] / n_pf) if n_pf > 0 else nan,
        "running_decode_only": float(
            (tot["running_request_s"] - tot["prefill_running_request_s"]) / (busy - pf_s)
        )
        if busy > pf_s
        else nan,
        "running_prefill": float(tot["prefill_running_request_s"] / pf_s) if pf_s > 0 else nan,
        "running_busy": float(tot["running_request_s"] / busy) if busy > 0 else nan,
    }


def free_arrival_residual(servers: pd.DataFrame) -> dict:
    """What the arrivals that find a free slot meet at their server, over every row of
    ``servers`` (``extras["servers"]``; engine accumulators ``A_ARR_*``, all classes): the share
    of them that find prompts queued ahead (``queued_share``; the fluid model's counterpart is
    ``queued_prompt_share`` times the share under random routing) and how many
    (``prompts_ahead``); of those with nothing queued, their number, the mean residual of the
    iteration in progress (0 at an idle server), the share whose iteration carries prefill
    tokens and the mean residual of those and of the decode-only ones. The fluid model's
    counterpart is the residual part of ``pre``: the mean age ``0.5 (sum lam E[tau^2] + r_d
    d^2)`` with the prefill part replaced by ``d / 2`` for the share ``1 - prefill_share`` that
    least-loaded steers away (``fluid_iteration_kernel``)."""
    tot = servers[["free_arrivals", "free_arrival_residual_s", "free_arrivals_in_prefill",
                   "free_arrival_prefill_residual_s", "queued_arrivals",
                   "queued_arrival_prompts_ahead"]].sum()  # fmt: skip
    n, n_pf = tot["free_arrivals"], tot["free_arrivals_in_prefill"]
    r, r_pf = tot["free_arrival_residual_s"], tot["free_arrival_prefill_residual_s"]
    n_q = tot["queued_arrivals"]
    nan = float("nan")
    return {
        "queued_share": float(n_q / (n + n_q)) if n + n_q > 0 else nan,
        "prompts_ahead": float(tot["queued_arrival_prompts_ahead"] / n_q) if n_q > 0 else nan,
        "arrivals": float(n),
        "residual_s": float(r / n) if n > 0 else nan,
        "in_prefill_share": float(n_pf / n) if n > 0 else nan,
        "prefill_residual_s": float(r_pf / n_pf) if n_pf > 0 else nan,
        "decode_residual_s": float((r - r_pf) / (n - n_pf)) if n > n_pf else nan,
    }


def model_parts(case: CalibrationCase, seed: int) -> dict:
    """The fluid model's parts of interactive TTFT for ``case`` and ``seed``, arrival-weighted
    over epochs and groups (``FluidBackend.comp``, what ``ttft_summary`` reads): ``P(wait)``,
    the wait given waiting, the fixed part ``pre`` (round-trip network + residual iteration +
    prompts ahead + own prefill iteration, as the engine's TTFT of an arrival that finds a
    free slot counts it), the mean TTFT and ``other_s``, what the epoch-level backlog adds
    (mean TTFT less ``pre + P(wait) x wait``; 0 while no epoch saturates)."""
    sim = local_simulation(case.scenario(), "fluid", "iteration", case.local, seed)
    ttft = float(sim.run().metrics["ttft_mean_s"])
    comp = sim._stepper.fluid.comp  # the per-epoch TTFT components the summary reads
    w = np.concatenate(comp["w"])
    pw = np.concatenate(comp["pw"])
    cond = np.concatenate(comp["cond"])
    pre = np.concatenate(comp["net2"]) + np.concatenate(comp["pre"])
    p_wait = float(np.dot(w, pw) / w.sum())
    wait = float(np.dot(w, pw * cond) / w.sum() / p_wait) if p_wait > 0 else 0.0
    fixed = float(np.dot(w, pre) / w.sum())
    return {
        "p_wait": p_wait,
        "wait_given_s": wait,
        "pre_s": fixed,
        "ttft_mean_s": ttft,
        "other_s": ttft - fixed - p_wait * wait,
    }


def engine_parts(st: ServerStates, interactive: np.ndarray, cap: int = CAP) -> dict:
    """The engine's counterparts of ``model_parts`` from ``st`` (``interactive`` marks the
    interactive arrivals): ``P(meets cap)`` and the mean TTFT of interactive arrivals, the
    wait given full by Little (all arrivals: they share the queue), the TTFT of interactive
    arrivals that found a free slot (the fixed part as the model means it) and, for those that
    waited, their TTFT less the wait (what follows admission)."""
    full = st.k_own >= cap
    r = summarise(st, cap)
    wait = r["wait_full_little_s"]
    i = interactive
    return {
        "p_wait": float(full[i].mean()),
        "wait_given_s": wait,
        "pre_s": float(np.nanmean(st.ttft_s[i & ~full])),
        "after_wait_s": float(np.nanmean(st.ttft_s[i & full]) - wait),
        "ttft_mean_s": float(np.nanmean(st.ttft_s[i])),
    }


def free_slot_split(st: ServerStates, cap: int = CAP) -> dict:
    """The TTFT of interactive arrivals that find their server below the cap (the fluid model's
    fixed part ``pre`` less the network) split by what they met there: ``start_s`` (reaching the
    server to the start of the iteration that produces the first token), ``own_s`` (that
    iteration) and ``own_decodes`` (the decodes batched with it), over all of them; the share
    that found requests queued ahead and how many (``queued_share``, ``queued_mean``); the
    residual of the iteration in progress met with nothing queued and with a queue
    (``resid_q0_s``, ``resid_q_s``); and what the queue ahead costs per arrival:
    ``ahead_start_s`` (the start delay beyond the residual: iterations of their own for prompts
    that do not fit) and ``ahead_own_s`` (the own iteration beyond that of arrivals with nothing
    queued: prompts that share it), both times ``queued_share``."""
    i = st.interactive & (st.k_own < cap)
    q = st.arr_queued[i]
    r = st.arr_resid_s[i]
    start = st.start_delay_s[i]
    own = st.first_iter_s[i]
    q0 = q == 0
    share = float((~q0).mean()) if q.size else float("nan")

    def mean(x, sel):
        return float(np.nanmean(x[sel])) if np.any(sel) else float("nan")

    queued_start = mean(start, ~q0) - mean(r, ~q0) if share > 0 else 0.0
    queued_own = mean(own, ~q0) - mean(own, q0) if share > 0 else 0.0
    return {
        "start_s": mean(start, np.ones_like(q0)),
        "own_s": mean(own, np.ones_like(q0)),
        "own_decodes": mean(st.first_iter_dec[i], np.ones_like(q0)),
        "queued_share": share,
        "queued_mean": mean(q, ~q0) if share > 0 else 0.0,
        "resid_q0_s": mean(r, q0),
        "resid_q_s": mean(r, ~q0) if share > 0 else 0.0,
        "own_q0_s": mean(own, q0),
        "ahead_start_s": share * queued_start,
        "ahead_own_s": share * queued_own,
    }


def pooled(states: list[ServerStates]) -> ServerStates:
    """Seeds pooled into one ``ServerStates``."""
    cat = {f: np.concatenate([getattr(s, f) for s in states])
           for f in ("k_own", "k_min_other", "ttft_s", "interactive", "first_iter_s",
                     "first_iter_dec", "start_delay_s", "arr_resid_s", "arr_queued")}  # fmt: skip
    add = {f: sum(getattr(s, f) for s in states) for f in ("time_s", "completions", "arrivals")}
    return ServerStates(**cat, **add, servers=states[0].servers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", required=True, help="comma-separated calibration case names")
    parser.add_argument("--seeds", type=int, default=1, help="seeds per case (0 .. n-1)")
    args = parser.parse_args()
    by_name = {c.name: c for c in ALL_CASES}
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; valid: {', '.join(by_name)}")
    lo, hi = CAP - 4, CAP + 5
    for name in names:
        runs = [case_states(by_name[name], s) for s in range(args.seeds)]
        st = pooled([run[0] for run in runs])
        servers = pd.concat([run[1] for run in runs])
        split = iteration_split(servers)
        free = free_arrival_residual(servers)
        r = summarise(st)
        eng = engine_parts(st, st.interactive)
        mods = [model_parts(by_name[name], s) for s in range(args.seeds)]
        mod = {k: float(np.mean([m[k] for m in mods])) for k in mods[0]}
        print(f"{name}: lam/server {r['lam_per_server']:.3f}/s, mean k {r['k_mean']:.2f}, "
              f"P(meets cap) {r['p_meets_cap']:.4f} (room elsewhere {r['room_elsewhere']:.3f}), "
              f"queue ahead {r['queue_ahead_mean']:.3f}")  # fmt: skip
        print(
            f"  TTFT mean {r['ttft_mean_s']:.4f} s, full {r['ttft_full_s']:.4f}, not full "
            f"{r['ttft_not_full_s']:.4f}; by queue ahead 0-3 "
            + " / ".join(f"{v:.3f}" for v in r["ttft_by_queue_s"])
            + f"; wait given full by Little {r['wait_full_little_s']:.3f} s"
        )
        print(
            f"  count law: P(k >= cap) time average {r['p_time']:.4f}, spread z {r['z_time']:.3f}, "
            f"running {r['n_run']:.2f}, Hayward C(S/z, n/z) {r['hayward_p']:.4f}; arrivals see "
            f"k {r['k_seen']:.2f} ({r['seen_excess']:+.3f} on the time average), theta slope x "
            f"E[k] {r['theta_slope'] * r['k_mean']:+.3f}"
        )
        print(
            f"  iterations: prefill share of busy time {split['prefill_busy_share']:.4f}, "
            f"{split['prompts_per_prefill']:.3f} prompts and {split['decodes_per_prefill']:.2f} "
            f"decodes per prefill iteration; running {split['running_decode_only']:.2f} in "
            f"decode-only iterations, {split['running_prefill']:.2f} in prefill iterations, "
            f"{split['running_busy']:.2f} over the busy time"
        )
        print(
            f"  free arrivals: {free['arrivals']:.0f} meet a residual iteration of "
            f"{free['residual_s']:.4f} s; {free['in_prefill_share']:.3f} of them a prefill "
            f"iteration ({free['prefill_residual_s']:.4f} s left), the rest a decode-only one "
            f"({free['decode_residual_s']:.4f} s left); {free['queued_share']:.4f} of the "
            f"arrivals that find a free slot find prompts queued ahead "
            f"({free['prompts_ahead']:.3f} on average)"
        )
        print("  k     " + " ".join(f"{k:6d}" for k in range(lo, hi)))
        for key in ("pi", "mu", "theta"):
            print(f"  {key:<6}" + " ".join(f"{r[key][k]:6.3f}" for k in range(lo, hi)))
        print(
            "  interactive TTFT parts, engine / fluid model: "
            + ", ".join(
                f"{k} {eng[k]:.4f} / {mod[k]:.4f}"
                for k in ("p_wait", "wait_given_s", "pre_s", "ttft_mean_s")
            )
            + f"; engine after the wait {eng['after_wait_s']:.4f} s; model's minute backlog "
            f"{mod['other_s']:.4f} s"
        )
        fs = free_slot_split(st)
        print(
            f"  interactive arrivals below the cap: start {fs['start_s']:.4f} s after reaching "
            f"the server, own (first-token) iteration {fs['own_s']:.4f} s with "
            f"{fs['own_decodes']:.2f} decodes; {fs['queued_share']:.4f} find "
            f"{fs['queued_mean']:.2f} queued ahead (residual met {fs['resid_q_s']:.4f} s, "
            f"{fs['resid_q0_s']:.4f} s with none); the queue ahead costs "
            f"{fs['ahead_start_s']:.4f} s of start and {fs['ahead_own_s']:.4f} s of own "
            f"iteration per arrival (own iteration with none queued {fs['own_q0_s']:.4f} s)"
        )


if __name__ == "__main__":
    main()
