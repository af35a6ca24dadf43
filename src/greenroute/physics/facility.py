"""Facility model: from IT energy to total energy, water, carbon and cost.

For given signals every quantity is *linear* in IT energy, so a model returns per-kWh-of-IT
factors (:class:`FacilityFactors`) and :func:`facility_ledger` multiplies them out. The LP
policies rely on this linearity.

Two presets (:data:`FACILITY_PRESETS`):

``"default"`` (physics of this package)
    cooling = IT / COP(T_db, T_wb) of a :class:`~greenroute.physics.cooling.CoolingPlant`
    (water-cooled by default); infrastructure = ``INFRA_LOSS_FRACTION`` x IT (UPS and power
    distribution losses); on-site water = evaporation of the heat the tower rejects (IT heat
    + compressor work) x the plant's evaporative fraction x the latent share, plus blowdown at
    ``CoC`` cycles; off-site water = total energy x EWIF; carbon = CI x (total energy + the
    energy to supply the on-site make-up water and treat the blowdown); cost = price x total
    energy.

``"marlin"`` (seed 001, Moore et al., MARLIN §3.3-3.5, equations cited inline)
    ``E_cool = 3 x E_IT / COP_d``; ``E_infra = 0.13 x E_IT``; eq. 6-10 as written, with the
    defaults for what the paper leaves open (``COP_d``, ``φ``, ``EI_pot``, ``EI_waste``,
    ``H_cool``) documented on :class:`MarlinFacility`. ``COP_d`` is one value per datacenter
    when the regions are given (:func:`get_facility_model`): the scenario's ``cop_d``, else
    each site's climate-derived value (:mod:`greenroute.physics.marlin_cop`).

Signals: ``temp_c`` (dry bulb), ``wetbulb_c``, ``carbon_intensity_g_per_kwh`` (grid carbon
intensity, gCO2e/kWh), ``price_usd_per_kwh``, ``ewif_l_per_kwh`` (grid water intensity, L/kWh).
Carbon is in grams, water in litres, cost in USD. :class:`FacilityFactors` fields are rates per
kWh of IT energy (``carbon_g_per_it_kwh``, ...).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.physics import cooling as _cooling
from greenroute.physics import water as _water

# UPS + power-distribution losses as a fraction of IT energy: 5 %. Engineering assumption:
# modern double-conversion UPS are ~96-97 % efficient at typical load (ENERGY STAR UPS
# specification test results), plus ~1-2 % in transformers/PDUs and cabling.
INFRA_LOSS_FRACTION = 0.05

# Energy to treat and deliver municipal (surface) water: 1,406 kWh per million US gallons
# = 0.371 kWh/m3 (EPRI 2002, "Water & Sustainability (Volume 4): U.S. Electricity
# Consumption for Water Supply & Treatment", report 1006787).
WATER_SUPPLY_KWH_PER_M3 = 1406.0 / (1e6 * _water.L_PER_US_GAL / _water.L_PER_M3)
# Energy to treat wastewater (activated sludge): ~0.35 kWh/m3 (EPRI 2002, same report:
# ~1,300 kWh per million gallons for activated-sludge plants). Applied to the blowdown.
WASTEWATER_TREATMENT_KWH_PER_M3 = 0.35

# --- MARLIN preset constants (seed 001 §3.3-3.5) ---------------------------------------------
MARLIN_COOLING_MULTIPLIER = 3.0  # §3.3: E_cool = E_CRAC + chiller + auxiliary ≈ 3 x E_CRAC [22]
MARLIN_INFRA_FRACTION = 0.13  # §3.3: E_infra = 0.13 x E_IT [23]
# COP_d is not given in the paper. Default: HP Labs' CRAC COP curve (Moore et al. 2005, the
# model used throughout the HP Labs / CSU line of work MARLIN comes from) at a 25 °C supply
# air temperature (upper half of ASHRAE TC 9.9's recommended 18-27 °C inlet range):
# 0.0068 x 25^2 + 0.0008 x 25 + 0.458 = 4.728.
MARLIN_CRAC_SUPPLY_C = 25.0
MARLIN_DEFAULT_COP_D = float(_cooling.crac_cop_moore2005(MARLIN_CRAC_SUPPLY_C))
# φ is not given. Default 1/6: with it, 1/(1-φ) = CoC/(CoC-1) for Li et al.'s CoC = 6, i.e.
# φ read as the ratio of make-up to threshold concentration (1/CoC). NB as written,
# G_blow = G_E/(1-φ) is then 1.2 x G_E: the whole make-up (evaporation + blowdown), not the
# blowdown (E/(CoC-1) = 0.2 x G_E), so eq. 8's G_E + G_blow counts evaporation twice. For any
# φ in [0, 1) the paper's G_blow exceeds G_E. Kept as written (not "fixed").
MARLIN_DEFAULT_PHI = 1.0 / _water.CYCLES_OF_CONCENTRATION
# EI_pot, EI_waste (energy intensities, kWh per litre) are not given ([12] is cited). Defaults
# are the EPRI (2002) figures above converted to kWh/L.
MARLIN_DEFAULT_EI_POT_KWH_PER_L = WATER_SUPPLY_KWH_PER_M3 / _water.L_PER_M3
MARLIN_DEFAULT_EI_WASTE_KWH_PER_L = WASTEWATER_TREATMENT_KWH_PER_M3 / _water.L_PER_M3
# H_cool ("cooling load") is not defined. Default: the IT heat, E_IT (all IT electricity ends
# up as heat that the cooling system removes). Alternatives: "it+cooling" (E_IT + E_cool, the
# heat a tower would reject if all cooling work were compressor work) and "total" (E_tot).
MARLIN_H_COOL_BASES: tuple[str, ...] = ("it", "it+cooling", "total")


@dataclass(frozen=True, eq=False)
class FacilityFactors:
    """Per kWh of IT energy; every array has the broadcast shape of the signals."""

    cooling_kwh_per_it_kwh: np.ndarray
    infra_kwh_per_it_kwh: np.ndarray
    energy_kwh_per_it_kwh: np.ndarray  # 1 + cooling + infra
    water_onsite_l_per_it_kwh: np.ndarray
    water_offsite_l_per_it_kwh: np.ndarray
    carbon_g_per_it_kwh: np.ndarray
    cost_usd_per_it_kwh: np.ndarray


def _factors(**arrays: np.ndarray) -> FacilityFactors:
    names = [f.name for f in dataclasses.fields(FacilityFactors)]
    broadcast = np.broadcast_arrays(*(np.asarray(arrays[n], dtype=np.float64) for n in names))
    return FacilityFactors(**{n: np.array(a) for n, a in zip(names, broadcast, strict=True)})


@runtime_checkable
class FacilityModel(Protocol):
    name: str

    def factors(
        self,
        *,
        temp_c: ArrayLike,
        wetbulb_c: ArrayLike,
        carbon_intensity_g_per_kwh: ArrayLike,
        price_usd_per_kwh: ArrayLike,
        ewif_l_per_kwh: ArrayLike,
    ) -> FacilityFactors: ...


def _f(x: ArrayLike) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


@dataclass(frozen=True)
class DefaultFacility:
    """This package's physics (see module docstring); every parameter overridable."""

    name: str = "default"
    plant: _cooling.CoolingPlant = field(default=_cooling.WATER_COOLED)
    infra_fraction: float = INFRA_LOSS_FRACTION
    cycles_of_concentration: float = _water.CYCLES_OF_CONCENTRATION
    tower_latent_share: float = _water.TOWER_LATENT_SHARE
    water_supply_kwh_per_m3: float = WATER_SUPPLY_KWH_PER_M3
    wastewater_kwh_per_m3: float = WASTEWATER_TREATMENT_KWH_PER_M3

    def factors(
        self,
        *,
        temp_c: ArrayLike,
        wetbulb_c: ArrayLike,
        carbon_intensity_g_per_kwh: ArrayLike,
        price_usd_per_kwh: ArrayLike,
        ewif_l_per_kwh: ArrayLike,
    ) -> FacilityFactors:
        plant = self.plant
        cop = _cooling.cop(plant, temp_c, wetbulb_c)
        cooling = 1.0 / cop
        infra = np.full_like(cooling, self.infra_fraction)
        total = 1.0 + cooling + infra
        # Heat to reject outdoors per kWh of IT: the IT heat plus the compressor work.
        heat = 1.0 + _cooling.compressor_kwh_per_kwh(plant, temp_c, wetbulb_c)
        evap_frac = _cooling.evaporative_fraction(plant, temp_c, wetbulb_c)
        evap = _water.evaporation_l(heat, evap_frac * self.tower_latent_share)
        blow = _water.blowdown_l(evap, self.cycles_of_concentration)
        onsite = evap + blow
        offsite = total * _f(ewif_l_per_kwh)
        water_energy_kwh = (
            onsite * self.water_supply_kwh_per_m3 + blow * self.wastewater_kwh_per_m3
        ) / _water.L_PER_M3
        carbon = _f(carbon_intensity_g_per_kwh) * (total + water_energy_kwh)
        cost = _f(price_usd_per_kwh) * total
        return _factors(
            cooling_kwh_per_it_kwh=cooling,
            infra_kwh_per_it_kwh=infra,
            energy_kwh_per_it_kwh=total,
            water_onsite_l_per_it_kwh=onsite,
            water_offsite_l_per_it_kwh=offsite,
            carbon_g_per_it_kwh=carbon,
            cost_usd_per_it_kwh=cost,
        )


@dataclass(frozen=True)
class MarlinFacility:
    """Seed 001 (MARLIN) §3.3-3.5 exactly, per kWh of IT energy.

    Units: E in kWh, G in L, CI in g/kWh (the paper's kg/kWh x 1000), Z in g. Eq. 9 scales the
    water-treatment terms by CI, so ``Z_pot = (G_blow + G_E) x EI_pot`` and
    ``Z_waste = G_grid x EI_waste`` are *energies* (kWh = L x kWh/L) despite their Z names, and
    ``Z_G = (Z_pot + Z_waste) x CI`` is in g.
    """

    name: str = "marlin"
    # one value, or one per datacenter ([R], broadcast over the signals' last axis);
    # get_facility_model(..., regions=...) derives it from each site's climate (marlin_cop.py)
    cop_d: float | tuple[float, ...] = MARLIN_DEFAULT_COP_D
    cooling_multiplier: float = MARLIN_COOLING_MULTIPLIER
    infra_fraction: float = MARLIN_INFRA_FRACTION
    phi: float = MARLIN_DEFAULT_PHI
    ei_pot_kwh_per_l: float = MARLIN_DEFAULT_EI_POT_KWH_PER_L
    ei_waste_kwh_per_l: float = MARLIN_DEFAULT_EI_WASTE_KWH_PER_L
    h_cool_basis: str = "it"
    latent_heat_j_per_kg: float = _water.LATENT_HEAT_VAPORIZATION_J_PER_KG  # J_water
    water_density_kg_per_l: float = _water.WATER_DENSITY_KG_PER_L

    def __post_init__(self) -> None:
        if self.h_cool_basis not in MARLIN_H_COOL_BASES:
            raise UnknownNameError("H_cool basis", self.h_cool_basis, MARLIN_H_COOL_BASES)
        if not 0 <= self.phi < 1:
            raise ConfigError("phi must be in [0, 1)")
        if not np.all(np.asarray(self.cop_d) > 0):
            raise ConfigError("cop_d must be > 0")

    def factors(
        self,
        *,
        temp_c: ArrayLike,
        wetbulb_c: ArrayLike,
        carbon_intensity_g_per_kwh: ArrayLike,
        price_usd_per_kwh: ArrayLike,
        ewif_l_per_kwh: ArrayLike,
    ) -> FacilityFactors:
        # MARLIN uses a fixed COP_d per datacenter: the weather signals are not used.
        shape = np.broadcast_shapes(
            np.shape(temp_c),
            np.shape(wetbulb_c),
            np.shape(carbon_intensity_g_per_kwh),
            np.shape(price_usd_per_kwh),
            np.shape(ewif_l_per_kwh),
        )
        e_it = np.ones(shape)  # per kWh of IT energy
        e_crac = e_it / _f(self.cop_d)  # §3.3: E_CRAC = E_IT / COP_d
        e_cool = self.cooling_multiplier * e_crac  # §3.3: E_cool = 3 x E_CRAC
        e_infra = self.infra_fraction * e_it  # §3.3: E_infra = 0.13 x E_IT
        e_tot = e_it + e_cool + e_infra  # eq. 6
        cost = e_tot * _f(price_usd_per_kwh)  # eq. 7 (per datacenter and epoch)
        h_cool = {"it": e_it, "it+cooling": e_it + e_cool, "total": e_tot}[self.h_cool_basis]
        # §3.4: G_E = H_cool / J_water (kWh -> J, kg -> L)
        g_e = h_cool * _water.J_PER_KWH / self.latent_heat_j_per_kg / self.water_density_kg_per_l
        g_blow = g_e / (1.0 - self.phi)  # §3.4: G_blow = G_E / (1 - φ), as written
        g_grid = e_tot * _f(ewif_l_per_kwh)  # §3.4: G_grid = E_tot x GI_d
        # eq. 8: G_tot = G_E + G_blow + G_grid (on-site = G_E + G_blow, off-site = G_grid)
        ci = _f(carbon_intensity_g_per_kwh)
        z_grid = ci * e_tot  # §3.5: Z_grid = CI x E_tot
        z_pot = (g_blow + g_e) * self.ei_pot_kwh_per_l  # §3.5 (kWh)
        z_waste = g_grid * self.ei_waste_kwh_per_l  # §3.5 (kWh)
        z_g = (z_pot + z_waste) * ci  # eq. 9
        z_tot = z_grid + z_g  # eq. 10
        return _factors(
            cooling_kwh_per_it_kwh=e_cool,
            infra_kwh_per_it_kwh=e_infra,
            energy_kwh_per_it_kwh=e_tot,
            water_onsite_l_per_it_kwh=g_e + g_blow,
            water_offsite_l_per_it_kwh=g_grid,
            carbon_g_per_it_kwh=z_tot,
            cost_usd_per_it_kwh=cost,
        )


_PRESETS: dict[str, type[DefaultFacility] | type[MarlinFacility]] = {
    "default": DefaultFacility,
    "marlin": MarlinFacility,
}
FACILITY_PRESETS: tuple[str, ...] = tuple(_PRESETS)


def get_facility_model(
    name: str, *, regions: tuple[str, ...] | None = None, **overrides: Any
) -> FacilityModel:
    """Preset ``name`` ("default" or "marlin") with field overrides, e.g.
    ``get_facility_model("marlin", cop_d=4.0)`` or ``get_facility_model("default",
    plant="air-cooled")`` (a plant kind name or a ``CoolingPlant``).

    ``regions`` (the datacenters, in the order of the signals' last axis): for ``marlin``
    without a ``cop_d`` override, ``COP_d`` per datacenter from each site's climate
    (:func:`greenroute.physics.marlin_cop.sites_cop_d`); a ``cop_d`` sequence must have one
    value per region."""
    try:
        cls = _PRESETS[name]
    except KeyError:
        raise UnknownNameError("facility model", name, _PRESETS) from None
    if overrides.get("cop_d", 0.0) is None:  # None: the preset's own choice
        del overrides["cop_d"]
    if cls is MarlinFacility and regions is not None:
        if "cop_d" not in overrides:
            from greenroute.physics.marlin_cop import sites_cop_d

            overrides["cop_d"] = sites_cop_d(tuple(regions))
        elif np.ndim(overrides["cop_d"]) == 1:
            cop = tuple(float(c) for c in overrides["cop_d"])
            if len(cop) != len(regions):
                raise ConfigError(
                    f"cop_d has {len(cop)} values for {len(regions)} datacenters {list(regions)}"
                )
            overrides["cop_d"] = cop
    known = {f.name for f in dataclasses.fields(cls)} - {"name"}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(
            f"unknown {name!r} facility parameter(s) {unknown}; valid: {sorted(known)}"
        )
    if isinstance(overrides.get("plant"), str):
        overrides["plant"] = _cooling.get_cooling_plant(overrides["plant"])
    return cls(**overrides)


LEDGER_KEYS: tuple[str, ...] = (
    "it_energy_kwh",
    "cooling_energy_kwh",
    "infra_energy_kwh",
    "energy_kwh",
    "water_onsite_l",
    "water_offsite_l",
    "water_l",
    "carbon_g",
    "cost_usd",
)


def facility_ledger(it_kwh: ArrayLike, f: FacilityFactors) -> dict[str, np.ndarray]:
    """Multiply IT energy by the factors; ``energy_kwh`` is the total facility energy and
    ``water_l`` = on-site + off-site."""
    it = _f(it_kwh)
    onsite = it * f.water_onsite_l_per_it_kwh
    offsite = it * f.water_offsite_l_per_it_kwh
    return {
        "it_energy_kwh": it * np.ones_like(f.energy_kwh_per_it_kwh),
        "cooling_energy_kwh": it * f.cooling_kwh_per_it_kwh,
        "infra_energy_kwh": it * f.infra_kwh_per_it_kwh,
        "energy_kwh": it * f.energy_kwh_per_it_kwh,
        "water_onsite_l": onsite,
        "water_offsite_l": offsite,
        "water_l": onsite + offsite,
        "carbon_g": it * f.carbon_g_per_it_kwh,
        "cost_usd": it * f.cost_usd_per_it_kwh,
    }
