"""Epoch-level grid and weather signals for a run, from real files or the embedded profiles."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.data.grid_loaders import HOURLY_COLUMNS


@dataclass
class EpochSignals:
    """Signals resampled to epochs: arrays ``[T, R]`` with ``T >= n_epochs + horizon``."""

    regions: tuple[str, ...]
    epoch_s: float
    start_utc: pd.Timestamp
    carbon_intensity_g_per_kwh: np.ndarray
    price_usd_per_kwh: np.ndarray
    temp_c: np.ndarray
    rh_pct: np.ndarray
    wetbulb_c: np.ndarray
    water_intensity_l_per_kwh: np.ndarray
    source: str  # "real" or "embedded"
    files: dict[str, str] = field(default_factory=dict)  # path -> sha256 (real data)

    @property
    def n_steps(self) -> int:
        return int(self.carbon_intensity_g_per_kwh.shape[0])

    def hourly_frame(self, r: int) -> pd.DataFrame:
        idx = self.start_utc + pd.to_timedelta(np.arange(self.n_steps) * self.epoch_s, unit="s")
        return pd.DataFrame(
            {
                "carbon_intensity_g_per_kwh": self.carbon_intensity_g_per_kwh[:, r],
                "price_usd_per_kwh": self.price_usd_per_kwh[:, r],
                "temp_c": self.temp_c[:, r],
                "wetbulb_c": self.wetbulb_c[:, r],
                "water_intensity_l_per_kwh": self.water_intensity_l_per_kwh[:, r],
            },
            index=idx,
        )


def hourly_signals(
    region: str,
    start_utc: pd.Timestamp,
    hours: int,
    seed: int,
    data_dir: Path | None,
) -> tuple[pd.DataFrame, str]:
    """Hourly signals for ``hours`` from ``start_utc``: real files when ``data_dir`` is set and
    covers the region, else the embedded generator. Returns (frame, source)."""
    from greenroute.catalog import REGIONS

    reg = REGIONS.get(region)
    if reg is None and data_dir is not None:  # a region the data dir's regions.csv adds
        from greenroute.data.regions import get_region

        reg = get_region(region, data_dir)
    if reg is not None and not reg.has_signals:  # built from published climate normals
        from greenroute.data.au_normals import hourly_signals as normals_signals

        return normals_signals(region, start_utc, hours, seed), "normals"
    end = start_utc + pd.Timedelta(hours=hours)
    if data_dir is not None and reg is not None and reg.has_signals:
        from greenroute.data.grid_loaders import load_region_signals

        return load_region_signals(data_dir, region, start_utc, end), "real"
    from greenroute.data.synth_signals import synthesize_region_signals

    return synthesize_region_signals(region, start_utc, hours, seed), "embedded"


def build_epoch_signals(
    regions: Sequence[str],
    start_utc: pd.Timestamp,
    n_steps: int,
    epoch_s: float,
    seed: int,
    data_dir: Path | None,
) -> EpochSignals:
    """Hourly series held constant within each hour, resampled to ``n_steps`` epochs.

    With real data for every region the result is also kept in the disk cache
    (``data/cache.py``), keyed by the checksums of the files it was built from."""
    key = _disk_key(regions, start_utc, n_steps, epoch_s, data_dir)
    if key is not None:
        from greenroute.data import cache

        arrays = cache.load_arrays("epoch-signals", key[0])
        if arrays is not None and set(_ARRAY_FIELDS) <= set(arrays):
            return EpochSignals(regions=tuple(regions), epoch_s=epoch_s, start_utc=start_utc,
                                source="real", files=key[1],
                                **{k: arrays[k] for k in _ARRAY_FIELDS})  # fmt: skip
        out = _build_epoch_signals(regions, start_utc, n_steps, epoch_s, seed, data_dir)
        cache.store_arrays("epoch-signals", key[0], {k: getattr(out, k) for k in _ARRAY_FIELDS})
        return out
    return _build_epoch_signals(regions, start_utc, n_steps, epoch_s, seed, data_dir)


_ARRAY_FIELDS = ("carbon_intensity_g_per_kwh", "price_usd_per_kwh", "temp_c", "rh_pct",
                 "wetbulb_c", "water_intensity_l_per_kwh")  # fmt: skip


def _disk_key(regions, start_utc, n_steps, epoch_s, data_dir) -> tuple[str, dict] | None:
    """(cache key, input files) when every region reads real files, else None (embedded or
    normals-based signals are cheap; a window touching a duplicated price year must warn)."""
    from greenroute.catalog import REGIONS
    from greenroute.data import cache
    from greenroute.data.grid_loaders import DUPLICATED_PRICE_YEARS, PARSER_FORMAT_VERSION

    if data_dir is None or not cache.enabled():
        return None
    from greenroute.data.regions import data_dir_regions

    known = {**data_dir_regions(data_dir), **REGIONS}  # catalog + the data dir's own regions
    if any(known.get(r) is None or not known[r].has_signals for r in regions):
        return None
    end = start_utc + pd.Timedelta(seconds=n_steps * epoch_s + 7200.0)
    years = set(range(start_utc.year, end.year + 1))
    if any(r in regions and y in years for r, y in DUPLICATED_PRICE_YEARS):
        return None
    try:
        files = _real_files(data_dir, regions)
        index_sum = cache.file_checksum(Path(data_dir) / "grid" / "regions.csv")
    except (OSError, ValueError):
        return None  # let the normal path report the problem
    if len(files) - (_REGIONS_CSV in files) != 3 * len(regions):
        return None
    key = cache.make_key("epoch-signals", PARSER_FORMAT_VERSION, cache.code_fingerprint(),
                         tuple(regions), str(start_utc), int(n_steps), float(epoch_s),
                         index_sum, sorted(files.items()))  # fmt: skip
    return key, files


def _build_epoch_signals(
    regions: Sequence[str],
    start_utc: pd.Timestamp,
    n_steps: int,
    epoch_s: float,
    seed: int,
    data_dir: Path | None,
) -> EpochSignals:
    from greenroute.physics.psychro import wet_bulb_stull_c
    from greenroute.physics.water import ewif_l_per_kwh

    hours = int(np.ceil(n_steps * epoch_s / 3600.0)) + 1
    cols: dict[str, list[np.ndarray]] = {c: [] for c in HOURLY_COLUMNS}
    sources = set()
    files: dict[str, str] = {}
    for region in regions:
        frame, source = hourly_signals(region, start_utc, hours, seed, data_dir)
        sources.add(source)
        for c in HOURLY_COLUMNS:
            cols[c].append(np.asarray(frame[c].to_numpy(dtype=float))[:hours])
    if data_dir is not None and "real" in sources:
        files = _real_files(data_dir, regions)
    hour_of_step = np.floor(np.arange(n_steps) * epoch_s / 3600.0).astype(int)
    arr = {c: np.stack(v, axis=1)[hour_of_step] for c, v in cols.items()}
    wetbulb = wet_bulb_stull_c(arr["temp_c"], arr["rh_pct"])
    ewif = ewif_l_per_kwh(
        arr["carbon_intensity_g_per_kwh"], arr["low_carbon_pct"], arr["renewable_pct"]
    )
    return EpochSignals(
        regions=tuple(regions),
        epoch_s=epoch_s,
        start_utc=start_utc,
        carbon_intensity_g_per_kwh=arr["carbon_intensity_g_per_kwh"],
        price_usd_per_kwh=arr["price_usd_per_kwh"],
        temp_c=arr["temp_c"],
        rh_pct=arr["rh_pct"],
        wetbulb_c=np.asarray(wetbulb, dtype=float),
        water_intensity_l_per_kwh=np.asarray(ewif, dtype=float),
        source="+".join(sorted(sources)),
        files=files,
    )


def _real_files(data_dir: Path, regions: Sequence[str]) -> dict[str, str]:
    from greenroute.data.cache import file_checksum  # hashed once per process
    from greenroute.data.grid_loaders import load_regions_index

    index = load_regions_index(data_dir)
    out = {}
    for region in regions:
        if region not in index.index:
            continue
        row = index.loc[region]
        for col in ("ci_file", "price_file", "weather_file"):
            rel = row.get(col)
            if isinstance(rel, str) and rel:
                path = Path(data_dir) / "grid" / rel
                if path.is_file():
                    out[f"grid/{rel}"] = file_checksum(path)
    from greenroute.catalog import REGIONS

    if any(r not in REGIONS for r in regions):  # a region the data dir's regions.csv defines:
        out[_REGIONS_CSV] = file_checksum(Path(data_dir) / _REGIONS_CSV)  # its row is input
    return out


_REGIONS_CSV = "grid/regions.csv"
