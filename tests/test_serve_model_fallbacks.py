"""Per-model fallbacks (LiteLLM's ``fallbacks``): config validation, and over loopback HTTP
with fake upstreams, the fallback chain under failures and residency rules."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

import json  # noqa: E402

from greenroute.serve.app import create_app  # noqa: E402
from greenroute.serve.config import GatewayConfigError, parse_config  # noqa: E402
from greenroute.serve.decision_log import read_decisions  # noqa: E402
from serve_fakes import FakeUpstream, gateway_dict  # noqa: E402
from test_serve_http import _metric, _records  # noqa: E402

MSG = {"messages": [{"role": "user", "content": "hi"}]}


def _two_models(urls: dict[str, str], models: dict[str, list[str]], **extra) -> dict:
    raw = gateway_dict({r: [u] for r, u in urls.items()}, **extra)
    for reg, ms in models.items():
        raw["regions"][reg]["upstreams"][0]["models"] = ms
    return raw


def test_unknown_fallback_models_are_one_error_each():
    raw = _two_models({"DE-LU": "http://127.0.0.1:9000", "GB": "http://127.0.0.1:9001"},
                      {"DE-LU": ["big"], "GB": ["tiny"]},
                      model_fallbacks={"big": ["tiny", "gpt-9"], "huge": ["tiny"],
                                       "tiny": ["tiny"]})  # fmt: skip
    with pytest.raises(GatewayConfigError) as info:
        parse_config(raw, source="gw.yaml")
    assert [p.split(": ")[1] for p in info.value.problems] == [
        "model_fallbacks.big[1]",
        "model_fallbacks.huge",
        "model_fallbacks.tiny[0]",
    ]
    assert "unknown model 'gpt-9' (no upstream serves it); valid: big, tiny" in str(info.value)
    ok = parse_config({**raw, "model_fallbacks": {"big": ["tiny"]}}, source="gw.yaml")
    assert ok.model_fallbacks == {"big": ("tiny",)}


def _start(servers, tmp_path, de_mode: str, **extra):
    de, gb = FakeUpstream("de", mode=de_mode), FakeUpstream("gb")
    de_srv, gb_srv = servers(de.app()), servers(gb.app())
    raw = _two_models({"DE-LU": de_srv.url, "GB": gb_srv.url},
                      {"DE-LU": ["big"], "GB": ["tiny"]}, model_fallbacks={"big": ["tiny"]},
                      decision_log={"path": str(tmp_path / "d.jsonl")}, **extra)  # fmt: skip
    raw["upstream"]["failures_to_eject"] = 100  # keep DE-LU admitted: every request tries it
    app = create_app(parse_config(raw, source="t.yaml", base_dir=tmp_path))
    return de, gb, servers(app)


def test_failing_model_falls_back_with_the_body_rewritten(servers, tmp_path):
    de, gb, srv = _start(servers, tmp_path, "fail")
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(model="big", **MSG)
    out = raw.parse()
    assert out.system_fingerprint == "gb" and out.model == "tiny"
    assert raw.headers["x-greenroute-model"] == "tiny"
    assert raw.headers["x-greenroute-region"] == "GB"
    # 3 attempts on big (max_attempts; DE-LU's only upstream is tried once, then nowhere
    # is left), then tiny once with model rewritten
    assert [json.loads(b)["model"] for b in de.bodies] == ["big"]
    assert [json.loads(b)["model"] for b in gb.bodies] == ["tiny"]
    (rec,) = _records(tmp_path / "d.jsonl", 1)
    assert (rec["model"], rec["requested_model"], rec["region"]) == ("tiny", "big", "GB")
    assert [a["outcome"] for a in rec["attempts"]] == ["status-500", "model-fallback:tiny", "ok"]
    text = httpx.get(srv.url + "/metrics").text
    assert _metric(text, "greenroute_fallbacks_total", kind="model-fallback") == 1.0
    # a request for tiny itself: no fallback, the header names it, no requested_model
    r = httpx.post(srv.url + "/v1/chat/completions", json={**MSG, "model": "tiny"})
    assert r.status_code == 200 and r.headers["x-greenroute-model"] == "tiny"
    recs = read_decisions(tmp_path / "d.jsonl")
    assert "requested_model" not in recs[-1] and recs[-1]["model"] == "tiny"


def test_fallback_stays_within_the_rules(servers, tmp_path):
    # origin uk may use GB only: big (DE-LU only) is placed out of reach, tiny in GB is used;
    # origin eu may use DE-LU only: big there fails and tiny (GB) is out of reach too -> 403
    cons = {"residency": {"uk": ["GB"], "eu": ["DE-LU"]}}
    de, gb, srv = _start(servers, tmp_path, "fail", constraints=cons)
    url = srv.url + "/v1/chat/completions"
    r = httpx.post(url, json={**MSG, "model": "big"}, headers={"x-greenroute-origin": "uk"})
    assert r.status_code == 200 and r.headers["x-greenroute-model"] == "tiny"
    assert de.bodies == [] and len(gb.bodies) == 1
    r = httpx.post(url, json={**MSG, "model": "big"}, headers={"x-greenroute-origin": "eu"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "no_allowed_region"
    assert len(de.bodies) == 1 and len(gb.bodies) == 1  # GB never reached from eu
