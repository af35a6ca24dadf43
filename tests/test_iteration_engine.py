"""The iteration server model inside the request engine (``sim/iteration_mode.py``): selection,
determinism, conservation, Python local policies, forks, load response, manifests, refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

import greenroute
from greenroute.core.errors import ConfigError
from greenroute.data.workload import WorkloadSpec
from greenroute.policies.local import (
    LeastConnectionsLocal,
    LeastLoadedLocal,
    RandomLocal,
    RoundRobinLocal,
)
from greenroute.policies.registry import local_policy_factory, make_geo_policy
from greenroute.scenarios import get_scenario
from greenroute.sim import kernel as K
from greenroute.sim.engine import SimConfig, Simulation
from greenroute.sim.fork import advance_measured
from greenroute.sim.iteration_mode import IterationBackend, cost_tables, iteration_config
from greenroute.sim.prepare import prepare
from greenroute.sim.scenario import SERVER_MODELS

SHORT = 0.05  # days: 5 epochs of 15 min, ~32k requests in demo


def _demo(days=SHORT, **kw):
    return get_scenario("demo").with_options(days=days, **kw)


@pytest.fixture(scope="module")
def demo_runs():
    return {
        sm: greenroute.run(_demo(server_model=sm), "lowest-carbon", seed=3, record_requests=True)
        for sm in SERVER_MODELS
    }


def test_default_is_iteration_for_llm_servers_and_slots_for_throughput_servers():
    assert get_scenario("demo").resolved_server_model == "iteration"
    assert get_scenario("lb-highload").resolved_server_model == "slots"
    assert _demo(server_model="slots").resolved_server_model == "slots"


def test_lb_highload_refuses_the_iteration_model_in_one_line():
    with pytest.raises(ConfigError) as err:
        get_scenario("lb-highload").with_options(server_model="iteration")
    msg = str(err.value)
    assert "\n" not in msg and "tokens_per_s" in msg and "server_model='slots'" in msg
    with pytest.raises(ConfigError, match="valid choices: iteration, slots"):
        _demo(server_model="paged")


def test_both_models_run_demo_record_their_model_and_differ(demo_runs):
    it, sl = demo_runs["iteration"], demo_runs["slots"]
    assert it.server_model == "iteration" and it.manifest["server_model"] == "iteration"
    assert sl.server_model == "slots" and sl.manifest["server_model"] == "slots"
    # the same workload and routing draws
    assert it.metrics["requests_total"] == sl.metrics["requests_total"]
    assert it.metrics["ttft_mean_s"] != sl.metrics["ttft_mean_s"]
    for key in ("tbt_mean_s", "tbt_p99_s", "e2e_p50_s", "e2e_p95_s", "e2e_p99_s",
                "batch_size_mean", "token_budget_utilisation", "preemptions",
                "dropped_preemption_limit"):  # fmt: skip
        assert np.isfinite(it.metrics[key]), key
    assert it.metrics["e2e_p50_s"] <= it.metrics["e2e_p95_s"] <= it.metrics["e2e_p99_s"]
    assert 1.0 <= it.metrics["batch_size_mean"] <= 32.0  # demo's max_concurrency
    assert 0.0 < it.metrics["token_budget_utilisation"] <= 1.0
    # slots results carry the new drop reason too (always zero there)
    assert sl.metrics["dropped_preemption_limit"] == 0.0
    assert {"batch_size_mean", "token_budget_utilisation"} <= set(it.epochs.columns)


def test_same_seed_same_numbers_in_the_iteration_model():
    # cache=False: the objective's reference scales are not read from the shared disk cache
    a = greenroute.run(_demo(), "lowest-carbon", seed=3, cache=False)
    again = greenroute.run(_demo(), "lowest-carbon", seed=3, cache=False)
    assert again.metrics == a.metrics
    other = greenroute.run(_demo(), "lowest-carbon", seed=4, cache=False)
    assert other.metrics["requests_total"] != again.metrics["requests_total"]


def test_ttft_is_network_plus_first_token_time_and_tbt_from_the_timeline(demo_runs):
    res = demo_runs["iteration"]
    req = res.requests
    done = (req["drop_reason"] == "none") & np.isfinite(req["finish_s"])
    assert done.sum() > 1000
    d = req[done]
    # TTFT >= 2 x network + the fastest prefill (128 tokens: 0.0489 s on 4 x H100, llama2-70b)
    prep = prepare(_demo(), 3)
    net = prep.latency_s[d["origin"].to_numpy(), d["region"].to_numpy()]
    wait = d["ttft_s"].to_numpy() - 2.0 * net
    assert (wait > 0.04).all()
    # first token before the last; e2e = finish + network - arrival
    assert (d["first_token_s"] <= d["finish_s"]).all()
    e2e = d["finish_s"].to_numpy() + net - d["arrival_s"].to_numpy()
    np.testing.assert_allclose(d["e2e_s"].to_numpy(), e2e, rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conservation_of_requests_and_tokens(seed):
    res = greenroute.run(_demo(days=0.03), "lowest-carbon", seed=seed, record_requests=True)
    m, req = res.metrics, res.requests
    assert (
        m["requests_completed"] + m["requests_dropped"] + m["requests_in_flight"]
        == (m["requests_total"])
    )
    assert m["requests_dropped"] == sum(
        m[f"dropped_{name}"] for name in K.DROP_REASONS if name != "none"
    )
    horizon = m["horizon_s"]
    completed = (req["drop_reason"] == "none") & (req["finish_s"] <= horizon)
    assert completed.sum() == m["requests_completed"]
    c = req[completed]
    # every prompt token prefilled once (recomputes counted apart), every output token decoded
    np.testing.assert_array_equal(c["prefill_tokens"], c["prompt_tokens"])
    np.testing.assert_array_equal(c["output_tokens_done"], c["output_tokens"])
    assert (req["recomputed_tokens"] >= 0).all()
    in_flight = ~completed & (req["drop_reason"] == "none")
    assert in_flight.sum() == m["requests_in_flight"]
    # in flight: never more prefilled or decoded than asked
    f = req[in_flight]
    assert (f["prefill_tokens"] <= f["prompt_tokens"]).all()
    assert (f["output_tokens_done"] <= f["output_tokens"]).all()


@pytest.mark.parametrize(
    "builtin", [RoundRobinLocal, LeastConnectionsLocal, LeastLoadedLocal, RandomLocal]
)
def test_python_local_policy_equals_the_compiled_one_in_the_iteration_model(builtin):
    """The Python path advances servers in other steps than the kernel (a steady decode run
    split at a pick), so iteration times may differ by float rounding only (1e-9)."""

    class PythonPath(builtin):
        def pick(self, request, servers):
            return super().pick(request, servers)

    kw = {"seed": 7, "days": 0.05}
    fast = greenroute.run("demo", "round-robin", local_policy=builtin.name, **kw)
    slow = greenroute.run("demo", "round-robin", local_policy=PythonPath, **kw)
    assert fast.server_model == slow.server_model == "iteration"
    assert fast.metrics["requests_completed"] > 1000
    assert slow.metrics["requests_completed"] == fast.metrics["requests_completed"]
    assert slow.metrics["preemptions"] == fast.metrics["preemptions"]
    for key in ("carbon_kg", "energy_kwh", "ttft_mean_s", "ttft_p99_s", "e2e_mean_s"):
        assert slow.metrics[key] == pytest.approx(fast.metrics[key], rel=1e-9), key


def _sim(prep, policy="carbon-threshold"):
    return Simulation(prep, make_geo_policy(policy), local_policy_factory("least-loaded"),
                      SimConfig(seed=0))  # fmt: skip


def test_a_fork_replaying_the_taken_plan_reproduces_every_epoch_exactly():
    prep = prepare(_demo(days=0.08), 0)
    sim = _sim(prep)
    sim.begin()
    assert sim._stepper.iteration
    forked, real = [], []
    while not sim.done:
        obs = sim.observe()
        plan = sim.get_plan(obs)
        forked.append(sim.fork().evaluate(plan, obs))
        real.append(advance_measured(sim, plan, obs))
    res = sim.finish()
    for f, r in zip(forked, real, strict=True):
        assert f == r, (f, r)  # every field, bit for bit
    assert sum(r.interactive_requests for r in real) > 1000
    # the epochs' energy is the run's ledger
    assert sum(r.it_energy_kwh for r in real) == pytest.approx(
        res.metrics["it_energy_kwh"], rel=1e-12
    )
    # and forking at every epoch left the run as a plain one
    plain = _sim(prep).run()
    assert plain.metrics == res.metrics


def test_a_fork_restores_the_iteration_state():
    sim = _sim(prepare(_demo(days=0.08), 0))
    sim.begin()
    for _ in range(3):
        obs = sim.observe()
        sim.advance(sim.get_plan(obs), obs)
    be = sim._stepper.backend
    assert isinstance(be, IterationBackend)

    def arrays():
        objs = [be, be.st, be.cfg]
        return [(k, v.copy()) for o in objs for k, v in vars(o).items()
                if isinstance(v, np.ndarray)]  # fmt: skip

    obs = sim.observe()
    before = arrays()
    route = np.zeros_like(obs.allowed, dtype=float)
    route[:, :, 2] = 1.0
    from greenroute.core.types import Plan

    sim.fork().rollout(Plan(route=route, hold=np.ones(obs.n_origins)), 3, obs)
    after = arrays()
    assert [k for k, _ in before] == [k for k, _ in after]
    for (k, v), (_, w) in zip(before, after, strict=True):
        assert np.array_equal(v, w, equal_nan=True), f"{k} changed"


def test_latency_responds_to_load():
    base = get_scenario("demo")
    spec = base.workload
    assert isinstance(spec, WorkloadSpec)
    from dataclasses import replace

    double = replace(
        base,
        workload=replace(
            spec,
            interactive_rps=tuple(2 * x for x in spec.interactive_rps),
            deferrable_rps=tuple(2 * x for x in spec.deferrable_rps),
        ),
    )
    kw = {"seed": 1, "days": 0.05}
    one = greenroute.run(base, "local-only", **kw).metrics
    two = greenroute.run(double, "local-only", **kw).metrics
    assert two["requests_total"] > 1.8 * one["requests_total"]
    assert two["ttft_p99_s"] > one["ttft_p99_s"]
    assert two["batch_size_mean"] > one["batch_size_mean"]


def test_manifest_round_trip_reproduces_an_iteration_run(tmp_path):
    res = greenroute.run("demo", "lowest-carbon", seed=2, days=0.03, server_model="iteration")
    assert res.manifest["server_model"] == "iteration"
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(res.manifest))
    again = greenroute.run_manifest(path)
    assert again.server_model == "iteration"
    assert again.metrics == res.metrics
    # and a slots manifest re-runs the slots model
    sl = greenroute.run("demo", "lowest-carbon", seed=2, days=0.03, server_model="slots")
    path.write_text(json.dumps(sl.manifest))
    assert greenroute.run_manifest(path).metrics == sl.metrics


def test_fluid_runs_record_the_server_model_for_their_manifest(tmp_path):
    res = greenroute.run("demo", "local-only", days=0.03, fidelity="fluid", server_model="slots")
    assert res.server_model == "slots" and res.manifest["server_model"] == "slots"
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(res.manifest))
    again = greenroute.run_manifest(path)
    assert again.server_model == "slots" and again.fidelity == "fluid"


def test_kv_blocks_and_cost_tables_come_from_the_cluster_profile():
    prep = prepare(_demo(), 0)
    b = prep.built
    cfg = iteration_config(b)
    # 4 x H100-80GB, llama2-70b: KV capacity / (KV bytes per token x 16-token blocks)
    blocks = int(b.kv_cap_bytes[0] // (b.kv_bytes_per_token[0] * 16))
    assert (cfg.blocks_total == blocks).all()
    assert (cfg.max_running == 32).all() and (cfg.max_batched_tokens == 2048).all()
    t = cost_tables(b)[0]
    np.testing.assert_array_equal(t.prompt_x, b.prefill_tok[0])
    np.testing.assert_array_equal(t.prompt_s, b.prefill_s[0])
    assert t.token_x[0] == 1 and t.token_s[31] == b.decode_s[0, 32]
    assert t.mixed_factor == 1.1  # splitwise-sim performance_model.py:253


def test_small_kv_cache_preempts_and_drops_with_reasons_and_conserves_tokens():
    """KV for 300 blocks of 16 tokens per server (1.57 GB instead of 150 GB): a request whose
    prompt + output needs more blocks is a kv_overflow drop; running requests outgrow the
    blocks, so the kernel preempts (recompute) and drops at the preemption bound."""
    prep = prepare(_demo(days=0.02), 5)
    b = prep.built
    b.kv_cap_bytes = np.full_like(b.kv_cap_bytes, 300 * 16 * b.kv_bytes_per_token[0])
    res = Simulation(prep, make_geo_policy("local-only"), local_policy_factory("least-loaded"),
                     SimConfig(seed=5, record_requests=True)).run()  # fmt: skip
    m, req = res.metrics, res.requests
    assert m["preemptions"] > 0 and m["recomputed_tokens"] > 0
    need_blocks = -(-(req["prompt_tokens"] + req["output_tokens"]) // 16)
    overflow = (req["drop_reason"] == "kv_overflow").to_numpy()
    dispatched = np.isfinite(req["dispatch_s"].to_numpy())
    np.testing.assert_array_equal(overflow, dispatched & (need_blocks > 300).to_numpy())
    assert m["dropped_kv_overflow"] == overflow.sum() > 0
    assert (
        m["requests_completed"] + m["requests_dropped"] + m["requests_in_flight"]
        == (m["requests_total"])
    )
    done = (req["drop_reason"] == "none") & (req["finish_s"] <= m["horizon_s"])
    d = req[done]
    np.testing.assert_array_equal(d["prefill_tokens"], d["prompt_tokens"])
    np.testing.assert_array_equal(d["output_tokens_done"], d["output_tokens"])
    assert (d["recomputed_tokens"] > 0).sum() > 0  # some completed after a preemption
    pre = req["drop_reason"] == "preemption_limit"
    assert m["dropped_preemption_limit"] == pre.sum()
    assert (req.loc[pre, "preemptions"] == 4).all()  # the bound (splitwise baseline.yaml)


def test_drop_codes_of_both_server_models_agree():
    from greenroute.sim.iteration import kernel as IK

    assert K.DROP_REASONS[K.DROP_PREEMPTION_LIMIT] == "preemption_limit"
    for name in ("NONE", "QUEUE_FULL", "KV_OVERFLOW", "NO_SERVER", "PREEMPTION_LIMIT"):
        assert getattr(IK, f"DROP_{name}") == getattr(K, f"DROP_{name}"), name


def test_chunked_prefill_is_a_scenario_option_of_the_iteration_model(tmp_path):
    """Chunked prefill (Sarathi-Serve) splits prompts across iterations under the budget: every
    prompt token is still prefilled once, long prompts no longer run alone, so the run
    differs from whole-prompt prefills; a manifest reproduces it; it is refused where it has
    no meaning (slots servers, the fluid model)."""
    sc = get_scenario("demo").with_options(days=0.1)
    whole = greenroute.run(sc, "local-only", seed=2)
    chunked = greenroute.run(sc.with_options(chunked_prefill=True), "local-only", seed=2)
    mw, mc = whole.metrics, chunked.metrics
    assert mc["requests_total"] == mw["requests_total"]
    # each prompt token is prefilled once; only requests still in flight at the horizon (a few
    # hundred tokens of 6.8e7) can be at a different point of their prefill in the two runs
    assert mc["prefill_tokens"] == pytest.approx(mw["prefill_tokens"], rel=1e-4)
    assert (
        mc["requests_completed"] + mc["requests_dropped"] + mc["requests_in_flight"]
        == (mc["requests_total"])
    )
    assert mc["ttft_mean_s"] != mw["ttft_mean_s"]
    assert chunked.manifest["chunked_prefill"] is True
    assert whole.manifest["chunked_prefill"] is False
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(chunked.manifest))
    again = greenroute.run_manifest(path)
    assert again.metrics["ttft_mean_s"] == mc["ttft_mean_s"]
    with pytest.raises(ConfigError, match="iteration server model"):
        sc.with_options(server_model="slots", chunked_prefill=True)
    with pytest.raises(ConfigError, match="request fidelity"):
        sc.with_options(fidelity="fluid", chunked_prefill=True)


def test_per_server_figures_add_up_to_the_run_totals():
    """``extras["servers"]``: one row per server; iterations and preemptions sum to the run's
    totals, and the iteration-weighted means give the run's batch size and budget use."""
    res = greenroute.run("demo", "round-robin", seed=4, days=0.1)
    srv = res.extras["servers"]
    m = res.metrics
    assert len(srv) == 6 and sorted(srv.region.unique()) == sorted(res.epochs.region.unique())
    assert srv.iterations.sum() == m["iterations"]
    assert srv.preemptions.sum() == m["preemptions"]
    w = srv.iterations / srv.iterations.sum()
    assert (w * srv.batch_size_mean).sum() == pytest.approx(m["batch_size_mean"], rel=1e-12)
    assert (w * srv.token_budget_utilisation).sum() == pytest.approx(
        m["token_budget_utilisation"], rel=1e-12
    )
    assert (srv.iterations > 0).all()
