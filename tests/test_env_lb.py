"""greenroute/LoadBalancing-v0 (seed 002): dynamics, reward terms, features, training, rl:PATH."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

gym = pytest.importorskip("gymnasium")
pytest.importorskip("stable_baselines3")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from greenroute.core.errors import ConfigError  # noqa: E402
from greenroute.core.types import RequestView, ServerView  # noqa: E402
from greenroute.envs import lb  # noqa: E402
from greenroute.envs.lb import LoadBalancingEnv  # noqa: E402

ENV_ID = "greenroute/LoadBalancing-v0"


def _frame(arrivals, tokens, output=1):
    """A hand-built stream: ``tokens`` is the total (prompt = tokens - output)."""
    arrivals = np.asarray(arrivals, dtype=float)
    tokens = np.asarray(tokens, dtype=float)
    return pd.DataFrame(
        {
            "timestamp": pd.Timestamp("2023-11-16 18:00") + pd.to_timedelta(arrivals, unit="s"),
            "arrival_s": arrivals,
            "prompt_tokens": tokens - output,
            "output_tokens": np.full(tokens.size, float(output)),
        }
    )


def _hand_env(arrivals, tokens, servers, *, slo=False, n=None, **kw):
    # a long tail of requests far in the future keeps the hand-built ones in the train split
    arrivals = list(arrivals) + [1e6 + k for k in range(len(arrivals))]
    tokens = list(tokens) + [100.0] * (len(arrivals) - len(tokens))
    env = LoadBalancingEnv(
        "custom", "train", n or len(tokens) // 2, servers=servers, slo_penalty=slo,
        stream=_frame(arrivals, tokens), **kw,
    )  # fmt: skip
    obs, info = env.reset(options={"offset": 0})
    return env, obs, info


# --------------------------------------------------------------------------- the env
@pytest.mark.realdata
@pytest.mark.parametrize("scenario", ["lb-nominal", "lb-highload"])
def test_check_env_both_scenarios(scenario, data_dir):
    env = gym.make(ENV_ID, scenario=scenario, split="train", data_dir=str(data_dir))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unbounded Box notices
        check_env(env.unwrapped)
    base = env.unwrapped
    assert base.stream.source.startswith("trace:")
    assert base.action_space.n == 3
    assert base.observation_space.shape == (len(lb.REQUEST_FEATURES) + 4 * 3,)
    servers = {"lb-nominal": [(5000.0, 5)] * 3,
               "lb-highload": [(3000.0, 3), (5000.0, 5), (7000.0, 7)]}[scenario]  # fmt: skip
    assert base.servers == servers
    assert base.slo_penalty is (scenario == "lb-highload")


@pytest.mark.realdata
def test_streams_and_time_split(data_dir):
    nominal = LoadBalancingEnv("lb-nominal", "eval", data_dir=str(data_dir))
    high = LoadBalancingEnv("lb-highload", "eval", data_dir=str(data_dir))
    # nominal: the whole hour; high load: first 5000 requests compressed into 1000 s
    assert nominal.stream.arrival_s.size == 8819
    assert nominal.stream.arrival_s[-1] == pytest.approx(3435.948, abs=1e-2)
    assert high.stream.arrival_s.size == 5000
    assert high.stream.arrival_s[-1] == pytest.approx(1000.0)
    for env in (nominal, high):
        a = env.stream.arrival_s
        k = env.split_range[0]
        cut = 0.7 * a[-1]
        assert a[k - 1] < cut <= a[k]  # split by time at 70 % of the span
        assert env.split_range[1] == a.size
        _, info = env.reset(seed=3)
        lo, hi = info["window"]
        assert hi - lo == 1000 and lo >= k


def test_reward_terms_two_servers_one_full():
    # server 0: 1 slot at 1000 tok/s; server 1: 2 slots at 2000 tok/s
    env, _, _ = _hand_env([0.0, 0.1, 0.2], [1000.0, 500.0, 300.0], [(1000.0, 1), (2000.0, 2)])
    _, r0, _, _, info0 = env.step(0)  # starts now, finishes at 1.0
    t0 = info0["reward_terms"]
    assert t0["overload"] == 0.0 and t0["queue"] == 0.0 and t0["served"] == 1.0
    assert t0["processing"] == pytest.approx(-0.01 * 1000 / 1000)
    # loads after: [1000 / 1000, 0] -> mean 0.5, std 0.5
    assert info0["balance_metric"] == pytest.approx(1 - 0.5 / (0.5 + 1e-6))
    assert r0 == pytest.approx(sum(t0.values()))

    _, r1, _, _, info1 = env.step(0)  # server 0 is full: -10, request waits
    t1 = info1["reward_terms"]
    assert t1["overload"] == -10.0
    assert t1["queue"] == 0.0  # nobody waiting yet when it arrived
    assert t1["processing"] == pytest.approx(-0.01 * 500 / 1000)
    assert t1["served"] == 1.0 and t1["slo"] == 0.0
    assert info1["start_s"] == pytest.approx(1.0) and info1["finish_s"] == pytest.approx(1.5)
    loads = np.array([1500 / 1000, 0.0])
    bal = 1 - loads.std() / (loads.mean() + 1e-6)
    assert t1["balance"] == pytest.approx(0.1 * bal)
    assert r1 == pytest.approx(-10 - 0.005 + 0.1 * bal + 1)

    _, _, _, _, info2 = env.step(1)  # the other server has free slots
    t2 = info2["reward_terms"]
    assert t2["overload"] == 0.0 and t2["queue"] == 0.0
    assert t2["processing"] == pytest.approx(-0.01 * 300 / 2000)
    loads = np.array([1500 / 1000, 300 / (2000 * 2)])
    assert info2["balance_metric"] == pytest.approx(1 - loads.std() / (loads.mean() + 1e-6))


def test_queue_penalty_counts_waiting_requests():
    env, _, _ = _hand_env([0.0, 0.01, 0.02, 0.03], [1000.0] * 4, [(1000.0, 1), (1000.0, 1)])
    env.step(0)
    env.step(0)
    _, _, _, _, info = env.step(0)  # one waiting ahead
    assert info["reward_terms"]["queue"] == pytest.approx(-0.1)
    _, _, _, _, info = env.step(0)  # two waiting ahead
    assert info["reward_terms"]["queue"] == pytest.approx(-0.2)
    assert info["reward_terms"]["overload"] == -10.0


def test_slo_penalty_exactly_when_a_late_request_completes():
    servers = [(1000.0, 1), (1000.0, 1)]
    arrivals = [0.0, 1.0, 2.0, 4.0]
    env, _, _ = _hand_env(arrivals, [3000.0, 100.0, 100.0, 100.0], servers, slo=True, n=4)
    _, _, _, _, i0 = env.step(0)  # finishes at 3.0: response time 3 s > 2 s
    assert i0["reward_terms"]["slo"] == 0.0 and i0["completed"] == 0
    _, _, _, _, i1 = env.step(1)  # clock -> 2.0; request 1 (on time) completes
    assert i1["reward_terms"]["slo"] == 0.0 and i1["completed"] == 1
    _, _, _, _, i2 = env.step(1)  # clock -> 4.0: request 0 completes at 3.0, late
    assert i2["reward_terms"]["slo"] == -5.0
    assert i2["late_completions"] == 1 and i2["completed"] == 2
    _, _, term, _, i3 = env.step(1)  # last step drains; request 3 on time
    assert term and i3["reward_terms"]["slo"] == 0.0
    m = i3["episode_metrics"]
    assert m["slo_violation_pct"] == pytest.approx(25.0)
    assert m["avg_response_time_s"] == pytest.approx((3.0 + 0.1 + 0.1 + 0.1) / 4)
    # nominal mode: same events, no penalty
    env, _, _ = _hand_env(arrivals, [3000.0, 100.0, 100.0, 100.0], servers, slo=False, n=4)
    for a in (0, 1, 1):
        _, _, _, _, info = env.step(a)
    assert info["reward_terms"]["slo"] == 0.0 and info["late_completions"] == 1


def test_queue_bound_1000_then_drop():
    n = 1002
    arrivals = np.arange(n) * 1e-4
    env, _, _ = _hand_env(arrivals, [1000.0] * n, [(10.0, 1), (10.0, 1)], n=n)
    for _ in range(1001):  # 1 running + 1000 waiting
        _, _, _, _, info = env.step(0)
        assert not info["dropped"]
    assert env.farm.queued()[0] == 1000
    _, _, term, _, info = env.step(0)
    assert info["dropped"] and info["reward_terms"]["served"] == 0.0
    assert info["reward_terms"]["overload"] == -10.0
    assert info["reward_terms"]["queue"] == pytest.approx(-100.0)
    assert term and info["episode_metrics"]["drops"] == 1


@pytest.mark.realdata
def test_episode_metrics_round_robin(data_dir):
    env = LoadBalancingEnv("lb-highload", "eval", data_dir=str(data_dir))
    m = lb.run_episode(env, lb.RoundRobin(), offset=0)
    assert m["requests"] == 1000 and m["completed"] + m["drops"] == 1000
    assert m["server_share"] == pytest.approx([0.334, 0.333, 0.333])
    ref = _fifo_round_robin_reference(env)
    assert m["drops"] == ref["drops"]
    assert m["avg_response_time_s"] == pytest.approx(ref["avg_response_time_s"], rel=1e-9)
    assert m["avg_queue_len"] == pytest.approx(ref["avg_queue_len"], rel=1e-9)
    assert m["slo_violation_pct"] == pytest.approx(ref["slo_violation_pct"], rel=1e-9)
    assert ref["avg_queue_len"] > 0  # the high-load window does queue (not a vacuous check)


def _fifo_round_robin_reference(env, queue_limit: int = 1000, slo_s: float = 2.0) -> dict:
    """Episode metrics of round-robin from first principles, written independently of the env.

    Request k of the window goes to server k mod n. Each server is a FIFO queue in front of
    ``c`` parallel slots that each serve a request in ``total_tokens / TPS`` s (seed 002's
    slot model): in arrival order a request starts at max(arrival, earliest slot free time)
    (a min-heap of slot free times). A request that finds ``queue_limit`` waiting is dropped.
    Queue length before each arrival = requests assigned earlier whose start is later.
    """
    import heapq

    base = env.unwrapped
    lo = base.split_range[0]
    arrival = np.asarray(base.stream.arrival_s[lo : lo + 1000], dtype=float)
    tokens = np.asarray(base.stream.prompt[lo : lo + 1000] + base.stream.output[lo : lo + 1000])
    n = len(base.servers)
    free = [[0.0] * c for _, c in base.servers]
    starts: list[list[float]] = [[] for _ in range(n)]
    rts, queue_sum, drops = [], 0.0, 0
    for k, (t, tok) in enumerate(zip(arrival, tokens, strict=True)):
        waiting = [sum(st > t for st in starts[s]) for s in range(n)]
        queue_sum += sum(waiting) / n
        s = k % n
        if waiting[s] >= queue_limit:
            drops += 1
            continue
        start = max(t, heapq.heappop(free[s]) if free[s] else t)
        finish = start + tok / base.servers[s][0]
        heapq.heappush(free[s], finish)
        starts[s].append(start)
        rts.append(finish - t)
    rts = np.array(rts)
    return {
        "drops": drops,
        "avg_response_time_s": float(rts.mean()),
        "avg_queue_len": queue_sum / len(arrival),
        "slo_violation_pct": 100.0 * (int((rts > slo_s).sum()) + drops) / len(arrival),
    }


def test_baselines_follow_their_rules():
    # A: 1000 tok/s x 2, B: 4000 x 2, C: 1000 x 4; everything arrives at t = 0
    env, obs, _ = _hand_env([0.0] * 7, [4000.0] + [100.0] * 6,
                            [(1000.0, 2), (4000.0, 2), (1000.0, 4)])  # fmt: skip
    for a in (1, 0, 0, 2, 2, 2):
        obs, *_ = env.step(a)
    # connections (active + queued): A 2, B 1, C 3; load: A 200/2000, B 4000/8000, C 300/4000
    assert env.farm.n_inflight.tolist() == [2, 1, 3]
    assert env.farm.load() == pytest.approx([0.1, 0.5, 0.075])
    assert lb.LeastConnections()(obs, env) == 1
    assert lb.LeastLoaded()(obs, env) == 2
    rr = lb.RoundRobin()
    rr.reset()
    assert [rr(obs, env) for _ in range(4)] == [0, 1, 2, 0]
    rnd = lb.RandomBaseline()
    rnd.reset(0)
    assert {rnd(obs, env) for _ in range(50)} == {0, 1, 2}


# --------------------------------------------------------------------------- features
def test_request_features_match_pandas():
    rng = np.random.default_rng(0)
    n = 60
    ts = pd.date_range("2023-11-16 23:58", periods=n, freq="7s").to_numpy()
    p = rng.integers(1, 5000, n).astype(float)
    o = rng.integers(1, 500, n).astype(float)
    got = lb.raw_request_features(ts, p, o)
    total = pd.Series(p + o)
    names = list(lb.REQUEST_FEATURES)
    assert got[:, names.index("hour")].tolist()[:3] == [23, 23, 23]
    assert got[-1, names.index("hour")] == 0  # crosses midnight
    assert got[-1, names.index("day_of_month")] == 17
    assert got[0, names.index("day_of_week")] == 3  # Thursday
    assert got[0, names.index("iso_week")] == 46
    for w in (5, 10, 20):
        roll = total.rolling(w, min_periods=1)
        np.testing.assert_allclose(got[:, names.index(f"roll_mean_{w}")], roll.mean())
        np.testing.assert_allclose(got[:, names.index(f"roll_std_{w}")], roll.std().fillna(0))
    np.testing.assert_allclose(got[1:, names.index("lag1_total")], total[:-1])
    np.testing.assert_allclose(got[1:, names.index("lag1_generated")], o[:-1])
    # the last row depends on the last 20 requests only (what rl:PATH keeps)
    tail = lb.raw_request_features(ts[-20:], p[-20:], o[-20:])
    np.testing.assert_allclose(tail[-1], got[-1])


def test_robust_scaler_median_iqr():
    x = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0], [4.0, 5.0], [100.0, 5.0]])
    sc = lb.RobustScaler.fit(x, fallback_scale=np.array([1.0, 24.0]))
    assert sc.center.tolist() == [3.0, 5.0]
    assert sc.scale.tolist() == [2.0, 24.0]  # IQR 4 - 2; zero IQR -> fallback
    assert sc.transform([[7.0, 29.0]]).tolist() == [[2.0, 1.0]]
    back = lb.RobustScaler.from_dict(sc.to_dict())
    assert back.center.tolist() == [3.0, 5.0] and back.scale.tolist() == [2.0, 24.0]


@pytest.mark.realdata
def test_scaler_fitted_on_train_split_only(data_dir):
    env = LoadBalancingEnv("lb-highload", "train", data_dir=str(data_dir))
    s = env.stream
    k = env.split_range[1]
    df = pd.DataFrame({"timestamp": s.timestamps, "arrival_s": s.arrival_s,
                       "prompt_tokens": s.prompt, "output_tokens": s.output})  # fmt: skip
    changed = df.copy()
    changed.loc[k:, "prompt_tokens"] *= 10.0
    changed.loc[k:, "output_tokens"] += 777.0
    a = LoadBalancingEnv("lb-highload", "train", stream=df).model_meta()["scaler"]
    b = LoadBalancingEnv("lb-highload", "eval", stream=changed).model_meta()["scaler"]
    assert a == b == env.model_meta()["scaler"]
    raw = lb.raw_request_features(s.timestamps[:k], s.prompt[:k], s.output[:k])
    np.testing.assert_allclose(a["center"], np.median(raw, axis=0))
    # ... while changing the training part does change it
    changed.loc[: k - 1, "prompt_tokens"] *= 2.0
    c = LoadBalancingEnv("lb-highload", "train", stream=changed).model_meta()["scaler"]
    assert c["center"] != a["center"]


def test_synthetic_fallback_without_data(monkeypatch):
    monkeypatch.delenv("GREENROUTE_DATA_DIR", raising=False)
    with pytest.warns(RuntimeWarning, match="synthetic"):
        env = LoadBalancingEnv("lb-highload", "eval")
    _, info = env.reset(seed=0)
    assert info["data_source"] == "synthetic"
    assert env.stream.arrival_s.size == 5000
    m = lb.run_episode(env, lb.LeastLoaded(), seed=0)
    assert m["requests"] == 1000


def test_bad_options():
    with pytest.raises(ConfigError, match="split"):
        LoadBalancingEnv("lb-highload", "test")
    with pytest.raises(ConfigError, match="obs"):
        _hand_env([0.0, 1.0], [10.0, 10.0], [(1.0, 1)], obs="nope")
    env, _, _ = _hand_env([0.0, 1.0], [10.0, 10.0], [(1.0, 1)])
    with pytest.raises(ConfigError, match="action"):
        env.step(3)


# --------------------------------------------------------------------------- training
HIGH_TRAIN = {"scenario": "lb-highload", "split": "train", "reward_scale": 0.01,
              "obs": "extended"}  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory, data_dir):
    """A short, seeded PPO run through greenroute's train() (saves the zip + metadata)."""
    import torch

    from greenroute.bench.rl_train import train

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("lb") / "ppo.zip"
    opts = {**HIGH_TRAIN, "data_dir": str(data_dir)}
    hp = {"n_steps": 256, "batch_size": 64, "gae_lambda": 0.8, "ent_coef": 0.01}
    meta = train(ENV_ID, "ppo", 8192, seed=0, out=out, env_options=opts, hyperparameters=hp)
    return out, meta


@pytest.mark.realdata
def test_train_stores_env_meta(trained):
    from greenroute.policies.rl.store import read_meta

    path, meta = trained
    stored = read_meta(path)
    assert stored["env_id"] == ENV_ID and stored["algo"] == "ppo"
    em = stored["env_meta"]
    assert em["servers"] == [[3000.0, 3], [5000.0, 5], [7000.0, 7]]
    assert len(em["scaler"]["center"]) == len(lb.REQUEST_FEATURES)
    assert em["obs"] == "extended" and em["data_source"].startswith("trace:")
    assert meta["hyperparameters"]["learning_rate"] == 3e-4  # seed 002 section V


@pytest.mark.realdata
def test_short_ppo_beats_random_on_highload(trained, data_dir):
    from greenroute.policies.rl.store import load_model

    model, _ = load_model(trained[0], expect_env=ENV_ID)
    env = LoadBalancingEnv("lb-highload", "eval", data_dir=str(data_dir), obs="extended")
    offsets = lb.eval_offsets(env, 3)
    ppo = [lb.run_episode(env, lb.model_policy(model), offset=o) for o in offsets]
    rnd = [lb.run_episode(env, lb.RandomBaseline(), seed=k, offset=o)
           for k, o in enumerate(offsets)]  # fmt: skip
    ppo_r = np.mean([m["cumulative_reward"] for m in ppo])
    rnd_r = np.mean([m["cumulative_reward"] for m in rnd])
    assert ppo_r > rnd_r + 500, (ppo_r, rnd_r)


@pytest.mark.realdata
def test_save_load_identical_actions(tmp_path, data_dir):
    import stable_baselines3 as sb3
    import torch

    from greenroute.policies.rl.algos import default_hyperparameters
    from greenroute.policies.rl.store import load_model, write_meta

    torch.set_num_threads(1)
    env = LoadBalancingEnv("lb-highload", "train", data_dir=str(data_dir))
    kw, pk = default_hyperparameters(ENV_ID, "ppo")
    assert pk["net_arch"] == [128, 128] and pk["activation_fn"] is torch.nn.ReLU
    model = sb3.PPO("MlpPolicy", env, seed=1, n_steps=256, batch_size=64, policy_kwargs=pk,
                    device="cpu", **kw)  # fmt: skip
    model.learn(512)
    path = tmp_path / "m.zip"
    model.save(str(path))
    write_meta(path, {"env_id": ENV_ID, "algo": "ppo", "env_meta": env.model_meta()})
    loaded, meta = load_model(path, expect_env=ENV_ID)
    rng = np.random.default_rng(0)
    batch = rng.normal(size=(64, *env.observation_space.shape)).astype(np.float32)
    a1, _ = model.predict(batch, deterministic=True)
    a2, _ = loaded.predict(batch, deterministic=True)
    np.testing.assert_array_equal(a1, a2)
    with torch.no_grad():
        p1 = model.policy.get_distribution(torch.as_tensor(batch)).distribution.probs
        p2 = loaded.policy.get_distribution(torch.as_tensor(batch)).distribution.probs
    np.testing.assert_allclose(p1.numpy(), p2.numpy(), rtol=0, atol=0)
    assert meta["env_meta"]["scaler"] == env.model_meta()["scaler"]
    with pytest.raises(ConfigError, match="trained on"):
        load_model(path, expect_env="greenroute/GeoManager-v0")


# --------------------------------------------------------------------------- rl:PATH
def _view(farm):
    return ServerView(
        farm.now, farm.active(), farm.queued(), farm.slots.copy(), farm.backlog_s(),
        farm.tokens_in_flight.copy(), np.ones(farm.n, bool), np.ones(farm.n, bool),
    )  # fmt: skip


@pytest.mark.realdata
def test_rl_local_policy_rebuilds_the_env_observation(trained, data_dir):
    from greenroute.policies.rl.local import load_rl_local_policy

    pol = load_rl_local_policy(trained[0])
    pol.reset("US-CAL-CISO")
    env = LoadBalancingEnv("lb-highload", "train", 300, data_dir=str(data_dir), obs="extended")
    obs, _ = env.reset(options={"offset": 0})  # the stream's start: same (empty) history
    s = env.stream
    for i in range(300):
        req = RequestView(i, float(s.arrival_s[i]), 0, 0, int(s.prompt[i]), int(s.output[i]))
        mine = pol.observation(req, _view(env.farm))
        np.testing.assert_allclose(mine, obs, rtol=1e-5, atol=1e-5)
        a = int(pol.model.predict(mine, deterministic=True)[0])
        pol.shadow.assign(a, float(s.prompt[i] + s.output[i]), pol.shadow.now)
        obs, *_ = env.step(a)


@pytest.mark.realdata
def test_rl_local_policy_in_simulator(trained, data_dir):
    import greenroute

    path = trained[0]
    res = greenroute.run("lb-highload", "local-only", local_policy=f"rl:{path}",
                         data_dir=data_dir)  # fmt: skip
    m = res.metrics
    assert m["requests_total"] == 5000 and m["requests_completed"] == 5000
    assert math.isfinite(m["e2e_mean_s"]) and m["e2e_mean_s"] > 0
    assert res.local_policy == "rl:ppo.zip"


@pytest.mark.realdata
def test_rl_local_policy_wrong_server_count(tmp_path, data_dir):
    import stable_baselines3 as sb3

    from greenroute.policies.rl.local import load_rl_local_policy
    from greenroute.policies.rl.store import write_meta

    env = LoadBalancingEnv("lb-highload", "train", data_dir=str(data_dir),
                           servers=[(5000.0, 5), (5000.0, 5)])  # fmt: skip
    model = sb3.PPO("MlpPolicy", env, seed=0, n_steps=64, batch_size=32, device="cpu")
    path = tmp_path / "two.zip"
    model.save(str(path))
    write_meta(path, {"env_id": ENV_ID, "algo": "ppo", "env_meta": env.model_meta()})
    pol = load_rl_local_policy(path)
    pol.reset("US-CAL-CISO")
    three = LoadBalancingEnv("lb-highload", "train", data_dir=str(data_dir))
    three.reset(options={"offset": 0})
    req = RequestView(0, 0.0, 0, 0, 100, 10)
    with pytest.raises(ConfigError, match="2 servers"):
        pol.pick(req, _view(three.farm))


@pytest.mark.realdata
def test_fifo_farm_and_request_kernel_agree_on_the_trace(data_dir):
    """The env's per-request farm (sim/fifo_farm.py) and the engine's compiled kernel model the
    same seed-002 servers (tokens/s, concurrency, FIFO): fed the engine's own server choices,
    the farm reproduces every start and finish time of lb-highload."""
    import greenroute
    from greenroute.sim.fifo_farm import ServerFarm

    res = greenroute.run("lb-highload", "local-only", local_policy="least-loaded",
                         record_requests=True, data_dir=data_dir)  # fmt: skip
    req = res.requests.sort_values("arrival_s", kind="stable")
    assert (req["drop_reason"] == "none").all()
    farm = ServerFarm([3000.0, 5000.0, 7000.0], [3, 5, 7])
    starts, finishes = [], []
    for row in req.itertuples():
        farm.advance(row.arrival_s)
        start, finish = farm.assign(int(row.server), row.prompt_tokens + row.output_tokens,
                                    row.arrival_s)  # fmt: skip
        starts.append(start)
        finishes.append(finish)
    assert req["server"].nunique() == 3
    np.testing.assert_allclose(starts, req["start_s"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(finishes, req["finish_s"], rtol=0, atol=1e-9)
