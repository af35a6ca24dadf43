"""Per-key budgets: fixed windows of tokens and requests, hand-counted; then over loopback
HTTP with fake upstreams (usage of plain answers and of a stream's last chunk)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from greenroute.serve.app import create_app  # noqa: E402
from greenroute.serve.budgets import BudgetTracker, sse_usage_tokens  # noqa: E402
from greenroute.serve.config import GatewayConfigError, parse_config  # noqa: E402
from greenroute.serve.errors import GatewayHTTPError  # noqa: E402
from greenroute.serve.security import ClientKey, KeyBudget, hash_api_key  # noqa: E402
from serve_fakes import FakeUpstream, gateway_dict  # noqa: E402

MSG = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}


def _key(**budget) -> ClientKey:
    return ClientKey("k", hash_api_key("x"), budget=KeyBudget(**budget))


def test_requests_and_tokens_are_counted_per_fixed_window():
    key, t = _key(period_s=100.0, max_tokens=20, max_requests=3), BudgetTracker()
    for _ in range(3):
        t.admit(key, 150.0)  # window 1 = [100, 200)
        t.spend(key, 8, 150.0)
    assert t.headers(key, 150.0) == [
        (b"x-greenroute-budget-remaining-tokens", b"0"),
        (b"x-greenroute-budget-remaining-requests", b"0"),
    ]
    with pytest.raises(GatewayHTTPError) as info:
        t.admit(key, 160.0)  # 3 of 3 requests: refused until 200
    err = info.value
    assert (err.status, err.code, err.headers["retry-after"]) == (429, "budget_exceeded", "40")
    assert err.body()["error"]["type"] == "budget_exceeded"
    assert "3 of 3 requests" in err.body()["error"]["message"]
    t.admit(key, 200.0)  # a new window: everything renewed
    assert t.headers(key, 200.0)[0] == (b"x-greenroute-budget-remaining-tokens", b"20")


def test_the_token_maximum_refuses_the_request_after_the_one_that_crosses_it():
    key, t = _key(period_s=10.0, max_tokens=10), BudgetTracker()
    t.admit(key, 1.0)
    t.spend(key, 8, 1.0)
    t.admit(key, 2.0)  # 8 < 10: admitted, and it may use more than the 2 left
    t.spend(key, 8, 2.0)
    assert t.headers(key, 2.0) == [(b"x-greenroute-budget-remaining-tokens", b"0")]
    with pytest.raises(GatewayHTTPError) as info:
        t.admit(key, 2.5)
    assert "16 of 10 tokens" in info.value.message and info.value.headers["retry-after"] == "8"


def test_usage_of_the_last_sse_chunk():
    tail = (b'data: {"choices": [{"delta": {}}], "usage": null}\n\n'
            b'data: {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4}}'
            b"\n\ndata: [DONE]\n\n")  # fmt: skip
    assert sse_usage_tokens(tail) == 11
    assert sse_usage_tokens(b'data: {"choices": [], "usage": null}\n\ndata: [DONE]\n\n') is None
    assert sse_usage_tokens(b"data: [DONE]\n\n") is None


def test_budgets_are_validated():
    h = hash_api_key("a")
    keys = [{"name": "a", "hash": h, "budget": {"max_tokens": 100, "period_s": 86400}},
            {"name": "b", "hash": h, "budget": {"period_s": 60}},
            {"name": "c", "hash": h, "budget": {"max_requests": 5}},
            {"name": "d", "hash": h, "budget": {"max_tokens": 0.5, "period_s": 60}}]  # fmt: skip
    raw = gateway_dict({"DE-LU": ["http://127.0.0.1:9"]}, auth={"keys": keys[:1]})
    assert parse_config(raw, source="g").keys[0].budget == KeyBudget(86400.0, 100, None)
    with pytest.raises(GatewayConfigError) as info:
        parse_config({**raw, "auth": {"keys": keys}}, source="g")
    assert [p.split(": ")[1] for p in info.value.problems] == [
        "auth.keys[1].budget",
        "auth.keys[2].budget.period_s",
        "auth.keys[3].budget.max_tokens",
    ]


def test_budget_over_http(servers, tmp_path):
    fake = FakeUpstream("de")
    up = servers(fake.app())
    keys = [{"name": "tok", "hash": hash_api_key("tok"),
             "budget": {"max_tokens": 16, "period_s": 1e9}},
            {"name": "req", "hash": hash_api_key("req"),
             "budget": {"max_requests": 2, "period_s": 1e9}},
            {"name": "free", "hash": hash_api_key("free")}]  # fmt: skip
    raw = gateway_dict({"DE-LU": [up.url]}, auth={"keys": keys})
    app = create_app(parse_config(raw, source="t.yaml", base_dir=tmp_path))
    gw, srv = app.state.gateway, servers(app)
    url = srv.url + "/v1/chat/completions"
    tok = {"authorization": "Bearer tok"}
    rem = "x-greenroute-budget-remaining-tokens"
    r = httpx.post(url, json=MSG, headers=tok)  # usage 5 + 3 = 8 tokens
    assert r.status_code == 200 and r.headers[rem] == "8"
    body = {**MSG, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", url, json=body, headers=tok) as s:
        assert s.status_code == 200 and s.headers[rem] == "8"  # before this stream's usage
        assert b"[DONE]" in s.read()
    # the stream's accounting runs when the gateway's side of it ends (just after the client
    # saw its end): wait for it, then 8 + 8 = 16 of 16 tokens are spent
    deadline = time.monotonic() + 10
    while gw.budgets.headers(gw.cfg.keys[0], gw.clock())[0][1] != b"0":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    r = httpx.post(url, json=MSG, headers=tok)
    assert r.status_code == 429 and r.json()["error"]["type"] == "budget_exceeded"
    assert int(r.headers["retry-after"]) >= 1
    served = fake.served
    # a stream without usage counts as a request only: 2 requests, then 429
    req = {"authorization": "Bearer req"}
    with httpx.stream("POST", url, json={**MSG, "stream": True}, headers=req) as s:
        assert rem not in s.headers and s.headers["x-greenroute-budget-remaining-requests"] == "1"
        s.read()
    assert httpx.post(url, json=MSG, headers=req).status_code == 200
    assert httpx.post(url, json=MSG, headers=req).status_code == 429
    assert fake.served == served + 2  # refused requests never reach the upstream
    r = httpx.post(url, json=MSG, headers={"authorization": "Bearer free"})
    assert r.status_code == 200 and rem not in r.headers
