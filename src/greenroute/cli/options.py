"""Option types shared by several commands, and the checks run before any simulation."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.physics.facility import FACILITY_PRESETS
from greenroute.sim.forecast import FORECASTERS

# forecasters that read --forecast-error ("perfect" with an error becomes "noisy" in api.run)
FORECASTERS_WITH_ERROR: tuple[str, ...] = ("noisy", "perfect")
DEFAULT_FORECAST = "perfect"

ScenarioOpt = Annotated[str, typer.Option("--scenario", "-s", help="scenario name")]
DaysOpt = Annotated[float | None, typer.Option(help="override the scenario length (days)")]
SeedOpt = Annotated[
    int, typer.Option(help="random seed, an integer >= 0 (workload, signals, policies)")
]
DataDirOpt = Annotated[
    Path | None,
    typer.Option(help="real data directory (default $GREENROUTE_DATA_DIR; else embedded data)"),
]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        help="write metrics, epochs and manifest into this directory (checked before the run)"
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option("--force", help="replace an existing --out result directory (atomically)"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON to stdout")]
NoCacheOpt = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="neither read nor write the cache of parsed data files and reference scales "
        "($GREENROUTE_CACHE_DIR, else ~/.cache/greenroute)",
    ),
]
LocalOpt = Annotated[str, typer.Option(help="local (per-request) policy")]
FidelityOpt = Annotated[str | None, typer.Option(help="request | fluid (default: scenario's)")]
ServerModelOpt = Annotated[
    str | None,
    typer.Option(
        help="request fidelity's server model: iteration (continuous batching, default for LLM "
        "servers) | slots (one placement per request; throughput servers)"
    ),
]
FacilityOpt = Annotated[
    str | None,
    typer.Option(help=f"facility model: {' | '.join(FACILITY_PRESETS)} (default: scenario's)"),
]
ExcludeOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="exclude REGION, or REGION@START_H-END_H with hours counted from the run's start "
        "(UTC), e.g. SG@0-6 = the first six hours (repeatable)"
    ),
]
ResidencyOpt = Annotated[list[str] | None, typer.Option(help="residency ORIGIN=R1+R2 (repeatable)")]
CapOpt = Annotated[list[str] | None, typer.Option(help="IT power cap REGION=KW (repeatable)")]
WeightsOpt = Annotated[
    str | None,
    typer.Option(help="objective weights, e.g. carbon=0.4,water=0.2,cost=0.2,latency=0.2"),
]
ForecastOpt = Annotated[
    str,
    typer.Option(
        help=f"what policies are told about the future: {DEFAULT_FORECAST} (default: the true "
        f"future), or {', '.join(f for f in FORECASTERS if f != DEFAULT_FORECAST)}; "
        "noisy needs --forecast-error"
    ),
]
ForecastErrOpt = Annotated[
    float,
    typer.Option(
        help="relative 1-sigma forecast error at lead 1, >= 0 (noisy forecaster; with "
        "perfect it switches to noisy; the other forecasters ignore it, so it is refused)"
    ),
]
PerDayOpt = Annotated[bool, typer.Option("--per-day", help="show extensive metrics per day")]
PolicyOptOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--policy-opt",
        help="geo policy option KEY=VALUE, e.g. horizon=96 for lp-mpc (repeatable; "
        "`greenroute policies --verbose` lists each policy's options)",
    ),
]


def check_seed(seed: int) -> int:
    if seed < 0:
        raise ConfigError(f"--seed must be an integer >= 0, got {seed}")
    return seed


def check_forecast(forecast: str, forecast_error: float) -> None:
    """The forecaster exists; the error is finite, >= 0 and read by that forecaster."""
    if forecast not in FORECASTERS:
        raise UnknownNameError("forecaster", forecast, FORECASTERS)
    if not math.isfinite(forecast_error) or forecast_error < 0:
        raise ConfigError(f"--forecast-error must be a finite number >= 0, got {forecast_error}")
    if forecast_error > 0 and forecast not in FORECASTERS_WITH_ERROR:
        users = [f for f in FORECASTERS if f in FORECASTERS_WITH_ERROR]
        raise ConfigError(
            f"--forecast-error {forecast_error:g} needs a --forecast that reads it, and "
            f"{forecast} ignores it; valid choices: {', '.join(users)}"
        )


def check_facility(facility: str | None) -> str | None:
    if facility is not None and facility not in FACILITY_PRESETS:
        raise UnknownNameError("facility", facility, FACILITY_PRESETS)
    return facility


def check_data_dir(data_dir: Path | None) -> None:
    """A named data directory exists and holds greenroute data (before any run)."""
    from greenroute.data.paths import resolve_data_dir

    resolve_data_dir(data_dir)


def check_local_policy(name: str) -> None:
    from greenroute.policies.registry import LOCAL_POLICIES

    if not name.startswith("rl:"):
        LOCAL_POLICIES.get(name)


def split_names(text: str, flag: str = "--policies") -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise ConfigError(f"{flag} is empty")
    return names


def parse_policy_options(items: list[str] | None) -> dict[str, Any]:
    """``--policy-opt KEY=VALUE`` pairs, values parsed as JSON when possible."""
    from greenroute.core.options import parse_key_values

    return parse_key_values(items, "--policy-opt")


def options_per_policy(names: Iterable[str], options: Mapping[str, Any]) -> dict[str, dict]:
    """Each listed geo policy's share of ``options``: the ones it declares, validated.

    An option that no listed policy declares is an error listing the options they do declare;
    an unknown policy name is an error listing the policies."""
    from greenroute.policies.registry import geo_policy_entry, policy_prefix, prefix_options

    names = list(names)
    declared: dict[str, set[str]] = {}
    for n in names:
        head = policy_prefix(n)
        if head is not None:  # rl:PATH (no options), llm:PATH (its loader's)
            if head == "llm":
                # no [agent] extra: building the policy says so
                with contextlib.suppress(ModuleNotFoundError):
                    import greenroute.agent.policy  # noqa: F401  (registers llm:, its options)
            declared[n] = set(prefix_options(head))
        else:
            declared[n] = {o.name for o in geo_policy_entry(n).options}
    every = sorted(set().union(*declared.values()))
    for key in options:
        if not any(key in d for d in declared.values()):
            owners = ", ".join(names)
            raise ConfigError(
                f"unknown --policy-opt {key!r}: no listed policy ({owners}) takes it; "
                f"valid choices: {', '.join(every) or '(none)'}"
            )
    out = {n: {k: v for k, v in options.items() if k in declared[n]} for n in names}
    for n, opts in out.items():
        if opts and policy_prefix(n) is None:
            geo_policy_entry(n).validate(opts)  # wrong type -> ConfigError now, not after prep
    return out


def constraints_from(exclude, residency, power_cap):
    from greenroute.constraints import (
        ConstraintSet,
        parse_exclusion,
        parse_power_cap,
        parse_residency,
    )

    cs = ConstraintSet()
    for text in exclude or []:
        cs = cs.with_exclusion(parse_exclusion(text))
    for text in residency or []:
        cs = cs.with_residency(*parse_residency(text))
    for text in power_cap or []:
        cs = cs.with_power_cap(*parse_power_cap(text))
    return None if cs.is_empty() else cs


def parse_weights(text: str | None):
    from greenroute.core.objective import parse_weights as _parse

    return _parse(text)


@contextlib.contextmanager
def cache_scope(no_cache: bool) -> Iterator[None]:
    """``--no-cache``: the code inside neither reads nor writes greenroute's disk cache."""
    from greenroute.data.cache import use_cache

    with use_cache(not no_cache):
        yield


# options that still mean something with --manifest (the rest would be silently ignored)
MANIFEST_COMPATIBLE = frozenset({"manifest", "out", "json_out", "data_dir", "force", "no_cache"})


def check_manifest_flags(ctx: typer.Context) -> None:
    """With ``--manifest``, any option the manifest overrides is an error (it would be
    ignored)."""
    given = []
    for p in ctx.command.params:
        if p.name in MANIFEST_COMPATIBLE or p.name is None:
            continue
        source = ctx.get_parameter_source(p.name)
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            given.append(max(p.opts, key=len))
    if given:
        allowed = sorted(
            max(p.opts, key=len)
            for p in ctx.command.params
            if p.name in MANIFEST_COMPATIBLE and p.name != "manifest"
        )
        raise ConfigError(
            f"--manifest fixes everything it records, so {', '.join(given)} would be ignored; "
            f"valid choices with --manifest: {', '.join(allowed)}"
        )
