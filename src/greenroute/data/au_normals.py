"""Five Australian capitals built from published figures (seed 004, "au-edge"), and their
hourly synthesiser.

Seed 004 (temperature-aware LLM scheduling over Australian edge datacenters) only survives as
an abstract; its point is the spread of ambient temperature between sites. ``shared/data`` has
hourly series for AU-NSW (Sydney) and AU-VIC (Melbourne) only, so Brisbane, Adelaide, Perth,
Hobart and Darwin are synthesised here from:

* **climate**: Bureau of Meteorology (BoM) "Climate statistics for Australian locations",
  monthly mean daily maximum / minimum temperature and mean 9 am / 3 pm relative humidity of
  one station per city (:data:`CITY_NORMALS`, station name and number in each entry);
* **grid carbon intensity**: the Australian Government's *National Greenhouse Accounts
  Factors* (NGA), scope 2 location-based electricity factors (:data:`GRID_FIGURES`);
* **renewable share**: state shares of electricity from renewables (Climate Council);
* **price**: AEMO regional wholesale averages for the NEM states (QLD, SA, TAS); published
  retail tariffs for WA (outside the NEM: the WEM) and the NT (Darwin-Katherine system).

Where a figure could be checked against a retrieved copy of its source the entry says so; the
rest were typed from BoM's / the publisher's tables from memory and are marked *not
re-verified*. Rounding: temperatures to 0.1 °C and humidity to 1 % as BoM publishes them, but
un-verified values may be off by a few tenths of a degree / a few percent.

Verification against BoM (issue 11, seed 004). BoM's own station pages
(``bom.gov.au/climate/averages/tables/cw_<station>.shtml``) could not be retrieved with the
tools this project may use (a search index of public pages, and GitHub snapshots). What could:

* **checked, 21 values**: the March-September *mean maximum* of Brisbane 040913, Adelaide
  023000 and Hobart 094029, against BoM's tables as fetched on 2026-10-06 and transcribed in a
  public repository (:data:`BOM_MEAN_MAX_CROSSCHECK`, source there). All agree within 0.3 °C
  (largest: Adelaide March 26.4 vs 26.1, Brisbane August 23.2 vs 23.5); Hobart's are all 0.1 °C
  below BoM's current table (its record now runs to 2026). Kept as typed; the test
  ``tests/test_seed004_normals.py`` pins the agreement.
* **corroborated only**: Darwin's monthly mean maxima are within 0.2 °C of a third-party
  "BOM stats by capital city" table (station not named); Brisbane's minima differ by up to
  0.8 °C (May-October) from a reproduction of BoM 040913 for 1999-2017 (a shorter period),
  so they are *not* verified.
* **still unverified** (typed from memory, as before): every 9 am / 3 pm relative humidity
  (5 cities x 24 values); Brisbane's maxima of January, February and October-December and
  all 12 of its minima; Adelaide's maxima of January, February, October and November and its
  minima but April and August; Hobart's maxima of February, October and November and its
  minima but January and December; all 24 of Darwin's temperatures. Perth's temperatures
  were checked against a copy (see its entry); Perth Metro 009225 is not in the cross-check,
  which has Perth Airport 009021, a different station.

Hourly model (:func:`hourly_signals`)
-------------------------------------
Temperature: daily normals of max and min are a mean-preserving piecewise-linear curve
through mid-month anchors (the monthly means of the curve equal the published monthly means
exactly, see :func:`daily_normal`); within a day the temperature follows two half-cosines from
the mean minimum at :data:`T_MIN_HOUR` (around sunrise) up to the mean maximum at
:data:`T_MAX_HOUR` and back (local *standard* time: the sun, not the clock, drives it). The
shape averages exactly 0.5 over a day's hourly samples, so the hourly mean of a month is
(mean max + mean min) / 2. On top, a seeded AR(1) day-to-day anomaly (:class:`AnomalySpec`:
the standard deviation and lag-1 autocorrelation of *daily mean* anomalies, fitted on the real
Sydney and Melbourne series). It is drawn as one value per local day at noon, linearly
interpolated between days so there are no jumps at midnight; the noon process is made slightly
rougher than the spec so that the daily means have the documented sigma and phi.
Relative humidity is interpolated between (and extrapolated beyond) the 9 am and 3 pm normals
along the same diurnal shape: humid at dawn, driest mid-afternoon. It carries no anomaly.

Grid: the hourly carbon intensity is the cited annual factor times a *shape*: the hourly
carbon intensity of AU-NSW or AU-VIC (:attr:`GridFigures.shape_source`), read at the same
local clock time (Perth 14:00 takes Sydney's 14:00), divided by its mean over the target's UTC
calendar year. The annual mean therefore equals the published factor exactly while the
diurnal / seasonal / weather-driven variation is that of a real Australian grid. Renewable
(= low-carbon: Australia has no nuclear) share is derived from the same shape, consistently
with the intensity: ``r(t) = max(0, 100 - a x shape(t))`` % (fossil share proportional to
intensity; ``a = 100 - R`` unless the bound bites), with ``a`` solved so that the annual mean is
the published share ``R`` exactly. NEM prices use the source's price shape the
same way, scaled to the cited average; WA and NT prices are the cited tariffs.

Where the borrowed shapes come from: the signal hook receives ``(region, start, hours, seed)``
only, not the run's ``--data-dir``. We therefore use ``resolve_data_dir(None)``, i.e. the real
AU-NSW/AU-VIC files when ``$GREENROUTE_DATA_DIR`` is set (and covers the year), else the
embedded synthetic AU-NSW/AU-VIC series (:func:`~greenroute.data.synth_signals.
synthesize_region_signals`, seeded by the run's signal seed), so the scenario runs anywhere.
A run given ``--data-dir`` without the environment variable gets real data for Sydney and
Melbourne and embedded shapes for the five synthesised cities.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import signal as sp_signal

from greenroute.catalog.regions import NORMALS_REGIONS, Region
from greenroute.core.errors import UnknownNameError
from greenroute.data.grid_loaders import AUD_TO_USD, HOURLY_COLUMNS, KWH_PER_MWH

__all__ = [
    "AUD_TO_USD",
    "AU_REGIONS",
    "CITY_NORMALS",
    "GRID_FIGURES",
    "T_MAX_HOUR",
    "T_MIN_HOUR",
    "AnomalySpec",
    "CityNormals",
    "GridFigures",
    "daily_normal",
    "diurnal_shape",
    "hourly_signals",
    "hourly_weather",
]


# AUD figures below are converted with the fixed rate SustainCluster used for all its
# standardized prices (data/signals.AUD_TO_USD) so that they sit on the same footing as the
# project's other prices.
GST_FACTOR = 1.10  # Australian GST is 10 %; tariffs quoted "inc. GST" are divided by this
CENTS_PER_DOLLAR = 100.0

# Diurnal temperature shape: mean minimum around sunrise, mean maximum mid-afternoon (local
# standard time). 06:00 is the brief's sunrise anchor; 14:00 is the hour of the mean diurnal
# maximum of the real Open-Meteo series of AU-NSW (13 h) and AU-VIC (14 h) in shared/data,
# 2021-2024 (the same series puts the minimum at 05 h).
T_MIN_HOUR = 6.0
T_MAX_HOUR = 14.0
RH_AM_HOUR = 9.0  # BoM's 9 am and 3 pm observations
RH_PM_HOUR = 15.0

# Physical clips of the synthetic weather.
TEMP_RANGE_C = (-20.0, 50.0)
RH_RANGE_PCT = (1.0, 100.0)  # same floor as greenroute.data.profiles.PHYSICAL_BOUNDS

_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # 365-day reference year
_HOURS_PAD = 6  # borrowed series are read up to 3 h either side of the target hour


# =============================================================================================
# Published figures
# =============================================================================================
@dataclass(frozen=True)
class AnomalySpec:
    """Day-to-day temperature anomaly: AR(1) on daily means, ``a[d] = phi a[d-1] + e[d]``,
    stationary standard deviation ``sigma_c``."""

    sigma_c: float
    phi: float
    basis: str


# Fitted on shared/data (Open-Meteo hourly 2 m temperature, 2021-01-01 .. 2024-12-31 12:00 UTC):
# daily means over local standard days, minus their calendar-month mean; sd and lag-1
# autocorrelation of what is left (tests/test_scenarios_extra.py recomputes them).
SYDNEY_ANOMALY = AnomalySpec(2.07, 0.64, "fitted on AU-NSW (Sydney) daily means 2021-2024")
MELBOURNE_ANOMALY = AnomalySpec(2.68, 0.61, "fitted on AU-VIC (Melbourne) daily means 2021-2024")


@dataclass(frozen=True)
class CityNormals:
    """BoM monthly climate normals of one station (January first)."""

    key: str  # catalog region key
    city: str
    station: str  # BoM station name and number
    std_utc_offset_h: float  # local standard time (no daylight saving) minus UTC
    tmax_c: tuple[float, ...]  # mean daily maximum temperature
    tmin_c: tuple[float, ...]  # mean daily minimum temperature
    rh9_pct: tuple[float, ...]  # mean 9 am relative humidity
    rh15_pct: tuple[float, ...]  # mean 3 pm relative humidity
    anomaly: AnomalySpec
    source: str

    def __post_init__(self) -> None:
        for name in ("tmax_c", "tmin_c", "rh9_pct", "rh15_pct"):
            if len(getattr(self, name)) != 12:
                raise ValueError(f"{self.key}.{name} needs 12 monthly values")
        if any(hi <= lo for hi, lo in zip(self.tmax_c, self.tmin_c, strict=True)):
            raise ValueError(f"{self.key}: mean max must exceed mean min every month")

    @property
    def tmean_c(self) -> np.ndarray:
        return (np.asarray(self.tmax_c) + np.asarray(self.tmin_c)) / 2.0


_BOM = "BoM, Climate statistics for Australian locations, monthly statistics, station "
_TYPED = "typed from BoM climate averages; not re-verified"

CITY_NORMALS: dict[str, CityNormals] = {
    c.key: c
    for c in (
        CityNormals(
            "AU-QLD-BNE", "Brisbane", "Brisbane, 040913", 10.0,
            tmax_c=(30.3, 30.1, 29.0, 27.1, 24.6, 22.2, 21.9, 23.2, 25.8, 27.2, 28.6, 29.6),
            tmin_c=(21.5, 21.4, 20.2, 17.6, 14.3, 12.0, 10.8, 11.6, 14.3, 16.6, 18.9, 20.6),
            rh9_pct=(66, 68, 68, 64, 64, 65, 60, 55, 55, 58, 62, 64),
            rh15_pct=(58, 60, 58, 54, 52, 51, 45, 43, 47, 53, 57, 58),
            anomaly=SYDNEY_ANOMALY,  # east-coast subtropical/temperate maritime analogue (Cfa)
            source=_BOM + "040913 (Brisbane). " + _TYPED + "; the annual means of these "
            "values (max 26.6, min 16.6 °C) match the annual figures quoted from BoM's "
            "cw_040913 page",
        ),
        CityNormals(
            "AU-SA-ADL", "Adelaide", "Adelaide (West Terrace / ngayirdapira), 023000", 9.5,
            tmax_c=(29.4, 29.5, 26.4, 22.2, 18.7, 15.8, 15.2, 16.1, 18.4, 21.4, 24.6, 26.9),
            tmin_c=(17.2, 17.3, 15.4, 12.8, 10.5, 8.5, 7.8, 8.0, 9.7, 11.4, 13.9, 15.6),
            rh9_pct=(48, 50, 53, 60, 71, 78, 78, 71, 63, 53, 50, 47),
            rh15_pct=(30, 31, 34, 40, 50, 57, 56, 51, 46, 38, 35, 32),
            anomaly=MELBOURNE_ANOMALY,  # southern, frontal (westerly) regime
            source=_BOM + "023000. Apr max/min 22.2/12.8, Aug 16.1/8.0, Sep max 18.4 and "
            "Dec max 26.9 °C are the long-term averages quoted in BoM's Greater Adelaide "
            "monthly climate summaries (Apr, Aug, Sep 2023; Dec 2022); the other values are "
            + _TYPED,
        ),
        CityNormals(
            "AU-WA-PER", "Perth", "Perth Metro, 009225", 8.0,
            tmax_c=(30.8, 31.3, 29.5, 25.6, 22.4, 19.3, 18.3, 18.8, 20.1, 23.0, 26.4, 28.8),
            tmin_c=(17.8, 18.1, 16.5, 13.6, 10.6, 8.5, 7.8, 8.1, 9.4, 11.2, 14.2, 16.2),
            rh9_pct=(47, 47, 51, 58, 67, 74, 76, 72, 66, 57, 51, 48),
            rh15_pct=(39, 38, 41, 47, 53, 60, 60, 57, 55, 50, 45, 41),
            anomaly=MELBOURNE_ANOMALY,  # southern, frontal (westerly) regime
            source=_BOM + "009225 (Perth Metro; station inferred from the 1993- period), "
            "temperatures 1993-2010 as reproduced in a climate table citing BoM (checked "
            "against that copy); humidity " + _TYPED,
        ),
        CityNormals(
            "AU-TAS-HBA", "Hobart", "Hobart (Ellerslie Road), 094029", 10.0,
            tmax_c=(21.7, 21.7, 20.2, 17.3, 14.5, 12.0, 11.7, 13.1, 15.1, 17.0, 18.8, 20.4),
            tmin_c=(12.0, 12.1, 10.9, 9.1, 7.2, 5.2, 4.6, 5.2, 6.4, 7.8, 9.4, 10.8),
            rh9_pct=(61, 65, 67, 71, 76, 79, 77, 72, 65, 61, 60, 59),
            rh15_pct=(50, 52, 53, 56, 61, 65, 63, 57, 53, 52, 53, 51),
            anomaly=MELBOURNE_ANOMALY,  # southern, frontal (westerly) regime
            source=_BOM + "094029. Jan max/min 21.7/12.0 (1883-2017) and Dec 20.4/10.8 °C "
            "(1882-2016) match the station averages quoted in published daily-observation "
            "summaries for Hobart; the other values are " + _TYPED,
        ),
        CityNormals(
            "AU-NT-DRW", "Darwin", "Darwin Airport, 014015", 9.5,
            tmax_c=(31.8, 31.4, 31.9, 32.7, 32.0, 30.6, 30.5, 31.3, 32.5, 33.2, 33.3, 32.6),
            tmin_c=(24.8, 24.7, 24.5, 24.0, 22.1, 19.9, 19.3, 20.4, 23.0, 24.9, 25.3, 25.3),
            rh9_pct=(82, 84, 83, 74, 64, 61, 62, 67, 70, 70, 73, 77),
            rh15_pct=(70, 72, 67, 52, 43, 38, 36, 40, 47, 53, 58, 64),
            # Tropical maritime air, no frontal passages: much smaller day-to-day swings than
            # the southern cities. sigma is an assumption (no Darwin series in shared/data);
            # phi as Sydney's.
            anomaly=AnomalySpec(1.0, 0.64, "assumed (tropical; no data to fit)"),
            source=_BOM + "014015. " + _TYPED,
        ),
    )
}  # fmt: skip


# BoM "Mean maximum temperature (°C)", March to September, as fetched from
# bom.gov.au/climate/averages/tables/cw_<station>.shtml on 2026-10-06 and transcribed in the
# public repository gabebartolo-spec/Afl-auto-battler, data/weather_by_venue.json (commit
# a7fd0717; station 040913 "max 1999-2026", 023000 "max 1887-2026", 094029 "max 1882-2026").
# A cross-check of CITY_NORMALS, not an input of the model.
BOM_MEAN_MAX_CROSSCHECK: dict[str, tuple[float, ...]] = {
    "AU-QLD-BNE": (29.2, 27.2, 24.5, 22.1, 22.0, 23.5, 25.7),
    "AU-SA-ADL": (26.1, 22.2, 18.6, 15.8, 15.0, 16.1, 18.5),
    "AU-TAS-HBA": (20.3, 17.4, 14.6, 12.1, 11.8, 13.2, 15.2),
}
CROSSCHECK_MONTHS = slice(2, 9)  # March .. September


@dataclass(frozen=True)
class GridFigures:
    """Published annual grid figures of one state's grid, and how prices are formed."""

    key: str
    grid: str
    ef_kg_per_kwh: float  # NGA scope 2 factor = annual mean direct carbon intensity
    renewable_share_pct: float
    shape_source: str  # AU-NSW or AU-VIC: whose hourly shapes are borrowed
    price_kind: str  # "nem" (borrowed shape x level), "tou" or "flat" (tariffs)
    price_aud_per_kwh: float  # nem: annual level; flat: the rate; tou: off-peak rate
    peak_aud_per_kwh: float = 0.0  # tou only
    peak_hours: tuple[float, float] = (0.0, 0.0)  # tou only: [start, end) local, weekdays
    source: str = ""


# NGA: Australian Government DCCEEW, "National Greenhouse Accounts Factors 2024", Table 1
# (scope 2 and 3 emission factors for consumption of purchased electricity from the grid,
# location-based), kg CO2-e/kWh: NSW & ACT 0.66, Vic 0.77, Qld 0.71, SA 0.23, WA (SWIS) 0.51,
# Tas 0.15, NT (DKIS) 0.56. Read from a structured copy of the 2024 edition (a CC BY 4.0 JSON
# transcription on Hugging Face, "national-greenhouse-accounts-factors-2024"), not the PDF.
# NB: these are higher than Electricity Maps' direct intensity used for AU-NSW/AU-VIC in
# shared/data (2023 means 502 and 458 g/kWh vs NGA 660 and 770; the NGA factors are
# consumption-based state averages built from earlier years' generation data, a different
# method and period). The five synthesised cities therefore look ~1.3-1.7x dirtier relative
# to Sydney/Melbourne than a like-for-like source would show. Measured (2024, real data) by
# ``python -m greenroute.bench.seed004_carbon``: NGA / Electricity Maps = 1.32 for NSW and 1.69
# for VIC; with one source for all seven the sites' carbon ranking changes (e.g. Melbourne is
# 0.91x Sydney as mixed, 1.17x with NGA for both; Brisbane 1.42x as mixed, 1.08x like-for-like).
_NGA = "NGA Factors 2024, Table 1 (scope 2)"
# Renewable shares: Climate Council, "Race to the Top: Australia's Clean Energy Momentum"
# (2024), as reported by pv magazine Australia (2024-09-04): Tas 98 %, SA 74.4 %, Qld 27 %,
# WA 17.6 %, NT 6.7 % of electricity from renewables (whole states: WA's figure includes the
# gas-fired Pilbara/NWIS and off-grid mining, so the SWIS share is higher than 17.6 %).
_CC = "Climate Council Race to the Top 2024"
# NEM wholesale levels, A$/MWh: AEMO Quarterly Energy Dynamics regional average prices,
# Q2 2023 (AEMO media release 27 Jul 2023: Qld 126, SA 124, Tas 64; NSW 137, Vic 89) and
# Q3 2023 (AEMO media release on QED Q3 2023: Qld 65, SA 92, Tas 29; NSW 81, Vic 49). Only
# these two quarters could be verified, so their mean stands in for the annual average: Qld
# 95.5, SA 108.0, Tas 46.5 A$/MWh. (The AU-NSW/AU-VIC price files in shared/data reproduce the
# NSW/Vic figures of those quarters to within 1 A$/MWh *as numbers in their "USD/MWh" column*:
# the files appear to hold A$ unconverted. Reported; not compensated here.)
_AEMO = "AEMO QED Q2+Q3 2023 regional average (A$/MWh)"
# WA: Synergy "Large Business Demand HV" tariff (formerly T1), effective 1 March 2022, inc.
# GST: peak 18.8935, off-peak 12.5654 c/kWh (synergy.net.au tariff page). Demand, fixed and
# power-factor charges are left out (the simulator prices energy only). Peak window typed from
# memory of Synergy's tariff conditions (weekdays 08:00-22:00 local), not re-verified.
# NT: Jacana Energy large-user regulated tariff, 1 Jul 2025 - 30 Jun 2026: 33.37363 c/kWh ex
# GST, flat (jacanaenergy.com.au/large-user; set 5 % above the standard commercial tariff).
# Both are *retail* tariffs (network and retail costs included), unlike the NEM wholesale
# levels: WA and NT look expensive next to the NEM sites for that reason.
GRID_FIGURES: dict[str, GridFigures] = {
    g.key: g
    for g in (
        GridFigures("AU-QLD-BNE", "NEM Queensland", 0.71, 27.0, "AU-NSW", "nem",
                    95.5 / KWH_PER_MWH, source=f"{_NGA}; {_CC}; {_AEMO}"),
        GridFigures("AU-SA-ADL", "NEM South Australia", 0.23, 74.4, "AU-VIC", "nem",
                    108.0 / KWH_PER_MWH, source=f"{_NGA}; {_CC}; {_AEMO}"),
        GridFigures("AU-TAS-HBA", "NEM Tasmania", 0.15, 98.0, "AU-VIC", "nem",
                    46.5 / KWH_PER_MWH, source=f"{_NGA}; {_CC}; {_AEMO}"),
        GridFigures("AU-WA-PER", "WEM / SWIS", 0.51, 17.6, "AU-NSW", "tou",
                    12.5654 / CENTS_PER_DOLLAR / GST_FACTOR,
                    peak_aud_per_kwh=18.8935 / CENTS_PER_DOLLAR / GST_FACTOR,
                    peak_hours=(8.0, 22.0),
                    source=f"{_NGA} (SWIS); {_CC}; Synergy Large Business Demand HV tariff"),
        GridFigures("AU-NT-DRW", "Darwin-Katherine (DKIS)", 0.56, 6.7, "AU-NSW", "flat",
                    33.37363 / CENTS_PER_DOLLAR,
                    source=f"{_NGA} (DKIS); {_CC}; Jacana Energy large-user tariff 2025-26"),
    )
}  # fmt: skip
# Shape sources: Qld takes NSW (its interconnected neighbour, coal + solar); SA and Tas take
# Vic (linked by the Heywood and Basslink interconnectors; wind, negative prices); WA and NT
# (isolated grids, no hourly data) take NSW's carbon shape as a coal/gas + rooftop-solar
# system; a modelling choice, not data.

# Catalog entries (coordinates, Köppen classes) live in greenroute.catalog.regions.
AU_REGIONS: tuple[Region, ...] = NORMALS_REGIONS
_REGION_BY_KEY = {r.key: r for r in AU_REGIONS}
_SOURCE_TZ = {"AU-NSW": "Australia/Sydney", "AU-VIC": "Australia/Melbourne"}


def _city(key: str) -> CityNormals:
    try:
        return CITY_NORMALS[key]
    except KeyError:
        raise UnknownNameError("Australian normals region", key, CITY_NORMALS) from None


# =============================================================================================
# Weather
# =============================================================================================
def _month_bounds() -> tuple[np.ndarray, np.ndarray]:
    start = np.concatenate(([0.0], np.cumsum(_DAYS_IN_MONTH)[:-1]))
    return start, start + np.asarray(_DAYS_IN_MONTH) / 2.0


def _interp_weights(x: np.ndarray) -> np.ndarray:
    """Weights (len(x) x 12) of the cyclic piecewise-linear curve through mid-month anchors."""
    _, mid = _month_bounds()
    xp = np.concatenate(([mid[-1] - 365.0], mid, [mid[0] + 365.0]))
    w = np.zeros((x.size, 12))
    for k in range(12):
        fp = np.zeros(14)
        fp[k + 1] = 1.0
        if k == 11:
            fp[0] = 1.0
        if k == 0:
            fp[13] = 1.0
        w[:, k] = np.interp(np.mod(x, 365.0), xp, fp)
    return w


@functools.cache
def _anchor_solver() -> np.ndarray:
    """Inverse of (monthly mean of daily values) x (anchor interpolation), 12 x 12."""
    days = np.arange(365) + 0.5
    w = _interp_weights(days)
    month = np.repeat(np.arange(12), _DAYS_IN_MONTH)
    avg = np.zeros((12, 365))
    avg[month, np.arange(365)] = 1.0 / np.asarray(_DAYS_IN_MONTH)[month]
    return np.linalg.inv(avg @ w)


def daily_normal(monthly: tuple[float, ...] | np.ndarray, day_of_year: np.ndarray) -> np.ndarray:
    """Mean-preserving smooth curve through 12 monthly means at a (fractional, 0-based,
    365-day) day of year: piecewise linear between mid-month anchors chosen so that each
    month's mean of daily values equals the published monthly mean."""
    anchors = _anchor_solver() @ np.asarray(monthly, dtype=np.float64)
    return _interp_weights(np.asarray(day_of_year, dtype=np.float64)) @ anchors


def diurnal_shape(hour: np.ndarray) -> np.ndarray:
    """0 at :data:`T_MIN_HOUR`, 1 at :data:`T_MAX_HOUR`, half-cosines between (local standard
    hour, fractional). The mean over 24 equally spaced samples is exactly 0.5."""
    h = np.mod(np.asarray(hour, dtype=np.float64) - T_MIN_HOUR, 24.0)
    rise = T_MAX_HOUR - T_MIN_HOUR
    up = 0.5 * (1.0 - np.cos(np.pi * h / rise))
    down = 0.5 * (1.0 + np.cos(np.pi * (h - rise) / (24.0 - rise)))
    return np.where(h <= rise, up, down)


def _utc_index(start_utc: pd.Timestamp, hours: int) -> pd.DatetimeIndex:
    start = pd.Timestamp(start_utc)
    start = start.tz_localize("UTC") if start.tzinfo is None else start.tz_convert("UTC")
    return pd.date_range(start, periods=int(hours), freq="h", unit="us", name="time_utc")


def _rng(seed: int, key: str, stream: int) -> np.random.Generator:
    return np.random.default_rng(
        np.random.SeedSequence([int(seed), zlib.crc32(key.encode("utf-8")), stream])
    )


def hourly_weather(
    key: str, index: pd.DatetimeIndex, seed: int, *, anomaly: bool = True
) -> pd.DataFrame:
    """``temp_c`` and ``rh_pct`` of city ``key`` at the UTC instants ``index`` (see module
    docstring). ``anomaly=False`` returns the climatological curve (the normals only)."""
    city = _city(key)
    utc_h = (index.tz_convert("UTC").asi8 // _unit_per_s(index)) / 3600.0
    local_h = utc_h + city.std_utc_offset_h  # hours since 1970-01-01 00:00 local standard
    day = np.floor(local_h / 24.0)
    hour = local_h - 24.0 * day
    local_dates = pd.to_datetime(day, unit="D")
    year_len = np.where(local_dates.is_leap_year, 366.0, 365.0)
    doy = (np.asarray(local_dates.day_of_year) - 1 + hour / 24.0) * 365.0 / year_len
    tmax = daily_normal(city.tmax_c, doy)
    tmin = daily_normal(city.tmin_c, doy)
    s = diurnal_shape(hour)
    temp = tmin + (tmax - tmin) * s
    if anomaly and index.size:
        temp = temp + _daily_anomaly(key, city.anomaly, local_h, seed)
    s_am, s_pm = diurnal_shape(np.array([RH_AM_HOUR, RH_PM_HOUR]))
    rh9, rh15 = daily_normal(city.rh9_pct, doy), daily_normal(city.rh15_pct, doy)
    rh = rh15 + (rh9 - rh15) * (s_pm - s) / (s_pm - s_am)
    return pd.DataFrame(
        {"temp_c": np.clip(temp, *TEMP_RANGE_C), "rh_pct": np.clip(rh, *RH_RANGE_PCT)},
        index=index,
    )


def _unit_per_s(index: pd.DatetimeIndex) -> int:
    return {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[index.unit]


# A local day's mean of the anomaly, linear between day centres, weighs the day's own centre
# value 3/4 and its neighbours' 1/8 each.
_DAY_MEAN_WEIGHTS = np.array([0.125, 0.75, 0.125])


def _day_mean_moments(p: float) -> tuple[float, float]:
    """(variance, lag-1 covariance) of daily means when the centre values are a unit-variance
    AR(1) with coefficient ``p``."""
    w = _DAY_MEAN_WEIGHTS
    k = np.arange(3)
    lag = k[None, :] - k[:, None]
    var = float(w @ (p ** np.abs(lag)) @ w)
    cov1 = float(w @ (p ** np.abs(lag + 1)) @ w)
    return var, cov1


@functools.cache
def _centre_ar1(sigma_c: float, phi: float) -> tuple[float, float]:
    """(sigma, phi) of the day-centre AR(1) whose *daily means* have ``sigma_c`` and ``phi``
    (what :class:`AnomalySpec` documents and the fit measures): interpolating between day
    centres smooths the daily means, which raises their autocorrelation and lowers their
    spread, so the centre process is made a little rougher to compensate."""
    from scipy import optimize

    def gap(p: float) -> float:
        var, cov1 = _day_mean_moments(p)
        return cov1 / var - phi

    lo, hi = 0.0, 0.999
    if gap(lo) >= 0.0:  # smoothing alone exceeds phi: use white centre values
        p = lo
    elif gap(hi) <= 0.0:
        p = hi
    else:
        p = float(optimize.brentq(gap, lo, hi, xtol=1e-12))
    return sigma_c / np.sqrt(_day_mean_moments(p)[0]), p


def _daily_anomaly(key: str, spec: AnomalySpec, local_h: np.ndarray, seed: int) -> np.ndarray:
    """AR(1) anomaly per local day (days counted from the first one), started from its
    stationary law; linear between day centres (noon)."""
    sigma, phi = _centre_ar1(spec.sigma_c, spec.phi)
    pos = local_h / 24.0 - 0.5  # day-centre coordinate
    d0 = np.floor(pos.min())
    n = int(np.floor(pos.max()) - d0) + 2
    rng = _rng(seed, key, 1)
    e = rng.standard_normal(n) * sigma * np.sqrt(1.0 - phi**2)
    e[0] = rng.standard_normal() * sigma
    a = sp_signal.lfilter([1.0], [1.0, -phi], e)
    return np.interp(pos - d0, np.arange(n, dtype=np.float64), a)


# =============================================================================================
# Grid
# =============================================================================================
def _offset_h(index: pd.DatetimeIndex, tz: str) -> np.ndarray:
    """UTC offset (hours, daylight saving included) of ``tz`` at each instant."""
    utc = index.tz_convert("UTC")
    local = utc.tz_convert(tz).tz_localize(None)
    return np.asarray((local - utc.tz_localize(None)) / pd.Timedelta(hours=1), dtype=np.float64)


def _data_root() -> Path | None:
    from greenroute.data.paths import resolve_data_dir

    return resolve_data_dir(None)


@functools.lru_cache(maxsize=64)
def _source_year(source: str, year: int, seed: int, root: str | None) -> tuple[np.ndarray, str]:
    """Hourly (carbon intensity, price) of ``source`` from ``year``-01-01 minus a pad to the
    next year plus a pad, UTC; real when ``root`` covers the year, else embedded-synthetic."""
    t0 = pd.Timestamp(f"{year}-01-01", tz="UTC") - pd.Timedelta(hours=_HOURS_PAD)
    n = int((pd.Timestamp(f"{year + 1}-01-01", tz="UTC") - t0) / pd.Timedelta(hours=1))
    n += _HOURS_PAD
    grid = pd.date_range(t0, periods=n, freq="h", unit="us", name="time_utc")
    if root is not None:
        real = _real_source(Path(root), source, grid)
        if real is not None:
            return real, "real"
    from greenroute.data.synth_signals import synthesize_region_signals

    f = synthesize_region_signals(source, t0, n, int(seed))
    out = np.stack(
        [f["carbon_intensity_g_per_kwh"].to_numpy(float), f["price_usd_per_kwh"].to_numpy(float)]
    )
    return out, "embedded"


def _real_source(root: Path, source: str, grid: pd.DatetimeIndex) -> np.ndarray | None:
    from greenroute.data.grid_loaders import load_carbon_intensity, load_price, load_regions_index

    index = load_regions_index(root)
    if source not in index.index:
        return None
    row = index.loc[source]
    ci = load_carbon_intensity(root / "grid" / str(row["ci_file"]).strip())
    ci = ci["carbon_intensity_g_per_kwh"]
    price = load_price(root / "grid" / str(row["price_file"]).strip(), local_tz=_SOURCE_TZ[source])
    inner = grid[_HOURS_PAD:-_HOURS_PAD]
    if not (inner[0] >= ci.index[0] and inner[-1] <= ci.index[-1]):
        return None
    if not (inner[0] >= price.index[0] and inner[-1] <= price.index[-1]):
        return None
    # the pads may reach outside the files (2021-01-01 minus 6 h): hold the end values
    out = [s.reindex(grid).ffill().bfill().to_numpy(float) for s in (ci, price)]
    return np.stack(out)


@functools.lru_cache(maxsize=64)
def _year_shapes(key: str, year: int, seed: int, root: str | None) -> tuple[np.ndarray, str]:
    """(3, hours of ``year``): carbon and price shapes of ``key`` for each UTC hour of the year,
    each with mean exactly 1 over the year, and the renewable share (%) with its published
    annual mean (see module docstring)."""
    g = GRID_FIGURES[key]
    src, mode = _source_year(g.shape_source, year, seed, root)
    hours = pd.date_range(
        pd.Timestamp(f"{year}-01-01", tz="UTC"),
        pd.Timestamp(f"{year + 1}-01-01", tz="UTC"),
        freq="h",
        inclusive="left",
        unit="us",
    )
    tz = _REGION_BY_KEY[key].timezone
    shift = _offset_h(hours, tz) - _offset_h(hours, _SOURCE_TZ[g.shape_source])
    # source hour (on the padded grid) with the same local clock time as each target hour
    pos = np.arange(hours.size, dtype=np.float64) + _HOURS_PAD + shift
    grid_pos = np.arange(src.shape[1], dtype=np.float64)
    shapes = np.stack([np.interp(pos, grid_pos, src[i]) for i in range(2)])
    shapes = shapes / shapes.mean(axis=1, keepdims=True)
    renewable = _renewable_pct(shapes[0], g.renewable_share_pct)
    return np.vstack([shapes, renewable[None]]), mode


def _renewable_pct(ci_shape: np.ndarray, share_pct: float) -> np.ndarray:
    """``max(0, 100 - a x shape)``: the fossil share follows the intensity (the hour at the
    intensity ``100 / a`` times the annual mean is all fossil, dirtier hours too), with ``a``
    solved so that the annual mean is exactly ``share_pct``. Without the bound ``a`` is
    ``100 - share_pct``; it only grows where low-renewable grids (WA, NT) would go negative."""
    from scipy import optimize

    def mean_at(a: float) -> float:
        return float(np.maximum(100.0 - a * ci_shape, 0.0).mean()) - share_pct

    a0 = 100.0 - share_pct
    a = a0 if mean_at(a0) <= 1e-12 else float(optimize.brentq(mean_at, a0, 1e6, xtol=1e-12))
    return np.clip(100.0 - a * ci_shape, 0.0, 100.0)


def _shapes_at(key: str, index: pd.DatetimeIndex, seed: int) -> tuple[np.ndarray, set[str]]:
    root = _data_root()
    root_s = None if root is None else str(root.resolve())
    out = np.empty((3, index.size))
    modes: set[str] = set()
    utc_h = (index.asi8 // _unit_per_s(index)) / 3600.0
    for year in np.unique(index.year):
        sel = np.asarray(index.year == year)
        shapes, mode = _year_shapes(key, int(year), int(seed), root_s)
        modes.add(mode)
        y0 = pd.Timestamp(f"{year}-01-01", tz="UTC").value / 1e9 / 3600.0
        x = utc_h[sel] - y0
        xp = np.arange(shapes.shape[1], dtype=np.float64)
        out[:, sel] = np.stack([np.interp(x, xp, shapes[i]) for i in range(3)])
    return out, modes


def _tariff(g: GridFigures, index: pd.DatetimeIndex) -> np.ndarray:
    if g.price_kind == "flat":
        return np.full(index.size, g.price_aud_per_kwh)
    local = index.tz_convert(_REGION_BY_KEY[g.key].timezone)
    h = np.asarray(local.hour) + np.asarray(local.minute) / 60.0
    peak = (np.asarray(local.day_of_week) < 5) & (h >= g.peak_hours[0]) & (h < g.peak_hours[1])
    return np.where(peak, g.peak_aud_per_kwh, g.price_aud_per_kwh)


def hourly_signals(
    key: str, start_utc: pd.Timestamp, hours: int, seed: int, *, anomaly: bool = True
) -> pd.DataFrame:
    """Hourly signals of an Australian normals region with the columns of
    :data:`greenroute.data.grid_loaders.HOURLY_COLUMNS` on a tz-aware UTC hourly index of exactly
    ``hours`` rows (what greenroute.sim.epoch_signals expects of a signal source)."""
    city, g = _city(key), GRID_FIGURES[key]
    index = _utc_index(start_utc, hours)
    weather = hourly_weather(city.key, index, seed, anomaly=anomaly)
    if index.size:
        (ci_shape, price_shape, renewable), _ = _shapes_at(key, index, seed)
    else:
        ci_shape = price_shape = renewable = np.zeros(0)
    ci = g.ef_kg_per_kwh * 1000.0 * ci_shape  # kg/kWh -> g/kWh
    nem = g.price_kind == "nem"  # else a tariff
    price_aud = g.price_aud_per_kwh * price_shape if nem else _tariff(g, index)
    return pd.DataFrame(
        {
            "carbon_intensity_g_per_kwh": np.maximum(ci, 0.0),
            "price_usd_per_kwh": price_aud * AUD_TO_USD,
            "temp_c": weather["temp_c"].to_numpy(),
            "rh_pct": weather["rh_pct"].to_numpy(),
            "low_carbon_pct": renewable,  # no nuclear in Australia: low-carbon == renewable
            "renewable_pct": renewable,
        },
        index=index,
        columns=list(HOURLY_COLUMNS),
        dtype=np.float64,
    )


def shape_source_mode(key: str, start_utc: pd.Timestamp, hours: int, seed: int) -> set[str]:
    """Where the borrowed shapes of a window come from: {"real"}, {"embedded"} or both."""
    return _shapes_at(key, _utc_index(start_utc, hours), seed)[1]


def clear_cache() -> None:
    """Forget cached source years (e.g. after changing ``$GREENROUTE_DATA_DIR``)."""
    _source_year.cache_clear()
    _year_shapes.cache_clear()
