"""``python -m greenroute.bench.gcos_why``: why migration and DiPTree can (or cannot) matter.

With the policy held fixed (deterministic heuristics, no PPO noise), prints for a GCOS
scenario:

- the load: GPU time needed over GPU time available, and how far DiPTree's p90 is above the
  per-checkpoint mean (the only inputs where the two predictors differ);
- per policy and predictor: the objective split into egress + compute cost, weighted carbon and
  priced waiting, and the start delay split into cold start and GPU queue. Predictors:
  ``diptree`` (p90 for waits, leaf mean for energy: the default), ``p90-all`` (p90 for both,
  the behaviour before 2026-11-26) and ``mean`` (per-checkpoint mean for both);
- the most that migration can save: a migration copy pays the same egress and energy as the
  miss it replaces (egress is priced by destination), so it can save at most the cold-start
  part of the waiting cost; cache-to-cache (peer) copies change only the time and the
  source's carbon intensity.
"""

from __future__ import annotations

import argparse

from greenroute.core.errors import exits_on_user_error
from greenroute.data.paths import resolve_data_dir
from greenroute.policies.gcos.common import Weights
from greenroute.policies.gcos.greedy import GcosGreedy
from greenroute.policies.gcos.predictor import (
    fitted_predictor,
    task_energy_estimates,
    task_exec_estimates,
)
from greenroute.policies.gcos.registry import make_gcos_policy
from greenroute.sim.gcos.engine import GcosSim
from greenroute.sim.gcos.scenario import get_gcos_scenario


def _row(label: str, kind: str, m: dict, w: Weights) -> str:
    wait_h = m["mean_start_s"] * m["tasks"] / 3600.0
    cold_h = m["mean_cold_start_s"] * m["tasks"] / 3600.0
    return (
        f"  {label:16s}  {kind:7s} {m['cost_usd']:7.1f} {m['transfer_cost_usd']:8.1f}"
        f" {w.carbon_usd_per_kg * m['carbon_kg']:8.1f} {w.wait_usd_per_h * wait_h:7.1f}"
        f" {w.wait_usd_per_h * cold_h:10.1f} {m['mean_start_s']:8.1f}"
        f" {m['mean_cold_start_s']:7.1f} {m['mean_queue_s']:8.1f} {m['queued_share']:7.3f}"
    )


def why(scenario: str, data_dir, policies: list[str]) -> list[str]:
    sc = get_gcos_scenario(scenario)
    w = Weights.of(sc)
    sim = GcosSim(sc, period="eval", data_dir=data_dir)
    preds = {k: fitted_predictor(sc, k, data_dir) for k in ("diptree", "mean")}
    preds = {"diptree": preds["diptree"],
             "p90-all": fitted_predictor(sc, "diptree", data_dir, energy_stat="upper"),
             "mean": preds["mean"]}  # fmt: skip
    need_s = float(sim.tasks.exec_s.sum())
    have_s = sc.hours * 3600.0 * sc.gpus_per_region * sim.n_regions
    trace_true = sim.tasks.exec_s - sim.cat.data_gb[sim.tasks.data] * sc.process_s_per_gb
    est = {k: task_exec_estimates(sim, p) for k, p in preds.items()}
    tp = preds["diptree"].predict(sim.tasks.trace_rows)
    true_s = sim.tasks.exec_s.sum()
    energy_ratio = ", ".join(
        f"{k} {task_energy_estimates(sim, p).sum() / true_s:.3f}" for k, p in preds.items()
    )
    out = [
        f"scenario {sc.name}: {len(sim.tasks)} tasks, {sc.gpus_per_region} GPUs/region, wait "
        f"{sc.wait_usd_per_h:g} USD/task-h, carbon weight {sc.carbon_usd_per_kg:g} USD/kg",
        f"  GPU time needed / available: {need_s / have_s:.3f}",
        f"  execution-time estimate, DiPTree p90 / mean (sum over tasks): "
        f"{est['diptree'].sum() / est['mean'].sum():.3f}; p90 covers "
        f"{(trace_true <= tp).mean():.3f} of the trace parts",
        "  energy estimate / true execution time (sum over tasks): " + energy_ratio,
        "  policy            pred     cost$   egress$  carbon$   wait$  cold-wait$  start s"
        "  cold s  queue s  queued",
    ]
    for name in policies:
        for kind, pred in preds.items():
            out.append(_row(name, kind, sim.run(make_gcos_policy(name, pred, w)), w))
    # migration with the policy held fixed: greedy with and without hot-object migration, and
    # without cache-to-cache (peer) copies
    no_peer = GcosSim(sc.with_options(peer_fetch=False), period="eval", data_dir=data_dir)
    variants = (
        ("greedy+migrate", sim, GcosGreedy(preds["diptree"], w, migrate=True)),
        ("greedy no-peer", no_peer, GcosGreedy(preds["diptree"], w)),
    )
    for label, s, pol in variants:
        m = s.run(pol)
        extra = f"  GB migrated {m['bytes_migrated_gb']:.0f}, peer {m['peer_fetch_gb']:.0f}"
        out.append(_row(label, "diptree", m, w) + extra)
    out.append(
        "  cold-wait$ = the waiting cost of cold starts: the most a perfect prefetch (migration) "
        "could save; egress and copy energy are the same for a migration as for a miss"
    )
    return out


@exits_on_user_error
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m greenroute.bench.gcos_why", description=__doc__)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--scenarios", default="gcos,gcos-tight")
    ap.add_argument("--policies", default="gcos-greedy,lp,lowest-carbon")
    args = ap.parse_args(argv)
    data_dir = resolve_data_dir(args.data_dir)
    for s in args.scenarios.split(","):
        print("\n".join(why(s.strip(), data_dir, args.policies.split(","))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
