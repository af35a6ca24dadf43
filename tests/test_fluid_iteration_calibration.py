"""The fluid model of iteration servers (``sim/fluid_iteration.py``) against the iteration
engine (issue 8): carbon and energy within 1 %, mean TTFT within 5 % at 60-85 % utilisation.

Utilisation here (both engines): offered rate / the iteration server's sustainable rate
``1 / w`` (``fluid_iteration.saturation_work_s``: 2.846 requests/s per 4 x H100 Llama-2-70B
server; a saturated iteration engine run serves it within 1 %). Single region, 2-16 servers,
flat load, interactive only or a class mix (``bench/calibrate.py``), or the demo's three
regions; each case pools its own number of
seeds, a quarter day each, enough for a paired standard error of about 1 % (1.5 % with minute
noise): ``bench/calibration_cases.py`` has the cases, the counts and why.
``python -m greenroute.bench.calibration_cases`` prints every case with its standard error.
"""

from __future__ import annotations

import numpy as np
import pytest

from greenroute.bench.calibrate import calibration_scenario, local_run_metrics, sustainable_rps
from greenroute.bench.calibration_cases import (
    DAYS,
    DEMO_CASES,
    HELD_OUT_CASES,
    ISSUE_CASES,
    MIX_CASES,
    CalibrationCase,
    case_errors,
)
from greenroute.sim.prepare import prepare

ENERGY_TOL = 0.01  # carbon and energy (issue 8)
TTFT_TOL = 0.05  # mean TTFT at 60-85 % utilisation (issue 8)
# The verdict is the pooled error's; a standard error above this would make it the draw's
# (it was, with six seeds for every case until 2026-11-26: bench/calibration_cases.py)
TTFT_SE_MAX = 0.02


def failures(err: dict[str, tuple[float, float]]) -> list[str]:
    tol = {"carbon_kg": ENERGY_TOL, "energy_kwh": ENERGY_TOL, "ttft_mean_s": TTFT_TOL}
    return [f"{k}: {v:+.2%}" for k, (v, _) in err.items() if not abs(v) <= tol[k]]


def _check(case: CalibrationCase) -> None:
    err = case_errors(case)
    assert err["ttft_mean_s"][1] <= TTFT_SE_MAX, f"too few seeds: {err}"
    assert failures(err) == []


def _params(cases, why: dict[str, str]) -> list:
    def marks(c: CalibrationCase) -> list:
        if c.name not in why:
            return []
        return [pytest.mark.xfail(strict=True, raises=AssertionError, reason=why[c.name])]

    return [pytest.param(c, id=c.name, marks=marks(c)) for c in cases]


# Each case's figure (error +- paired standard error, its own seed count) is in
# docs/fluid_iteration_gap.md (table at the top); measured 2026-11-27.
# round-robin at 85 % with minute noise (-8.4 %) passes since the minute backlog looks back over
# the epochs before and carries the completions' variability (2026-11-27, fourth session)
ISSUE_XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("case", _params(ISSUE_CASES, ISSUE_XFAIL))
def test_fluid_matches_iteration_engine(case):
    _check(case)


# random 75 % (-12.8 %) and round-robin over 4 servers at 85 % (+5.2 %) passed on 2026-11-27, once
# the split-arrival chain was rebuilt from parts checked against the engine (fluid_split_chain)
# random 85 % with minute noise (-10.3 %) passes since the look-back backlog, as rr85n
HELD_OUT_XFAIL: dict[str, str] = {}


@pytest.mark.slow
@pytest.mark.parametrize("case", _params(HELD_OUT_CASES, HELD_OUT_XFAIL))
def test_fluid_matches_iteration_engine_held_out(case):
    _check(case)


# the demo mix at 85 % without noise (+5.3 %) passes since the count law over N servers
# (2026-11-27: +1.9 %): the 2-server count is narrower than the 8-server one (bench/route_spread)
# the demo mix at 85 % with minute noise (+7.7 % on 64 seeds) passes since an arrival that meets
# the minute backlog waits max(backlog, slot wait) instead of their sum (2026-11-28: +4.1 %)
DEMO_XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("case", _params(DEMO_CASES, DEMO_XFAIL))
def test_fluid_matches_iteration_engine_on_three_regions(case):
    _check(case)


# 40 % deferrable over 2 servers at 85 % (+8.5 %) passes since the count law over N servers
# (2026-11-27: +4.7 +- 1.7 %); 40 % deferrable over 4 servers at 75 % (-5.3 %) and the demo's
# class mix over 8 servers at 85 % (-11.1 %) pass since least-loaded's wait given full counts its
# own server's first completion (sooner: the router picked it by its low work) and the queue the
# router feeds there (2026-11-28: -4.1 / -4.5 %)
MIX_XFAIL: dict[str, str] = {}


@pytest.mark.slow
@pytest.mark.parametrize("case", _params(MIX_CASES, MIX_XFAIL))
def test_fluid_matches_iteration_engine_on_class_mixes(case):
    _check(case)


def test_slots_fluid_fails_against_the_iteration_engine():
    """The check is not vacuous: the slots-model fluid (per-slot service times, prefill at the
    per-slot power) misses the iteration engine (measured: energy -17.9 %, TTFT -26.8 %)."""
    err = case_errors(ISSUE_CASES[0], fluid_model="slots")  # least-loaded, 60 %
    assert [f.split(":")[0] for f in failures(err)] == ["carbon_kg", "energy_kwh", "ttft_mean_s"]


def test_sustainable_rate_is_the_engines_saturated_throughput():
    """Utilisation's denominator: 1 / (server-seconds per request at 32 running) from the cost
    tables; an overloaded iteration engine (3 x that rate offered) completes it within 1 %."""
    mu = sustainable_rps()
    assert mu == pytest.approx(5.691, rel=1e-3)  # 2 servers x 2.846 requests/s
    sc = calibration_scenario(3.0 * mu, 0.0, days=DAYS)
    m = local_run_metrics(sc, "request", "iteration", "least-loaded", 0)
    # the first epochs fill the servers: count the completions over the whole quarter day
    assert m["requests_completed"] / (DAYS * 86400.0) == pytest.approx(mu, rel=0.01)


def test_compiled_running_batch_equals_the_numpy_reference():
    from greenroute.sim import fluid_iteration_core as IC
    from greenroute.sim.fluid_iteration import IterationProfile, predict

    prep = prepare(calibration_scenario(1.0, 0.0, days=0.01).with_options(fidelity="fluid"), 0)
    prof = IterationProfile(prep.built, *prep.service.samples)
    types = np.array([[0]])
    for lam_i, lam_d in ((0.5, 0.0), (2.0, 0.3)):
        lam = np.array([[[lam_i], [lam_d]]])
        ref = predict(prof, lam, types, np.array([32.0]))["n"][0]
        got = IC.running(0, lam, lam_i + lam_d, types, prof.tau, prof.adv,
                         prof.decode.astype(float), prof.e_out, 32.0)  # fmt: skip
        assert got == pytest.approx(ref, rel=1e-12)
