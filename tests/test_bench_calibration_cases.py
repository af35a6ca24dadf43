"""``bench.calibration_cases``' engine cache: keyed so that only the fluid model's TTFT modules
can change without a rerun, and those provably never run in the engine."""

from __future__ import annotations

import subprocess
import sys

import pytest

from greenroute.bench import calibration_cases as CC
from greenroute.data import cache


def test_a_request_run_never_imports_the_fluid_only_modules():
    # a fresh process runs the iteration engine on a short calibration case and lists what it
    # imported: none of the modules the engine cache leaves out of its key may be among them
    modules = [f"greenroute.{m[:-3].replace('/', '.')}" for m in CC.FLUID_ONLY_MODULES]
    code = (
        "import sys\n"
        "from greenroute.bench import calibration_cases as CC\n"
        "CC.DAYS = 0.01\n"
        "case = CC.CalibrationCase('t', 'least-loaded', 0.85, deferrable_share=0.2)\n"
        "m = CC.engine_metrics(case, 0)\n"
        "assert m['ttft_mean_s'] > 0\n"
        f"print(sorted(set({modules!r}) & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, check=True)  # fmt: skip
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_fingerprint_leaves_out_only_the_named_files():
    full = cache.code_fingerprint()
    assert cache.code_fingerprint(CC.FLUID_ONLY_MODULES) != full
    assert cache.code_fingerprint(("sim/no_such_module.py",)) == full
    assert cache.code_fingerprint(CC.FLUID_ONLY_MODULES) == cache.code_fingerprint(
        CC.FLUID_ONLY_MODULES
    )


def test_engine_cache_runs_the_engine_once(tmp_path, monkeypatch):
    monkeypatch.setenv("GREENROUTE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("GREENROUTE_NO_CACHE", raising=False)
    monkeypatch.setattr(CC, "DAYS", 0.01)
    runs = []
    real = CC.local_simulation

    def counting(*args, **kwargs):
        sim = real(*args, **kwargs)
        run = sim.run

        def counted():
            runs.append(args[4])  # the seed
            return run()

        sim.run = counted
        return sim

    monkeypatch.setattr(CC, "local_simulation", counting)
    case = CC.CalibrationCase("t", "least-loaded", 0.6)
    first = CC.engine_metrics(case, 0, cached=True)
    again = CC.engine_metrics(case, 0, cached=True)
    assert runs == [0]  # the second call read the cache
    assert again == first
    assert CC.engine_metrics(case, 0) == first  # uncached: the same figures, run again
    assert runs == [0, 0]
    CC.engine_metrics(case, 1, cached=True)  # another seed is another entry
    CC.engine_metrics(CC.CalibrationCase("t", "least-loaded", 0.7), 0, cached=True)
    assert runs == [0, 0, 1, 0]
    assert set(first) == set(CC.METRICS)
    assert first["ttft_mean_s"] == pytest.approx(again["ttft_mean_s"], rel=0)


def test_load_response_is_the_paired_change_of_each_engines_ttft(monkeypatch):
    # two seeds of a short case: the reported change is (mean moved / mean base - 1) of the
    # runs made here by hand, for the engine and the fluid alike; more load, longer TTFT
    monkeypatch.setattr(CC, "DAYS", 0.01)
    case = CC.CalibrationCase("t", "least-loaded", 0.8, seeds=2)
    resp = CC.load_response(case, 0.1)
    moved = CC.CalibrationCase("t", "least-loaded", 0.8 * 1.1)
    for fidelity in ("request", "fluid"):
        base = [CC.local_run_metrics(case.scenario(), fidelity, "iteration", case.local, s)
                ["ttft_mean_s"] for s in range(2)]  # fmt: skip
        up = [CC.local_run_metrics(moved.scenario(), fidelity, "iteration", case.local, s)
              ["ttft_mean_s"] for s in range(2)]  # fmt: skip
        assert resp[fidelity][0] == pytest.approx(sum(up) / sum(base) - 1.0, rel=1e-12)
        assert resp[fidelity][0] > 0.0
    with pytest.raises(ValueError, match="load step must be > -1"):
        CC.load_response(case, -1.0)


def test_load_step_flag_rejects_a_step_that_empties_the_load(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["calibration_cases", "--cases", "ll60", "--load-step", "-1"])
    with pytest.raises(SystemExit) as exc:
        CC.main()
    assert exc.value.code == 2
    assert "--load-step must be > -1" in capsys.readouterr().err


def test_tail_figures_are_each_engines_seed_means(monkeypatch):
    # two seeds of a short case: each figure is the mean of the runs made here by hand
    monkeypatch.setattr(CC, "DAYS", 0.01)
    case = CC.CalibrationCase("t", "least-loaded", 0.8, seeds=2)
    figs = CC.tail_figures(case)
    for fidelity in ("request", "fluid"):
        runs = [CC.local_run_metrics(case.scenario(), fidelity, "iteration", case.local, s)
                for s in range(2)]  # fmt: skip
        for k in CC.TAIL_METRICS:
            assert figs[fidelity][k] == pytest.approx((runs[0][k] + runs[1][k]) / 2, rel=1e-12)
        assert figs[fidelity]["ttft_p99_s"] >= figs[fidelity]["ttft_p50_s"] > 0.0
