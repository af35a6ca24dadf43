"""MACCS (seed 003): the PettingZoo env, the shared-agent VecEnv, observation and actions."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("stable_baselines3")

from pettingzoo.test import parallel_api_test

from greenroute.envs.gcos_env import GcosParallelEnv, SharedAgentVecEnv
from greenroute.policies.gcos.common import Weights
from greenroute.policies.gcos.maccs import MaccsCore, obs_dim
from greenroute.policies.gcos.predictor import ExecPredictor
from greenroute.sim.gcos.engine import GcosSim
from greenroute.sim.gcos.scenario import get_gcos_scenario


def _env(hours: float = 0.5, migrate: bool = True) -> GcosParallelEnv:
    sc = get_gcos_scenario("gcos").with_options(hours=hours)
    sim = GcosSim(sc, period="train")
    core = MaccsCore(ExecPredictor("mean").fit(sim.trace), Weights.of(sc), migrate=migrate)
    return GcosParallelEnv(sim, core)


def test_parallel_api():
    parallel_api_test(_env(), num_cycles=50)


def test_observation_shows_cached_share_and_agent_id():
    env = _env()
    env.reset()
    sim, R = env.sim, env.sim.n_regions
    batch = sim.batch()
    o = int(sim.tasks.origin[batch[0]])
    for i in batch[sim.tasks.origin[batch] == o]:
        for key in sim.task_keys(int(i)):
            sim.cache_of(key)[4].insert(key, sim.size_gb(key))
    obs = env.core.observe()
    assert obs.shape == (R, obs_dim(R))
    np.testing.assert_array_equal(obs[:, :R], np.eye(R))
    assert obs[o, 6 * R + 4] == pytest.approx(1.0)  # all of origin o's bytes cached at 4


def test_migrate_copies_hot_objects_into_the_target():
    env = _env(hours=1.0)
    env.reset()
    sim, R = env.sim, env.sim.n_regions
    home = np.stack([np.arange(R), np.zeros(R, int)], axis=1)
    for _ in range(6):  # build a history of requests
        env.step({a: home[k] for k, a in enumerate(env.possible_agents)})
    o = int(np.bincount(sim.tasks.origin[: sim._bounds[sim.window]], minlength=R).argmax())
    hot = env.core.hot.top(o)
    assert hot
    target = (o + 1) % R
    acts = home.copy()
    acts[o] = (target, 1)
    before = len(sim.ledger.transfers)
    env.step({a: acts[k] for k, a in enumerate(env.possible_agents)})
    migs = [t for t in sim.ledger.transfers[before:] if t.reason == "migrate"]
    assert migs and all(t.dst == target for t in migs)
    assert sum(t.size_gb for t in migs) <= env.core.budget_gb + 1e-9
    assert all(sim.cached(t.key, target) or sim.cache_of(t.key)[target].evicted_gb > 0
               for t in migs)  # fmt: skip


def test_no_migration_variant_never_migrates():
    env = _env(migrate=False)
    env.reset()
    R = env.sim.n_regions
    while env.agents:
        env.step({a: np.array([(k + 1) % R, 1]) for k, a in enumerate(env.possible_agents)})
    assert env.sim.ledger.sent_gb(reason="migrate") == 0.0


@pytest.mark.slow
def test_shared_agent_vecenv_trains_deterministically():
    from stable_baselines3 import PPO

    params = []
    for _ in range(2):
        venv = SharedAgentVecEnv(_env(hours=0.25))
        model = PPO("MlpPolicy", venv, n_steps=8, batch_size=24, n_epochs=1, seed=3,
                    device="cpu", policy_kwargs=dict(net_arch=[8]))  # fmt: skip
        model.learn(total_timesteps=96)
        params.append(np.concatenate([p.detach().numpy().ravel()
                                      for p in model.policy.parameters()]))  # fmt: skip
    assert venv.num_envs == 6
    np.testing.assert_array_equal(params[0], params[1])


@pytest.mark.slow
def test_bench_command_prints_every_column_and_the_claim(tmp_path, capsys):
    from greenroute.bench.gcos import main

    rc = main(["--hours", "0.5", "--train-steps", "96", "--out", str(tmp_path),
               "--policies", "lowest-carbon,lowest-price,maccs"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    for word in ("cost $", "CO2 kg", "kWh", "mkspan h", "m-hit", "d-hit", "GB moved"):
        assert word in out
    assert "vs lowest-carbon" in out and "-92.6 %" in out and "-90.3 %" in out
    assert (tmp_path / "results.json").is_file()
    assert (tmp_path / "models" / "maccs-s0.zip").is_file()


def test_local_rewards_add_up_to_the_shared_objective():
    env = _env(hours=1.0)
    env.core.local_share = 1.0
    env.reset()
    R = env.sim.n_regions
    total = 0.0
    for w in range(8):
        acts = {a: np.array([(k + w) % R, 1]) for k, a in enumerate(env.possible_agents)}
        batch = env.sim.batch()
        n0 = len(env.sim.ledger.transfers)
        res = env.sim.step(env.core.act(np.array(list(acts.values()))))
        per = env.core.rewards(res, batch, env._migration_objective(n0))
        # each agent's own objective (times R) sums to R times the window's whole objective
        assert per.sum() == pytest.approx(R * env.core.reward(res), rel=1e-9)
        total += env.sim.ledger.sent_gb(reason="migrate")
    assert total > 0  # migrations were attributed too
    env.core.local_share = 0.0
    res = env.sim.step(env.core.act(np.zeros((R, 2), int)))
    np.testing.assert_array_equal(env.core.rewards(res, env.sim.batch(), np.zeros(R)),
                                  np.full(R, env.core.reward(res)))  # fmt: skip


def _stepped_env(windows: int) -> GcosParallelEnv:
    env = _env(hours=2.0)
    env.reset()
    R = env.sim.n_regions
    home = np.stack([np.arange(R), np.zeros(R, int)], axis=1)
    for _ in range(windows):  # a history of requests, everything kept at home
        env.step({a: home[k] for k, a in enumerate(env.possible_agents)})
    return env


def test_placement_counts_this_windows_migrations_as_present():
    """An agent that migrates its hot objects to a target must see them as present when its
    tasks are placed (the copies are already paid for): placing after ordering the migrations
    gives the same regions as placing with those objects already cached, which differs from
    placing without them in some windows (so the migrations do steer placements)."""
    R, steered = 6, 0
    for target_shift in range(1, R):
        e1, e2, e3 = _stepped_env(4), _stepped_env(4), _stepped_env(4)
        o = int(np.bincount(e1.sim.tasks.origin[e1.sim.batch()], minlength=R).argmax())
        target = (o + target_shift) % R
        acts = np.stack([np.arange(R), np.zeros(R, int)], axis=1)
        acts[o] = (target, 1)
        with_migration = e1.core.act(acts)
        assert all(m.dst == target for m in with_migration.migrations)
        caches = e2.sim.model_cache + e2.sim.data_cache
        evicted = [c.evicted_gb for c in caches]
        for m in with_migration.migrations:  # the same objects, already cached at the target
            e2.sim.cache_of(m.key)[target].insert(m.key, e2.sim.size_gb(m.key))
        if [c.evicted_gb for c in caches] != evicted:
            continue  # the copies evicted something: not the same cache state any more
        acts[o] = (target, 0)
        already_there = e2.core.act(acts)
        assert with_migration.placements == already_there.placements
        steered += e3.core.act(acts).placements != already_there.placements
    assert steered > 0


def test_estimate_candidates_place_like_greedy_and_cache_candidates_stay_in_their_set():
    """candidates="estimate" adds the estimate's best region, the lowest objective over all
    regions, so whatever the targets, MACCS places a window as gcos-greedy does on the same
    state; candidates="cache" keeps every task at its origin, its agent's target or its best
    cache-affinity region."""
    from greenroute.core.errors import UnknownNameError
    from greenroute.policies.gcos.greedy import GcosGreedy, affinity_region

    env = _stepped_env(3)
    sim, R = env.sim, env.sim.n_regions
    pred, w = env.core.predictor, env.core.weights
    acts = np.stack([(np.arange(R) + 1) % R, np.zeros(R, int)], axis=1)
    greedy = GcosGreedy(pred, w)
    greedy.reset(sim)
    est = MaccsCore(pred, w, migrate=False, candidates="estimate")
    est.reset(sim)
    assert est.act(acts).placements == greedy.decide(sim).placements
    cache = MaccsCore(pred, w, migrate=False, candidates="cache")
    cache.reset(sim)
    got = cache.act(acts).placements
    planned: set = set()
    for i, r in zip(sim.batch(), got, strict=True):
        o = int(sim.tasks.origin[i])
        assert r in {o, int(acts[o, 0]), affinity_region(sim, int(i), planned)}
        for key in sim.task_keys(int(i)):
            planned.add((key, r))
    assert got != greedy.decide(sim).placements  # the narrower set binds in this window
    with pytest.raises(UnknownNameError, match="estimate"):
        MaccsCore(pred, w, candidates="all")


def test_every_maccs_variant_trains_and_runs_with_the_chosen_candidate_set(tmp_path, monkeypatch):
    """The bench passes one --maccs-candidates to training and evaluation of every variant
    (a stub trainer records it; the stub actor keeps every task home and never migrates)."""
    import greenroute.bench.gcos as bench
    import greenroute.bench.gcos_train as train

    seen: list[tuple[str, str]] = []

    class Home:
        def predict(self, obs, deterministic=True):
            return np.stack([np.arange(len(obs)), np.zeros(len(obs), int)], axis=1), None

    def fake_train(sc, pred, *, migrate, candidates, **kw):
        seen.append(("train", candidates))
        return Home(), 0.0

    class Core(MaccsCore):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            seen.append(("eval", self.candidates))

    monkeypatch.setattr(train, "train_maccs", fake_train)
    monkeypatch.setattr(bench, "MaccsCore", Core)
    bench.main(["--hours", "0.25", "--policies", "maccs,maccs-no-migration,maccs-no-diptree",
                "--maccs-candidates", "cache", "--out", str(tmp_path)])  # fmt: skip
    assert seen == [("train", "cache"), ("eval", "cache")] * 3
    cfg = (tmp_path / "config.json").read_text()
    assert '"maccs_candidates": "cache"' in cfg and '"energy_estimate": "mean"' in cfg
