"""The on-disk cache (greenroute.data.cache): keyed by content, never stale, corruption-proof,
bypassable. No real data needed: the files are written here."""

from __future__ import annotations

import json

import numpy as np
import pytest

from greenroute.data import cache
from greenroute.data import grid_loaders as S

CI_HEADER = (
    "Datetime (UTC),Carbon Intensity gCO₂eq/kWh (direct),Carbon Intensity gCO₂eq/kWh (LCA),"
    "Low Carbon Percentage,Renewable Percentage,Data Estimated\n"
)


def _write_ci(path, direct):
    rows = "".join(
        f"2023-07-01 {h:02d}:00:00,{v},{v + 50.0},40.0,30.0,false\n" for h, v in enumerate(direct)
    )
    path.write_text(CI_HEADER + rows, encoding="utf-8")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(root))
    monkeypatch.delenv(cache.NO_CACHE_ENV, raising=False)
    S.clear_cache()  # the in-process parse cache would hide the disk
    yield root
    S.clear_cache()


def _entries(root):
    return sorted((root / "signals").glob("*.npz")) if (root / "signals").exists() else []


def _direct(path):
    S.clear_cache()
    return S.load_carbon_intensity(path)["carbon_intensity_g_per_kwh"].to_numpy()


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(cache.CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "greenroute"
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"


def test_parsed_file_is_written_once_and_read_back(tmp_path, cache_dir):
    ci = tmp_path / "ci.csv"
    _write_ci(ci, [100.0, 200.0, 300.0])
    first = S.load_carbon_intensity(ci)
    assert len(_entries(cache_dir)) == 1
    S.clear_cache()
    again = S.load_carbon_intensity(ci)  # from the disk entry
    assert again.equals(first)
    assert again.index.equals(first.index) and str(again.index.dtype) == str(first.index.dtype)
    np.testing.assert_array_equal(again["carbon_intensity_g_per_kwh"], [100.0, 200.0, 300.0])
    assert again["estimated"].dtype == bool


def test_changed_file_gets_a_new_key_and_fresh_values(tmp_path, cache_dir):
    ci = tmp_path / "ci.csv"
    _write_ci(ci, [100.0, 200.0, 300.0])
    np.testing.assert_array_equal(_direct(ci), [100.0, 200.0, 300.0])
    _write_ci(ci, [100.0, 250.0, 300.0])  # same name and size class, new content
    np.testing.assert_array_equal(_direct(ci), [100.0, 250.0, 300.0])
    assert len(_entries(cache_dir)) == 2  # one entry per content checksum


def test_corrupt_entry_is_ignored_and_rewritten(tmp_path, cache_dir):
    ci = tmp_path / "ci.csv"
    _write_ci(ci, [100.0, 200.0, 300.0])
    _direct(ci)
    (entry,) = _entries(cache_dir)
    entry.write_bytes(b"PK\x03\x04 not a zip archive")
    np.testing.assert_array_equal(_direct(ci), [100.0, 200.0, 300.0])
    with np.load(entry, allow_pickle=False) as npz:  # rewritten whole
        np.testing.assert_array_equal(npz["col0"], [100.0, 200.0, 300.0])


def _poison(entry):
    """Replace the cached values by others, keeping the entry well-formed."""
    with np.load(entry, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["col0"] = np.array([-1.0, -2.0, -3.0])
    with open(entry, "wb") as handle:
        np.savez(handle, **arrays)


def test_no_cache_reads_the_files(tmp_path, cache_dir, monkeypatch):
    ci = tmp_path / "ci.csv"
    _write_ci(ci, [100.0, 200.0, 300.0])
    _direct(ci)
    (entry,) = _entries(cache_dir)
    _poison(entry)
    np.testing.assert_array_equal(_direct(ci), [-1.0, -2.0, -3.0])  # the cache is read...
    with cache.use_cache(False):  # ...and bypassed (API: run(..., cache=False))
        np.testing.assert_array_equal(_direct(ci), [100.0, 200.0, 300.0])
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")  # what --no-cache sets
    np.testing.assert_array_equal(_direct(ci), [100.0, 200.0, 300.0])
    ci2 = tmp_path / "ci2.csv"
    _write_ci(ci2, [7.0, 8.0])
    np.testing.assert_array_equal(_direct(ci2), [7.0, 8.0])
    assert _entries(cache_dir) == [entry]  # nothing written while bypassed


def test_json_entries_round_trip_exactly_and_survive_garbage(cache_dir):
    value = {"carbon_kg": 0.1 + 0.2, "ttft_mean_s": 1 / 3}
    cache.store_json("reference", "k", value)
    assert cache.load_json("reference", "k") == value  # repr round trip: bit-exact floats
    (cache_dir / "reference" / "k.json").write_text("{truncated", encoding="utf-8")
    assert cache.load_json("reference", "k") is None


def test_reference_scales_are_simulated_once_then_read(cache_dir, monkeypatch):
    from greenroute.policies.registry import local_policy_factory
    from greenroute.scenarios import get_scenario
    from greenroute.sim import reference
    from greenroute.sim.prepare import prepare

    sc = get_scenario("demo").with_options(days=0.1)
    local = local_policy_factory("least-loaded")
    # an earlier test in this process may have simulated the same reference (seen under
    # --dist worksteal, 2026-11-27): start from an empty in-process memo
    reference._MEMORY.clear()
    first = reference.reference_scales(prepare(sc, seed=3), local)
    assert len(list((cache_dir / "reference").glob("*.json"))) == 1
    reference._MEMORY.clear()

    def fail(*args):
        raise AssertionError("reference re-simulated despite a cached entry")

    monkeypatch.setattr(reference, "_simulate", fail)
    again = reference.reference_scales(prepare(sc, seed=3), local)
    assert again == first
    with pytest.raises(AssertionError, match="re-simulated"):  # another seed: another key
        reference.reference_scales(prepare(sc, seed=4), local)
    stored = json.loads(next((cache_dir / "reference").glob("*.json")).read_text())
    assert stored == first


def test_cli_no_cache_writes_nothing(cache_dir):
    from typer.testing import CliRunner

    from greenroute.cli import app
    from greenroute.sim import reference

    reference._MEMORY.clear()
    args = ["run", "--scenario", "demo", "--days", "0.1", "--seed", "5", "--json"]
    res = CliRunner().invoke(app, [*args, "--no-cache"])
    assert res.exit_code == 0, res.output
    assert not (cache_dir / "reference").exists()
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert len(list((cache_dir / "reference").glob("*.json"))) == 1
