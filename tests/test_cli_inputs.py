"""The ``greenroute`` command on bad input: one literal line on stderr, exit code 2, no run.

Also: ``--out`` checked before the run, replaced only with ``--force``, created with the user's
umask; ``--policy-opt`` and ``--facility`` on run/compare/pareto; readable ``--help``.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from greenroute import api
from greenroute.cli import app
from greenroute.cli.errors import print_error
from greenroute.cli.options import FORECASTERS_WITH_ERROR
from greenroute.sim.forecast import FORECASTERS

runner = CliRunner()
FAST = ["--days", "0.05"]


def invoke(*args):
    return runner.invoke(app, list(args))


def one_error_line(res) -> str:
    """The single ``error: ...`` line of a user error (exit code 2, no traceback)."""
    assert res.exit_code == 2, (res.exit_code, res.output, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: "), lines
    assert "Traceback" not in res.output + res.stderr
    return lines[0]


@pytest.fixture
def no_simulation(monkeypatch):
    """Fails the test if a simulation starts (the checks must come before it)."""
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError("a simulation started before the input was checked")

    for name in ("run", "compare", "run_manifest"):
        monkeypatch.setattr(api, name, refuse)
    yield calls
    assert calls == []


# ------------------------------------------------------------------ one-line input errors
@pytest.mark.parametrize(
    "args",
    [
        ["run"],
        ["compare"],
        ["pareto"],
        ["demo"],
        ["record", "--policy", "local-only"],
        ["train", "--env", "greenroute/GeoManager-v0"],
    ],
)
def test_negative_seed_is_one_line(args, no_simulation):
    line = one_error_line(invoke(*args, "--seed", "-3"))
    assert line == "error: --seed must be an integer >= 0, got -3"


@pytest.mark.parametrize("command", ["run", "compare"])
@pytest.mark.parametrize("value", ["-0.1", "nan", "inf"])
def test_bad_forecast_error_is_one_line(command, value, no_simulation):
    line = one_error_line(invoke(command, "--forecast", "noisy", "--forecast-error", value))
    assert "--forecast-error must be a finite number >= 0" in line


IGNORING = [f for f in FORECASTERS if f not in FORECASTERS_WITH_ERROR]


@pytest.mark.parametrize("forecast", IGNORING)
def test_forecast_error_with_a_forecaster_that_ignores_it(forecast, no_simulation):
    line = one_error_line(invoke("run", "--forecast", forecast, "--forecast-error", "0.1"))
    assert line == (
        f"error: --forecast-error 0.1 needs a --forecast that reads it, and {forecast} ignores "
        "it; valid choices: perfect, noisy"
    )


def test_forecasters_that_read_the_error_are_accepted():
    res = invoke("run", "--policy", "local-only", "--forecast", "noisy", "--forecast-error",
                 "0.2", *FAST, "--json")  # fmt: skip
    assert res.exit_code == 0, res.output


def test_unknown_forecaster_lists_them(no_simulation):
    line = one_error_line(invoke("run", "--forecast", "crystal-ball"))
    assert line == "error: unknown forecaster 'crystal-ball'; valid choices: " + ", ".join(
        sorted(FORECASTERS)
    )


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--seed", "3"], "--seed"),
        (["--policy", "oracle", "--days", "2"], "--policy, --days"),
        (["--forecast", "noisy", "--forecast-error", "0.1"], "--forecast, --forecast-error"),
        (["--policy-opt", "horizon=3"], "--policy-opt"),
        (["--exclude", "SG"], "--exclude"),
        (["--facility", "marlin"], "--facility"),
    ],
)
def test_manifest_with_flags_it_would_ignore(extra, named, tmp_path, no_simulation):
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{}")
    line = one_error_line(invoke("run", "--manifest", str(manifest), *extra))
    assert line == (
        f"error: --manifest fixes everything it records, so {named} would be ignored; "
        "valid choices with --manifest: --data-dir, --force, --json, --no-cache, --out"
    )


def test_manifest_with_out_force_and_no_cache_runs(tmp_path):
    first = tmp_path / "first"
    res = invoke("run", "--policy", "local-only", *FAST, "--seed", "4", "--out", str(first))
    assert res.exit_code == 0, res.output
    again = tmp_path / "again"
    res = invoke("run", "--manifest", str(first / "manifest.json"), "--out", str(again),
                 "--no-cache", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads((again / "manifest.json").read_text())["seed"] == 4
    assert json.loads((again / "metrics.json").read_text()) == json.loads(
        (first / "metrics.json").read_text()
    )


# ------------------------------------------------------------------ literal error text
def test_print_error_takes_markup_and_emoji_codes_literally(capsys):
    message = "data/x.csv:100: bad value [x] near :100: and [bold]y[/] [/]\nsecond line"
    print_error(message)
    err = capsys.readouterr().err
    assert err == (
        "error: data/x.csv:100: bad value [x] near :100: and [bold]y[/] [/] second line\n"
    )


def test_markup_like_policy_name_gives_the_unknown_policy_message(no_simulation):
    line = one_error_line(invoke("run", "--policy", "[/]"))
    assert line.startswith("error: unknown policy '[/]'; valid choices: ")
    assert "lowest-carbon" in line and "MarkupError" not in line


def test_file_line_message_with_emoji_code_and_brackets_prints_literally(tmp_path):
    bad = tmp_path / "[x]:100:" / "manifest.json"
    bad.parent.mkdir()
    bad.write_text("{\n not json")
    line = one_error_line(invoke("run", "--manifest", str(bad)))
    assert line == f"error: {bad}:2: not valid JSON (Expecting property name enclosed in " \
        "double quotes)"  # fmt: skip
    assert "💯" not in line


def test_data_dir_with_brackets_prints_literally(tmp_path, no_simulation):
    missing = tmp_path / "[red]gone[/]:100:"
    line = one_error_line(invoke("run", "--data-dir", str(missing)))
    assert line == f"error: {missing}: data directory does not exist"


# ------------------------------------------------------------------ --policy-opt, --facility
def test_run_policy_opt_takes_effect_and_is_recorded(tmp_path):
    out = tmp_path / "r"
    res = invoke("run", "--policy", "lowest-carbon", "--policy-opt", "target_utilisation=0.8",
                 *FAST, "--out", str(out))  # fmt: skip
    assert res.exit_code == 0, res.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["policy_options"] == {"target_utilisation": 0.8}


def test_run_misspelled_policy_opt(no_simulation):
    line = one_error_line(invoke("run", "--policy-opt", "target_utilization=0.8"))
    assert line == (
        "error: unknown option 'target_utilization' for policy 'lowest-carbon'; "
        "valid choices: target_utilisation"
    )


def test_compare_policy_opt_applies_to_the_policies_that_take_it(tmp_path):
    out = tmp_path / "c"
    res = invoke("compare", "--policies", "local-only,lowest-carbon,nearest", "--policy-opt",
                 "target_utilisation=0.8", "--no-oracle-gap", *FAST, "--out", str(out))  # fmt: skip
    assert res.exit_code == 0, res.output
    recorded = {
        p: json.loads((out / p / "manifest.json").read_text())["policy_options"]
        for p in ("local-only", "lowest-carbon", "nearest")
    }
    assert recorded == {
        "local-only": {},
        "lowest-carbon": {"target_utilisation": 0.8},
        "nearest": {"target_utilisation": 0.8},
    }


def test_compare_policy_opt_no_listed_policy_takes(no_simulation):
    line = one_error_line(invoke("compare", "--policies", "local-only,lowest-carbon",
                                 "--policy-opt", "horizon=3"))  # fmt: skip
    assert line == (
        "error: unknown --policy-opt 'horizon': no listed policy (local-only, lowest-carbon) "
        "takes it; valid choices: target_utilisation"
    )


def test_compare_policy_opt_wrong_type(no_simulation):
    line = one_error_line(invoke("compare", "--policies", "lowest-carbon",
                                 "--policy-opt", "target_utilisation=high"))  # fmt: skip
    assert "target_utilisation" in line and "takes float" in line


def test_pareto_policy_opt_every_policy_must_take_it(monkeypatch):
    from greenroute.bench import pareto as bench_pareto

    seen = {}

    def fake_sweep(scenario, names, n_weights, **kwargs):
        seen.update(kwargs)
        raise SystemExit(0)

    monkeypatch.setattr(bench_pareto, "pareto_sweep", fake_sweep)
    res = invoke("pareto", "--policies", "lowest-carbon,nearest", "--policy-opt",
                 "target_utilisation=0.7", "--facility", "marlin")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert seen["policy_options"] == {"target_utilisation": 0.7}
    assert seen["facility"] == "marlin"
    line = one_error_line(invoke("pareto", "--policies", "local-only,lp-mpc",
                                 "--policy-opt", "horizon=4"))  # fmt: skip
    assert line == (
        "error: --policy-opt 'horizon' on pareto goes to every listed policy, and local-only "
        "does not take it (list only policies that take it, or use compare); valid choices: "
        "(none)"
    )


def test_pareto_unknown_policy_before_any_run(monkeypatch):
    from greenroute.bench import pareto as bench_pareto

    monkeypatch.setattr(bench_pareto, "pareto_sweep", None)  # calling it would be a TypeError
    line = one_error_line(invoke("pareto", "--policies", "local-only,nope"))
    assert line.startswith("error: unknown policy 'nope'; valid choices: ")


@pytest.mark.parametrize("command", ["run", "compare", "pareto"])
def test_unknown_facility(command, no_simulation):
    line = one_error_line(invoke(command, "--facility", "igloo"))
    assert line == "error: unknown facility 'igloo'; valid choices: default, marlin"


def test_facility_marlin_is_used_and_recorded(tmp_path):
    res = {}
    for facility in ("default", "marlin"):
        out = tmp_path / facility
        r = invoke("run", "--policy", "local-only", *FAST, "--facility", facility,
                   "--out", str(out))  # fmt: skip
        assert r.exit_code == 0, r.output
        res[facility] = json.loads((out / "manifest.json").read_text())
        assert res[facility]["facility"] == facility
    # same IT work, different facility model: the facility overhead changes total energy
    assert res["default"]["metrics"]["energy_kwh"] != res["marlin"]["metrics"]["energy_kwh"]


# ------------------------------------------------------------------ --out
def test_out_existing_file_refused_before_the_run(tmp_path, no_simulation):
    f = tmp_path / "results"
    f.write_text("keep")
    line = one_error_line(invoke("run", "--out", str(f)))
    assert line == f"error: --out {f} is an existing file, not a directory"
    assert f.read_text() == "keep"


def test_out_under_a_file_refused_before_the_run(tmp_path, no_simulation):
    f = tmp_path / "afile"
    f.write_text("x")
    line = one_error_line(invoke("compare", "--out", str(f / "sub" / "r")))
    assert line.startswith(f"error: cannot create --out {f / 'sub' / 'r'}: {f} is a file")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_out_in_proc_refused_before_the_run(no_simulation):
    line = one_error_line(invoke("run", "--out", "/proc/x"))
    assert line.startswith("error: cannot create --out /proc/x: /proc is not writable")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize(
    "args",
    [
        ["record", "--policy", "local-only", "--out", "/proc/t.parquet"],
        ["train", "--env", "greenroute/GeoManager-v0", "--out", "/proc/m.zip"],
    ],
)
def test_record_and_train_out_file_checked_first(args, monkeypatch):
    from greenroute.bench import rl_record, rl_train

    def refuse(*a, **k):
        raise AssertionError("work started before --out was checked")

    monkeypatch.setattr(rl_record, "record", refuse)
    monkeypatch.setattr(rl_train, "train", refuse)
    line = one_error_line(invoke(*args))
    assert line.startswith(f"error: cannot create --out {args[-1]}: /proc is not writable")


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_out_existing_result_refused_without_force_and_replaced_with_it(tmp_path):
    out = tmp_path / "res"
    assert invoke("run", "--policy", "local-only", *FAST, "--seed", "1", "--out",
                  str(out)).exit_code == 0  # fmt: skip
    before = (out / "manifest.json").read_text()
    res = invoke("run", "--policy", "local-only", *FAST, "--seed", "2", "--out", str(out))
    line = one_error_line(res)
    assert line == (
        f"error: --out {out} exists and is not empty; use --force to replace it, or choose a "
        "new directory"
    )
    assert (out / "manifest.json").read_text() == before
    res = invoke("run", "--policy", "local-only", *FAST, "--seed", "2", "--out", str(out),
                 "--force")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads((out / "manifest.json").read_text())["seed"] == 2
    assert _leftovers(tmp_path) == []  # no temporary or old directory left behind


def test_force_replaces_a_compare_result_with_fewer_policies(tmp_path):
    out = tmp_path / "cmp"
    args = ["compare", *FAST, "--no-oracle-gap", "--out", str(out)]
    assert invoke(*args, "--policies", "local-only,nearest").exit_code == 0
    res = invoke(*args, "--policies", "coolest", "--force")
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["coolest"]
    assert _leftovers(tmp_path) == []


def test_force_does_not_replace_a_directory_that_is_not_a_result(tmp_path, no_simulation):
    out = tmp_path / "home"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    line = one_error_line(invoke("run", "--out", str(out), "--force"))
    assert "is not a greenroute result directory" in line
    assert (out / "thesis.tex").read_text() == "precious"


def test_force_does_not_replace_the_current_directory(tmp_path, monkeypatch, no_simulation):
    (tmp_path / "manifest.json").write_text("{}")  # looks like a result directory
    monkeypatch.chdir(tmp_path)
    for out in (".", str(tmp_path.parent)):
        line = one_error_line(invoke("run", "--out", out, "--force"))
        assert "is the current directory or contains it; --force will not replace it" in line
    assert (tmp_path / "manifest.json").read_text() == "{}"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
@pytest.mark.parametrize(("umask", "dir_mode", "file_mode"), [(0o022, 0o755, 0o644),
                                                               (0o077, 0o700, 0o600)])  # fmt: skip
def test_out_is_created_with_the_users_umask(umask, dir_mode, file_mode, tmp_path):
    out = tmp_path / "made" / "res"
    old = os.umask(umask)
    try:
        res = invoke("run", "--policy", "local-only", *FAST, "--out", str(out))
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.output
    assert stat.S_IMODE(out.stat().st_mode) == dir_mode
    assert stat.S_IMODE(out.parent.stat().st_mode) == dir_mode
    assert stat.S_IMODE((out / "manifest.json").stat().st_mode) == file_mode


# ------------------------------------------------------------------ help and notes
def test_run_help_is_readable_and_states_the_forecasts():
    res = invoke("run", "--help")
    assert res.exit_code == 0
    text = " ".join(res.stdout.split())
    assert "perfect (default: the true future)" in text
    for name in FORECASTERS:
        assert name in text
    assert "hours counted from the run's start (UTC)" in text
    # wider than 80 columns when there is room (help is no longer cut at 80)
    assert max(len(line) for line in res.stdout.splitlines()) > 80
    assert "─" not in res.stdout  # plain help, no boxes that cut option names


def test_policies_verbose_lists_options():
    res = invoke("policies", "--verbose", "--json")
    payload = json.loads(res.stdout)
    assert payload["geo"]["lp-mpc"]["options"]["horizon"]["default"] == 48
    assert payload["geo"]["lp-mpc"]["options"]["horizon"]["unit"] == "epochs"


NOTE = "note: no --data-dir: using embedded data"


def test_record_notes_embedded_data(tmp_path):
    out = tmp_path / "t.parquet"
    res = invoke("record", "--policy", "local-only", "--scenario", "geo3", *FAST,
                 "--out", str(out))  # fmt: skip
    assert res.exit_code == 0, res.output
    assert NOTE in res.stderr
    assert out.is_file()


def test_train_notes_embedded_data(tmp_path, monkeypatch):
    pytest.importorskip("stable_baselines3")
    from greenroute.bench import rl_train

    seen = {}

    def fake_train(env, algo, steps, seed, out, *, env_options, **kwargs):
        seen["env_options"] = env_options
        return {"wall_s": 0.0}

    monkeypatch.setattr(rl_train, "train", fake_train)
    res = invoke("train", "--env", "greenroute/GeoManager-v0", "--steps", "10",
                 "--out", str(tmp_path / "m.zip"))  # fmt: skip
    assert res.exit_code == 0, res.output
    assert NOTE in res.stderr
    assert "data_dir" not in seen["env_options"]


@pytest.mark.parametrize(("command", "seed"), [("run", "9101"), ("compare", "9102")])
def test_no_cache_neither_reads_nor_writes_the_cache(command, seed, tmp_path, monkeypatch):
    # a seed no other test uses: the reference scales are also cached in memory per seed
    cache = tmp_path / "cache"
    monkeypatch.setenv("GREENROUTE_CACHE_DIR", str(cache))
    res = invoke(command, *FAST, "--seed", seed, "--no-cache", "--json")
    assert res.exit_code == 0, res.output
    assert not cache.exists() or not any(cache.rglob("*.*"))
    res = invoke(command, *FAST, "--seed", seed, "--json")  # control: without the flag it writes
    assert res.exit_code == 0, res.output
    assert any(cache.rglob("*.json"))
