"""Requests, workload specs, synthetic generators and fluid (per-epoch) aggregation.

The synthetic workload is a non-homogeneous Poisson process per (origin, class, model)::

    rate(t) = base_rps[origin, class] x diurnal(local hour-of-week of t) x noise(minute, origin)
              x model_mix[model]

piecewise constant per minute of the scenario (minute 0 starts at ``start_utc``). ``noise`` is
a mean-one lognormal multiplier per (minute, origin), shared by both classes. Both the request
generator (:func:`generate_requests`) and the fluid sampler (:func:`sample_epoch_counts`) draw
the noise and the per-minute Poisson counts from the same random streams, so for epochs that
are whole minutes ``sample_epoch_counts(...) == generate_requests(...).counts_by_epoch(...)``
exactly: the fluid and the discrete engines see the same demand.

Embedded statistics (``embedded/workload_profiles.json``) are rebuilt from the real traces by
``python -m greenroute.data.build_workload_profiles``:

* joint (prompt, output) length models "azure-code", "azure-conv" (Azure LLM inference 2023,
  Splitwise) and "vidur-arxiv" (vidur arXiv summarisation, Llama-2 tokenizer): a sparse 2-D
  histogram on integer bins that are log-spaced and also split at the marginal deciles,
  sampled uniformly over the integers of a bin;
* the hour-of-week load shape "alibaba-genai" from the Alibaba GenAI 2026 SD-LoRA request
  trace (the only multi-week public arrival trace in shared/data; see the build script for the
  phase alignment of its shifted timestamps);
* the per-minute count dispersion of the two Azure traces (rate noise).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError, DataFormatError, UnknownNameError

CLASS_INTERACTIVE = 0
CLASS_DEFERRABLE = 1
CLASS_NAMES = ("interactive", "deferrable")
N_CLASSES = 2

MINUTE_S = 60.0  # the generators' rate is piecewise constant on this grid
HOURS_PER_WEEK = 168  # hour-of-week index 0 = Monday 00:00 local (pandas day_of_week 0)

# Lognormal sigma of the per-minute rate multiplier, fitted on the per-minute request counts of
# azure_llm_2023_conv.csv (Splitwise trace, shared/data/PROVENANCE.md §1) by moment matching:
# sigma^2 = ln(1 + (var - mean) / mean^2). The value is recorded as
# workload_profiles.json["rate_noise"]["azure-conv"]["sigma"] (tests check they agree). The
# code trace is much burstier (sigma 0.860, see RATE_NOISE_SIGMA_BY_TRACE); conv is the default
# because the default interactive class is conversational.
AZURE_CONV_RATE_NOISE_SIGMA = 0.2126
AZURE_CODE_RATE_NOISE_SIGMA = 0.8604
RATE_NOISE_SIGMA_BY_TRACE = {
    "azure-conv": AZURE_CONV_RATE_NOISE_SIGMA,
    "azure-code": AZURE_CODE_RATE_NOISE_SIGMA,
}
DEFAULT_RATE_NOISE_SIGMA = AZURE_CONV_RATE_NOISE_SIGMA

# Default slack of a deferrable request: uniform between 2 h and 12 h after arrival (project
# brief; a batch job submitted during the day is due the same or the next morning).
DEFAULT_DEADLINE_SLACK_S = (2 * 3600.0, 12 * 3600.0)

PROFILES_RESOURCE = "workload_profiles.json"
FLAT_DIURNAL = "flat"


# ---------------------------------------------------------------------------------------------
# Request container
# ---------------------------------------------------------------------------------------------

_FIELDS: tuple[tuple[str, type], ...] = (
    ("arrival_s", np.float64),
    ("origin", np.int32),
    ("cls", np.int8),
    ("model", np.int16),
    ("prompt_tokens", np.int32),
    ("output_tokens", np.int32),
    ("deadline_s", np.float64),
)


@dataclass
class Requests:
    """Struct of arrays, one entry per request, sorted by ``arrival_s`` (non-decreasing)."""

    arrival_s: np.ndarray  # float64 seconds since scenario start
    origin: np.ndarray  # int32 index into the scenario's origins
    cls: np.ndarray  # int8, CLASS_INTERACTIVE or CLASS_DEFERRABLE
    model: np.ndarray  # int16 index into the scenario's model list
    prompt_tokens: np.ndarray  # int32 >= 1
    output_tokens: np.ndarray  # int32 >= 1
    deadline_s: np.ndarray  # float64 absolute deadline; +inf for interactive

    def __post_init__(self) -> None:
        n = None
        for name, dtype in _FIELDS:
            arr = np.ascontiguousarray(getattr(self, name), dtype=dtype)
            if arr.ndim != 1:
                raise ValueError(f"Requests.{name} must be 1-D, got shape {arr.shape}")
            if n is None:
                n = arr.shape[0]
            elif arr.shape[0] != n:
                raise ValueError(f"Requests.{name} has {arr.shape[0]} entries, expected {n}")
            object.__setattr__(self, name, arr)
        if n and np.any(self.arrival_s[1:] < self.arrival_s[:-1]):
            raise ValueError("Requests.arrival_s must be sorted (non-decreasing)")
        if n and (self.prompt_tokens.min() < 1 or self.output_tokens.min() < 1):
            raise ValueError("Requests token counts must be >= 1")

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    @staticmethod
    def empty() -> Requests:
        """A container with no requests."""
        return Requests(*(np.empty(0, dtype=dtype) for _, dtype in _FIELDS))

    def _columns(self) -> tuple[np.ndarray, ...]:
        return tuple(getattr(self, name) for name, _ in _FIELDS)

    def take(self, idx: np.ndarray | Sequence[int] | slice) -> Requests:
        """Subset by integer indices, boolean mask or slice; re-sorted (stable) if needed."""
        cols = [c[idx] for c in self._columns()]
        arrival = cols[0]
        if arrival.size > 1 and np.any(arrival[1:] < arrival[:-1]):
            order = np.argsort(arrival, kind="stable")
            cols = [c[order] for c in cols]
        return Requests(*cols)

    @staticmethod
    def concat(parts: Sequence[Requests]) -> Requests:
        """Concatenate and re-sort by arrival (stable: ties keep the order of ``parts``)."""
        parts = list(parts)
        if not parts:
            return Requests.empty()
        cols = [np.concatenate(c) for c in zip(*(p._columns() for p in parts), strict=True)]
        order = np.argsort(cols[0], kind="stable")
        return Requests(*(c[order] for c in cols))

    def to_frame(self) -> pd.DataFrame:
        """One row per request; columns named like the fields."""
        return pd.DataFrame({name: getattr(self, name) for name, _ in _FIELDS})

    def counts_by_epoch(
        self, epoch_s: float, n_epochs: int, n_origins: int, n_models: int
    ) -> np.ndarray:
        """Arrivals per ``[epoch, origin, class, model]`` (int64).

        Epoch ``e`` covers ``[e * epoch_s, (e + 1) * epoch_s)``; requests before 0 or at/after
        ``n_epochs * epoch_s`` are not counted.
        """
        if epoch_s <= 0 or n_epochs < 0:
            raise ValueError("epoch_s must be > 0 and n_epochs >= 0")
        shape = (n_epochs, n_origins, N_CLASSES, n_models)
        if len(self) and (
            self.origin.max() >= n_origins
            or self.model.max() >= n_models
            or self.origin.min() < 0
            or self.model.min() < 0
        ):
            raise ValueError("origin or model index out of range for counts_by_epoch")
        epoch = _epoch_index(self.arrival_s, float(epoch_s))
        keep = (self.arrival_s >= 0) & (epoch < n_epochs)
        flat = ((epoch * n_origins + self.origin) * N_CLASSES + self.cls) * n_models + self.model
        counts = np.bincount(flat[keep], minlength=math.prod(shape))
        return counts.astype(np.int64).reshape(shape)


def _epoch_index(t_s: np.ndarray, epoch_s: float) -> np.ndarray:
    """``floor(t / epoch_s)`` made exact against ``k * epoch_s`` boundaries (int64)."""
    e = np.floor(t_s / epoch_s).astype(np.int64)
    e -= e * epoch_s > t_s
    e += (e + 1) * epoch_s <= t_s
    return e


# ---------------------------------------------------------------------------------------------
# Embedded profiles
# ---------------------------------------------------------------------------------------------


@functools.cache
def load_workload_profiles() -> dict[str, Any]:
    """The embedded ``workload_profiles.json`` (length models, diurnal shapes, rate noise)."""
    res = resources.files("greenroute.data").joinpath("embedded", PROFILES_RESOURCE)
    try:
        return json.loads(res.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataFormatError(str(res), f"cannot read embedded workload profiles ({err})") from None


# ---------------------------------------------------------------------------------------------
# Length models
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LengthModel:
    """Joint (prompt, output) token-length distribution: a sparse 2-D histogram.

    Prompt bin ``i`` holds the integers ``prompt_edges[i] .. prompt_edges[i + 1] - 1`` (same
    for output). Cell ``c`` has probability ``cell_weight[c]`` and covers prompt bin
    ``cell_prompt_bin[c]`` x output bin ``cell_output_bin[c]``; within a cell both lengths are
    uniform over the bin's integers and independent, so the moments below are exact.
    """

    name: str
    prompt_edges: np.ndarray = field(repr=False)  # int64, strictly increasing, first >= 1
    output_edges: np.ndarray = field(repr=False)  # int64
    cell_prompt_bin: np.ndarray = field(repr=False)  # int32
    cell_output_bin: np.ndarray = field(repr=False)  # int32
    cell_weight: np.ndarray = field(repr=False)  # float64, sums to 1
    source: str = ""
    _alias_prob: np.ndarray = field(init=False, repr=False)
    _alias_cell: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        pe = np.asarray(self.prompt_edges, dtype=np.int64)
        oe = np.asarray(self.output_edges, dtype=np.int64)
        pi = np.asarray(self.cell_prompt_bin, dtype=np.int32)
        oi = np.asarray(self.cell_output_bin, dtype=np.int32)
        w = np.asarray(self.cell_weight, dtype=np.float64)
        if pe.size < 2 or oe.size < 2 or pe[0] < 1 or oe[0] < 1:
            raise ConfigError(f"length model {self.name!r}: edges must start at >= 1")
        if np.any(np.diff(pe) <= 0) or np.any(np.diff(oe) <= 0):
            raise ConfigError(f"length model {self.name!r}: edges must increase")
        if not (pi.shape == oi.shape == w.shape) or w.size == 0:
            raise ConfigError(f"length model {self.name!r}: cell arrays differ in length")
        if pi.min() < 0 or pi.max() >= pe.size - 1 or oi.min() < 0 or oi.max() >= oe.size - 1:
            raise ConfigError(f"length model {self.name!r}: cell bin index out of range")
        if np.any(w < 0) or not np.isfinite(w).all() or w.sum() <= 0:
            raise ConfigError(f"length model {self.name!r}: weights must be >= 0, sum > 0")
        w = w / w.sum()
        alias_prob, alias_cell = _alias_table(w)
        for name, arr in (
            ("prompt_edges", pe),
            ("output_edges", oe),
            ("cell_prompt_bin", pi),
            ("cell_output_bin", oi),
            ("cell_weight", w),
            ("_alias_prob", alias_prob),
            ("_alias_cell", alias_cell),
        ):
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)

    @property
    def n_cells(self) -> int:
        return int(self.cell_weight.size)

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``n`` (prompt_tokens, output_tokens) pairs as int32 arrays (all >= 1)."""
        # Walker/Vose alias sampling of the cell: O(1) per draw, one uniform.
        u = rng.random(n) * self.n_cells
        cell = u.astype(np.int64)
        np.minimum(cell, self.n_cells - 1, out=cell)
        cell = np.where(u - cell < self._alias_prob[cell], cell, self._alias_cell[cell])
        pi = self.cell_prompt_bin[cell]
        oi = self.cell_output_bin[cell]
        p_lo = self.prompt_edges[pi]
        o_lo = self.output_edges[oi]
        prompt = p_lo + (rng.random(n) * (self.prompt_edges[pi + 1] - p_lo)).astype(np.int64)
        output = o_lo + (rng.random(n) * (self.output_edges[oi + 1] - o_lo)).astype(np.int64)
        return prompt.astype(np.int32), output.astype(np.int32)

    def _marginal(self, which: str) -> tuple[np.ndarray, np.ndarray]:
        """(edges, probability per bin) of one marginal."""
        edges = self.prompt_edges if which == "prompt" else self.output_edges
        idx = self.cell_prompt_bin if which == "prompt" else self.cell_output_bin
        return edges, np.bincount(idx, weights=self.cell_weight, minlength=edges.size - 1)

    @property
    def mean_prompt_tokens(self) -> float:
        """Exact mean prompt length of the model (not of a sample)."""
        edges, p = self._marginal("prompt")
        return float(np.sum(p * (edges[:-1] + edges[1:] - 1) / 2.0))

    @property
    def mean_output_tokens(self) -> float:
        """Exact mean output length of the model (not of a sample)."""
        edges, p = self._marginal("output")
        return float(np.sum(p * (edges[:-1] + edges[1:] - 1) / 2.0))

    def median_tokens(self, which: str) -> float:
        """Exact median (lower median of the integer distribution) of "prompt" or "output"."""
        edges, p = self._marginal(which)
        cum = np.cumsum(p)
        k = int(np.searchsorted(cum, 0.5 - 1e-12, side="left"))
        before = cum[k - 1] if k else 0.0
        width = edges[k + 1] - edges[k]
        # the bin's integers each carry p[k] / width; the median is the first reaching 0.5
        step = max(0, math.ceil((0.5 - before) / p[k] * width - 1e-9) - 1)
        return float(edges[k] + min(step, width - 1))

    def log_moments(self) -> dict[str, float]:
        """Exact mean/std of ln(prompt), ln(output) and their correlation."""
        top = int(max(self.prompt_edges[-1], self.output_edges[-1]))
        logs = np.log(np.arange(1, top, dtype=np.float64))
        cum1 = np.concatenate([[0.0], np.cumsum(logs)])  # cum1[x] = sum of ln k for k = 1..x
        cum2 = np.concatenate([[0.0], np.cumsum(logs**2)])

        def bin_means(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            lo, hi = edges[:-1] - 1, edges[1:] - 1  # the bin's integers are lo + 1 .. hi
            n = (hi - lo).astype(np.float64)
            return (cum1[hi] - cum1[lo]) / n, (cum2[hi] - cum2[lo]) / n

        mp1, mp2 = bin_means(self.prompt_edges)
        mo1, mo2 = bin_means(self.output_edges)
        w = self.cell_weight
        a1, a2 = mp1[self.cell_prompt_bin], mp2[self.cell_prompt_bin]
        b1, b2 = mo1[self.cell_output_bin], mo2[self.cell_output_bin]
        ea, eb = float(w @ a1), float(w @ b1)
        va, vb = float(w @ a2) - ea**2, float(w @ b2) - eb**2
        cov = float(w @ (a1 * b1)) - ea * eb
        return {
            "mean_log_prompt": ea,
            "mean_log_output": eb,
            "std_log_prompt": math.sqrt(max(va, 0.0)),
            "std_log_output": math.sqrt(max(vb, 0.0)),
            "log_corr": cov / math.sqrt(va * vb) if va > 0 and vb > 0 else 0.0,
        }

    def exact_stats(self) -> dict[str, float]:
        """Means, medians and log-correlation of the model, computed exactly."""
        return {
            "mean_prompt_tokens": self.mean_prompt_tokens,
            "median_prompt_tokens": self.median_tokens("prompt"),
            "mean_output_tokens": self.mean_output_tokens,
            "median_output_tokens": self.median_tokens("output"),
            "log_corr": self.log_moments()["log_corr"],
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; ``cell_count`` keeps integer counts when the weights came from data."""
        return {
            "source": self.source,
            "prompt_edges": self.prompt_edges.tolist(),
            "output_edges": self.output_edges.tolist(),
            "cell_prompt_bin": self.cell_prompt_bin.tolist(),
            "cell_output_bin": self.cell_output_bin.tolist(),
            "cell_weight": self.cell_weight.tolist(),
        }

    @staticmethod
    def from_dict(name: str, data: dict[str, Any]) -> LengthModel:
        weights = data.get("cell_count", data.get("cell_weight"))
        return LengthModel(
            name=name,
            prompt_edges=np.asarray(data["prompt_edges"]),
            output_edges=np.asarray(data["output_edges"]),
            cell_prompt_bin=np.asarray(data["cell_prompt_bin"]),
            cell_output_bin=np.asarray(data["cell_output_bin"]),
            cell_weight=np.asarray(weights, dtype=np.float64),
            source=str(data.get("source", "")),
        )


def _alias_table(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vose's alias table for sampling index i with probability ``weights[i]`` (sum 1)."""
    n = weights.size
    scaled = weights * n
    prob = np.ones(n)
    alias = np.arange(n, dtype=np.int64)
    small = [i for i in range(n) if scaled[i] < 1.0]
    large = [i for i in range(n) if scaled[i] >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        prob[s] = scaled[s]
        alias[s] = g
        scaled[g] -= 1.0 - scaled[s]
        (small if scaled[g] < 1.0 else large).append(g)
    return prob, alias  # leftovers keep probability 1 (round-off only)


# Binning of fit_length_model: 12 log-spaced bins per decade (about 21 % wide), plus edges at
# each marginal decile q and q + 1 so the deciles (median included) are reproduced exactly.
LENGTH_BINS_PER_DECADE = 12
LENGTH_QUANTILE_STEP = 0.1


def _length_edges(x: np.ndarray, bins_per_decade: int, quantile_step: float) -> np.ndarray:
    top = int(x.max()) + 1
    n = math.ceil(math.log10(top) * bins_per_decade) + 1
    log_edges = np.round(np.logspace(0.0, math.log10(top), n)).astype(np.int64)
    qs = np.arange(1, round(1.0 / quantile_step)) * quantile_step
    q_edges = np.quantile(x, qs, method="lower").astype(np.int64)
    edges = np.unique(np.concatenate([[1, top], log_edges, q_edges, q_edges + 1]))
    return edges[(edges >= 1) & (edges <= top)]


def fit_length_model(
    name: str,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    *,
    bins_per_decade: int = LENGTH_BINS_PER_DECADE,
    quantile_step: float = LENGTH_QUANTILE_STEP,
    source: str = "",
) -> tuple[LengthModel, np.ndarray]:
    """Fit the sparse 2-D histogram of (prompt, output) lengths; returns (model, cell counts).

    Lengths below 1 are not representable (``Requests`` needs >= 1): they raise ConfigError.
    """
    p = np.asarray(prompt_tokens, dtype=np.int64)
    o = np.asarray(output_tokens, dtype=np.int64)
    if p.shape != o.shape or p.size == 0:
        raise ConfigError("fit_length_model needs equally long, non-empty length arrays")
    if p.min() < 1 or o.min() < 1:
        raise ConfigError("fit_length_model: token counts must be >= 1")
    pe = _length_edges(p, bins_per_decade, quantile_step)
    oe = _length_edges(o, bins_per_decade, quantile_step)
    pi = np.searchsorted(pe, p, side="right") - 1
    oi = np.searchsorted(oe, o, side="right") - 1
    flat = pi * (oe.size - 1) + oi
    cells, counts = np.unique(flat, return_counts=True)
    cp, co = np.divmod(cells, oe.size - 1)
    model = LengthModel(name, pe, oe, cp, co, counts.astype(np.float64), source=source)
    return model, counts.astype(np.int64)


def length_stats(prompt_tokens: np.ndarray, output_tokens: np.ndarray) -> dict[str, float]:
    """Mean, median and log-length correlation of a (trace or sample) length array pair."""
    p = np.asarray(prompt_tokens, dtype=np.float64)
    o = np.asarray(output_tokens, dtype=np.float64)
    return {
        "mean_prompt_tokens": float(p.mean()),
        "median_prompt_tokens": float(np.median(p)),
        "mean_output_tokens": float(o.mean()),
        "median_output_tokens": float(np.median(o)),
        "log_corr": float(np.corrcoef(np.log(p), np.log(o))[0, 1]),
    }


@functools.cache
def get_length_model(name: str) -> LengthModel:
    """An embedded length model: "azure-code", "azure-conv" or "vidur-arxiv"."""
    models = load_workload_profiles()["length_models"]
    if name not in models:
        raise UnknownNameError("length model", name, models)
    return LengthModel.from_dict(name, models[name])


def length_model_names() -> tuple[str, ...]:
    return tuple(sorted(load_workload_profiles()["length_models"]))


# ---------------------------------------------------------------------------------------------
# Diurnal shapes
# ---------------------------------------------------------------------------------------------


def diurnal_names() -> tuple[str, ...]:
    return (FLAT_DIURNAL, *sorted(load_workload_profiles()["diurnal"]))


@functools.cache
def _diurnal_cached(name: str) -> np.ndarray:
    if name == FLAT_DIURNAL:
        out = np.ones(HOURS_PER_WEEK)
    else:
        shapes = load_workload_profiles()["diurnal"]
        if name not in shapes:
            raise UnknownNameError("diurnal profile", name, (FLAT_DIURNAL, *shapes))
        out = np.asarray(shapes[name]["multipliers"], dtype=np.float64)
        if out.shape != (HOURS_PER_WEEK,):
            raise DataFormatError(PROFILES_RESOURCE, f"diurnal {name!r} needs 168 values")
        out = out / out.mean()
    out.flags.writeable = False
    return out


def diurnal_profile(name: str) -> np.ndarray:
    """168 multipliers of mean 1 by local hour-of-week (0 = Monday 00:00-01:00)."""
    return _diurnal_cached(name)


# ---------------------------------------------------------------------------------------------
# Workload spec
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadSpec:
    """Synthetic workload: per-origin arrival rates, length models, model mix, load shape.

    ``origin_timezones`` may be left empty (``()``) when every origin is a catalog region key;
    the time zones are then taken from ``greenroute.catalog.REGIONS``.
    """

    origins: tuple[str, ...]
    origin_timezones: tuple[str, ...]  # IANA zone per origin (diurnal shape in local time)
    interactive_rps: tuple[float, ...]  # day-average (week-average) interactive req/s
    deferrable_rps: tuple[float, ...]  # week-average deferrable req/s
    interactive_lengths: str = "azure-conv"
    deferrable_lengths: str = "vidur-arxiv"
    models: tuple[str, ...] = ("llama2-70b",)
    model_mix: tuple[float, ...] = (1.0,)  # P(model), same for both classes
    diurnal: str = "alibaba-genai"  # embedded hour-of-week shape, or "flat"
    rate_noise_sigma: float = DEFAULT_RATE_NOISE_SIGMA  # lognormal sigma per (minute, origin)
    deadline_slack_s: tuple[float, float] = DEFAULT_DEADLINE_SLACK_S
    # share of the rate that is flat over the week: multiplier = s + (1 - s) x diurnal. 0 keeps
    # the measured shape (which has idle night hours); raise it to model a round-the-clock floor.
    diurnal_flat_share: float = 0.0

    def __post_init__(self) -> None:
        def tup(name: str, cast: type) -> tuple:
            value = getattr(self, name)
            if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
                raise ConfigError(f"WorkloadSpec.{name} must be a sequence, got {value!r}")
            out = tuple(cast(v) for v in value)
            object.__setattr__(self, name, out)
            return out

        origins = tup("origins", str)
        n = len(origins)
        if n == 0:
            raise ConfigError("WorkloadSpec needs at least one origin")
        zones = tup("origin_timezones", str)
        if not zones:
            from greenroute.catalog import REGIONS

            unknown = [o for o in origins if o not in REGIONS]
            if unknown:
                raise UnknownNameError("region (for an origin time zone)", unknown[0], REGIONS)
            zones = tuple(REGIONS[o].timezone for o in origins)
            object.__setattr__(self, "origin_timezones", zones)
        for z in zones:
            try:
                ZoneInfo(z)
            except (ZoneInfoNotFoundError, ValueError):
                raise ConfigError(f"unknown IANA time zone {z!r} in WorkloadSpec") from None
        for name in ("origin_timezones", "interactive_rps", "deferrable_rps"):
            values = tup(name, str if name == "origin_timezones" else float)
            if len(values) != n:
                raise ConfigError(f"WorkloadSpec.{name} has {len(values)} entries, expected {n}")
        for name in ("interactive_rps", "deferrable_rps"):
            values = getattr(self, name)
            if not all(math.isfinite(v) and v >= 0 for v in values):
                raise ConfigError(f"WorkloadSpec.{name} must be finite and >= 0: {values}")
        models = tup("models", str)
        mix = tup("model_mix", float)
        if not models or len(mix) != len(models):
            raise ConfigError("WorkloadSpec.model_mix needs one probability per model")
        if any(not math.isfinite(m) or m < 0 for m in mix) or abs(sum(mix) - 1.0) > 1e-6:
            raise ConfigError(f"WorkloadSpec.model_mix must be >= 0 and sum to 1: {mix}")
        from greenroute.catalog import LLMS

        for m in models:
            if m not in LLMS:
                raise UnknownNameError("LLM", m, LLMS)
        get_length_model(self.interactive_lengths)
        get_length_model(self.deferrable_lengths)
        diurnal_profile(self.diurnal)
        sigma = float(self.rate_noise_sigma)
        if not math.isfinite(sigma) or sigma < 0:
            raise ConfigError(f"WorkloadSpec.rate_noise_sigma must be >= 0: {sigma}")
        object.__setattr__(self, "rate_noise_sigma", sigma)
        slack = tup("deadline_slack_s", float)
        if len(slack) != 2 or not (0 <= slack[0] <= slack[1] < math.inf):
            raise ConfigError(f"WorkloadSpec.deadline_slack_s must be (lo, hi), 0<=lo<=hi: {slack}")
        share = float(self.diurnal_flat_share)
        if not 0.0 <= share <= 1.0:
            raise ConfigError(f"WorkloadSpec.diurnal_flat_share must be in [0, 1]: {share}")
        object.__setattr__(self, "diurnal_flat_share", share)

    @property
    def n_origins(self) -> int:
        return len(self.origins)

    @property
    def n_models(self) -> int:
        return len(self.models)

    def base_rps(self) -> np.ndarray:
        """``[n_origins, 2]`` week-average rate per origin and class (req/s)."""
        return np.column_stack([self.interactive_rps, self.deferrable_rps]).astype(np.float64)


# ---------------------------------------------------------------------------------------------
# Rate function and random streams
# ---------------------------------------------------------------------------------------------


def as_utc_timestamp(start_utc: datetime | pd.Timestamp | np.datetime64 | str) -> pd.Timestamp:
    """A tz-aware UTC Timestamp; naive input is taken as UTC."""
    try:
        ts = pd.Timestamp(start_utc)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"cannot read start time {start_utc!r}: {err}") from None
    if ts is pd.NaT:
        raise ConfigError(f"start time {start_utc!r} is not a time")
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def _minute_shape(spec: WorkloadSpec, start: pd.Timestamp, n_minutes: int) -> np.ndarray:
    """Diurnal multiplier ``[n_minutes, n_origins]`` at each minute start, in local time."""
    profile = diurnal_profile(spec.diurnal)
    share = spec.diurnal_flat_share
    offsets = pd.to_timedelta(np.arange(n_minutes, dtype=np.int64) * int(MINUTE_S), unit="s")
    utc = pd.DatetimeIndex(start + offsets)
    out = np.empty((n_minutes, spec.n_origins))
    by_zone: dict[str, np.ndarray] = {}
    for j, zone in enumerate(spec.origin_timezones):
        if zone not in by_zone:
            local = utc.tz_convert(zone)
            how = np.asarray(local.day_of_week, dtype=np.int64) * 24 + np.asarray(local.hour)
            by_zone[zone] = share + (1.0 - share) * profile[how]
        out[:, j] = by_zone[zone]
    return out


def _streams(seed: int) -> dict[str, np.random.Generator]:
    """Independent, named random streams derived from ``seed``."""
    names = ("noise", "counts", "times", "len_interactive", "len_deferrable", "deadline")
    children = np.random.SeedSequence(int(seed)).spawn(len(names))
    return {n: np.random.default_rng(c) for n, c in zip(names, children, strict=True)}


def _minute_noise(spec: WorkloadSpec, rng: np.random.Generator, n_minutes: int) -> np.ndarray:
    """Mean-one lognormal multiplier ``[n_minutes, n_origins]``.

    Drawn row by row in C order, so the first k minutes are the same for any horizon.
    """
    sigma = spec.rate_noise_sigma
    if sigma == 0.0:
        return np.ones((n_minutes, spec.n_origins))
    z = rng.standard_normal((n_minutes, spec.n_origins))
    return np.exp(sigma * z - 0.5 * sigma * sigma)


def _segments(
    horizon_s: float, epoch_bounds_s: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pieces of ``[0, horizon)`` cut at every minute (and epoch) boundary.

    Returns (start_s, length_s, minute index). With whole-minute epochs the pieces are the
    minutes themselves.
    """
    n_min = math.ceil(horizon_s / MINUTE_S - 1e-12) if horizon_s > 0 else 0
    bounds = np.arange(n_min + 1, dtype=np.float64) * MINUTE_S
    bounds[-1] = horizon_s
    if epoch_bounds_s is not None:
        bounds = np.union1d(bounds, epoch_bounds_s)
    bounds = bounds[bounds <= horizon_s]
    start = bounds[:-1]
    length = np.diff(bounds)
    minute = np.minimum(_epoch_index(start, MINUTE_S), max(n_min - 1, 0))
    return start, length, minute


def _check_horizon(duration_s: float) -> float:
    d = float(duration_s)
    if not math.isfinite(d) or d < 0:
        raise ConfigError(f"duration must be finite and >= 0 seconds: {duration_s}")
    return d


def _segment_lambda(
    spec: WorkloadSpec,
    start: pd.Timestamp,
    seg_len: np.ndarray,
    seg_minute: np.ndarray,
    n_minutes: int,
    noise: np.ndarray | None,
) -> np.ndarray:
    """Expected arrivals ``[n_segments, n_origins, 2, n_models]`` per piece."""
    shape = _minute_shape(spec, start, n_minutes)  # [min, origin]
    if noise is not None:
        shape = shape * noise
    per_seg = shape[seg_minute] * seg_len[:, None]  # [seg, origin]
    lam = per_seg[:, :, None] * spec.base_rps()[None, :, :]  # [seg, origin, class]
    return lam[..., None] * np.asarray(spec.model_mix)[None, None, None, :]


# ---------------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------------


def generate_requests(
    spec: WorkloadSpec,
    start_utc: datetime | pd.Timestamp | np.datetime64 | str,
    duration_s: float,
    seed: int,
) -> Requests:
    """Synthetic requests over ``[0, duration_s)`` seconds after ``start_utc``.

    Arrivals are a non-homogeneous Poisson process per (origin, class, model) whose rate is
    constant within each minute (see the module docstring); times are uniform within a minute.
    Lengths come from the class's length model, deadlines of deferrable requests are arrival
    plus a uniform slack, interactive deadlines are +inf. Deterministic in the arguments.
    """
    horizon = _check_horizon(duration_s)
    start = as_utc_timestamp(start_utc)
    rng = _streams(seed)
    seg_start, seg_len, seg_minute = _segments(horizon)
    n_minutes = seg_start.size
    if n_minutes == 0:
        return Requests.empty()
    noise = _minute_noise(spec, rng["noise"], n_minutes)
    lam = _segment_lambda(spec, start, seg_len, seg_minute, n_minutes, noise)
    counts = rng["counts"].poisson(lam)

    flat = counts.ravel()
    total = int(flat.sum())
    if total == 0:
        return Requests.empty()
    nonzero = np.flatnonzero(flat)
    reps = flat[nonzero]
    seg_c, origin_c, cls_c, model_c = np.unravel_index(nonzero, counts.shape)
    seg = np.repeat(seg_c, reps)
    arrival = seg_start[seg] + rng["times"].random(total) * seg_len[seg]
    seg_end_below = np.nextafter(seg_start + seg_len, -np.inf)
    np.minimum(arrival, seg_end_below[seg], out=arrival)
    # deterministic for equal inputs; exact ties have probability ~0
    order = np.argsort(arrival)
    arrival = arrival[order]
    origin = np.repeat(origin_c.astype(np.int32), reps)[order]
    cls = np.repeat(cls_c.astype(np.int8), reps)[order]
    model = np.repeat(model_c.astype(np.int16), reps)[order]

    prompt = np.empty(total, dtype=np.int32)
    output = np.empty(total, dtype=np.int32)
    deadline = np.full(total, np.inf)
    for c, lengths, stream in (
        (CLASS_INTERACTIVE, spec.interactive_lengths, "len_interactive"),
        (CLASS_DEFERRABLE, spec.deferrable_lengths, "len_deferrable"),
    ):
        idx = np.flatnonzero(cls == c)
        if idx.size:
            prompt[idx], output[idx] = get_length_model(lengths).sample(idx.size, rng[stream])
    idx = np.flatnonzero(cls == CLASS_DEFERRABLE)
    lo, hi = spec.deadline_slack_s
    deadline[idx] = arrival[idx] + rng["deadline"].uniform(lo, hi, idx.size)
    return Requests(arrival, origin, cls, model, prompt, output, deadline)


def _epoch_bounds(epoch_s: float, n_epochs: int) -> np.ndarray:
    if not (math.isfinite(epoch_s) and epoch_s > 0) or n_epochs < 0:
        raise ConfigError(f"epoch_s must be > 0 and n_epochs >= 0 (got {epoch_s}, {n_epochs})")
    return np.arange(n_epochs + 1, dtype=np.float64) * float(epoch_s)


def _sum_by_epoch(per_seg: np.ndarray, seg_start: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Sum piecewise values into epochs (every epoch starts a piece, so reduceat is exact)."""
    first = np.searchsorted(seg_start, bounds[:-1], side="left")
    return np.add.reduceat(per_seg, first, axis=0)


def expected_rate_rps(
    spec: WorkloadSpec,
    start_utc: datetime | pd.Timestamp | np.datetime64 | str,
    epoch_s: float,
    n_epochs: int,
) -> np.ndarray:
    """Mean arrival rate ``[n_epochs, n_origins, 2]`` (req/s) per epoch, without the noise."""
    bounds = _epoch_bounds(epoch_s, n_epochs)
    if n_epochs == 0:
        return np.zeros((0, spec.n_origins, N_CLASSES))
    start = as_utc_timestamp(start_utc)
    seg_start, seg_len, seg_minute = _segments(bounds[-1], bounds)
    n_minutes = int(seg_minute.max()) + 1
    lam = _segment_lambda(spec, start, seg_len, seg_minute, n_minutes, None).sum(axis=-1)
    return _sum_by_epoch(lam, seg_start, bounds) / float(epoch_s)


def sample_epoch_counts(
    spec: WorkloadSpec,
    start_utc: datetime | pd.Timestamp | np.datetime64 | str,
    epoch_s: float,
    n_epochs: int,
    seed: int,
) -> np.ndarray:
    """Poisson arrival counts ``[n_epochs, n_origins, 2, n_models]`` (int64), no requests made.

    Same rate function, noise and random streams as :func:`generate_requests`: when
    ``epoch_s`` is a whole number of minutes the result equals
    ``generate_requests(spec, start_utc, n_epochs * epoch_s, seed).counts_by_epoch(...)``.
    """
    bounds = _epoch_bounds(epoch_s, n_epochs)
    if n_epochs == 0:
        return np.zeros((0, spec.n_origins, N_CLASSES, spec.n_models), dtype=np.int64)
    start = as_utc_timestamp(start_utc)
    rng = _streams(seed)
    seg_start, seg_len, seg_minute = _segments(bounds[-1], bounds)
    n_minutes = int(seg_minute.max()) + 1
    noise = _minute_noise(spec, rng["noise"], n_minutes)
    lam = _segment_lambda(spec, start, seg_len, seg_minute, n_minutes, noise)
    counts = rng["counts"].poisson(lam)
    return _sum_by_epoch(counts, seg_start, bounds).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Trace replay
# ---------------------------------------------------------------------------------------------


def _trace_columns(df: pd.DataFrame, first_n: int | None) -> tuple[np.ndarray, ...]:
    missing = [c for c in ("arrival_s", "prompt_tokens", "output_tokens") if c not in df.columns]
    if missing:
        raise ConfigError(f"trace frame lacks column(s) {', '.join(missing)}")
    if first_n is not None:
        if first_n < 1:
            raise ConfigError(f"first_n must be >= 1, got {first_n}")
        df = df.iloc[:first_n]
    arrival = df["arrival_s"].to_numpy(dtype=np.float64)
    prompt = df["prompt_tokens"].to_numpy(dtype=np.int64)
    output = df["output_tokens"].to_numpy(dtype=np.int64)
    if arrival.size and (np.any(np.diff(arrival) < 0) or not np.isfinite(arrival).all()):
        raise ConfigError("trace arrival_s must be finite and sorted")
    if arrival.size and (prompt.min() < 1 or output.min() < 1):
        raise ConfigError("trace token counts must be >= 1 to replay")
    return arrival, prompt, output


def _replay(
    arrival: np.ndarray,
    prompt: np.ndarray,
    output: np.ndarray,
    origin: int,
    cls: int,
    model: int,
    deadline_slack_s: float | None,
) -> Requests:
    n = arrival.size
    if cls not in (CLASS_INTERACTIVE, CLASS_DEFERRABLE):
        raise ConfigError(f"cls must be {CLASS_INTERACTIVE} or {CLASS_DEFERRABLE}, got {cls}")
    if cls == CLASS_DEFERRABLE:
        if deadline_slack_s is None or not deadline_slack_s > 0:
            raise ConfigError("replaying a trace as deferrable needs deadline_slack_s > 0")
        deadline = arrival + float(deadline_slack_s)
    else:
        deadline = np.full(n, np.inf)
    return Requests(
        arrival,
        np.full(n, origin, dtype=np.int32),
        np.full(n, cls, dtype=np.int8),
        np.full(n, model, dtype=np.int16),
        prompt,
        output,
        deadline,
    )


def requests_from_trace(
    df: pd.DataFrame,
    *,
    origin: int = 0,
    cls: int = CLASS_INTERACTIVE,
    model: int = 0,
    time_scale: float = 1.0,
    first_n: int | None = None,
    start_offset_s: float = 0.0,
    deadline_slack_s: float | None = None,
) -> Requests:
    """Replay a loaded trace (columns ``arrival_s, prompt_tokens, output_tokens``).

    Arrival ``i`` becomes ``start_offset_s + (arrival_s[i] - arrival_s[0]) * time_scale``
    (``time_scale < 1`` compresses). ``first_n`` keeps the first rows only. Deferrable replays
    need ``deadline_slack_s`` (deadline = arrival + slack).
    """
    if not (math.isfinite(time_scale) and time_scale > 0):
        raise ConfigError(f"time_scale must be > 0, got {time_scale}")
    arrival, prompt, output = _trace_columns(df, first_n)
    if arrival.size:
        arrival = float(start_offset_s) + (arrival - arrival[0]) * float(time_scale)
    return _replay(arrival, prompt, output, origin, cls, model, deadline_slack_s)


def compress_to_window(
    df: pd.DataFrame,
    first_n: int,
    window_s: float,
    *,
    origin: int = 0,
    cls: int = CLASS_INTERACTIVE,
    model: int = 0,
    start_offset_s: float = 0.0,
    deadline_slack_s: float | None = None,
) -> Requests:
    """The first ``first_n`` trace requests, rescaled so they span exactly ``window_s`` seconds.

    Seed 002 (RL load balancing, §VI.B) replays the first 5,000 requests of the Azure code
    trace compressed into a 1,000 s window: ``compress_to_window(df, 5000, 1000.0)``.
    """
    if not (math.isfinite(window_s) and window_s > 0):
        raise ConfigError(f"window_s must be > 0, got {window_s}")
    arrival, prompt, output = _trace_columns(df, first_n)
    if arrival.size < 2 or arrival[-1] == arrival[0]:
        raise ConfigError("compress_to_window needs at least two distinct arrival times")
    span = arrival[-1] - arrival[0]
    # (x / span) * window is exactly window for the last row (x == span)
    arrival = float(start_offset_s) + ((arrival - arrival[0]) / span) * float(window_s)
    return _replay(arrival, prompt, output, origin, cls, model, deadline_slack_s)
