"""Where numba keeps greenroute's compiled kernels: a directory keyed by the source of every
compiled module, so that editing one kernel recompiles every kernel that calls it.

numba's own cache (``@njit(cache=True)``, next to the source by default) checks only the
timestamp of the file that defines a function, not of the ``@njit`` functions it calls from other
modules: edit a callee in ``sim/fluid_noise_backlog.py`` and ``sim/fluid_iteration_kernel.py``
keeps running the old machine code, silently (numba 0.68; seen on 2026-11-26, reproduced with a
two-module package on 2026-11-27). Here the cache lives under
``<cache root>/numba/<key>``, where the key hashes numba's and Python's versions and the bytes of
every module of the package that mentions numba; any edit to one of them starts a fresh
directory (the first run after it compiles again, about a minute). The newest
:data:`KEEP_DIRS` directories are kept, older ones removed. A ``NUMBA_CACHE_DIR`` set by the
user wins and is left alone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

from greenroute.core.cache_root import cache_root

NUMBA_CACHE_ENV = "NUMBA_CACHE_DIR"
# what this module last set NUMBA_CACHE_DIR to (inherited by child processes, which compute their
# own key again: a child started after an edit must not use its parent's directory)
_SET_ENV = "_GREENROUTE_NUMBA_CACHE_DIR"
KEEP_DIRS = 4  # compiled-kernel directories kept beside the current one (older ones removed)
_PACKAGE = Path(__file__).resolve().parents[1]


def kernel_source_key(package: Path = _PACKAGE) -> str:
    """SHA-256 (16 hex digits) of numba's and Python's versions and every ``.py`` file under
    ``package`` whose text mentions numba, with its relative path."""
    import numba  # greenroute's kernels import it next anyway

    h = hashlib.sha256(f"{numba.__version__}|{sys.version}".encode())
    for path in sorted(package.rglob("*.py")):
        data = path.read_bytes()
        if b"numba" in data:
            h.update(str(path.relative_to(package)).encode() + b"\0" + data + b"\0")
    return h.hexdigest()[:16]


def configure_numba_cache(package: Path = _PACKAGE) -> Path | None:
    """Point numba's cache at ``<cache root>/numba/<key of package>`` unless
    ``NUMBA_CACHE_DIR`` is set; returns the directory used (None when the user's variable is
    left alone). Must run before any ``@njit(cache=True)`` function is defined: numba picks the
    location at decoration."""
    current = os.environ.get(NUMBA_CACHE_ENV)
    if current and current != os.environ.get(_SET_ENV):
        return None
    parent = cache_root() / "numba"
    target = parent / kernel_source_key(package)
    os.environ[NUMBA_CACHE_ENV] = os.environ[_SET_ENV] = str(target)  # for child processes
    sys.modules["numba"].config.CACHE_DIR = str(target)  # numba read the variable at import
    if not target.is_dir():
        _prune(parent, keep=KEEP_DIRS)
    return target


def _prune(parent: Path, keep: int) -> None:
    """Remove all but the ``keep`` most recently modified key directories under ``parent``."""
    try:
        dirs = sorted((p for p in parent.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    except OSError:
        return
    for old in dirs[: max(0, len(dirs) - keep)]:
        shutil.rmtree(old, ignore_errors=True)
