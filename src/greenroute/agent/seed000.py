"""Seed 000's tables end to end: teacher, dataset, distilled agents, Tables 7/8/9, agreement,
Table 2.

    python -m greenroute.agent.seed000 --out runs/seed000 --data-dir ../shared/data \
        [--days 31] [--llm-days D] [--ood-days D] [--teacher rl:PATH | POLICY]
        [--model smollm2 | HF_DIR | FILE.gguf] [--lora-steps N] [--quick]

1. **Teacher** (the expert): ``--teacher rl:PATH`` (a saved ``greenroute train-teacher``
   output; its ``manifest.json`` is copied into ours) or any registered geo policy; without it
   the command trains one (``bench.rl_teacher.train_teacher``, ``--manager-steps`` and
   ``--worker-steps``) under ``OUT/teacher``.
2. **Dataset**: the teacher's decisions on geo3 (``--record-days``, from the start of the month),
   time-split (last 20 % of epochs held out), ``agent.dataset.record_text``.
3. **Agents** on ``--model``: few-shot (k examples, no training), LoRA (Table 6's adapters, at
   most ``--lora-steps`` optimiser steps per role) and LoRA+few-shot. LoRA and LoRA+few-shot
   share one training (as in ``agent.distill``, LoRA+few-shot trains on plain prompts; the two
   differ only in the prompt at decision time), so ``OUT/agents/lora`` is
   ``OUT/agents/lora_fs``'s adapters with k = 0.
4. **Agreement**: each agent against the teacher on the last ``--eval-rows`` held-out Manager
   (and Worker) decisions (``agent.policy.agreement``).
5. **Table 7** (geo3): local-only (the paper's baseline RBC), the rule-based heuristics, the
   expert over ``--days``; the agents over ``--llm-days``, beside every other controller rerun
   on that same window (per-day averages of different windows are not comparable).
   **Tables 8 and 9** (geo5, geo10, ``--ood-days``): the heuristics, the expert (a fixed-size
   RL expert refuses with its message) and the LoRA+few-shot agent (``--ood-agents all``: all
   three), constraint violations counted.
6. **Table 2**: ``agent.copilot_table2`` with ``--table2-policy`` over ``--llm-days``.

Written to ``--out``: ``tables.csv`` (every row), ``tables.md`` (ours beside the paper's),
``agreement.json``, ``table2.txt``, ``manifest.json`` (arguments, versions, git commit, the
teacher's manifest, dataset card, distill card, wall times, decision rates).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from greenroute.bench import seed000 as T
from greenroute.core.errors import ConfigError

HEURISTICS = ("lowest-carbon", "coolest", "lowest-price")
AGENTS = (("fewshot", "SmolLM2 FS"), ("lora", "SmolLM2 LoRA"), ("lora_fs", "SmolLM2 LoRA+FS"))
EPOCH_DAYS = 900.0 / 86400.0  # one 15-min epoch of the geo scenarios, in days
QUICK = {"days": 1.0, "llm_days": EPOCH_DAYS, "ood_days": EPOCH_DAYS, "record_days": 1.0,
         "lora_steps": 1, "eval_rows": 4, "k": 1, "manager_steps": 256, "worker_steps": 0,
         "retrain_steps": 0}  # fmt: skip


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m greenroute.agent.seed000",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("--out", default="runs/seed000")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--days", type=float, default=None, help="non-LLM controllers (31)")
    ap.add_argument("--llm-days", type=float, default=None, help="LLM agents on geo3 (--days)")
    ap.add_argument("--ood-days", type=float, default=None, help="geo5/geo10 (--llm-days)")
    ap.add_argument("--record-days", type=float, default=None, help="teacher dataset (7)")
    ap.add_argument("--teacher", default=None, help="rl:PATH or a geo policy; none: train one")
    ap.add_argument("--manager-steps", type=int, default=None)
    ap.add_argument("--worker-steps", type=int, default=None)
    ap.add_argument("--model", default=None, help="base model: smollm2, an HF dir or a .gguf")
    ap.add_argument(
        "--dtype",
        default="float32",
        choices=("float32", "bfloat16"),
        help="the agents' inference precision (training stays float32)",
    )
    ap.add_argument("--lora-steps", type=int, default=None, help="max optimiser steps per role")
    ap.add_argument("--lora-epochs", type=int, default=3)
    ap.add_argument("--max-train-rows", type=int, default=None, help="latest rows per role")
    ap.add_argument("--max-prompt-tokens", type=int, default=None)
    ap.add_argument("--k", type=int, default=None, help="few-shot examples (2)")
    ap.add_argument("--eval-rows", type=int, default=None, help="held-out decisions (64)")
    ap.add_argument("--heuristics", default=",".join(HEURISTICS))
    ap.add_argument("--ood-agents", default="lora_fs", choices=("lora_fs", "all", "none"))
    ap.add_argument(
        "--table2-policy", default="lp-mpc", help="lp-mpc, expert, lora_fs, none or a policy"
    )
    ap.add_argument("--retrain-steps", type=int, default=None)
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a test of the pipeline)")
    ap.add_argument(
        "--no-agents",
        action="store_true",
        help="only the non-LLM rows (local-only, heuristics, expert) and Table 2",
    )
    ap.add_argument(
        "--render-only",
        action="store_true",
        help="rewrite tables.md/csv from OUT/manifest.json (no runs)",
    )
    a = ap.parse_args(argv)
    defaults = QUICK if a.quick else {"days": 31.0, "record_days": 7.0, "lora_steps": None,
                                      "eval_rows": 64, "k": 2, "manager_steps": 600_000,
                                      "worker_steps": 120_000, "retrain_steps": 6144}  # fmt: skip
    for key, val in defaults.items():
        if getattr(a, key, None) is None:
            setattr(a, key, val)
    a.llm_days = a.days if a.llm_days is None else a.llm_days
    a.ood_days = a.llm_days if a.ood_days is None else a.ood_days
    for key in ("days", "llm_days", "ood_days", "record_days"):
        if getattr(a, key) <= 0:
            raise ConfigError(f"--{key.replace('_', '-')} must be > 0, got {getattr(a, key)}")
    return a


def resolve_teacher(a: argparse.Namespace, out: Path, log) -> tuple[str, dict | None]:
    """The teacher's policy spec and its training manifest (None for a heuristic teacher)."""
    if a.teacher is not None:
        if a.teacher.startswith("rl:"):
            path = Path(a.teacher[3:])
            if not path.is_file():
                raise ConfigError(f"--teacher {a.teacher}: no such model file")
            man = path.parent / "manifest.json"
            return a.teacher, json.loads(man.read_text()) if man.is_file() else None
        return a.teacher, None
    from greenroute.bench.rl_teacher import train_teacher

    log(f"training the teacher under {out / 'teacher'} ({a.manager_steps} + {a.worker_steps} "
        "steps)")  # fmt: skip
    man = train_teacher(out / "teacher", scenario="geo3", data_dir=a.data_dir,
                        manager_steps=a.manager_steps, worker_steps=a.worker_steps,
                        seed=a.seed)  # fmt: skip
    return man["teacher"], man


def build_agents(a, data: Path, out: Path, log) -> tuple[dict[str, Path], dict]:
    """Few-shot, LoRA and LoRA+few-shot agents under ``out/agents``; returns dirs and cards."""
    from greenroute.agent.distill import LoraSettings, distill

    agents = out / "agents"
    lora = LoraSettings(epochs=a.lora_epochs, max_steps=a.lora_steps)
    if a.max_prompt_tokens:
        lora.max_prompt_tokens = a.max_prompt_tokens
    cards = {}
    log("distilling: few-shot (no training)")
    cards["fewshot"] = distill(data, agents / "fewshot", base=a.model, method="fewshot", k=a.k,
                               lora=lora, max_val_rows=2, seed=a.seed)  # fmt: skip
    log(f"distilling: LoRA (max {a.lora_steps} steps per role, {a.lora_epochs} epochs)")
    cards["lora_fs"] = distill(
        data, agents / "lora_fs", base=a.model, method="lora+fewshot", k=a.k, lora=lora,
        max_train_rows=a.max_train_rows, max_val_rows=4, seed=a.seed,
        progress=lambda role, s, n: log(f"  {role} step {s}/{n}") if s == n or s % 10 == 0
        else None,
    )  # fmt: skip
    dst = agents / "lora"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(agents / "lora_fs" / "adapters", dst / "adapters")
    meta = json.loads((agents / "lora_fs" / "agent.json").read_text())
    meta.update(method="lora", k=0)
    (dst / "agent.json").write_text(json.dumps(meta, indent=2) + "\n")
    cards["lora"] = {"same_training_as": "lora_fs", "k": 0}
    return {name: agents / name for name, _ in AGENTS}, cards


def load_agent(path: Path, dtype: str):
    """The ``llm:PATH`` policy with the shared-prompt scorer (same choices, fewer FLOPs)."""
    import torch

    from greenroute.agent.policy import LLMGeoPolicy, load_runtime
    from greenroute.agent.prefix_scoring import PrefixSharedBackend

    rt = load_runtime(str(path))
    rt.backend = PrefixSharedBackend.wrap(rt.backend)
    if dtype == "bfloat16":
        rt.backend.model.to(torch.bfloat16)
    return LLMGeoPolicy(rt, f"llm:{path.name}", {})


def main(argv: Sequence[str] | None = None) -> int:
    from greenroute.agent.dataset import record_text
    from greenroute.agent.policy import agreement
    from greenroute.bench.rl_teacher import _git_commit, _versions

    a = _args(argv)
    out = Path(a.out)
    if a.render_only:
        return render_only(out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    logf = (out / "log.txt").open("a")

    def log(msg: str) -> None:
        line = f"[{time.perf_counter() - t_start:7.1f} s] {msg}"
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    manifest: dict = {"kind": "greenroute-seed000-tables", "args": vars(a),
                      "git_commit": _git_commit(), "versions": _versions(),
                      "wall_s": {}}  # fmt: skip
    teacher, teacher_manifest = resolve_teacher(a, out, log)
    manifest.update(teacher=teacher, teacher_manifest=teacher_manifest)
    heur = [h for h in a.heuristics.split(",") if h]
    rows: list[dict] = []
    agree: dict = {}
    raw: list[dict] = []  # (row, metrics) of every run, for the manifest and the tests

    def run(table, scenario, controller, policy, days, note=""):
        log(f"{table}: {controller} on {scenario}, {days:g} days")
        row, metrics = T.run_controller(table, scenario, controller, policy, days=days,
                                        seed=a.seed, data_dir=a.data_dir, note=note)  # fmt: skip
        rows.append(row)
        raw.append({"row": row, "metrics": metrics})
        write_outputs(out, rows, agree, a, manifest, raw, t_start)  # partial results on disk
        log(f"  -> {row['status']} {row.get('carbon_kg_per_day')} kg/day, "
            f"{row['wall_s']} s {row['note']}")  # fmt: skip
        return row

    base = [("local-only (baseline RBC)", "local-only"), *((h, h) for h in heur),
            ("expert (teacher)", teacher)]  # fmt: skip
    for controller, pol in base:
        run("table7", "geo3", controller, pol, a.days)
    # --- dataset and agents (skipped with --no-agents)
    dirs: dict[str, Path] = {}
    if not a.no_agents:
        t0 = time.perf_counter()
        data = out / "dataset"
        log(f"recording the teacher's decisions on geo3, {a.record_days:g} days")
        manifest["dataset_card"] = record_text(teacher, data, "geo3", days=a.record_days,
                                               seed=a.seed, data_dir=a.data_dir)  # fmt: skip
        manifest["wall_s"]["record"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        dirs, cards = build_agents(a, data, out, log)
        manifest["distill_cards"] = cards
        manifest["wall_s"]["distill"] = round(time.perf_counter() - t0, 1)
        llm_window = a.llm_days != a.days
        if llm_window:
            for controller, pol in base:
                run("table7-llm-window", "geo3", controller, pol, a.llm_days)
        table7_llm = "table7-llm-window" if llm_window else "table7"
        ood_agents = {"lora_fs": ["lora_fs"], "all": [n for n, _ in AGENTS], "none": []}
        ood_agents = ood_agents[a.ood_agents]
        for name, label in AGENTS:
            t0 = time.perf_counter()
            policy = load_agent(dirs[name], a.dtype)
            manifest["wall_s"][f"load_{name}"] = round(time.perf_counter() - t0, 1)
            agree[name] = {}
            for role in ("manager", "worker"):
                t0 = time.perf_counter()
                res = agreement(dirs[name], data, role, a.eval_rows, backend=policy.rt.backend)
                res["wall_s"] = round(time.perf_counter() - t0, 1)
                agree[name][role] = res
                log(f"agreement {label} {role}: {res['agreement']:.3f} on {res['rows']} held-out "
                    f"decisions ({res['decision_latency_ms']:.0f} ms/decision)")  # fmt: skip
            row = run(table7_llm, "geo3", label, policy, a.llm_days)
            row["decisions_per_s"] = _rate(policy)
            for scenario, table in (("geo5", "table8"), ("geo10", "table9")):
                if name in ood_agents:
                    ood_table = table if a.ood_days == a.days else f"{table}-llm-window"
                    run(ood_table, scenario, label, policy, a.ood_days)
    for scenario, table in (("geo5", "table8"), ("geo10", "table9")):
        for controller, pol in base:
            run(table, scenario, controller, pol, a.days)
            if a.ood_days != a.days and not a.no_agents:
                run(f"{table}-llm-window", scenario, controller, pol, a.ood_days)
    # --- Table 2
    if a.table2_policy != "none":
        t2 = {"expert": teacher}.get(a.table2_policy, a.table2_policy)
        if t2 == "lora_fs":
            if "lora_fs" not in dirs:
                raise ConfigError("--table2-policy lora_fs needs the agents (drop --no-agents)")
            t2 = f"llm:{dirs['lora_fs']}"
        days2 = a.llm_days if t2.startswith("llm:") else a.days
        argv2 = ["--days", str(days2), "--policy", t2, "--seed", str(a.seed),
                 "--retrain-steps", str(a.retrain_steps)]  # fmt: skip
        if a.data_dir:
            argv2 += ["--data-dir", a.data_dir]
        log(f"Table 2: copilot_table2 {' '.join(argv2)}")
        from greenroute.agent import copilot_table2

        buf = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(buf):
            copilot_table2.main(argv2)
        manifest["wall_s"]["table2"] = round(time.perf_counter() - t0, 1)
        (out / "table2.txt").write_text(buf.getvalue())
    write_outputs(out, rows, agree, a, manifest, raw, t_start)
    log(f"done: {out / 'tables.md'}")
    return 0


def render_only(out: Path) -> int:
    """Rewrite the tables from a finished (or interrupted) run's manifest."""
    path = out / "manifest.json"
    if not path.is_file():
        raise ConfigError(f"--render-only: {path} not found (run the command first)")
    man = json.loads(path.read_text())
    ag = out / "agreement.json"
    agree = json.loads(ag.read_text()) if ag.is_file() else {}
    raw = man["runs"]
    write_outputs(out, [r["row"] for r in raw], agree, argparse.Namespace(**man["args"]), man,
                  raw, None)  # fmt: skip
    print((out / "tables.md").read_text())
    return 0


def _rate(policy) -> float | None:
    s = policy.summary()
    ms = s.get("llm_decision_latency_ms")
    return round(1e3 / ms, 4) if ms else None


def write_outputs(out: Path, rows, agree, a, manifest, raw, t_start) -> None:
    T.write_csv(out / "tables.csv", rows)
    by = {}
    for r in rows:
        by.setdefault(r["table"], []).append(r)
    parts = [f"# Seed 000 tables (greenroute), seed {a.seed}, "
             f"{'real data' if a.data_dir else 'embedded signals'}", ""]  # fmt: skip
    titles = {
        "table7": f"Table 7: geo3, {a.days:g} days, per day",
        "table7-llm-window": f"Table 7, LLM window: geo3, {a.llm_days:g} days, per day",
        "table8": f"Table 8: geo5, {a.days:g} days, per day",
        "table8-llm-window": f"Table 8, LLM window: geo5, {a.ood_days:g} days, per day",
        "table9": f"Table 9: geo10, {a.days:g} days, per day",
        "table9-llm-window": f"Table 9, LLM window: geo10, {a.ood_days:g} days, per day",
    }
    for key, title in titles.items():
        if key in by:
            paper = None if key.endswith("llm-window") else key
            parts.append(T.markdown(title, by[key], paper))
    parts += ["### Agreement with the teacher on held-out decisions", "",
              "| agent | manager | worker | teacher keeps it local (manager) | ms/decision |",
              "|---|---|---|---|---|"]  # fmt: skip
    for name, label in AGENTS:
        if "worker" in agree.get(name, {}):
            m, w = agree[name]["manager"], agree[name]["worker"]
            parts.append(f"| {label} | {m['agreement']:.3f} ({m['rows']}) | "
                         f"{w['agreement']:.3f} ({w['rows']}) | {m['teacher_local_share']:.3f} | "
                         f"{m['decision_latency_ms']:.0f} |")  # fmt: skip
    man = agree.get("lora_fs", {}).get("manager", {})
    acc = T.acceptance(rows, AGENTS[-1][1], man.get("agreement"), man.get("rows"),
                       man.get("teacher_local_share"))  # fmt: skip
    manifest["acceptance"] = acc
    (out / "agreement.json").write_text(json.dumps(agree, indent=2) + "\n")
    parts += ["", T.acceptance_markdown(acc)]
    if (out / "table2.txt").is_file():
        parts += ["", "### Table 2 (agent.copilot_table2)", "", "```",
                  (out / "table2.txt").read_text().rstrip(), "```"]  # fmt: skip
    (out / "tables.md").write_text("\n".join(parts) + "\n")
    manifest["runs"] = raw
    if t_start is not None:
        manifest["wall_s"]["total"] = round(time.perf_counter() - t_start, 1)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
