"""Per-server configuration and mutable state of the iteration-level server model.

Everything is a plain numpy array so that the compiled kernel (``kernel.py``) can run on it and
a counterfactual fork is ``state.copy()`` (every array deep-copied).

Layout. ``S`` servers; each holds a pool of ``C = queue_limit + max_running`` request
*entries* (``ei[s, e, EI_*]`` integers, ``ef[s, e, EF_*]`` floats; the field constants live in
``kernel.py``), a FCFS waiting queue (ring buffer of entry indices ``q[s]`` with
``qhead``/``qlen``; preempted requests are pushed back at its head) and a running list
``run[s, :nrun[s]]`` in admission order (its tail is the most recently admitted). Finished and
dropped requests are appended to a completion log (``log_i``, ``log_f``, ``LI_*``/``LF_*``
columns) that :meth:`IterationState.drain_log` hands back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.sim.iteration.kernel import (
    LF_ARR_QUEUED,
    LF_ARR_RESID_S,
    LF_ARRIVE,
    LF_FINISH,
    LF_FIRST_ITER_DEC,
    LF_FIRST_ITER_S,
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
    N_ACC,
    N_EF,
    N_EI,
    N_LF,
    N_LI,
    TBT_N_BINS,
)  # fmt: skip

BLOCK_TOKENS_DEFAULT = 16  # vLLM's default KV block size (tokens)
MAX_BATCHED_TOKENS_DEFAULT = 2048  # splitwise-sim baseline.yaml max_batch_tokens; vLLM v0 default
MAX_PREEMPTIONS_DEFAULT = 4  # splitwise-sim configs/start_state/baseline.yaml


@dataclass
class IterationConfig:
    """Per-server parameters (arrays of length ``S``) and kernel-wide scalars."""

    server_type: np.ndarray  # perf type index into the cost tables
    server_model: np.ndarray  # model served (requests of other models are not placed here)
    max_running: np.ndarray  # cap on running requests (vLLM max_num_seqs)
    queue_limit: np.ndarray  # waiting-queue bound; an arrival beyond it is dropped
    blocks_total: np.ndarray  # KV blocks of block_tokens tokens
    max_batched_tokens: np.ndarray  # token budget per iteration
    chunked: np.ndarray  # bool: chunked prefill (Sarathi-Serve) instead of whole prompts
    block_tokens: int = BLOCK_TOKENS_DEFAULT
    max_preemptions: int = MAX_PREEMPTIONS_DEFAULT
    # run runs of identical decode-only iterations in one step (same results up to float
    # rounding of the times; off only to test that equivalence)
    fast_forward: bool = True

    @classmethod
    def uniform(
        cls,
        n_servers: int,
        *,
        blocks_total: int,
        max_running: int = 512,
        queue_limit: int = 1000,
        max_batched_tokens: int = MAX_BATCHED_TOKENS_DEFAULT,
        chunked: bool = False,
        block_tokens: int = BLOCK_TOKENS_DEFAULT,
        max_preemptions: int = MAX_PREEMPTIONS_DEFAULT,
        fast_forward: bool = True,
        server_type: int = 0,
        server_model: int = 0,
    ) -> IterationConfig:
        def full(v, dt=np.int64):
            return np.full(n_servers, v, dtype=dt)

        return cls(
            server_type=full(server_type),
            server_model=full(server_model),
            max_running=full(max_running),
            queue_limit=full(queue_limit),
            blocks_total=full(blocks_total),
            max_batched_tokens=full(max_batched_tokens),
            chunked=full(chunked, np.bool_),
            block_tokens=block_tokens,
            max_preemptions=max_preemptions,
            fast_forward=fast_forward,
        )

    def __post_init__(self) -> None:
        if (
            self.block_tokens < 1
            or self.max_preemptions < 0
            or (self.max_running < 1).any()
            or (self.queue_limit < 0).any()
            or (self.blocks_total < 1).any()
            or (self.max_batched_tokens < 1).any()
        ):
            raise ConfigError(
                "iteration server needs block_tokens >= 1, max_preemptions >= 0, "
                "max_running >= 1, queue_limit >= 0, blocks_total >= 1, max_batched_tokens >= 1"
            )

    @property
    def n_servers(self) -> int:
        return int(self.server_type.shape[0])

    def as_tuple(self) -> tuple:
        return (
            self.server_type.astype(np.int64),
            self.server_model.astype(np.int64),
            self.max_running.astype(np.int64),
            self.queue_limit.astype(np.int64),
            self.blocks_total.astype(np.int64),
            self.max_batched_tokens.astype(np.int64),
            self.chunked.astype(np.bool_),
            np.int64(self.block_tokens),
            np.int64(self.max_preemptions),
            bool(self.fast_forward),
        )


@dataclass
class IterationState:
    """Mutable state of ``S`` servers; ``copy()`` forks it for a counterfactual."""

    ei: np.ndarray
    ef: np.ndarray
    efree: np.ndarray  # [S, C] stack of free entry indices
    nfree: np.ndarray  # [S]
    q: np.ndarray  # [S, C] ring of entry indices
    qhead: np.ndarray  # [S]
    qlen: np.ndarray  # [S]
    run: np.ndarray  # [S, R] running entries in admission order
    nrun: np.ndarray  # [S]
    clock: np.ndarray  # [S] end of the last iteration (or last idle arrival)
    blocks_free: np.ndarray  # [S]
    work_tok: np.ndarray  # [S] tokens still to process (prefill + decode inputs), queued+running
    acc: np.ndarray  # [S, N_ACC]
    rr: np.ndarray  # [n_regions] round-robin pointers
    ff_k: np.ndarray  # [S] cached steady run length (kernel ``_steady``); -1: unknown
    ff_d: np.ndarray  # [S] cached steady iteration seconds
    tbt_hist: np.ndarray  # [TBT_N_BINS] counts of token gaps (kernel ``tbt_bin``), all servers
    log_i: np.ndarray = field(default_factory=lambda: np.zeros((0, N_LI), dtype=np.int64))
    log_f: np.ndarray = field(default_factory=lambda: np.zeros((0, N_LF)))
    log_n: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))

    @classmethod
    def empty(cls, config: IterationConfig, n_regions: int = 1) -> IterationState:
        n = config.n_servers
        r = int(config.max_running.max()) if n else 1
        c = int((config.queue_limit + config.max_running).max()) if n else 1
        efree = np.tile(np.arange(c - 1, -1, -1, dtype=np.int64), (n, 1))
        return cls(
            ei=np.zeros((n, c, N_EI), dtype=np.int64),
            ef=np.zeros((n, c, N_EF)),
            efree=efree,
            nfree=(config.queue_limit + config.max_running).astype(np.int64),
            q=np.zeros((n, c), dtype=np.int64),
            qhead=np.zeros(n, dtype=np.int64),
            qlen=np.zeros(n, dtype=np.int64),
            run=np.zeros((n, r), dtype=np.int64),
            nrun=np.zeros(n, dtype=np.int64),
            clock=np.zeros(n),
            blocks_free=config.blocks_total.astype(np.int64).copy(),
            work_tok=np.zeros(n, dtype=np.int64),
            acc=np.zeros((n, N_ACC)),
            rr=np.zeros(max(n_regions, 1), dtype=np.int64),
            ff_k=np.full(n, -1, dtype=np.int64),
            ff_d=np.zeros(n),
            tbt_hist=np.zeros(TBT_N_BINS),
        )

    def copy(self) -> IterationState:
        """Deep copy of every array (a fork advanced alone leaves this state untouched)."""
        return IterationState(**{k: v.copy() for k, v in self.__dict__.items()})

    def forget_cache(self) -> None:
        """Drop the kernel's cached steady-run lengths; needed after editing the state or the
        config (token budget, cost tables) from Python between kernel calls."""
        self.ff_k[:] = -1

    def in_flight(self) -> int:
        return int(self.qlen.sum() + self.nrun.sum())

    def reserve_log(self, n_new: int) -> None:
        """Grow the completion log so ``n_new`` more arrivals plus everything in flight fit."""
        need = int(self.log_n[0]) + self.in_flight() + n_new
        if self.log_i.shape[0] >= need:
            return
        cap = max(need, 2 * self.log_i.shape[0], 1024)
        li = np.zeros((cap, N_LI), dtype=np.int64)
        lf = np.zeros((cap, N_LF))
        k = int(self.log_n[0])
        li[:k] = self.log_i[:k]
        lf[:k] = self.log_f[:k]
        self.log_i, self.log_f = li, lf

    def drain_log(self) -> dict[str, np.ndarray]:
        """Records of the requests finished or dropped since the last drain (then cleared)."""
        k = int(self.log_n[0])
        li, lf = self.log_i[:k], self.log_f[:k]
        out = {
            "req": li[:, LI_REQ].copy(),
            "server": li[:, LI_SERVER].copy(),
            "n_preempt": li[:, LI_NPRE].copy(),
            "drop": li[:, LI_DROP].copy(),
            "prefill_tokens": li[:, LI_PF_FIRST].copy(),
            "recomputed_tokens": li[:, LI_RECOMP].copy(),
            "decode_inputs": li[:, LI_DEC_IN].copy(),
            "output_tokens": li[:, LI_GEN].copy(),
            "t_arrive_s": lf[:, LF_ARRIVE].copy(),
            "t_first_s": lf[:, LF_TFIRST].copy(),
            "t_finish_s": lf[:, LF_FINISH].copy(),
            "tbt_sum_s": lf[:, LF_TBT_SUM].copy(),
            "tbt_max_s": lf[:, LF_TBT_MAX].copy(),
            "first_iteration_s": lf[:, LF_FIRST_ITER_S].copy(),
            "first_iteration_decodes": lf[:, LF_FIRST_ITER_DEC].copy(),
            "arrival_residual_s": lf[:, LF_ARR_RESID_S].copy(),
            "arrival_queue_ahead": lf[:, LF_ARR_QUEUED].copy(),
        }
        self.log_n[0] = 0
        return out

    def as_tuple(self) -> tuple:
        return (
            self.ei, self.ef, self.efree, self.nfree, self.q, self.qhead, self.qlen, self.run,
            self.nrun, self.clock, self.blocks_free, self.work_tok, self.acc, self.rr, self.log_i,
            self.log_f, self.log_n, self.ff_k, self.ff_d, self.tbt_hist,
        )  # fmt: skip
