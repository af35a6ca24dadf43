"""Water: on-site (cooling tower evaporation + blowdown) and off-site (electricity generation).

On site, a wet cooling tower evaporates water to reject heat: the evaporated mass is the
latent part of the rejected heat divided by the latent heat of vaporisation. Dissolved solids
concentrate in the recirculating water, so part of it is bled off ("blowdown"): with ``CoC``
cycles of concentration, ``blowdown = evaporation / (CoC - 1)`` (mass balance of dissolved
solids, drift neglected; Li, Yang, Islam & Ren (2023), "Making AI Less 'Thirsty'",
arXiv:2304.03271, use CoC = 6).

Off site, generating electricity consumes water (mostly evaporation in thermal plants' cooling
systems): the energy-water intensity factor EWIF (L/kWh) of the grid mix.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numpy.typing import ArrayLike

from greenroute.core.errors import UnknownNameError

J_PER_KWH = 3.6e6  # 1 kWh = 3.6 MJ (SI)
L_PER_M3 = 1000.0

# Latent heat of vaporisation of water at 30 °C: 2429.8 kJ/kg (IAPWS-IF97 saturation
# properties, as tabulated e.g. in Çengel & Boles, "Thermodynamics", Table A-4). 30 °C is a
# typical cooling-tower water temperature.
LATENT_HEAT_VAPORIZATION_J_PER_KG = 2_429_800.0
# Density of liquid water at 30 °C: 995.65 kg/m3 (IAPWS-95; CRC Handbook of Chemistry and
# Physics), to turn evaporated mass into litres.
WATER_DENSITY_KG_PER_L = 0.99565

# Share of a wet tower's heat rejection that leaves as latent heat (the rest is sensible heat
# to the air). Industry rule of thumb: evaporation ≈ 0.00085 x circulation (gpm) x range (°F),
# versus 0.001 if all heat were latent, i.e. ~85 %. Engineering assumption (it varies ~75-95 %
# with season).
TOWER_LATENT_SHARE = 0.85

# Cycles of concentration: 6, as Li et al. (2023) and Li, Yang, Wierman & Ren (2023)
# arXiv:2307.05494 ("wCycle = 6" in their code).
CYCLES_OF_CONCENTRATION = 6.0

# Li et al.'s on-site WUE fit (PROVENANCE.md §4; Ren-Research/Environmentally-Equitable-AI
# utils/dataloader.py ``load_direct_WUE``): clipped below at 0.05 L/kWh ("we still need a little
# bit water for moisture").
LI2023_WUE_MIN_L_PER_KWH = 0.05

# 1 US gallon = 3.785411784 L exactly (NIST Handbook 44, Appendix C); 1 MWh = 1000 kWh.
L_PER_US_GAL = 3.785411784
GAL_PER_MWH_TO_L_PER_KWH = L_PER_US_GAL / 1000.0

# --- per-fuel factors, factor set "ren_glb2023" ---------------------------------------------
# Source: shared/data/water/ewif_by_fuel.csv (rows factor_set == "ren_glb2023"), i.e. the
# constants in Ren-Research/Environmentally-Equitable-AI utils/dataloader.py @182da36, which
# cite Macknick et al. (2012), Environ. Res. Lett. 7 045802 for water and "It's not easy being
# green" (SIGCOMM 2012) for carbon. NB: hydro's EWIF is 0 in this set (reservoir evaporation
# is not counted; Macknick's median for hydro is 4,491 gal/MWh).
EWIF_REN_GLB2023_GAL_PER_MWH: Final[dict[str, float]] = {
    "natural_gas": 300.0,
    "coal": 450.0,
    "nuclear": 600.0,
    "oil": 350.0,
    "other": 475.0,
    "solar": 0.0,
    "hydro": 0.0,
    "wind": 0.0,
}
CARBON_REN_GLB2023_KG_PER_KWH: Final[dict[str, float]] = {
    "natural_gas": 0.44,
    "coal": 0.968,
    "nuclear": 0.015,
    "oil": 0.89,
    "other": 0.45,
    "solar": 0.02,
    "hydro": 0.014,
    "wind": 0.023,
}
EWIF_FACTOR_SETS: tuple[str, ...] = ("ren_glb2023",)
G_PER_KG = 1000.0


def evaporation_l(heat_rejected_kwh: ArrayLike, evaporative_fraction: ArrayLike) -> np.ndarray:
    """Water evaporated (L) to reject ``heat_rejected_kwh`` of which ``evaporative_fraction``
    leaves as latent heat: ``Q x f x 3.6e6 / h_fg / rho``."""
    q_j = np.asarray(heat_rejected_kwh, dtype=np.float64) * J_PER_KWH
    f = np.asarray(evaporative_fraction, dtype=np.float64)
    return q_j * f / LATENT_HEAT_VAPORIZATION_J_PER_KG / WATER_DENSITY_KG_PER_L


def blowdown_l(
    evaporation_l: ArrayLike, cycles_of_concentration: float = CYCLES_OF_CONCENTRATION
) -> np.ndarray:
    """Blowdown (L) for an evaporation: ``E / (CoC - 1)`` (needs CoC > 1)."""
    if not cycles_of_concentration > 1:
        raise ValueError("cycles_of_concentration must be > 1")
    return np.asarray(evaporation_l, dtype=np.float64) / (cycles_of_concentration - 1.0)


def wue_li2023_l_per_kwh(
    wetbulb_c: ArrayLike, cycles: float = CYCLES_OF_CONCENTRATION
) -> np.ndarray:
    """Li et al.'s on-site WUE (L per kWh of IT energy) from the wet bulb (PROVENANCE.md §4):

    ``CoC/(CoC-1) x (6e-5 Tw^3 - 0.01 Tw^2 + 0.61 Tw - 10.4)`` with ``Tw`` in °F, then
    clipped at >= 0.05 L/kWh (the order of their code: scale, then clip).
    """
    if not cycles > 1:
        raise ValueError("cycles must be > 1")
    tw_f = np.asarray(wetbulb_c, dtype=np.float64) * 9.0 / 5.0 + 32.0
    poly = 6e-5 * tw_f**3 - 0.01 * tw_f**2 + 0.61 * tw_f - 10.4
    return np.maximum(cycles / (cycles - 1.0) * poly, LI2023_WUE_MIN_L_PER_KWH)


def _ren_glb2023_l_per_kwh(fuel: str) -> float:
    return EWIF_REN_GLB2023_GAL_PER_MWH[fuel] * GAL_PER_MWH_TO_L_PER_KWH


def ewif_l_per_kwh(
    ci_direct_g_per_kwh: ArrayLike,
    low_carbon_pct: ArrayLike,
    renewable_pct: ArrayLike,
    factor_set: str = "ren_glb2023",
) -> np.ndarray:
    """Hourly grid water intensity (L/kWh) from what the Electricity Maps CI files carry.

    The mix is split into three parts (percent clipped to [0, 100]):

    * fossil = 100 - low_carbon;
    * nuclear = max(low_carbon - renewable, 0) (low-carbon sources that are not renewable);
    * renewable = the rest (hydro, wind, solar, and biomass/geothermal: all EWIF 0 in this
      factor set).

    Fossil is split into coal and gas from its average emission factor, ``direct CI / fossil
    share`` (direct CI counts fossil combustion only): the coal share is
    ``(EF - EF_gas) / (EF_coal - EF_gas)`` clipped to [0, 1] with the set's coal (968 g/kWh)
    and gas (440 g/kWh) factors, so oil and "other" fossil are absorbed into the coal/gas
    interpolation. The EWIF is the share-weighted per-fuel EWIF (Li et al.'s
    ``Σ b_k EWIF_k / Σ b_k``).
    """
    if factor_set not in EWIF_FACTOR_SETS:
        raise UnknownNameError("EWIF factor set", factor_set, EWIF_FACTOR_SETS)
    ci = np.maximum(np.asarray(ci_direct_g_per_kwh, dtype=np.float64), 0.0)
    low = np.clip(np.asarray(low_carbon_pct, dtype=np.float64), 0.0, 100.0)
    ren = np.clip(np.asarray(renewable_pct, dtype=np.float64), 0.0, 100.0)
    fossil = (100.0 - low) / 100.0
    nuclear = np.maximum(low - ren, 0.0) / 100.0

    ef_gas = CARBON_REN_GLB2023_KG_PER_KWH["natural_gas"] * G_PER_KG
    ef_coal = CARBON_REN_GLB2023_KG_PER_KWH["coal"] * G_PER_KG
    with np.errstate(divide="ignore", invalid="ignore"):
        ef_fossil = np.where(fossil > 0, ci / np.where(fossil > 0, fossil, 1.0), ef_gas)
    coal_share = np.clip((ef_fossil - ef_gas) / (ef_coal - ef_gas), 0.0, 1.0)
    fossil_ewif = coal_share * _ren_glb2023_l_per_kwh("coal") + (
        1.0 - coal_share
    ) * _ren_glb2023_l_per_kwh("natural_gas")
    return fossil * fossil_ewif + nuclear * _ren_glb2023_l_per_kwh("nuclear")
