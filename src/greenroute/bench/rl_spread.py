"""Train every RL agent of the paper reproductions over several training seeds; mean ± 95 % CI.

    python -m greenroute.bench.rl_spread --seeds 5 --data-dir ../shared/data \
        [--budget reduced|full] [--parts lb,teacher] [--algos ppo,a2c,dqn] [--workers 2]
        [--backend local|ray] [--address RAY] [--out runs/rl_spread]
        [--lb-steps-nominal N] [--lb-steps-high N] [--manager-steps N] [--worker-steps N]
        [--episodes 5] [--eval-days 7] [--seed-start 0]

Everything trained runs as **one sweep** (:func:`greenroute.bench.sweep.run_sweep`, store
``OUT/store``, models in ``OUT/store/models/<cell key>/``): one training cell per agent and
training seed ``seed_start .. seed_start + seeds - 1`` (:mod:`greenroute.bench.sweep_train`),
then the teacher's evaluation cells, which wait for their training cell.

* ``lb``: seed 002 Tables I and II (agents ``lb-ppo``, ``lb-a2c``, ``lb-dqn`` on
  ``lb-nominal`` and ``lb-highload``, the hyperparameters of
  :mod:`greenroute.bench.load_balancing_tables`). Each training cell also evaluates its model
  on the same ``--episodes`` held-out windows as the tables; an agent's value for a seed is
  its mean over them. The classical baselines have no training seed: they are evaluated here
  on the same windows, so their ± is over the episodes.
* ``teacher``: the seed-000 expert (manager then worker, :mod:`greenroute.bench.rl_teacher`,
  ``n_envs`` 1); grid cells ``rl:train/teacher`` evaluate each seed's model on ``geo3`` for
  ``--eval-days`` days (workload seed 0) beside ``local-only``: CO2 change against
  local-only (%) and SLO misses (%).

Budgets (timesteps): ``full`` is seed 002's 200,000 (nominal) / 400,000 (high load) and the
reported teacher's 600,000 manager / 120,000 worker steps; ``reduced`` trains Table II (high
load) only, at a tenth of seed 002's steps (40,000), and the teacher at a twentieth (30,000 /
6,000): what fitted in about 80 minutes on two cores shared by eight people (Table I then lists
the baselines only). Each ``--*-steps`` option overrides its budget (0 skips that training).
Resumable: a training cell whose model is saved under ``OUT/store/models`` with the same
manifest is skipped, and a killed run, started again, trains only what is missing.

Writes ``OUT/spread.csv`` (one row per agent x metric: n, mean, std, 95 % half-width, bounds,
the per-seed values), ``OUT/verdicts.csv`` (each agent against each classical baseline) and
``OUT/spread.txt`` (the printed tables). A headline such as "PPO beats Least Loaded" is printed
only where the 95 % interval of the difference excludes 0 (:mod:`greenroute.bench.rl_spread_stats`).
MARLIN (seed 001) learns online inside a run, not from a saved training; it is not covered.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from greenroute.bench import load_balancing_tables as lbt
from greenroute.bench.rl_spread_stats import Interval, headline, t_interval, verdict
from greenroute.core.errors import ConfigError, exits_on_user_error

BUDGETS = {
    "full": {"lb_nominal": 200_000, "lb_high": 400_000, "manager": 600_000, "worker": 120_000},
    # what fitted on 2 cores shared by 8 people (load average 15-19): Table II only
    "reduced": {"lb_nominal": 0, "lb_high": 40_000, "manager": 30_000, "worker": 6_000},
}
PARTS = ("lb", "teacher")
LB_AGENTS = lbt.ALGOS
LB_BASELINES = ("round-robin", "least-connections", "least-loaded")
LB_LOWER_IS_BETTER = {"cumulative_reward": False, "avg_response_time_s": True,
                      "avg_queue_len": True, "slo_violation_pct": True}  # fmt: skip
TEACHER_SCENARIO = "geo3"
TEACHER_METRICS = {"carbon_vs_local_pct": 2, "slo_violation_pct": 3, "carbon_kg": 0}
CSV_FIELDS = ("part", "scenario", "agent", "metric", "over", "n", "mean", "std", "ci95_half",
              "ci95_lo", "ci95_hi", "values", "steps")  # fmt: skip


def build_spec(
    seeds: list[int],
    b: dict,
    parts: list[str],
    algos: list[str],
    data_dir: str | None,
    episodes: int,
    days: float,
) -> dict | None:
    """The one sweep (training cells, then the teacher's evaluation grid) of a spread."""
    train = []
    if "lb" in parts:
        steps = {"lb-nominal": b["lb_nominal"], "lb-highload": b["lb_high"]}
        for sc in lbt.SCENARIOS:
            if steps[sc] <= 0:
                continue
            for algo in algos:
                train.append({"id": f"{algo}-{sc}", "agent": f"lb-{algo}", "scenario": sc,
                              "seeds": seeds, "steps": steps[sc],
                              "options": {"episodes": episodes}})  # fmt: skip
    raw: dict = {"name": "rl-spread"}
    if "teacher" in parts:
        train.append({"id": "teacher", "agent": "teacher", "scenario": TEACHER_SCENARIO,
                      "seeds": seeds, "steps": {"manager": b["manager"], "worker": b["worker"]},
                      "options": {"n_envs": 1}})  # fmt: skip
        pols = ["local-only", {"name": "rl:train/teacher", "label": "teacher"}]
        raw.update(scenarios=[TEACHER_SCENARIO], policies=pols, seeds=[0], days=[days])
    if data_dir is not None:
        raw["data_dir"] = str(Path(data_dir).resolve())
    if not train:
        return None  # nothing to train: seed 002's baselines only
    raw["train"] = train
    return raw


def lb_baselines(data_dir: str | None, episodes: int) -> dict[str, dict]:
    """The classical baselines on seed 002's held-out episodes (no training seed)."""
    return {sc: lbt.evaluate_scenario(sc, {}, data_dir, episodes, "extended")
            for sc in lbt.SCENARIOS}  # fmt: skip


def lb_results(train_rows, baselines: dict[str, dict], seeds: list[int]) -> list[dict]:
    """One ``results.json``-shaped dict per training seed (what :func:`summarise_lb` reads):
    the baselines' numbers and each agent's held-out means from its training cell's row."""
    out = []
    for s in seeds:
        scen = {}
        for sc in lbt.SCENARIOS:
            res = {k: v for k, v in baselines[sc].items() if k != "_episodes"}
            for algo in LB_AGENTS:
                pick = (train_rows["policy"] == f"train:lb-{algo}") & (train_rows["seed"] == s)
                r = train_rows[pick & (train_rows["scenario"] == sc)]
                if len(r):
                    res[algo] = {k: {"mean": float(r[k].iloc[0])} for k in lbt.METRICS}
            scen[sc] = {"results": res}
        out.append({"scenarios": scen})
    return out


def training_text(train_rows) -> str:
    """Per agent: training seeds, steps, wall time and final training reward (sweep rows)."""
    lines = ["Training cells (sweep): agent, scenario, seeds, steps, wall time per seed (s), "
             "final training reward per step (last 1,000 steps, training scale)"]  # fmt: skip
    for (pol, sc), g in train_rows.groupby(["policy", "scenario"], sort=True):
        walls = ", ".join(f"{w:.0f}" for w in g.sort_values("seed")["train_wall_s"])
        rew = ", ".join(f"{r:.4f}" for r in g.sort_values("seed")["final_reward_per_step"])
        lines.append(f"  {pol.removeprefix('train:'):<8} {sc:<12} seeds "
                     f"{sorted(int(x) for x in g['seed'])} {int(g['train_steps'].iloc[0]):,d} "
                     f"steps; wall {walls}; final reward {rew}")  # fmt: skip
    return "\n".join(lines)


def _row(part, scenario, agent, metric, over, iv: Interval, values, steps) -> dict:
    return {"part": part, "scenario": scenario, "agent": agent, "metric": metric, "over": over,
            "n": iv.n, "mean": iv.mean, "std": iv.std, "ci95_half": iv.half, "ci95_lo": iv.lo,
            "ci95_hi": iv.hi, "values": ";".join(f"{v:.6g}" for v in values),
            "steps": steps}  # fmt: skip


def summarise_lb(results: list[dict], b: dict) -> tuple[list[dict], list[dict], str]:
    """Spread rows, verdict rows and the printed tables from each seed's results.json."""
    rows, verdicts, texts = [], [], []
    steps = {"lb-nominal": b["lb_nominal"], "lb-highload": b["lb_high"]}
    for sc in lbt.SCENARIOS:
        res = [r["scenarios"][sc]["results"] for r in results]
        n_ep = len(res[0][LB_BASELINES[0]]["avg_response_time_s"]["episodes"])
        if any(a in res[0] for a in LB_AGENTS):
            what = (f"{len(res)} training seeds x {steps[sc]:,d} steps; agents: mean ± 95 % CI "
                    f"over training seeds (each seed's value = mean over {n_ep} held-out "
                    "episodes); baselines: over those episodes")  # fmt: skip
        else:
            what = f"no agent trained; baselines: mean ± 95 % CI over {n_ep} episodes"
        lines = [f"{lbt.SCENARIOS[sc]} ({sc}): {what}"]
        head = f"  {'Agent':<17}" + "".join(f" | {lbt.HEADS[k]:>18}" for k in lbt.METRICS)
        lines += [head, "  " + "-" * (len(head) - 2)]
        ivs: dict[str, dict[str, Interval]] = {}
        for name in (*LB_AGENTS, *lbt.BASELINE_ORDER):
            if name not in res[0]:
                continue
            ivs[name] = {}
            cells = []
            for k in lbt.METRICS:
                if name in LB_AGENTS:
                    vals = [r[name][k]["mean"] for r in res]
                    over, st = "training seeds", steps[sc]
                else:
                    vals = res[0][name][k]["episodes"]  # no training: same on every seed
                    over, st = "eval episodes", 0
                iv = t_interval(vals)
                ivs[name][k] = iv
                rows.append(_row("lb", sc, name, k, over, iv, vals, st))
                cells.append(f" | {iv.fmt(lbt.DIGITS[k]):>18}")
            lines.append(f"  {lbt.LABELS[name]:<17}" + "".join(cells))
        for a in (x for x in LB_AGENTS if x in ivs):
            for base in LB_BASELINES:
                for k in ("avg_response_time_s", "slo_violation_pct", "cumulative_reward"):
                    diff = ivs[a][k].shifted(res[0][base][k]["mean"])
                    lower = LB_LOWER_IS_BETTER[k]
                    verdicts.append({"part": "lb", "scenario": sc, "agent": a, "baseline": base,
                                     "metric": k, "n": diff.n, "diff_mean": diff.mean,
                                     "diff_lo": diff.lo, "diff_hi": diff.hi,
                                     "verdict": verdict(diff, lower)})  # fmt: skip
                    if k != "cumulative_reward" and (a, base) == ("ppo", "least-loaded"):
                        lines.append("  " + headline("PPO", "Least Loaded", lbt.HEADS[k], diff,
                                                     lower))  # fmt: skip
        texts.append("\n".join(lines))
    return rows, verdicts, "\n\n".join(texts)


def summarise_teacher(frame, b: dict, days: float) -> tuple[list[dict], list[dict], str]:
    """Spread of the seed-000 expert's geo3 metrics over training seeds (sweep store rows)."""
    base = frame[frame["label"] == "local-only"]
    if base.empty:
        raise ConfigError("the teacher sweep has no local-only cell")
    local_c = float(base["carbon_kg"].iloc[0])
    local_slo = float(base["slo_violation_pct"].iloc[0])
    agents = frame[frame["label"] != "local-only"].sort_values("label")
    vals = {
        "carbon_vs_local_pct": ((agents["carbon_kg"] / local_c - 1.0) * 100.0).tolist(),
        "slo_violation_pct": agents["slo_violation_pct"].astype(float).tolist(),
        "carbon_kg": agents["carbon_kg"].astype(float).tolist(),
    }
    steps = f"{b['manager']}+{b['worker']}"
    rows, lines = (
        [],
        [
            f"Seed-000 expert on {TEACHER_SCENARIO}, {days:g} days, workload seed 0: "
            f"{len(agents)} training seeds x ({b['manager']:,d} manager + {b['worker']:,d} worker "
            f"steps); local-only: {local_c:,.0f} kg CO2, {local_slo:.3f} % SLO misses"
        ],
    )
    ivs = {}
    for k, digits in TEACHER_METRICS.items():
        ivs[k] = iv = t_interval(vals[k])
        rows.append(_row("teacher", TEACHER_SCENARIO, "teacher", k, "training seeds", iv,
                         vals[k], steps))  # fmt: skip
        lines.append(f"  {k:<22} {iv.fmt(digits):>20}   per seed: "
                     + ", ".join(f"{v:.{digits}f}" for v in vals[k]))  # fmt: skip
    verdicts = []
    pairs = (
        ("carbon_kg", ivs["carbon_vs_local_pct"]),
        ("slo_violation_pct", ivs["slo_violation_pct"].shifted(local_slo)),
    )
    for k, diff in pairs:
        verdicts.append({"part": "teacher", "scenario": TEACHER_SCENARIO, "agent": "teacher",
                         "baseline": "local-only", "metric": k, "n": diff.n,
                         "diff_mean": diff.mean, "diff_lo": diff.lo, "diff_hi": diff.hi,
                         "verdict": verdict(diff, True)})  # fmt: skip
        lines.append("  " + headline("the expert", "local-only", k, diff, True))
    return rows, verdicts, "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m greenroute.bench.rl_spread",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("--seeds", type=int, default=5, help="training seeds (>= 2)")
    ap.add_argument("--seed-start", type=int, default=0)
    ap.add_argument("--budget", choices=tuple(BUDGETS), default="reduced")
    ap.add_argument("--lb-steps-nominal", type=int, default=None)
    ap.add_argument("--lb-steps-high", type=int, default=None)
    ap.add_argument("--manager-steps", type=int, default=None)
    ap.add_argument("--worker-steps", type=int, default=None)
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--algos", default=",".join(lbt.ALGOS), help="seed 002 agents to train")
    ap.add_argument("--workers", type=int, default=2, help="trainings in parallel")
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--eval-days", type=float, default=7.0)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default="runs/rl_spread")
    ap.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="the sweep's backend: a process pool (default) or a local Ray",
    )
    ap.add_argument("--address", default=None, help="an existing Ray cluster (with ray)")
    args = ap.parse_args(argv)
    if args.seeds < 2:
        raise ConfigError(f"--seeds must be >= 2 for a confidence interval, got {args.seeds}")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    bad = sorted(set(parts) - set(PARTS))
    if bad or not parts:
        raise ConfigError(f"unknown --parts {bad or parts}; valid choices: {', '.join(PARTS)}")
    b = dict(BUDGETS[args.budget])
    for key, opt in (("lb_nominal", args.lb_steps_nominal), ("lb_high", args.lb_steps_high),
                     ("manager", args.manager_steps), ("worker", args.worker_steps)):  # fmt: skip
        if opt is not None:
            b[key] = opt
    from greenroute.data.paths import resolve_data_dir

    d = resolve_data_dir(args.data_dir)
    data_dir = None if d is None else str(d)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    bad = sorted(set(algos) - set(LB_AGENTS))
    if bad or not algos:
        raise ConfigError(f"unknown --algos {bad or algos}; valid choices: "
                          f"{', '.join(LB_AGENTS)}")  # fmt: skip
    t0 = time.perf_counter()
    raw = build_spec(seeds, b, parts, algos, data_dir, args.episodes, args.eval_days)
    frame = None
    summary = None
    if raw is not None:
        from greenroute.bench.store import ResultStore
        from greenroute.bench.sweep import run_sweep
        from greenroute.bench.sweep_spec import parse_spec

        spec = parse_spec(raw, where="rl_spread")
        store = ResultStore(out / "store")
        summary = run_sweep(spec, store=store, backend=args.backend, address=args.address,
                            workers=args.workers)  # fmt: skip
        if summary.failures:
            key, label, err = summary.failures[0]
            raise ConfigError(f"rl_spread sweep: {len(summary.failures)} cell(s) failed, e.g. "
                              f"{label} ({key}): {err}; store {store.root}")  # fmt: skip
        frame = store.runs(sweep=spec.name)
    sweep_wall = time.perf_counter() - t0
    is_train = frame["policy"].astype(str).str.startswith("train:") if frame is not None else None
    train_rows = frame[is_train] if frame is not None else None
    rows, verdicts, texts = [], [], []
    if "lb" in parts:
        base = lb_baselines(data_dir, args.episodes)
        if train_rows is not None:
            results = lb_results(train_rows, base, seeds)
        else:  # no agent trained: the baselines only
            results = [{"scenarios": {sc: {"results": base[sc]} for sc in lbt.SCENARIOS}}]
        r, v, t = summarise_lb(results, b)
        rows += r
        verdicts += v
        texts.append(t)
    if "teacher" in parts and frame is not None:
        evals = frame[~is_train & (frame["scenario"] == TEACHER_SCENARIO)]
        r, v, t = summarise_teacher(evals, b, args.eval_days)
        rows += r
        verdicts += v
        texts.append(t)
    if train_rows is not None and len(train_rows):
        texts.append(training_text(train_rows))
    if summary is not None:
        texts.append(f"Seeds {seeds}; wall time {time.perf_counter() - t0:.0f} s; the sweep "
                     f"{summary.name!r} ({summary.total} cells: {summary.skipped} already done, "
                     f"{summary.done} run now on {summary.backend} with {summary.workers} "
                     f"workers) {sweep_wall:.0f} s; store {summary.store}")  # fmt: skip
    with (out / "spread.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        w.writeheader()
        w.writerows(rows)
    if verdicts:
        with (out / "verdicts.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(verdicts[0]))
            w.writeheader()
            w.writerows(verdicts)
    text = "\n\n".join(texts)
    (out / "spread.txt").write_text(text + "\n")
    print(text)
    return 0


# ``python -m greenroute.bench.rl_spread``: a user error (bad option, failed cells) is one line
# on stderr and its exit code, no traceback (``main`` raises, for the tests and the API)
cli = exits_on_user_error(main)


if __name__ == "__main__":
    raise SystemExit(cli())
