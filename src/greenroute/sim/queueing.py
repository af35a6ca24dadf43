"""Closed-form queueing: Erlang B/C and the Allen–Cunneen M/G/c waiting-time approximation."""

from __future__ import annotations

import numpy as np


def erlang_c(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Probability of waiting in M/M/c with ``c`` servers and offered load ``a = λ/μ``.

    Uses the stable Erlang-B recursion B(k) = a B(k-1) / (k + a B(k-1)), then
    C = c B / (c - a (1 - B)). Returns 1 where ``a >= c`` (unstable queue).
    """
    c = np.asarray(c, dtype=np.int64)
    a = np.asarray(a, dtype=float)
    c, a = np.broadcast_arrays(c, a)
    b = np.ones(a.shape)
    cmax = int(c.max()) if c.size else 0
    for k in range(1, cmax + 1):
        step = k <= c
        b = np.where(step, a * b / (k + a * b), b)
    with np.errstate(divide="ignore", invalid="ignore"):
        pc = c * b / (c - a * (1.0 - b))
    return np.where((a < c) & (c > 0), np.clip(pc, 0.0, 1.0), 1.0)


def mgc_wait_s(
    lam_per_s: np.ndarray, mean_s: np.ndarray, scv: np.ndarray, c: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean wait in queue of M/G/c by Allen–Cunneen: W = C(c, a)/(cμ - λ) x (1 + cs²)/2.

    Returns (mean wait, probability of waiting, mean wait given waiting). Infinite for ρ >= 1.
    Exact for M/M/c (cs² = 1).
    """
    lam = np.asarray(lam_per_s, dtype=float)
    es = np.asarray(mean_s, dtype=float)
    a = lam * es
    pw = erlang_c(c, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = np.where(es > 0, 1.0 / es, np.inf)
        denom = c * mu - lam
        cond = np.where(denom > 0, 1.0 / denom, np.inf) * (1.0 + scv) / 2.0
    wait = np.where(lam > 0, pw * cond, 0.0)
    return wait, np.where(lam > 0, pw, 0.0), np.where(lam > 0, cond, 0.0)
