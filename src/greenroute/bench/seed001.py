"""Reproduce seed 001's (MARLIN) figures 3-6 on greenroute's simulator, data and metrics.

Run::

    python -m greenroute.bench.seed001 --out DIR [--seeds 5] [--hours 24] [--quick] [--jobs 1]

- Fig. 3: TTFT, carbon, water and cost of the MARLIN variants (whichever ``marlin-*`` names
  are registered when it runs), the eight baselines of §6 (``policies/baselines``), and
  ``local-only``, ``lp-mpc`` and ``oracle``, on ``marlin8`` (24 h), mean +- 95 % CI (Student t)
  over the seeds;
- Fig. 4: Pareto hypervolume per framework as §6.1 (``bench/seed001_figures.py``);
- Fig. 5: Fig. 3's metrics from 4 to 12 datacenters (``scenarios.marlin.marlin_n``);
- Fig. 6: MARLIN-Balanced ablations (film, her, blend, sgd, veto, capital off) as hypervolume
  normalised by the full framework's.

Writes PNGs (matplotlib) and CSVs into ``--out`` with ``manifest.json`` (command, versions,
input-file checksums, every cell's scenario / policy / options / weights / seed / wall time)
and prints the paper's headline numbers beside ours. ``--quick`` (2 seeds, 2 h, Fig. 5 at
4 datacenters only, MARLIN with fewer updates) is the configuration the test suite runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.core.objective import PRESETS
from greenroute.core.version import __version__

MARLIN_VARIANTS = ("balanced", "min-latency", "min-carbon", "min-water", "min-cost")
ABLATIONS = ("film", "her", "blend", "sgd", "veto", "capital")
BASELINES = ("helix", "splitwise", "nsga2", "perllm", "slit", "qlearning", "ddqn", "actor-critic")
RL_BASELINES = ("qlearning", "ddqn", "actor-critic")
REFERENCES = ("local-only", "lp-mpc", "oracle")  # and the clairvoyant optimum (issue 10)
FRONT_POLICIES = ("lp-mpc", "oracle")  # weight-parametrised: run at every preset for Fig. 4
SIZES = (4, 6, 8, 10, 12)
QUICK_SIZES = (4,)
QUICK_MARLIN_OPTIONS = {"k_opt": 2, "updates": 2, "batch_size": 32}
METRIC_KEYS = ("ttft_mean_s", "carbon_kg", "water_m3", "cost_usd")
LABELS = {
    "helix": "Helix",
    "splitwise": "Splitwise",
    "nsga2": "NSGA-II",
    "perllm": "PerLLM",
    "slit": "SLIT",
    "qlearning": "QLearning",
    "ddqn": "DDQN",
    "actor-critic": "ActorCritic",
    "local-only": "local-only",
    "lp-mpc": "LP-MPC",
    "oracle": "oracle",
    **{f"marlin-{v}": "MARLIN-" + v.title().replace("-", "") for v in MARLIN_VARIANTS},
}


@dataclass(frozen=True)
class Cell:
    """One simulation: a policy with options and weights on a scenario and seed."""

    scenario: str  # "marlin8" or "marlin<N>"
    policy: str
    seed: int
    hours: float
    weights: str = "balanced"  # a core.objective preset
    options: tuple[tuple[str, object], ...] = ()
    tag: str = ""  # e.g. "no-veto" for an ablation
    data_dir: str | None = None
    forecast: str = "perfect"  # a registered forecast (bench.marlin_table: "marlin-ewma")

    @property
    def label(self) -> str:
        base = LABELS.get(self.policy, self.policy)
        if self.tag:
            return f"{base} {self.tag}"
        return base if self.weights == "balanced" else f"{base} [{self.weights}]"


@dataclass
class Config:
    seeds: int = 5
    hours: float = 24.0
    sizes: tuple[int, ...] = SIZES
    figures: tuple[int, ...] = (3, 4, 5, 6)
    marlin_options: dict = field(default_factory=dict)
    data_dir: str | None = None
    jobs: int = 1
    only: tuple[str, ...] = ()  # run only these policies (all when empty)
    reuse: str | None = None  # an earlier runs.csv: its matching cells are not rerun


def quick_config(data_dir: str | None = None) -> Config:
    return Config(
        seeds=2,
        hours=2.0,
        sizes=QUICK_SIZES,
        marlin_options=dict(QUICK_MARLIN_OPTIONS),
        data_dir=data_dir,
    )


def marlin_names() -> list[str]:
    """The registered ``marlin-<variant>`` policies, in the paper's order."""
    from greenroute.policies.registry import geo_policy_names

    names = set(geo_policy_names())
    return [f"marlin-{v}" for v in MARLIN_VARIANTS if f"marlin-{v}" in names]


def _marlin_options(name: str, wanted: dict) -> tuple[tuple[str, object], ...]:
    """``wanted`` restricted to the options ``name`` declares (MARLIN may not have them all)."""
    from greenroute.policies.registry import geo_policy_entry

    declared = {o.name for o in geo_policy_entry(name).options}
    return tuple(sorted((k, v) for k, v in wanted.items() if k in declared))


def plan_cells(cfg: Config) -> list[Cell]:
    """Every simulation the requested figures need (deduplicated, in a stable order)."""
    marlins = marlin_names()
    main = [*marlins, *BASELINES, *REFERENCES]
    if cfg.only:
        from greenroute.policies.registry import geo_policy_entry

        for p in cfg.only:
            geo_policy_entry(p)  # an unknown name is an error listing the valid ones
    cells: list[Cell] = []

    def add(scenario: str, policy: str, weights: str = "balanced", options=(), tag=""):
        if cfg.only and policy not in cfg.only:
            return
        if policy.startswith("marlin"):
            options = tuple(
                sorted(
                    {**dict(_marlin_options(policy, cfg.marlin_options)), **dict(options)}.items()
                )
            )
        for s in range(cfg.seeds):
            cells.append(
                Cell(scenario, policy, s, cfg.hours, weights, tuple(options), tag, cfg.data_dir)
            )

    if {3, 4} & set(cfg.figures):
        for p in main:
            add("marlin8", p)
    if 4 in cfg.figures:
        for p in FRONT_POLICIES:
            for w in PRESETS:
                if w != "balanced":
                    add("marlin8", p, weights=w)
    if 5 in cfg.figures:
        for n in cfg.sizes:
            for p in main:
                add("marlin8" if n == 8 else f"marlin{n}", p)
    if 6 in cfg.figures and "marlin-balanced" in marlins:
        add("marlin8", "marlin-balanced")
        for a in _ablations_declared():
            add("marlin8", "marlin-balanced", options=((a, False),), tag=f"no-{a}")
    return list(dict.fromkeys(cells))


def _ablations_declared() -> list[str]:
    from greenroute.policies.registry import geo_policy_entry

    declared = {o.name for o in geo_policy_entry("marlin-balanced").options}
    return [a for a in ABLATIONS if a in declared]


# ------------------------------------------------------------------ running cells
_PREPARED: dict = {}


def _scenario(key: str):
    from greenroute.scenarios.marlin import marlin_n

    return key if key == "marlin8" else marlin_n(int(key.removeprefix("marlin")))


def run_cell(cell: Cell) -> dict:
    """Simulate one cell (the prepared scenario is cached per process)."""
    from greenroute.bench.runner import prepare_checked, run_prepared

    try:
        import torch

        torch.set_num_threads(1)  # one core per cell: cells run side by side
    except ModuleNotFoundError:  # pragma: no cover - torch is in the [rl] extra
        pass
    key = (cell.scenario, cell.seed, cell.hours, cell.data_dir)
    if key not in _PREPARED:
        _PREPARED.clear()  # one prepared scenario at a time (memory)
        _PREPARED[key] = prepare_checked(
            _scenario(cell.scenario), seed=cell.seed, data_dir=cell.data_dir, days=cell.hours / 24
        )[0]
    t0, c0 = time.perf_counter(), time.process_time()
    res = run_prepared(
        _PREPARED[key],
        cell.policy,
        seed=cell.seed,
        weights=PRESETS[cell.weights],
        policy_options=dict(cell.options),
        forecast=cell.forecast,
    )
    m = res.metrics
    return {
        **{k: v for k, v in asdict(cell).items() if k not in ("options", "data_dir")},
        "options": json.dumps(dict(cell.options), sort_keys=True),
        "label": cell.label,
        "n_dc": int(cell.scenario.removeprefix("marlin")),
        **{k: float(m[k]) for k in (*METRIC_KEYS, "slo_violation_pct", "requests_dropped")},
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,  # this process's CPU: the cost on a quiet machine
        "input_files_sha256": res.manifest.get("input_files_sha256", {}),
    }


def run_group(cells: list[Cell]) -> list[dict]:
    """Cells of one (scenario, seed): the scenario is prepared once for all of them. Each
    finished cell is noted on stderr (workers of a pool report there as they go)."""
    rows = []
    for c in cells:
        rows.append(run_cell(c))
        print(
            f"  {c.scenario} seed {c.seed} {c.label}: {rows[-1]['cpu_s']:.1f} s CPU, "
            f"{rows[-1]['wall_s']:.1f} s wall",
            file=sys.stderr,
            flush=True,
        )
    return rows


def run_cells(
    cells: Iterable[Cell], jobs: int = 1, log=print, partial: Path | None = None
) -> pd.DataFrame:
    """Run the cells grouped by (scenario, seed), in a process pool of ``jobs`` when > 1.
    With ``partial``, each finished group's rows are appended to that CSV as they come, so an
    interrupted reproduction can be resumed with ``--reuse PARTIAL``."""
    groups: dict[tuple, list[Cell]] = {}
    for c in cells:
        groups.setdefault((c.scenario, c.seed), []).append(c)
    total = sum(len(g) for g in groups.values())
    rows: list[dict] = []
    t0 = time.perf_counter()

    def done(batch: list[dict]) -> None:
        rows.extend(batch)
        if partial is not None:
            frame = pd.DataFrame(batch).drop(columns=["input_files_sha256"], errors="ignore")
            if partial.exists():  # the columns of the rows already there, in their order
                frame = frame.reindex(columns=pd.read_csv(partial, nrows=0).columns)
            frame.to_csv(partial, mode="a", header=not partial.exists(), index=False)
        r = batch[0]
        log(
            f"[{len(rows)}/{total}] {r['scenario']} seed {r['seed']}: {len(batch)} runs, "
            f"{sum(b['wall_s'] for b in batch):.1f} s simulated "
            f"({time.perf_counter() - t0:.0f} s total)"
        )

    if jobs <= 1:
        for g in groups.values():
            done(run_group(g))
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as ex:
            futures = [ex.submit(run_group, g) for g in groups.values()]
            for fut in as_completed(futures):  # in finishing order (partial rows early)
                done(fut.result())
    order = {k: i for i, k in enumerate(groups)}  # the plan's order, whatever finished first
    rows.sort(key=lambda r: order[(r["scenario"], r["seed"])])
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ main
def reproduce(cfg: Config, out: Path, log=print) -> dict:
    """Run every cell, write the figures, CSVs and manifest into ``out``; return the
    headline comparison (``seed001_figures.headline``)."""
    from greenroute.bench import seed001_figures as F

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cells = plan_cells(cfg)
    done = reused_rows(cfg.reuse, cells) if cfg.reuse else pd.DataFrame()
    keys = set(done.apply(_row_key, axis=1)) if len(done) else set()
    todo = [c for c in cells if _cell_key(c) not in keys]
    log(
        f"seed001: {len(todo)} simulations ({len(cells) - len(todo)} reused), "
        f"MARLIN policies: {marlin_names() or 'none'}"
    )
    partial = out / "runs.partial.csv"  # reused + finished groups: --reuse it if interrupted
    partial.unlink(missing_ok=True)
    if len(done):
        done.to_csv(partial, index=False)
    new = run_cells(todo, cfg.jobs, log, partial)
    checksums = next(iter(new["input_files_sha256"]), {}) if len(new) else {}
    new = new.drop(columns=["input_files_sha256"], errors="ignore")
    df = pd.concat([done, new], ignore_index=True) if len(done) else new
    df.to_csv(out / "runs.csv", index=False)
    written = ["runs.csv", *F.write_all(df, cfg, out)]
    head = F.headline(df)
    pd.DataFrame(head).to_csv(out / "headline.csv", index=False)
    written.append("headline.csv")
    wall = time.perf_counter() - t0
    manifest = {
        "command": "python -m greenroute.bench.seed001 " + " ".join(sys.argv[1:]),
        "config": {**asdict(cfg), "sizes": list(cfg.sizes), "figures": list(cfg.figures)},
        "greenroute_version": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": _version("torch"),
        # the learners' floats depend on the CPU's vector kernels: MARLIN's MinCarbon / MinWater /
        # MinCost cells at marlin8 moved by up to 2 points per seed between two machines at the
        # same code (docs/seed001.md, "Fig. 5 at 02f256b's simulator"); same-machine reruns agree
        "machine": _machine(),
        "marlin_policies": marlin_names(),
        "input_files_sha256": checksums,
        "wall_s": round(wall, 1),
        "cells": df[
            ["scenario", "policy", "options", "weights", "tag", "seed", "hours", "wall_s", "cpu_s"]
        ].to_dict(orient="records"),
        "files": written,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str))
    log(F.headline_text(head))
    log(f"seed001: wrote {len(written) + 1} files to {out} in {wall:.0f} s")
    return {"headline": head, "wall_s": wall, "files": [*written, "manifest.json"]}


def _cell_key(c: Cell) -> tuple:
    opts = json.dumps(dict(c.options), sort_keys=True)
    return (c.scenario, c.policy, int(c.seed), float(c.hours), c.weights, opts, c.tag, c.forecast)


def _row_key(r) -> tuple:
    tag = "" if pd.isna(r["tag"]) else str(r["tag"])
    forecast = r.get("forecast", "perfect")  # runs.csv files before the column: perfect
    forecast = "perfect" if pd.isna(forecast) else str(forecast)
    return (
        r["scenario"],
        r["policy"],
        int(r["seed"]),
        float(r["hours"]),
        r["weights"],
        r["options"],
        tag,
        forecast,
    )


def reused_rows(path: str, cells: list[Cell]) -> pd.DataFrame:
    """The rows of an earlier ``runs.csv`` that are cells of this plan (same scenario,
    policy, options, weights, seed, hours and forecast)."""
    prev = pd.read_csv(path, keep_default_na=True)
    if prev.empty:
        return prev
    want = {_cell_key(c) for c in cells}
    prev = prev[prev.apply(_row_key, axis=1).isin(want)]
    return prev.assign(tag=prev["tag"].astype(object).where(prev["tag"].notna(), ""))


def _machine() -> dict[str, str]:
    """The CPU model and torch's vector capability (what the learners' floats depend on)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu
            )
    except OSError:
        pass
    try:
        import torch

        capability = str(torch.backends.cpu.get_cpu_capability())
    except (ImportError, AttributeError):
        capability = "unknown"
    return {"cpu": cpu, "torch_cpu_capability": capability, "cores": str(os.cpu_count())}


def _version(mod: str) -> str | None:
    try:
        return __import__(mod).__version__
    except ModuleNotFoundError:
        return None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for PNGs, CSVs, manifest")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per cell (default 5)")
    ap.add_argument("--hours", type=float, default=None, help="simulated hours (default 24)")
    ap.add_argument("--quick", action="store_true", help="2 seeds, 2 h, Fig. 5 at 4 DCs only")
    ap.add_argument("--policies", default="", help="run only these policies (comma list)")
    ap.add_argument("--figures", default="3,4,5,6", help="which figures (comma list)")
    ap.add_argument("--sizes", default=None, help="datacenter counts of Fig. 5 (4..12)")
    ap.add_argument("--jobs", type=int, default=1, help="cells run in a process pool of N")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--reuse", default=None, help="an earlier runs.csv whose cells are kept")
    ap.add_argument(
        "--marlin-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option for every MARLIN policy (e.g. updates=4)",
    )
    a = ap.parse_args(argv)
    cfg = quick_config(a.data_dir) if a.quick else Config(data_dir=a.data_dir)
    if a.seeds is not None:
        cfg.seeds = _positive("--seeds", a.seeds)
    if a.hours is not None:
        cfg.hours = float(_positive("--hours", a.hours))
    if a.sizes:
        cfg.sizes = tuple(int(s) for s in a.sizes.split(","))
    cfg.figures = tuple(int(s) for s in a.figures.split(","))
    cfg.jobs = max(a.jobs, 1)
    cfg.reuse = a.reuse
    cfg.only = tuple(p.strip() for p in a.policies.split(",") if p.strip())
    for kv in a.marlin_option:
        k, _, v = kv.partition("=")
        cfg.marlin_options[k.strip()] = _literal(v.strip())
    reproduce(cfg, a.out)


def _positive(flag: str, v):
    from greenroute.core.errors import ConfigError

    if not v > 0:
        raise ConfigError(f"{flag} must be > 0, got {v}")
    return v


def _literal(v: str):
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


if __name__ == "__main__":
    from greenroute.core.errors import exits_on_user_error

    raise SystemExit(exits_on_user_error(main)())
