"""LLM serving performance: prefill time, decode step time, KV-cache capacity, cold load.

One :class:`PerfModel` describes one serving instance (model, GPU, tensor-parallel degree).
Its curves are piecewise linear through measured knots, with linear extrapolation beyond them:

* ``prefill_s(prompt_tokens)``: batch-1 prefill (time to first token on the GPU) versus prompt
  length, from SplitwiseSim's profile table (DGX-A100 / DGX-H100 measurements, Patel et al.,
  ISCA 2024), the mean of the repeated runs at each prompt size.
* ``decode_step_s(batch)``: one decode iteration of a batch of ``batch`` sequences, from the
  same table's batch sweep at 512 prompt tokens. Every sequence in the batch gets one token per
  step, so a request with ``T`` output tokens decoding in a batch of ``b`` takes
  ``T x decode_step_s(b)`` (MARLIN's linear-in-output-tokens assumption, seed 001 §3.1).

Models that Splitwise did not profile (Llama-2-7B, Llama-3-8B, Llama-3-70B) are the measured
Llama-2-70B curve scaled by vidur's measured linear-layer time ratio (see
``greenroute.data.build_perf_knots`` for the derivation and its caveats). The knots ship in
``greenroute/data/embedded/perf_knots.json``; :mod:`greenroute.data.perf_knots` loads them (or
rebuilds them from the raw tables of a data directory) and passes the table in.

Power (optional, only where Splitwise measured it: llama2-70b on A100): ``power`` holds the
GPU power of a prefill iteration (the profile's ``peak_power``) versus prompt tokens and of a
decode iteration (``average_power``) versus batch size, as fractions of one GPU's TDP, held at
the end knots (never extrapolated; ``greenroute.sim.iteration.cost`` documents the reading).
Scaled models carry none: the simulator keeps its linear power model for them.

KV cache (DESIGN "LLM service time"; MARLIN eq. 1): a request holding ``t`` tokens uses
``kv_bytes_per_token x t`` bytes; the instance can hold ``kv_capacity_bytes`` of KV in total.
Cold load (MARLIN §3.1): ``LA_load = MF_v / BW_n`` with ``MF_v`` the weight bytes and ``BW_n``
the slowest link between local storage and HBM.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from greenroute.catalog.hardware import (
    BYTES_PER_GB,
    LLM,
    get_gpu,
    get_llm,
    kv_capacity_bytes,
)
from greenroute.core.errors import ConfigError, UnknownNameError

# Cold load, slowest link from local storage to HBM (MARLIN §3.1: LA_load = MF_v / BW_n).
# Local NVMe: DGX A100 data sheet (2020): 4 x 3.84 TB U.2 NVMe data drives; DGX H100 data sheet
# (2022): 8 x 3.84 TB U.2 NVMe. Each is a PCIe Gen4 x4 drive at ~7 GB/s sequential read (e.g.
# Samsung PM1733 data sheet: 7,000 MB/s), striped (RAID-0) as DGX OS configures /raid.
NVME_READ_GB_PER_S_PER_DRIVE = 7.0
NVME_DATA_DRIVES_BY_GPU: dict[str, int] = {"a100-80gb": 4, "h100-80gb": 8}
# Host-to-device link per GPU: PCIe Gen4 x16 (A100 SXM) = 16 GT/s x 16 lanes x 128/130 / 8
# = 31.5 GB/s per direction; PCIe Gen5 x16 (H100 SXM) = 63.0 GB/s (PCI-SIG base specs 4.0/5.0).
PCIE_H2D_GB_PER_S_BY_GPU: dict[str, float] = {"a100-80gb": 31.5, "h100-80gb": 63.0}

# ``max_batch_for_kv`` of a model without a KV limit (the throughput model): a finite
# stand-in for "unbounded" that still fits an int32 array.
UNBOUNDED_BATCH = 2**31 - 1

MS_PER_S = 1000.0


def _as_float_array(x: ArrayLike) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def interp_linear_extrap(x: ArrayLike, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """Piecewise-linear interpolation through ``(xp, fp)`` that extends the first and last
    segments linearly beyond the knots (``np.interp`` would hold the end values)."""
    x = _as_float_array(x)
    y = np.interp(x, xp, fp)
    if xp.size >= 2:
        lo_slope = (fp[1] - fp[0]) / (xp[1] - xp[0])
        hi_slope = (fp[-1] - fp[-2]) / (xp[-1] - xp[-2])
        y = np.where(x < xp[0], fp[0] + (x - xp[0]) * lo_slope, y)
        y = np.where(x > xp[-1], fp[-1] + (x - xp[-1]) * hi_slope, y)
    return y


@dataclass(frozen=True, eq=False)
class PowerKnots:
    """Measured iteration power of one instance, as fractions of one GPU's TDP (held at the
    end knots): prefill iterations versus batch tokens, decode iterations versus batch size."""

    prefill_tokens_knots: np.ndarray
    prefill_tdp_fraction_knots: np.ndarray
    decode_batch_knots: np.ndarray
    decode_tdp_fraction_knots: np.ndarray

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            object.__setattr__(self, name, _as_float_array(getattr(self, name)))
        for xs, ys in (
            (self.prefill_tokens_knots, self.prefill_tdp_fraction_knots),
            (self.decode_batch_knots, self.decode_tdp_fraction_knots),
        ):
            if xs.ndim != 1 or xs.shape != ys.shape or xs.size < 1:
                raise ConfigError("power knots must be two 1-D arrays of equal length >= 1")
            if np.any(np.diff(xs) <= 0):
                raise ConfigError("power knot abscissae must be strictly increasing")
            if not np.all(ys > 0):
                raise ConfigError("power knot TDP fractions must be > 0")

    def prefill_tdp_fraction(self, batch_tokens: ArrayLike) -> np.ndarray:
        """GPU power / TDP of an iteration holding prefill, at ``batch_tokens`` tokens."""
        x = _as_float_array(batch_tokens)
        return np.interp(x, self.prefill_tokens_knots, self.prefill_tdp_fraction_knots)

    def decode_tdp_fraction(self, batch: ArrayLike) -> np.ndarray:
        """GPU power / TDP of a decode-only iteration of ``batch`` sequences."""
        return np.interp(
            _as_float_array(batch), self.decode_batch_knots, self.decode_tdp_fraction_knots
        )


@dataclass(frozen=True, eq=False)
class PerfModel:
    """One (model, gpu, tensor-parallel degree) serving instance. Times in seconds."""

    model: str
    gpu: str
    tp: int
    prefill_tokens_knots: np.ndarray
    prefill_s_knots: np.ndarray
    decode_batch_knots: np.ndarray
    decode_step_s_knots: np.ndarray
    kv_bytes_per_token: int
    kv_capacity_bytes: float  # tp x GPU memory - weights - RUNTIME_RESERVE_FRACTION reserve
    cold_load_s: float  # MARLIN §3.1: LA_load = MF_v / BW_n
    power: PowerKnots | None = None  # measured iteration power, where the profile has it

    def __post_init__(self) -> None:
        for name in ("prefill_tokens_knots", "prefill_s_knots"):
            object.__setattr__(self, name, _as_float_array(getattr(self, name)))
        for name in ("decode_batch_knots", "decode_step_s_knots"):
            object.__setattr__(self, name, _as_float_array(getattr(self, name)))
        for xs, ys in (
            (self.prefill_tokens_knots, self.prefill_s_knots),
            (self.decode_batch_knots, self.decode_step_s_knots),
        ):
            if xs.ndim != 1 or xs.shape != ys.shape or xs.size < 2:
                raise ConfigError("perf knots must be two 1-D arrays of equal length >= 2")
            if np.any(np.diff(xs) <= 0):
                raise ConfigError("perf knot abscissae must be strictly increasing")

    def prefill_s(self, prompt_tokens: ArrayLike) -> np.ndarray:
        """Batch-1 prefill time (s) of a prompt of ``prompt_tokens`` tokens (>= 0)."""
        y = interp_linear_extrap(prompt_tokens, self.prefill_tokens_knots, self.prefill_s_knots)
        return np.maximum(y, 0.0)

    def decode_step_s(self, batch: ArrayLike) -> np.ndarray:
        """Time (s) of one decode iteration of a batch of ``batch`` sequences."""
        y = interp_linear_extrap(batch, self.decode_batch_knots, self.decode_step_s_knots)
        return np.maximum(y, 0.0)

    def decode_table(self, max_batch: int) -> np.ndarray:
        """``[max_batch + 1]`` decode step times; index = batch size, index 0 is 0.0."""
        if max_batch < 0:
            raise ValueError("max_batch must be >= 0")
        table = np.zeros(max_batch + 1, dtype=np.float64)
        table[1:] = self.decode_step_s(np.arange(1, max_batch + 1))
        return table

    def service_s(
        self, prompt_tokens: ArrayLike, output_tokens: ArrayLike, batch: ArrayLike
    ) -> np.ndarray:
        """Prefill + ``output_tokens`` decode steps at batch size ``batch`` (MARLIN §3.1)."""
        decode_s = _as_float_array(output_tokens) * self.decode_step_s(batch)
        return self.prefill_s(prompt_tokens) + decode_s

    def max_batch_for_kv(self, tokens_per_request: float) -> int:
        """How many requests of ``tokens_per_request`` KV tokens fit in the KV capacity."""
        if not tokens_per_request > 0:
            raise ValueError("tokens_per_request must be > 0")
        if self.kv_bytes_per_token == 0 or math.isinf(self.kv_capacity_bytes):
            return UNBOUNDED_BATCH
        n = math.floor(self.kv_capacity_bytes / (self.kv_bytes_per_token * tokens_per_request))
        return int(min(max(n, 0), UNBOUNDED_BATCH))


def load_bandwidth_gb_s(gpu_key: str, tp: int) -> float:
    """Slowest link from local NVMe to the ``tp`` GPUs' HBM: min(striped NVMe read, tp x PCIe)."""
    try:
        storage = NVME_DATA_DRIVES_BY_GPU[gpu_key] * NVME_READ_GB_PER_S_PER_DRIVE
        pcie = tp * PCIE_H2D_GB_PER_S_BY_GPU[gpu_key]
    except KeyError:
        raise UnknownNameError("GPU", gpu_key, PCIE_H2D_GB_PER_S_BY_GPU) from None
    return min(storage, pcie)


def cold_load_s(llm: LLM, gpu_key: str, tp: int) -> float:
    """MARLIN §3.1: ``LA_load = MF_v / BW_n`` (weight bytes / slowest storage-to-HBM link)."""
    return llm.weight_bytes / (load_bandwidth_gb_s(gpu_key, tp) * BYTES_PER_GB)


def _entries(table: Mapping[str, Any]) -> dict[tuple[str, str, int], dict[str, Any]]:
    return {(e["model"], e["gpu"], int(e["tp"])): e for e in table["entries"]}


def available_perf(table: Mapping[str, Any]) -> tuple[tuple[str, str, int], ...]:
    """The ``(model, gpu, tp)`` combinations a knot table holds."""
    return tuple(sorted(_entries(table)))


def perf_model(model: str, gpu: str, tp: int, table: Mapping[str, Any]) -> PerfModel:
    """The serving instance ``(model, gpu, tp)`` from a knot table loaded by
    :mod:`greenroute.data.perf_knots` (physics reads no files)."""
    llm = get_llm(model)
    hw = get_gpu(gpu)
    entries = _entries(table)
    key = (model, gpu, int(tp))
    if key not in entries:
        raise UnknownNameError(
            "perf combination (model, gpu, tp)", repr(key), [repr(k) for k in entries]
        )
    e = entries[key]
    return PerfModel(
        model=model,
        gpu=gpu,
        tp=int(tp),
        prefill_tokens_knots=np.asarray(e["prefill_tokens"], dtype=np.float64),
        prefill_s_knots=np.asarray(e["prefill_ms"], dtype=np.float64) / MS_PER_S,
        decode_batch_knots=np.asarray(e["decode_batch"], dtype=np.float64),
        decode_step_s_knots=np.asarray(e["decode_step_ms"], dtype=np.float64) / MS_PER_S,
        kv_bytes_per_token=llm.kv_bytes_per_token,
        kv_capacity_bytes=kv_capacity_bytes(llm, hw, int(tp)),
        cold_load_s=cold_load_s(llm, gpu, int(tp)),
        power=_power_knots(e),
    )


def _power_knots(e: Mapping[str, Any]) -> PowerKnots | None:
    if "prefill_power_tdp_fraction" not in e:
        return None
    return PowerKnots(
        prefill_tokens_knots=np.asarray(e["prefill_power_tokens"], dtype=np.float64),
        prefill_tdp_fraction_knots=np.asarray(e["prefill_power_tdp_fraction"], dtype=np.float64),
        decode_batch_knots=np.asarray(e["decode_power_batch"], dtype=np.float64),
        decode_tdp_fraction_knots=np.asarray(e["decode_power_tdp_fraction"], dtype=np.float64),
    )


def throughput_perf_model(tokens_per_s: float, name: str = "tps") -> PerfModel:
    """Seed 002's throughput model: every token (prompt or output) costs ``1 / tokens_per_s``.

    ``prefill_s(p) = p / tps``; ``decode_step_s(b) = 1 / tps`` for every batch size; no KV
    limit (``kv_capacity_bytes = inf``) and no cold load. So ``service_s(p, o, b) =
    (p + o) / tps``. Pair it with a concurrency limit in the simulator.
    """
    if not tokens_per_s > 0:
        raise ConfigError(f"tokens_per_s must be > 0, got {tokens_per_s!r}")
    step_s = 1.0 / tokens_per_s
    return PerfModel(
        model=name,
        gpu="any",
        tp=1,
        prefill_tokens_knots=np.array([0.0, 1.0]),
        prefill_s_knots=np.array([0.0, step_s]),
        decode_batch_knots=np.array([1.0, 2.0]),
        decode_step_s_knots=np.array([step_s, step_s]),
        kv_bytes_per_token=0,
        kv_capacity_bytes=math.inf,
        cold_load_s=0.0,
    )
