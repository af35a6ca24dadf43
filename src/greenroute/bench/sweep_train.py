"""Training cells of a sweep: train an RL agent for one training seed, keyed by its manifest.

A spec's ``train`` key lists trainings; each expands over its training seeds into
:class:`TrainCell` s::

    train:
      - id: ppo-high                  # referenced by evaluation policies as rl:train/<id>
        agent: lb-ppo                 # lb-ppo | lb-a2c | lb-dqn | teacher
        scenario: lb-highload         # lb-*: lb-nominal | lb-highload; teacher: a geo scenario
        seeds: 5                      # training seeds: a count N (0..N-1) or a list
        steps: 400000                 # lb-*: an integer; teacher: {manager: N, worker: M}
        hyperparameters: {n_steps: 64}   # over the agent's defaults (seed 002's / SB3's)
        options: {episodes: 5}        # lb-*: obs, episodes; teacher: n_envs, env_options

A cell's :attr:`TrainCell.key` is the SHA-256 of its manifest (agent, scenario, seed, steps,
the effective hyperparameters, options, data directory); its model lives in
``MODELS/<key>/`` (``MODELS``: the store's ``models/``): ``model.zip`` (lb agents) or the
teacher's ``manager.zip`` + ``worker.zip`` + ``manifest.json``. The worker writes ``cell.json``
(the manifest and the training results) last: a cell is done when ``cell.json`` matches its
manifest and the model is there, so a killed sweep retrains only unfinished cells, and a model
trained before the driver wrote its store row is not trained again (the row is written from
``cell.json``). Training is deterministic by seed (one torch thread, fixed SB3 seed).

Results in the store row (``policy`` = ``train:<agent>``): ``model_path``, ``train_steps``,
``train_wall_s``, ``final_reward_per_step`` (mean training reward over the last 1,000 steps,
in the training reward's scale) and ``final_episode_return``; lb agents also get seed 002's
held-out evaluation (``options.episodes`` windows, as in Tables I/II):
``cumulative_reward``, ``avg_response_time_s``, ``avg_queue_len``, ``slo_violation_pct``.
The teacher is evaluated by ordinary grid cells with the policy ``rl:train/<id>``
(:mod:`greenroute.bench.sweep_spec`), which run after its training cells.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from greenroute.bench.store_records import config_hash
from greenroute.core.errors import ConfigError

LB_ENV_ID = "greenroute/LoadBalancing-v0"
LB_AGENTS = {"lb-ppo": "ppo", "lb-a2c": "a2c", "lb-dqn": "dqn"}
AGENTS = (*LB_AGENTS, "teacher")
LB_SCENARIOS = ("lb-nominal", "lb-highload")
AGENT_OPTIONS: dict[str, dict[str, Any]] = {  # each agent's options and their defaults
    **{a: {"obs": "extended", "episodes": 5} for a in LB_AGENTS},
    "teacher": {"n_envs": 1, "env_options": {}},
}
TRAIN_KEYS = ("id", "agent", "scenario", "seeds", "steps", "hyperparameters", "options", "label")
TEACHER_STEPS = ("manager", "worker")
TRAIN_POLICY_PREFIX = "rl:train/"
CELL_FILE = "cell.json"
LB_METRICS = ("cumulative_reward", "avg_response_time_s", "avg_queue_len", "slo_violation_pct")


@dataclass(frozen=True)
class TrainCell:
    """One training (one agent, one training seed). ``name`` is the spec's ``id`` and
    ``label`` its display name; neither is part of the key."""

    agent: str
    scenario: str
    seed: int
    steps: dict[str, int]
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    data_dir: str | None = None
    name: str = ""
    label: str = ""

    cell_kind = "train"  # class attribute: tells executors a training from a grid cell

    def config(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("name")
        d.pop("label")
        return {"cell_kind": "train", **d}

    @property
    def key(self) -> str:
        return config_hash(self.config())

    @property
    def model_file(self) -> str:
        if self.agent == "teacher":
            return "worker.zip" if self.steps["worker"] else "manager.zip"
        return "model.zip"

    @property
    def total_steps(self) -> int:
        return int(sum(self.steps.values()))

    def to_dict(self) -> dict[str, Any]:
        return {"cell_kind": "train", **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainCell:
        return cls(**{k: v for k, v in d.items() if k != "cell_kind"})


# ------------------------------------------------------------------ the spec's train key
def _fail(where: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message}")


def _steps(where: str, agent: str, raw: Any) -> dict[str, int]:
    def count(v: Any, what: str, minimum: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise _fail(where, f"{what} must be an integer >= {minimum}, got {v!r}")
        return v

    if agent == "teacher":
        if not isinstance(raw, dict) or set(raw) != set(TEACHER_STEPS):
            raise _fail(where, f"steps of the teacher are {{manager: N, worker: M}}, got {raw!r}")
        return {"manager": count(raw["manager"], "steps.manager", 1),
                "worker": count(raw["worker"], "steps.worker", 0)}  # fmt: skip
    return {"steps": count(raw, f"steps of {agent}", 1)}


def _hyperparameters(where: str, agent: str, scenario: str, raw: Any) -> dict[str, Any]:
    import inspect

    from greenroute.policies.rl.algos import algo_class

    raw = raw or {}
    if not isinstance(raw, dict):
        raise _fail(where, f"hyperparameters must be a mapping, got {raw!r}")
    algo = LB_AGENTS.get(agent, "ppo")
    params = inspect.signature(algo_class(algo).__init__).parameters
    fixed = ("self", "policy", "env", "seed", "device", "verbose", "tensorboard_log",
             "_init_setup_model")  # fmt: skip
    valid = sorted(p for p in params if p not in fixed)
    bad = sorted(set(raw) - set(valid))
    if bad:
        raise _fail(where, f"unknown hyperparameter(s) {bad} of {algo}; valid choices: "
                    f"{', '.join(valid)}")  # fmt: skip
    if agent in LB_AGENTS:  # seed 002's (Tables I/II) under the user's
        from greenroute.bench import load_balancing_tables as lbt

        base = lbt.SCENARIO_HYPERPARAMETERS.get((scenario, algo), lbt.HYPERPARAMETERS[algo])
        return {**base, **raw}
    return dict(raw)


def _options(where: str, agent: str, raw: Any) -> dict[str, Any]:
    raw = raw or {}
    if not isinstance(raw, dict):
        raise _fail(where, f"options must be a mapping, got {raw!r}")
    valid = AGENT_OPTIONS[agent]
    bad = sorted(set(raw) - set(valid))
    if bad:
        raise _fail(where, f"unknown option(s) {bad} of agent {agent!r}; valid choices: "
                    f"{', '.join(sorted(valid))}")  # fmt: skip
    out = {**valid, **raw}
    if agent in LB_AGENTS:
        if out["obs"] not in ("extended", "paper"):
            raise _fail(where, f"unknown obs {out['obs']!r}; valid choices: extended, paper")
        ep = out["episodes"]
        if isinstance(ep, bool) or not isinstance(ep, int) or ep < 0:
            raise _fail(where, f"options.episodes must be an integer >= 0, got {ep!r}")
    else:
        n = out["n_envs"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise _fail(where, f"options.n_envs must be an integer >= 1, got {n!r}")
        if not isinstance(out["env_options"], dict):
            raise _fail(where, f"options.env_options must be a mapping, got {out['env_options']!r}")
    return out


def parse_train(where: str, raw: Any, data_dir: str | None, seeds_of) -> list[TrainCell]:
    """The training cells of a spec's ``train`` list (``seeds_of(where, raw)`` parses seeds
    as the grid's ``seeds`` key does)."""
    from greenroute.scenarios import SCENARIOS

    items = raw if isinstance(raw, list) else [raw]
    cells: list[TrainCell] = []
    ids: set[str] = set()
    for i, item in enumerate(items):
        at = f"{where}: train[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{at}: a training is a mapping with keys {', '.join(TRAIN_KEYS)}")
        unknown = sorted(set(item) - set(TRAIN_KEYS))
        if unknown:
            raise ConfigError(f"{at}: unknown key(s) {unknown}; valid choices: "
                              f"{', '.join(TRAIN_KEYS)}")  # fmt: skip
        agent = item.get("agent")
        if agent not in AGENTS:
            raise ConfigError(f"{at}: unknown agent kind {agent!r}; valid choices: "
                              f"{', '.join(AGENTS)}")  # fmt: skip
        scenario = item.get("scenario", "geo3" if agent == "teacher" else None)
        valid_sc = LB_SCENARIOS if agent in LB_AGENTS else tuple(
            s for s in SCENARIOS.names() if s not in LB_SCENARIOS)  # fmt: skip
        if scenario not in valid_sc:
            raise ConfigError(f"{at}: unknown scenario {scenario!r} for agent {agent}; valid "
                              f"choices: {', '.join(sorted(valid_sc))}")  # fmt: skip
        tid = item.get("id", f"{agent}-{scenario}")
        if not isinstance(tid, str) or not tid or "/" in tid:
            raise ConfigError(f"{at}: id must be a non-empty name without '/', got {tid!r}")
        if tid in ids:
            raise ConfigError(f"{at}: training id {tid!r} is used twice")
        ids.add(tid)
        if "steps" not in item:
            raise ConfigError(f"{at}: 'steps' is required")
        steps = _steps(at, agent, item["steps"])
        hp = _hyperparameters(at, agent, scenario, item.get("hyperparameters"))
        opts = _options(at, agent, item.get("options"))
        label = item.get("label") or tid
        for seed in seeds_of(at, item.get("seeds", [0])):
            cells.append(TrainCell(agent=agent, scenario=scenario, seed=seed, steps=steps,
                                   hyperparameters=hp, options=opts, data_dir=data_dir,
                                   name=tid, label=f"{label}-seed{seed}"))  # fmt: skip
    return cells


# ------------------------------------------------------------------ models on disk
def model_dir(models_root: str | Path, key: str) -> Path:
    return Path(models_root) / key


def trained(cell: TrainCell, models_root: str | Path) -> dict[str, Any] | None:
    """The training results of ``cell`` if its model is saved with the same manifest."""
    d = model_dir(models_root, cell.key)
    try:
        doc = json.loads((d / CELL_FILE).read_text())
    except (OSError, ValueError):
        return None
    norm = json.loads(json.dumps(cell.config(), sort_keys=True, default=str))
    if doc.get("config") != norm or not (d / cell.model_file).is_file():
        return None
    return doc.get("result")


def resolve_model(policy: str, models_root: str | Path | None) -> str:
    """``rl:train/<key>`` -> ``rl:<models_root>/<key>/<model file>`` (other names unchanged)."""
    if not policy.startswith(TRAIN_POLICY_PREFIX):
        return policy
    if models_root is None:
        raise ConfigError(f"policy {policy!r} needs the sweep's models directory")
    key = policy[len(TRAIN_POLICY_PREFIX) :]
    d = model_dir(models_root, key)
    try:
        doc = json.loads((d / CELL_FILE).read_text())
    except (OSError, ValueError):
        raise ConfigError(f"training cell {key} has no saved model in {d}") from None
    return f"rl:{d / doc['result']['model_file']}"


# ------------------------------------------------------------------ running one cell
def _lb_heldout(cell: TrainCell, model_path: Path) -> dict[str, float]:
    """Seed 002's evaluation: mean over ``episodes`` held-out windows (Tables I/II)."""
    import numpy as np

    from greenroute.envs import lb
    from greenroute.policies.rl.store import load_model

    model, _ = load_model(model_path, expect_env=LB_ENV_ID)
    env = lb.LoadBalancingEnv(cell.scenario, "eval", data_dir=cell.data_dir,
                              obs=cell.options["obs"])  # fmt: skip
    offsets = lb.eval_offsets(env, cell.options["episodes"])
    rows = [lb.run_episode(env, lb.model_policy(model), offset=o) for o in offsets]
    out = {k: float(np.mean([r[k] for r in rows])) for k in LB_METRICS}
    out["heldout_episodes"] = float(len(rows))
    out["heldout_values"] = {k: [float(r[k]) for r in rows] for k in LB_METRICS}
    return out


def _train(cell: TrainCell, d: Path) -> dict[str, Any]:
    if cell.agent == "teacher":
        from greenroute.bench.rl_teacher import train_teacher

        m = train_teacher(
            d, scenario=cell.scenario, data_dir=cell.data_dir,
            manager_steps=cell.steps["manager"], worker_steps=cell.steps["worker"],
            seed=cell.seed, n_envs=cell.options["n_envs"],
            env_options=cell.options["env_options"] or None,
            hyperparameters=cell.hyperparameters or None,
        )  # fmt: skip
        last = m["stages"][-1]
        return {"train_wall_s": sum(s["wall_s"] for s in m["stages"]),
                "final_reward_per_step": last.get("final_reward_per_step"),
                "final_episode_return": math.nan}  # fmt: skip
    from greenroute.bench import load_balancing_tables as lbt
    from greenroute.bench.rl_train import train

    env_options = {"scenario": cell.scenario, "split": "train", "data_dir": cell.data_dir,
                   "obs": cell.options["obs"], "reward_scale": lbt.TRAIN_REWARD_SCALE}  # fmt: skip
    meta = train(LB_ENV_ID, LB_AGENTS[cell.agent], cell.steps["steps"], seed=cell.seed,
                 out=d / "model.zip", env_options=env_options,
                 hyperparameters=cell.hyperparameters)  # fmt: skip
    res = {"train_wall_s": meta["wall_s"],
           "final_reward_per_step": meta["final_reward_per_step"],
           "final_episode_return": meta["final_episode_return"]}  # fmt: skip
    if cell.options["episodes"]:
        res.update(_lb_heldout(cell, d / "model.zip"))
    return res


def train_row(cell: TrainCell, result: dict[str, Any], sweep: str | None) -> dict[str, Any]:
    """The store row of a trained cell (``policy`` = ``train:<agent>``)."""
    import pandas as pd

    from greenroute.core.version import __version__

    row: dict[str, Any] = {
        "run_id": cell.key, "source": "sweep", "sweep": sweep, "status": "ok", "error": None,
        "created_utc": pd.Timestamp.now(tz="UTC").isoformat(), "scenario": cell.scenario,
        "policy": f"train:{cell.agent}", "label": cell.label or cell.name,
        "policy_options": json.dumps(cell.hyperparameters, sort_keys=True, default=str),
        "seed": int(cell.seed), "data_dir": cell.data_dir, "greenroute_version": __version__,
        "wall_s": result.get("wall_s"), "cpu_s": result.get("cpu_s"),
        "model_path": result["model_path"], "train_steps": float(cell.total_steps),
    }  # fmt: skip
    for k, v in result.items():
        if k not in row and isinstance(v, int | float) and not isinstance(v, bool):
            row[k] = float(v)
    row["manifest"] = json.dumps({"cell": cell.config(), "key": cell.key, "result": result},
                                 sort_keys=True, default=str)  # fmt: skip
    row["notes"] = json.dumps([])
    row["traceback"] = None
    return row


def identity(cell: TrainCell) -> dict[str, Any]:
    """The identity columns of a training cell's (failure) row."""
    hp = json.dumps(cell.hyperparameters, sort_keys=True, default=str)
    return {"scenario": cell.scenario, "policy": f"train:{cell.agent}",
            "label": cell.label or cell.name, "seed": cell.seed, "data_dir": cell.data_dir,
            "policy_options": hp}  # fmt: skip


def execute_train(cell_dict: dict[str, Any], sweep: str | None, models_root: str):
    """Train one cell (in a worker) into ``models_root/<key>/``; returns its store record
    ``(row, None)``; the cell's own errors become a ``failed`` row."""
    from greenroute.bench.store import atomic_write, failure_record

    cell = TrainCell.from_dict(cell_dict)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        import torch

        torch.set_num_threads(1)
        d = model_dir(models_root, cell.key)
        d.mkdir(parents=True, exist_ok=True)
        (d / CELL_FILE).unlink(missing_ok=True)  # a partial earlier attempt is retrained
        result = _train(cell, d)
        result.update(model_file=cell.model_file, model_path=str((d / cell.model_file).resolve()),
                      wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0)  # fmt: skip
        doc = {"key": cell.key, "config": cell.config(), "result": result}
        text = json.dumps(doc, indent=1, sort_keys=True, default=str)
        atomic_write(d / CELL_FILE, lambda p: p.write_text(text))
        return train_row(cell, result, sweep), None
    except Exception as err:
        return failure_record(identity(cell), cell.key, "sweep", err, sweep), None
