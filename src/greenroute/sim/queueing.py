"""Closed-form queueing: Erlang B/C and the Allen–Cunneen M/G/c waiting-time approximation."""

from __future__ import annotations

import numpy as np


def erlang_c(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Probability of waiting in M/M/c with ``c`` servers and offered load ``a = λ/μ``.

    Erlang B is the truncated Poisson ratio B(c, a) = p(c; a) / P(X <= c; a), evaluated in
    log space with the regularised incomplete gamma function, so it is exact for integer
    ``c``, smooth in real ``c`` and O(1) for any size; then C = c B / (c - a (1 - B)).
    Returns 1 where ``a >= c`` (unstable queue).
    """
    from scipy.special import gammaincc, gammaln

    c = np.asarray(c, dtype=float)
    a = np.asarray(a, dtype=float)
    c, a = np.broadcast_arrays(c, a)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        safe_a = np.where(a > 0, a, 1.0)
        log_pmf = c * np.log(safe_a) - safe_a - gammaln(c + 1.0)
        cdf = gammaincc(c + 1.0, safe_a)
        b = np.where(a > 0, np.exp(log_pmf) / cdf, 0.0)
        b = np.clip(np.nan_to_num(b, nan=1.0), 0.0, 1.0)
        pc = c * b / (c - a * (1.0 - b))
    return np.where((a < c) & (c > 0), np.clip(np.nan_to_num(pc, nan=1.0), 0.0, 1.0), 1.0)


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


def lindley_gaussian_mean(mu: np.ndarray, sd: np.ndarray, n_max: int = 4000) -> np.ndarray:
    """Stationary mean of W_{k+1} = max(0, W_k + X_k), X_k ~ N(mu, sd²), mu < 0.

    Spitzer's identity: E[W] = sum_{n>=1} E[S_n^+] / n with S_n ~ N(n mu, n sd²), and
    E[S^+] = s φ(m/s) + m Φ(m/s) for S ~ N(m, s²). Exact (up to truncation) at any drift,
    unlike the heavy-traffic limit sd² / (2|mu|) it tends to as mu -> 0. Infinite for mu >= 0.
    """
    from scipy.special import ndtr

    mu = np.asarray(mu, dtype=float)
    sd = np.asarray(sd, dtype=float)
    mu, sd = np.broadcast_arrays(mu, sd)
    out = np.zeros(mu.shape)
    live = (sd > 0) & (mu < 0)
    out[(mu >= 0) & (sd > 0)] = np.inf
    if not live.any():
        return out
    m1, s1 = mu[live], sd[live]
    n = np.arange(1, n_max + 1, dtype=float)[:, None]
    m = n * m1[None, :]
    s = np.sqrt(n) * s1[None, :]
    z = m / s
    pos = s * np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi) + m * ndtr(z)
    total = (pos / n).sum(axis=0)
    # tail beyond n_max: the heavy-traffic remainder is negligible when z_n << -1
    out[live] = total
    return out
