"""Iteration-level continuous-batching server model (compiled), standalone.

Python entry points wrap the numba kernels (``kernel.py``) over an
:class:`IterationConfig`, stacked cost tables (:func:`stack_cost_tables`) and an
:class:`IterationState`::

    cfg = IterationConfig.uniform(n_servers, blocks_total=...)
    cost = stack_cost_tables([splitwise_cost_table(csv, "llama2-70b", "a100-80gb", 8, ...)])
    st = IterationState.empty(cfg, n_regions)
    out_server = run_arrivals(st, cfg, cost, t_arr, region, model, req_id, prompt, output,
                              u_local, t_end, region_start, lp_code)
    records = st.drain_log()  # requests finished or dropped so far
"""

from __future__ import annotations

import numpy as np

from greenroute.sim.iteration import kernel as _kernel
from greenroute.sim.iteration.cost import (
    CostArrays,
    CostTable,
    flat_cost_table,
    splitwise_cost_table,
    stack_cost_tables,
)
from greenroute.sim.iteration.kernel import (
    DROP_KV_OVERFLOW,
    DROP_NO_SERVER,
    DROP_NONE,
    DROP_PREEMPTION_LIMIT,
    DROP_QUEUE_FULL,
    LP_LEAST_CONNECTIONS,
    LP_LEAST_LOADED,
    LP_RANDOM,
    LP_ROUND_ROBIN,
)
from greenroute.sim.iteration.state import IterationConfig, IterationState

__all__ = [
    "DROP_KV_OVERFLOW", "DROP_NONE", "DROP_NO_SERVER", "DROP_PREEMPTION_LIMIT",
    "DROP_QUEUE_FULL", "LP_LEAST_CONNECTIONS", "LP_LEAST_LOADED", "LP_RANDOM", "LP_ROUND_ROBIN",
    "CostArrays", "CostTable", "IterationConfig", "IterationState", "advance", "enqueue",
    "flat_cost_table", "run_arrivals", "splitwise_cost_table", "stack_cost_tables",
]  # fmt: skip


def enqueue(
    st: IterationState,
    cfg: IterationConfig,
    cost: CostArrays,
    server: int,
    req_id: int,
    t_arrive: float,
    prompt: int,
    output: int,
) -> int:
    """Advance ``server`` to ``t_arrive`` and queue the request there; returns the drop code."""
    st.reserve_log(1)
    code = _kernel.enqueue(
        server, req_id, float(t_arrive), prompt, output, cfg.as_tuple(), cost.as_tuple(),
        st.as_tuple(),
    )  # fmt: skip
    return int(code)


def advance(
    st: IterationState, cfg: IterationConfig, cost: CostArrays, s0: int, s1: int, t_until: float
) -> None:
    """Run every iteration of servers ``s0 .. s1-1`` that starts before ``t_until``."""
    st.reserve_log(0)
    _kernel.advance(s0, s1, float(t_until), cfg.as_tuple(), cost.as_tuple(), st.as_tuple())


def run_arrivals(
    st: IterationState,
    cfg: IterationConfig,
    cost: CostArrays,
    t_arr: np.ndarray,
    region: np.ndarray,
    model: np.ndarray,
    req_id: np.ndarray,
    prompt: np.ndarray,
    output: np.ndarray,
    u_local: np.ndarray,
    t_end: float,
    region_start: np.ndarray,
    lp_code: np.ndarray,
) -> np.ndarray:
    """Place a time-sorted batch of arrivals with the built-in local policies and advance every
    server to ``t_end``; returns the server of each arrival (-1: dropped, no candidate)."""
    n = int(np.asarray(t_arr).shape[0])
    st.reserve_log(n)
    out_server = np.empty(n, dtype=np.int64)
    _kernel.run_arrivals(
        np.asarray(t_arr, dtype=np.float64), np.asarray(region, dtype=np.int64),
        np.asarray(model, dtype=np.int64), np.asarray(req_id, dtype=np.int64),
        np.asarray(prompt, dtype=np.int64), np.asarray(output, dtype=np.int64),
        np.asarray(u_local, dtype=np.float64), float(t_end),
        np.asarray(region_start, dtype=np.int64), np.asarray(lp_code, dtype=np.int64),
        cfg.as_tuple(), cost.as_tuple(), st.as_tuple(), out_server,
    )  # fmt: skip
    return out_server
