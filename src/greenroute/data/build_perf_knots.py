"""Build the embedded LLM performance knots from the raw profile tables.

Usage::

    python -m greenroute.data.build_perf_knots --data-dir DIR [--out PATH]

writes ``greenroute/data/embedded/perf_knots.json`` (or ``PATH``): for every
(model, gpu, tensor-parallel degree) in the table, batch-1 prefill time (ms) versus prompt
tokens and decode-iteration time (ms) versus batch size, plus the sha256 of every source file.

Measured (Splitwise ``perf/splitwise_perf_model.csv``; llama2-70b on a100-80gb/h100-80gb at
TP 2/4/8):

* prefill: the prompt-size sweep at batch 1 and 128 output tokens (prompt 128 ... 8192);
  each knot is the mean ``prompt_time`` of the repeated runs (5 per configuration; the
  512-token base point appears in three sweeps, so 15 runs).
* decode: the batch sweep at prompt 512 and 128 output tokens; each knot is the mean
  ``token_time`` (ms per decode iteration). **Batch 64 is excluded**: PROVENANCE.md §3 flags
  those rows as anomalous (prompt time below batch 32, end-to-end time ~20x larger), so
  larger batches are linear extrapolations of the 16-32 segment.
* power (where measured, else absent): per prefill knot the median ``peak_power`` and per
  decode knot the median ``average_power`` of the same rows, fractions of one GPU's TDP
  (``greenroute.sim.iteration.cost`` docstring; Patel et al. 2024 report power normalised to
  TDP). Rows with power 0 are unmeasured and skipped: every H100 row, and the batch-32 decode
  rows. Power knots are not made monotone (the 8,192-token prefill draws less than 4,096).
* The curves are made non-decreasing with pool-adjacent-violators (isotonic regression):
  where the mean of a larger configuration is below that of a smaller one (a few percent,
  within run-to-run noise), the adjacent knots are replaced by their average. Every other
  knot is exactly the measured mean; both are stored (``*_measured``).

Derived (no Splitwise rows: llama2-7b and llama3-8b at TP 1, llama3-70b at TP 2/4/8): the
monotone llama2-70b curve at the nearest Splitwise TP, times the ratio of vidur's measured
linear-layer time (sum of per-layer operator means x n_layers + embedding, vidur
``*_mlp.csv.gz``) of the target at its TP over llama2-70b at the reference TP, on the same GPU,
at the knot's token count (prompt tokens for prefill; the batch size for decode, one new token
per sequence). Caveats, stated in the output too:

* vidur's snapshot has no attention kernels and no LM head, so the ratio covers the linear
  layers (QKV/output projections, MLP), norms, RoPE and adds only; attention and the
  vocabulary projection are assumed to scale the same way.
* vidur profiles Llama-3 on A100 only: Llama-3 on H100 uses the A100 ratio.
* vidur's Llama-2 sweep stops at 4,096 tokens: knots above it use the ratio at the nearest
  profiled token count.
* Scaled knots are made monotone with the same pool-adjacent-violators step.

Only combinations whose weights fit ``tp`` GPUs with room for a ``MIN_KV_TOKENS`` request are
written (``greenroute.physics.llm_perf.fits``). This module is a build tool: it imports the
capacity rule from ``physics.llm_perf`` so that both use one definition.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from greenroute.catalog.hardware import (
    MIN_KV_TOKENS,
    RUNTIME_RESERVE_FRACTION,
    fits,
    get_gpu,
    get_llm,
)
from greenroute.core.errors import DataFormatError
from greenroute.data.paths import file_sha256
from greenroute.data.perf import (
    SPLITWISE_RELPATH,
    _numeric,
    _read_raw,
    _require_columns,
    load_splitwise_perf,
    load_vidur_mlp,
    splitwise_path,
    vidur_linear_time_ms,
    vidur_mlp_path,
)

FORMAT = "greenroute-perf-knots/1"
DEFAULT_OUT = Path(__file__).resolve().parent / "embedded" / "perf_knots.json"

REFERENCE_MODEL = "llama2-70b"
SPLITWISE_GPUS: tuple[str, ...] = ("a100-80gb", "h100-80gb")
SPLITWISE_TPS: tuple[int, ...] = (2, 4, 8)
PREFILL_SWEEP_BATCH = 1  # prompt-size sweep: batch 1 ...
PREFILL_SWEEP_OUTPUT_TOKENS = 128  # ... and 128 output tokens
DECODE_SWEEP_PROMPT_TOKENS = 512  # batch sweep: 512-token prompts ...
DECODE_SWEEP_OUTPUT_TOKENS = 128  # ... and 128 output tokens
EXCLUDED_BATCH_SIZES: tuple[int, ...] = (64,)  # anomalous rows, PROVENANCE.md §3
# power columns: fractions of one GPU's TDP (sim/iteration/cost.py docstring), 0 = unmeasured
SPLITWISE_POWER_COLUMNS: tuple[str, ...] = ("peak_power", "average_power")

# (model, tp) combinations derived by vidur ratio scaling, on every Splitwise GPU.
DERIVED_MODELS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("llama2-7b", (1,)),
    ("llama3-8b", (1,)),
    ("llama3-70b", (2, 4, 8)),
)
# vidur has Llama-3 profiles on A100 only; every other combination uses its own GPU.
VIDUR_RATIO_GPU_FALLBACK = "a100-80gb"


def load_splitwise_power(path: str | Path) -> pd.DataFrame:
    """The profile's ``peak_power``/``average_power`` columns (fractions of one GPU's TDP,
    0 = not measured), in file order (``load_splitwise_perf`` leaves them out)."""
    path = Path(path)
    raw = _read_raw(path)
    _require_columns(path, raw, SPLITWISE_POWER_COLUMNS)
    out = {}
    for col in SPLITWISE_POWER_COLUMNS:
        values = _numeric(path, raw, col, integer=False, positive=False)
        if (values < 0).any():
            row = int(np.flatnonzero(values < 0)[0])
            raise DataFormatError(path, f"column {col!r}: negative power", line=row + 2)
        out[col] = values
    return pd.DataFrame(out)


def pool_adjacent_violators(values: Sequence[float]) -> list[float]:
    """Non-decreasing least-squares fit (equal weights): violating neighbours are averaged.

    Values that need no pooling are returned unchanged (bit for bit).
    """
    blocks: list[list[float]] = []  # [sum, count]
    for v in values:
        blocks.append([float(v), 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    out: list[float] = []
    for s, c in blocks:
        out.extend([s / c] * int(c))
    return out


def nearest_tp(tp: int, choices: Sequence[int] = SPLITWISE_TPS) -> int:
    """Nearest Splitwise TP (ties go to the smaller degree)."""
    return min(choices, key=lambda c: (abs(c - tp), c))


def splitwise_curves(frame: pd.DataFrame, gpu: str, tp: int) -> dict[str, Any]:
    """Measured llama2-70b prefill and decode knots (ms) for one GPU and TP."""
    sel = frame[
        (frame["model"] == REFERENCE_MODEL)
        & (frame["hardware"] == gpu)
        & (frame["tensor_parallel"] == tp)
    ]
    if sel.empty:
        raise DataFormatError(SPLITWISE_RELPATH, f"no {REFERENCE_MODEL} rows for {gpu} TP{tp}")
    pre = sel[
        (sel["batch_size"] == PREFILL_SWEEP_BATCH)
        & (sel["token_size"] == PREFILL_SWEEP_OUTPUT_TOKENS)
    ]
    pre_g = pre.groupby("prompt_size", sort=True)["prompt_time"].agg(["mean", "count"])
    dec = sel[
        (sel["prompt_size"] == DECODE_SWEEP_PROMPT_TOKENS)
        & (sel["token_size"] == DECODE_SWEEP_OUTPUT_TOKENS)
        & ~sel["batch_size"].isin(EXCLUDED_BATCH_SIZES)
    ]
    dec_g = dec.groupby("batch_size", sort=True)["token_time"].agg(["mean", "count"])
    if len(pre_g) < 2 or len(dec_g) < 2:
        raise DataFormatError(SPLITWISE_RELPATH, f"too few sweep points for {gpu} TP{tp}")
    prefill_measured = [float(v) for v in pre_g["mean"]]
    decode_measured = [float(v) for v in dec_g["mean"]]
    times = {
        "prefill_tokens": [int(v) for v in pre_g.index],
        "prefill_ms": pool_adjacent_violators(prefill_measured),
        "prefill_ms_measured": prefill_measured,
        "prefill_repeats": [int(v) for v in pre_g["count"]],
        "decode_batch": [int(v) for v in dec_g.index],
        "decode_step_ms": pool_adjacent_violators(decode_measured),
        "decode_step_ms_measured": decode_measured,
        "decode_repeats": [int(v) for v in dec_g["count"]],
    }
    return times | power_curves(pre, dec)


def power_curves(prefill_rows: pd.DataFrame, decode_rows: pd.DataFrame) -> dict[str, list]:
    """Measured power knots (fractions of one GPU's TDP) of the same sweeps as the time knots.

    As ``greenroute.sim.iteration.cost.splitwise_cost_table`` interprets the columns:
    ``peak_power`` is the power of a prefill (compute-bound) iteration and ``average_power``
    that of a decode iteration; rows with power 0 are unmeasured and skipped (every H100 row;
    the batch-32 rows' ``average_power``). Each knot is the median of the repeated runs (the
    repeats carry identical power values). Returns ``{}`` unless both curves have a knot.
    """
    pre = prefill_rows[prefill_rows["peak_power"] > 0]
    dec = decode_rows[decode_rows["average_power"] > 0]
    pre_g = pre.groupby("prompt_size", sort=True)["peak_power"].median()
    dec_g = dec.groupby("batch_size", sort=True)["average_power"].median()
    if pre_g.empty or dec_g.empty:
        return {}
    return {
        "prefill_power_tokens": [int(v) for v in pre_g.index],
        "prefill_power_tdp_fraction": [float(v) for v in pre_g],
        "decode_power_batch": [int(v) for v in dec_g.index],
        "decode_power_tdp_fraction": [float(v) for v in dec_g],
    }


def _nearest_token_count(n: int, available: np.ndarray) -> int:
    idx = int(np.argmin(np.abs(available - n) * 2 + (available > n)))  # ties -> smaller
    return int(available[idx])


def linear_time_ratio(
    target: pd.Series, reference: pd.Series, tp: int, ref_tp: int, token_counts: Sequence[int]
) -> tuple[list[float], list[int]]:
    """vidur linear-layer time of target@tp / reference@ref_tp at each token count.

    A token count missing from either profile uses the nearest count both profiles have.
    Returns the ratios and the token counts actually used.
    """
    t = target.xs(tp, level="num_tensor_parallel_workers")
    r = reference.xs(ref_tp, level="num_tensor_parallel_workers")
    common = np.array(sorted(set(t.index) & set(r.index)), dtype=np.int64)
    used = [_nearest_token_count(int(n), common) for n in token_counts]
    ratios = [float(t.loc[n] / r.loc[n]) for n in used]
    return ratios, used


def build_perf_knots(data_dir: str | Path) -> dict[str, Any]:
    """The whole knot table as a JSON-ready dict (deterministic for given input files)."""
    data_dir = Path(data_dir)
    sw_path = splitwise_path(data_dir)
    frame = load_splitwise_perf(sw_path)
    frame = frame.assign(**load_splitwise_power(sw_path))
    sources: dict[str, str] = {SPLITWISE_RELPATH: file_sha256(sw_path)}

    vidur_cache: dict[tuple[str, str], pd.Series] = {}

    def vidur(model: str, gpu: str) -> pd.Series:
        if (model, gpu) not in vidur_cache:
            llm = get_llm(model)
            path = vidur_mlp_path(data_dir, gpu, llm.perf_key)
            vidur_cache[(model, gpu)] = vidur_linear_time_ms(load_vidur_mlp(path), llm.n_layers)
            sources[path.relative_to(data_dir).as_posix()] = file_sha256(path)
        return vidur_cache[(model, gpu)]

    entries: list[dict[str, Any]] = []
    measured: dict[tuple[str, int], dict[str, Any]] = {}
    for gpu in SPLITWISE_GPUS:
        for tp in SPLITWISE_TPS:
            curves = splitwise_curves(frame, gpu, tp)
            measured[(gpu, tp)] = curves
            if fits(get_llm(REFERENCE_MODEL), get_gpu(gpu), tp):
                entries.append(
                    {"model": REFERENCE_MODEL, "gpu": gpu, "tp": tp, "method": "splitwise"} | curves
                )

    for model, tps in DERIVED_MODELS:
        for gpu in SPLITWISE_GPUS:
            ratio_gpu = gpu
            if not vidur_mlp_path(data_dir, gpu, get_llm(model).perf_key).is_file():
                ratio_gpu = VIDUR_RATIO_GPU_FALLBACK
            for tp in tps:
                if not fits(get_llm(model), get_gpu(gpu), tp):
                    continue
                ref_tp = nearest_tp(tp)
                base = measured[(gpu, ref_tp)]
                target = vidur(model, ratio_gpu)
                reference = vidur(REFERENCE_MODEL, ratio_gpu)
                pre_ratio, pre_used = linear_time_ratio(
                    target, reference, tp, ref_tp, base["prefill_tokens"]
                )
                dec_ratio, dec_used = linear_time_ratio(
                    target, reference, tp, ref_tp, base["decode_batch"]
                )
                pre_scaled = [b * q for b, q in zip(base["prefill_ms"], pre_ratio, strict=True)]
                dec_scaled = [b * q for b, q in zip(base["decode_step_ms"], dec_ratio, strict=True)]
                entries.append(
                    {
                        "model": model,
                        "gpu": gpu,
                        "tp": tp,
                        "method": "vidur-linear-ratio",
                        "reference": {"model": REFERENCE_MODEL, "gpu": gpu, "tp": ref_tp},
                        "ratio_gpu": ratio_gpu,
                        "prefill_tokens": list(base["prefill_tokens"]),
                        "prefill_ms": pool_adjacent_violators(pre_scaled),
                        "prefill_ms_scaled": pre_scaled,
                        "prefill_ratio": pre_ratio,
                        "prefill_ratio_tokens": pre_used,
                        "decode_batch": list(base["decode_batch"]),
                        "decode_step_ms": pool_adjacent_violators(dec_scaled),
                        "decode_step_ms_scaled": dec_scaled,
                        "decode_ratio": dec_ratio,
                        "decode_ratio_tokens": dec_used,
                    }
                )

    return {
        "format": FORMAT,
        "generated_by": "python -m greenroute.data.build_perf_knots --data-dir DIR",
        "units": {
            "prefill_tokens": "prompt tokens (batch 1)",
            "prefill_ms": "ms, prefill of one prompt",
            "decode_batch": "sequences in the decode batch",
            "decode_step_ms": "ms per decode iteration (one token for every sequence)",
            "prefill_power_tdp_fraction": "prefill-iteration GPU power / GPU TDP (peak_power)",
            "decode_power_tdp_fraction": "decode-iteration GPU power / GPU TDP (average_power)",
        },
        "selection": {
            "prefill_sweep": {
                "batch_size": PREFILL_SWEEP_BATCH,
                "token_size": PREFILL_SWEEP_OUTPUT_TOKENS,
            },
            "decode_sweep": {
                "prompt_size": DECODE_SWEEP_PROMPT_TOKENS,
                "token_size": DECODE_SWEEP_OUTPUT_TOKENS,
            },
            "excluded_batch_sizes": list(EXCLUDED_BATCH_SIZES),
            "monotone": "pool-adjacent-violators on the knot values",
            "fit_rule": {
                "runtime_reserve_fraction": RUNTIME_RESERVE_FRACTION,
                "min_kv_tokens": MIN_KV_TOKENS,
            },
        },
        "caveats": [
            "batch_size 64 rows excluded (anomalous, PROVENANCE.md section 3); "
            "larger batches extrapolate the 16-32 segment",
            "derived models: vidur ratio covers linear layers, norms, RoPE and adds only "
            "(no attention kernels, no LM head in the snapshot)",
            "Llama-3 on H100 uses the A100 vidur ratio (vidur has Llama-3 on A100 only)",
            "knots above vidur's largest profiled token count use the ratio at that count",
            "power knots only where Splitwise measured power (llama2-70b on A100; the H100 "
            "rows and the batch-32 average_power are 0, unmeasured); derived models have none",
        ],
        "sources": dict(sorted(sources.items())),
        "entries": entries,
    }


def dumps(table: dict[str, Any]) -> str:
    """Canonical text of the table (what is committed)."""
    return json.dumps(table, indent=1, ensure_ascii=True) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m greenroute.data.build_perf_knots",
        description="Regenerate the embedded LLM performance knots from shared/data/perf.",
    )
    parser.add_argument("--data-dir", required=True, help="real-data directory (has perf/)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="output JSON path")
    args = parser.parse_args(argv)
    try:
        text = dumps(build_perf_knots(args.data_dir))
    except DataFormatError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
