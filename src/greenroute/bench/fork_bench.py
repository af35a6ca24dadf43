"""``make bench``: counterfactual fork throughput (``sim/fork.py``).

MARLIN simulates every candidate plan of an epoch before choosing one (seed 001, Algorithm 1
lines 7 and 13); the bar is >= 2,000 one-epoch candidate evaluations per second on ``geo10``,
fluid, real data. The run is stepped to ``start_epoch`` with ``lowest-carbon`` (so queues and
held work are not empty), then candidates are evaluated from that epoch: one plan per region
sending everything there, the policy's own plan and a capacity-weighted spread, in turn.

``python -m greenroute.bench.fork_bench [--data-dir DIR] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from greenroute.core.types import N_CLASSES, Plan

START_EPOCH = 96 * 3  # three days in (15-minute epochs)
MIN_EVALS = 2_000
MIN_SECONDS = 2.0


def candidate_plans(obs) -> list[Plan]:
    """All work to one allowed region (one plan per region), plus a capacity-weighted spread."""
    n_c, n_o, n_r = obs.allowed.shape
    plans = []
    for r in range(n_r):
        route = np.zeros((n_c, n_o, n_r))
        route[:, :, r] = 1.0
        route = np.where(obs.allowed[:, :, r : r + 1], route, obs.allowed.astype(float))
        route /= route.sum(axis=2, keepdims=True)
        plans.append(Plan(route=route, hold=np.full(n_o, 0.5)))
    w = obs.allowed * np.maximum(obs.capacity_slots, 1e-9)[None, None, :]
    plans.append(Plan(route=w / w.sum(axis=2, keepdims=True), hold=np.zeros(n_o)))
    assert all(p.route.shape == (N_CLASSES, n_o, n_r) for p in plans)
    return plans


def fork_throughput(
    scenario: str = "geo10",
    data_dir: str | None = None,
    start_epoch: int = START_EPOCH,
    min_evals: int = MIN_EVALS,
    min_seconds: float = MIN_SECONDS,
    rollout_epochs: int = 4,
) -> dict:
    """One-epoch candidate evaluations per second from ``start_epoch`` of ``scenario``
    (its default fidelity), and ``rollout_epochs``-epoch rollouts per second."""
    from greenroute.data.paths import resolve_data_dir
    from greenroute.policies.registry import local_policy_factory, make_geo_policy
    from greenroute.scenarios import get_scenario
    from greenroute.sim.engine import SimConfig, Simulation
    from greenroute.sim.prepare import prepare

    ddir = resolve_data_dir(data_dir) if data_dir else None
    prep = prepare(get_scenario(scenario), 0, ddir)
    geo = make_geo_policy("lowest-carbon")
    sim = Simulation(prep, geo, local_policy_factory("least-loaded"), SimConfig(seed=0))
    sim.begin()
    start_epoch = min(start_epoch, prep.n_epochs - rollout_epochs)
    while sim.epoch < start_epoch:
        obs = sim.observe()
        sim.advance(sim.get_plan(obs), obs)
    obs = sim.observe()
    plans = [*candidate_plans(obs), sim.get_plan(obs)]
    fork = sim.fork()
    fork.evaluate(plans[0], obs)  # warm up (numba cache load)
    n, t0 = 0, time.perf_counter()
    while n < min_evals or time.perf_counter() - t0 < min_seconds:
        fork.evaluate(plans[n % len(plans)], obs)
        n += 1
    one_s = time.perf_counter() - t0
    m, t0 = 0, time.perf_counter()
    while m < max(min_evals // 10, 1) or time.perf_counter() - t0 < min_seconds:
        fork.rollout(plans[m % len(plans)], rollout_epochs, obs)
        m += 1
    roll_s = time.perf_counter() - t0
    return {
        "scenario": scenario,
        "fidelity": prep.scenario.fidelity,
        "data": "real" if ddir else "embedded",
        "start_epoch": start_epoch,
        "candidates": len(plans),
        "one_epoch_evals": n,
        "one_epoch_evals_per_s": n / one_s,
        "one_epoch_eval_us": 1e6 * one_s / n,
        "rollout_epochs": rollout_epochs,
        "rollouts_per_s": m / roll_s,
    }


def _default_data() -> str | None:
    env = os.environ.get("GREENROUTE_DATA_DIR")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    cand = os.path.normpath(os.path.join(here, "..", "..", "..", "..", "shared", "data"))
    return cand if os.path.isdir(cand) else None


def main() -> None:
    parser = argparse.ArgumentParser(description="counterfactual fork throughput")
    parser.add_argument("--scenario", default="geo10")
    parser.add_argument(
        "--data-dir", default=None, help="default: $GREENROUTE_DATA_DIR or ../shared/data"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = fork_throughput(args.scenario, args.data_dir or _default_data())
    if args.json:
        print(json.dumps(out))
        return
    print(
        f"fork, {out['scenario']} {out['fidelity']} ({out['data']} data), epoch "
        f"{out['start_epoch']}: {out['one_epoch_evals_per_s']:,.0f} one-epoch candidate "
        f"evaluations/s ({out['one_epoch_eval_us']:.0f} us each) [bar >= 2,000/s]; "
        f"{out['rollouts_per_s']:,.0f} {out['rollout_epochs']}-epoch rollouts/s"
    )


if __name__ == "__main__":
    main()
