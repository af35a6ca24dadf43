"""Region catalog: the 16 regions of ``shared/data/grid`` that have carbon, price and weather.

Keys are SustainCluster's folder names (see ``shared/data/PROVENANCE.md``); lat/lon are the
Open-Meteo grid cells of ``grid/weather/weather_locations.csv`` (the city whose weather the
region uses), time zones are IANA names from ``grid/regions.csv``. ``continent`` and
``jurisdiction`` serve data-residency rules ("EU data stays in the EU"). Köppen climate classes
are from Beck et al. (2018), "Present and future Köppen-Geiger climate classification maps at
1-km resolution", Scientific Data 5:180214, read at each city.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Region:
    """A datacenter location with its grid zone and weather station."""

    key: str
    name: str
    zone_id: str  # Electricity Maps zone actually inside the CI file
    city: str
    lat_deg: float
    lon_deg: float
    elevation_m: float
    timezone: str
    continent: str  # africa | asia | europe | north-america | oceania | south-america
    jurisdiction: str  # coarse legal area used by residency presets (EU, UK, US, ...)
    koppen: str
    has_signals: bool = True  # False for regions built from published normals (no hourly files)


_R = Region

REGIONS: dict[str, Region] = {
    r.key: r
    for r in (
        _R("AU-NSW", "Australia - New South Wales", "AU-NSW", "Sydney", -33.848858, 151.19551,
           69.0, "Australia/Sydney", "oceania", "AU", "Cfa"),
        _R("AU-VIC", "Australia - Victoria", "AU-VIC", "Melbourne", -37.785587, 144.93976,
           21.0, "Australia/Melbourne", "oceania", "AU", "Cfb"),
        _R("BR-SP", "Brazil - Central/South-East", "BR-CS", "Sao Paulo", -23.514938, -46.610504,
           737.0, "America/Sao_Paulo", "south-america", "BR", "Cfa"),
        _R("CA-ON", "Canada - Ontario", "CA-ON", "Toronto", 43.690685, -79.41174,
           180.0, "America/Toronto", "north-america", "CA", "Dfa"),
        _R("CL-SIC", "Chile - national grid", "CL-SEN", "Santiago", -33.427067, -70.64276,
           554.0, "America/Santiago", "south-america", "CL", "Csb"),
        _R("DE-LU", "Germany", "DE", "Frankfurt", 50.08787, 8.653846,
           111.0, "Europe/Berlin", "europe", "EU", "Cfb"),
        _R("GB", "Great Britain", "GB", "London", 51.493847, -0.1630249,
           29.0, "Europe/London", "europe", "UK", "Cfb"),
        _R("IN-WE", "India - Western region", "IN-WE", "Mumbai", 19.086115, 72.85291,
           9.0, "Asia/Kolkata", "asia", "IN", "Aw"),
        _R("JP-TK", "Japan - Tokyo area", "JP-TK", "Tokyo", 35.676624, 139.80695,
           14.0, "Asia/Tokyo", "asia", "JP", "Cfa"),
        _R("KR", "South Korea", "KR", "Seoul", 37.57469, 126.96,
           33.0, "Asia/Seoul", "asia", "KR", "Dwa"),
        _R("SG", "Singapore", "SG", "Singapore", 1.3005272, 103.862564,
           19.0, "Asia/Singapore", "asia", "SG", "Af"),
        _R("US-CAL-CISO", "USA - California (CAISO)", "US-CAL-CISO", "San Jose", 37.434093,
           -121.95479, 7.0, "America/Los_Angeles", "north-america", "US", "Csb"),
        _R("US-MIDA-PJM", "USA - Mid-Atlantic (PJM)", "US-MIDA-PJM", "Philadelphia", 39.964848,
           -75.1676, 23.0, "America/New_York", "north-america", "US", "Cfa"),
        _R("US-NY-NYIS", "USA - New York (NYISO)", "US-NY-NYIS", "New York City", 40.738136,
           -74.04254, 27.0, "America/New_York", "north-america", "US", "Cfa"),
        _R("US-TEX-ERCO", "USA - Texas (ERCOT)", "US-TEX-ERCO", "Dallas", 32.794376, -96.8215,
           142.0, "America/Chicago", "north-america", "US", "Cfa"),
        _R("ZA", "South Africa (Eskom)", "ZA", "Johannesburg", -26.186293, 28.026318,
           1734.0, "Africa/Johannesburg", "africa", "ZA", "Cwb"),
    )
}  # fmt: skip

# Australian edge sites without hourly files: their signals are synthesised from published
# climate normals and grid factors (greenroute.data.au_normals, which cites every figure).
# Coordinates and elevations are the BoM stations' (typed; approximate).
# Köppen classes are the commonly cited ones for each city (Beck et al. 2018 map not re-read).
NORMALS_REGIONS: tuple[Region, ...] = (
    _R("AU-QLD-BNE", "Australia - Queensland (Brisbane)", "AU-QLD", "Brisbane",
           -27.4808, 153.0389, 8.0, "Australia/Brisbane", "oceania", "AU", "Cfa", False),
    _R("AU-SA-ADL", "Australia - South Australia (Adelaide)", "AU-SA", "Adelaide",
           -34.9257, 138.5832, 29.0, "Australia/Adelaide", "oceania", "AU", "Csa", False),
    _R("AU-WA-PER", "Australia - Western Australia SWIS (Perth)", "AU-WA", "Perth",
           -31.9192, 115.8728, 25.0, "Australia/Perth", "oceania", "AU", "Csa", False),
    _R("AU-TAS-HBA", "Australia - Tasmania (Hobart)", "AU-TAS", "Hobart",
           -42.8897, 147.3278, 51.0, "Australia/Hobart", "oceania", "AU", "Cfb", False),
    _R("AU-NT-DRW", "Australia - Northern Territory DKIS (Darwin)", "AU-NT", "Darwin",
           -12.4239, 130.8925, 30.0, "Australia/Darwin", "oceania", "AU", "Aw", False),
)  # fmt: skip
REGIONS.update({r.key: r for r in NORMALS_REGIONS})

SIGNAL_REGIONS: tuple[str, ...] = tuple(sorted(k for k, r in REGIONS.items() if r.has_signals))


def get_region(key: str) -> Region:
    """Return the region ``key`` or raise ``UnknownNameError`` listing the valid keys."""
    from greenroute.core.errors import UnknownNameError

    try:
        return REGIONS[key]
    except KeyError:
        raise UnknownNameError("region", key, sorted(REGIONS)) from None


def register_region(region: Region) -> Region:
    """Add a region to the process-wide catalog (for regions defined in code, e.g. from
    published climate normals). A region with hourly files needs no registration: a row in
    the data directory's ``grid/regions.csv`` is enough (``greenroute.data.regions``)."""
    REGIONS[region.key] = region
    return region
