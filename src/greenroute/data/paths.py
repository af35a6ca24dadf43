"""Where real data lives: ``--data-dir``, else ``$GREENROUTE_DATA_DIR``, else nothing."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from greenroute.core.errors import DataFormatError

ENV_VAR = "GREENROUTE_DATA_DIR"


def resolve_data_dir(data_dir: str | Path | None = None) -> Path | None:
    """Return the real-data directory to use, or ``None`` for the embedded default.

    An explicit ``data_dir`` wins; otherwise ``$GREENROUTE_DATA_DIR``. A directory that is
    named but missing, or lacks ``grid/regions.csv``, is a user error.
    """
    chosen = data_dir if data_dir not in (None, "") else os.environ.get(ENV_VAR) or None
    if chosen is None:
        return None
    path = Path(chosen).expanduser()
    if not path.is_dir():
        raise DataFormatError(path, "data directory does not exist")
    if not (path / "grid" / "regions.csv").is_file():
        raise DataFormatError(
            path, "not a greenroute data directory (expected grid/regions.csv inside)"
        )
    return path


def file_sha256(path: str | Path, chunk_bytes: int = 1 << 20) -> str:
    """Checksum of a file, recorded in run manifests."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk_bytes):
            digest.update(block)
    return digest.hexdigest()
