"""Sweep scaling for ``make bench``: cells per minute on 1 and 2 Ray workers on this machine,
and the projected wall time of a large sweep on a cluster, from the measured per-cell cost.

Measured grid (:data:`MEASURED`): geo3, fluid, 1 day, 4 policies (three heuristics and
lp-mpc) x 4 seeds = 16 cells, real data if ``../shared/data`` (or ``$GREENROUTE_DATA_DIR``) is
there. Each worker count gets a fresh local Ray (``num_cpus`` = workers) and a fresh store;
Ray's start and the workers' warm-up (imports, JIT compilation: one short cell per worker) are
timed apart from the sweep, so cells/min is the steady rate a long sweep sees.

Projection (:data:`PROJECTED`): the same policy mix on geo3 over 31 days, 100 seeds and 3
weight vectors (1,200 cells) on a 64-core cluster (64 Ray workers). The cost of a cell-day is
the measured CPU seconds per cell (inside the workers, so it does not depend on how busy a
shared machine is) divided by its simulated days; a cell's cost is taken as linear in its days
(the fixed part, preparing the scenario, makes this pessimistic for long cells). Cells are
independent and CPU-bound (a result is ~100 kB), so the projected wall time is the total CPU
time over the cores, and at least the longest single cell (lp-mpc), since a cell is never
split. The measured 2-worker speed-up is reported beside it: on this 2-core machine shared by
other jobs it is a lower bound of what dedicated cores give.

``python -m greenroute.bench.perf_sweep [--json]``; :func:`main` prints the figures.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

POLICIES = ("local-only", "least-loaded", "lowest-carbon", "lp-mpc")
MEASURED = {"scenarios": ["geo3"], "policies": list(POLICIES), "seeds": 4, "days": 1,
            "fidelity": "fluid", "name": "perf-sweep"}  # fmt: skip
PROJECTED = {"scenario": "geo3", "policies": len(POLICIES), "seeds": 100, "weights": 3,
             "days": 31, "cores": 64}  # fmt: skip
WORKER_COUNTS = (1, 2)


def _spec(**override):
    from greenroute.bench.perf import _default_data_dir
    from greenroute.bench.sweep_spec import parse_spec

    data_dir = _default_data_dir()
    raw = {**MEASURED, **override}
    if data_dir is not None:
        raw["data_dir"] = str(data_dir)
    return parse_spec(raw), ("real" if data_dir else "embedded")


def measure(workers: int) -> dict:
    """One sweep of the measured grid on a fresh local Ray with ``workers`` CPUs."""
    import ray

    from greenroute.bench.store import ResultStore
    from greenroute.bench.sweep import run_sweep

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    spec, data = _spec()
    t0 = time.perf_counter()
    ray.init(num_cpus=workers, include_dashboard=False, logging_level="ERROR",
             log_to_driver=False)  # fmt: skip
    init_s = time.perf_counter() - t0
    try:
        with tempfile.TemporaryDirectory(prefix="greenroute-perf-sweep-") as tmp:
            warm, _ = _spec(name="warm-up", days=0.25, seeds=list(range(90, 90 + workers)),
                            policies=["lp-mpc"])  # fmt: skip
            warm_s = run_sweep(warm, store=f"{tmp}/warm", backend="ray").wall_s
            summary = run_sweep(spec, store=tmp, backend="ray")
            runs = ResultStore(tmp).runs()
            cell_cpu = dict(runs.groupby("policy")["cpu_s"].mean())
    finally:
        ray.shutdown()
    if summary.failed or summary.done != len(spec.cells):
        raise SystemExit(f"perf sweep: {summary.failed} of {len(spec.cells)} cells failed")
    return {
        "workers": workers,
        "cells": summary.done,
        "data": data,
        "ray_init_s": init_s,
        "warm_up_s": warm_s,
        "wall_s": summary.wall_s,
        "cells_per_min": 60.0 * summary.done / summary.wall_s,
        "cell_cpu_s_by_policy": {k: float(v) for k, v in cell_cpu.items()},
    }


def project(one: dict, two: dict) -> dict:
    """The projected wall time of :data:`PROJECTED` from the measured per-cell CPU cost."""
    days = float(MEASURED["days"])
    by_policy = one["cell_cpu_s_by_policy"]
    cost_cell_day_s = sum(by_policy.values()) / len(by_policy) / days  # the grid's policy mix
    p = PROJECTED
    cells = p["policies"] * p["seeds"] * p["weights"]
    work_s = cells * p["days"] * cost_cell_day_s
    longest_cell_s = max(by_policy.values()) / days * p["days"]
    return {
        "cells": cells,
        "cost_per_cell_day_s": cost_cell_day_s,
        "speedup_2_workers": one["wall_s"] / two["wall_s"],
        "cpu_hours": work_s / 3600.0,
        "wall_s": max(work_s / p["cores"], longest_cell_s),
        "longest_cell_s": longest_cell_s,
    }


def rows(figures: dict) -> list[tuple[str, str, str]]:
    """(label, value, bar) rows in the format of :mod:`greenroute.bench.perf`."""
    m = MEASURED
    grid = (f"{m['scenarios'][0]} {m['fidelity']} {m['days']} day, {len(m['policies'])} policies "
            f"x {m['seeds']} seeds")  # fmt: skip
    out = []
    for r in figures["measured"]:
        out.append((
            f"sweep cells/min on {r['workers']} Ray worker(s) ({grid}, {r['data']} data)",
            f"{r['cells_per_min']:.1f} cells/min ({r['cells']} cells in {r['wall_s']:.1f} s; "
            f"before: Ray start {r['ray_init_s']:.1f} s, worker warm-up {r['warm_up_s']:.1f} s)",
            "",
        ))  # fmt: skip
    pj, p = figures["projection"], PROJECTED
    out.append((
        f"projected: {p['scenario']} x {p['policies']} policies x {p['seeds']} seeds x "
        f"{p['weights']} weights x {p['days']} days ({pj['cells']:,} cells) on {p['cores']} cores",
        f"{pj['wall_s'] / 60:.1f} min ({pj['cpu_hours']:.1f} CPU h at "
        f"{pj['cost_per_cell_day_s']:.2f} CPU s per cell-day; longest cell "
        f"{pj['longest_cell_s']:.0f} s; measured 2-worker speed-up here "
        f"{pj['speedup_2_workers']:.2f}x)",
        "",
    ))  # fmt: skip
    return out


def figures() -> dict:
    measured = [measure(w) for w in WORKER_COUNTS]
    return {"measured": measured, "projection": project(measured[0], measured[1])}


def main(as_json: bool = False) -> dict:
    """Measure (about a minute), print the rows (or JSON) and return the figures."""
    figs = figures()
    if as_json:
        print(json.dumps(figs, indent=2))
        return figs
    table = rows(figs)
    width = max(len(a) for a, _, _ in table)
    for label, value, bar in table:
        print(f"{label.ljust(width)}  {value}" + (f"  [{bar}]" if bar else ""))
    return figs


if __name__ == "__main__":
    main(as_json="--json" in sys.argv[1:])
