"""Counterfactual forks (``sim/fork.py``): exact replay, no effect on the original run, and
candidate figures that move the way physics says they must."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from greenroute.core.errors import ConfigError
from greenroute.core.types import N_CLASSES, Plan
from greenroute.data.requests import CLASS_INTERACTIVE
from greenroute.policies.registry import local_policy_factory, make_geo_policy
from greenroute.scenarios import get_scenario
from greenroute.sim.engine import SimConfig, Simulation
from greenroute.sim.fork import EpochFigures, advance_measured
from greenroute.sim.prepare import prepare

ADDITIVE = ("carbon_kg", "water_m3", "energy_kwh", "it_energy_kwh", "cost_usd")


@pytest.fixture(scope="module")
def prep_demo_request():
    # the slots server model: these tests derive epoch figures from per-dispatch outcomes and
    # read RequestBackend's arrays (iteration-model forks: tests/test_iteration_engine.py)
    return prepare(get_scenario("demo").with_options(server_model="slots"), 0)


@pytest.fixture(scope="module")
def prep_demo_fluid():
    return prepare(get_scenario("demo").with_options(fidelity="fluid"), 0)


@pytest.fixture(scope="module")
def prep_demo_fluid_busy():
    """The fluid demo on slots servers at its former load (2.0 + 0.4 rps per origin), where
    one region cannot serve the whole epoch-0 demand (the hand computation below)."""
    from dataclasses import replace

    sc = get_scenario("demo")
    wl = replace(sc.workload, interactive_rps=(2.0,) * 3, deferrable_rps=(0.4,) * 3)
    return prepare(replace(sc, workload=wl).with_options(fidelity="fluid", server_model="slots"), 0)


@pytest.fixture(scope="module")
def prep_geo3_fluid():
    # no data_dir: geo3's signals come from the embedded profiles
    return prepare(get_scenario("geo3").with_options(days=1.0, fidelity="fluid"), 0)


def _sim(prep, policy="carbon-threshold", **config):
    cfg = SimConfig(seed=0, **config)
    return Simulation(prep, make_geo_policy(policy), local_policy_factory("least-loaded"), cfg)


def _all_to(obs, r: int, hold: float = 0.0) -> Plan:
    route = np.zeros(obs.allowed.shape)
    route[:, :, r] = 1.0
    return Plan(route=route, hold=np.full(obs.n_origins, hold))


def _assert_same_metrics(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k, v in a.items():
        w = b[k]
        assert v == w or (isinstance(v, float) and math.isnan(v) and math.isnan(w)), k


def _replay_run(prep, policy="carbon-threshold", record=False):
    """Step a run; at every epoch fork it, replay the plan about to be taken, then take it.
    Returns (fork figures, real figures, result)."""
    sim = _sim(prep, policy, record_requests=record)
    sim.begin()
    forked, real = [], []
    while not sim.done:
        obs = sim.observe()
        plan = sim.get_plan(obs)
        forked.append(sim.fork().evaluate(plan, obs))
        real.append(advance_measured(sim, plan, obs))
    return forked, real, sim.finish()


@pytest.mark.parametrize("which", ["prep_demo_request", "prep_demo_fluid", "prep_geo3_fluid"])
def test_replaying_the_taken_plan_reproduces_every_epoch_exactly(which, request):
    prep = request.getfixturevalue(which)
    forked, real, res = _replay_run(prep)
    assert len(forked) == prep.n_epochs
    for f, r in zip(forked, real, strict=True):
        assert f == r, (f, r)  # every field, bit for bit
    # the policy held deferrable work in some epochs, so the pool was exercised
    assert any(e["rationale"] and "holds" in e["rationale"] for e in res.extras["plan_log"])
    # the epoch figures are the run's own: their sums are the result's totals, and each
    # epoch's carbon is the per-epoch frame's (finalize's ledger, computed independently).
    # Request fidelity: finalize bins busy time by differences of cumulative sums over the
    # whole day (``sim/ledger.py``), which cancel to about 1e-9 of an epoch; one request's
    # energy is about 1e-5 of an epoch's, so 1e-8 still catches a misplaced request
    rtol = 1e-8 if prep.scenario.fidelity == "request" else 1e-12
    m = res.metrics
    for key in ADDITIVE:
        assert sum(getattr(r, key) for r in real) == pytest.approx(m[key], rel=rtol)
    frame_carbon = res.epochs.groupby("epoch")["carbon_kg"].sum().to_numpy()
    np.testing.assert_allclose([r.carbon_kg for r in real], frame_carbon, rtol=rtol)
    assert sum(r.dropped for r in real) == pytest.approx(m["requests_dropped"], abs=1e-9)


def test_fluid_epoch_ttft_sums_to_the_run_mean(prep_geo3_fluid):
    _, real, res = _replay_run(prep_geo3_fluid)
    n = sum(r.interactive_requests for r in real)
    ttft_sum = sum(r.ttft_mean_s * r.interactive_requests for r in real if r.interactive_requests)
    assert n == pytest.approx(res.metrics["interactive_requests"], rel=1e-12)
    assert ttft_sum / n == pytest.approx(res.metrics["ttft_mean_s"], rel=1e-12)


def test_request_epoch_figures_match_the_recorded_requests(prep_demo_request):
    _, real, res = _replay_run(prep_demo_request, record=True)
    req = res.requests
    epoch_s = prep_demo_request.scenario.epoch_s
    slo_s = prep_demo_request.scenario.ttft_slo_s
    disp_epoch = np.floor(req["dispatch_s"].to_numpy() / epoch_s)
    placed = (req["drop_reason"] == "none").to_numpy() & np.isfinite(disp_epoch)
    inter = req["cls"].to_numpy() == CLASS_INTERACTIVE
    ttft = req["ttft_s"].to_numpy()
    late_d = ~inter & (req["finish_s"].to_numpy() > req["deadline_s"].to_numpy())
    dropped = (req["drop_reason"] != "none").to_numpy()
    assert prep_demo_request.scenario.slo_kind == "ttft"
    for r in real:
        now = disp_epoch == r.epoch
        sel = placed & inter & now
        assert r.interactive_requests == sel.sum()
        if sel.any():
            assert r.ttft_mean_s == pytest.approx(ttft[sel].mean(), rel=1e-12)
        assert r.slo_misses == (sel & (ttft > slo_s)).sum() + (placed & now & late_d).sum()
        assert r.dropped == (dropped & now).sum()
    assert sum(r.slo_misses for r in real) > 0


@pytest.mark.parametrize("which", ["prep_demo_request", "prep_geo3_fluid"])
def test_forking_at_every_epoch_leaves_the_run_unchanged(which, request):
    prep = request.getfixturevalue(which)
    # a noisy forecast draws from the forecaster's generator at every observation: a fork
    # that observes must put the generator back
    kw = {"forecast": "noisy", "forecast_error": 0.2}
    plain = _sim(prep, **kw).run()
    sim = _sim(prep, **kw)
    sim.begin()
    n_r = len(prep.scenario.regions)
    while not sim.done:
        obs = sim.observe()
        plan = sim.get_plan(obs)
        fork = sim.fork()
        for r in range(n_r):
            fork.evaluate(_all_to(obs, r, hold=0.7), obs)
        left = prep.n_epochs - sim.epoch
        fork.rollout(copy.deepcopy(sim.geo), min(3, left))  # observes later epochs itself
        fork.rollout([_all_to(obs, sim.epoch % n_r)] * min(2, left))
        fork.evaluate(plan)  # builds its own observation of this epoch
        sim.advance(plan, obs)
    forked = sim.finish()
    _assert_same_metrics(plain.metrics, forked.metrics)
    num = plain.epochs.select_dtypes("number").columns
    np.testing.assert_array_equal(plain.epochs[num].to_numpy(), forked.epochs[num].to_numpy())


@pytest.mark.parametrize("which", ["prep_demo_request", "prep_demo_fluid"])
def test_a_fork_restores_every_backend_array(which, request):
    sim = _sim(request.getfixturevalue(which))
    sim.begin()
    for _ in range(30):
        obs = sim.observe()
        sim.advance(sim.get_plan(obs), obs)
    st = sim._stepper
    be = st.backend if sim.sc.fidelity == "request" else st.fluid
    objs = [be, st] + ([be.state] if sim.sc.fidelity == "request" else [])

    def arrays():
        return [
            (type(o).__name__, k, v.copy())
            for o in objs
            for k, v in vars(o).items()
            if isinstance(v, np.ndarray) and k not in ("fbuf",)  # fbuf: kernel scratch
        ]

    obs = sim.observe()  # (observing prunes the request backend's list of open requests)
    before = arrays()
    sim.fork().rollout(_all_to(obs, 2, hold=1.0), 4, obs)
    for (name, k, v), (_, _, w) in zip(before, arrays(), strict=True):
        assert np.array_equal(v, w, equal_nan=True), f"{name}.{k} changed"


class _RoundRobinPy:
    """A Python local policy with memory (no compiled kernel): a fork must not advance it."""

    name = "round-robin-py"

    def reset(self, region: str) -> None:
        self.n = 0

    def pick(self, request, servers) -> int:
        ok = np.flatnonzero(servers.eligible)
        self.n += 1
        return int(ok[self.n % ok.size])


def test_a_python_local_policy_with_memory_is_not_advanced_by_forks():
    prep = prepare(get_scenario("demo").with_options(days=0.04), 0)  # 4 epochs, Python picks

    def run(with_forks: bool):
        sim = Simulation(prep, make_geo_policy("lowest-carbon"), _RoundRobinPy, SimConfig(seed=0))
        sim.begin()
        while not sim.done:
            obs = sim.observe()
            plan = sim.get_plan(obs)
            if with_forks:
                sim.fork().evaluate(_all_to(obs, 0), obs)
            sim.advance(plan, obs)
        return sim.finish().metrics

    plain, forked = run(False), run(True)
    assert plain["requests_total"] > 1000
    _assert_same_metrics(plain, forked)


@pytest.mark.parametrize("which", ["prep_demo_request", "prep_geo3_fluid"])
def test_a_policy_rollout_equals_the_real_next_epochs(which, request):
    sim = _sim(request.getfixturevalue(which))
    sim.begin()
    for _ in range(40):
        obs = sim.observe()
        sim.advance(sim.get_plan(obs), obs)
    obs = sim.observe()
    ahead = sim.fork().rollout(copy.deepcopy(sim.geo), 5, obs)
    real = []
    for _ in range(5):
        real.append(advance_measured(sim, sim.get_plan(obs), obs))
        obs = sim.observe()
    assert ahead.start_epoch == 40
    assert list(ahead.epochs) == real
    assert ahead.carbon_kg == pytest.approx(sum(r.carbon_kg for r in real), rel=1e-14)


def test_lowest_carbon_region_lowers_the_epochs_carbon_as_computed_by_hand(prep_demo_fluid_busy):
    """Epoch 0 of the fluid demo (empty queues, the same two servers in every region): all
    work to one region leaves the others at idle power and saturates that region (the
    whole demand is more than its two servers can serve in an epoch), so it draws peak
    power: each candidate's IT energy per region, and its carbon through the observation's
    per-IT-kWh factors, follow by hand."""
    sim = _sim(prep_demo_fluid_busy, "local-only")
    sim.begin()
    obs = sim.observe()
    cf = obs.carbon_g_per_it_kwh[0]  # g per IT kWh, [R]
    lo, hi = int(np.argmin(cf)), int(np.argmax(cf))
    assert cf[hi] > 1.5 * cf[lo]
    fork = sim.fork()
    f_lo, f_hi = fork.evaluate(_all_to(obs, lo), obs), fork.evaluate(_all_to(obs, hi), obs)
    idle_kwh = obs.idle_power_kw * obs.epoch_s / 3600.0
    for f, r in ((f_lo, lo), (f_hi, hi)):
        others = np.arange(len(cf)) != r
        np.testing.assert_allclose(f.it_energy_kwh_by_region[others], idle_kwh[others], rtol=1e-12)
    peak_kwh = obs.peak_power_kw * obs.epoch_s / 3600.0
    # saturation: the epoch's requests need more slot-seconds than a region has, even at the
    # full batch (the cheapest service per request)
    svc, b = prep_demo_fluid_busy.service, prep_demo_fluid_busy.built
    t = int(b.server_hw[0] * b.n_models + b.server_model0[0])
    slots = float(b.server_slots[0])
    need_slot_s = sum(
        svc.moments(t, c, 0, slots)[0] * prep_demo_fluid_busy.counts[0, :, c].sum()
        for c in range(N_CLASSES)
    )
    assert need_slot_s > 2 * slots * obs.epoch_s
    for f, r in ((f_lo, lo), (f_hi, hi)):
        assert f.it_energy_kwh_by_region[r] == pytest.approx(peak_kwh[r], rel=1e-12)
    expect_lo = (idle_kwh @ cf + (peak_kwh[lo] - idle_kwh[lo]) * cf[lo]) / 1e3
    expect_hi = (idle_kwh @ cf + (peak_kwh[hi] - idle_kwh[hi]) * cf[hi]) / 1e3
    assert f_lo.carbon_kg == pytest.approx(expect_lo, rel=1e-12)
    assert f_hi.carbon_kg == pytest.approx(expect_hi, rel=1e-12)
    assert f_lo.carbon_kg < f_hi.carbon_kg


def test_request_fork_lowest_carbon_region_emits_less(prep_demo_request):
    sim = _sim(prep_demo_request, "local-only")
    sim.begin()
    for _ in range(8):
        obs = sim.observe()
        sim.advance(sim.get_plan(obs), obs)
    obs = sim.observe()
    cf = obs.carbon_g_per_it_kwh[0]
    fork = sim.fork()
    f_lo = fork.evaluate(_all_to(obs, int(np.argmin(cf))), obs)
    f_hi = fork.evaluate(_all_to(obs, int(np.argmax(cf))), obs)
    assert f_lo.carbon_kg < f_hi.carbon_kg
    # the same requests, so the same interactive count whatever the region
    assert f_lo.interactive_requests == f_hi.interactive_requests > 0


def test_objective_is_the_epochs_share_of_the_runs_objective(prep_geo3_fluid):
    scales = {"carbon_kg": 50.0, "water_m3": 2.0, "cost_usd": 10.0, "ttft_mean_s": 0.5,
              "interactive_requests": 1e5, "requests_total": 1.2e5}  # fmt: skip
    sim = _sim(prep_geo3_fluid, objective_scales=scales)
    sim.begin()
    obs = sim.observe()
    f = sim.fork().evaluate(sim.get_plan(obs), obs)
    w = sim.config.weights
    expect = (
        w.carbon * f.carbon_kg / 50.0
        + w.water * f.water_m3 / 2.0
        + w.cost * f.cost_usd / 10.0
        + w.latency * f.ttft_mean_s * f.interactive_requests / (0.5 * 1e5)
        + w.slo_penalty * (f.slo_misses + f.dropped) / 1.2e5
    )
    assert f.objective == pytest.approx(expect, rel=1e-12)
    assert math.isnan(_fork0(_sim(prep_geo3_fluid)).objective)  # no scales, no J
    del scales["requests_total"]  # a missing scale is an error, not a silent 1.0
    with pytest.raises(ConfigError, match="requests_total"):
        _fork0(_sim(prep_geo3_fluid, objective_scales=scales))


def _fork0(sim) -> EpochFigures:
    sim.begin()
    obs = sim.observe()
    return sim.fork().evaluate(sim.get_plan(obs), obs)


def test_stale_or_overlong_forks_are_refused(prep_demo_fluid):
    sim = _sim(prep_demo_fluid)
    with pytest.raises(ConfigError, match="begin"):
        sim.fork()
    sim.begin()
    obs = sim.observe()
    plan = sim.get_plan(obs)
    fork = sim.fork()
    with pytest.raises(ConfigError, match=r"1\.\.96 epochs, not 97"):
        fork.rollout(plan, 97)
    sim.advance(plan, obs)
    with pytest.raises(ConfigError, match="stale fork"):
        fork.evaluate(plan)
    with pytest.raises(ConfigError, match="observation is of epoch 0, the fork's is 1"):
        sim.fork().evaluate(plan, obs)
