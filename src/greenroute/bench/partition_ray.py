"""Region-partitioned request-level runs on Ray (issue 12; ``sim/partition.py``).

:class:`RayPartitionExecutor` puts each block of regions in a Ray actor
(``RegionPartitionWorker``); every epoch the driver sends each actor its arrivals and the
per-server config and gathers the results, so the blocks' servers run in parallel while the geo
policy, the plan and the bookkeeping stay in the driver. Metrics equal the single-process run's
(``tests/test_partition.py``).

``python -m greenroute.bench.partition_ray [--scenario geo10] [--days 0.02] [--workers 2]
[--data-dir DIR]`` runs the same request-level run in one process and partitioned over Ray
actors, checks that the metrics are equal and prints both wall times, the speed-up and the
projected wall time of geo10 over 31 days at request level on 64 cores (from the measured
kernel CPU time of the blocks divided over one block per region, plus the rest of the
single-process time and the measured transfer time, which stay serial in the driver).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from greenroute.sim.partition import RegionPartitionWorker, warm_kernels


class _PartitionActor:
    """A Ray actor that holds one :class:`RegionPartitionWorker` (built by :meth:`init`)."""

    def __init__(self) -> None:
        self.worker: RegionPartitionWorker | None = None

    def warm(self) -> bool:
        """Load the compiled iteration kernels (numba) in this process."""
        warm_kernels()
        return True

    def init(self, cfg, block, region_start, lp_codes) -> bool:
        self.worker = RegionPartitionWorker(cfg, block, region_start, lp_codes)
        return True

    def step(self, payload):
        assert self.worker is not None
        return self.worker.step(payload)


class RayPartitionExecutor:
    """One Ray actor per block of regions (``ray.init`` must have run). The actors are started
    and their compiled kernels loaded when the executor is made, so a run times only its
    epochs."""

    def __init__(self, n_parts: int) -> None:
        import ray

        self.n_parts = int(n_parts)
        actor = ray.remote(num_cpus=1)(_PartitionActor)
        self.actors = [actor.remote() for _ in range(self.n_parts)]
        ray.get([a.warm.remote() for a in self.actors])

    def start(self, cfg, blocks, region_start, lp_codes) -> None:
        import ray

        self.active = self.actors[: len(blocks)]
        ray.get([a.init.remote(cfg, b, region_start, lp_codes)
                 for a, b in zip(self.active, blocks, strict=True)])  # fmt: skip

    def step(self, payloads):
        import ray

        return ray.get([a.step.remote(p) for a, p in zip(self.active, payloads, strict=True)])

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)
        self.actors = []


def run_once(scenario: str, days: float, seed: int, data_dir, executor=None):
    """One request-level local-only run (iteration servers); returns (metrics, wall seconds,
    simulation)."""
    from greenroute.policies.registry import local_policy_factory, make_geo_policy
    from greenroute.scenarios import get_scenario
    from greenroute.sim.engine import SimConfig, Simulation
    from greenroute.sim.prepare import prepare

    sc = get_scenario(scenario).with_options(
        fidelity="request", server_model="iteration", days=days
    )
    prep = prepare(sc, seed, data_dir)
    sim = Simulation(
        prep, make_geo_policy("local-only"), local_policy_factory("least-loaded"),
        SimConfig(seed=seed), partition_executor=executor,
    )  # fmt: skip
    t0 = time.perf_counter()
    res = sim.run()
    return res.metrics, time.perf_counter() - t0, sim


def _equal(a: dict, b: dict) -> list[str]:
    """Metrics that differ (NaN equals NaN)."""
    bad = []
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if isinstance(x, float) and isinstance(y, float) and np.isnan(x) and np.isnan(y):
            continue
        if x != y and k not in ("wall_s", "plan_s", "sim_wall_s"):
            bad.append(k)
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="geo10")
    ap.add_argument("--days", type=float, default=0.02)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=os.environ.get("GREENROUTE_DATA_DIR"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    try:
        run_once(args.scenario, 0.001, args.seed, args.data_dir)  # warm the compiled kernels
        single, t_single, _ = run_once(args.scenario, args.days, args.seed, args.data_dir)
        ex = RayPartitionExecutor(args.workers)
        part, t_part, sim = run_once(args.scenario, args.days, args.seed, args.data_dir, ex)
        ex.close()
    finally:
        ray.shutdown()
    differ = _equal(single, part)
    n_req = single["requests_total"]
    epochs = sim.sc.n_epochs
    speedup = t_single / t_part
    # projection to 31 days on many cores: the blocks' kernel work (CPU seconds measured in the
    # workers) divides over the blocks, at most one per region; the rest of the single-process
    # time (policy, dispatch, bookkeeping, merging) stays serial in the driver
    kernel_s = float(sim._stepper.backend.partitioned.worker_cpu_s.sum())
    serial_s = max(t_single - kernel_s, 0.0)
    # what the partitioned run spent beyond serial + kernel / workers: shipping arrivals and
    # results between driver and actors; it does not shrink with more workers, so it stays
    transfer_s = max(t_part - serial_s - kernel_s / args.workers, 0.0)
    scale_days = 31.0 / args.days
    n_regions = len(sim.sc.regions)
    blocks = min(64, n_regions)
    t31_single = t_single * scale_days
    t31_64 = (serial_s + transfer_s + kernel_s / blocks) * scale_days
    out = {
        "scenario": args.scenario,
        "days": args.days,
        "epochs": epochs,
        "requests": n_req,
        "workers": args.workers,
        "single_s": round(t_single, 3),
        "partitioned_s": round(t_part, 3),
        "speedup": round(speedup, 3),
        "metrics_equal": not differ,
        "differing_metrics": differ,
        "kernel_cpu_s": round(kernel_s, 3),
        "serial_s": round(serial_s, 3),
        "transfer_s": round(transfer_s, 3),
        "projected_31d_single_s": round(t31_single, 1),
        "projected_31d_64_cores_s": round(t31_64, 1),
        "projected_blocks": blocks,
    }
    if args.json:
        print(json.dumps(out))
        return
    print(
        f"{args.scenario} request level, {args.days} d ({n_req:,.0f} requests): one process "
        f"{t_single:.1f} s, {args.workers} Ray workers {t_part:.1f} s (x{speedup:.2f}); "
        f"metrics equal: {not differ}{'' if not differ else ' ' + str(differ)}"
    )
    print(
        f"kernel work in the workers {kernel_s:.1f} CPU s, the rest {serial_s:.1f} s, transfers "
        f"{transfer_s:.1f} s; projected "
        f"{args.scenario} 31 d at request level: {t31_single / 60:.0f} min in one process, "
        f"{t31_64 / 60:.0f} min on 64 cores ({blocks} blocks, one per region; the serial part "
        f"and the transfers stay); a 31-day run's request log on the driver needs more memory "
        f"than one machine has"
    )


if __name__ == "__main__":
    main()
