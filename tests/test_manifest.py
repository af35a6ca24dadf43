"""Manifests: exact reproduction, field checks and data checksums before anything runs."""

from __future__ import annotations

import hashlib
import json

import pytest

import greenroute
from greenroute import api
from greenroute.core.errors import DataFormatError
from greenroute.sim.manifest import MANIFEST_VERSION, read_manifest


@pytest.fixture(scope="module")
def original():
    return greenroute.run("demo", "lowest-carbon", seed=3, days=0.1, fidelity="fluid")


def _write(tmp_path, m: dict, name: str = "manifest.json"):
    path = tmp_path / name
    path.write_text(json.dumps(m))
    return path


def test_manifest_round_trip_is_exact(original, tmp_path):
    m = original.manifest
    assert m["manifest_version"] == MANIFEST_VERSION == 2
    assert m["days"] == pytest.approx(150 / 1440, rel=1e-12) and m["days_requested"] == 0.1
    assert m["forecast"] == "perfect"
    again = api.run_manifest(_write(tmp_path, m))
    assert api.metrics_equal(original.metrics, again.metrics, rel=0.0)
    assert again.manifest["days_requested"] == 0.1
    # a version-1 manifest (days = what was asked, no days_requested) gives the same run
    v1 = {k: v for k, v in m.items() if k != "days_requested"}
    v1.update(manifest_version=1, days=0.1)
    old = api.run_manifest(_write(tmp_path, v1, "v1.json"))
    assert api.metrics_equal(original.metrics, old.metrics, rel=0.0)


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("days", "abc", "field 'days' must be a finite number > 0, got 'abc'"),
        ("days", -2, "field 'days' must be a finite number > 0, got -2"),
        ("days", None, "field 'days' must be a finite number > 0, got None"),
        ("seed", -1, "field 'seed' must be an integer >= 0, got -1"),
        ("seed", 1.5, "field 'seed' must be an integer >= 0, got 1.5"),
        ("seed", True, "field 'seed' must be an integer >= 0, got True"),
        ("forecast", "oracle", "field 'forecast' must be one of perfect"),
        ("forecast_error", -0.1, "field 'forecast_error' must be a finite number >= 0"),
        ("fidelity", "exact", "field 'fidelity' must be one of request, fluid"),
        ("weights", {"carbon": "x"}, "field 'weights' must be a mapping"),
        ("policy", 7, "field 'policy' must be a policy name, got 7"),
        ("input_files_sha256", ["a"], "field 'input_files_sha256' must be a mapping"),
        ("manifest_version", 99, "unknown manifest_version 99; valid choices: 1, 2"),
        ("manifest_version", "2", "unknown manifest_version '2'; valid choices: 1, 2"),
    ],
)
def test_bad_fields_are_one_line_errors_naming_the_field(original, tmp_path, field, value, needle):
    m = {**original.manifest, field: value}
    path = _write(tmp_path, m)
    with pytest.raises(DataFormatError) as err:
        api.run_manifest(path)
    assert needle in str(err.value) and str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_fields_and_non_objects(original, tmp_path):
    m = {k: v for k, v in original.manifest.items() if k != "manifest_version"}
    with pytest.raises(DataFormatError, match=r"manifest lacks \['manifest_version'\]"):
        read_manifest(_write(tmp_path, m))
    with pytest.raises(DataFormatError, match="a manifest is a JSON object"):
        read_manifest(_write(tmp_path, [1, 2], "list.json"))


def test_checksums_are_checked_before_running(original, tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "grid").mkdir(parents=True)
    (data / "grid" / "same.csv").write_text("a\n")
    (data / "grid" / "edited.csv").write_text("new\n")
    sha = {
        "grid/same.csv": hashlib.sha256(b"a\n").hexdigest(),
        "grid/edited.csv": hashlib.sha256(b"old\n").hexdigest(),
        "grid/gone.csv": hashlib.sha256(b"x").hexdigest(),
    }
    m = {**original.manifest, "data_dir": str(data), "input_files_sha256": sha}

    def must_not_run(*args, **kwargs):
        raise AssertionError("ran before checking the data")

    monkeypatch.setattr(api, "run", must_not_run)
    with pytest.raises(DataFormatError) as err:
        api.run_manifest(_write(tmp_path, m))
    msg = str(err.value)
    assert f"{data / 'grid' / 'edited.csv'} (changed: sha256 " in msg
    assert f"{data / 'grid' / 'gone.csv'} (missing)" in msg
    assert "same.csv" not in msg
    # files recorded but no data directory to check them in
    m["data_dir"] = None
    with pytest.raises(DataFormatError, match="names no data_dir"):
        api.run_manifest(_write(tmp_path, m))


def test_cli_manifest_with_bad_field_exits_2(original, tmp_path):
    from typer.testing import CliRunner

    from greenroute.cli import app

    path = _write(tmp_path, {**original.manifest, "days": "abc"})
    res = CliRunner().invoke(app, ["run", "--manifest", str(path)])
    assert res.exit_code == 2
    assert "field 'days' must be a finite number > 0, got 'abc'" in res.output
    assert "Traceback" not in res.output
