"""Rebuild ``embedded/workload_profiles.json`` from the real traces in ``shared/data``.

    python -m greenroute.data.build_workload_profiles --data-dir DIR [--out PATH] [--check]

What it derives (inputs: shared/data/PROVENANCE.md §1):

1. Length models "azure-code", "azure-conv", "vidur-arxiv": the sparse joint histogram of
   (prompt, output) tokens of :func:`greenroute.data.workload.fit_length_model`, with the
   trace's and the model's exact mean, median and log-length correlation.
2. Hour-of-week load shape "alibaba-genai" from the SUCCEED requests of the Alibaba GenAI 2026
   SD-LoRA trace. It is the only public arrival trace here spanning several weeks (23 days;
   the Azure traces cover one hour), so it is the only data for a weekly shape, with two
   caveats: it serves Stable-Diffusion images, not LLM text, and its timestamps are anonymised
   and shifted (PROVENANCE §1). We treat it as the local time of a single site after a phase
   alignment (``ALIBABA_TIMESTAMP_SHIFT_H``) and also keep the literal reading as
   "alibaba-genai-raw".
3. Per-minute request-count dispersion of both Azure traces, as the lognormal sigma of a
   mean-one rate multiplier (the default ``rate_noise_sigma`` of a WorkloadSpec).

The output is deterministic: integer histogram counts and floats rounded to 6 significant
digits, so a rerun on the same data reproduces the committed file byte for byte.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from greenroute.core.errors import GreenrouteError
from greenroute.data.lengths import (
    LENGTH_BINS_PER_DECADE,
    LENGTH_QUANTILE_STEP,
    PROFILES_RESOURCE,
    fit_length_model,
    length_stats,
)
from greenroute.data.paths import file_sha256, resolve_data_dir
from greenroute.data.traces import (
    ALIBABA_GENAI_RELPATH,
    AZURE_CODE_RELPATH,
    AZURE_CONV_RELPATH,
    VIDUR_ARXIV_RELPATH,
    load_alibaba_genai_trace,
    load_azure_llm_trace,
    load_vidur_lengths,
)
from greenroute.data.workload import HOURS_PER_WEEK, MINUTE_S

FORMAT_VERSION = 1
DEFAULT_OUT = Path(__file__).resolve().parent / "embedded" / PROFILES_RESOURCE

# Phase alignment of the Alibaba GenTD26 timestamps (hours added to ``gmt_create``). In the
# literal timestamps each working day starts at 16:00 (sharp rise), dips at 19:00 and runs
# until about 04:00 the next day; the quiet day-blocks start on Friday and Saturday 16:00.
# Adding 17 h maps the rise to 09:00, the dip to a 12:00 lunch break, the tail to 21:00 and
# the two quiet blocks to Saturday and Sunday: an office-hours pattern, Monday to Friday. This
# is our inference, not a documented offset; "alibaba-genai-raw" keeps the literal reading.
ALIBABA_TIMESTAMP_SHIFT_H = 17
ALIBABA_OK_STATUS = "SUCCEED"  # predict_status of completed requests (26,392 rows)
# Days before the first (shifted) day with at least this fraction of the median daily count are
# the service's ramp-up (58 to 103 requests a day against a median near 1,400) and are dropped.
RAMP_UP_MIN_DAILY_FRACTION = 0.25
# Light circular smoothing over adjacent hours of the week (weights of hours h-1, h, h+1).
DIURNAL_SMOOTHING = (0.25, 0.5, 0.25)

LENGTH_SOURCES = {
    "azure-code": (AZURE_CODE_RELPATH, load_azure_llm_trace),
    "azure-conv": (AZURE_CONV_RELPATH, load_azure_llm_trace),
    "vidur-arxiv": (VIDUR_ARXIV_RELPATH, load_vidur_lengths),
}
NOISE_SOURCES = {"azure-conv": AZURE_CONV_RELPATH, "azure-code": AZURE_CODE_RELPATH}
DEFAULT_NOISE_TRACE = "azure-conv"  # the default interactive length model's trace


def _sig(x: float, digits: int = 6) -> float:
    """Round to ``digits`` significant digits (stable text across platforms)."""
    return float(f"{float(x):.{digits}g}")


def _stats(d: dict[str, float]) -> dict[str, float]:
    return {k: _sig(v) for k, v in d.items()}


def length_model_entry(name: str, relpath: Path, df: pd.DataFrame) -> dict[str, Any]:
    """Fit one length model and record the trace's and the model's statistics."""
    prompt = df["prompt_tokens"].to_numpy()
    output = df["output_tokens"].to_numpy()
    model, counts = fit_length_model(name, prompt, output, source=str(relpath))
    return {
        "source": str(relpath),
        "rows": int(prompt.size),
        "binning": {
            "bins_per_decade": LENGTH_BINS_PER_DECADE,
            "quantile_step": LENGTH_QUANTILE_STEP,
            "within_bin": "uniform over the bin's integers",
        },
        "trace_stats": _stats(length_stats(prompt, output)),
        "model_stats": _stats(model.exact_stats()),
        "prompt_edges": model.prompt_edges.tolist(),
        "output_edges": model.output_edges.tolist(),
        "cell_prompt_bin": model.cell_prompt_bin.tolist(),
        "cell_output_bin": model.cell_output_bin.tolist(),
        "cell_count": counts.tolist(),
    }


def hour_of_week_profile(df: pd.DataFrame, shift_h: int) -> tuple[np.ndarray, dict[str, Any]]:
    """168 mean-one multipliers from request timestamps shifted by ``shift_h`` hours.

    Counts per clock hour (zeros included) are averaged per hour-of-week over the hours the
    trace covers after the ramp-up, then smoothed lightly and normalised to mean 1.
    """
    shift = pd.Timedelta(hours=shift_h)
    t = pd.DatetimeIndex(df.loc[df["status"] == ALIBABA_OK_STATUS, "timestamp"]) + shift
    observed_end = (pd.Timestamp(df["timestamp"].iloc[-1]) + shift).floor("h")  # partial: out
    daily = pd.Series(1, index=t).resample("D").sum()
    first_day = daily.index[
        np.argmax(daily.to_numpy() >= RAMP_UP_MIN_DAILY_FRACTION * daily.median())
    ]
    hours = pd.date_range(first_day, observed_end, freq="h", inclusive="left")
    per_hour = pd.Series(1, index=t.floor("h")).groupby(level=0).sum()
    per_hour = per_hour.reindex(hours, fill_value=0).to_numpy(dtype=np.float64)
    how = np.asarray(hours.day_of_week) * 24 + np.asarray(hours.hour)
    exposure = np.bincount(how, minlength=HOURS_PER_WEEK)
    if exposure.min() == 0:
        raise GreenrouteError("the Alibaba trace covers less than a week after the ramp-up")
    mean_rate = np.bincount(how, weights=per_hour, minlength=HOURS_PER_WEEK) / exposure
    w_prev, w_mid, w_next = DIURNAL_SMOOTHING
    smooth = w_prev * np.roll(mean_rate, 1) + w_mid * mean_rate + w_next * np.roll(mean_rate, -1)
    mult = smooth / smooth.mean()
    mult = np.round(mult, 6)
    by_day = mult.reshape(7, 24).mean(axis=1)
    positive = mult[mult > 0]
    info = {
        "timestamp_shift_h": shift_h,
        "hour_of_week_origin": "Monday 00:00 local",
        "first_hour": str(hours[0]),
        "end_hour_exclusive": str(observed_end),
        "hours_used": int(hours.size),
        "requests_used": int(per_hour.sum()),
        "exposure_per_hour_of_week": [int(exposure.min()), int(exposure.max())],
        "peak_hour_of_week": int(np.argmax(mult)),
        "trough_hour_of_week": int(np.argmin(mult)),
        "peak_multiplier": _sig(mult.max()),
        "trough_multiplier": _sig(mult.min()),
        "hours_below_0.05": int(np.sum(mult < 0.05)),
        "peak_to_min_positive": _sig(mult.max() / positive.min()),
        "p90_to_p10": _sig(np.quantile(mult, 0.9) / max(np.quantile(mult, 0.1), 1e-9)),
        "weekday_to_weekend": _sig(by_day[:5].mean() / by_day[5:].mean()),
        "day_means_mon_to_sun": [_sig(v) for v in by_day],
    }
    return mult, info


def rate_noise_entry(df: pd.DataFrame, relpath: Path) -> dict[str, Any]:
    """Per-minute count dispersion and the matching lognormal sigma.

    For counts N ~ Poisson(L M) with M lognormal of mean 1, var N = L + L^2 (exp(s^2) - 1),
    hence s^2 = ln(1 + (var - mean) / mean^2). Minutes start at the first request; the last,
    partial minute is dropped.
    """
    minute = np.floor(df["arrival_s"].to_numpy() / MINUTE_S).astype(np.int64)
    counts = np.bincount(minute)[:-1].astype(np.float64)
    mean = counts.mean()
    var = counts.var(ddof=1)
    sigma = math.sqrt(math.log1p(max(0.0, (var - mean) / mean**2)))
    return {
        "source": str(relpath),
        "minutes": int(counts.size),
        "mean_per_minute": _sig(mean),
        "var_per_minute": _sig(var),
        "index_of_dispersion": _sig(var / mean),
        "sigma": _sig(sigma, 4),
    }


def build_profiles(data_dir: str | Path) -> dict[str, Any]:
    """All embedded workload statistics from ``data_dir`` (shared/data layout)."""
    root = Path(data_dir)
    sources: dict[str, Any] = {}
    length_models: dict[str, Any] = {}
    frames: dict[str, pd.DataFrame] = {}
    for name, (relpath, loader) in LENGTH_SOURCES.items():
        path = root / relpath
        frames[name] = loader(path)
        sources[str(relpath)] = {"sha256": file_sha256(path), "rows": len(frames[name])}
        length_models[name] = length_model_entry(name, relpath, frames[name])

    alibaba_path = root / ALIBABA_GENAI_RELPATH
    alibaba = load_alibaba_genai_trace(alibaba_path)
    sources[str(ALIBABA_GENAI_RELPATH)] = {
        "sha256": file_sha256(alibaba_path),
        "rows": len(alibaba),
    }
    diurnal: dict[str, Any] = {}
    for name, shift in (("alibaba-genai", ALIBABA_TIMESTAMP_SHIFT_H), ("alibaba-genai-raw", 0)):
        mult, info = hour_of_week_profile(alibaba, shift)
        diurnal[name] = {
            "source": f"{ALIBABA_GENAI_RELPATH} (predict_status == {ALIBABA_OK_STATUS})",
            "smoothing": list(DIURNAL_SMOOTHING),
            "ramp_up_min_daily_fraction": RAMP_UP_MIN_DAILY_FRACTION,
            "stats": info,
            "multipliers": mult.tolist(),
        }

    rate_noise: dict[str, Any] = {
        name: rate_noise_entry(frames[name], relpath) for name, relpath in NOISE_SOURCES.items()
    }
    rate_noise["default"] = DEFAULT_NOISE_TRACE
    return {
        "format_version": FORMAT_VERSION,
        "generator": "python -m greenroute.data.build_workload_profiles",
        "sources": dict(sorted(sources.items())),
        "length_models": length_models,
        "diurnal": diurnal,
        "rate_noise": rate_noise,
    }


def render(obj: Any, indent: int = 0) -> str:
    """JSON with nested objects indented and lists of numbers on one line (compact, diffable)."""
    pad = " " * indent
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{pad} {json.dumps(str(k))}: {render(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and any(isinstance(v, dict | list) for v in obj):
        return "[\n" + ",\n".join(f"{pad} {render(v, indent + 1)}" for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def render_profiles(profiles: dict[str, Any]) -> str:
    return render(profiles) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m greenroute.data.build_workload_profiles", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--data-dir", help="shared/data directory (else $GREENROUTE_DATA_DIR)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT}")
    parser.add_argument(
        "--check", action="store_true", help="do not write; exit 1 if --out would change"
    )
    args = parser.parse_args(argv)
    try:
        data_dir = resolve_data_dir(args.data_dir)
        if data_dir is None:
            parser.error("no data directory: pass --data-dir or set GREENROUTE_DATA_DIR")
        text = render_profiles(build_profiles(data_dir))
    except GreenrouteError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.is_file() else None
        if current != text:
            print(f"{args.out} is out of date", file=sys.stderr)
            return 1
        print(f"{args.out} is up to date")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text.encode()):,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
