"""Temperature-blind planning (seed 004's comparator): plan with one location-independent cooling
efficiency instead of each site's temperature-dependent COP.

Seed 004's abstract: cooling systems "are frequently modeled with a location-independent
efficiency term. However, their energy efficiency is highly influenced by ambient temperature
[...]. Leveraging this temperature diversity can help reduce total cooling energy costs". The
blind comparator is that location-independent model: the *planner* sees, at every site and
hour, the same facility energy per IT kWh (one PUE), the same on-site water per IT kWh and the
same water-supply energy, while grid carbon, price and grid water (EWIF) stay each site's own.
The simulator that evaluates the plan is unchanged (temperature-aware), so the difference of
the two runs is what temperature awareness buys.

Blind factors per kWh of IT energy (``PUE_b``, ``WUE_b``, ``E_w`` constants)::

    energy = PUE_b
    carbon = CI x (PUE_b + E_w)            (g; E_w: energy to supply/treat on-site water)
    cost   = price x PUE_b
    water  = WUE_b + PUE_b x EWIF           (on-site + off-site, L)

which is the default facility's formula (:class:`~greenroute.physics.facility.DefaultFacility`)
with its temperature-dependent terms frozen. Defaults (:func:`fleet_mean_factors`): the
unweighted mean over the fleet's sites and the hours of one calendar year of the default
facility's own factors, so the blind planner is right on average and wrong only in where and
when cooling is cheap. ``blind_cop`` instead fixes the plant COP: ``PUE_b = 1 + 1/COP +
infra``.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.core.types import Observation

COOLING_MODELS: tuple[str, ...] = ("aware", "blind")
# The local calendar year of the fleet-mean factors starts at local midnight of 1 January in
# this zone (all au-edge sites are within 2.5 h of it); 364 days keep the window inside real
# weather files that end at local 23:00 on 31 December (PROVENANCE.md §2, weather).
YEAR_TZ = "Australia/Sydney"
YEAR_DAYS = 364


@dataclass(frozen=True)
class BlindFactors:
    """The constants a temperature-blind planner uses at every site and hour."""

    pue: float  # facility kWh per IT kWh (1 + cooling + infra)
    water_onsite_l_per_it_kwh: float
    water_energy_kwh_per_it_kwh: float  # supply/treatment energy of that water (carbon only)
    basis: str = ""

    def __post_init__(self) -> None:
        if not (np.isfinite(self.pue) and self.pue >= 1.0):
            raise ConfigError(f"blind PUE must be a finite number >= 1, got {self.pue}")
        if self.water_onsite_l_per_it_kwh < 0 or self.water_energy_kwh_per_it_kwh < 0:
            raise ConfigError("blind on-site water and water energy must be >= 0")


def blind_observation(obs: Observation, bf: BlindFactors) -> Observation:
    """``obs`` with its facility factors replaced by the blind constants (signals kept)."""
    ci = np.asarray(obs.carbon_intensity_g_per_kwh, dtype=float)
    pue = np.full_like(ci, bf.pue)
    return dataclasses.replace(
        obs,
        energy_kwh_per_it_kwh=pue,
        carbon_g_per_it_kwh=ci * (bf.pue + bf.water_energy_kwh_per_it_kwh),
        cost_usd_per_it_kwh=np.asarray(obs.price_usd_per_kwh, dtype=float) * bf.pue,
        water_l_per_it_kwh=bf.water_onsite_l_per_it_kwh
        + bf.pue * np.asarray(obs.water_intensity_l_per_kwh, dtype=float),
    )


def year_window(year: int) -> tuple[pd.Timestamp, int]:
    """(UTC start, hours) of the local calendar year ``year`` used for fleet means."""
    start = pd.Timestamp(f"{int(year)}-01-01", tz=YEAR_TZ).tz_convert("UTC")
    return start, YEAR_DAYS * 24


def fleet_mean_factors(
    regions: tuple[str, ...],
    year: int,
    data_dir: str | Path | None = None,
    *,
    seed: int = 0,
) -> BlindFactors:
    """The default facility's mean factors over ``regions`` and the hours of ``year``.

    Signals come from the same loaders as a run's (real files under ``data_dir`` when it
    covers a region, published normals for the synthesised AU sites, else embedded)."""
    from greenroute.data.paths import resolve_data_dir

    root = resolve_data_dir(data_dir)
    return _fleet_mean(tuple(regions), int(year), None if root is None else str(root), int(seed))


@functools.lru_cache(maxsize=16)
def _fleet_mean(regions: tuple[str, ...], year: int, root: str | None, seed: int) -> BlindFactors:
    from greenroute.physics.facility import DefaultFacility
    from greenroute.sim.epoch_signals import build_epoch_signals

    start, hours = year_window(year)
    data = None if root is None else Path(root)
    sig = build_epoch_signals(regions, start, hours, 3600.0, seed, data)
    f = DefaultFacility().factors(
        temp_c=sig.temp_c,
        wetbulb_c=sig.wetbulb_c,
        carbon_intensity_g_per_kwh=sig.carbon_intensity_g_per_kwh,
        price_usd_per_kwh=sig.price_usd_per_kwh,
        ewif_l_per_kwh=sig.water_intensity_l_per_kwh,
    )
    ci = np.asarray(sig.carbon_intensity_g_per_kwh)
    water_energy = f.carbon_g_per_it_kwh / np.where(ci > 0, ci, np.nan) - f.energy_kwh_per_it_kwh
    return BlindFactors(
        pue=float(np.mean(f.energy_kwh_per_it_kwh)),
        water_onsite_l_per_it_kwh=float(np.mean(f.water_onsite_l_per_it_kwh)),
        water_energy_kwh_per_it_kwh=float(max(np.nanmean(water_energy), 0.0)),
        basis=f"fleet mean of the default facility over {len(regions)} sites, {year} "
        f"({sig.source} signals)",
    )


def blind_factors_option(
    obs: Observation,
    *,
    blind_pue: float | None,
    blind_cop: float | None,
    data_dir: str | Path | None = None,
) -> BlindFactors:
    """The blind constants a policy's options ask for: ``blind_pue`` or ``blind_cop`` (the
    other factors from the fleet mean), else the fleet mean of ``obs.regions`` over the
    calendar year of ``obs.time_utc``."""
    from greenroute.physics.facility import INFRA_LOSS_FRACTION

    if blind_pue is not None and blind_cop is not None:
        raise ConfigError("give blind_pue or blind_cop, not both")
    mean = fleet_mean_factors(tuple(obs.regions), obs.time_utc.year, data_dir)
    if blind_pue is not None:
        return dataclasses.replace(mean, pue=float(blind_pue), basis=f"blind_pue={blind_pue}")
    if blind_cop is not None:
        if not blind_cop > 0:
            raise ConfigError(f"blind_cop must be > 0, got {blind_cop}")
        pue = 1.0 + 1.0 / float(blind_cop) + INFRA_LOSS_FRACTION
        return dataclasses.replace(mean, pue=pue, basis=f"blind_cop={blind_cop}")
    return mean


def check_cooling_model(name: str) -> str:
    if name not in COOLING_MODELS:
        raise UnknownNameError("cooling model", name, COOLING_MODELS)
    return name
