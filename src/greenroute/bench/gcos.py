"""``python -m greenroute.bench.gcos``: every GCOS policy on the ``gcos`` scenario (seed 003).

Fits the execution-time predictors (DiPTree p90 and a per-checkpoint mean) and trains the three
MACCS variants on the scenario's training period, then runs every policy on the evaluation
period and prints cost, carbon, energy, makespan, latency, cache hit rates and bytes moved,
with MACCS's change against each cache-oblivious baseline beside the abstract's claim.
Writes ``results.json`` and ``results.csv`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from greenroute.core.errors import GreenrouteError, UnknownNameError
from greenroute.data.paths import resolve_data_dir
from greenroute.policies.gcos.common import Weights
from greenroute.policies.gcos.maccs import MaccsCore, MaccsPolicy
from greenroute.policies.gcos.predictor import fitted_predictor
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
    ap.add_argument("--policies", default=",".join(GCOS_POLICY_NAMES))
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
    sc = get_gcos_scenario(args.scenario, **opts)
    data_dir = resolve_data_dir(args.data_dir)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    weights = Weights.of(sc)
    preds = {k: fitted_predictor(sc, k, data_dir) for k in ("diptree", "mean")}
    sim = GcosSim(sc, period="eval", data_dir=data_dir)
    print(f"scenario {sc.name}: {', '.join(sc.regions)}; {len(sim.tasks)} tasks over {sc.hours} h "
          f"from {sc.eval_start_utc:%Y-%m-%d}; signals {sim.signal_source}, workload "
          f"{sim.trace_source}; predictor backend {preds['diptree'].backend}")  # fmt: skip
    results: dict[str, dict] = {}
    train_seed = args.seed if args.train_seed is None else args.train_seed
    train_s: dict[str, float] = {}
    for name in names:
        t0 = time.perf_counter()
        run_sim = sim
        if name in HEURISTICS:
            pol = make_gcos_policy(name, preds["diptree"], weights)
        else:
            from greenroute.bench.gcos_train import train_maccs

            kind = "mean" if name == "maccs-no-diptree" else "diptree"
            migrate = name != "maccs-no-migration"
            # without migration: no migrate action and no cache-to-cache copy on a miss
            run_sc = sc if migrate else sc.with_options(peer_fetch=False)
            save = args.out / f"{name}.zip" if args.out else None
            model, train_s[name] = train_maccs(run_sc, preds[kind], migrate=migrate,
                                               steps=args.train_steps, seed=train_seed,
                                               data_dir=data_dir, save_to=save)  # fmt: skip
            pol = MaccsPolicy(model, MaccsCore(preds[kind], weights, migrate=migrate), name)
            if not migrate:
                run_sim = GcosSim(run_sc, period="eval", data_dir=data_dir)
        t1 = time.perf_counter()
        results[name] = run_sim.run(pol) | {"eval_wall_s": time.perf_counter() - t1}
        print(f"  {name}: done in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    _print(results, train_s, sc)
    out = {"scenario": sc.name, "regions": sc.regions, "hours": sc.hours, "seed": args.seed,
           "train_steps": args.train_steps, "train_seed": train_seed,
           "train_wall_s": train_s, "results": results,
           "carbon_weight_usd_per_kg": sc.carbon_usd_per_kg,
           "predictor_backend": preds["diptree"].backend}  # fmt: skip
    if args.out:
        (args.out / "results.json").write_text(json.dumps(out, indent=2, default=str))
        keys = list(next(iter(results.values())))
        lines = ["policy," + ",".join(keys)]
        lines += [n + "," + ",".join(f"{r[k]:.6g}" for k in keys) for n, r in results.items()]
        (args.out / "results.csv").write_text("\n".join(lines) + "\n")
    return out


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


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    try:
        run(args)
    except GreenrouteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
