"""MARLIN's per-datacenter cooling efficiency ``COP_d`` derived from each site's climate.

Seed 001 §3.3: "CRAC efficiency (COP) varies by datacenter, COP_d"; ``E_CRAC = E_IT / COP_d``
and ``E_cool = 3 x E_CRAC``. The paper gives no values and no sites. §3.2 says the halls use
"conventional air cooling [21]" with CRAC units, so we read a CRAC as a direct-expansion unit
that rejects its heat to outdoor air: its COP falls as the outdoor dry bulb rises.

Derivation (our reading, documented so it can be replaced; a scenario may set ``COP_d``
directly with ``Scenario.cop_d``):

1. COP at outdoor dry bulb ``T``: the package's air-cooled chiller curve
   (:func:`greenroute.physics.cooling.chiller_cop`): Carnot COP between the evaporator at the
   AHRI 550/590 rating leaving-chilled-water temperature (6.67 °C) and a condenser
   ``AIR_CONDENSER_APPROACH_K`` = 15 K above the outdoor air, times the Carnot fraction that
   makes it equal ASHRAE 90.1-2019's minimum full-load efficiency of an air-cooled chiller
   (10.1 EER = COP 2.96) at the AHRI rating air temperature (35 °C). So
   ``COP(T) = 0.4584 x 279.82 / (T + 15 - 6.67)`` (lift floored at 10 K, COP at 1).
2. Site climate: the 12 x 24 (month x UTC hour) mean dry bulb of 2021-2024 (Open-Meteo, shipped
   as ``greenroute/data/embedded/signal_profiles.npz``; shared/data/PROVENANCE.md §2).
3. ``COP_d`` = the COP that gives the same annual CRAC energy at constant IT load: the
   harmonic mean of ``COP(T_month,hour)`` weighted by the hours of each month (365-day year).

Regions without embedded profiles (user regions) fall back to the preset's fixed default
(:data:`greenroute.physics.facility.MARLIN_DEFAULT_COP_D`, HP Labs' CRAC curve at 25 °C).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike

from greenroute.physics import cooling as _cooling

# Days per calendar month of a 365-day year (Gregorian calendar): month weights of the climate.
DAYS_PER_MONTH: tuple[int, ...] = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# The CRAC as an air-cooled DX unit evaporating at the AHRI 550/590 rating chilled-water
# temperature: at that evaporator temperature the Carnot fraction of the package's air-cooled
# plant reproduces ASHRAE 90.1's rated minimum COP 2.96 at 35 °C outdoor air exactly.
MARLIN_CRAC_PLANT = replace(_cooling.AIR_COOLED, chw_supply_c=_cooling.AHRI_CHW_SUPPLY_C)


def crac_cop_at_dry_bulb(temp_c: ArrayLike) -> np.ndarray:
    """Step 1 of the module docstring: the CRAC COP at outdoor dry bulb ``temp_c`` (°C)."""
    t = np.asarray(temp_c, dtype=np.float64)
    return _cooling.chiller_cop(MARLIN_CRAC_PLANT, t, t)


def climate_cop(month_hour_temp_c: ArrayLike) -> float:
    """Steps 1 and 3: annual-energy-equivalent COP of a ``[12, H]`` month x hour mean dry bulb
    table (each month weighted by its days, hours equally)."""
    t = np.asarray(month_hour_temp_c, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] != 12:
        raise ValueError(f"need a [12, hours] month x hour table, got shape {t.shape}")
    w = np.asarray(DAYS_PER_MONTH, dtype=np.float64)[:, None] * np.ones_like(t)
    w /= w.sum()
    return float(1.0 / np.sum(w / crac_cop_at_dry_bulb(t)))


def site_cop_d(region: str) -> float:
    """``COP_d`` of ``region`` from its embedded climate (module docstring), or the preset's
    default for regions without embedded profiles."""
    from greenroute.data.profiles import embedded_regions, load_profiles
    from greenroute.physics.facility import MARLIN_DEFAULT_COP_D

    if region not in embedded_regions():
        return MARLIN_DEFAULT_COP_D
    return climate_cop(load_profiles().mean(region, "temp_c"))


def sites_cop_d(regions: Sequence[str]) -> tuple[float, ...]:
    """``COP_d`` of each region (a ``[R]`` tuple that broadcasts over ``[T, R]`` signals)."""
    return tuple(site_cop_d(r) for r in regions)
