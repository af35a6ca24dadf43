"""Psychrometrics: wet-bulb temperature from dry-bulb temperature and relative humidity.

Stull, R. (2011), "Wet-Bulb Temperature from Relative Humidity and Air Temperature",
J. Appl. Meteor. Climatol. 50: 2267-2269, eq. (1): an empirical fit at standard sea-level
pressure (101.325 kPa), valid for RH 5-99 % and T -20..50 °C (errors -1 to +0.65 K; larger
where cold and dry coincide). Worked example in the paper: T = 20 °C, RH = 50 % -> 13.7 °C.

Out-of-range inputs: RH is clipped into [5, 99] % (weather files do report 100 % and values
below 5 %; outside the fit's range its polynomial-arctan terms are not meaningful, and the
clipped value changes the wet bulb by well under 1 K at 100 %). Temperature is *not* clipped
(clipping would be worse than a mildly extrapolated fit). The result is capped at the dry-bulb
temperature, which is a physical bound (Twb <= T) that the fit can overshoot by a few
hundredths of a kelvin near saturation, and by kelvins where it is cold and very dry.

Known limitation of the fit (not corrected here): below about 4 °C the fitted wet bulb is not
monotone in RH at low humidity (it dips by up to ~0.4 K). It is monotone in temperature.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

STULL_RH_MIN_PCT = 5.0  # Stull (2011): lower RH bound of the fit
STULL_RH_MAX_PCT = 99.0  # Stull (2011): upper RH bound of the fit
STULL_T_MIN_C = -20.0  # Stull (2011): lower temperature bound of the fit (documentation only)
STULL_T_MAX_C = 50.0  # Stull (2011): upper temperature bound of the fit (documentation only)

# Stull (2011) eq. (1) coefficients, as printed.
_C1 = 0.151977
_C2 = 8.313659
_C3 = 1.676331
_C4 = 0.00391838
_C5 = 0.023101
_C6 = 4.686035


def wet_bulb_stull_c(temp_c: ArrayLike, rh_pct: ArrayLike) -> np.ndarray:
    """Wet-bulb temperature (°C) by Stull (2011) eq. (1); broadcasts like numpy.

    ``rh_pct`` is relative humidity in percent (0-100); it is clipped into [5, 99] %.
    """
    t = np.asarray(temp_c, dtype=np.float64)
    rh = np.clip(np.asarray(rh_pct, dtype=np.float64), STULL_RH_MIN_PCT, STULL_RH_MAX_PCT)
    twb = (
        t * np.arctan(_C1 * np.sqrt(rh + _C2))
        + np.arctan(t + rh)
        - np.arctan(rh - _C3)
        + _C4 * rh**1.5 * np.arctan(_C5 * rh)
        - _C6
    )
    return np.minimum(twb, t)
