"""The seed-000 teacher (issue 9 section 1): action masks, reward scaling, the worker's defer
action, and a short training run that writes its curves and manifest."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json

import gymnasium as gym
import numpy as np
import pytest

import greenroute
from greenroute.core.errors import ConfigError
from greenroute.envs.geo_core import GeoCore
from greenroute.policies.rl import masks as M

FAST = {"days": 0.25}
EPOCH_S = 900.0


@pytest.fixture(scope="module")
def real_obs():
    core = GeoCore("geo3", 0.25)
    return core.reset(0)


def _tiny_obs(real_obs, **over):
    """geo3's observation with a hand-made state: 100 slots per region, interactive requests
    occupying 2 slot-s each, no deferrable demand or pool unless given."""
    n_h = real_obs.demand_rps.shape[0]
    dem = np.zeros((n_h, 2, 3))
    dem[:, 0, :] = [10.0, 15.0, 30.0]  # req/s -> 20, 30 and 60 busy slots at 2 slot-s each
    base = {
        "capacity_slots": np.full(3, 100.0),
        "slot_s_per_request": np.full((2, 3), 2.0),
        "demand_rps": dem,
        "backlog_slot_s": np.array([0.0, 10.0 * EPOCH_S, 0.0]),  # 10 busy slots carried to r1
        "pending_deferrable": np.zeros(3),
        "allowed": np.ones((2, 3, 3), dtype=bool),
        "epoch_s": EPOCH_S,
    }
    base.update(over)
    return dataclasses.replace(real_obs, **base)


def test_mask_by_hand_saturated_and_forbidden(real_obs):
    """Origin 0 (20 slots) acts first; origins 1 and 2 are assumed home (30 and 60 slots).
    Region 1: 10 backlog + 30 + 20 = 60 <= 75 -> valid; region 2: 60 + 20 = 80 > 75 ->
    saturated; region 0 is the origin's own (local-only's choice): always valid."""
    obs = _tiny_obs(real_obs)
    assert M.manager_mask(obs, 0, np.zeros(3), target=0.75).tolist() == [True, True, False]
    assert M.manager_mask(obs, 0, np.zeros(3), target=0.85).tolist() == [True, True, True]
    # what earlier managers assigned counts: 16 more slots on region 1 -> 76 > 75
    assert M.manager_mask(obs, 0, np.array([0.0, 16.0, 0.0]), 0.75).tolist() == [
        True, False, False,
    ]  # fmt: skip
    # a pool of 7,200 deferrable requests at 2 slot-s released over the 900 s epoch adds 16
    # slots: region 1 -> 10 + 30 + 20 + 16 = 76 > 75
    pooled = _tiny_obs(real_obs, pending_deferrable=np.array([16.0 * EPOCH_S / 2.0, 0, 0]))
    assert M.batch_load_slots(pooled, 0, 1) == pytest.approx(20.0 + 16.0)
    assert M.manager_mask(pooled, 0, np.zeros(3), 0.75).tolist() == [True, False, False]
    # forbidden for either class -> masked, however empty the region
    allowed = np.ones((2, 3, 3), dtype=bool)
    allowed[1, 0, 1] = False
    obs_f = _tiny_obs(real_obs, allowed=allowed, backlog_slot_s=np.zeros(3))
    assert M.manager_mask(obs_f, 0, np.zeros(3), 1.0).tolist() == [True, False, True]
    # own region forbidden: the nearest allowed region is the fallback, always valid
    allowed = np.ones((2, 3, 3), dtype=bool)
    allowed[:, 0, 0] = False
    obs_h = _tiny_obs(real_obs, allowed=allowed, backlog_slot_s=np.full(3, 99.0 * EPOCH_S))
    fb = M.fallback_destination(obs_h, 0)
    assert fb == int(np.argmin(np.where([False, True, True], real_obs.latency_s[0], np.inf)))
    mask = M.manager_mask(obs_h, 0, np.zeros(3), 0.75)
    assert mask.tolist() == [i == fb for i in range(3)]


def test_env_never_routes_to_a_masked_region_and_penalises(real_obs):
    """Over a day of random actions the destinations the env applies are always valid under
    the mask it showed, an invalid pick becomes the fallback and costs invalid_penalty."""
    env = gym.make("greenroute/GeoManager-v0", scenario="geo3", mask=True, mask_target=0.5,
                   invalid_penalty=0.25, days=0.5).unwrapped  # fmt: skip
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    n_invalid = 0
    while not env.core.done:
        mask = env.action_masks()
        obs_before = env.core.obs
        o = env._k
        a = int(rng.integers(3))
        _, r, _, _, info = env.step(a)
        applied = int(env._dest[o])
        assert mask[applied]
        if not mask[a]:
            n_invalid += 1
            assert info["invalid"]
            assert applied == M.fallback_destination(obs_before, o)
            if "terms" not in info:
                assert r == -0.25  # only the penalty on a step that simulates nothing
        else:
            assert not info["invalid"] and applied == a
    assert n_invalid > 0  # at a 50 % target some random picks are saturated
    assert env.invalid_actions == n_invalid


def test_masked_argmax_picks_most_probable_valid(monkeypatch):
    from greenroute.policies.rl import geo as G

    monkeypatch.setattr(G, "action_probabilities", lambda model, vec: np.array([0.7, 0.1, 0.2]))
    assert G.masked_argmax(None, None, np.array([False, True, True])) == 2
    assert G.masked_argmax(None, None, np.array([True, True, True])) == 0
    assert G.masked_argmax(None, None, np.array([False, True, False])) == 1


def test_reward_terms_scaled_by_hand():
    """Eq. 1 terms normalised by local-only's per-epoch scales: 90 completed of 100 expected,
    4 of 5 kg, 2 misses in 100 requests = 2 %, 5 held of 20 expected deferrable = 0.25;
    weights throughput 1, carbon 1, sla 1.0, aging 0.01 -> 0.9 - (0.8 + 2.0 + 0.0025)."""
    core = GeoCore("geo3", 0.25, reward_weights={"sla_violations": 1.0, "aging": 0.01})
    pe = {"requests": 100.0, "carbon_kg": 5.0, "deferrable": 20.0}
    t = core._terms({"completed": 90.0, "carbon_kg": 4.0, "slo_misses": 2.0, "held": 5.0}, pe)
    assert t == pytest.approx({"throughput": 0.9, "carbon": 0.8, "sla_violations": 2.0,
                               "aging": 0.25})  # fmt: skip
    assert core._eq1(t) == pytest.approx(0.9 - (0.8 + 2.0 + 0.0025), abs=1e-12)
    # per-epoch scales = local-only's run totals / epochs
    scales = {"requests_total": 960.0, "carbon_kg": 48.0, "interactive_requests": 864.0}
    pe2 = core._per_epoch(scales)
    n_e = core.sc.n_epochs
    assert n_e == 24
    assert pe2 == pytest.approx({"requests": 40.0, "carbon_kg": 2.0, "deferrable": 4.0})


def test_relative_reward_is_zero_for_local_only_actions():
    """reward="relative" subtracts local-only's eq. 1 at the same epoch: managers that keep
    their work home (workers executing) score exactly 0 every epoch, and the reference terms
    are the paper reward's terms of that run."""
    env = greenroute.envs.geo.GeoManagerEnv(scenario="geo3", reward="relative", **FAST)
    paper = greenroute.envs.geo.GeoManagerEnv(scenario="geo3", **FAST)
    env.reset(seed=1)
    paper.reset(seed=1)
    home = [0, 1, 2]
    epochs = 0
    while not env.core.done:
        for k in range(3):
            _, r, _, _, info = env.step(home[k])
            _, rp, _, _, infop = paper.step(home[k])
        assert r == 0.0
        assert info["terms"]["ref_carbon"] == pytest.approx(infop["terms"]["carbon"], rel=1e-12)
        assert rp == pytest.approx(env.core._eq1(infop["terms"]), rel=1e-12)
        epochs += 1
    assert epochs == env.core.sc.n_epochs
    with pytest.raises(ConfigError, match="reward must be one of"):
        GeoCore("geo3", 0.25, reward="delta")


def test_release_holds_by_hand(real_obs):
    """Every origin stays home (20, 30, 60 slots; r1 also carries 10): free under 0.75 is
    55, 35, 15 slots. Origin 2 executes a pool worth 30 slots (13,500 requests x 2 slot-s /
    900 s) of which 15 fit -> hold 0.5; origin 1 executes a 10-slot pool -> hold 0; origin 0
    defers -> hold 1."""
    pool = np.array([50.0, 10.0 * EPOCH_S / 2.0, 30.0 * EPOCH_S / 2.0])
    obs = _tiny_obs(real_obs, pending_deferrable=pool)
    hold = M.release_holds(obs, np.array([0, 1, 2]), np.array([True, False, False]), 0.75)
    assert hold.tolist() == pytest.approx([1.0, 0.0, 0.5])


def test_worker_defer_changes_hold_and_pools_work():
    """GeoWorker-v0: defer (0) holds the pool (hold 1), execute (1) releases it; a day of
    deferring everywhere leaves work pooled, executing leaves none beyond deadlines."""
    env = greenroute.envs.geo.GeoWorkerEnv(scenario="geo3", release="headroom", days=0.5)
    env.reset(seed=0)
    for _ in range(3 * 8):  # two hours of defer
        env.step(0)
    assert env._hold.tolist() == [1.0, 1.0, 1.0]
    _dest, hold = env._epoch_actions()
    assert hold.tolist() == [1.0, 1.0, 1.0]
    assert env.core.obs.pending_deferrable.sum() > 0
    held = env.core.obs.pending_deferrable.copy()
    for _ in range(3):
        env.step(1)
    assert env._hold.tolist() == [0.0, 0.0, 0.0]
    # released at the rate the home regions absorb: the pools shrink
    assert (env.core.obs.pending_deferrable < held).all()
    with pytest.raises(ConfigError, match="release must be one of"):
        greenroute.envs.geo.GeoWorkerEnv(scenario="geo3", release="some", **FAST)


def test_rl_policy_worker_defer_sets_plan_hold(monkeypatch, real_obs):
    from greenroute.policies.rl.features import TrendMemory
    from greenroute.policies.rl.geo import RLGeoPolicy, Worker

    class _Stub:
        def __init__(self, action):
            self.action = action

        def predict(self, vec, deterministic=True):
            return np.array(self.action), None

    w = Worker.__new__(Worker)
    w.path, w.release, w.release_target = "stub", "headroom", 0.75
    pol = RLGeoPolicy(None, w, "stub")
    pol.memory = TrendMemory(3)
    w.model = _Stub(0)  # defer
    plan = pol.plan(real_obs)
    assert plan.hold.tolist() == [1.0, 1.0, 1.0]
    assert pol.last_actions[1].tolist() == [True, True, True]
    w.model = _Stub(1)  # execute, nothing pooled at the start: nothing held
    assert pol.plan(real_obs).hold.tolist() == [0.0, 0.0, 0.0]


def test_short_teacher_training_writes_curves_and_manifest(tmp_path):
    from greenroute.bench.rl_teacher import train_teacher

    opts = {"days": 0.25, "start_days": [0.0, 1.0], "seed_pool": 1}
    hp = {"n_steps": 64, "batch_size": 32, "n_epochs": 1}
    man = train_teacher(tmp_path / "t", manager_steps=256, worker_steps=128, seed=3, n_envs=1,
                        env_options=opts, hyperparameters=hp, keep_best=2)  # fmt: skip
    for stage, steps in (("manager", 256), ("worker", 128)):
        with (tmp_path / "t" / f"{stage}_curves.csv").open() as fh:
            rows = list(csv.DictReader(fh))
        assert [int(r["timesteps"]) for r in rows] == list(range(64, steps + 1, 64))
        assert all(np.isfinite(float(r["reward_per_epoch"])) for r in rows)
        assert (tmp_path / "t" / f"{stage}_curves.png").stat().st_size > 0
    mrows = list(csv.DictReader((tmp_path / "t" / "manager_curves.csv").open()))
    # checkpoint selection: the rollout ending the best 2-rollout mean reward per epoch
    rew = [float(r["reward_per_epoch"]) for r in mrows]
    means = [(rew[i - 1] + rew[i]) / 2 for i in range(1, len(rew))]
    best = 1 + max(range(len(means)), key=lambda i: (means[i], -i))
    assert man["stages"][0]["selected_timesteps"] == int(mrows[best]["timesteps"])
    assert all(0.0 <= float(r["invalid_share"]) <= 1.0 for r in mrows)
    wrows = list(csv.DictReader((tmp_path / "t" / "worker_curves.csv").open()))
    assert all(0.0 <= float(r["defer_share"]) <= 1.0 for r in wrows)
    saved = json.loads((tmp_path / "t" / "manifest.json").read_text())
    assert saved["teacher"] == f"rl:{tmp_path / 't' / 'worker.zip'}"
    for st in saved["stages"]:
        data = (tmp_path / "t" / f"{st['name']}.zip").read_bytes()
        assert st["sha256"] == hashlib.sha256(data).hexdigest()
    assert saved["stages"][0]["env_options"]["mask"] is True
    assert saved["stages"][1]["env_options"]["release"] == "headroom"
    assert man["stages"][1]["env_options"]["manager"].endswith("manager.zip")
    # the teacher runs as a geo policy: the worker brings its masked manager
    res = greenroute.run("geo3", man["teacher"], days=0.1)
    assert res.metrics["requests_completed"] > 0
    assert res.metrics["invalid_plans"] == 0
    # its manifest reproduces it (an rl: policy records no options: it takes none)
    assert res.manifest["policy_options"] == {}
    from greenroute.sim.output import write_run

    write_run(res, tmp_path / "run")
    again = greenroute.api.run_manifest(tmp_path / "run" / "manifest.json")
    assert greenroute.api.metrics_equal(again.metrics, res.metrics, rel=0.0)
