"""Regions a data directory brings: rows of its ``grid/regions.csv`` the catalog does not know.

The catalog (``greenroute.catalog.regions``) holds the 16 regions of the shared data plus the
normals-based Australian edge sites. A data directory may add a region by adding one row to
``grid/regions.csv`` (``region``, ``description``, ``electricitymaps_zone_id``, the three file
columns, ``weather_city``, ``weather_lat``, ``weather_lon``, ``timezone``) and its three hourly
files; nothing else is needed. Lookups that know the data directory
(:func:`get_region`) see those regions; the catalog itself is never changed, so a region one
data directory adds is invisible to runs on another.

Fields the file does not carry are left unknown: ``elevation_m`` is NaN (nothing reads it),
``continent``, ``jurisdiction`` and ``koppen`` are empty strings (residency rules name regions,
not continents).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pandas as pd

from greenroute.catalog.regions import REGIONS, Region
from greenroute.core.errors import ConfigError, DataFormatError, UnknownNameError
from greenroute.data.grid_loaders import load_regions_index

# a row is a region when it names all three hourly files (rows naming only a price file, such
# as the shared data's "price only" European zones, are not); it must then fill these columns
FILE_COLUMNS = ("ci_file", "price_file", "weather_file")
REQUIRED_COLUMNS = ("weather_lat", "weather_lon", "timezone")


def data_dir_regions(data_dir: str | Path) -> dict[str, Region]:
    """The regions ``data_dir``'s ``grid/regions.csv`` adds to the catalog, by key."""
    path = Path(data_dir).expanduser().resolve() / "grid" / "regions.csv"
    try:
        stat = path.stat()
    except OSError:
        load_regions_index(data_dir)  # raises the data layer's "file not found" message
        raise
    return dict(_build(str(path), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=16)
def _build(path: str, mtime_ns: int, size: int) -> tuple[tuple[str, Region], ...]:
    """Per file version (the key includes mtime and size): a rewritten file is read again."""
    del mtime_ns, size
    index = load_regions_index(Path(path).parent.parent)
    out = []
    for line, (key, row) in enumerate(index.iterrows(), start=2):  # line 1 is the header
        if key in REGIONS or not all(_text(row, c) for c in FILE_COLUMNS):
            continue  # catalog regions, and rows without all three files (e.g. price only)
        out.append((str(key), _region_from_row(Path(path), line, str(key), row)))
    return tuple(out)


def _region_from_row(path: Path, line: int, key: str, row: pd.Series) -> Region:
    for col in REQUIRED_COLUMNS:
        if col not in row.index:
            raise DataFormatError(path, f"new region {key!r} needs a {col!r} column", line)
    lat, lon = (
        _float(path, line, key, row, "weather_lat"),
        _float(path, line, key, row, "weather_lon"),
    )
    if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
        raise DataFormatError(path, f"region {key!r}: lat/lon ({lat}, {lon}) out of range", line)
    tz = _text(row, "timezone")
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise DataFormatError(
            path, f"region {key!r}: {tz!r} is not an IANA time zone (e.g. Europe/Paris)", line
        ) from None
    return Region(
        key=key,
        name=_text(row, "description") or key,
        zone_id=_text(row, "electricitymaps_zone_id") or key,
        city=_text(row, "weather_city"),
        lat_deg=lat,
        lon_deg=lon,
        elevation_m=math.nan,
        timezone=tz,
        continent="",
        jurisdiction="",
        koppen="",
        has_signals=True,
    )


def _text(row: pd.Series, col: str) -> str:
    value = row.get(col)
    return (
        ""
        if value is None or (isinstance(value, float) and math.isnan(value))
        else str(value).strip()
    )


def _float(path: Path, line: int, key: str, row: pd.Series, col: str) -> float:
    text = _text(row, col)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise DataFormatError(path, f"region {key!r}: {col} must be a number, got {text!r}", line)
    return value


def get_region(key: str, data_dir: str | Path | None = None) -> Region:
    """The catalog's region ``key``, else the one ``data_dir``'s ``regions.csv`` adds; raises
    :class:`UnknownNameError` listing every key that would have worked."""
    region = REGIONS.get(key)
    if region is not None:
        return region
    extra = data_dir_regions(data_dir) if data_dir is not None else {}
    if key in extra:
        return extra[key]
    if data_dir is not None:
        index = load_regions_index(data_dir)
        if key in index.index:
            missing = [c for c in FILE_COLUMNS if not _text(index.loc[key], c)]
            raise ConfigError(
                f"region {key!r} of {Path(data_dir) / 'grid' / 'regions.csv'} has no "
                f"{', '.join(missing)}: a region needs carbon, price and weather files"
            )
    what = "region" if data_dir is not None else "region (without --data-dir)"
    raise UnknownNameError(what, key, sorted({*REGIONS, *extra}))
