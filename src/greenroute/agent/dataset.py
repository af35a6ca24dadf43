"""Text datasets for distillation (seed 000 §3.2, Appendix B): a teacher's decisions as
``### INSTRUCTION / ### INPUT / ### RESPONSE`` prompt/response pairs.

``record_text(teacher, scenario, ...)`` runs the teacher on a scenario epoch by epoch (the
environment core the RL expert trains in, ``envs.geo_core.GeoCore``) and writes one JSONL row
per decision: per epoch the Manager of every origin in origin order (each prompt lists the
destinations the managers before it chose, ``Role.manager(o, decided=...)``), then the Worker
of every origin. Each row holds the prompt, the response (``language.render`` of the action),
the action, the teacher's own numerical action, the candidates the rules allowed, an
observation summary, the numbers of the prompt's input (``fewshot.prompt_features``, used to
pick few-shot examples), epoch and time.

**Teacher actions.** The teacher is ``rl:PATH`` (the seed's numerical expert) or any registered
geo policy (``lp-mpc``, ``local-only``, ...). Every teacher is run through its ``plan`` and the
simulator's validator, and its actions are read off the validated plan, so one mapping serves
all of them:

- Manager of origin ``o``: the destination that receives the largest share of the origin's
  expected work this epoch (``route[c, o, r]`` weighted by the forecast arrivals
  ``demand_rps[0, c, o]``; when the origin has no arrivals, the unweighted mean of the
  classes' rows), ties to the lowest index. For the RL expert this is its Manager's choice
  (its plan sends every allowed class there). A policy that splits an origin's work is
  recorded as its majority destination: the dataset holds the closest single-destination
  action. The response is ``language.effective_action`` of it (a destination the rules do
  not allow becomes the nearest allowed one, as the plan builders do).
- Worker of origin ``o``: ``0`` (defer) when the plan holds any of the origin's deferrable
  work (``hold[o] > 0``), else ``1`` (execute).

A teacher that exposes its agents' own actions (the RL expert's ``last_actions``: the Managers'
destinations and the Workers' defer flags of its last plan) is recorded with those instead:
the expert's worker may "execute" yet keep part of the work held (its ``headroom`` release),
which the plan alone would read as a deferral.

**Split.** Time-based: the epochs of the last ``val_frac`` of the run go to ``val.jsonl``,
the others to ``train.jsonl`` (no decision of a validation epoch is seen in training).
``dataset_card.json`` and ``README.md`` describe the dataset (scenario, teacher, seed, counts
per role and split, action histograms, the mapping above and a manifest with checksums).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from greenroute.agent import fewshot
from greenroute.agent.language import (
    DEFER,
    EXECUTE,
    Role,
    candidate_actions,
    effective_action,
    render,
    textualize,
)
from greenroute.core.errors import ConfigError, DataFormatError
from greenroute.core.types import Observation, Plan
from greenroute.data.paths import file_sha256

DATASET_VERSION = 1
FILES = ("train.jsonl", "val.jsonl")
ROW_KEYS = ("id", "split", "role", "origin", "epoch", "time_s", "time_utc", "prompt",
            "response", "action", "teacher_action", "candidates", "features", "obs")  # fmt: skip

TEACHER_MAPPING = (
    "Manager action = the destination receiving the largest share of the origin's expected work "
    "(plan route weighted by forecast arrivals per class), mapped onto an allowed candidate by "
    "language.effective_action; Worker action = 0 (defer) if the plan holds any of the origin's "
    "deferrable work (hold > 0), else 1 (execute). Actions are read off the validated plan."
)


def manager_action_from_plan(plan: Plan, obs: Observation, o: int) -> int:
    """The origin's majority destination (module docstring)."""
    route = np.asarray(plan.route[:, o, :], dtype=float)  # [C, R]
    w = np.asarray(obs.demand_rps[0, :, o], dtype=float)
    share = w @ route if w.sum() > 0 else route.mean(axis=0)
    return int(np.argmax(share))


def worker_action_from_plan(plan: Plan, o: int) -> int:
    hold = 0.0 if plan.hold is None else float(np.asarray(plan.hold)[o])
    return DEFER if hold > 0 else EXECUTE


def obs_summary(obs: Observation, o: int) -> dict:
    """The numbers a reader of the dataset wants beside the prompt (current epoch only)."""
    cap = np.maximum(np.asarray(obs.capacity_slots, dtype=float), 1e-9)
    return {
        "origin": obs.origins[o],
        "regions": list(obs.regions),
        "ci_g_per_kwh": _r(obs.carbon_intensity_g_per_kwh[0]),
        "price_usd_per_kwh": _r(obs.price_usd_per_kwh[0], 5),
        "util": _r(np.asarray(obs.busy_slots) / cap, 4),
        "demand_rps": _r(obs.demand_rps[0, :, o], 4),
        "pending_deferrable": float(obs.pending_deferrable[o]),
        "latency_ms": _r(1e3 * np.asarray(obs.latency_s[o]), 2),
    }


def _r(a, nd: int = 2) -> list[float]:
    return [round(float(x), nd) if math.isfinite(float(x)) else None for x in np.ravel(a)]


def decision_rows(obs: Observation, plan: Plan, memory, constraints=None,
                  actions: tuple | None = None) -> list[dict]:  # fmt: skip
    """One epoch's decisions (Managers in origin order, then Workers) as dataset rows;
    ``actions``: the teacher's own (destinations [O], defer flags [O]) when it exposes them."""
    rows: list[dict] = []
    decided: list[int] = []
    t = obs.time_utc.isoformat() if obs.time_utc is not None else None
    base = {"epoch": int(obs.epoch), "time_s": float(obs.time_s), "time_utc": t}
    for o in range(obs.n_origins):
        role = Role.manager(o, decided)
        raw = int(actions[0][o]) if actions else manager_action_from_plan(plan, obs, o)
        a = effective_action(raw, obs, role, constraints)
        prompt = textualize(obs, role, constraints)
        rows.append({**base, "role": "manager", "origin": o, "prompt": prompt,
                     "response": render(a, obs, role), "action": a, "teacher_action": raw,
                     "candidates": candidate_actions(obs, role, constraints),
                     "features": fewshot.prompt_features(prompt),
                     "obs": obs_summary(obs, o)})  # fmt: skip
        decided.append(a)
    for o in range(obs.n_origins):
        role = Role.worker(o, memory)
        a = (DEFER if actions[1][o] else EXECUTE) if actions else worker_action_from_plan(plan, o)
        prompt = textualize(obs, role, constraints)
        rows.append({**base, "role": "worker", "origin": o, "prompt": prompt,
                     "response": render(a, obs, role), "action": a, "teacher_action": a,
                     "candidates": [EXECUTE, DEFER],
                     "features": fewshot.prompt_features(prompt),
                     "obs": obs_summary(obs, o)})  # fmt: skip
    return rows


def record_text(
    teacher: str,
    out_dir: str | Path,
    scenario: str = "geo3",
    *,
    days: float | None = None,
    seed: int = 0,
    data_dir: str | None = None,
    val_frac: float = 0.2,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Run ``teacher`` on ``scenario`` and write the dataset to ``out_dir``; returns the card."""
    from greenroute.envs.geo_core import GeoCore
    from greenroute.policies.registry import make_geo_policy
    from greenroute.sim.manifest import build_manifest

    if not 0.0 <= val_frac < 1.0:
        raise ConfigError(f"--val-frac must be in [0, 1), got {val_frac}")
    out = Path(out_dir)
    geo = make_geo_policy(teacher)
    core = GeoCore(scenario, days, data_dir)
    core.reset_driven_by(geo, seed)
    sim = core.sim
    n_e = core.sc.n_epochs
    n_val = math.floor(val_frac * n_e + 1e-9)
    first_val = n_e - n_val
    manifest = build_manifest(sim)
    manifest.update(policy=getattr(geo, "name", teacher), policy_options=_jsonable(
        getattr(geo, "options", {}) or {}))  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    tmp = {f: out / (f + ".tmp") for f in FILES}
    counts: Counter = Counter()
    hist: dict[str, Counter] = {"manager": Counter(), "worker": Counter()}
    n = 0
    with tmp[FILES[0]].open("w") as f_train, tmp[FILES[1]].open("w") as f_val:
        while not core.done:
            obs = core.obs
            plan = sim.validated(obs, geo.plan(obs))
            split = "val" if obs.epoch >= first_val else "train"
            acts = getattr(geo, "last_actions", None)
            rows = decision_rows(obs, plan, core.memory, getattr(obs, "constraints", None), acts)
            for row in rows:
                row = {"id": n, "split": split, **row}
                n += 1
                counts[(row["role"], split)] += 1
                hist[row["role"]][row["response"]] += 1
                (f_val if split == "val" else f_train).write(json.dumps(row) + "\n")
            core.step_plan(plan)
            if progress is not None:
                progress(obs.epoch + 1, n_e)
    for f in FILES:
        tmp[f].replace(out / f)
    card = {
        "dataset_version": DATASET_VERSION,
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "format": "text",
        "scenario": scenario,
        "teacher": teacher,
        "teacher_name": getattr(geo, "name", teacher),
        "seed": seed,
        "days": manifest.get("days"),
        "epochs": n_e,
        "val_frac": val_frac,
        "split": f"time-based: epochs >= {first_val} are validation",
        "counts": {
            f"{role}/{split}": counts[(role, split)]
            for role in ("manager", "worker")
            for split in ("train", "val")
        },
        "action_histogram": {k: dict(sorted(v.items())) for k, v in hist.items()},
        "teacher_mapping": TEACHER_MAPPING,
        "files_sha256": {f: file_sha256(out / f) for f in FILES},
        "manifest": _jsonable(manifest),
    }
    (out / "dataset_card.json").write_text(json.dumps(card, indent=2) + "\n")
    (out / "README.md").write_text(readme(card))
    return card


def readme(card: dict) -> str:
    lines = [
        f"# greenroute distillation dataset: {card['teacher']} on {card['scenario']}",
        "",
        f"Created {card['created_utc']}; seed {card['seed']}; {card['days']} days, "
        f"{card['epochs']} epochs; split {card['split']}.",
        "",
        "Rows (JSONL, one decision each): " + ", ".join(ROW_KEYS) + ".",
        "",
        "| role | train | val |",
        "|---|---|---|",
    ]
    for role in ("manager", "worker"):
        c = card["counts"]
        lines.append(f"| {role} | {c[f'{role}/train']} | {c[f'{role}/val']} |")
    lines += ["", "## Action histogram (responses)", ""]
    for role, h in card["action_histogram"].items():
        lines.append(f"- {role}: " + ", ".join(f"{k}: {v}" for k, v in h.items()))
    lines += ["", "## Teacher actions", "", card["teacher_mapping"], "", "## Files", ""]
    lines += [f"- {f}: sha256 {s}" for f, s in card["files_sha256"].items()]
    lines += ["", "The full manifest (data, scenario options, versions) is in dataset_card.json."]
    return "\n".join(lines) + "\n"


def load_rows(data_dir: str | Path, split: str, role: str | None = None) -> list[dict]:
    """The rows of ``train`` or ``val`` (of one role, when given)."""
    path = Path(data_dir) / f"{split}.jsonl"
    if not path.is_file():
        msg = "not found: record a dataset with greenroute record --format text"
        raise DataFormatError(path, msg)
    rows = []
    with path.open() as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFormatError(path, f"line {i + 1} is not JSON ({exc.msg})") from None
            missing = [k for k in ("role", "prompt", "response", "action") if k not in row]
            if missing:
                raise DataFormatError(path, f"line {i + 1} lacks {missing}")
            if role is None or row["role"] == role:
                rows.append(row)
    return rows


def read_card(data_dir: str | Path) -> dict:
    path = Path(data_dir) / "dataset_card.json"
    if not path.is_file():
        raise DataFormatError(path, "not found: is this a greenroute text dataset?")
    return json.loads(path.read_text())


def _jsonable(x):
    return json.loads(json.dumps(x, default=str))
