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
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError, DataFormatError, UnknownNameError
from greenroute.data.lengths import PROFILES_RESOURCE, get_length_model, load_workload_profiles
from greenroute.data.requests import (
    CLASS_DEFERRABLE,
    CLASS_INTERACTIVE,
    N_CLASSES,
    Requests,
    _epoch_index,
)

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

FLAT_DIURNAL = "flat"


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
    """Diurnal multiplier ``[n_minutes, n_origins]`` at each minute start, in local time
    (read-only; the last few are memoised: a fluid run asks for the expected rates and the
    sampled counts of the same window)."""
    try:
        hash(spec)
    except TypeError:  # a spec built with list fields: compute it afresh
        return _minute_shape_cached.__wrapped__(spec, start, n_minutes)
    return _minute_shape_cached(spec, start, n_minutes)


@functools.lru_cache(maxsize=4)
def _minute_shape_cached(spec: WorkloadSpec, start: pd.Timestamp, n_minutes: int) -> np.ndarray:
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
    out.flags.writeable = False
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


@dataclass(frozen=True)
class PieceCounts:
    """Poisson arrival counts per piece of ``[0, n_epochs epoch_s)``, the pieces cut at every
    minute and epoch boundary (the minutes themselves when epochs are whole minutes): the path
    within each epoch that :func:`sample_epoch_counts` sums, for models that read the seed's
    own minutes (``sim/fluid_minute_path.py``)."""

    start_s: np.ndarray  # [n_pieces]
    length_s: np.ndarray  # [n_pieces]
    counts: np.ndarray  # [n_pieces, n_origins, 2, n_models] int64

    def by_epoch(self, epoch_s: float, n_epochs: int) -> np.ndarray:
        """The counts summed per epoch, ``[n_epochs, n_origins, 2, n_models]`` int64 (every
        epoch starts a piece)."""
        if n_epochs == 0:
            return self.counts
        bounds = _epoch_bounds(epoch_s, n_epochs)
        return _sum_by_epoch(self.counts, self.start_s, bounds).astype(np.int64)


def sample_piece_counts(
    spec: WorkloadSpec,
    start_utc: datetime | pd.Timestamp | np.datetime64 | str,
    epoch_s: float,
    n_epochs: int,
    seed: int,
) -> PieceCounts:
    """Poisson arrival counts per piece of the horizon (:class:`PieceCounts`), no requests made;
    the same rate function, noise and random streams as :func:`generate_requests`."""
    bounds = _epoch_bounds(epoch_s, n_epochs)
    if n_epochs == 0:
        empty = np.zeros(0)
        shape = (0, spec.n_origins, N_CLASSES, spec.n_models)
        return PieceCounts(empty, empty, np.zeros(shape, dtype=np.int64))
    start = as_utc_timestamp(start_utc)
    rng = _streams(seed)
    seg_start, seg_len, seg_minute = _segments(bounds[-1], bounds)
    n_minutes = int(seg_minute.max()) + 1
    noise = _minute_noise(spec, rng["noise"], n_minutes)
    lam = _segment_lambda(spec, start, seg_len, seg_minute, n_minutes, noise)
    return PieceCounts(seg_start, seg_len, rng["counts"].poisson(lam).astype(np.int64))


def sample_epoch_counts(
    spec: WorkloadSpec,
    start_utc: datetime | pd.Timestamp | np.datetime64 | str,
    epoch_s: float,
    n_epochs: int,
    seed: int,
) -> np.ndarray:
    """Poisson arrival counts ``[n_epochs, n_origins, 2, n_models]`` (int64), no requests made:
    :func:`sample_piece_counts` summed per epoch.

    Same rate function, noise and random streams as :func:`generate_requests`: when
    ``epoch_s`` is a whole number of minutes the result equals
    ``generate_requests(spec, start_utc, n_epochs * epoch_s, seed).counts_by_epoch(...)``.
    """
    return sample_piece_counts(spec, start_utc, epoch_s, n_epochs, seed).by_epoch(epoch_s, n_epochs)
