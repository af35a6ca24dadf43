"""Gateway replicas sharing rate limits, upstream health and the plan through a real Redis
server (Debian's ``redis-server``, started here on a free loopback port without persistence).

Without ``redis-server`` these tests skip, unless ``GREENROUTE_REQUIRE_DATA=1`` (CI), where a
missing server is a failure (``make debian-deps`` installs it)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import uuid

import numpy as np
import pytest

pytest.importorskip("fastapi")
redis = pytest.importorskip("redis")
httpx = pytest.importorskip("httpx")

from greenroute.core.errors import ConfigError  # noqa: E402
from greenroute.serve.app import create_app  # noqa: E402
from greenroute.serve.config import GatewayConfigError, parse_config  # noqa: E402
from greenroute.serve.security import ClientKey, hash_api_key  # noqa: E402
from greenroute.serve.shared_state import RedisSharedState, SharedConfig  # noqa: E402
from serve_fakes import FakeUpstream, gateway_dict  # noqa: E402

KEY = "replica-test-key"
MSG = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
WAIT_S = 15.0  # upper bound of every wait-until below (they end as soon as the state is seen)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    exe = shutil.which("redis-server")
    if exe is None:
        msg = "redis-server is not installed (make debian-deps installs it)"
        if os.environ.get("GREENROUTE_REQUIRE_DATA") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    tmp = tmp_path_factory.mktemp("redis")
    for _ in range(5):  # the free port may be taken between the probe and the bind
        port = _free_port()
        proc = subprocess.Popen(
            [exe, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly",
             "no", "--dir", str(tmp), "--daemonize", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(url, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        else:
            proc.kill()
            proc.wait()
            continue
        client.close()
        yield url
        proc.terminate()
        proc.wait(timeout=10)
        return
    pytest.fail("redis-server did not start")


def _until(cond, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def _shared(redis_url: str, **kw) -> dict:
    return {"redis_url": redis_url, "key_prefix": f"t-{uuid.uuid4().hex[:8]}", **kw}


def _static(ci: dict[str, float]) -> dict:
    return {"providers": [{"type": "static", "values": {
        r: {"carbon_intensity_g_per_kwh": v} for r, v in ci.items()}}]}  # fmt: skip


def _replicas(servers, upstreams: dict[str, str], shared: dict, signals=(None, None), **extra):
    """Two gateway apps (replicas A then B) with the same config except the signals:
    ([gateway A, B], [chat URL of A, B], [server of A, B])."""
    gws, urls, srvs = [], [], []
    for sig in signals:
        raw = gateway_dict({r: [u] for r, u in upstreams.items()}, shared=shared, **extra)
        if sig is not None:
            raw["signals"] = _static(sig)
        app = create_app(parse_config(raw, source="test.yaml"))
        gws.append(app.state.gateway)
        srvs.append(servers(app))
        urls.append(srvs[-1].url + "/v1/chat/completions")
    return gws, urls, srvs


def _fakes(servers, *names: str) -> tuple[dict[str, FakeUpstream], dict[str, str]]:
    fakes = {n: FakeUpstream(n) for n in names}
    return fakes, {n: servers(f.app()).url for n, f in fakes.items()}


# ---------------------------------------------------------------------- config (no server)
def test_shared_section_is_validated_one_problem_per_key():
    raw = gateway_dict({"DE-LU": ["http://127.0.0.1:1"]}, shared={
        "redis_url": "http://127.0.0.1:6379", "key_prefix": "a b", "lock_ttl_s": 1.0,
        "sync_interval_s": 0.9, "timeout_s": -1, "colour": "red"})  # fmt: skip
    with pytest.raises(GatewayConfigError) as err:
        parse_config(raw, source="g.yaml")
    probs = err.value.problems
    assert len(probs) == 5
    assert any(
        p.startswith("g.yaml: shared.colour: unknown key; valid keys: redis_url") for p in probs
    )
    assert any("shared.redis_url: must start with one of redis://, rediss://, unix://" in p
               for p in probs)  # fmt: skip
    assert any("shared.key_prefix: must not contain spaces" in p for p in probs)
    assert any("shared.sync_interval_s: must be <= lock_ttl_s / 2 = 0.5" in p for p in probs)
    assert any("shared.timeout_s: must be > 0" in p for p in probs)
    with pytest.raises(GatewayConfigError, match=r"shared\.redis_url: required"):
        parse_config(gateway_dict({"DE-LU": ["http://127.0.0.1:1"]}, shared={}))
    cfg = parse_config(gateway_dict({"DE-LU": ["http://127.0.0.1:1"]}))
    assert cfg.shared is None  # default: everything in process


def test_unreachable_redis_fails_at_start_up():
    raw = gateway_dict({"DE-LU": ["http://127.0.0.1:1"]},
                       shared={"redis_url": f"redis://127.0.0.1:{_free_port()}/0"})  # fmt: skip
    with pytest.raises(ConfigError, match=r"shared\.redis_url: cannot reach Redis at redis://"):
        create_app(parse_config(raw))
    raw["shared"]["redis_url"] = f"redis://app:s3cret@127.0.0.1:{_free_port()}/0"
    with pytest.raises(ConfigError) as err:
        create_app(parse_config(raw))
    assert "s3cret" not in str(err.value) and "redis://app:***@127.0.0.1:" in str(err.value)


# ---------------------------------------------------------------------- the primitives
def test_token_bucket_and_leader_lock_in_redis(redis_url):
    cfg = SharedConfig(redis_url, key_prefix=f"t-{uuid.uuid4().hex[:8]}", lock_ttl_s=30.0)
    a = RedisSharedState(cfg, plan_ttl_s=60.0, replica_id="a")
    b = RedisSharedState(cfg, plan_ttl_s=60.0, replica_id="b")
    key = ClientKey("k", hash_api_key("x"), rate_rps=0.5, burst=3.0)
    # 3 tokens between the two replicas, then a wait of (1 - tokens) / rate <= 1 / 0.5 = 2 s
    got = [a.take_token(key), b.take_token(key), a.take_token(key)]
    assert got == [0.0, 0.0, 0.0]
    wait = b.take_token(key)
    assert 1.9 < wait <= 2.0  # tokens refilled in the few ms since the first take: 0.5/s
    assert a.take_token(ClientKey("free", hash_api_key("y"))) == 0.0  # no limit configured
    assert a.try_lead() and not b.try_lead() and a.try_lead()  # a holds and renews
    assert a.leader() == "a"
    b.release_lock()  # only the owner may release
    assert a.leader() == "a"
    a.close()
    assert b.try_lead() and b.leader() == "b"
    b.close()


# ---------------------------------------------------------------------- two replicas
def test_rate_limit_of_a_key_is_enforced_across_replicas(servers, redis_url):
    _, ups = _fakes(servers, "DE-LU", "GB")
    auth = {"keys": [{"name": "team", "hash": hash_api_key(KEY), "rate_rps": 0.001,
                      "burst": 10}]}  # fmt: skip
    _, urls, _ = _replicas(servers, ups, _shared(redis_url), auth=auth)
    hdr = {"authorization": f"Bearer {KEY}"}
    with httpx.Client(timeout=10) as client:
        codes = [client.post(urls[i % 2], json=MSG, headers=hdr).status_code
                 for i in range(20)]  # fmt: skip
    # one bucket of 10 for both replicas (in process, each would have let 10 through: 20)
    assert codes == [200] * 10 + [429] * 10


def test_upstream_ejected_by_one_replica_is_skipped_by_the_other(servers, redis_url):
    fakes, ups = _fakes(servers, "DE-LU", "GB")
    upstream = {"failures_to_eject": 2, "cooldown_s": 60.0, "health_interval_s": 60.0}
    (gw_a, gw_b), urls, _ = _replicas(
        servers, ups, _shared(redis_url, lock_ttl_s=2.0, sync_interval_s=0.05),
        signals=({"DE-LU": 300.0, "GB": 50.0},) * 2, upstream=upstream,
    )  # fmt: skip
    a_gb = next(u for u in gw_a.pool.upstreams if u.name == "GB-0")
    b_gb = next(u for u in gw_b.pool.upstreams if u.name == "GB-0")
    with httpx.Client(timeout=10) as client:
        assert client.post(urls[1], json=MSG).headers["x-greenroute-region"] == "GB"
        gw_a.pool.failure(a_gb)
        gw_a.pool.failure(a_gb)  # failures_to_eject = 2: replica A ejects GB-0
        assert a_gb.ejected
        _until(lambda: b_gb.ejected, "replica B to eject GB-0")
        served = fakes["GB"].served
        regions = {client.post(urls[1], json=MSG).headers["x-greenroute-region"]
                   for _ in range(5)}  # fmt: skip
        assert regions == {"DE-LU"} and fakes["GB"].served == served  # B never tried GB
        gw_a.pool.readmit(a_gb)  # A re-admits it (as a passing health check does)
        readmitted_at = gw_a.pool.health_version
        # a shared set A read before its own re-admission cannot eject GB-0 again (a sync
        # loop whose Redis read was in flight used to undo it, and B then never re-admitted)
        gw_a.coord.sync_health({"GB-0"}, since=readmitted_at - 1)
        assert not a_gb.ejected
        _until(lambda: not b_gb.ejected, "replica B to re-admit GB-0")
        assert client.post(urls[1], json=MSG).headers["x-greenroute-region"] == "GB"


def _count_plans(gw) -> list[int]:
    calls = [0]
    plan = gw.planner.geo.plan

    def counted(obs):
        calls[0] += 1
        return plan(obs)

    gw.planner.geo.plan = counted
    return calls


def test_one_replica_plans_and_both_route_by_its_plan_then_failover(servers, redis_url,
                                                                    monkeypatch):  # fmt: skip
    _, ups = _fakes(servers, "DE-LU", "GB")
    shared = _shared(redis_url, lock_ttl_s=3.0, sync_interval_s=0.05)
    # A sees DE-LU as the cleanest, B sees GB: a plan B made itself would send eu to GB
    (gw_a, gw_b), urls, (srv_a, _) = _replicas(
        servers, ups, shared, signals=({"DE-LU": 50.0, "GB": 300.0},
                                       {"DE-LU": 300.0, "GB": 50.0}), epoch_s=0.4,
    )  # fmt: skip
    plans_a, plans_b = _count_plans(gw_a), _count_plans(gw_b)
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    lock = f"{shared['key_prefix']}:leader"
    assert r.get(lock) == gw_a.shared.replica_id  # A started first and leads

    def same_plan() -> bool:
        sa, sb = gw_a.router.state, gw_b.router.state
        return sa.epoch == sb.epoch and np.array_equal(sa.plan.route, sb.plan.route)

    _until(lambda: plans_a[0] >= 3 and same_plan(), "three epochs planned by A")
    assert plans_b[0] == 0 and gw_b.coord.adopted >= 2
    eu = gw_b.origin_index["eu"]
    assert gw_b.router.state.plan.route[0, eu].tolist() == [1.0, 0.0]  # A's choice: DE-LU
    with httpx.Client(timeout=10) as client:
        assert client.post(urls[1], json=MSG).headers["x-greenroute-region"] == "DE-LU"

    # A dies without letting go of its lock: B takes over once the lock's TTL has run out
    monkeypatch.setattr(gw_a.shared, "release_lock", lambda: None)
    t0 = time.monotonic()
    srv_a.stop(force=True)
    if time.monotonic() - t0 < 2.0:  # A renewed < 0.1 s before: its 3 s lock is still held
        assert r.get(lock) == gw_a.shared.replica_id and plans_b[0] == 0
    _until(lambda: r.get(lock) == gw_b.shared.replica_id and plans_b[0] >= 1,
           "replica B to take the lock and plan")  # fmt: skip
    plan_key = f"{shared['key_prefix']}:plan"
    _until(lambda: json.loads(r.get(plan_key))["leader"] == gw_b.shared.replica_id,
           "B's plan to be published")  # fmt: skip
    _until(lambda: gw_b.router.state.plan.route[0, eu].tolist() == [0.0, 1.0], "B's plan")
    r.close()


def test_leader_plans_from_the_fleet_arrivals_and_followers_adopt(redis_url):
    """Driven by hand (no server, no loops) on a fake clock: which replica plans each epoch, and
    from whose demand."""
    from greenroute.serve.gateway import Gateway

    epoch_s = 60.0
    now = [1000 * epoch_s + 1.0]
    raw = gateway_dict({"DE-LU": ["http://127.0.0.1:1"], "GB": ["http://127.0.0.1:2"]},
                       shared=_shared(redis_url), epoch_s=epoch_s)  # fmt: skip
    cfg = parse_config(raw)
    a, b = Gateway(cfg, clock=lambda: now[0]), Gateway(cfg, clock=lambda: now[0])
    plans_a, plans_b = _count_plans(a), _count_plans(b)
    assert a.router.state.epoch == b.router.state.epoch == 1000
    assert (a.coord.planned, b.coord.planned, b.coord.adopted) == (1, 0, 1)
    eu, uk = a.origin_index["eu"], a.origin_index["uk"]
    for gw, origin, n in ((a, eu, 2), (b, eu, 3), (b, uk, 1)):
        for _ in range(n):
            gw.planner.count_arrival(0, origin)
    assert b.coord.decide(1000) is None  # same epoch: nothing new; B's arrivals handed over
    now[0] += epoch_s  # epoch 1001
    state = a.coord.decide(1000)
    assert state is not None and state.epoch == 1001 and plans_a[0] == 1
    # the leader's forecast: (2 + 3) eu and 1 uk interactive requests over the 60 s since
    # its last observation
    assert state.obs.demand_rps[0][0, eu] == pytest.approx(5 / epoch_s, rel=1e-12)
    assert state.obs.demand_rps[0][0, uk] == pytest.approx(1 / epoch_s, rel=1e-12)
    adopted = b.coord.decide(1000)
    assert adopted is not None and adopted.epoch == 1001 and plans_b[0] == 0
    assert np.array_equal(adopted.plan.route, state.plan.route)
    assert b.coord.decide(1001) is None  # already in force
    a.shared.close()
    b.shared.close()


def test_redis_failure_falls_back_to_this_replicas_buckets(redis_url):
    errors: list[str] = []
    cfg = SharedConfig(redis_url, key_prefix=f"t-{uuid.uuid4().hex[:8]}")
    st = RedisSharedState(cfg, plan_ttl_s=60.0, replica_id="a", on_error=errors.append)
    calls = [0]

    def broken(**kw):
        calls[0] += 1
        raise redis.ConnectionError("connection refused")

    st._bucket = broken
    key = ClientKey("k", hash_api_key("x"), rate_rps=0.001, burst=2.0)
    got = [st.take_token(key) for _ in range(3)]
    assert got[:2] == [0.0, 0.0] and got[2] > 900.0  # the local bucket: 2, then ~1000 s
    assert calls[0] == 1 and errors == ["rate-limit"]  # one try, then the breaker is open
    st.set_ejected("GB-0", True)  # skipped while the breaker is open: nothing written
    assert st.ejected() == set()
    st._down_until = -1.0  # the breaker closes after BREAKER_S
    st.set_ejected("GB-0", True)
    assert st.ejected() == {"GB-0"}
    st.close()
