"""The distilled agent as a GeoPolicy (issue 9 §4): candidates scored in one batched pass,
argmax of the log-likelihood, forbidden regions never chosen (0 constraint violations), the
``llm:`` prefix hook, and the OpenAI-compatible backend against a loopback server."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded

import greenroute
from greenroute.agent.policy import AgentRuntime, LLMGeoPolicy, LLMManager, agreement
from greenroute.constraints import ConstraintSet, Exclusion
from greenroute.core.errors import ConfigError
from greenroute.policies import registry

try:  # module level: FastAPI resolves the endpoint's (string) annotation in these globals
    from fastapi import Request
except ModuleNotFoundError:  # pragma: no cover - the [serve] extra is not installed
    Request = None

CAL = "US-CAL-CISO"


class StubBackend:
    """Scores a candidate text by the first key of ``prefer`` it contains (else -10)."""

    kind = "stub"
    supports_scoring = True

    def __init__(self, prefer: dict[str, float]) -> None:
        self.prefer = prefer
        self.calls: list[list[str]] = []
        self.adapters: list[str | None] = []

    def use_adapter(self, name: str | None) -> None:
        self.adapters.append(name)

    def score(self, prompt: str, texts: list[str]) -> np.ndarray:
        assert prompt.endswith("### RESPONSE:\n")
        self.calls.append(list(texts))
        return np.array([next((v for k, v in self.prefer.items() if k in t), -10.0)
                         for t in texts])  # fmt: skip


@functools.cache
def geo3_obs():
    """geo3's first observation (embedded data); tests change it with dataclasses.replace."""
    from greenroute.envs.geo_core import GeoCore

    return GeoCore("geo3", 0.25).reset(0)


def test_choose_takes_the_highest_log_likelihood_in_one_call() -> None:
    stub = StubBackend({"DC-1": -3.0, "DC-2": -1.0, "DC-3": -2.0})
    rt = AgentRuntime(stub, roles=("manager", "worker"))
    texts = ["DC-1 (DE-LU)", "DC-2 (CL-SIC)", "DC-3 (US-CAL-CISO)"]
    assert rt.choose("### RESPONSE:\n", texts, "manager", 0) == 1
    assert stub.calls == [texts] and stub.adapters == ["manager"]  # one call, every candidate
    tie = StubBackend({"DC-1": -1.0, "DC-2": -0.5, "DC-3": -0.5})
    assert AgentRuntime(tie).choose("### RESPONSE:\n", texts, "manager", 0) == 1  # tie: lowest
    assert rt.choose("### RESPONSE:\n", ["DC-3 (US-CAL-CISO)"], "manager", 0) == 0
    assert len(stub.calls) == 1  # a single candidate needs no model call


def test_managers_decide_in_order_and_see_earlier_choices() -> None:
    obs = geo3_obs()
    stub = StubBackend({"CL-SIC": -0.5})
    rt = AgentRuntime(stub, mask_saturated=False)
    dest = LLMManager(rt).act_all(obs)
    assert dest.tolist() == [1, 1, 1]
    assert rt.counters.as_metrics() == {"llm_decisions": 3, "llm_invalid_actions": 0,
                                        "llm_fallbacks": 0}  # fmt: skip


def test_saturated_regions_are_not_candidates() -> None:
    """geo3 at t=0: 10,880 slots per region, the mask's target 0.75 x 10,880 = 8,160 slots;
    the origins' batches are 3,084.7 (DE-LU), 3,593.9 (CL-SIC) and 6,803.4 (US) busy slots
    wherever they go. DE-LU and CL-SIC to CL-SIC: 6,678.6 <= 8,160, kept. US to CL-SIC would
    make 13,482 > 8,160, so CL-SIC is no candidate for US; DE-LU (empty, 6,803.4 <= 8,160) and
    US's own region are, and score -10 each: the tie goes to the lowest index, DE-LU."""
    from greenroute.policies.rl.features import origin_load_slots

    obs = geo3_obs()
    assert np.round([origin_load_slots(obs, o, 1) for o in range(3)], 1).tolist() == [
        3084.7, 3593.9, 6803.4]  # fmt: skip
    assert np.asarray(obs.capacity_slots).tolist() == [10880.0] * 3
    stub = StubBackend({"CL-SIC": -0.5})
    dest = LLMManager(AgentRuntime(stub)).act_all(obs)
    assert dest.tolist() == [1, 1, 0]
    assert stub.calls[2] == ["DC-1 (DE-LU)", "DC-3 (US-CAL-CISO)"]
    # a looser target keeps CL-SIC for US too: 13,482 <= 1.25 x 10,880 = 13,600
    dest = LLMManager(AgentRuntime(stub, mask_target=1.25)).act_all(obs)
    assert dest.tolist() == [1, 1, 1]
    with pytest.raises(ConfigError, match="mask_target"):
        AgentRuntime(stub, mask_target=0.0)


def _run_recording(policy, scenario: str, constraints=None, days: float = 0.25):
    plans = []
    inner = policy.plan

    def plan(obs):
        p = inner(obs)
        plans.append(p)
        return p

    policy.plan = plan
    res = greenroute.run(scenario, policy, days=days, fidelity="fluid", constraints=constraints)
    return res, plans


def test_forbidden_region_is_never_chosen() -> None:
    """The stub loves California; with California excluded it is not a candidate."""
    # rules only here: saturated destinations stay candidates (mask_saturated=False)
    pol = LLMGeoPolicy(AgentRuntime(StubBackend({CAL: 0.0}), mask_saturated=False), "llm:stub")
    res, plans = _run_recording(pol, "geo3")
    assert len(plans) == 24 and all(np.all(p.route[:, :, 2] == 1.0) for p in plans)  # control

    stub = StubBackend({CAL: 0.0})
    pol = LLMGeoPolicy(AgentRuntime(stub, mask_saturated=False), "llm:stub")
    rules = ConstraintSet(exclusions=(Exclusion(CAL),))
    res, plans = _run_recording(pol, "geo3", rules)
    assert res.metrics["invalid_plans"] == 0  # 0 constraint violations
    assert all(np.all(p.route[:, :, 2] == 0.0) for p in plans)
    assert all(not any(CAL in t for t in call) for call in stub.calls)
    summ = res.extras["policy_summary"]
    assert summ["llm_invalid_actions"] == 0 and summ["llm_fallbacks"] == 0
    assert summ["llm_decisions"] >= 24 * 3
    # the counters are run metrics too (issue 9 §2: "in the metrics")
    for k in ("llm_decisions", "llm_invalid_actions", "llm_fallbacks"):
        assert res.metrics[k] == float(summ[k])


def test_geo10_runs_unchanged_with_an_exclusion() -> None:
    stub = StubBackend({"DE-LU": 0.0})
    pol = LLMGeoPolicy(AgentRuntime(stub), "llm:stub")
    res, plans = _run_recording(pol, "geo10", ConstraintSet(exclusions=(Exclusion("DE-LU"),)),
                                days=0.05)  # fmt: skip
    from greenroute.scenarios import resolve_scenario

    de = list(resolve_scenario("geo10").regions).index("DE-LU")
    assert res.metrics["invalid_plans"] == 0
    assert all(np.all(p.route[:, :, de] == 0.0) for p in plans)
    assert res.extras["policy_summary"]["llm_fallbacks"] == 0
    assert max(len(c) for c in stub.calls) == 9  # 10 regions, DE-LU not a candidate
    assert all(not any("DE-LU" in t for t in c) for c in stub.calls)


def test_llm_prefix_needs_the_agent_plugin(monkeypatch) -> None:
    monkeypatch.delitem(registry._PREFIX_LOADERS, "llm")
    with pytest.raises(ConfigError, match=r"greenroute\.agent\.policy"):
        registry.make_geo_policy("llm:somewhere")
    monkeypatch.undo()
    with pytest.raises(ConfigError, match="valid choices: k, base_url"):
        registry.make_geo_policy("llm:openai:m", temperature=1)
    with pytest.raises(ConfigError, match=r"agent\.json not found"):
        registry.make_geo_policy("llm:/nonexistent/agent")


def test_cli_run_loads_the_llm_plugin() -> None:
    from typer.testing import CliRunner

    from greenroute.cli import app

    res = CliRunner().invoke(app, ["run", "--scenario", "geo3", "--policy", "llm:/no/agent",
                                   "--days", "0.1"])  # fmt: skip
    assert res.exit_code == 2
    assert "/no/agent/agent.json not found" in res.output  # the llm: loader ran


def test_compare_gives_llm_policies_their_options() -> None:
    from typer.testing import CliRunner

    from greenroute.cli import app

    def compare(*opts: str):
        args = ["compare", "--scenario", "geo3", "--policies", "local-only,llm:/no/agent"]
        return CliRunner().invoke(app, [*args, "--days", "0.1", *opts])

    res = compare("--policy-opt", "k=2")  # the llm: loader takes k: it runs (and finds no agent)
    assert res.exit_code == 2
    assert "/no/agent/agent.json not found" in res.output
    res = compare("--policy-opt", "temperature=1")
    assert res.exit_code == 2
    assert (
        "unknown --policy-opt 'temperature': no listed policy (local-only, llm:/no/agent) takes "
        "it; valid choices: base_url, data, k, mask_saturated, mask_target, max_new_tokens, scoring"
    ) in " ".join(res.output.split())


def test_agreement_with_the_teacher(tmp_path: Path) -> None:
    from greenroute.agent.dataset import record_text

    data = tmp_path / "ds"
    record_text("local-only", data, "geo3", days=0.25)  # 24 epochs; 4 validation epochs
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.json").write_text(json.dumps({"k": 0, "roles": ["manager", "worker"]}))
    out = agreement(agent, data, "manager", 100, backend=StubBackend({"DC-3": 0.0}))
    # local-only keeps each origin home; the stub always says DC-3: right for 1 origin of 3
    assert out["rows"] == 12 and out["agreement"] == pytest.approx(1 / 3)
    assert out["teacher_local_share"] == 1.0


# ------------------------------------------------------------------------- OpenAI backend
@pytest.fixture
def server():
    fastapi = pytest.importorskip("fastapi")
    from fastapi.responses import JSONResponse

    from serve_fakes import ServerThread

    state = {"echo": True, "text": "DC-3 (US-CAL-CISO) because it is greener", "requests": 0}
    app = fastapi.FastAPI()

    @app.post("/v1/completions")
    async def completions(req: Request):
        body = await req.json()
        state["requests"] += 1
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        choices = []
        for i, p in enumerate(prompts):
            if body.get("echo"):
                if not state["echo"]:
                    return JSONResponse({"error": {"message": "echo is not supported"}}, 400)
                lp = -0.1 if p.endswith("(CL-SIC)") else -1.0  # one token per character
                logprobs = {"tokens": list(p), "token_logprobs": [None] + [lp] * (len(p) - 1),
                            "top_logprobs": None, "text_offset": list(range(len(p)))}  # fmt: skip
                choices.append({"index": i, "text": p, "finish_reason": "length",
                                "logprobs": logprobs})  # fmt: skip
            else:
                choices.append({"index": i, "text": state["text"], "finish_reason": "stop",
                                "logprobs": None})  # fmt: skip
        return {"id": "cmpl-1", "object": "text_completion", "created": 0,
                "model": body["model"], "choices": choices}  # fmt: skip

    srv = ServerThread(app).start()
    state["url"] = srv.url + "/v1"
    yield state
    srv.stop()


def test_openai_backend_scores_with_echo(server) -> None:
    pol = registry.make_geo_policy("llm:openai:tiny", base_url=server["url"],
                                   mask_saturated=False)  # fmt: skip
    assert pol.rt.backend.supports_scoring
    dest = pol.manager.act_all(geo3_obs())
    assert dest.tolist() == [1, 1, 1]  # CL-SIC: -0.1 per character against -1.0
    assert pol.summary()["llm_fallbacks"] == 0 and pol.name == "llm:openai:tiny"


def test_openai_backend_without_echo_parses_and_counts_fallbacks(server) -> None:
    server["echo"] = False
    pol = registry.make_geo_policy("llm:openai:tiny", base_url=server["url"],
                                   mask_saturated=False)  # fmt: skip
    assert not pol.rt.backend.supports_scoring
    obs = geo3_obs()
    assert pol.manager.act_all(obs).tolist() == [2, 2, 2]  # parsed from the generated text
    allowed = np.array(obs.allowed)
    allowed[:, :, 2] = False  # California forbidden: the parsed answer is invalid
    dest = pol.manager.act_all(replace(obs, allowed=allowed))
    nearest = int(np.argmin(obs.latency_s[2, :2]))  # California's nearest allowed region
    assert dest.tolist() == [0, 1, nearest]  # fallback: own region, else the nearest allowed
    m = pol.summary()
    assert (m["llm_decisions"], m["llm_invalid_actions"], m["llm_fallbacks"]) == (6, 3, 3)
    server["text"] = "I am not sure"
    pol.manager.act_all(obs)
    m = pol.summary()
    assert (m["llm_decisions"], m["llm_invalid_actions"], m["llm_fallbacks"]) == (9, 3, 6)
    # with the saturation mask (the default) a generated answer naming a saturated region is
    # an invalid action too: California holds US's own 6,803.4 busy slots, + DE-LU's 3,084.7
    # or CL-SIC's 3,593.9 passes 8,160 (see test_saturated_regions_are_not_candidates)
    server["text"] = "DC-3"
    pol = registry.make_geo_policy("llm:openai:tiny", base_url=server["url"])
    assert pol.manager.act_all(obs).tolist() == [0, 1, 2]
    m = pol.summary()
    assert (m["llm_decisions"], m["llm_invalid_actions"], m["llm_fallbacks"]) == (3, 2, 2)


def test_openai_needs_a_base_url(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL"):
        registry.make_geo_policy("llm:openai:tiny")


@pytest.mark.slow
def test_hf_backend_batched_scores_equal_single_scores(tmp_path: Path) -> None:
    """Right-padding in the batch changes nothing: each candidate's batched score equals its
    own unpadded forward pass, and the policy picks the argmax."""
    import torch

    from agent_tiny import build_tiny_model
    from greenroute.agent.backends import HFBackend, encode_pair, load_base

    model, tok = load_base(str(build_tiny_model(tmp_path / "m")))
    be = HFBackend(model, tok, max_prompt_tokens=64)
    prompt = "### INPUT:\nCI 120.0 g/kWh\n\n### RESPONSE:\n"
    texts = ["DC-1 (DE-LU)", "DC-2 (CL-SIC)", "DC-3 (US-CAL-CISO)"]
    batched = be.score(prompt, texts)
    assert be.forward_passes == 1
    for i, t in enumerate(texts):
        p, c = encode_pair(tok, prompt, t, 64)
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=torch.tensor([p + c])).logits[0], -1)
        single = sum(float(logp[len(p) - 1 + j, c[j]]) for j in range(len(c)))
        assert batched[i] == pytest.approx(single, abs=1e-4)
    rt = AgentRuntime(be)
    assert rt.choose(prompt, texts, "manager", 0) == int(np.argmax(batched))
