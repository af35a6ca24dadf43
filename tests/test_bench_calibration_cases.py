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
