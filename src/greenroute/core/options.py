"""``KEY=VALUE`` option strings (``--policy-opt``, ``--env-option``, ``--hp``) to a dict."""

from __future__ import annotations

import json
from collections.abc import Iterable

from greenroute.core.errors import ConfigError


def parse_key_values(items: Iterable[str] | None, flag: str = "option") -> dict:
    """``KEY=VALUE`` strings to a dict; values parsed as JSON when possible (numbers, lists,
    booleans), else kept as strings. A malformed item is a :class:`ConfigError`."""
    out: dict = {}
    for item in items or []:
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"bad {flag} {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(val)
        except json.JSONDecodeError:
            out[key.strip()] = val
    return out
