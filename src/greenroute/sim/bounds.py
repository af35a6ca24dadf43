"""Limits of a run's time window, checked before anything is simulated.

* ``days`` must be a finite number > 0 (:meth:`Scenario.with_options` and ``__post_init__``).
* With real data (``--data-dir``), the window plus the policies' look-ahead
  (:data:`greenroute.sim.engine.LOOKAHEAD_PAD_EPOCHS`) must lie inside every signal file of
  every region: the shared data covers 2021-01-01 .. 2024-12-31 (local time; GB prices start
  2022-01-21; ``data/grid_loaders.py`` loaders). A window past it is an error naming the last
  available hour and the longest ``--days`` that fits.
* Memory: a run's peak memory is estimated from its size (requests from the workload's
  average rates, epochs x regions) and compared with the memory available; a run that would
  not fit is refused with the estimate in the message. At request fidelity the message says
  whether ``--fidelity fluid`` would fit; with ``fidelity="auto"`` the run switches to the
  fluid model instead (with a note).
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from greenroute.core.errors import ConfigError
from greenroute.sim.scenario import Scenario, TraceWorkload

# Peak-RSS model, measured with /tmp/mem_probe-style runs of `greenroute.run("demo",
# "lowest-carbon", days=D, fidelity=F)` (resource.getrusage ru_maxrss, Python 3.11, numpy 2):
#   request: 0.25 d (138k requests) 446 MiB, 2 d (1.02 M) 596 MiB, 6 d (3.66 M) 1212 MiB
#            -> (1212 - 596) MiB / 2.645 M requests = 244 B per request (rounded up to 256);
#   fluid:   10 d 370 MiB, 100 d 416 MiB -> 45.7 MiB / (8640 epochs x 3 regions) = 1.85 kB
#            per epoch and region (rounded up to 2 kB).
MEMORY_BASE_BYTES = 450 * 2**20  # interpreter, numpy/pandas/numba, a short demo run
BYTES_PER_REQUEST = 256
BYTES_PER_EPOCH_REGION = 2048
# share of the available memory a run may plan to use (the estimate is +-25 %)
MEMORY_SHARE = 0.8
MEMORY_ENV_VAR = "GREENROUTE_MAX_MEMORY_GB"  # overrides the detected available memory


@dataclass(frozen=True)
class MemoryEstimate:
    requests: float
    epochs: int
    total_bytes: float

    @property
    def gib(self) -> float:
        return self.total_bytes / 2**30


def expected_requests(sc: Scenario) -> float:
    """Requests a run generates: the workload's average rates x the simulated span (a trace
    replay: its ``first_n`` if set, else 0 — a trace file bounds its own size)."""
    wl = sc.workload
    if isinstance(wl, TraceWorkload):
        if wl.first_n is not None:
            return float(wl.first_n) / max(wl.subsample_every, 1)
        wl = wl.fallback
        if wl is None:
            return 0.0
    rate_rps = float(sum(wl.interactive_rps) + sum(wl.deferrable_rps))
    return rate_rps * sc.n_epochs * sc.epoch_s


def estimate_memory(sc: Scenario, fidelity: str | None = None) -> MemoryEstimate:
    fidelity = fidelity or sc.fidelity
    n_req = expected_requests(sc) if fidelity == "request" else 0.0
    n_e = sc.n_epochs
    total = MEMORY_BASE_BYTES + BYTES_PER_REQUEST * n_req
    total += BYTES_PER_EPOCH_REGION * float(n_e) * max(len(sc.regions), 1)
    return MemoryEstimate(requests=n_req, epochs=n_e, total_bytes=total)


def available_memory_bytes() -> float:
    """The memory a run may plan to use: ``$GREENROUTE_MAX_MEMORY_GB`` (GiB) if set, else
    :data:`MEMORY_SHARE` of MemAvailable (Linux) or of the physical memory."""
    env = os.environ.get(MEMORY_ENV_VAR)
    if env:
        try:
            gib = float(env)
        except ValueError:
            raise ConfigError(f"{MEMORY_ENV_VAR}={env!r} is not a number of GiB") from None
        if not (gib > 0 and math.isfinite(gib)):
            raise ConfigError(f"{MEMORY_ENV_VAR} must be a finite number > 0, got {env!r}")
        return gib * 2**30
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = float(line.split()[1]) * 1024.0
                break
    except OSError:
        avail = None
    if avail is None:
        try:
            avail = float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            return math.inf
    return avail * MEMORY_SHARE


def check_days(days: float) -> float:
    """``days`` as a float, finite and > 0, or a one-line :class:`ConfigError`."""
    if isinstance(days, bool):
        raise ConfigError(f"--days must be a finite number > 0, got {days!r}")
    try:
        value = float(days)
    except (TypeError, ValueError):
        raise ConfigError(f"--days must be a finite number > 0, got {days!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"--days must be a finite number > 0, got {days!r}")
    return value


def _max_days(sc: Scenario, limit: float, fidelity: str) -> float:
    """Longest whole-epoch window whose estimate fits ``limit`` bytes."""
    one = estimate_memory(sc.with_options(days=sc.epoch_s / 86400.0), fidelity)
    per_epoch = one.total_bytes - MEMORY_BASE_BYTES
    n = math.floor((limit - MEMORY_BASE_BYTES) / per_epoch) if per_epoch > 0 else 0
    return max(n, 0) * sc.epoch_s / 86400.0


def check_memory(sc: Scenario, *, auto_fidelity: bool = False) -> tuple[Scenario, list[str]]:
    """Refuse (or, with ``auto_fidelity``, move to fluid) a run that would not fit in memory."""
    limit = available_memory_bytes()
    est = estimate_memory(sc)
    if est.total_bytes <= limit:
        return sc, []
    days = f"--days {sc.days:g}"
    have = f"{limit / 2**30:.3g} GiB available ({MEMORY_ENV_VAR} overrides)"
    if sc.fidelity == "request":
        fluid = estimate_memory(sc, "fluid")
        fits = fluid.total_bytes <= limit
        if fits and auto_fidelity and not sc.chunked_prefill:  # fluid: whole prompts only
            note = (
                f"{days} at request fidelity would need about {est.gib:.3g} GiB "
                f"({est.requests:.3g} requests); {have}: ran the fluid model instead"
            )
            return sc.with_options(fidelity="fluid"), [note]
        hint = (
            f"--fidelity fluid would run it (about {fluid.gib:.3g} GiB)"
            if fits
            else f"even --fidelity fluid needs about {fluid.gib:.3g} GiB; at most --days "
            f"{_max_days(sc, limit, 'fluid'):.4g} fits in the fluid model"
        )
        raise ConfigError(
            f"{days} on scenario {sc.name} at request fidelity needs about {est.gib:.3g} GiB "
            f"({est.requests:.3g} requests x {BYTES_PER_REQUEST} B); {have}; at most --days "
            f"{_max_days(sc, limit, 'request'):.4g} fits; {hint}"
        )
    raise ConfigError(
        f"{days} on scenario {sc.name} ({sc.fidelity}) needs about {est.gib:.3g} GiB "
        f"({est.epochs:,} epochs x {len(sc.regions)} regions); {have}; at most --days "
        f"{_max_days(sc, limit, sc.fidelity):.4g} fits"
    )


def signal_steps(sc: Scenario) -> int:
    """Epochs of signals a run prepares: the run plus the look-ahead pad (sim.prepare.prepare)."""
    from greenroute.sim.prepare import LOOKAHEAD_PAD_EPOCHS

    return sc.n_epochs + max(sc.horizon, LOOKAHEAD_PAD_EPOCHS) + 1


def check_timestamps(sc: Scenario) -> None:
    """The window (with its look-ahead) must be representable as pandas timestamps."""
    try:
        sc.start_utc + pd.Timedelta(seconds=signal_steps(sc) * sc.epoch_s + 7200.0)
    except (OverflowError, ValueError, pd.errors.OutOfBoundsTimedelta):
        raise ConfigError(
            f"--days {sc.days:g} from {sc.start_utc} ends past the last representable time "
            f"({pd.Timestamp.max.floor('D').date()})"
        ) from None


def real_data_span(data_dir: Path, region: str) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    """First and last UTC hour that all three signal files of ``region`` cover (None when the
    data directory does not list the region: ``prepare`` reports that). Cached per file
    version (path, size, mtime), so repeated checks in one process read nothing."""
    from greenroute.data import cache

    grid = Path(data_dir) / "grid"
    stamp = tuple(
        (str(p.relative_to(grid)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(grid.rglob("*")) if p.is_file()
    )  # fmt: skip
    # across processes: the span is 2 timestamps, kept in the disk cache under the same file
    # versions (``--no-cache`` bypasses it), so a warm run reads no signal file to check it
    key = cache.make_key("data-span", 1, str(Path(data_dir).resolve()), region, stamp)
    stored = cache.load_json("spans", key)
    if stored is not None:
        if stored.get("span") is None:
            return None
        first, last = stored["span"]
        return pd.Timestamp(first), pd.Timestamp(last)
    span = _real_data_span(str(data_dir), region, stamp)
    value = None if span is None else [span[0].isoformat(), span[1].isoformat()]
    cache.store_json("spans", key, {"span": value})
    return span


@functools.lru_cache(maxsize=256)
def _real_data_span(
    data_dir: str, region: str, _stamp: tuple
) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    from greenroute.data.grid_loaders import (
        load_carbon_intensity,
        load_price,
        load_regions_index,
        load_weather,
        signal_regions,
    )

    if region not in signal_regions(data_dir):
        return None
    row = load_regions_index(data_dir).loc[region]
    grid = Path(data_dir) / "grid"
    tz = row.get("timezone")
    price_kw = {"local_tz": str(tz).strip()} if isinstance(tz, str) and tz.strip() else {}
    indexes = [
        load_carbon_intensity(grid / str(row["ci_file"]).strip()).index,
        load_price(grid / str(row["price_file"]).strip(), **price_kw).index,
        load_weather(grid / str(row["weather_file"]).strip()).index,
    ]
    return max(ix[0] for ix in indexes), min(ix[-1] for ix in indexes)


def check_real_data_window(sc: Scenario, data_dir: Path | None) -> None:
    """The run and its look-ahead must lie inside the real data of every region."""
    from greenroute.catalog import REGIONS
    from greenroute.sim.prepare import LOOKAHEAD_PAD_EPOCHS

    if data_dir is None or not sc.real_data:
        return
    # build_epoch_signals reads hours [start, start + ceil(steps x epoch / 1 h) + 1 h)
    steps = signal_steps(sc)
    hours = math.ceil(steps * sc.epoch_s / 3600.0)
    start = sc.start_utc.ceil("h")
    need_last = start + pd.Timedelta(hours=hours)
    pad_h = max(sc.horizon, LOOKAHEAD_PAD_EPOCHS) * sc.epoch_s / 3600.0
    spans = {}
    for region in sc.regions:
        reg = REGIONS.get(region)
        if reg is not None and not reg.has_signals:
            continue
        span = real_data_span(data_dir, region)
        if span is not None:
            spans[region] = span
    if not spans:
        return
    late = max(spans, key=lambda r: spans[r][0])  # the binding regions
    early = min(spans, key=lambda r: spans[r][1])
    first, last = spans[late][0], spans[early][1]
    if start < first:
        raise ConfigError(
            f"scenario {sc.name} starts {start}, before the real data of {late} "
            f"(first available hour {first})"
        )
    if need_last > last:
        # whole epochs n with ceil((n + pad + 1) x epoch / 1 h) <= the hours from start to last
        avail_h = (last - start) / pd.Timedelta(hours=1)
        n_max = math.floor(avail_h * 3600.0 / sc.epoch_s) - (steps - sc.n_epochs)
        max_days = max(n_max, 0) * sc.epoch_s / 86400.0
        raise ConfigError(
            f"--days {sc.days:g} from {start} runs past the real data of {early}: last "
            f"available hour {last} (the run reads signals until {need_last}, including "
            f"{pad_h:g} h of look-ahead); at most --days {max_days:.6g} fits"
        )


def check_window(
    sc: Scenario, data_dir: Path | None, *, auto_fidelity: bool = False
) -> tuple[Scenario, list[str]]:
    """All the checks above, cheapest first; returns the scenario to run (fluid if
    ``auto_fidelity`` had to switch) and notes for the result."""
    check_days(sc.days)
    sc, notes = check_memory(sc, auto_fidelity=auto_fidelity)
    check_timestamps(sc)
    check_real_data_window(sc, data_dir)
    return sc, notes
