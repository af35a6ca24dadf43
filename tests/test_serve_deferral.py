"""Deferrable requests: held while the plan says so, released within their deadlines (the
simulator's rule), over real HTTP and in the queue itself."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from greenroute.core.types import Plan  # noqa: E402
from greenroute.serve.app import create_app  # noqa: E402
from greenroute.serve.config import parse_config  # noqa: E402
from greenroute.serve.decision_log import read_decisions  # noqa: E402
from greenroute.serve.deferral import DeferralQueue  # noqa: E402
from serve_fakes import FakeUpstream, ServerThread, gateway_dict  # noqa: E402


def test_queue_holds_and_releases_like_the_simulator():
    async def scenario():
        q = DeferralQueue(2, seed=0)
        now, margin = 1000.0, 10.0
        assert q.admit(0, now + 15.0, now, now + 6.0, 1.0, margin) is None  # 9 s < margin
        assert q.admit(0, now + 500.0, now, now + 6.0, 0.0, margin) is None  # hold share 0
        held = [q.admit(0, now + d, now, now + 6.0, 1.0, margin) for d in (400, 100, 300, 200)]
        forced = q.admit(1, now + 30.0, now, now + 6.0, 1.0, margin)
        assert all(h is not None for h in held) and q.pending == 5
        count, earliest, due = q.summary(now, horizon=3, epoch_s=100.0)
        assert count.tolist() == [4.0, 1.0] and earliest.tolist() == [now + 100, now + 30]
        # due before now + (h + 1) x 100 s, cumulative: origin 0 has deadlines at +100..+400
        assert due[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0] and due[:, 1].tolist() == [1.0] * 4
        # 25 s later: origin 1's request is within the margin (forced); origin 0 releases
        # (1 - 0.5) x 4 = 2 of its requests, earliest deadlines first
        assert q.release(now + 25.0, np.array([0.5, 1.0]), margin) == 3
        assert forced.future.done()
        assert [h.future.done() for h in held] == [False, True, False, True]
        q.release_all()
        assert all(h.future.done() for h in held) and q.pending == 0

    asyncio.run(scenario())


class HoldSwitch:
    """A geo policy that sends everything to region 0 and holds deferrable work while
    ``hold`` says so."""

    name = "hold-switch"

    def __init__(self) -> None:
        self.hold = 1.0

    def reset(self, cluster, seed) -> None:
        pass

    def plan(self, obs) -> Plan:
        route = np.zeros(obs.allowed.shape)
        route[:, :, 0] = 1.0
        return Plan(route=route, hold=np.full(obs.n_origins, self.hold))


def test_deferrable_request_waits_for_the_plan_then_is_served(tmp_path):
    fake = FakeUpstream("DE-LU")
    up = ServerThread(fake.app()).start()
    raw = gateway_dict({"DE-LU": [up.url]}, epoch_s=0.5,
                       decision_log={"path": str(tmp_path / "d.jsonl")})  # fmt: skip
    app = create_app(parse_config(raw))
    gw = app.state.gateway
    policy = gw.planner.geo = HoldSwitch()
    gw.replan()
    srv = ServerThread(app).start()
    url = srv.url + "/v1/chat/completions"
    msg = {"model": "tiny", "messages": [{"role": "user", "content": "later"}]}
    try:
        # a deadline inside the margin (2 epochs + 2 s expected service) is never held
        r = httpx.post(url, json=msg, headers={"x-greenroute-class": "deferrable",
                                               "x-greenroute-deadline-s": "2.5"})  # fmt: skip
        assert r.status_code == 200 and fake.served == 1
        result = {}
        t = threading.Thread(
            target=lambda: result.update(
                r=httpx.post(
                    url,
                    json=msg,
                    timeout=30,
                    headers={"x-greenroute-class": "deferrable", "x-greenroute-deadline-s": "600"},
                )
            )
        )
        t.start()
        deadline = time.monotonic() + 10
        while gw.deferrals.pending == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert gw.deferrals.pending == 1 and fake.served == 1  # held, not sent
        policy.hold = 0.0  # the next epoch's plan releases it
        t.join(timeout=20)
        assert result["r"].status_code == 200 and fake.served == 2
        bad = httpx.post(url, json=msg, headers={"x-greenroute-class": "deferrable",
                                                 "x-greenroute-deadline-s": "-1"})  # fmt: skip
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_deadline"
        text = httpx.get(srv.url + "/metrics").text
        assert 'greenroute_deferred_total{origin="eu"} 1.0' in text
    finally:
        srv.stop()
        up.stop()
    recs = read_decisions(tmp_path / "d.jsonl")
    assert [r["class"] for r in recs] == ["deferrable"] * 2  # the 400 is no decision
    assert recs[0]["held_s"] == 0.0 and recs[1]["held_s"] > 0.0


def test_batch_endpoint_holds_its_items_then_returns_their_results(tmp_path):
    fake = FakeUpstream("DE-LU")
    up = ServerThread(fake.app()).start()
    app = create_app(parse_config(gateway_dict({"DE-LU": [up.url]}, epoch_s=0.5)))
    gw = app.state.gateway
    policy = gw.planner.geo = HoldSwitch()
    gw.replan()
    srv = ServerThread(app).start()
    url = srv.url + "/v1/greenroute/batches"
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "summarise"}]}
    batch = {"deadline_s": 600, "requests": [
        {"endpoint": "/v1/chat/completions", "body": chat},
        {"endpoint": "/v1/completions", "body": {"model": "tiny", "prompt": "p"}},
        {"body": {**chat, "model": "nope"}},
    ]}  # fmt: skip
    try:
        r = httpx.post(url, json=batch)
        assert r.status_code == 202, r.text
        bid = r.json()["id"]
        assert r.json()["count"] == 3 and r.json()["status"] == "in_progress"
        deadline = time.monotonic() + 10
        while gw.deferrals.pending < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert gw.deferrals.pending == 3 and fake.served == 0  # all held
        policy.hold = 0.0
        deadline = time.monotonic() + 20
        view = httpx.get(f"{url}/{bid}").json()
        while view["status"] != "completed" and time.monotonic() < deadline:
            time.sleep(0.05)
            view = httpx.get(f"{url}/{bid}").json()
        res = view["results"]
        assert [x["status"] for x in res] == [200, 200, 404]
        assert res[0]["region"] == "DE-LU" and res[0]["decision_id"]
        assert res[0]["body"]["choices"][0]["message"]["content"] == "hello from DE-LU"
        assert res[1]["body"]["choices"][0]["text"] == "hello from DE-LU"
        assert res[2]["body"]["error"]["code"] == "model_not_found"
        assert fake.served == 2
        bad = httpx.post(url, json={"requests": [{"body": {**chat, "stream": True}}]})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_batch"
        missing = httpx.get(f"{url}/no-such-batch")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "batch_not_found"
    finally:
        srv.stop()
        up.stop()
