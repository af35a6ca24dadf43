"""Forecasters: what a policy is told about the next H epochs.

Index 0 of every forecast is the current epoch. Grid signals at index 0 are measured (real-time
carbon intensity and prices are published); demand at index 0 is itself a forecast because the
epoch's requests have not arrived yet.

- ``perfect`` (the default, :data:`DEFAULT_FORECAST`): the true future (for the oracle and
  upper-bound studies). Every result and manifest states the forecaster (field ``forecast``).
- ``persistence``: the last observed value repeated.
- ``ewma``: a true exponentially weighted moving average over a window, as MARLIN's workload
  predictor (seed 001 section 5.1: "forecasts the number of LLM requests in the next epoch
  based on information from past epochs within a time window of t_w, using an exponentially
  weighted moving average", after Mu [27]). With smoothing ``a`` (:data:`EWMA_ALPHA`) and
  window ``W`` (:data:`EWMA_WINDOW_EPOCHS`) the forecast of every lead h >= 1 is

      f = sum_{k=0}^{n-1} a (1 - a)^k x_{t-k} / sum_{k=0}^{n-1} a (1 - a)^k,  n = min(W, t + 1)

  over the newest ``n`` observed values ``x_t, x_{t-1}, ...`` (the weights renormalised over
  the window). For grid signals ``x_t`` is the current epoch's measured value; for demand it is
  the last completed epoch's arrival rate (the current epoch's requests have not arrived).
  The seed gives neither ``a`` nor ``t_w``: both are stated here.
- ``blend-yesterday``: a fixed blend ``0.5 x now + 0.5 x the same epoch yesterday`` for grid
  signals (which are strongly diurnal); demand is the workload's diurnal shape scaled by an
  exponentially weighted ratio of observed to expected rates over the last 8 epochs. (Called
  ``ewma`` before issue 7; it is not a moving average of the signal.)
- ``marlin-ewma``: MARLIN's workload predictor (seed 001 §5.1, line 1 of Algorithm 1) as MARLIN
  uses it: demand is the EWMA above with MARLIN's pretrained smoothing and window
  (:data:`MARLIN_EWMA_ALPHA`, :data:`MARLIN_EWMA_WINDOW_EPOCHS`, fitted by
  ``python -m greenroute.bench.marlin_predictor``); grid signals are the current measured value
  (MARLIN's state holds each datacenter's current carbon, water and price, §5.2), as
  ``persistence``. :func:`marlin_predict` is the predictor itself (about 10 µs per origin).
- ``noisy``: the truth times a seeded lognormal error that grows with lead time, so users can
  measure how forecast quality costs savings (``--forecast-error 0.1``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from greenroute.core.errors import ConfigError, UnknownNameError

FORECASTERS: tuple[str, ...] = (
    "perfect", "persistence", "ewma", "marlin-ewma", "blend-yesterday", "noisy",
)  # fmt: skip
DEFAULT_FORECAST = "perfect"
# ewma: smoothing factor (weight of the newest value before renormalising) and window t_w; seed
# 001 section 5.1 uses an EWMA over a window but states neither value: our choice, 8 epochs =
# 2 h at 15-min epochs, newest value weighted 0.5 (weights 0.5, 0.25, ...).
EWMA_ALPHA = 0.5
EWMA_WINDOW_EPOCHS = 8
# marlin-ewma: seed 001 §5.1 "pretrain[s] the predictor" but states neither alpha nor t_w. Ours
# are pretrained (grid search, least absolute error of the next epoch's count) on the first 7
# of 14 days of marlin8's workload: `python -m greenroute.bench.marlin_predictor` prints them.
MARLIN_EWMA_ALPHA = 0.7
MARLIN_EWMA_WINDOW_EPOCHS = 4
# blend-yesterday: weight of the current value against the same epoch one day earlier
BLEND_NOW_WEIGHT = 0.5
# blend-yesterday demand: exponential weights (decay per epoch) over this many past epochs for
# the observed/expected rate ratio (the values of the forecaster called ewma before issue 7)
BLEND_RATIO_EPOCHS = 8
BLEND_RATIO_DECAY = 0.5


def ewma_weights(n: int, alpha: float = EWMA_ALPHA) -> np.ndarray:
    """Normalised EWMA weights of the newest ``n`` values, oldest first (they sum to 1)."""
    w = alpha * (1.0 - alpha) ** np.arange(n, dtype=float)[::-1]
    return w / w.sum()


def ewma(values: np.ndarray, alpha: float = EWMA_ALPHA) -> np.ndarray:
    """EWMA of ``values`` (``[n, ...]``, oldest first) over axis 0 with renormalised weights."""
    v = np.asarray(values, dtype=float)
    w = ewma_weights(v.shape[0], alpha).reshape((-1,) + (1,) * (v.ndim - 1))
    return (w * v).sum(axis=0)


def marlin_predict(
    history: np.ndarray,
    alpha: float = MARLIN_EWMA_ALPHA,
    window_epochs: int = MARLIN_EWMA_WINDOW_EPOCHS,
) -> np.ndarray:
    """Seed 001 §5.1: next epoch's request count from past epochs ``[I_e-tw, ..., I_e-1]``
    (``history[n, ...]``, oldest first, e.g. ``[n, O]`` per origin) as the EWMA over the last
    ``window_epochs`` (= t_w) with smoothing ``alpha``."""
    h = np.asarray(history, dtype=float)
    if h.shape[0] == 0:
        raise ConfigError("the predictor needs at least one past epoch")
    return ewma(h[-int(window_epochs) :], alpha)


@dataclass
class Forecaster:
    kind: str = "perfect"
    error: float = 0.0  # relative 1-sigma error at lead 1 for "noisy"
    seed: int = 0
    epochs_per_day: int = 96
    ewma_alpha: float = EWMA_ALPHA
    ewma_window: int = EWMA_WINDOW_EPOCHS

    def __post_init__(self) -> None:
        if self.kind not in FORECASTERS:
            raise UnknownNameError("forecaster", self.kind, FORECASTERS)
        if not 0.0 < self.ewma_alpha <= 1.0:
            raise ConfigError(f"ewma alpha must be in (0, 1], got {self.ewma_alpha}")
        if int(self.ewma_window) < 1:
            raise ConfigError(f"ewma window must be >= 1 epoch, got {self.ewma_window}")
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
        if self.kind in ("persistence", "marlin-ewma"):
            out[1:] = truth[0]
        elif self.kind == "ewma":
            lo = max(0, e - int(self.ewma_window) + 1)
            out[1:] = ewma(series[lo : e + 1], self.ewma_alpha)
        elif self.kind == "blend-yesterday":
            day = self.epochs_per_day
            for h in range(1, horizon + 1):
                lag = e + h - day
                seasonal = series[lag] if lag >= 0 else truth[0]
                out[h] = BLEND_NOW_WEIGHT * truth[0] + (1 - BLEND_NOW_WEIGHT) * seasonal
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
            lo = max(0, e - int(self.ewma_window))
            level = ewma(observed_rps[lo:e], self.ewma_alpha)
            return np.repeat(level[None], horizon + 1, axis=0)
        if self.kind == "marlin-ewma":
            level = marlin_predict(observed_rps[:e])
            return np.repeat(level[None], horizon + 1, axis=0)
        if self.kind == "blend-yesterday":
            lo = max(0, e - BLEND_RATIO_EPOCHS)
            w = BLEND_RATIO_DECAY ** np.arange(e - lo)[::-1]
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
