"""Policies are registered by name; ``make_geo_policy("lowest-carbon")`` builds one."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from greenroute.errors import UnknownNameError

GeoFactory = Callable[..., object]
_GEO: dict[str, GeoFactory] = {}
_GEO_DOC: dict[str, str] = {}


def register_geo_policy(name: str, doc: str = "") -> Callable[[GeoFactory], GeoFactory]:
    """Decorator: register a GeoPolicy factory (a class or function taking keyword options)."""

    def deco(factory: GeoFactory) -> GeoFactory:
        _GEO[name] = factory
        _GEO_DOC[name] = doc or (factory.__doc__ or "").strip().split("\n")[0]
        return factory

    return deco


def _load_builtins() -> None:
    from greenroute.policies import heuristics  # noqa: F401  (registers on import)

    with contextlib.suppress(ImportError):  # optional extras missing
        from greenroute.policies import optimize  # noqa: F401


def geo_policy_names() -> list[str]:
    _load_builtins()
    return sorted(_GEO)


def geo_policy_docs() -> dict[str, str]:
    _load_builtins()
    return dict(sorted(_GEO_DOC.items()))


def make_geo_policy(name: str, **options):
    """Build a registered geo policy; ``rl:PATH`` loads a saved RL model (extra ``[rl]``)."""
    _load_builtins()
    if name.startswith("rl:"):
        try:
            from greenroute.policies.rl.loader import load_rl_geo_policy
        except ImportError as exc:
            from greenroute.errors import ConfigError

            raise ConfigError(f"policy {name!r} needs the [rl] extra: {exc}") from None
        return load_rl_geo_policy(name[3:], **options)
    try:
        factory = _GEO[name]
    except KeyError:
        raise UnknownNameError("policy", name, _GEO) from None
    policy = factory(**options)
    if not getattr(policy, "name", None):
        policy.name = name
    return policy
