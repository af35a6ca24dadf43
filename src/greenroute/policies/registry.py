"""Geo and local policies are registered by name with their options declared.

``make_geo_policy("lowest-carbon", target_utilisation=0.8)`` builds one; an unknown policy or
option is an error that lists the valid choices. ``rl:PATH`` loads a saved RL model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from greenroute.core.errors import ConfigError
from greenroute.core.registry import Entry, Registry
from greenroute.core.types import GeoPolicy, LocalPolicy


def _load_heuristics() -> None:
    from greenroute.policies import heuristics  # noqa: F401  (registers on import)


def _load_optimisers() -> None:
    # nsga2 imports its optional pymoo only when built (a clear error names the extra)
    from greenroute.policies.marlin import policy  # noqa: F401  (MARLIN, seed 001; torch lazily)
    from greenroute.policies.optimize import admm, lp, nsga2  # noqa: F401


def _load_baselines() -> None:
    from greenroute.policies import baselines  # noqa: F401  (seed 001's baselines register)


def _load_local_builtins() -> None:
    from greenroute.policies import local  # noqa: F401  (registers on import)


# heuristics first: building one of them does not import the optimisers (scipy's LP stack)
GEO_POLICIES: Registry[GeoPolicy] = Registry(
    "policy", (_load_heuristics, _load_optimisers, _load_baselines)
)
LOCAL_POLICIES: Registry[LocalPolicy] = Registry("local policy", _load_local_builtins)


def register_geo_policy(
    name: str,
    doc: str = "",
    *,
    units: Mapping[str, str] | None = None,
    help: Mapping[str, str] | None = None,
) -> Callable:
    """Decorator: register a GeoPolicy factory (a class or function whose keyword parameters,
    with defaults and type annotations, are its options)."""
    return GEO_POLICIES.register(name, doc, units=units, help=help)


def register_local_policy(
    name: str,
    doc: str = "",
    *,
    units: Mapping[str, str] | None = None,
    help: Mapping[str, str] | None = None,
) -> Callable:
    """Decorator: register a LocalPolicy factory."""
    return LOCAL_POLICIES.register(name, doc, units=units, help=help)


def geo_policy_names() -> list[str]:
    return GEO_POLICIES.names()


def geo_policy_docs() -> dict[str, str]:
    return {e.name: e.description for e in GEO_POLICIES.entries()}


def geo_policy_entry(name: str) -> Entry[GeoPolicy]:
    return GEO_POLICIES.get(name)


RL_EXTRA_MODULES = ("torch", "stable_baselines3", "gymnasium", "pettingzoo")


def _rl_extra(name: str) -> Any:
    try:
        from greenroute.policies.rl import loader
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in RL_EXTRA_MODULES:
            raise
        raise ConfigError(f"policy {name!r} needs the [rl] extra: {exc}") from None
    return loader


# prefix -> loader(rest_of_name, **options): policies that live in a layer above (the LLM agent
# registers ``llm:`` when greenroute.agent.policy is imported); ``rl:`` is built in below
_PREFIX_LOADERS: dict[str, Callable[..., GeoPolicy]] = {}
_PREFIX_OPTIONS: dict[str, tuple[str, ...]] = {"rl": ()}
# prefixes whose plugin is known but may not be imported yet: what to import for them
KNOWN_PREFIX_PLUGINS = {"llm": "greenroute.agent.policy (extra [agent])"}


def register_policy_prefix(
    prefix: str, loader: Callable[..., GeoPolicy], options: tuple[str, ...] = ()
) -> None:
    """``make_geo_policy(f"{prefix}:REST", **options)`` calls ``loader(REST, **options)``;
    ``options``: the option names the loader takes (what ``--policy-opt`` may give it)."""
    _PREFIX_LOADERS[prefix] = loader
    _PREFIX_OPTIONS[prefix] = tuple(options)


def prefix_options(prefix: str) -> tuple[str, ...]:
    """The option names a prefixed policy (``rl:``, ``llm:``) takes; () if not registered."""
    return _PREFIX_OPTIONS.get(prefix, ())


def policy_prefix(name: str) -> str | None:
    """``rl`` or a plugin prefix (registered or known) that ``name`` starts with, else None."""
    head = name.split(":", 1)[0] if ":" in name else None
    known = ("rl", *_PREFIX_LOADERS, *KNOWN_PREFIX_PLUGINS)
    return head if head is not None and head in known else None


def make_geo_policy(name: str, **options: Any) -> GeoPolicy:
    """Build a registered geo policy with validated options; ``rl:PATH`` loads a saved RL
    model (extra ``[rl]``; it takes no options); a registered prefix (``llm:PATH``) calls its
    loader."""
    head = policy_prefix(name)
    if head is not None and head != "rl":
        if head not in _PREFIX_LOADERS:
            raise ConfigError(
                f"policy {name!r} needs {KNOWN_PREFIX_PLUGINS[head]}: import it to register "
                f"the {head}: policies"
            )
        return _PREFIX_LOADERS[head](name[len(head) + 1 :], **options)
    if name.startswith("rl:"):
        if options:
            raise ConfigError(
                f"policy {name!r} takes no options (got {sorted(options)}); valid choices: (none)"
            )
        return _rl_extra(name).load_rl_geo_policy(name[3:])
    entry = GEO_POLICIES.get(name)
    valid = entry.validate(options)
    policy = entry.factory(**valid)
    if not getattr(policy, "name", None):
        policy.name = name
    policy.options = valid  # what took effect (recorded in manifests)
    return policy


def local_policy_names() -> list[str]:
    return LOCAL_POLICIES.names()


def make_local_policy(name: str, **options: Any) -> LocalPolicy:
    """A fresh local policy by name (``rl:PATH`` loads a trained seed-002 model)."""
    if name.startswith("rl:"):
        if options:
            raise ConfigError(f"local policy {name!r} takes no options; valid choices: (none)")
        return _rl_extra(name).load_rl_local_policy(name[3:])
    return LOCAL_POLICIES.build(name, **options)


def local_policy_factory(
    spec: LocalPolicy | type | str,
) -> Callable[[], LocalPolicy]:
    """A zero-argument factory of per-region local policies for the engine: a name or a class
    gives a fresh instance per region; an object is shared by every region (used as is)."""
    if isinstance(spec, str):
        make_local_policy(spec)  # fail fast on a bad name
        return lambda: make_local_policy(spec)
    if isinstance(spec, type):
        return spec
    return lambda: spec
