"""Energy ledgers: busy time of requests binned into epochs, and facility accounting."""

from __future__ import annotations

import numpy as np


def bin_overlap(
    start: np.ndarray,
    end: np.ndarray,
    weight: np.ndarray,
    group: np.ndarray,
    n_groups: int,
    bin_s: float,
    n_bins: int,
) -> np.ndarray:
    """Sum over intervals of ``weight x |[start, end) ∩ bin|`` per (group, bin).

    Exact and O(N log N): with F_g(x) = sum_i w_i * clip(x - s_i, 0, e_i - s_i), the amount in
    bin b is F(edge_{b+1}) - F(edge_b); F is evaluated at all edges by sorted cumulative sums.
    """
    out = np.zeros((n_groups, n_bins))
    if start.size == 0:
        return out
    edges = np.arange(n_bins + 1, dtype=float) * bin_s
    for g in range(n_groups):
        sel = group == g
        if not sel.any():
            continue
        s, e, w = start[sel], end[sel], weight[sel]
        out[g] = np.diff(_ramp(s, w, edges) - _ramp(e, w, edges))
    return out


def _ramp(points: np.ndarray, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """sum_i w_i * max(0, x - p_i) evaluated at each x."""
    order = np.argsort(points, kind="stable")
    p = points[order]
    ww = w[order]
    cw = np.concatenate([[0.0], np.cumsum(ww)])
    cwp = np.concatenate([[0.0], np.cumsum(ww * p)])
    k = np.searchsorted(p, x, side="right")
    return x * cw[k] - cwp[k]
