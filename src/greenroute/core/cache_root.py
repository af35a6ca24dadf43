"""Root of greenroute's on-disk caches (parsed inputs, compiled kernels)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_DIR_ENV = "GREENROUTE_CACHE_DIR"


def cache_root() -> Path:
    """``$GREENROUTE_CACHE_DIR``, else ``$XDG_CACHE_HOME/greenroute``, else
    ``~/.cache/greenroute`` (not created here)."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "greenroute"
