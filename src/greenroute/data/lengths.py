"""Joint (prompt, output) length models: the embedded histograms of the Azure and vidur traces
(rebuilt by ``python -m greenroute.data.build_workload_profiles``), their sampler and fitter."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np

from greenroute.core.errors import ConfigError, DataFormatError, UnknownNameError

PROFILES_RESOURCE = "workload_profiles.json"


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
