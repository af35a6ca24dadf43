"""Live grid and weather signals: providers, caching, a staleness limit and a fallback order.

A provider answers ``sample(region, wall_s)`` with the values valid at that wall-clock time
(or raises :class:`SignalUnavailableError`). :class:`SignalHub` asks the configured providers in
order, caches each answer for ``cache_ttl_s``, skips an answer older than its
``stale_after_s`` and falls back to the next provider; when every provider fails it keeps the
last good sample (its growing age shows in the metrics). Every fallback is counted.

Providers: the live APIs of :mod:`greenroute.serve.grid_apis` (Electricity Maps, WattTime),
:class:`ReplayProvider` (the real hourly files of ``--data-dir``, with a time offset and a
speed-up, for demos and tests) and :class:`StaticProvider` (fixed values). The usual order:
``electricitymaps``, ``watttime``, ``replay``, ``static``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError, GreenrouteError
from greenroute.serve.config import SIGNAL_KEYS, ProviderConfig

# static provider defaults for keys a config leaves out (engineering defaults, not data):
# a mild climate and an all-fossil mix (the conservative choice for the grid water intensity)
STATIC_DEFAULTS: dict[str, float] = {
    "price_usd_per_kwh": 0.10,
    "temp_c": 15.0,
    "rh_pct": 60.0,
    "low_carbon_pct": 0.0,
    "renewable_pct": 0.0,
}
REPLAY_CHUNK_H = 24 * 7  # hours of data loaded per region at a time
SECONDS_PER_HOUR = 3600.0


class SignalUnavailableError(Exception):
    """A provider has no value for this region and time (a network error, a gap, ...)."""


@dataclass(frozen=True)
class SignalSample:
    values: Mapping[str, float]  # every key of SIGNAL_KEYS
    measured_at_s: float  # wall-clock unix time from which the values hold
    provider: str = ""


class SignalProvider(Protocol):
    name: str
    can_forecast: bool  # sample() at a future wall time is a forecast, not an error

    def sample(self, region: str, wall_s: float) -> SignalSample: ...


class StaticProvider:
    """Fixed values per region (``values``) or for any region (``default``)."""

    can_forecast = True

    def __init__(self, name: str, values: Mapping[str, Mapping[str, float]],
                 default: Mapping[str, float]) -> None:  # fmt: skip
        self.name = name
        self.values = values
        self.default = default

    def covers(self, region: str) -> bool:
        merged = {**self.default, **self.values.get(region, {})}
        return "carbon_intensity_g_per_kwh" in merged

    def sample(self, region: str, wall_s: float) -> SignalSample:
        merged = {**STATIC_DEFAULTS, **self.default, **self.values.get(region, {})}
        if "carbon_intensity_g_per_kwh" not in merged:
            raise SignalUnavailableError(f"{self.name}: no carbon intensity for {region}")
        return SignalSample(merged, wall_s, self.name)


class ReplayProvider:
    """The real hourly signals of ``data_dir`` replayed: data time = ``start_utc`` + (wall -
    ``t0_s``) x ``speedup``. A value holds from its hour's start; its age in wall seconds is
    the data time since that hour divided by the speed-up."""

    can_forecast = True  # the files hold the future too: a perfect forecast, as the simulator's

    def __init__(self, name: str, data_dir: Path, start_utc: pd.Timestamp, speedup: float,
                 t0_s: float) -> None:  # fmt: skip
        self.name = name
        self.data_dir = Path(data_dir)
        self.start_utc = start_utc
        self.speedup = float(speedup)
        self.t0_s = float(t0_s)
        self._frames: dict[str, pd.DataFrame] = {}

    def data_time(self, wall_s: float) -> pd.Timestamp:
        return self.start_utc + pd.Timedelta(seconds=(wall_s - self.t0_s) * self.speedup)

    def wall_time(self, data_t: pd.Timestamp) -> float:
        return self.t0_s + (data_t - self.start_utc).total_seconds() / self.speedup

    def _frame(self, region: str, hour: pd.Timestamp) -> pd.DataFrame:
        frame = self._frames.get(region)
        if frame is None or hour not in frame.index:
            from greenroute.data.grid_loaders import load_region_signals

            try:
                frame = load_region_signals(self.data_dir, region, hour,
                                            hour + pd.Timedelta(hours=REPLAY_CHUNK_H))  # fmt: skip
            except (GreenrouteError, OSError, KeyError, ValueError) as err:
                raise SignalUnavailableError(f"{self.name}: {region} at {hour}: {err}") from None
            self._frames[region] = frame
        return frame

    def sample(self, region: str, wall_s: float) -> SignalSample:
        hour = self.data_time(wall_s).floor("h")
        row = self._frame(region, hour).loc[hour]
        values = {k: float(row[k]) for k in SIGNAL_KEYS}
        if not all(math.isfinite(v) for v in values.values()):
            raise SignalUnavailableError(f"{self.name}: {region} at {hour}: missing values")
        return SignalSample(values, self.wall_time(hour), self.name)


def build_provider(cfg: ProviderConfig, t0_s: float) -> SignalProvider:
    if cfg.type == "replay":
        assert cfg.data_dir is not None and cfg.start_utc is not None
        return ReplayProvider(cfg.name, cfg.data_dir, cfg.start_utc, cfg.speedup, t0_s)
    if cfg.type == "static":
        return StaticProvider(cfg.name, cfg.values, cfg.default)
    if cfg.type in ("electricitymaps", "watttime"):
        from greenroute.serve.grid_apis import ElectricityMapsProvider, WattTimeProvider

        cls = ElectricityMapsProvider if cfg.type == "electricitymaps" else WattTimeProvider
        return cls(cfg.name, values=cfg.values, default=cfg.default,
                   cache_ttl_s=cfg.cache_ttl_s, **cfg.options)  # fmt: skip
    raise ConfigError(f"unknown signal provider {cfg.type!r}")


@dataclass
class _Cached:
    sample: SignalSample
    fetched_s: float


@dataclass
class SignalHub:
    """Providers in fallback order, with per-provider cache TTL and staleness limit.

    ``on_event(kind, provider, region)`` is told of every ``failure`` (the provider raised),
    ``stale`` (its value was older than its limit), ``last-known`` (no provider answered:
    the last good sample is kept) and ``recovered`` (a provider that had failed or been stale
    for this region answers a fresh value again). ``degraded`` holds the (provider, region)
    pairs failing or stale now, ``last_error`` the latest reason per pair."""

    providers: Sequence[SignalProvider]
    configs: Sequence[ProviderConfig]
    on_event: Callable[[str, str, str], None] | None = None
    _cache: dict[tuple[int, str], _Cached] = field(default_factory=dict)
    _last: dict[str, tuple[int, SignalSample]] = field(default_factory=dict)
    degraded: set[tuple[str, str]] = field(default_factory=set)
    last_error: dict[tuple[str, str], str] = field(default_factory=dict)

    def _event(self, kind: str, provider: str, region: str, why: str = "") -> None:
        if kind in ("failure", "stale"):
            self.degraded.add((provider, region))
            self.last_error[(provider, region)] = why or kind
        elif kind == "recovered":
            self.degraded.discard((provider, region))
        if self.on_event is not None:
            self.on_event(kind, provider, region)

    def _ask(self, i: int, region: str, wall_s: float) -> SignalSample | None:
        cfg, prov = self.configs[i], self.providers[i]
        hit = self._cache.get((i, region))
        if hit is not None and wall_s - hit.fetched_s < cfg.cache_ttl_s:
            sample = hit.sample
        else:
            try:
                sample = prov.sample(region, wall_s)
            except SignalUnavailableError as err:
                self._event("failure", prov.name, region, str(err))
                return None
            self._cache[(i, region)] = _Cached(sample, wall_s)
        age_s = wall_s - sample.measured_at_s
        if age_s > cfg.stale_after_s:
            self._event("stale", prov.name, region,
                        f"{prov.name}: {region}: value {age_s:.0f} s old, limit "
                        f"{cfg.stale_after_s:g} s")  # fmt: skip
            return None
        if (prov.name, region) in self.degraded:
            self._event("recovered", prov.name, region)
        return sample

    def current(self, region: str, wall_s: float) -> tuple[int, SignalSample]:
        """(index of the provider that answered, its sample); -1 for the last known."""
        for i in range(len(self.providers)):
            sample = self._ask(i, region, wall_s)
            if sample is not None:
                self._last[region] = (i, sample)
                return i, sample
        if region in self._last:
            self._event("last-known", self._last[region][1].provider, region)
            return -1, self._last[region][1]
        raise ConfigError(
            f"no signal provider gives values for region {region} "
            f"(tried {', '.join(p.name for p in self.providers)}); add a static provider"
        )

    def series(self, region: str, wall_s: float, horizon: int, epoch_s: float
               ) -> tuple[list[SignalSample], str, float]:  # fmt: skip
        """Samples now and at the next ``horizon`` epochs (a forecast from the provider that
        answered now; persistence when it cannot forecast or fails), the provider's name and
        the age of the current value in seconds."""
        i, now = self.current(region, wall_s)
        out = [now]
        prov = self.providers[i] if i >= 0 else None
        for h in range(1, horizon + 1):
            nxt = out[-1]
            if prov is not None and prov.can_forecast:
                try:
                    nxt = prov.sample(region, wall_s + h * epoch_s)
                except SignalUnavailableError:
                    prov = None
            out.append(nxt)
        return out, now.provider, max(0.0, wall_s - now.measured_at_s)


@dataclass(frozen=True)
class EpochSignalArrays:
    """``[H+1, R]`` arrays the Observation needs, plus per-region provider names and ages."""

    carbon_intensity_g_per_kwh: np.ndarray
    price_usd_per_kwh: np.ndarray
    temp_c: np.ndarray
    wetbulb_c: np.ndarray
    water_intensity_l_per_kwh: np.ndarray
    providers: tuple[str, ...]
    age_s: np.ndarray


def epoch_signals(hub: SignalHub, regions: Sequence[str], wall_s: float, horizon: int,
                  epoch_s: float) -> EpochSignalArrays:  # fmt: skip
    """Signals of every region now and over the horizon, with the simulator's derived
    quantities: wet bulb (Stull 2011, physics.psychro) and grid water intensity (physics.water,
    from carbon intensity and the low-carbon and renewable shares)."""
    from greenroute.physics.psychro import wet_bulb_stull_c
    from greenroute.physics.water import ewif_l_per_kwh

    cols = {k: np.zeros((horizon + 1, len(regions))) for k in SIGNAL_KEYS}
    names, ages = [], np.zeros(len(regions))
    for r, region in enumerate(regions):
        samples, name, age = hub.series(region, wall_s, horizon, epoch_s)
        names.append(name)
        ages[r] = age
        for h, s in enumerate(samples):
            for k in SIGNAL_KEYS:
                cols[k][h, r] = s.values[k]
    wetbulb = np.asarray(wet_bulb_stull_c(cols["temp_c"], cols["rh_pct"]), dtype=float)
    ewif = ewif_l_per_kwh(cols["carbon_intensity_g_per_kwh"], cols["low_carbon_pct"],
                          cols["renewable_pct"])  # fmt: skip
    return EpochSignalArrays(
        carbon_intensity_g_per_kwh=cols["carbon_intensity_g_per_kwh"],
        price_usd_per_kwh=cols["price_usd_per_kwh"],
        temp_c=cols["temp_c"],
        wetbulb_c=wetbulb,
        water_intensity_l_per_kwh=np.asarray(ewif, dtype=float),
        providers=tuple(names),
        age_s=ages,
    )
