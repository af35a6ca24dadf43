"""``make bench`` figures for issue 7's speed targets (run by ``bench/perf.py``, one subprocess
each, pinned to one core):

- ``geo10`` end to end from the shell (``greenroute run --scenario geo10 --policy
  lowest-carbon --data-dir DIR --json``) with warm caches (bar: < 2 s), and with
  ``--no-cache`` (the data files parsed and the reference scales simulated again);
- the fluid engine's own cost per epoch on geo10 (observation + compiled step) and the
  policy's (``lowest-carbon``), in ms;
- first run in a fresh process with numba's cache empty (compilation included) and again
  with the cache filled (``NUMBA_CACHE_DIR`` pointed at a new directory for the pair);
- Gymnasium step rates with random actions: ``GeoManager-v0`` (geo3; bar: >= 10,000/s) and
  ``LoadBalancing-v0`` (bar: no slower than the ~22,000/s measured before).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHELL_REPEATS = 3  # warm shell runs timed (the median is reported)
GEO_ENV_STEPS = 20_000  # ~10 episodes of 7 days x 3 managers
LB_ENV_STEPS = 50_000
SEED_POOL = 8  # GeoManager-v0's default seed pool: every seed is prepared before timing


def _greenroute_cmd() -> list[str]:
    script = Path(sys.executable).with_name("greenroute")
    return [str(script)] if script.exists() else [sys.executable, "-m", "greenroute.cli"]


def _timed(cmd: list[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return wall


def child_geo10_shell(data_dir: str | None) -> dict:
    cmd = [*_greenroute_cmd(), "run", "--scenario", "geo10", "--policy", "lowest-carbon", "--json"]
    if data_dir:
        cmd += ["--data-dir", data_dir]
    first = _timed(cmd)  # fills the caches (parsed files, reference scales, numba)
    warm = [_timed(cmd) for _ in range(SHELL_REPEATS)]
    no_cache = _timed([*cmd, "--no-cache"])
    return {
        "data": "real" if data_dir else "embedded",
        "first_s": first,
        "warm_median_s": statistics.median(warm),
        "warm_min_s": min(warm),
        "no_cache_s": no_cache,
    }


def child_fluid_epoch(data_dir) -> dict:
    from greenroute.policies.registry import local_policy_factory, make_geo_policy
    from greenroute.scenarios import get_scenario
    from greenroute.sim.engine import SimConfig, Simulation
    from greenroute.sim.prepare import prepare

    prep = prepare(get_scenario("geo10"), 0, data_dir)
    # compile or load the compiled step first (timed separately by child_first_run)
    warm = Simulation(prep, make_geo_policy("local-only"), local_policy_factory("least-loaded"))
    warm.begin()
    obs = warm.observe()
    warm.advance(warm.get_plan(obs), obs)
    sim = Simulation(
        prep,
        make_geo_policy("lowest-carbon"),
        local_policy_factory("least-loaded"),
        SimConfig(seed=0),
    )
    sim.begin()
    engine_s = policy_s = 0.0
    while not sim.done:
        t0 = time.perf_counter()
        obs = sim.observe()
        t1 = time.perf_counter()
        plan = sim.get_plan(obs)
        t2 = time.perf_counter()
        sim.advance(plan, obs)
        engine_s += (t1 - t0) + (time.perf_counter() - t2)
        policy_s += t2 - t1
    n = sim.sc.n_epochs
    return {"epochs": n, "engine_ms": 1e3 * engine_s / n, "policy_ms": 1e3 * policy_s / n}


_FIRST_RUN = """
import time
t0 = time.perf_counter()
from greenroute.bench.perf import bench_scenario
from greenroute.policies.registry import local_policy_factory, make_geo_policy
from greenroute.scenarios import get_scenario
from greenroute.sim.engine import Simulation
from greenroute.sim.prepare import prepare
t1 = time.perf_counter()
for sc in (bench_scenario(0.02), get_scenario("geo3").with_options(days=1.0)):
    Simulation(prepare(sc, 1), make_geo_policy("lowest-carbon"),
               local_policy_factory("least-loaded")).run()
print(t1 - t0, time.perf_counter() - t1)
"""


def child_first_run() -> dict:
    """A request-level and a fluid run in fresh processes: numba cache empty, then filled."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="greenroute-numba-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for label in ("cold", "cached"):
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-c", _FIRST_RUN], capture_output=True,
                                 text=True, env=env, check=False)  # fmt: skip
            wall = time.perf_counter() - t0
            if res.returncode != 0:
                raise SystemExit(f"first-run child failed:\n{res.stderr[-2000:]}")
            imports_s, run_s = (float(x) for x in res.stdout.split()[-2:])
            out[f"{label}_wall_s"] = wall
            out[f"{label}_imports_s"] = imports_s
            out[f"{label}_runs_s"] = run_s
    return out


def _env_rate(env_id: str, steps: int, warm_seeds: int, **options) -> float:
    import gymnasium as gym
    import numpy as np

    import greenroute.envs as envs

    envs.register_envs()
    env = gym.make(env_id, **options)
    for s in range(warm_seeds):
        env.reset(seed=s)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.integers(env.action_space.n, size=steps)
    t0 = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(int(a))
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - t0)


def child_env_rates(data_dir) -> dict:
    geo_opts = {"data_dir": str(data_dir)} if data_dir else {}
    return {
        "geo_manager_steps_per_s": _env_rate(
            "greenroute/GeoManager-v0", GEO_ENV_STEPS, SEED_POOL, **geo_opts
        ),
        "load_balancing_steps_per_s": _env_rate("greenroute/LoadBalancing-v0", LB_ENV_STEPS, 1),
    }


def rows(figures: dict) -> list[tuple[str, str, str]]:
    """Table rows of these figures for ``bench/perf.py``'s report."""
    sh, ep = figures["geo10_shell"], figures["fluid_epoch"]
    fr, env = figures["first_run"], figures["env_rates"]
    return [
        (f"geo10 lowest-carbon from the shell, {sh['data']} data, warm caches (median)",
         f"{sh['warm_median_s']:.2f} s (first {sh['first_s']:.1f} s, --no-cache "
         f"{sh['no_cache_s']:.1f} s)", "< 2 s"),
        ("fluid engine per epoch on geo10 (observation + compiled step / policy)",
         f"{ep['engine_ms']:.3f} / {ep['policy_ms']:.3f} ms", "engine << 0.9 ms"),
        ("first run, fresh process, numba cache empty (imports + request + fluid runs)",
         f"{fr['cold_wall_s']:.1f} s (runs {fr['cold_runs_s']:.1f} s)", ""),
        ("same with numba's cache filled",
         f"{fr['cached_wall_s']:.1f} s (runs {fr['cached_runs_s']:.1f} s)", ""),
        ("GeoManager-v0 (geo3) env steps, random actions",
         f"{env['geo_manager_steps_per_s']:,.0f} steps/s", ">= 10,000 steps/s"),
        ("LoadBalancing-v0 env steps, random actions",
         f"{env['load_balancing_steps_per_s']:,.0f} steps/s", ">= 22,000 steps/s"),
    ]  # fmt: skip
