"""GCOS workload: a model catalogue and task sample from the Alibaba GenAI trace, and synthetic
data objects (Zipf popularity, log-normal sizes).

The trace (PROVENANCE.md §1, ``alibaba_genai2026_sd_lora_request_trace.csv.gz``) gives, per
SUCCEED request, the checkpoint id, the number of LoRA adapters and the measured execution time;
it names no adapter and no model size, so adapter identities (a pool per checkpoint) and sizes
are scenario parameters. Without a data directory a documented synthetic stand-in with the
trace's marginals is used (``source="synthetic"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.core.errors import DataFormatError

TRACE_FILE = "llm_traces/alibaba_genai2026_sd_lora_request_trace.csv.gz"
TRACE_COLUMNS = (
    "predict_type",
    "predict_status",
    "exec_time_seconds",
    "prompt_length",
    "negative_prompt_length",
    "num_images_per_prompt",
    "num_inference_steps",
    "checkpoint_model_version_id",
    "num_lora",
)
# num_lora counts over the trace's 26,392 SUCCEED rows (0..6), measured 2026-11-26; used only by
# the synthetic stand-in.
TRACE_NUM_LORA_COUNTS = {0: 22033, 1: 4071, 2: 246, 3: 35, 4: 3, 6: 4}


def load_trace(data_dir: Path | None, seed: int = 0) -> tuple[pd.DataFrame, str]:
    """SUCCEED rows of the trace with :data:`TRACE_COLUMNS` (minus status), and the source."""
    if data_dir is None:
        return _synthetic_trace(seed), "synthetic"
    path = Path(data_dir) / TRACE_FILE
    if not path.is_file():
        raise DataFormatError(path, "GenAI trace missing (see PROVENANCE.md §1)")
    df = pd.read_csv(path, usecols=list(TRACE_COLUMNS))
    df = df[df["predict_status"] == "SUCCEED"].drop(columns="predict_status")
    df = df.dropna(subset=["checkpoint_model_version_id", "exec_time_seconds"])
    df = df[df["exec_time_seconds"] > 0]
    for col in ("prompt_length", "num_images_per_prompt", "num_inference_steps"):
        df[col] = df[col].fillna(df[col].median())
    df["num_lora"] = df["num_lora"].fillna(0).astype(int)
    return df.reset_index(drop=True), "trace"


def _synthetic_trace(seed: int, n: int = 20000, n_models: int = 80) -> pd.DataFrame:
    """Stand-in with the trace's shape: Zipf(1.1) checkpoints, its num_lora marginal and
    log-normal execution times (median 30 s, sigma 0.5; the trace's median is 30 s)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_models + 1) ** 1.1
    models = rng.choice(n_models, size=n, p=p / p.sum())
    loras = np.array(list(TRACE_NUM_LORA_COUNTS))
    lp = np.array(list(TRACE_NUM_LORA_COUNTS.values()), dtype=float)
    steps = rng.choice([20, 25, 30, 40, 50], size=n)
    images = rng.choice([1, 2, 4, 8], size=n)
    exec_s = np.exp(np.log(30.0) + 0.5 * rng.standard_normal(n)) * (steps / 30.0) ** 0.5
    return pd.DataFrame(
        {
            "predict_type": rng.choice(["TXT_2_IMG", "IMG_2_IMG", "INPAINTING"], size=n),
            "exec_time_seconds": np.round(exec_s),
            "prompt_length": rng.integers(10, 200, size=n).astype(float),
            "num_images_per_prompt": images.astype(float),
            "num_inference_steps": steps.astype(float),
            "checkpoint_model_version_id": [f"M{m:04d}" for m in models],
            "num_lora": rng.choice(loras, size=n, p=lp / lp.sum()),
        }
    )


@dataclass(frozen=True)
class Catalogue:
    """Checkpoints (most popular first), their adapter pools and sizes; data objects."""

    model_ids: tuple[str, ...]
    model_gb: np.ndarray  # [M]
    adapters: tuple[int, ...]  # pool size per checkpoint
    adapter_gb: tuple[np.ndarray, ...]  # per checkpoint, [pool]
    data_gb: np.ndarray  # [D]
    data_home: np.ndarray  # [D] region index of each object's origin storage
    model_home: int  # region index of the model hub


@dataclass
class Tasks:
    """Columns of the sampled tasks (sorted by arrival)."""

    arrival_s: np.ndarray
    origin: np.ndarray
    model: np.ndarray
    adapters: list[tuple[int, ...]]
    data: np.ndarray
    exec_s: np.ndarray  # true execution time (trace time + data processing)
    trace_rows: pd.DataFrame  # the trace columns of each task, for predictors

    def __len__(self) -> int:
        return int(self.arrival_s.size)


def _lognormal(rng: np.random.Generator, median: float, sigma: float, n: int) -> np.ndarray:
    return np.exp(np.log(median) + sigma * rng.standard_normal(n))


def build_catalogue(
    trace: pd.DataFrame,
    *,
    n_regions: int,
    n_models: int,
    adapters_per_model: int,
    model_median_gb: float,
    model_sigma: float,
    adapter_median_gb: float,
    n_data: int,
    data_median_gb: float,
    data_sigma: float,
    data_min_gb: float,
    data_max_gb: float,
    model_home: int,
    seed: int,
) -> Catalogue:
    rng = np.random.default_rng(seed)
    counts = trace["checkpoint_model_version_id"].value_counts()
    ids = tuple(str(i) for i in counts.index[:n_models])
    uses_lora = trace.groupby("checkpoint_model_version_id")["num_lora"].max()
    pools = tuple(adapters_per_model if uses_lora.get(i, 0) > 0 else 0 for i in ids)
    sizes = np.clip(_lognormal(rng, data_median_gb, data_sigma, n_data), data_min_gb, data_max_gb)
    return Catalogue(
        model_ids=ids,
        model_gb=_lognormal(rng, model_median_gb, model_sigma, len(ids)),
        adapters=pools,
        adapter_gb=tuple(_lognormal(rng, adapter_median_gb, 0.5, k) for k in pools),
        data_gb=sizes,
        data_home=rng.integers(0, n_regions, size=n_data),
        model_home=model_home,
    )


def sample_tasks(
    trace: pd.DataFrame,
    cat: Catalogue,
    *,
    n_regions: int,
    hours: float,
    tasks_per_hour: float,
    data_zipf: float,
    data_locality: float,
    process_s_per_gb: float,
    seed: int,
) -> Tasks:
    """Poisson arrivals; each task is a bootstrap row of the trace (restricted to the
    catalogue's checkpoints), a Zipf-popular data object, and an origin that is the object's
    home with probability ``data_locality`` (else uniform)."""
    rng = np.random.default_rng(seed)
    n = int(rng.poisson(tasks_per_hour * hours))
    arrival = np.sort(rng.uniform(0.0, hours * 3600.0, size=n))
    rows = trace[trace["checkpoint_model_version_id"].isin(cat.model_ids)]
    rows = rows.iloc[rng.integers(0, len(rows), size=n)].reset_index(drop=True)
    index = {m: i for i, m in enumerate(cat.model_ids)}
    model = rows["checkpoint_model_version_id"].map(index).to_numpy(dtype=np.int64)
    adapters: list[tuple[int, ...]] = []
    for m, k in zip(model, rows["num_lora"].to_numpy(), strict=True):
        pool = cat.adapters[m]
        k = min(int(k), pool)
        if k == 0:
            adapters.append(())
            continue
        w = 1.0 / np.arange(1, pool + 1)  # Zipf(1) over the pool (assumption)
        adapters.append(tuple(sorted(rng.choice(pool, size=k, replace=False, p=w / w.sum()))))
    pd_ = 1.0 / np.arange(1, cat.data_gb.size + 1) ** data_zipf
    data = rng.choice(cat.data_gb.size, size=n, p=pd_ / pd_.sum())
    local = rng.random(n) < data_locality
    origin = np.where(local, cat.data_home[data], rng.integers(0, n_regions, size=n))
    exec_s = rows["exec_time_seconds"].to_numpy(float) + cat.data_gb[data] * process_s_per_gb
    return Tasks(arrival, origin.astype(np.int64), model, adapters, data, exec_s, rows)
