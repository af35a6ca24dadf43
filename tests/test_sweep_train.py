"""Training cells of a sweep: checked strictly, keyed by their manifest, deterministic by
seed on the process pool and on Ray, resumable after a SIGKILL without duplicated or lost
cells, and a failed training fails (without running) the grid cells that evaluate it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from greenroute.bench.store import ResultStore
from greenroute.bench.sweep import run_sweep
from greenroute.bench.sweep_spec import parse_spec
from greenroute.bench.sweep_train import AGENTS, CELL_FILE, TrainCell
from greenroute.core.errors import ConfigError

STEPS = 256  # PPO on lb-highload: about a second a cell once imported
PPO = {"id": "ppo", "agent": "lb-ppo", "scenario": "lb-highload", "steps": STEPS,
       "options": {"episodes": 1}}  # fmt: skip


def _spec(seeds, name: str = "train2", **extra) -> dict:
    return {"name": name, "train": [{**PPO, "seeds": seeds, **extra}]}


def _params(path: Path) -> dict:
    from greenroute.policies.rl.store import load_model

    model, _ = load_model(path)
    return {k: v.clone() for k, v in model.policy.state_dict().items()}


def _same_models(a: Path, b: Path) -> bool:
    pa, pb = _params(a), _params(b)
    return pa.keys() == pb.keys() and all(bool((pa[k] == pb[k]).all()) for k in pa)


def _models(store: Path) -> dict[int, Path]:
    runs = ResultStore(store).runs(include_failed=True)
    assert (runs["status"] == "ok").all(), runs["error"].tolist()
    return {int(s): Path(p) for s, p in zip(runs["seed"], runs["model_path"], strict=True)}


# ------------------------------------------------------------------ the spec
def test_training_cells_expand_over_seeds_with_manifest_keys():
    spec = parse_spec(_spec(2))
    assert spec.cells == () and len(spec.train) == 2
    a, b = spec.train
    assert (a.agent, a.scenario, a.seed, b.seed, a.steps) == (
        "lb-ppo", "lb-highload", 0, 1, {"steps": STEPS})  # fmt: skip
    assert (a.label, b.label) == ("ppo-seed0", "ppo-seed1")
    # seed 002's PPO hyperparameters for high load, with the user's on top
    assert a.hyperparameters["n_steps"] == 32 and a.options == {"obs": "extended", "episodes": 1}
    assert spec.keys == [a.key, b.key] and a.key != b.key
    # id and label are display names; everything that decides the model is in the key
    renamed = parse_spec({"train": [{**PPO, "id": "other", "label": "x", "seeds": 2}]})
    assert [t.key for t in renamed.train] == spec.keys
    more = parse_spec(_spec(2, hyperparameters={"n_steps": 64}))
    assert more.train[0].hyperparameters["n_steps"] == 64 and more.keys[0] != a.key
    assert TrainCell.from_dict(a.to_dict()) == a


@pytest.mark.parametrize(
    ("train", "message"),
    [
        ({**PPO, "agent": "lb-sac"},
         "unknown agent kind 'lb-sac'; valid choices: " + ", ".join(AGENTS)),
        ({**PPO, "options": {"episodes": 1, "n_envs": 2}},
         "unknown option(s) ['n_envs'] of agent 'lb-ppo'; valid choices: episodes, obs"),
        ({**PPO, "hyperparameters": {"n_stepz": 8}},
         "unknown hyperparameter(s) ['n_stepz'] of ppo; valid choices: "),
        ({**PPO, "scenario": "geo3"},
         "unknown scenario 'geo3' for agent lb-ppo; valid choices: lb-highload, lb-nominal"),
        ({**PPO, "steps": 0}, "steps of lb-ppo must be an integer >= 1, got 0"),
        ({**PPO, "agent": "teacher", "scenario": "geo3"},
         "steps of the teacher are {manager: N, worker: M}, got 256"),
        ({**PPO, "epochs": 3}, "unknown key(s) ['epochs']; valid choices: id, agent"),
    ],
)  # fmt: skip
def test_spec_errors_name_the_valid_choices(train, message):
    with pytest.raises(ConfigError) as err:
        parse_spec({"train": [train]}, where="s.yaml")
    assert str(err.value).startswith("s.yaml: train[0]: ") and message in str(err.value)


def test_grid_policies_name_trainings():
    teacher = {"id": "t", "agent": "teacher", "seeds": [3, 4],
               "steps": {"manager": 8, "worker": 0}}  # fmt: skip
    raw = {"train": [teacher, PPO], "scenarios": ["geo3"], "days": 1,
           "policies": ["local-only", {"name": "rl:train/t", "label": "expert"}]}  # fmt: skip
    spec = parse_spec(raw)
    t3, t4 = spec.train[:2]
    assert [(c.policy, c.label, c.depends_on) for c in spec.cells] == [
        ("local-only", "local-only", None),
        (f"rl:train/{t3.key}", "expert-seed3", t3.key),
        (f"rl:train/{t4.key}", "expert-seed4", t4.key),
    ]
    assert t3.model_file == "manager.zip"  # worker steps 0: the manager is the teacher
    with pytest.raises(ConfigError, match="names no training; valid choices: rl:train/ppo, "):
        parse_spec({**raw, "policies": ["rl:train/nope"]})
    with pytest.raises(ConfigError, match="held-out episodes inside its training cell"):
        parse_spec({**raw, "policies": ["rl:train/ppo"]})
    with pytest.raises(ConfigError, match="give both 'scenarios' and 'policies'"):
        parse_spec({"train": [PPO], "scenarios": ["geo3"]})


# ------------------------------------------------------------------ running
def test_two_seeds_on_the_process_pool_and_on_ray_give_the_same_models(tmp_path):
    ray = pytest.importorskip("ray")
    spec = parse_spec(_spec(2))
    local = run_sweep(spec, store=tmp_path / "local", backend="local", workers=2)
    assert (local.done, local.failed, local.workers) == (2, 0, 2)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    assert not ray.is_initialized()
    on_ray = run_sweep(spec, store=tmp_path / "ray", backend="ray", workers=2)
    assert (on_ray.done, on_ray.failed, on_ray.workers) == (2, 0, 2)
    assert not ray.is_initialized()  # the sweep started its own local Ray and stopped it
    a, b = _models(tmp_path / "local"), _models(tmp_path / "ray")
    assert sorted(a) == [0, 1] and all(_same_models(a[s], b[s]) for s in (0, 1))
    assert not _same_models(a[0], a[1])  # the seed matters
    runs = ResultStore(tmp_path / "local").runs(sweep="train2").set_index("seed")
    assert list(runs["policy"]) == ["train:lb-ppo"] * 2
    assert (runs["train_steps"] == STEPS).all() and (runs["train_wall_s"] > 0).all()
    assert runs["final_reward_per_step"].notna().all() and (runs["heldout_episodes"] == 1).all()
    cell = json.loads(runs.loc[0, "manifest"])["cell"]
    assert cell == json.loads(json.dumps(spec.train[0].config()))
    # run again: both cells skipped, models untouched
    before = {s: p.stat().st_mtime_ns for s, p in a.items()}
    again = run_sweep(spec, store=tmp_path / "local", backend="local", workers=2)
    assert (again.skipped, again.done) == (2, 0)
    assert {s: p.stat().st_mtime_ns for s, p in a.items()} == before


def test_a_model_saved_before_its_row_is_not_trained_again(tmp_path):
    spec = parse_spec(_spec([5]))
    store = tmp_path / "s"
    assert run_sweep(spec, store=store, backend="local", workers=1).done == 1
    key = spec.train[0].key
    (store / "runs" / f"{key}.parquet").unlink()  # the driver died before writing the row
    again = run_sweep(spec, store=store, backend="local", workers=1)
    assert (again.skipped, again.done) == (1, 0)
    assert list(ResultStore(store).runs()["run_id"]) == [key]
    # a model whose manifest no longer matches (edited cell.json) is trained again
    f = store / "models" / key / CELL_FILE
    doc = json.loads(f.read_text())
    doc["config"]["steps"] = {"steps": 1}
    f.write_text(json.dumps(doc))
    assert run_sweep(spec, store=store, backend="local", workers=1).done == 1


@pytest.mark.slow  # a subprocess, 6 trainings: about 30 s on a quiet machine
def test_killed_training_sweep_resumes_with_the_same_models(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(_spec(3, name="t")))
    store = tmp_path / "store"
    exe = str(Path(sys.executable).with_name("greenroute"))
    cmd = [exe, "sweep", str(path), "--local", "--workers", "1", "--out", str(store)]
    env = {**os.environ, "GREENROUTE_STORE": "off"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs_dir = store / "runs"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(runs_dir.glob("*.parquet")):
        assert proc.poll() is None, "the sweep ended before it could be killed"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    keys = parse_spec(_spec(3, name="t")).keys
    before = {p.stem for p in runs_dir.glob("*.parquet")}
    assert 1 <= len(before) < len(keys), "the kill should land mid-sweep"
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert f"{len(keys)} cells, {len(before)} already in the store" in done.stdout
    runs = ResultStore(store).runs(sweep="t", include_failed=True)
    assert sorted(runs["run_id"]) == sorted(keys) and (runs["status"] == "ok").all()
    assert sorted(p.name for p in (store / "models").iterdir()) == sorted(keys)
    # the same sweep never interrupted: identical models, seed by seed
    whole = run_sweep(parse_spec(_spec(3, name="t")), store=tmp_path / "whole",
                      backend="local", workers=1)  # fmt: skip
    assert whole.done == 3
    a, b = _models(store), _models(tmp_path / "whole")
    assert sorted(a) == [0, 1, 2] and all(_same_models(a[s], b[s]) for s in a)


def test_failed_training_fails_its_evaluations_and_not_the_others(tmp_path):
    bad = {"id": "t", "agent": "teacher", "seeds": 1, "steps": {"manager": 8, "worker": 0},
           "options": {"env_options": {"no_such_option": 1}}}  # fmt: skip
    raw = {"name": "f", "train": [bad, {**PPO, "seeds": [0]}], "scenarios": ["demo"],
           "days": 0.25, "fidelity": "fluid", "policies": ["local-only", "rl:train/t"]}  # fmt: skip
    spec = parse_spec(raw)
    summary = run_sweep(spec, store=tmp_path / "s", backend="local", workers=1)
    assert (summary.done, summary.failed) == (2, 2)  # PPO and local-only; the teacher, its eval
    runs = ResultStore(tmp_path / "s").runs(sweep="f", include_failed=True).set_index("run_id")
    teacher, ppo = spec.train
    ev = spec.cells[1]
    assert runs.loc[teacher.key, "status"] == "failed"
    assert runs.loc[teacher.key, "policy"] == "train:teacher"
    assert runs.loc[ev.key, "error"] == f"ConfigError: its training cell {teacher.key} failed"
    assert runs.loc[ppo.key, "status"] == "ok"
    assert runs.loc[spec.cells[0].key, "status"] == "ok"
