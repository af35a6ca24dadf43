"""Cooling plant efficiency versus outdoor conditions.

A chilled-water plant removes the IT heat. Its electrical energy per unit of heat removed is

    1 / COP = 1 / fans_pumps_cop + m(T) / chiller_cop(T)

* ``fans_pumps_cop``: CRAH fans, chilled/condenser-water pumps and heat-rejection fans, which
  run whatever the weather (the only load under full free cooling: a high COP).
* ``m(T)`` in [0, 1], the *mechanical fraction*: the share of the heat the chiller must lift.
  The economizer cools the returning chilled water to ``T + economizer_offset_k``; if that is at
  or below the chilled-water supply temperature the economizer carries the whole load
  (``m = 0``, full free cooling); if it is at or above the return temperature (supply + ΔT) it
  carries none (``m = 1``); in between the load splits linearly (partial economizer, as in
  ASHRAE 90.4's integrated-economizer credit).
* ``chiller_cop(T) = carnot_fraction x T_supply / (T_cond - T_supply)`` (kelvin), the Carnot
  COP between the chilled-water supply and the refrigerant condensing temperature
  ``T_cond = T + condensing_offset_k``, times a Carnot fraction calibrated to ASHRAE 90.1's
  minimum chiller efficiency at AHRI 550/590 rating conditions. The lift is floored at
  ``MIN_LIFT_K`` and the chiller COP at ``MIN_CHILLER_COP`` so the COP stays bounded for any
  input.

The driving temperature ``T`` is the **wet bulb** for the water-cooled plant (cooling tower +
waterside economizer) and the **dry bulb** for the air-cooled plant (air-cooled chiller +
dry-cooler economizer, no tower water). COP is continuous and non-increasing in ``T`` (``m``
and ``1/chiller_cop`` are both non-decreasing), and lies in (0, fans_pumps_cop].

Evaporation (used by ``facility``): the water-cooled plant's heat rejection is a hybrid
(wet/dry) closed-circuit cooler. When the dry bulb is low enough that the cooler run *dry*
returns water at or below the chilled-water supply (``T_db + dry_cooler_approach_k <=
supply``) no water evaporates; above ``supply + ΔT`` it runs fully wet; linear in between
(``evaporative_fraction``). Engineering assumption, documented so that "no evaporation in
cold weather" has a stated physical basis; set ``dry_cooler_approach_k=inf`` for an always-wet
tower. The air-cooled plant never evaporates water.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from greenroute.core.errors import ConfigError, UnknownNameError

KELVIN_OFFSET_K = 273.15  # 0 °C in kelvin (SI)

# --- chilled-water loop -------------------------------------------------------------------
# ASHRAE TC 9.9 "Thermal Guidelines for Data Processing Environments" (5th ed., 2021)
# recommends 18-27 °C server inlet air. A 15 °C chilled-water supply with a ~3 K coil approach
# keeps supply air at the bottom of that band. Engineering assumption (elevated-temperature
# chilled water is common in modern data centers).
CHW_SUPPLY_C = 15.0
# Supply-return temperature difference of the chilled-water loop: 6 K. Engineering assumption
# (typical data-center design ΔT of 5.5-8 K / 10-14 °F).
CHW_DELTA_T_K = 6.0

# --- water-cooled plant (cooling tower), driven by the wet bulb ----------------------------
# Cooling-tower approach to wet bulb: 7 °F = 3.9 K, the classic design (85 °F water at 78 °F
# wet bulb; CTI / ASHRAE Handbook—HVAC Systems and Equipment, "Cooling Towers").
TOWER_APPROACH_K = 3.9
# Condenser-water range: 10 °F = 5.6 K (AHRI 550/590 rating: 85 °F in, 95 °F out).
CONDENSER_WATER_RANGE_K = 5.6
# Refrigerant condensing temperature above the leaving condenser water: 1.5 K. Engineering
# assumption (1-2 K for modern high-efficiency shell-and-tube condensers).
CONDENSER_APPROACH_K = 1.5
# Waterside-economizer plate heat exchanger approach: 2 °F = 1.1 K. Engineering assumption
# (typical plate-and-frame design approach 1-3 °F).
WSE_HX_APPROACH_K = 1.1

# --- air-cooled plant, driven by the dry bulb ----------------------------------------------
# Air-cooled condenser: condensing temperature ~ 15 K (27 °F) above entering air. Engineering
# assumption within the usual 25-30 °F design temperature difference.
AIR_CONDENSER_APPROACH_K = 15.0
# Dry-cooler (glycol free-cooling coil) approach to dry bulb: 10 °F = 5.6 K. Engineering
# assumption; also used as the hybrid cooler's dry-mode approach in the water-cooled plant.
DRY_COOLER_APPROACH_K = 5.6

# --- Carnot fractions, calibrated at AHRI 550/590 standard rating conditions ---------------
AHRI_CHW_SUPPLY_C = 6.67  # 44 °F leaving chilled water (AHRI 550/590)
AHRI_ENTERING_CONDENSER_WATER_C = 29.44  # 85 °F (AHRI 550/590, water-cooled)
AHRI_ENTERING_AIR_C = 35.0  # 95 °F (AHRI 550/590, air-cooled)
# ASHRAE 90.1-2019 Table 6.8.1-3, path A full-load minimum efficiencies:
# water-cooled centrifugal >= 300 tons: 0.560 kW/ton -> COP = 3.517 / 0.560 = 6.28;
# air-cooled >= 150 tons: 10.1 EER -> COP = 10.1 / 3.412 = 2.96.
KW_PER_TON_REFRIGERATION = 3.517  # 12,000 Btu/h (definition of the ton of refrigeration)
BTU_PER_WH = 3.412  # 1 Wh = 3.412 Btu
ASHRAE_901_WATER_COOLED_MIN_COP = KW_PER_TON_REFRIGERATION / 0.560
ASHRAE_901_AIR_COOLED_MIN_COP = 10.1 / BTU_PER_WH


def _carnot_cop(cold_c: float, hot_c: float) -> float:
    return (cold_c + KELVIN_OFFSET_K) / (hot_c - cold_c)


# Carnot fraction = rated COP / Carnot COP at the rating point (≈ 0.67 and ≈ 0.46).
WATER_COOLED_CARNOT_FRACTION = ASHRAE_901_WATER_COOLED_MIN_COP / _carnot_cop(
    AHRI_CHW_SUPPLY_C,
    AHRI_ENTERING_CONDENSER_WATER_C + CONDENSER_WATER_RANGE_K + CONDENSER_APPROACH_K,
)
AIR_COOLED_CARNOT_FRACTION = ASHRAE_901_AIR_COOLED_MIN_COP / _carnot_cop(
    AHRI_CHW_SUPPLY_C, AHRI_ENTERING_AIR_C + AIR_CONDENSER_APPROACH_K
)

# Fans + pumps: 1/15 ≈ 6.7 % of the heat load. Engineering assumption, chosen so that a plant
# in full free cooling with ~5 % electrical losses has PUE ≈ 1.12, the level hyperscale
# operators report for their best sites (e.g. Google fleet-wide trailing-twelve-month PUE 1.10,
# 2023 Environmental Report).
FANS_PUMPS_COP = 15.0

# Bounds that keep COP finite for any input: minimum compressor lift 10 K (centrifugal chillers
# need a minimum lift to avoid surge; engineering assumption) and chiller COP >= 1.
MIN_LIFT_K = 10.0
MIN_CHILLER_COP = 1.0

COOLING_KINDS: tuple[str, ...] = ("water-cooled", "air-cooled")


@dataclass(frozen=True)
class CoolingPlant:
    """A chilled-water cooling plant; see the module docstring for the model."""

    kind: str = "water-cooled"
    chw_supply_c: float = CHW_SUPPLY_C
    chw_delta_t_k: float = CHW_DELTA_T_K
    condensing_offset_k: float = TOWER_APPROACH_K + CONDENSER_WATER_RANGE_K + CONDENSER_APPROACH_K
    economizer_offset_k: float = TOWER_APPROACH_K + WSE_HX_APPROACH_K
    carnot_fraction: float = WATER_COOLED_CARNOT_FRACTION
    fans_pumps_cop: float = FANS_PUMPS_COP
    dry_cooler_approach_k: float = DRY_COOLER_APPROACH_K  # hybrid cooler dry mode (water-cooled)

    def __post_init__(self) -> None:
        if self.kind not in COOLING_KINDS:
            raise UnknownNameError("cooling plant kind", self.kind, COOLING_KINDS)
        if not self.chw_delta_t_k > 0:
            raise ConfigError("chw_delta_t_k must be > 0")
        if not 0 < self.carnot_fraction <= 1:
            raise ConfigError("carnot_fraction must be in (0, 1]")
        if not self.fans_pumps_cop > 0:
            raise ConfigError("fans_pumps_cop must be > 0")

    @property
    def evaporative(self) -> bool:
        """Whether the plant rejects heat by evaporating water (cooling tower)."""
        return self.kind == "water-cooled"


WATER_COOLED = CoolingPlant()
AIR_COOLED = CoolingPlant(
    kind="air-cooled",
    condensing_offset_k=AIR_CONDENSER_APPROACH_K,
    economizer_offset_k=DRY_COOLER_APPROACH_K,
    carnot_fraction=AIR_COOLED_CARNOT_FRACTION,
    dry_cooler_approach_k=math.inf,  # unused: an air-cooled plant has no tower water
)
COOLING_PLANTS: dict[str, CoolingPlant] = {"water-cooled": WATER_COOLED, "air-cooled": AIR_COOLED}


def get_cooling_plant(kind: str, **overrides: float) -> CoolingPlant:
    """The preset plant ``kind`` with optional field overrides."""
    try:
        plant = COOLING_PLANTS[kind]
    except KeyError:
        raise UnknownNameError("cooling plant", kind, COOLING_PLANTS) from None
    try:
        return replace(plant, **overrides)
    except TypeError as err:
        raise ConfigError(f"bad cooling plant override: {err}") from None


def driving_temp_c(plant: CoolingPlant, temp_c: ArrayLike, wetbulb_c: ArrayLike) -> np.ndarray:
    """Wet bulb for a water-cooled plant, dry bulb for an air-cooled one (broadcast together)."""
    t, wb = np.broadcast_arrays(
        np.asarray(temp_c, dtype=np.float64), np.asarray(wetbulb_c, dtype=np.float64)
    )
    return np.array(wb if plant.kind == "water-cooled" else t, dtype=np.float64)


def mechanical_fraction(plant: CoolingPlant, temp_c: ArrayLike, wetbulb_c: ArrayLike) -> np.ndarray:
    """Share of the heat load the chiller must carry (0 = full free cooling)."""
    drive = driving_temp_c(plant, temp_c, wetbulb_c)
    econ_water_c = drive + plant.economizer_offset_k
    return np.clip((econ_water_c - plant.chw_supply_c) / plant.chw_delta_t_k, 0.0, 1.0)


def chiller_cop(plant: CoolingPlant, temp_c: ArrayLike, wetbulb_c: ArrayLike) -> np.ndarray:
    """Compressor COP: Carnot fraction x Carnot COP(supply -> condensing), bounded."""
    drive = driving_temp_c(plant, temp_c, wetbulb_c)
    lift_k = np.maximum(drive + plant.condensing_offset_k - plant.chw_supply_c, MIN_LIFT_K)
    carnot = (plant.chw_supply_c + KELVIN_OFFSET_K) / lift_k
    return np.maximum(plant.carnot_fraction * carnot, MIN_CHILLER_COP)


def compressor_kwh_per_kwh(
    plant: CoolingPlant, temp_c: ArrayLike, wetbulb_c: ArrayLike
) -> np.ndarray:
    """Compressor electricity per kWh of heat removed: ``m(T) / chiller_cop(T)``."""
    return mechanical_fraction(plant, temp_c, wetbulb_c) / chiller_cop(plant, temp_c, wetbulb_c)


def cop(plant: CoolingPlant, temp_c: ArrayLike, wetbulb_c: ArrayLike) -> np.ndarray:
    """Whole-plant COP (heat removed / cooling electricity); broadcasts ``temp_c, wetbulb_c``."""
    per_kwh = 1.0 / plant.fans_pumps_cop + compressor_kwh_per_kwh(plant, temp_c, wetbulb_c)
    return 1.0 / per_kwh


def evaporative_fraction(
    plant: CoolingPlant, temp_c: ArrayLike, wetbulb_c: ArrayLike
) -> np.ndarray:
    """Share of the rejected heat that leaves by evaporation (0 = dry; see module docstring)."""
    t, _ = np.broadcast_arrays(
        np.asarray(temp_c, dtype=np.float64), np.asarray(wetbulb_c, dtype=np.float64)
    )
    if not plant.evaporative:
        return np.zeros(t.shape, dtype=np.float64)
    dry_water_c = t + plant.dry_cooler_approach_k
    return np.clip((dry_water_c - plant.chw_supply_c) / plant.chw_delta_t_k, 0.0, 1.0)


def cooling_energy_kwh(it_kwh: ArrayLike, cop_value: ArrayLike) -> np.ndarray:
    """Cooling electricity for ``it_kwh`` of IT heat: ``it_kwh / COP``."""
    return np.asarray(it_kwh, dtype=np.float64) / np.asarray(cop_value, dtype=np.float64)


def crac_cop_moore2005(supply_temp_c: ArrayLike) -> np.ndarray:
    """HP Labs' chilled-water CRAC COP curve (Moore, Chase, Ranganathan & Sharma, "Making
    Scheduling 'Cool': Temperature-Aware Workload Placement in Data Centers", USENIX ATC 2005):
    ``COP(T) = 0.0068 T^2 + 0.0008 T + 0.458`` with ``T`` the CRAC supply air temperature (°C).
    Used for the MARLIN preset's default ``COP_d``."""
    t = np.asarray(supply_temp_c, dtype=np.float64)
    return 0.0068 * t**2 + 0.0008 * t + 0.458
