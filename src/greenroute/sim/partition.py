"""Request-level runs of many regions partitioned by region (DESIGN, "Scale"; issue 12).

Regions meet only at the epoch's plan: within an epoch, each region's servers see only the
requests dispatched to that region. So the iteration backend (``sim/iteration_mode.py``) can
hand each epoch's arrivals to workers that each hold the kernel state of a contiguous block of
regions (:class:`RegionPartitionWorker`), run them in parallel, and merge what the driver needs:
each request's server and outcome (the completion log), and the small per-server arrays that
observations, epoch ledgers and results read (accumulators, clocks, running and queued counts,
work left, free KV blocks, the token-gap histogram). The driver keeps the geo policy, the plan,
the dispatch and all per-request bookkeeping, exactly as in one process.

Every server sees the same calls in the same order as in the single-process kernel
(``run_arrivals`` places arrivals region by region, independently), so a partitioned run's
metrics equal the single-process run's (``tests/test_partition.py``). Workers run wherever an
executor puts them: :class:`LocalPartitionExecutor` (in this process, one after the other:
for tests and for checking), or Ray actors (``greenroute.bench.partition_ray``).

Not supported in a partitioned run: Python local policies (only the compiled built-ins) and
counterfactual forks (the kernel state lives in the workers); both are refused with a clear
error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.sim.iteration import run_arrivals
from greenroute.sim.iteration.cost import CostArrays
from greenroute.sim.iteration.state import IterationConfig, IterationState

# the per-server arrays a worker returns after each epoch (the driver's mirror of them)
MIRRORED = ("acc", "clock", "nrun", "qlen", "work_tok", "blocks_free")
_PER_SERVER_CFG = (
    "server_type", "server_model", "max_running", "queue_limit", "blocks_total",
    "max_batched_tokens", "chunked",
)  # fmt: skip


@dataclass(frozen=True)
class Block:
    """A contiguous block of regions ``[r0, r1)`` and their servers ``[s0, s1)``."""

    r0: int
    r1: int
    s0: int
    s1: int


def split_regions(region_start: np.ndarray, n_parts: int) -> list[Block]:
    """Contiguous blocks of regions with about equal numbers of servers (at most ``n_parts``,
    none empty)."""
    region_start = np.asarray(region_start, dtype=np.int64)
    n_r = region_start.size - 1
    if n_parts < 1:
        raise ConfigError(f"partitions must be >= 1 (got {n_parts})")
    n_parts = min(n_parts, n_r)
    total = int(region_start[-1])
    blocks, r0 = [], 0
    for k in range(n_parts):
        left = n_parts - k
        if left == 1:
            r1 = n_r
        else:
            target = region_start[r0] + (total - region_start[r0]) / left
            r1 = r0 + 1
            while r1 < n_r - (left - 1) and abs(region_start[r1 + 1] - target) <= abs(
                region_start[r1] - target
            ):
                r1 += 1
        blocks.append(Block(r0, r1, int(region_start[r0]), int(region_start[r1])))
        r0 = r1
    return blocks


def config_block(cfg: IterationConfig, s0: int, s1: int) -> IterationConfig:
    """The servers ``[s0, s1)`` of ``cfg`` (copies)."""
    return replace(cfg, **{k: getattr(cfg, k)[s0:s1].copy() for k in _PER_SERVER_CFG})


class RegionPartitionWorker:
    """Kernel state of one block of regions; :meth:`step` runs one epoch of it."""

    def __init__(self, cfg: IterationConfig, block: Block, region_start: np.ndarray,
                 lp_codes: np.ndarray) -> None:  # fmt: skip
        self.block = block
        self.cfg = config_block(cfg, block.s0, block.s1)
        self.region_start = np.asarray(region_start[block.r0 : block.r1 + 1]) - block.s0
        self.lp_codes = np.array(lp_codes[block.r0 : block.r1], dtype=np.int64)  # own copy
        self.st = IterationState.empty(self.cfg, block.r1 - block.r0)
        self.cost: CostArrays | None = None  # the last cost tables sent (sent on change only)

    def step(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Update the per-server config (power caps change it), place the block's arrivals
        and run its servers to ``t_end``; returns the servers chosen, the completion log and
        the mirrored per-server arrays."""
        t0 = time.process_time()
        b, cfg, st = self.block, self.cfg, self.st
        changed = False
        for k in ("server_type", "server_model", "max_running"):
            new = payload[k]
            if not np.array_equal(getattr(cfg, k), new):
                getattr(cfg, k)[:] = new
                changed = True
        if changed:
            st.forget_cache()
        if payload["cost"] is not None:
            cost = payload["cost"]
            self.cost = replace(cost, **{k: _writable(v) for k, v in vars(cost).items()})
        a = {k: _writable(v) for k, v in payload["arrivals"].items()}
        out = run_arrivals(
            st, cfg, self.cost, a["t_reg"], a["region"] - b.r0, a["model"], a["ids"],
            a["prompt"], a["output"], a["u_local"], payload["t_end"], self.region_start,
            self.lp_codes,
        )  # fmt: skip
        log = st.drain_log()
        log["server"] = np.where(log["server"] >= 0, log["server"] + b.s0, log["server"])
        state = {k: getattr(st, k).copy() for k in MIRRORED}
        state["tbt_hist"] = st.tbt_hist.copy()
        out = np.where(out >= 0, out + b.s0, out)
        return {"out": out, "log": log, "state": state, "cpu_s": time.process_time() - t0}


def _writable(a: np.ndarray) -> np.ndarray:
    """``a``, copied if read-only. Ray hands a worker read-only arrays (zero-copy from its
    object store), and numba types a read-only array apart: the kernels would be compiled
    again for it, in every worker, on the first epoch (65 s on the 2-core machine), despite
    :func:`warm_kernels` and the cache of the same kernels on writable arrays."""
    return a if a.flags.writeable else a.copy()


def warm_kernels() -> None:
    """Load (or compile) the iteration kernels in this process: one empty epoch of a
    one-server block."""
    from greenroute.sim.iteration import flat_cost_table, stack_cost_tables

    cfg = IterationConfig.uniform(1, blocks_total=8)
    worker = RegionPartitionWorker(cfg, Block(0, 1, 0, 1), np.array([0, 1]), np.zeros(1))
    empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0)
    arrivals = dict(t_reg=empty_f, region=empty_i, model=empty_i, ids=empty_i, prompt=empty_i,
                    output=empty_i, u_local=empty_f)  # fmt: skip
    worker.step({"arrivals": arrivals, "cost": stack_cost_tables([flat_cost_table(0.01, 0.05)]),
                 "t_end": 0.0, "server_type": cfg.server_type, "server_model": cfg.server_model,
                 "max_running": cfg.max_running})  # fmt: skip


class PartitionExecutor(Protocol):
    """Where the workers live: ``start`` builds them, ``step`` runs one epoch on each (in
    parallel where it can) and returns their results in block order."""

    def start(self, cfg: IterationConfig, blocks: list[Block], region_start: np.ndarray,
              lp_codes: np.ndarray) -> None: ...  # fmt: skip

    def step(self, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class LocalPartitionExecutor:
    """Workers in this process, run one after the other (a reference for the parallel ones)."""

    def __init__(self, n_parts: int) -> None:
        self.n_parts = int(n_parts)
        self.workers: list[RegionPartitionWorker] = []

    def start(self, cfg, blocks, region_start, lp_codes) -> None:
        self.workers = [RegionPartitionWorker(cfg, b, region_start, lp_codes) for b in blocks]

    def step(self, payloads):
        return [w.step(p) for w, p in zip(self.workers, payloads, strict=True)]

    def close(self) -> None:
        self.workers = []


class PartitionedKernel:
    """The iteration backend's side of a partitioned run: splits an epoch's arrivals by block,
    runs the executor, merges the results into the backend's state mirror."""

    def __init__(self, executor: Any, cfg: IterationConfig, region_start: np.ndarray,
                 lp_codes: np.ndarray) -> None:  # fmt: skip
        if np.any(np.asarray(lp_codes) < 0):
            raise ConfigError(
                "a partitioned run needs compiled local policies (round-robin, "
                "least-connections, least-loaded, random); a Python pick() cannot run in workers"
            )
        n_parts = getattr(executor, "n_parts", 1)
        self.blocks = split_regions(region_start, n_parts)
        self.executor = executor
        self.worker_cpu_s = np.zeros(len(self.blocks))  # CPU seconds of each block's steps
        self._sent_cost: CostArrays | None = None  # workers keep the cost tables last sent
        executor.start(cfg, self.blocks, np.asarray(region_start), np.asarray(lp_codes))

    def run_epoch(
        self, st: IterationState, cfg: IterationConfig, cost: CostArrays, args: tuple, t_end: float
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``args`` as ``iteration.run_arrivals``'s (time-sorted arrivals); returns the server
        of each arrival and the merged completion log; ``st``'s mirrored arrays are updated."""
        t_reg, region, model, ids, prompt, output, u_local = args
        # the cost tables change only when a power cap adds a throttled type: send on change
        send_cost = cost if cost is not self._sent_cost else None
        self._sent_cost = cost
        payloads, picks = [], []
        for b in self.blocks:
            k = np.flatnonzero((region >= b.r0) & (region < b.r1))
            picks.append(k)
            arrivals = dict(
                t_reg=t_reg[k], region=region[k], model=model[k], ids=ids[k], prompt=prompt[k],
                output=output[k], u_local=u_local[k],
            )  # fmt: skip
            payloads.append(
                {
                    "arrivals": arrivals,
                    "cost": send_cost,
                    "t_end": float(t_end),
                    **{
                        key: getattr(cfg, key)[b.s0 : b.s1]
                        for key in ("server_type", "server_model", "max_running")
                    },
                }
            )
        results = self.executor.step(payloads)
        out = np.full(region.size, -1, dtype=np.int64)
        logs = []
        hist = np.zeros_like(st.tbt_hist)
        for b, k, res in zip(self.blocks, picks, results, strict=True):
            out[k] = res["out"]
            logs.append(res["log"])
            for name in MIRRORED:
                getattr(st, name)[b.s0 : b.s1] = res["state"][name]
            hist += res["state"]["tbt_hist"]
        self.worker_cpu_s += [res["cpu_s"] for res in results]
        st.tbt_hist[:] = hist
        log = {key: np.concatenate([lg[key] for lg in logs]) for key in logs[0]}
        return out, log

    def close(self) -> None:
        self.executor.close()
