"""``make bench``: performance figures (not timed tests).

- request-level throughput: simulated requests per second on one core, 10 regions,
  ``lowest-carbon`` + ``least-loaded``, >= 1M requests, with the slots server model (bar:
  >= 400k req/s) and with the iteration server model (issue 8; bar: >= 100k req/s);
- peak memory of that run in a fresh process (bar: < 1 GB for 1M requests);
- wall time of a 31-day ``geo10`` run at its default (fluid) fidelity (bar: < 60 s);
- ``lp-mpc`` plan latency with 12 regions at H = 8 (bar: < 50 ms) and at its default H = 48;
- wall time of ``oracle`` (one LP over the whole run) on ``geo10``, 31 days;
- issue 7's speed figures (``bench/perf_speed.py``): geo10 from the shell with warm caches,
  the fluid engine's cost per epoch, first run with numba's cache empty and filled, and the
  Gymnasium step rates.

Each figure runs in its own subprocess so numba compilation, caches and peak RSS of one do
not leak into another. ``--json`` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import pandas as pd

BENCH_REGIONS = (
    "DE-LU",
    "CL-SIC",
    "US-CAL-CISO",
    "AU-NSW",
    "SG",
    "US-NY-NYIS",
    "BR-SP",
    "ZA",
    "GB",
    "KR",
)  # fmt: skip  (geo10's sites)
BENCH_RPS_PER_ORIGIN = 28.0  # interactive + deferrable = 32 req/s per origin, 320 req/s total
BENCH_DEFERRABLE_RPS = 4.0
BENCH_SERVERS = 24  # per region: ~55 % utilisation at this load
BENCH_HOURS = 1.15  # -> about 1.1M requests


def bench_scenario(hours: float = BENCH_HOURS, server_model: str = "slots"):
    from greenroute.catalog import get_region
    from greenroute.data.workload import WorkloadSpec
    from greenroute.sim.cluster import uniform_cluster
    from greenroute.sim.scenario import Scenario

    spec = WorkloadSpec(
        origins=BENCH_REGIONS,
        origin_timezones=tuple(get_region(r).timezone for r in BENCH_REGIONS),
        interactive_rps=tuple(BENCH_RPS_PER_ORIGIN for _ in BENCH_REGIONS),
        deferrable_rps=tuple(BENCH_DEFERRABLE_RPS for _ in BENCH_REGIONS),
        diurnal_flat_share=0.7,
    )
    return Scenario(
        name="bench-request-10",
        description="10 regions, request-level, ~1.1M requests",
        regions=BENCH_REGIONS,
        origins=BENCH_REGIONS,
        cluster=uniform_cluster(BENCH_REGIONS, BENCH_SERVERS),
        workload=spec,
        start_utc=pd.Timestamp("2023-07-01 12:00", tz="UTC"),
        days=hours / 24.0,
        fidelity="request",
        real_data=False,
        server_model=server_model,
    )


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def child_request(server_model: str = "slots") -> dict:
    from greenroute.policies.registry import local_policy_factory, make_geo_policy
    from greenroute.sim.engine import SimConfig, Simulation
    from greenroute.sim.prepare import prepare

    # warm up (compile or load the numba cache) on a tiny run
    warm = bench_scenario(0.02, server_model)
    Simulation(
        prepare(warm, 1), make_geo_policy("lowest-carbon"), local_policy_factory("least-loaded")
    ).run()
    rss_before = _peak_rss_mb()
    t0 = time.perf_counter()
    prep = prepare(bench_scenario(server_model=server_model), 0)
    t1 = time.perf_counter()
    c1 = time.process_time()  # CPU time too: the machine may be shared
    sim = Simulation(
        prep,
        make_geo_policy("lowest-carbon"),
        local_policy_factory("least-loaded"),
        SimConfig(seed=0),
    )
    res = sim.run()
    t2 = time.perf_counter()
    c2 = time.process_time()
    n = res.metrics["requests_total"]
    return {
        "requests": n,
        "prepare_s": t1 - t0,
        "simulate_s": t2 - t1,
        "requests_per_s_simulate": n / (t2 - t1),
        "requests_per_s_simulate_cpu": n / (c2 - c1),
        "requests_per_s_end_to_end": n / (t2 - t0),
        "peak_rss_mb": _peak_rss_mb(),
        "peak_rss_before_run_mb": rss_before,
        "ttft_mean_s": res.metrics["ttft_mean_s"],
        "ttft_p99_s": res.metrics["ttft_p99_s"],
        "server_model": res.server_model,
    }


def child_geo10() -> dict:
    from greenroute.data.paths import resolve_data_dir
    from greenroute.policies.registry import local_policy_factory, make_geo_policy
    from greenroute.scenarios import get_scenario
    from greenroute.sim.engine import SimConfig, Simulation
    from greenroute.sim.prepare import prepare

    data_dir = resolve_data_dir(os.environ.get("GREENROUTE_DATA_DIR") or _default_data())
    out = {"data": "real" if data_dir else "embedded"}
    for policy in ("local-only", "lowest-carbon"):
        t0 = time.perf_counter()
        prep = prepare(get_scenario("geo10"), 0, data_dir)
        sim = Simulation(
            prep, make_geo_policy(policy), local_policy_factory("least-loaded"), SimConfig(seed=0)
        )
        res = sim.run()
        out[f"{policy}_wall_s"] = time.perf_counter() - t0
        out[f"{policy}_carbon_kg"] = res.metrics["carbon_kg"]
    out["peak_rss_mb"] = _peak_rss_mb()
    return out


LP12_REGIONS = ("DE-LU", "CL-SIC", "US-CAL-CISO", "AU-NSW", "SG", "US-NY-NYIS", "BR-SP", "ZA",
                "GB", "KR", "JP-TK", "CA-ON")  # fmt: skip


def child_lp_latency() -> dict:
    from greenroute.bench.runner import prepare_checked, run_prepared
    from greenroute.catalog import get_region
    from greenroute.data.workload import WorkloadSpec
    from greenroute.sim.cluster import uniform_cluster
    from greenroute.sim.scenario import Scenario

    spec = WorkloadSpec(
        origins=LP12_REGIONS,
        origin_timezones=tuple(get_region(r).timezone for r in LP12_REGIONS),
        interactive_rps=tuple(280.0 for _ in LP12_REGIONS),
        deferrable_rps=tuple(40.0 for _ in LP12_REGIONS),
        diurnal_flat_share=0.7,
    )
    sc = Scenario(
        name="bench-lp-12",
        description="12 regions, 1 day, fluid",
        regions=LP12_REGIONS,
        origins=LP12_REGIONS,
        cluster=uniform_cluster(LP12_REGIONS, 200),
        workload=spec,
        start_utc=pd.Timestamp("2023-07-01", tz="UTC"),
        days=1.0,
        fidelity="fluid",
        real_data=False,
    )
    out = {}
    prep, _ = prepare_checked(sc)
    for h in (8, 48):
        res = run_prepared(prep, "lp-mpc", policy_options={"horizon": h})
        summ = res.extras["policy_summary"]
        out[f"h{h}_plan_ms_mean"] = summ["plan_ms_mean"]
        out[f"h{h}_plan_ms_p95"] = summ["plan_ms_p95"]
    return out


def child_oracle_geo10() -> dict:
    from greenroute.bench.runner import prepare_checked, run_prepared

    data_dir = _default_data_dir()
    t0 = time.perf_counter()
    prep, _ = prepare_checked("geo10", data_dir=data_dir)
    res = run_prepared(prep, "oracle")
    summ = res.extras["policy_summary"]
    return {
        "data": "real" if data_dir else "embedded",
        "wall_s": time.perf_counter() - t0,
        "solve_s": summ["solve_s"],
        "variables": summ["variables"],
        "rows": summ["rows"],
        "objective": res.metrics["objective"],
        "peak_rss_mb": _peak_rss_mb(),
    }


def _default_data_dir():
    from greenroute.data.paths import resolve_data_dir

    return resolve_data_dir(os.environ.get("GREENROUTE_DATA_DIR") or _default_data())


def _default_data():
    here = os.path.dirname(os.path.abspath(__file__))
    cand = os.path.normpath(os.path.join(here, "..", "..", "..", "..", "shared", "data"))
    return cand if os.path.isdir(cand) else None


def _json_of(cmd: list[str], env: dict, what: str) -> dict:
    """Run ``python -m ...`` and read the JSON object it prints last (one line, or indented)."""
    out = subprocess.run([sys.executable, "-m", *cmd], capture_output=True, text=True, env=env,
                         check=False)  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"{what} failed:\n{out.stderr}")
    text = out.stdout.strip()
    start = 0 if text.startswith("{") else text.rindex("\n{") + 1
    return json.loads(text[start:])


def _child(name: str) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return _json_of(["greenroute.bench.perf", "--child", name], env, f"bench child {name}")


def _unpinned(module: str, *args: str) -> dict:
    """A bench that measures scaling over both cores (no one-core affinity)."""
    env = dict(os.environ, RAY_AUTH_MODE=os.environ.get("RAY_AUTH_MODE", "disabled"))
    return _json_of([module, *args, "--json"], env, f"bench {module}")


def _speed(name: str):
    """Issue 7's speed figures (``bench/perf_speed.py``)."""

    def run() -> dict:
        from greenroute.bench import perf_speed as S

        data_dir = _default_data_dir()
        if name == "geo10_shell":
            return S.child_geo10_shell(str(data_dir) if data_dir else None)
        if name == "first_run":
            return S.child_first_run()
        return getattr(S, f"child_{name}")(data_dir)

    return run


def _extra(name: str) -> dict:
    """Forks and generator timings (``bench/perf_extra.py``)."""
    from greenroute.bench import perf_extra as X

    return getattr(X, f"child_{name}")(_default_data_dir())


CHILDREN = {
    "request": child_request,
    "request_iteration": lambda: child_request("iteration"),
    "geo10": child_geo10,
    "lp_latency": child_lp_latency,
    "oracle_geo10": child_oracle_geo10,
    "geo10_shell": _speed("geo10_shell"),
    "fluid_epoch": _speed("fluid_epoch"),
    "first_run": _speed("first_run"),
    "env_rates": _speed("env_rates"),
    "fork": lambda: _extra("fork"),
    "generators": lambda: _extra("generators"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description="greenroute performance figures")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.child:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
        print(json.dumps(CHILDREN[args.child]()))
        return
    figures = {name: _child(name) for name in CHILDREN}
    data = _default_data_dir()
    figures["sweep"] = _unpinned("greenroute.bench.perf_sweep")
    figures["partition"] = _unpinned(
        "greenroute.bench.partition_ray", "--scenario", "geo10", "--days", "0.02",
        *(["--data-dir", str(data)] if data else []),
    )  # fmt: skip
    figures["loadtest"] = _unpinned("greenroute.serve.loadtest")  # the gateway, 500 req/s x 60 s
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    r, g = figures["request"], figures["geo10"]
    ri = figures["request_iteration"]
    rows = [
        ("request-level throughput (10 regions, lowest-carbon + least-loaded)",
         f"{r['requests_per_s_simulate']:,.0f} req/s simulate "
         f"({r['requests']:,.0f} requests in {r['simulate_s']:.2f} s; end-to-end incl. workload "
         f"generation {r['requests_per_s_end_to_end']:,.0f} req/s)", ">= 400,000 req/s"),
        ("peak memory of that run (fresh process RSS)", f"{r['peak_rss_mb']:,.0f} MB",
         "< 1,024 MB"),
        ("the same with the iteration server model (continuous batching per iteration)",
         f"{ri['requests_per_s_simulate']:,.0f} req/s simulate "
         f"({ri['requests_per_s_simulate_cpu']:,.0f} per CPU second; "
         f"{ri['requests']:,.0f} requests in {ri['simulate_s']:.2f} s; "
         f"{ri['requests_per_s_simulate'] / r['requests_per_s_simulate']:.2f} x slots; "
         f"TTFT p99 {ri['ttft_p99_s']:.2f} s vs {r['ttft_p99_s']:.2f} s; "
         f"peak RSS {ri['peak_rss_mb']:,.0f} MB)", ">= 100,000 req/s"),
        (f"geo10, 31 days, fluid, {g['data']} data: local-only",
         f"{g['local-only_wall_s']:.1f} s", "< 60 s"),
        (f"geo10, 31 days, fluid, {g['data']} data: lowest-carbon",
         f"{g['lowest-carbon_wall_s']:.1f} s", "< 60 s"),
    ]  # fmt: skip
    lp, orc = figures["lp_latency"], figures["oracle_geo10"]
    rows += [
        ("lp-mpc plan time, 12 regions, H = 8 (mean / p95)",
         f"{lp['h8_plan_ms_mean']:.1f} / {lp['h8_plan_ms_p95']:.1f} ms", "< 50 ms"),
        ("lp-mpc plan time, 12 regions, H = 48 (mean / p95)",
         f"{lp['h48_plan_ms_mean']:.1f} / {lp['h48_plan_ms_p95']:.1f} ms", ""),
        (f"oracle on geo10, 31 days, {orc['data']} data (wall / LP build+solve)",
         f"{orc['wall_s']:.0f} s / {orc['solve_s']:.0f} s "
         f"({orc['variables']:,} variables, {orc['rows']:,} rows)", ""),
    ]  # fmt: skip
    from greenroute.bench.perf_extra import rows as extra_rows
    from greenroute.bench.perf_speed import rows as speed_rows

    rows += speed_rows(figures)
    rows += extra_rows(figures)
    from greenroute.bench.perf_sweep import rows as sweep_rows

    rows += sweep_rows(figures["sweep"])
    p = figures["partition"]
    rows += [
        (f"{p['scenario']} request level, {p['days']} d, partitioned by region on "
         f"{p['workers']} Ray workers (metrics equal: {p['metrics_equal']})",
         f"{p['single_s']:.1f} s one process, {p['partitioned_s']:.1f} s partitioned "
         f"(x{p['speedup']:.2f})", "identical metrics"),
        ("projected geo10, 31 days, request level: one process / 64 cores (the blocks' kernel "
         "CPU time over one block per region; the rest and the transfers serial)",
         f"{p['projected_31d_single_s'] / 60:.0f} min / "
         + (f"{p['projected_31d_64_cores_s'] / 60:.0f} min" if p["projected_31d_64_cores_s"]
            else "n/a"), ""),
    ]  # fmt: skip
    from greenroute.bench.perf_loadtest import rows as loadtest_rows

    rows += loadtest_rows(figures["loadtest"])
    width = max(len(a) for a, _, _ in rows)
    print(f"{'figure'.ljust(width)}  value  [bar]")
    for label, value, bar in rows:
        print(f"{label.ljust(width)}  {value}  [{bar}]")


if __name__ == "__main__":
    main()
