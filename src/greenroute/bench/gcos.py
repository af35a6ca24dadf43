"""``python -m greenroute.bench.gcos``: every GCOS policy on the ``gcos`` scenario (seed 003).

Fits the execution-time predictors (DiPTree: p90 for waits, leaf mean for energy; and a
per-checkpoint mean) and trains the three MACCS variants on the scenario's training period,
then runs every policy on the evaluation period and prints cost, carbon, energy, makespan,
latency, cache hit rates and bytes moved, with MACCS's change against each cache-oblivious
baseline beside the abstract's claim.
Writes ``results.json`` and ``results.csv`` to ``--out``. With ``--train-seeds N`` each MACCS
variant is trained with N PPO seeds; the command then prints the mean and 95 % interval over the
seeds and the paired (same-seed) differences of MACCS against each ablation and baseline
(:mod:`greenroute.bench.gcos_seeds`), and, with ``--out``, reuses saved models and runs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from greenroute.bench.gcos_seeds import SeedStore, format_summary, seed_summary
from greenroute.core.errors import (
    ConfigError,
    UnknownNameError,
    exits_on_user_error,
)
from greenroute.data.paths import resolve_data_dir
from greenroute.policies.gcos.common import Weights
from greenroute.policies.gcos.maccs import CANDIDATE_SETS, MaccsCore, MaccsPolicy
from greenroute.policies.gcos.predictor import ENERGY_STATS, fitted_predictor
from greenroute.policies.gcos.registry import (
    CACHE_OBLIVIOUS,
    GCOS_POLICY_NAMES,
    HEURISTICS,
    make_gcos_policy,
)
from greenroute.sim.gcos.engine import GcosSim
from greenroute.sim.gcos.scenario import get_gcos_scenario

# Seed 003's abstract: "reduces overall cost by up to 92.6 % and carbon emissions by 90.3 %";
# the abstract does not name the baseline (the paper's body is not available to us).
PAPER_COST_PCT = -92.6
PAPER_CARBON_PCT = -90.3
COLUMNS = (
    ("cost_usd", "cost $", 1.0, "{:9.2f}"),
    ("carbon_kg", "CO2 kg", 1.0, "{:8.2f}"),
    ("energy_kwh", "kWh", 1.0, "{:8.1f}"),
    ("makespan_s", "mkspan h", 1 / 3600, "{:8.2f}"),
    ("mean_start_s", "start s", 1.0, "{:8.1f}"),
    ("mean_latency_s", "lat s", 1.0, "{:8.1f}"),
    ("p95_latency_s", "p95 s", 1.0, "{:8.1f}"),
    ("model_hit_rate", "m-hit", 1.0, "{:6.3f}"),
    ("data_hit_rate", "d-hit", 1.0, "{:6.3f}"),
    ("bytes_moved_gb", "GB moved", 1.0, "{:9.0f}"),
    ("bytes_migrated_gb", "GB migr", 1.0, "{:8.0f}"),
)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m greenroute.bench.gcos", description=__doc__)
    ap.add_argument("--out", type=Path, default=None, help="folder for results.json/csv")
    ap.add_argument("--data-dir", default=None, help="real data (default $GREENROUTE_DATA_DIR)")
    ap.add_argument("--scenario", default="gcos")
    ap.add_argument("--hours", type=float, default=None, help="override the scenario's hours")
    ap.add_argument("--tasks-per-hour", type=float, default=None, help="override the load")
    ap.add_argument("--train-steps", type=int, default=60_000, help="agent transitions / model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train-seed", type=int, default=None, help="PPO seed (default --seed)")
    ap.add_argument("--train-seeds", type=int, default=1,
                    help="train every MACCS variant with this many PPO seeds (from --train-seed) "
                         "and report mean, 95 %% CI and paired differences; with --out, saved "
                         "models and runs are reused (resumable)")  # fmt: skip
    ap.add_argument("--model-cache-gb", type=float, default=None, help="override per region")
    ap.add_argument("--data-cache-gb", type=float, default=None, help="override per region")
    ap.add_argument("--policies", default=",".join(GCOS_POLICY_NAMES))
    ap.add_argument("--heuristic-predictor", default="diptree", choices=("diptree", "mean"),
                    help="execution-time estimate of the non-learned policies (swap it to "
                         "measure what DiPTree changes with the policy held fixed)")  # fmt: skip
    ap.add_argument("--maccs-candidates", default="estimate", choices=CANDIDATE_SETS,
                    help="regions a MACCS task may go to: 'estimate' = origin, agent's target, "
                         "cache-affinity region and the estimate's best region; 'cache' = "
                         "without the estimate's best (before 2026-11-26); every MACCS variant "
                         "uses the same set")  # fmt: skip
    ap.add_argument("--energy-estimate", default="mean", choices=ENERGY_STATS,
                    help="execution-time statistic for energy, cost and carbon estimates "
                         "(waits always use DiPTree's upper quantile); 'upper' = before "
                         "2026-11-26")  # fmt: skip
    return ap.parse_args(argv)


def _pct(new: float, base: float) -> float:
    return 100.0 * (new - base) / base if base else float("nan")


def run(args: argparse.Namespace) -> dict:
    names = [n.strip() for n in args.policies.split(",") if n.strip()]
    for n in names:
        if n not in GCOS_POLICY_NAMES:
            raise UnknownNameError("gcos policy", n, GCOS_POLICY_NAMES)
    opts: dict = {"seed": args.seed} | ({"hours": args.hours} if args.hours else {})
    if args.tasks_per_hour:
        opts["tasks_per_hour"] = args.tasks_per_hour
    for k in ("model_cache_gb", "data_cache_gb"):
        if getattr(args, k, None):
            opts[k] = getattr(args, k)
    if args.train_seeds < 1:
        raise ConfigError(f"--train-seeds must be at least 1, got {args.train_seeds}")
    sc = get_gcos_scenario(args.scenario, **opts)
    data_dir = resolve_data_dir(args.data_dir)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    train_seed = args.seed if args.train_seed is None else args.train_seed
    seeds = [train_seed + k for k in range(args.train_seeds)]
    config = {"scenario": sc.name, "options": {k: str(v) for k, v in sorted(opts.items())},
              "train_steps": args.train_steps, "maccs_candidates": args.maccs_candidates,
              "energy_estimate": args.energy_estimate}  # fmt: skip
    store = SeedStore(args.out, config)
    weights = Weights.of(sc)
    preds = {k: fitted_predictor(sc, k, data_dir, energy_stat=args.energy_estimate)
             for k in ("diptree", "mean")}  # fmt: skip
    sim = GcosSim(sc, period="eval", data_dir=data_dir)
    print(f"scenario {sc.name}: {', '.join(sc.regions)}; {len(sim.tasks)} tasks over {sc.hours} h "
          f"from {sc.eval_start_utc:%Y-%m-%d}; signals {sim.signal_source}, workload "
          f"{sim.trace_source}; predictor backend {preds['diptree'].backend}")  # fmt: skip
    results: dict[str, dict] = {}
    train_s: dict[str, float] = {}
    per_seed: dict[str, dict[int, dict]] = {}
    for name in names:
        t0 = time.perf_counter()
        if name in HEURISTICS:
            pol = make_gcos_policy(name, preds[args.heuristic_predictor], weights)
            results[name] = sim.run(pol) | {"eval_wall_s": time.perf_counter() - t0}
        else:
            per_seed[name] = {}
            for s in seeds:
                per_seed[name][s] = _maccs_run(
                    name, s, sc, sim, preds, weights, args, store, data_dir
                )
                if s == seeds[0]:
                    train_s[name] = per_seed[name][s]["train_wall_s"]
            results[name] = _mean_run(per_seed[name])
        print(f"  {name}: done in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    _print(results, train_s, sc)
    summary = None
    if len(seeds) > 1 and per_seed:
        base = {n: r for n, r in results.items() if n in HEURISTICS}
        summary = seed_summary(per_seed, base)
        print(f"\nMACCS variants over PPO seeds {seeds[0]}..{seeds[-1]} "
              f"({args.train_steps} transitions each):\n{format_summary(summary)}")  # fmt: skip
    out = {"scenario": sc.name, "regions": sc.regions, "hours": sc.hours, "seed": args.seed,
           "options": {k: str(v) for k, v in opts.items()},
           "train_steps": args.train_steps, "train_seed": train_seed, "train_seeds": seeds,
           "train_wall_s": train_s, "results": results, "per_seed": per_seed,
           "seed_summary": summary, "carbon_weight_usd_per_kg": sc.carbon_usd_per_kg,
           "predictor_backend": preds["diptree"].backend,
           "maccs_candidates": args.maccs_candidates,
           "energy_estimate": args.energy_estimate}  # fmt: skip
    if args.out:
        (args.out / "results.json").write_text(json.dumps(out, indent=2, default=str))
        keys = [k for k in next(iter(results.values())) if k != "train_wall_s"]
        lines = ["policy," + ",".join(keys)]
        lines += [n + "," + ",".join(f"{r.get(k, math.nan):.6g}" for k in keys)
                  for n, r in results.items()]  # fmt: skip
        (args.out / "results.csv").write_text("\n".join(lines) + "\n")
    return out


def _maccs_run(name, seed, sc, sim, preds, weights, args, store: SeedStore, data_dir) -> dict:
    """Metrics of one trained MACCS variant (``train_wall_s`` included): a saved run is reused,
    a saved model is evaluated again, otherwise the variant is trained (and saved)."""
    saved = store.load_run(name, seed)
    if saved is not None:
        return saved
    kind = "mean" if name == "maccs-no-diptree" else "diptree"
    migrate = name != "maccs-no-migration"
    # without migration: no migrate action and no cache-to-cache copy on a miss
    run_sc = sc if migrate else sc.with_options(peer_fetch=False)
    path = store.model_path(name, seed)
    if path is not None and path.is_file():
        from stable_baselines3 import PPO

        model, wall = PPO.load(path, device="cpu"), float("nan")
    else:
        from greenroute.bench.gcos_train import train_maccs

        model, wall = train_maccs(run_sc, preds[kind], migrate=migrate, steps=args.train_steps,
                                  seed=seed, data_dir=data_dir, save_to=path,
                                  candidates=args.maccs_candidates)  # fmt: skip
    # every variant: the same candidate set in training and evaluation
    core = MaccsCore(preds[kind], weights, migrate=migrate, candidates=args.maccs_candidates)
    pol = MaccsPolicy(model, core, name)
    run_sim = sim if migrate else GcosSim(run_sc, period="eval", data_dir=data_dir)
    t1 = time.perf_counter()
    run = run_sim.run(pol) | {"eval_wall_s": time.perf_counter() - t1, "train_wall_s": wall}
    store.save_run(name, seed, run)
    print(f"    {name} seed {seed}: {run['cost_usd']:.2f} USD, {run['carbon_kg']:.3f} kg",
          file=sys.stderr)  # fmt: skip
    return run


def _mean_run(runs: dict[int, dict]) -> dict:
    keys = next(iter(runs.values())).keys()
    return {k: sum(r[k] for r in runs.values()) / len(runs) for k in keys}


def _print(results: dict, train_s: dict, sc) -> None:
    head = f"{'policy':20s}" + "".join(f"{h:>10s}" for _, h, _, _ in COLUMNS)
    print(head)
    for name, r in results.items():
        cells = "".join(f"{f.format(r[k] * s):>10s}" for k, _, s, f in COLUMNS)
        print(f"{name:20s}{cells}")
    for name, s in train_s.items():
        print(f"training {name}: {s:.0f} s wall (shared 2-core machine)")
    if "maccs" not in results:
        return
    m = results["maccs"]
    print(f"\nMACCS (with DiPTree, migration) against the cache-oblivious baselines "
          f"(carbon weight {sc.carbon_usd_per_kg:g} USD/kg):")  # fmt: skip
    for base in CACHE_OBLIVIOUS:
        if base in results:
            b = results[base]
            print(f"  vs {base:14s} cost {_pct(m['cost_usd'], b['cost_usd']):+6.1f} %   "
                  f"carbon {_pct(m['carbon_kg'], b['carbon_kg']):+6.1f} %")  # fmt: skip
    print(f"  paper (abstract): cost up to {PAPER_COST_PCT:+.1f} %, carbon up to "
          f"{PAPER_CARBON_PCT:+.1f} %, against baselines the abstract does not name")  # fmt: skip


@exits_on_user_error
def main(argv: list[str] | None = None) -> int:
    run(_parse(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
