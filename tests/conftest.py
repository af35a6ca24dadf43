"""Shared fixtures. Real data is read from ``$GREENROUTE_DATA_DIR`` or ``../shared/data``.

Rules (issue 7):
- a test reads real data only through the ``data_dir`` fixture, and a test that requests it
  carries the ``realdata`` marker (and only those do): checked before each test runs;
- without the data, ``realdata`` tests skip, unless ``GREENROUTE_REQUIRE_DATA=1`` (set by
  ``.ci/run``), which turns the skip into an error;
- ``$GREENROUTE_DATA_DIR`` names the test data only: it is hidden from the library while
  tests run, so tests that do not request data run on the embedded data whatever it says.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# `greenroute run`/`compare` append to the result store; tests that want one name it
os.environ["GREENROUTE_STORE"] = "off"

_REPO = Path(__file__).resolve().parents[1]
DATA_ENV = "GREENROUTE_DATA_DIR"
REQUIRE_ENV = "GREENROUTE_REQUIRE_DATA"
# where the hidden $GREENROUTE_DATA_DIR is kept (inherited by pytest-xdist workers)
_HIDDEN_ENV = "_GREENROUTE_TESTS_DATA_DIR"
if DATA_ENV in os.environ:
    os.environ[_HIDDEN_ENV] = os.environ.pop(DATA_ENV)


def find_data_dir() -> Path | None:
    """``$GREENROUTE_DATA_DIR`` if set (and nothing else), else ``../shared/data``."""
    env = os.environ.get(_HIDDEN_ENV)
    cand = Path(env) if env else _REPO.parent / "shared" / "data"
    return cand if (cand / "grid" / "regions.csv").is_file() else None


def data_required() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    found = find_data_dir()
    if found is None:
        where = os.environ.get(_HIDDEN_ENV) or str(_REPO.parent / "shared" / "data")
        msg = f"real data not found at {where} (set {DATA_ENV} or put shared/ beside the repo)"
        if data_required():
            pytest.fail(f"{msg}; {REQUIRE_ENV}=1 makes this an error", pytrace=False)
        pytest.skip(msg)
    return found


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test requests ``data_dir`` exactly when it carries the ``realdata`` marker."""
    requests = "data_dir" in getattr(item, "fixturenames", ())
    marked = item.get_closest_marker("realdata") is not None
    if requests and not marked:
        pytest.fail("requests the data_dir fixture without @pytest.mark.realdata", pytrace=False)
    if marked and not requests:
        pytest.fail("is marked realdata but does not request the data_dir fixture", pytrace=False)


@pytest.fixture
def servers():
    """``start(app) -> ServerThread``: gateway tests' loopback servers (real uvicorn on free
    ports), stopped in reverse order at the end of the test."""
    from greenroute.serve.fake_upstream import ServerThread

    started: list[ServerThread] = []

    def start(app) -> ServerThread:
        s = ServerThread(app).start()
        started.append(s)
        return s

    yield start
    for s in reversed(started):
        s.stop()


# The calibration cases pool engine runs over many seeds (tests/test_fluid_iteration_calibration.py,
# up to four minutes each on one core). Run under ``--dist worksteal`` (Makefile), they start
# first, longest first, so that no worker is left alone with them at the end (2026-11-27: with
# xdist's default ``load`` scheduling one worker ran 20 of the suite's 29 minutes while the
# other sat idle for the last ten).
def _calibration_cost(item: pytest.Item) -> float | None:
    """Relative engine cost of a calibration case: seeds x offered load (the demo's three
    regions weigh about as five servers, measured: 2.9 s against 1.3 s per seed for two)."""
    case = getattr(getattr(item, "callspec", None), "params", {}).get("case")
    if case is None or not hasattr(case, "seeds"):
        return None
    return case.seeds * case.util * (5 if case.demo else case.servers)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def first_longest(item: pytest.Item) -> tuple[int, float]:
        cost = _calibration_cost(item)
        return (1, 0.0) if cost is None else (0, -cost)

    items.sort(key=first_longest)  # stable: everything else keeps its collection order
