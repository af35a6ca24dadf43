"""Shared fixtures. Real data is read from ``$GREENROUTE_DATA_DIR`` or ``../shared/data``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

_REPO = Path(__file__).resolve().parents[1]


def find_data_dir() -> Path | None:
    env = os.environ.get("GREENROUTE_DATA_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(_REPO.parent / "shared" / "data")
    for cand in candidates:
        if (cand / "grid" / "regions.csv").is_file():
            return cand
    return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    found = find_data_dir()
    if found is None:
        pytest.skip("real data not found (set GREENROUTE_DATA_DIR or put shared/ beside the repo)")
    return found
