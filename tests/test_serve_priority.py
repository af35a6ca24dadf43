"""Queueing with priorities: requests waiting for a slot are woken highest priority first,
first come first served within a priority; the priority comes from the key, or a header
capped at the key's priority."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("yaml")

from greenroute.serve.config import GatewayConfigError, parse_config
from greenroute.serve.errors import GatewayHTTPError
from greenroute.serve.gateway import Gateway
from greenroute.serve.security import ClientKey, hash_api_key
from serve_fakes import gateway_dict


def _gateway() -> Gateway:
    return Gateway(parse_config(gateway_dict({"DE-LU": ["http://127.0.0.1:9"]}), source="g"))


def test_freed_slots_go_to_the_highest_priority_then_the_oldest():
    gw = _gateway()
    # arrival order a..f with these priorities; one slot is freed at a time
    arrivals = [("a", 0), ("b", 5), ("c", 0), ("d", 5), ("e", 1), ("f", -1)]
    woken: list[str] = []

    async def wait(name: str, prio: int) -> None:
        assert await gw.wait_for_slot(10.0, prio)
        woken.append(name)

    async def main() -> None:
        tasks = []
        for name, prio in arrivals:
            tasks.append(asyncio.create_task(wait(name, prio)))
            await asyncio.sleep(0)  # each one queued before the next arrives
        for n in range(1, len(arrivals) + 1):
            gw._on_release()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            assert len(woken) == n  # exactly one woken per freed slot
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert woken == ["b", "d", "e", "a", "c", "f"]


def test_a_timed_out_waiter_is_skipped():
    gw = _gateway()

    async def main() -> list[bool]:
        high = asyncio.create_task(gw.wait_for_slot(0.01, 9))  # gives up before the release
        low = asyncio.create_task(gw.wait_for_slot(10.0, 0))
        assert await high is False
        gw._on_release()
        return [await low]

    assert asyncio.run(main()) == [True]


def test_the_header_can_lower_but_never_raise_the_keys_priority():
    key = ClientKey("k", hash_api_key("x"), priority=3)
    assert Gateway.request_priority(key, None) == 3
    assert Gateway.request_priority(key, "10") == 3
    assert Gateway.request_priority(key, " -2 ") == -2
    assert Gateway.request_priority(None, "4") == 0  # no key: capped at the default 0
    assert Gateway.request_priority(None, "-1") == -1
    with pytest.raises(GatewayHTTPError) as info:
        Gateway.request_priority(key, "high")
    assert (info.value.status, info.value.code) == (400, "invalid_priority")


def test_priority_is_read_from_the_key_and_validated():
    keys = [{"name": "a", "hash": hash_api_key("a"), "priority": 2},
            {"name": "b", "hash": hash_api_key("b")},
            {"name": "c", "hash": hash_api_key("c"), "priority": 1.5}]  # fmt: skip
    raw = gateway_dict({"DE-LU": ["http://127.0.0.1:9"]}, auth={"keys": keys[:2]})
    cfg = parse_config(raw, source="g")
    assert [k.priority for k in cfg.keys] == [2, 0]
    with pytest.raises(GatewayConfigError) as info:
        parse_config({**raw, "auth": {"keys": keys}}, source="g")
    assert [p.split(": ")[1] for p in info.value.problems] == ["auth.keys[2].priority"]


def test_over_http_a_freed_slot_goes_to_the_higher_priority_key(servers, tmp_path):
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    import json
    import threading
    import time

    from greenroute.serve.app import create_app
    from serve_fakes import FakeUpstream

    fake = FakeUpstream("de", delay_s=0.3)
    up = servers(fake.app())
    keys = [{"name": n, "hash": hash_api_key(n), "priority": p}
            for n, p in (("first", 0), ("low", 0), ("high", 2))]  # fmt: skip
    raw = gateway_dict({"DE-LU": [up.url]}, auth={"keys": keys})
    raw["regions"]["DE-LU"]["upstreams"][0]["capacity"] = 1
    app = create_app(parse_config(raw, source="t.yaml", base_dir=tmp_path))
    gw, srv = app.state.gateway, servers(app)
    url, status = srv.url + "/v1/chat/completions", {}

    def post(name: str, headers: dict | None = None) -> None:
        body = {"model": "tiny", "messages": [{"role": "user", "content": name}]}
        r = httpx.post(
            url,
            json=body,
            timeout=10,
            headers={"authorization": f"Bearer {name}", **(headers or {})},
        )
        status[name] = r.status_code

    def waiting(n: int) -> None:  # until n requests wait for the one slot
        deadline = time.monotonic() + 10
        while sum(not f.done() for *_, f in gw._waiters) < n:
            assert time.monotonic() < deadline
            time.sleep(0.005)

    threads = [threading.Thread(target=post, args=("first",))]
    threads[0].start()
    while not fake.bodies:  # "first" holds the slot
        time.sleep(0.005)
    for i, name in enumerate(("low", "high")):  # low queues before high
        threads.append(threading.Thread(target=post, args=(name,)))
        threads[-1].start()
        waiting(i + 1)
    for t in threads:
        t.join()
    order = [json.loads(b)["messages"][0]["content"] for b in fake.bodies]
    assert order == ["first", "high", "low"] and set(status.values()) == {200}
    r = httpx.post(
        url,
        json={"model": "tiny", "messages": []},
        headers={"authorization": "Bearer low", "x-greenroute-priority": "urgent"},
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_priority"
