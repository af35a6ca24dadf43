"""Iteration duration and power of a continuous-batching server, from the profile tables.

Duration (splitwise-sim ``performance_model.py``, commit 8f99e7d, ``DatabasePerformanceModel``):

* The profile ``perf/splitwise_perf_model.csv`` (Patel et al., ISCA 2024; times in ms) is
  reduced per (model, hardware, tensor_parallel) to two piecewise-linear curves keyed by
  ``batch_tokens = prompt_size x batch_size``: the MEDIAN ``prompt_time`` and the median
  ``token_time`` over the rows with that key (lines 92-118, scipy ``interp1d`` with
  ``fill_value="extrapolate"``: linear between knots, the end segments extended).
* An iteration's ``batch_tokens`` = prefill tokens in it + one per decode (lines 221-232).
* prefill only: ``prompt(batch_tokens)`` (238-242); decode only: ``token(n_decode)`` (243-247);
  mixed: ``1.1 x prompt(batch_tokens)`` (248-253; ``MIXED_FACTOR_SPLITWISE``).
  splitwise-sim never chunks prompts (213-214); a chunk is costed here as that many prefill
  tokens, the same rule.

Power: splitwise-sim does not use the profile's ``peak_power``/``average_power`` columns at all
(``power_model.py`` "TODO: unused"; ``Instance.update_power`` is a no-op, instance.py:144-148).
They are fractions of GPU TDP (Patel et al. 2024 report power normalised to TDP; the values run
0.17-1.002). Here, per iteration, GPU power = fraction x TDP x tensor-parallel GPUs, with
``peak_power`` (median by ``batch_tokens``, rows with power > 0) for iterations holding any
prefill (compute bound) and ``average_power`` (median by ``batch_size`` over the decode-dominated
512-token batch sweep) for decode-only iterations; power is held at the end knots, never
extrapolated. The host's share (``GPU.host_share_w``) is added. Without power columns (a flat
table) the iteration draws ``idle_w + (peak_w - idle_w) x utilisation`` with utilisation =
batch tokens / token budget, capped at 1 (the request engine's linear power model).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError, DataFormatError
from greenroute.sim.iteration.kernel import iteration_duration_s, iteration_power_w

__all__ = ["iteration_duration_s", "iteration_power_w"]  # compiled in kernel.py

MS_PER_S = 1000.0
# splitwise-sim performance_model.py:253: a mixed prompt+token iteration costs 1.1 x prompt time
MIXED_FACTOR_SPLITWISE = 1.1
# the batch sweep of the profile (rows with batch_size > 1) is run at this prompt length
DECODE_SWEEP_PROMPT_TOKENS = 512


@dataclass(frozen=True)
class CostTable:
    """Cost curves of one perf type (model x hardware x TP); knots ascending."""

    prompt_x: np.ndarray  # batch tokens
    prompt_s: np.ndarray  # iteration seconds, prefill only
    token_x: np.ndarray  # decode batch tokens (= number of decodes)
    token_s: np.ndarray  # iteration seconds, decode only
    mixed_factor: float = MIXED_FACTOR_SPLITWISE
    power_prefill_x: np.ndarray | None = None  # batch tokens
    power_prefill_w: np.ndarray | None = None  # instance watts (GPUs + host)
    power_decode_x: np.ndarray | None = None  # decode batch size
    power_decode_w: np.ndarray | None = None
    idle_w: float = 0.0  # fallback linear power model
    peak_w: float = 0.0


def flat_cost_table(
    prefill_s_per_token: float,
    decode_step_s: float,
    *,
    decode_s_per_seq: float = 0.0,
    mixed_factor: float = 1.0,
    idle_w: float = 0.0,
    peak_w: float = 0.0,
) -> CostTable:
    """Flat costs for hand-computed tests: prefill ``a x tokens``; decode
    ``decode_step_s + decode_s_per_seq x n``; mixed ``mixed_factor x a x (prefill + n)``."""
    x = np.array([0.0, 1.0e6])
    return CostTable(
        prompt_x=x,
        prompt_s=x * prefill_s_per_token,
        token_x=x,
        token_s=decode_step_s + x * decode_s_per_seq,
        mixed_factor=mixed_factor,
        idle_w=idle_w,
        peak_w=peak_w,
    )


def _median_curve(frame: pd.DataFrame, key: str, value: str) -> tuple[np.ndarray, np.ndarray]:
    g = frame.groupby(key)[value].median().sort_index()
    return g.index.to_numpy(dtype=np.float64), g.to_numpy(dtype=np.float64)


def splitwise_cost_table(
    path: str | Path,
    model: str,
    hardware: str,
    tensor_parallel: int,
    *,
    tdp_w: float,
    host_w: float,
    idle_w: float = 0.0,
    peak_w: float = 0.0,
) -> CostTable:
    """Cost curves of ``model`` on ``tensor_parallel`` x ``hardware`` from splitwise's CSV.

    ``tdp_w`` is one GPU's TDP and ``host_w`` the instance's host share (watts) added to the GPU
    power of every iteration; ``idle_w``/``peak_w`` are kept for the fallback power model.
    """
    path = Path(path)
    try:
        db = pd.read_csv(path)
    except (OSError, pd.errors.ParserError) as exc:
        raise DataFormatError(path, f"cannot read: {exc}") from None
    need = ["model", "hardware", "tensor_parallel", "prompt_size", "batch_size"]
    need += ["prompt_time", "token_time", "peak_power", "average_power"]
    missing = [c for c in need if c not in db.columns]
    if missing:
        raise DataFormatError(path, f"missing columns {missing}")
    sel = db[
        (db["model"] == model)
        & (db["hardware"] == hardware)
        & (db["tensor_parallel"] == tensor_parallel)
    ].copy()
    if sel.empty:
        combos = sorted(
            {f"{m}/{h}/tp{t}" for m, h, t in db[["model", "hardware", "tensor_parallel"]].values}
        )
        raise ConfigError(f"no profile rows for {model}/{hardware}/tp{tensor_parallel}; {combos}")
    sel["batch_tokens"] = sel["prompt_size"] * sel["batch_size"]
    sel["prompt_s"] = sel["prompt_time"] / MS_PER_S
    sel["token_s"] = sel["token_time"] / MS_PER_S
    px, ps = _median_curve(sel, "batch_tokens", "prompt_s")
    tx, ts = _median_curve(sel, "batch_tokens", "token_s")
    gpu_w = tdp_w * tensor_parallel
    pw = sel[sel["peak_power"] > 0]
    ppx, ppf = _median_curve(pw, "batch_tokens", "peak_power")
    dw = sel[(sel["average_power"] > 0) & (sel["prompt_size"] == DECODE_SWEEP_PROMPT_TOKENS)]
    dwx, dwf = _median_curve(dw, "batch_size", "average_power")
    has_power = len(ppx) > 0 and len(dwx) > 0
    return CostTable(
        prompt_x=px,
        prompt_s=ps,
        token_x=tx,
        token_s=ts,
        mixed_factor=MIXED_FACTOR_SPLITWISE,
        power_prefill_x=ppx if has_power else None,
        power_prefill_w=host_w + gpu_w * ppf if has_power else None,
        power_decode_x=dwx if has_power else None,
        power_decode_w=host_w + gpu_w * dwf if has_power else None,
        idle_w=idle_w,
        peak_w=peak_w,
    )


@dataclass(frozen=True)
class CostArrays:
    """Cost tables of all perf types stacked for the kernel: ``[T, K]`` knots with ``n_*[T]``
    valid entries each; ``has_power[T]`` selects profile power over the linear fallback."""

    prompt_x: np.ndarray
    prompt_s: np.ndarray
    n_prompt: np.ndarray
    token_x: np.ndarray
    token_s: np.ndarray
    n_token: np.ndarray
    mixed_factor: np.ndarray
    pp_x: np.ndarray
    pp_w: np.ndarray
    n_pp: np.ndarray
    pd_x: np.ndarray
    pd_w: np.ndarray
    n_pd: np.ndarray
    has_power: np.ndarray
    idle_w: np.ndarray
    peak_w: np.ndarray

    def as_tuple(self) -> tuple[np.ndarray, ...]:
        return tuple(getattr(self, f) for f in self.__dataclass_fields__)


def stack_cost_tables(tables: list[CostTable]) -> CostArrays:
    """Stack per-type tables (index = perf type) into padded arrays for the kernel."""
    n_t = len(tables)

    def pad(pairs: list[tuple[np.ndarray | None, np.ndarray | None]]):
        k = max([1] + [0 if x is None else len(x) for x, _ in pairs])
        xs = np.zeros((n_t, k))
        ys = np.zeros((n_t, k))
        ns = np.zeros(n_t, dtype=np.int64)
        for t, (x, y) in enumerate(pairs):
            if x is None:
                continue
            xs[t, : len(x)] = x
            ys[t, : len(x)] = y
            ns[t] = len(x)
        return xs, ys, ns

    px, ps, npr = pad([(c.prompt_x, c.prompt_s) for c in tables])
    tx, ts, ntk = pad([(c.token_x, c.token_s) for c in tables])
    ppx, ppw, npp = pad([(c.power_prefill_x, c.power_prefill_w) for c in tables])
    pdx, pdw, npd = pad([(c.power_decode_x, c.power_decode_w) for c in tables])
    return CostArrays(
        prompt_x=px,
        prompt_s=ps,
        n_prompt=npr,
        token_x=tx,
        token_s=ts,
        n_token=ntk,
        mixed_factor=np.array([c.mixed_factor for c in tables]),
        pp_x=ppx,
        pp_w=ppw,
        n_pp=npp,
        pd_x=pdx,
        pd_w=pdw,
        n_pd=npd,
        has_power=(npp > 0) & (npd > 0),
        idle_w=np.array([c.idle_w for c in tables]),
        peak_w=np.array([c.peak_w for c in tables]),
    )
