"""Iteration-level backend of request fidelity: continuous-batching servers (issue 8).

The engine's request stepper drives this backend like ``RequestBackend`` (``place`` each
epoch's dispatched requests, ``region_state`` for observations, ``resident_models``,
``snapshot``/``restore`` for forks), plus ``end_epoch`` once the epoch's requests are placed.

Per epoch, the dispatched requests (with those still on the network from earlier epochs) are
sorted by arrival at the region (``t_reg`` = dispatch + one-way network); those arriving before
the epoch's end go to the compiled kernel (``sim/iteration``: ``run_arrivals``, or for a Python
local policy ``advance`` + ``pick`` + ``enqueue`` per request), which then runs every iteration
that starts before the epoch's end. Later arrivals wait for the next epoch's call. The kernel's
completion log gives each request's outcome once it finishes or is dropped; the per-server
accumulators (``acc``, cumulative) are read at each epoch end for the epoch's energy and batch
figures.

Cost tables come from the cluster's perf knots (``BuiltCluster``: the PerfModel of each
hardware group x model): prompt curve = ``prefill_s`` vs prompt tokens, token curve = the
decode step vs batch size, mixed prefill+decode iteration = 1.1 x the prompt curve at the
iteration's batch tokens (splitwise-sim ``performance_model.py:248-253``, see
``sim/iteration/cost.py``). Power per iteration, where the profile measured it (the perf
type's ``PowerKnots``: llama2-70b on A100 at TP 2/4/8): ``tp x (host share + GPU TDP x
fraction)`` with the fraction the profile's ``peak_power`` at the iteration's batch tokens for
an iteration holding any prefill and its ``average_power`` at the batch size for a decode-only
one (held at the end knots), the formula of ``splitwise_cost_table``. The knots' watts are
clipped to the server's ``[idle, peak]`` so that an iteration never draws less than the
ledger's idle power (its dynamic energy is ``energy - idle x busy``) nor more than the peak
that power caps and capacity figures assume. With the catalog's power (peak = token-phase
GPU power + host share) every knot above token-phase / TDP (A100: 250 / 400 = 0.625) sits at
the peak: all prefill knots of TP 2 and 4, TP 8's from 256 tokens, TP 2's decode knots.
Elsewhere (H100: the profile's power columns are 0; scaled models; throughput servers): an
iteration holding any prefill is compute bound and draws the server's peak power (Patel et al.,
Splitwise, ISCA 2024: prompt phase at ~TDP, token phase below); a decode-only iteration of
``n`` requests draws ``idle + (peak - idle) x n / slots``, the per-slot power of the slots
model (``physics/power.py``). Idle power for the time between iterations is the ledger's
always-on idle power.

Power caps (hard or a plan's): a server left ``k = floor(f x slots)`` usable slots by its
region's cap (``Simulation.effective_slots``, as the slots model) runs at most ``k`` requests
and switches to a throttled cost table with ``u = k / slots``: power never above
``idle + u x (peak - idle)`` (<= the cap), prefill iterations stretched by ``1 / u`` so that
their dynamic energy is unchanged (a conservative
reading of GPU power capping: lower clocks, same work; real DVFS is somewhat more efficient).
An iteration that runs past the epoch's end has the overhang's time and energy (at the
server's mean power of the epoch) moved to the next epoch, so each epoch's ledger covers its
own window (energy past the run's horizon is not counted, as in the slots model).

Servers serve their resident model only (the kernel has no model swap, so no cold load enters
TTFT); KV blocks per server = the profile's KV capacity / (KV bytes per token x block tokens).
Observations: busy = running requests, queue = waiting requests, backlog = tokens of work left
(prefill + decode) x the server's full-batch decode step (slot-seconds if every token were one
decode step), KV in use from the allocated blocks. A Python local policy's ``ServerView``
carries ``backlog_s`` = tokens of work left (the compiled least-loaded score, so the built-ins'
Python ``pick`` chooses as the kernel does).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np

from greenroute.catalog import get_gpu
from greenroute.core.errors import ConfigError, GreenrouteError
from greenroute.core.types import RequestView, ServerView
from greenroute.data.requests import Requests
from greenroute.sim import kernel as SK
from greenroute.sim.cluster import BuiltCluster
from greenroute.sim.iteration import (
    IterationConfig,
    IterationState,
    advance,
    enqueue,
    run_arrivals,
    stack_cost_tables,
)
from greenroute.sim.iteration import kernel as IK
from greenroute.sim.iteration.cost import MIXED_FACTOR_SPLITWISE, CostTable
from greenroute.sim.iteration.state import BLOCK_TOKENS_DEFAULT, MAX_BATCHED_TOKENS_DEFAULT

# per-request outcome arrays (journaled for forks)
OUTCOME_FIELDS = (
    "region", "server", "dispatch", "t_reg", "t_first", "finish", "drop", "n_preempt",
    "prefill_tok", "recomp_tok", "decode_in", "out_tok", "tbt_sum", "tbt_max",
    "first_iter_s", "first_iter_dec", "arr_resid_s", "arr_queued",
)  # fmt: skip
# log column -> outcome array
_LOG_FIELDS = (
    ("server", "server"), ("drop", "drop"), ("n_preempt", "n_preempt"),
    ("prefill_tokens", "prefill_tok"), ("recomputed_tokens", "recomp_tok"),
    ("decode_inputs", "decode_in"), ("output_tokens", "out_tok"), ("t_first_s", "t_first"),
    ("t_finish_s", "finish"), ("tbt_sum_s", "tbt_sum"), ("tbt_max_s", "tbt_max"),
    ("first_iteration_s", "first_iter_s"), ("first_iteration_decodes", "first_iter_dec"),
    ("arrival_residual_s", "arr_resid_s"), ("arrival_queue_ahead", "arr_queued"),
)  # fmt: skip
# per-epoch [R, E] figures from the accumulators
EPOCH_FIELDS = (
    "dyn_kwh", "busy_s", "run_s", "iters", "batch_sum", "tokens", "budget_tokens"
)  # fmt: skip


def cost_tables(b: BuiltCluster) -> list[CostTable]:
    """One table per perf type ``t = hw * n_models + m`` from the cluster's PerfModel knots
    (types a hardware group cannot host get a placeholder no server uses)."""
    out = []
    bmax = b.decode_s.shape[1] - 1
    for t in range(b.type_ok.shape[0]):
        h = t // b.n_models
        srv = np.flatnonzero(b.server_hw == h)
        if not b.type_ok[t] or srv.size == 0:
            x = np.array([0.0, 1.0])
            out.append(CostTable(x, x, x, x + 1.0))
            continue
        s = srv[0]
        idle, peak, slots = b.server_idle_w[s], b.server_peak_w[s], float(b.server_slots[s])
        n = np.arange(1, bmax + 1, dtype=float)
        g = b.hw_groups[h]
        knots = b.type_power[t] if b.type_power else None
        if knots is not None and g.tokens_per_s is None:  # the profile's measured power
            pp_x, pd_x = knots.prefill_tokens_knots, knots.decode_batch_knots
            pp_w = profile_power_w(knots.prefill_tdp_fraction_knots, g.gpu, g.tp, idle, peak)
            pd_w = profile_power_w(knots.decode_tdp_fraction_knots, g.gpu, g.tp, idle, peak)
        else:  # prefill at peak, decode idle + (peak - idle) x n / slots
            pp_x, pp_w = np.array([0.0, 1.0]), np.array([peak, peak])
            pd_x, pd_w = np.array([0.0, slots]), np.array([idle, peak])
        out.append(
            CostTable(
                prompt_x=b.prefill_tok[t].astype(float),
                prompt_s=b.prefill_s[t].astype(float),
                token_x=n,
                token_s=b.decode_s[t, 1:].astype(float),
                mixed_factor=MIXED_FACTOR_SPLITWISE,
                power_prefill_x=pp_x,
                power_prefill_w=pp_w,
                power_decode_x=pd_x,
                power_decode_w=pd_w,
                idle_w=idle,
                peak_w=peak,
            )
        )
    return out


def profile_power_w(
    tdp_fraction: np.ndarray, gpu: str, tp: int, idle_w: float, peak_w: float
) -> np.ndarray:
    """Instance watts of measured TDP fractions: ``tp x (host share + TDP x fraction)`` as in
    ``sim/iteration/cost.py`` (``splitwise_cost_table``), clipped to ``[idle_w, peak_w]``."""
    spec = get_gpu(gpu)
    watts = tp * spec.host_share_w + tp * spec.tdp_w * np.asarray(tdp_fraction, dtype=float)
    return np.clip(watts, idle_w, peak_w)


def throttled(c: CostTable, frac: float, slots: float, *, profile_power: bool = False) -> CostTable:
    """``c`` under a power cap of ``idle + frac x (peak - idle)`` watts (``0 < frac < 1``):
    prefill stretched by ``1 / frac`` at ``idle + frac x (P - idle)`` for its power ``P`` (the
    capped power for the linear model's ``P = peak``; the same dynamic energy), decode power
    clamped at the cap (``profile_power``: the measured decode knots clipped at it)."""
    cap_w = c.idle_w + frac * (c.peak_w - c.idle_w)
    n_cap = max(frac * slots, 1e-9)
    if profile_power:
        dec_x, dec_w = c.power_decode_x, np.minimum(c.power_decode_w, cap_w)
    else:
        dec_x = np.array([0.0, n_cap, n_cap + 1.0])
        dec_w = np.array([c.idle_w, cap_w, cap_w])
    return replace(
        c,
        prompt_s=c.prompt_s / frac,
        power_prefill_w=c.idle_w + frac * (c.power_prefill_w - c.idle_w),
        power_decode_x=dec_x,
        power_decode_w=dec_w,
    )


def iteration_config(b: BuiltCluster, chunked_prefill: bool = False) -> IterationConfig:
    ty = b.server_hw * b.n_models + b.server_model0
    kv_tok = b.kv_bytes_per_token[b.server_model0] * BLOCK_TOKENS_DEFAULT
    blocks = np.floor(b.kv_cap_bytes[ty] / kv_tok).astype(np.int64)
    n = b.n_servers
    return IterationConfig(
        server_type=ty.astype(np.int64),
        server_model=b.server_model0.astype(np.int64),
        max_running=b.server_slots.astype(np.int64).copy(),
        queue_limit=b.queue_limit.astype(np.int64),
        blocks_total=np.maximum(blocks, 1),
        max_batched_tokens=np.full(n, MAX_BATCHED_TOKENS_DEFAULT, dtype=np.int64),
        chunked=np.full(n, bool(chunked_prefill), dtype=np.bool_),
    )


class IterationBackend:
    """Per-request outcomes and the kernel's server state across epochs."""

    server_model = "iteration"

    def __init__(self, built: BuiltCluster, reqs: Requests, lp_codes: np.ndarray, local_policies,
                 n_epochs: int, chunked_prefill: bool = False,
                 partition_executor=None):  # fmt: skip
        self.b = built
        self.reqs = reqs
        n = len(reqs)
        self.lp_codes = lp_codes.astype(np.int64)
        self.local_policies = local_policies
        self.cfg = iteration_config(built, chunked_prefill)
        self.slots0 = self.cfg.max_running.copy()
        self.tables = cost_tables(built)
        self.base_type = self.cfg.server_type.copy()
        self.model0 = self.cfg.server_model.copy()
        self.has_model = np.zeros((built.n_regions, built.n_models), dtype=bool)
        self.has_model[built.server_region, self.model0] = True
        self.has_usable = self.has_model.copy()
        self.n_base = len(self.tables)
        self.capped_types: dict[tuple[int, float], int] = {}  # (base type, frac) -> type
        self.cost = stack_cost_tables(self.tables)
        self.over_busy = np.zeros(built.n_servers)  # overhang moved to the next epoch
        self.over_j = np.zeros(built.n_servers)
        self.over_run = np.zeros(built.n_servers)
        self.st = IterationState.empty(self.cfg, built.n_regions)
        ty = self.cfg.server_type
        self._full_step_s = built.decode_s[ty, built.server_slots]
        self._kv_block_bytes = built.kv_bytes_per_token[built.server_model0] * self.cfg.block_tokens
        self.region = np.full(n, -1, dtype=np.int64)
        self.server = np.full(n, -1, dtype=np.int64)
        self.dispatch = np.full(n, np.nan)
        self.t_reg = np.full(n, np.nan)
        self.t_first = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.drop = np.zeros(n, dtype=np.int64)
        for k in ("n_preempt", "prefill_tok", "recomp_tok", "decode_in", "out_tok"):
            setattr(self, k, np.zeros(n, dtype=np.int64))
        self.tbt_sum = np.zeros(n)
        self.tbt_max = np.zeros(n)
        self.first_iter_s = np.full(n, np.nan)  # the iteration that produced the first token
        self.first_iter_dec = np.full(n, np.nan)  # the decodes batched with it
        self.arr_resid_s = np.full(n, np.nan)  # at its server: the iteration in progress's rest
        self.arr_queued = np.full(n, np.nan)  # and the requests queued ahead
        self.carry = np.zeros(0, dtype=np.int64)  # dispatched, arriving after the epoch end
        self.acc_prev = np.zeros_like(self.st.acc)
        for k in EPOCH_FIELDS:
            setattr(self, k, np.zeros((built.n_regions, n_epochs)))
        self.logged_ids = np.zeros(0, dtype=np.int64)  # outcomes logged in the last epoch
        self.journal: list | None = None
        self.partitioned = None  # regions split over workers (sim/partition.py)
        if partition_executor is not None:
            from greenroute.sim.partition import PartitionedKernel

            self.partitioned = PartitionedKernel(
                partition_executor, self.cfg, built.region_start, self.lp_codes
            )

    # ------------------------------------------------------------------ outcomes
    def _write(self, ids: np.ndarray, **vals) -> None:
        if self.journal is not None:
            self.journal.append((ids, tuple(vals), tuple(getattr(self, k)[ids] for k in vals)))
        for k, v in vals.items():
            getattr(self, k)[ids] = v

    def _drain(self, log: dict | None = None) -> np.ndarray:
        log = self.st.drain_log() if log is None else log
        ids = log["req"]
        if ids.size:
            self._write(ids, **{dst: log[src] for src, dst in _LOG_FIELDS})
        return ids

    # ------------------------------------------------------------------ placement
    def place(self, ids, dispatch_t, regions, net_s, slots_eff, u_local) -> None:
        """Record requests ``ids`` dispatched at ``dispatch_t`` towards ``regions``; they are
        queued at their servers by :meth:`end_epoch`."""
        del u_local  # the stepper's per-request uniforms are read by id in end_epoch
        self._slots_eff = slots_eff
        if ids.size == 0:
            return
        self._write(ids, region=regions, dispatch=dispatch_t, t_reg=dispatch_t + net_s)
        self.carry = np.concatenate([self.carry, ids])

    def _apply_caps(self) -> None:
        b, cfg = self.b, self.cfg
        slots_eff = getattr(self, "_slots_eff", self.slots0)
        slots = np.minimum(np.maximum(slots_eff, 1), self.slots0)
        ok = slots_eff >= 1
        self.has_usable = np.zeros_like(self.has_model)
        self.has_usable[b.server_region[ok], self.model0[ok]] = True
        model = np.where(ok, self.model0, -1)
        ty = self.base_type.copy()
        f = slots_eff / self.slots0  # the usable share of the slots left by the cap
        for s in np.flatnonzero((f < 1.0) & (f > 0.0)):
            key = (int(ty[s]), float(f[s]))
            if key not in self.capped_types:
                self.capped_types[key] = len(self.tables)
                measured = bool(b.type_power) and b.type_power[key[0]] is not None
                self.tables.append(
                    throttled(
                        self.tables[key[0]], key[1], float(self.slots0[s]), profile_power=measured
                    )
                )
                self.cost = stack_cost_tables(self.tables)
            ty[s] = self.capped_types[key]
        if not (
            np.array_equal(slots, cfg.max_running)
            and np.array_equal(ty, cfg.server_type)
            and np.array_equal(model, cfg.server_model)
        ):
            cfg.max_running[:] = slots
            cfg.server_type[:] = ty
            cfg.server_model[:] = model
            self.st.forget_cache()

    def end_epoch(self, e: int, t_end: float, u_local: np.ndarray) -> None:
        """Queue the requests arriving before ``t_end`` and run the servers up to it."""
        self._apply_caps()
        b, st, cfg, cost = self.b, self.st, self.cfg, self.cost
        ids = self.carry
        ids = ids[np.argsort(self.t_reg[ids], kind="stable")]
        k = int(np.searchsorted(self.t_reg[ids], t_end, side="left"))
        now, self.carry = ids[:k], ids[k:]
        # a power cap that leaves no usable slot on any server of the request's model in its
        # region drops it ("power_cap", as the slots model); such servers take no new work
        usable = self.has_usable[self.region[now], self.reqs.model[now].astype(np.int64)]
        hosted = self.has_model[self.region[now], self.reqs.model[now].astype(np.int64)]
        capped = hosted & ~usable
        if capped.any():
            self._write(now[capped], drop=np.full(int(capped.sum()), SK.DROP_POWER_CAP))
            now = now[~capped]
        reqs = self.reqs
        args = (
            self.t_reg[now], self.region[now], reqs.model[now].astype(np.int64), now,
            reqs.prompt_tokens[now].astype(np.int64), reqs.output_tokens[now].astype(np.int64),
            u_local[now],
        )  # fmt: skip
        self._logged_now = [ids[:k][capped]]
        log = None
        if self.partitioned is not None:
            out, log = self.partitioned.run_epoch(st, cfg, cost, args, t_end)
            self._write(now, server=out)
        elif np.all(self.lp_codes >= 0):
            out = run_arrivals(st, cfg, cost, *args, t_end, b.region_start, self.lp_codes)
            self._write(now, server=out)
        else:
            self._place_python(*args)
            advance(st, cfg, cost, 0, b.n_servers, t_end)
        self.logged_ids = np.concatenate([self._drain(log), *self._logged_now])
        self._close_epoch(e, t_end)

    def _close_epoch(self, e: int, t_end: float) -> None:
        acc = self.st.acc
        d = acc - self.acc_prev
        self.acc_prev = acc.copy()
        b = self.b
        reg = b.server_region
        n_r = b.n_regions

        def by_region(w):
            return np.bincount(reg, weights=w, minlength=n_r)

        # the last iteration's part past t_end goes to the next epoch, at the mean power
        busy_it, energy_it = d[:, IK.A_BUSY_S], d[:, IK.A_ENERGY_J]
        move = np.minimum(np.maximum(self.st.clock - t_end, 0.0), busy_it)
        run_it = d[:, IK.A_RUN_S]
        with np.errstate(divide="ignore", invalid="ignore"):
            move_j = np.where(busy_it > 0, energy_it * move / busy_it, 0.0)
            move_run = np.where(busy_it > 0, run_it * move / busy_it, 0.0)
        busy = busy_it - move + self.over_busy
        energy = energy_it - move_j + self.over_j
        running = run_it - move_run + self.over_run
        self.over_busy, self.over_j, self.over_run = move, move_j, move_run
        self.dyn_kwh[:, e] = by_region(energy - b.server_idle_w * busy) / 3.6e6
        self.busy_s[:, e] = by_region(busy)
        self.run_s[:, e] = by_region(running)
        self.iters[:, e] = by_region(d[:, IK.A_ITER])
        self.batch_sum[:, e] = by_region(d[:, IK.A_BATCH_SUM])
        self.tokens[:, e] = by_region(d[:, IK.A_TOKENS])
        self.budget_tokens[:, e] = by_region(d[:, IK.A_ITER] * self.cfg.max_batched_tokens)

    def _place_python(self, t_reg, regions, model, ids, prompt, output, u_local) -> None:
        """Arrivals one by one: built-in regions through the kernel, the others through the
        region's Python ``pick`` on a :class:`ServerView` of the iteration state."""
        b, st, cfg, cost = self.b, self.st, self.cfg, self.cost
        out_server = np.full(ids.size, -1, dtype=np.int64)
        for i in range(ids.size):
            r = int(regions[i])
            sl = slice(i, i + 1)
            if self.lp_codes[r] >= 0:
                out_server[sl] = run_arrivals(
                    st, cfg, cost, t_reg[sl], regions[sl], model[sl], ids[sl], prompt[sl],
                    output[sl], u_local[sl], -np.inf, b.region_start, self.lp_codes,
                )  # fmt: skip
                continue
            s0, s1 = int(b.region_start[r]), int(b.region_start[r + 1])
            t, m = float(t_reg[i]), int(model[i])
            p, o = int(prompt[i]), int(output[i])
            nb = (p + o + cfg.block_tokens - 1) // cfg.block_tokens
            serves = cfg.server_model[s0:s1] == m
            eligible = serves & (nb <= cfg.blocks_total[s0:s1])
            if not eligible.any():
                code = IK.DROP_KV_OVERFLOW if serves.any() else IK.DROP_NO_SERVER
                rid = ids[sl]
                self._write(rid, drop=np.array([code]), server=np.array([-1]))
                self._logged_now.append(rid)
                continue
            tokens = self._tokens_at(s0, s1, t)
            view = ServerView(
                t, st.nrun[s0:s1].astype(float), st.qlen[s0:s1].astype(float),
                cfg.max_running[s0:s1].astype(float), tokens, tokens, eligible, eligible,
            )  # fmt: skip
            req = RequestView(int(ids[i]), t, int(self.reqs.cls[ids[i]]), m, p, o,
                              float(u_local[i]))  # fmt: skip
            pick = int(self.local_policies[r].pick(req, view))
            if not (0 <= pick < s1 - s0) or not eligible[pick]:
                raise GreenrouteError(
                    f"local policy {self.local_policies[r].name!r} picked server {pick} in region "
                    f"{b.regions[r]}; valid picks are eligible indices "
                    f"{np.flatnonzero(eligible).tolist()}"
                )
            out_server[i] = s0 + pick
            enqueue(st, cfg, cost, s0 + pick, int(ids[i]), t, p, o)
        self._write(ids, server=out_server)

    def _tokens_at(self, s0: int, s1: int, t: float) -> np.ndarray:
        """Tokens of work left per server at ``t``, as the kernel's least-loaded score: a
        server in a steady decode run in closed form, others advanced to ``t``."""
        st, cfg, cost = self.st, self.cfg, self.cost
        out = np.empty(s1 - s0)
        for s in range(s0, s1):
            m = 0
            steady = st.clock[s] >= t
            if not steady and st.ff_k[s] > 0:
                m = int(np.ceil((t - st.clock[s]) / st.ff_d[s]))
                steady = m < st.ff_k[s]
            if not steady:
                k, d = IK._steady(s, cfg.as_tuple(), cost.as_tuple(), st.as_tuple())
                m = int(np.ceil((t - st.clock[s]) / d)) if k > 0 else 0
                steady = k > 0 and m < k
                if not steady:
                    advance(st, cfg, cost, s, s + 1, t)
                    m = 0
            out[s - s0] = float(st.work_tok[s] - m * st.nrun[s])
        return out

    # ------------------------------------------------------------------ observations
    def region_state(self, t: float) -> dict[str, np.ndarray]:
        """Running and waiting requests, work left and KV in use per region (servers stand at
        the end of the last epoch's iterations)."""
        b, st, cfg = self.b, self.st, self.cfg
        reg, n_r = b.server_region, b.n_regions
        busy = np.bincount(reg, weights=st.nrun, minlength=n_r)
        queue = np.bincount(reg, weights=st.qlen, minlength=n_r)
        backlog = np.bincount(reg, weights=st.work_tok * self._full_step_s, minlength=n_r)
        used = (cfg.blocks_total - st.blocks_free) * self._kv_block_bytes
        kv_used = np.bincount(reg, weights=used, minlength=n_r)
        return {"busy": busy, "queue": queue, "backlog": backlog, "kv_used": kv_used}

    def resident_models(self) -> list[frozenset[int]]:
        out = []
        for r in range(self.b.n_regions):
            s0, s1 = self.b.region_start[r], self.b.region_start[r + 1]
            out.append(frozenset(int(m) for m in np.unique(self.model0[s0:s1])))
        return out

    def in_flight_ids(self) -> np.ndarray:
        """Dispatched requests with no outcome yet (queued, running or on the network)."""
        return np.flatnonzero((self.region >= 0) & (self.drop == 0) & np.isnan(self.finish))

    # ------------------------------------------------------------------ counterfactual forks
    def snapshot(self, e0: int, e1: int) -> dict:
        """Kernel state copy, epoch figures, network carry, and a journal of outcome writes."""
        if self.partitioned is not None:
            raise ConfigError(
                "counterfactual forks need a single-process run (the kernel state of a "
                "partitioned run lives in its workers)"
            )
        snap = {
            "st": self.st.copy(),
            "max_running": self.cfg.max_running.copy(),
            "server_type": self.cfg.server_type.copy(),
            "server_model": self.cfg.server_model.copy(),
            "has_usable": self.has_usable,
            "cost": (self.cost, len(self.tables), dict(self.capped_types)),
            "over": (self.over_busy, self.over_j, self.over_run),
            "carry": self.carry,
            "acc_prev": self.acc_prev.copy(),
            "epoch": {k: getattr(self, k)[:, e0:e1].copy() for k in EPOCH_FIELDS},
            "e0": e0,
            "logged": self.logged_ids,
            "slots_eff": getattr(self, "_slots_eff", None),
            "journal": self.journal,
            "local_policies": self.local_policies,
        }
        self.journal = []
        if (self.lp_codes < 0).any():  # a Python pick() may keep memory: the fork uses copies
            self.local_policies = [copy.deepcopy(p) for p in self.local_policies]
        return snap

    def restore(self, snap: dict) -> None:
        for ids, keys, old in reversed(self.journal):
            for k, v in zip(keys, old, strict=True):
                getattr(self, k)[ids] = v
        self.journal = snap["journal"]
        self.st = snap["st"]  # a snapshot serves one restore (sim/fork_state.EngineState)
        self.cfg.max_running[:] = snap["max_running"]
        self.cfg.server_type[:] = snap["server_type"]
        self.cfg.server_model[:] = snap["server_model"]
        self.has_usable = snap["has_usable"]
        self.cost, n_tables, self.capped_types = snap["cost"]
        del self.tables[n_tables:]
        self.over_busy, self.over_j, self.over_run = snap["over"]
        self.carry = snap["carry"]
        self.acc_prev = snap["acc_prev"].copy()
        e0 = snap["e0"]
        for k, v in snap["epoch"].items():
            getattr(self, k)[:, e0 : e0 + v.shape[1]] = v
        self.logged_ids = snap["logged"]
        if snap["slots_eff"] is not None:
            self._slots_eff = snap["slots_eff"]
        self.local_policies = snap["local_policies"]
