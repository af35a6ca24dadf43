"""The gateway over real HTTP on loopback: fake upstreams and the gateway each run in uvicorn
on an ephemeral port; clients are the official ``openai`` package and httpx."""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from greenroute.serve.app import create_app  # noqa: E402
from greenroute.serve.config import parse_config  # noqa: E402
from greenroute.serve.decision_log import read_decisions  # noqa: E402
from greenroute.serve.security import hash_api_key  # noqa: E402
from serve_fakes import FakeUpstream, ServerThread, gateway_dict  # noqa: E402

KEY = "test-key-1"


def _fakes(servers, *names: str, **kw) -> dict[str, tuple[FakeUpstream, ServerThread]]:
    out = {}
    for n in names:
        fake = FakeUpstream(n, **kw)
        out[n] = (fake, servers(fake.app()))
    return out


def _gateway(servers, fakes, tmp_path, **extra):
    raw = gateway_dict({n: [srv.url] for n, (_, srv) in fakes.items()}, **extra)
    raw.setdefault("decision_log", {"path": str(tmp_path / "decisions.jsonl")})
    cfg = parse_config(raw, source="test.yaml", base_dir=tmp_path)
    app = create_app(cfg)
    return app.state.gateway, servers(app)


def _records(path, n: int) -> list[dict]:
    """The decision log once it has ``n`` records (a stream's record is written when the
    gateway's side of the stream ends, which may be just after the client saw the end)."""
    deadline = time.monotonic() + 10
    recs = read_decisions(path) if path.exists() else []
    while len(recs) < n and time.monotonic() < deadline:
        time.sleep(0.02)
        recs = read_decisions(path)
    return recs


def _metric(text: str, name: str, **labels) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_openai_client_chat_completions_and_streaming(servers, tmp_path):
    fakes = _fakes(servers, "DE-LU", "GB")
    auth = {"keys": [{"name": "team-a", "hash": hash_api_key(KEY), "origin": "uk"}]}
    _gw, srv = _gateway(servers, fakes, tmp_path, auth=auth)
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key=KEY, max_retries=0)
    secret_prompt = "the-prompt-must-not-be-logged-7f3a"
    raw = client.chat.completions.with_raw_response.create(
        model="tiny", messages=[{"role": "user", "content": secret_prompt}]
    )
    chat = raw.parse()
    # lowest-carbon sends everything to DE-LU (100 g/kWh < GB's 200), the body is unchanged
    assert raw.headers["x-greenroute-region"] == "DE-LU"
    assert chat.choices[0].message.content == "hello from DE-LU"
    assert chat.usage.total_tokens == 8 and chat.system_fingerprint == "DE-LU"
    comp = client.completions.create(model="tiny", prompt=secret_prompt, max_tokens=5)
    assert comp.choices[0].text == "hello from DE-LU"
    deltas = [
        c.choices[0].delta.content
        for c in client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    ]
    assert deltas == ["t0 ", "t1 ", "t2 "]
    texts = [
        c.choices[0].text for c in client.completions.create(model="tiny", prompt="hi", stream=True)
    ]
    assert texts == ["t0 ", "t1 ", "t2 "]
    assert [m.id for m in client.models.list().data] == ["tiny"]
    fake_de, _ = fakes["DE-LU"]
    assert fake_de.served == 4 and fakes["GB"][0].served == 0
    assert json.loads(fake_de.bodies[0])["messages"][0]["content"] == secret_prompt
    recs = _records(tmp_path / "decisions.jsonl", 4)
    log_text = (tmp_path / "decisions.jsonl").read_text()
    assert secret_prompt not in log_text and KEY not in log_text
    assert len(recs) == 4
    assert recs[0]["decision_id"] == raw.headers["x-greenroute-decision-id"]
    assert {r["origin"] for r in recs} == {"uk"} and {r["client"] for r in recs} == {"team-a"}
    assert recs[0]["plan"]["shares"] == {"DE-LU": 1.0, "GB": 0.0}
    assert recs[0]["signals"]["carbon_intensity_g_per_kwh"] == 100.0
    assert recs[0]["rules"]["allowed"] == ["DE-LU", "GB"]
    assert [r["stream"] for r in recs] == [False, False, True, True]
    # metrics agree with the log: 4 requests in DE-LU, CO2 per request summed
    text = httpx.get(srv.url + "/metrics").text
    assert _metric(text, "greenroute_requests_total", region="DE-LU") == 4.0
    assert _metric(text, "greenroute_routing_share", origin="uk", region="DE-LU",
                   **{"class": "interactive"}) == 1.0  # fmt: skip
    co2 = _metric(text, "greenroute_co2_grams_total", region="DE-LU")
    assert co2 > 0 and co2 == pytest.approx(sum(r["co2_g"] for r in recs), rel=1e-9)
    assert _metric(text, "greenroute_signal_value", signal="carbon_intensity_g_per_kwh",
                   region="GB") == 200.0  # fmt: skip
    assert _metric(text, "greenroute_routing_overhead_seconds_count") == 4.0
    assert httpx.get(srv.url + "/healthz").json()["status"] == "ok"


def _err(resp, status: int, code: str) -> dict:
    assert resp.status_code == status, resp.text
    body = resp.json()["error"]
    assert body["code"] == code and body["message"] and body["type"]
    return body


def test_bad_input_gets_openai_style_errors(servers, tmp_path):
    fakes = _fakes(servers, "DE-LU", "GB")
    auth = {"keys": [{"name": "a", "hash": hash_api_key(KEY)},
                     {"name": "slow", "hash": hash_api_key("slow-key"), "rate_rps": 0.001,
                      "burst": 2}]}  # fmt: skip
    constraints = {
        "residency": {"uk": ["GB"]},
        "exclusions": [
            {
                "region": "GB",
                "start": "2000-01-01T00:00Z",
                "end": "2100-01-01T00:00Z",
                "reason": "test window",
            }
        ],
    }
    _gw, srv = _gateway(servers, fakes, tmp_path, auth=auth, constraints=constraints,
                       limits={"max_body_bytes": 2000})  # fmt: skip
    url = srv.url + "/v1/chat/completions"
    ok = {"authorization": f"Bearer {KEY}"}
    msg = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
    _err(httpx.post(url, content=b"{not json", headers=ok), 400, "invalid_json")
    _err(httpx.post(url, json={"messages": []}, headers=ok), 400, "missing_model")
    body = _err(httpx.post(url, json={**msg, "model": "gpt-9"}, headers=ok), 404,
                "model_not_found")  # fmt: skip
    assert "tiny" in body["message"]
    big = {**msg, "messages": [{"role": "user", "content": "x" * 5000}]}
    _err(httpx.post(url, json=big, headers=ok), 413, "request_too_large")
    # chunked, no content-length: refused by the bytes received, not the declared length
    chunked = iter([json.dumps(big).encode()[i : i + 1000] for i in range(0, 5100, 1000)])
    _err(httpx.post(url, content=chunked, headers=ok), 413, "request_too_large")
    _err(httpx.post(url, json=msg), 401, "invalid_api_key")
    _err(httpx.post(url, json=msg, headers={"authorization": "Bearer nope"}), 401,
         "invalid_api_key")  # fmt: skip
    slow = {"authorization": "Bearer slow-key"}
    assert [httpx.post(url, json=msg, headers=slow).status_code for _ in range(2)] == [200, 200]
    resp = httpx.post(url, json=msg, headers=slow)
    _err(resp, 429, "rate_limit_exceeded")
    assert int(resp.headers["retry-after"]) >= 1
    # uk may only use GB, and GB is excluded now: 403 naming both rules
    body = _err(httpx.post(url, json=msg, headers={**ok, "x-greenroute-origin": "uk"}), 403,
                "no_allowed_region")  # fmt: skip
    assert body["message"] == (
        "no region may serve interactive requests from origin 'uk' now: residency allows only "
        "['GB']; GB excluded from 2000-01-01T00:00Z until 2100-01-01T00:00Z (test window)"
    )
    _err(httpx.post(url, json=msg, headers={**ok, "x-greenroute-origin": "mars"}), 400,
         "unknown_origin")  # fmt: skip
    _err(httpx.post(url, json=msg, headers={**ok, "x-greenroute-class": "urgent"}), 400,
         "invalid_class")  # fmt: skip
    assert fakes["GB"][0].served == 0 and fakes["DE-LU"][0].served == 2
    text = httpx.get(srv.url + "/metrics").text
    assert _metric(text, "greenroute_constraint_rejections_total", origin="uk",
                   rule="residency+exclusion") == 1.0  # fmt: skip


def test_killed_upstream_is_retried_elsewhere_and_nothing_is_lost(servers, tmp_path):
    fakes = _fakes(servers, "DE-LU", "GB")
    _gw, srv = _gateway(servers, fakes, tmp_path)
    url = srv.url + "/v1/chat/completions"
    msg = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
    n = 80

    killed = threading.Event()
    with httpx.Client(timeout=10) as client, ThreadPoolExecutor(8) as ex:

        def one(i: int):
            if i == n // 4:
                fakes["DE-LU"][1].stop(force=True)  # killed while requests are in flight
                killed.set()
            elif i > n // 4:  # the later ones once it is gone (uvicorn takes a while to stop,
                killed.wait(20)  # and the gateway can serve them all meanwhile)
            r = client.post(url, json=msg)
            return r.status_code, r.headers.get("x-greenroute-region")

        results = list(ex.map(one, range(n)))
    assert [s for s, _ in results] == [200] * n  # 0 lost
    assert {reg for _, reg in results} == {"DE-LU", "GB"}
    assert results[-1][1] == "GB"  # the dead region is ejected
    text = httpx.get(srv.url + "/metrics").text
    assert _metric(text, "greenroute_fallbacks_total", kind="retry-other-region") >= 1.0
    assert _metric(text, "greenroute_upstream_healthy", upstream="DE-LU-0") == 0.0
    recs = read_decisions(tmp_path / "decisions.jsonl")
    assert len(recs) == n and all(r["status"] == 200 for r in recs)
    retried = [r for r in recs if len(r["attempts"]) > 1]
    assert retried and all(
        r["attempts"][-1] == {"region": "GB", "upstream": "GB-0", "outcome": "ok"} for r in retried
    )


def test_failure_mid_stream_is_reported_never_duplicated(servers, tmp_path):
    fakes = _fakes(servers, "DE-LU", "GB")
    fakes["DE-LU"][0].mode = "die-mid-stream"
    fakes["DE-LU"][0].chunks = 5
    _gw, srv = _gateway(servers, fakes, tmp_path)
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
    got = []
    with pytest.raises(openai.APIError, match="failed mid-stream"):
        for chunk in client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            got.append(chunk.choices[0].delta.content)
    assert got == ["t0 ", "t1 "]
    assert fakes["DE-LU"][0].served == 1 and fakes["GB"][0].served == 0
    recs = _records(tmp_path / "decisions.jsonl", 1)
    assert [r["attempts"][-1]["outcome"] for r in recs] == ["failed-mid-stream"]


def test_excluded_region_is_never_chosen_and_ejected_upstream_readmitted(servers, tmp_path):
    fakes = _fakes(servers, "DE-LU", "GB", "US-CAL-CISO")
    constraints = {"exclusions": [{"region": "DE-LU", "start": "2000-01-01T00:00Z",
                                   "end": "2100-01-01T00:00Z"}]}  # fmt: skip
    gw, srv = _gateway(servers, fakes, tmp_path, constraints=constraints)
    fakes["GB"][0].mode = "fail"  # GB (next cleanest) fails: retries go to US, never DE-LU
    fakes["GB"][0].healthy = False
    url = srv.url + "/v1/chat/completions"
    msg = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client() as client:
        regions = [client.post(url, json=msg, headers={"x-greenroute-origin": o})
                   .headers["x-greenroute-region"] for o in ("eu", "uk") * 20]  # fmt: skip
    assert set(regions) == {"US-CAL-CISO"} and fakes["DE-LU"][0].served == 0
    assert gw.pool.by_region[1][0].ejected
    fakes["GB"][0].mode, fakes["GB"][0].healthy = "ok", True  # GB recovers
    deadline = time.monotonic() + 10
    while gw.pool.by_region[1][0].ejected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not gw.pool.by_region[1][0].ejected  # re-admitted by a health check
    r = httpx.post(url, json=msg)
    assert r.headers["x-greenroute-region"] == "GB"


def test_client_leaving_mid_stream_frees_the_slot(servers, tmp_path):
    fakes = _fakes(servers, "DE-LU", chunks=1000, chunk_delay_s=0.02)  # a 20 s stream
    gw, srv = _gateway(servers, fakes, tmp_path)
    body = {"model": "tiny", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream("POST", srv.url + "/v1/chat/completions", json=body) as resp:
        assert resp.headers["x-greenroute-region"] == "DE-LU"
        chunks = resp.iter_raw()  # kept: a dropped iterator closes the response at once
        assert next(chunks).startswith(b"data: ")
        assert gw.pool.upstreams[0].in_flight == 1
    deadline = time.monotonic() + 10  # the gateway notices the disconnect
    while gw.pool.upstreams[0].in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gw.pool.upstreams[0].in_flight == 0
    recs = _records(tmp_path / "decisions.jsonl", 1)
    assert [r["attempts"][-1]["outcome"] for r in recs] == ["client-disconnected"]


def test_upstream_cookies_are_passed_back_never_kept_by_the_gateway(servers, tmp_path):
    """An upstream's Set-Cookie goes back to its client only: the gateway keeps no cookie jar
    (one would send a user's cookie upstream with everybody's later requests)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    seen: list[str | None] = []

    async def chat(request: Request) -> JSONResponse:
        seen.append(request.headers.get("cookie"))
        resp = JSONResponse({"id": "c", "object": "chat.completion", "choices": []})
        resp.set_cookie("session", f"user{len(seen)}")
        return resp

    up = servers(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])]))
    _gw, srv = _gateway(servers, {"DE-LU": (None, up)}, tmp_path)
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
    for i in range(2):
        r = httpx.post(srv.url + "/v1/chat/completions", json=body, trust_env=False)
        assert r.status_code == 200 and r.cookies.get("session") == f"user{i + 1}"
    assert seen == [None, None]
