"""Forecasters: what a policy is told about the next H epochs.

Index 0 of every forecast is the current epoch. Grid signals at index 0 are measured (real-time
carbon intensity and prices are published); demand at index 0 is itself a forecast because the
epoch's requests have not arrived yet.

- ``perfect``: the true future (for the oracle and upper-bound studies).
- ``persistence``: the last observed value repeated.
- ``ewma``: exponentially weighted moving average of past values (seed 001 section 5.1, the
  request-volume predictor of MARLIN, after Mu [27]); blends with the same hour yesterday for
  grid signals, which are strongly diurnal.
- ``noisy``: the truth times a seeded lognormal error that grows with lead time, so users can
  measure how forecast quality costs savings (``--forecast-error 0.1``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from greenroute.core.errors import UnknownNameError

FORECASTERS: tuple[str, ...] = ("perfect", "persistence", "ewma", "noisy")
EWMA_ALPHA = 0.5  # weight of the newest epoch (MARLIN's predictor is an EWMA; alpha not given)


@dataclass
class Forecaster:
    kind: str = "perfect"
    error: float = 0.0  # relative 1-sigma error at lead 1 for "noisy"
    seed: int = 0
    epochs_per_day: int = 96

    def __post_init__(self) -> None:
        if self.kind not in FORECASTERS:
            raise UnknownNameError("forecaster", self.kind, FORECASTERS)
        self._rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0xF0CA]))

    def signal(self, series: np.ndarray, e: int, horizon: int) -> np.ndarray:
        """Forecast rows ``e..e+H`` of ``series`` ([T, ...]) seen at epoch ``e``."""
        truth = series[e : e + horizon + 1]
        if truth.shape[0] < horizon + 1:  # pad past the end with the last value
            pad = np.repeat(series[-1:], horizon + 1 - truth.shape[0], axis=0)
            truth = np.concatenate([truth, pad], axis=0)
        if self.kind == "perfect" or horizon == 0:
            return truth.copy()
        out = np.empty_like(truth, dtype=float)
        out[0] = truth[0]
        if self.kind == "persistence":
            out[1:] = truth[0]
        elif self.kind == "ewma":
            day = self.epochs_per_day
            for h in range(1, horizon + 1):
                lag = e + h - day
                seasonal = series[lag] if lag >= 0 else truth[0]
                out[h] = EWMA_ALPHA * truth[0] + (1 - EWMA_ALPHA) * seasonal
        else:  # noisy
            lead = np.arange(1, horizon + 1, dtype=float).reshape((-1,) + (1,) * (truth.ndim - 1))
            sigma = self.error * np.sqrt(lead)
            noise = self._rng.standard_normal(truth[1:].shape)
            out[1:] = truth[1:] * np.exp(sigma * noise - 0.5 * sigma**2)
        return out

    def demand(
        self, observed_rps: np.ndarray, expected_rps: np.ndarray, e: int, horizon: int
    ) -> np.ndarray:
        """Demand forecast ``[H+1, C, O]`` at epoch ``e``.

        ``observed_rps[:e]`` are measured past arrival rates, ``expected_rps`` the workload's
        noise-free rate (what a capacity planner knows: the diurnal shape). ``perfect`` uses the
        realised rates ``observed_rps[e:e+H+1]`` (the engine fills them in advance for it).
        """
        if self.kind == "perfect":
            return self.signal(observed_rps, e, horizon)
        exp = self.signal(expected_rps, e, horizon)
        if e == 0:
            return exp
        if self.kind == "persistence":
            return np.repeat(observed_rps[e - 1][None], horizon + 1, axis=0)
        if self.kind == "ewma":
            lo = max(0, e - 8)
            w = (1 - EWMA_ALPHA) ** np.arange(e - lo)[::-1]
            past = observed_rps[lo:e]
            ratio_num = (w[:, None, None] * past).sum(0)
            ratio_den = (w[:, None, None] * expected_rps[lo:e]).sum(0)
            with np.errstate(invalid="ignore", divide="ignore"):
                scale = np.where(ratio_den > 0, ratio_num / ratio_den, 1.0)
            return exp * scale[None]
        lead = np.arange(0, horizon + 1, dtype=float)[:, None, None]
        sigma = self.error * np.sqrt(lead + 1)
        truth = self.signal(observed_rps, e, horizon)
        noise = self._rng.standard_normal(truth.shape)
        return truth * np.exp(sigma * noise - 0.5 * sigma**2)
