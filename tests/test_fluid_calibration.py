"""The fluid (epoch-level) model agrees with the request-level engine on windows both can run.

Acceptance (issue 2): carbon and energy within 5 %. Issue 7: the comparison runs where queueing
matters (60-85 % mean utilisation) and checks the queue-wait part of TTFT on its own, because at
low load (the old 17 % cases) the wait is under 1 % of TTFT and a fluid model with no wait at
all passed. ``test_zero_wait_fluid_fails_the_comparison`` shows the check now catches that.

Queue wait, per engine:
- request engine: mean of ``start - (dispatch + one-way network)`` over completed interactive
  requests (exactly the queueing term of its TTFT = 2 net + wait + prefill);
- fluid model: its mean TTFT minus the mean TTFT of the same run with its wait terms (fluid
  backlog and stochastic M/G/c) set to zero (``_zero_wait``), which leaves 2 net + mean
  prefill.

``python -m greenroute.bench.calibrate`` prints a wider grid.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from greenroute.bench.calibrate import calibration_scenario
from greenroute.data.requests import CLASS_INTERACTIVE
from greenroute.policies.registry import local_policy_factory, make_geo_policy
from greenroute.scenarios import get_scenario
from greenroute.sim.engine import SimConfig, Simulation
from greenroute.sim.fluid import FluidBackend
from greenroute.sim.prepare import prepare
from greenroute.sim.scenario import Scenario

ENERGY_TOL = 0.05  # carbon and energy (issue 2 acceptance)
TTFT_TOL = 0.05  # mean TTFT at low load, where TTFT is network + prefill
# Mean queue wait: the request engine's own seed-to-seed spread of the mean wait over half a
# day is about 10 % at 75-82 % utilisation (0.199 / 0.228 / 0.176 s for seeds 0-2 at 6.3 rps,
# sigma 0.125), so 20 % is the tightest tolerance that does not test the random streams.
WAIT_TOL = 0.20


def busy_demo() -> Scenario:
    """The demo's three regions at about 76 % mean utilisation (flat load; see below)."""
    sc = get_scenario("demo")
    wl = replace(sc.workload, interactive_rps=(5.0,) * 3, deferrable_rps=(1.0,) * 3, diurnal="flat")
    return replace(sc, name="demo-busy", workload=wl, days=0.5)


def _zero_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the fluid model's queueing wait zero: after every epoch, the wait terms it recorded
    for that epoch's interactive flows (backlog at the start ``b0``, its growth ``slope`` and
    the M/G/c probability of waiting ``pw``) are set to 0, so TTFT = 2 net + mean prefill.
    Energy and carbon do not change (served work is the same)."""
    original = FluidBackend.step

    def step_without_wait(self, *args, **kwargs):
        before = len(self.comp["w"])
        info = original(self, *args, **kwargs)
        for key in ("b0", "slope", "pw"):
            for part in self.comp[key][before:]:
                part[:] = 0.0
        return info

    monkeypatch.setattr(FluidBackend, "step", step_without_wait)


def _simulate(sc: Scenario, policy: str, local: str, seed: int, fidelity: str, options=None):
    # calibrated against the slots server model (tests/test_fluid_iteration_calibration.py
    # checks the iteration one)
    prep = prepare(sc.with_options(fidelity=fidelity, server_model="slots"), seed, None)
    config = SimConfig(seed=seed, record_requests=fidelity == "request")
    geo = make_geo_policy(policy, **(options or {}))
    return prep, Simulation(prep, geo, local_policy_factory(local), config).run()


def request_wait_s(prep, res) -> float:
    """Mean queueing wait of completed interactive requests in the request engine."""
    df = res.requests
    t_end = prep.scenario.n_epochs * prep.scenario.epoch_s
    done = (df["cls"] == CLASS_INTERACTIVE) & (df["finish_s"] <= t_end)
    df = df[done]
    net = prep.latency_s[df["origin"].to_numpy(), df["region"].to_numpy()]
    return float((df["start_s"] - df["dispatch_s"] - net).mean())


def compare(
    sc: Scenario, policy: str, local: str, seed: int, options=None, monkeypatch=None
) -> dict:
    """Both engines on one case: utilisation, carbon, energy, TTFT and mean queue wait.

    With ``monkeypatch`` the fluid model runs with zero wait (the failure the test must catch).
    """
    prep, req = _simulate(sc, policy, local, seed, "request", options)
    out = {"utilisation": float(req.epochs["utilisation"].mean())}
    with pytest.MonkeyPatch.context() as mp:
        _zero_wait(mp)
        base_ttft = _simulate(sc, policy, local, seed, "fluid", options)[1].metrics["ttft_mean_s"]
    if monkeypatch is not None:
        _zero_wait(monkeypatch)
    flu = _simulate(sc, policy, local, seed, "fluid", options)[1].metrics
    for key in ("carbon_kg", "energy_kwh", "ttft_mean_s"):
        out[key] = (req.metrics[key], flu[key])
    out["wait_s"] = (request_wait_s(prep, req), flu["ttft_mean_s"] - base_ttft)
    return out


def rel_err(pair: tuple[float, float]) -> float:
    request, fluid = pair
    return (fluid - request) / request


def failures(cmp: dict, ttft: bool = False) -> list[str]:
    """The comparisons a case fails (empty when the fluid model agrees)."""
    checks = {"carbon_kg": ENERGY_TOL, "energy_kwh": ENERGY_TOL, "wait_s": WAIT_TOL}
    if ttft:
        checks["ttft_mean_s"] = TTFT_TOL
    return [
        f"{key}: fluid {cmp[key][1]:.4g} vs request {cmp[key][0]:.4g} ({rel_err(cmp[key]):+.1%})"
        for key, tol in checks.items()
        if not abs(rel_err(cmp[key])) <= tol
    ]


# Policies whose plans do not read queue state: state-reading ones (least-loaded) see the
# fluid's epoch averages instead of the request engine's instantaneous queues and may route
# differently, which is a difference of decisions, not of the engines.
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("policy", ["local-only", "round-robin", "nearest"])
def test_fluid_matches_request_engine_when_busy(policy, seed):
    cmp = compare(busy_demo(), policy, "least-loaded", seed)
    assert 0.60 <= cmp["utilisation"] <= 0.85, cmp["utilisation"]
    # queueing is a real share of TTFT here (the check below is not vacuous)
    assert cmp["wait_s"][0] > 0.5 * cmp["ttft_mean_s"][0]
    assert failures(cmp) == []


def test_fluid_matches_request_engine_at_low_load():
    """At 17 % utilisation TTFT is network + prefill: both engines agree within 5 %."""
    sc = get_scenario("demo")
    wl = replace(sc.workload, interactive_rps=(1.5,) * 3, deferrable_rps=(0.3,) * 3)
    sc = replace(sc, name="demo-moderate", workload=wl)
    _, req = _simulate(sc, "local-only", "least-loaded", 0, "request")
    flu = _simulate(sc, "local-only", "least-loaded", 0, "fluid")[1].metrics
    for key in ("carbon_kg", "energy_kwh", "ttft_mean_s"):
        assert flu[key] == pytest.approx(req.metrics[key], rel=ENERGY_TOL), key
    # the same requests arrive in both (fluid counts are the request engine's per-epoch counts)
    assert flu["requests_total"] == req.metrics["requests_total"]


# Single region, 2 x 32-slot servers, flat load (bench/calibrate.py). least-loaded is the local
# policy the fluid constants were fitted on; round-robin splits arrivals into per-server queues.
# Cases marked xfail are measured failures of the fluid model (fluid vs request mean wait, two
# seeds pooled, measured 2026-11-26), kept strict so that a fix shows up.
_RR_SMOOTH = (
    "fluid treats round-robin's per-server arrivals as Poisson (ca^2 = 1), but alternating two "
    "servers gives each one every second arrival (ca^2 = 1/2): the M/G/c wait is overestimated"
)
_NOISE = "minute-scale rate noise: the noise-averaged M/G/c wait misses the request engine's"


def _xfail(why: str):
    """A measured failure of the comparison (only an AssertionError counts as expected)."""
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=why)


CAL_CASES = [  # local policy, rps, noise sigma, why it fails (None: passes)
    ("least-loaded", 5.5, 0.0, None),  # util 0.63, wait error -8 %
    ("least-loaded", 6.8, 0.0, None),  # util 0.82, +17 %
    ("least-loaded", 5.5, 0.125, f"{_NOISE} (util 0.63: -50 %, 0.0125 s vs 0.0252 s)"),
    ("least-loaded", 6.8, 0.125, f"{_NOISE} (util 0.81: +22 %, 0.90 s vs 0.73 s)"),
    ("round-robin", 5.5, 0.0, f"{_RR_SMOOTH} (util 0.63: +196 %)"),
    ("round-robin", 6.8, 0.0, f"{_RR_SMOOTH} (util 0.82: +62 %)"),
    ("round-robin", 5.5, 0.125, None),  # util 0.63, -17 %
    ("round-robin", 6.8, 0.125, f"{_RR_SMOOTH} (util 0.81: +44 %)"),
]


@pytest.mark.parametrize(
    ("local", "rps", "sigma"),
    [
        pytest.param(lp, rps, sig, marks=[_xfail(why)] if why else [])
        for lp, rps, sig, why in CAL_CASES
    ],
)
def test_fluid_queue_wait_single_region(local, rps, sigma):
    sc = calibration_scenario(rps, sigma)
    cmps = [compare(sc, "local-only", local, seed) for seed in (0, 1)]
    assert 0.60 <= cmps[0]["utilisation"] <= 0.85, cmps[0]["utilisation"]
    # pool the two seeds (the request engine's mean wait is noisy at this length)
    pooled = {
        key: tuple(float(np.mean([c[key][i] for c in cmps])) for i in (0, 1))
        for key in ("carbon_kg", "energy_kwh", "ttft_mean_s", "wait_s")
    }
    assert failures(pooled) == []


@pytest.fixture(scope="module")
def packed_lowest_carbon() -> dict:
    """lowest-carbon packs the greenest demo region to about 85 % utilisation (1 day)."""
    opts = {"target_utilisation": 0.8}
    return compare(get_scenario("demo"), "lowest-carbon", "least-loaded", 1, options=opts)


def test_fluid_energy_when_lowest_carbon_packs_a_region(packed_lowest_carbon):
    cmp = packed_lowest_carbon
    assert [f.split(":")[0] for f in failures(cmp)] in ([], ["wait_s"])


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="fluid mean wait +38 % (1.48 s vs 1.07 s) when lowest-carbon packs one region to "
    "~85 %; lowest-carbon reads queue state, so the two engines' plans may also differ",
)
def test_fluid_queue_wait_when_lowest_carbon_packs_a_region(packed_lowest_carbon):
    assert failures(packed_lowest_carbon) == []


def test_zero_wait_fluid_fails_the_comparison(monkeypatch):
    """The check is not vacuous: a fluid model without queueing fails it on a busy case."""
    sc = busy_demo()
    good = compare(sc, "round-robin", "least-loaded", 0)
    assert failures(good) == []
    bad = compare(sc, "round-robin", "least-loaded", 0, monkeypatch=monkeypatch)
    assert bad["wait_s"][1] == pytest.approx(0.0, abs=1e-9)
    assert [f.split(":")[0] for f in failures(bad)] == ["wait_s"]
    # energy does not depend on the wait: only the wait comparison can catch this bug
    assert bad["energy_kwh"] == pytest.approx(good["energy_kwh"])
