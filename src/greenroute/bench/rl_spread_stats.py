"""Mean ± 95 % confidence intervals over training seeds, and the headlines they support.

The interval is Student's t: ``mean ± t(0.975, n - 1) * s / sqrt(n)`` with ``s`` the sample
standard deviation (``ddof=1``); it needs at least 2 values. A comparison "A beats B" on a
metric is stated only when the 95 % interval of ``A - B`` lies entirely on the better side of
zero; when it lies on the worse side, B beats A; otherwise the result is *inconclusive*.
When B has no training seed (a classical baseline, deterministic on the fixed held-out
episodes) ``A - B`` is A's values shifted by B's number, so its interval is A's interval minus B.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from greenroute.core.errors import ConfigError

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """Mean and 95 % t-interval half-width of ``n`` values (``std`` with ddof=1)."""

    n: int
    mean: float
    std: float
    half: float

    @property
    def lo(self) -> float:
        return self.mean - self.half

    @property
    def hi(self) -> float:
        return self.mean + self.half

    def shifted(self, by: float) -> Interval:
        return Interval(self.n, self.mean - by, self.std, self.half)

    def fmt(self, digits: int) -> str:
        return f"{self.mean:.{digits}f} ± {self.half:.{digits}f}"


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean ± ``t((1 + confidence) / 2, n - 1) * s / sqrt(n)`` of ``values``."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size < 2:
        raise ConfigError(f"a confidence interval needs at least 2 values, got {v.size}")
    if not np.isfinite(v).all():
        raise ConfigError(f"a confidence interval needs finite values, got {v.tolist()}")
    from greenroute.bench.report_data import mean_ci

    mean, half, n = mean_ci(v, level=confidence)
    return Interval(n, mean, float(v.std(ddof=1)), half)


def paired_interval(a: Sequence[float], b: Sequence[float]) -> Interval:
    """t-interval of the per-seed differences ``a - b`` (same seeds, same order)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ConfigError(f"paired values need the same shape, got {a.shape} and {b.shape}")
    return t_interval(a - b)


def verdict(diff: Interval, lower_is_better: bool) -> str:
    """``"better"``, ``"worse"`` or ``"inconclusive"`` for the interval of ``A - B``."""
    if diff.hi < 0:
        return "better" if lower_is_better else "worse"
    if diff.lo > 0:
        return "worse" if lower_is_better else "better"
    return "inconclusive"


def headline(a: str, b: str, metric: str, diff: Interval, lower_is_better: bool) -> str:
    """One line: what the interval of ``A - B`` on ``metric`` supports."""
    v = verdict(diff, lower_is_better)
    span = f"A - B = {diff.mean:+.3g} [{diff.lo:+.3g}, {diff.hi:+.3g}]"
    if v == "better":
        return f"{a} beats {b} on {metric} ({span}, n = {diff.n})"
    if v == "worse":
        return f"{b} beats {a} on {metric} ({span}, n = {diff.n})"
    return f"{a} vs {b} on {metric}: inconclusive, the interval contains 0 ({span}, n = {diff.n})"
