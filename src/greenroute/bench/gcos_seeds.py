"""The MACCS variants over several PPO training seeds: resumable runs and paired intervals.

Each (variant, seed) run is trained once and kept in ``--out``: its model as
``models/<variant>-s<seed>.zip`` and its evaluation metrics as ``runs/<variant>-s<seed>.json``.
A later call with the same configuration (``config.json``) reuses both, so an interrupted seed
loop resumes, and a call with more seeds trains only the new ones. A different configuration in
the same folder is refused (its models would not match).

:func:`seed_summary` gives, per variant and metric, the mean and the half-width of the 95 %
Student-t interval over the seeds (:func:`~greenroute.bench.report_data.mean_ci`), and the
paired differences (same seed) of MACCS against each ablation and against each deterministic
baseline, each with its interval and a verdict only where the interval excludes 0.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from greenroute.bench.report_data import mean_ci
from greenroute.core.errors import ConfigError

SUMMARY_METRICS = (
    "cost_usd",
    "carbon_kg",
    "energy_kwh",
    "makespan_s",
    "mean_start_s",
    "p95_latency_s",
    "model_hit_rate",
    "data_hit_rate",
    "bytes_moved_gb",
    "bytes_migrated_gb",
    "peer_fetch_gb",
)


class SeedStore:
    """Saved models and evaluation metrics of (variant, seed) runs under one configuration."""

    def __init__(self, root: Path | None, config: dict) -> None:
        self.root = root
        if root is None:
            return
        root.mkdir(parents=True, exist_ok=True)
        path = root / "config.json"
        if path.is_file():
            old = json.loads(path.read_text())
            diff = {k: (old.get(k), v) for k, v in config.items() if old.get(k) != v}
            if diff:
                pairs = ", ".join(f"{k}: saved {a!r}, asked {b!r}" for k, (a, b) in diff.items())
                raise ConfigError(f"{root} holds runs of another configuration ({pairs}); "
                                  "choose another --out")  # fmt: skip
        else:
            path.write_text(json.dumps(config, indent=2, sort_keys=True))

    def model_path(self, name: str, seed: int) -> Path | None:
        if self.root is None:
            return None
        (self.root / "models").mkdir(exist_ok=True)
        return self.root / "models" / f"{name}-s{seed}.zip"

    def _run_path(self, name: str, seed: int) -> Path:
        assert self.root is not None
        return self.root / "runs" / f"{name}-s{seed}.json"

    def load_run(self, name: str, seed: int) -> dict | None:
        if self.root is None or not self._run_path(name, seed).is_file():
            return None
        return json.loads(self._run_path(name, seed).read_text())

    def save_run(self, name: str, seed: int, run: dict) -> None:
        if self.root is None:
            return
        self._run_path(name, seed).parent.mkdir(exist_ok=True)
        self._run_path(name, seed).write_text(json.dumps(run, indent=2, sort_keys=True))


def _ci(values: list[float]) -> dict:
    mean, half, n = mean_ci(values)
    return {"mean": mean, "ci95": half, "n": n}


def verdict(mean: float, half: float) -> str:
    """ "lower"/"higher" where the interval excludes 0, else "inconclusive"."""
    if not math.isfinite(half) or abs(mean) <= half:
        return "inconclusive"
    return "lower" if mean < 0 else "higher"


def seed_summary(
    per_seed: dict[str, dict[int, dict]],
    baselines: dict[str, dict],
    reference: str = "maccs",
) -> dict:
    """``per_seed[variant][seed]``: metrics of one run. Returns ``{"variants": {variant: {metric:
    {mean, ci95, n}}}, "paired": {"<reference> - <other>": {metric: {mean, ci95, n, verdict}}}}``;
    a paired difference uses only the seeds both variants have, and a deterministic baseline
    counts as the same value for every seed."""
    out: dict = {"variants": {}, "paired": {}}
    for name, runs in per_seed.items():
        out["variants"][name] = {
            m: _ci([r[m] for r in runs.values() if m in r]) for m in SUMMARY_METRICS
        }
    ref = per_seed.get(reference, {})
    others = {n: r for n, r in per_seed.items() if n != reference}
    others |= {n: {s: b for s in ref} for n, b in baselines.items()}
    for name, runs in others.items():
        seeds = sorted(set(ref) & set(runs))
        pair = {}
        for m in SUMMARY_METRICS:
            d = [ref[s][m] - runs[s][m] for s in seeds if m in ref[s] and m in runs[s]]
            c = _ci(d)
            pair[m] = c | {"verdict": verdict(c["mean"], c["ci95"])}
        out["paired"][f"{reference} - {name}"] = pair
    return out


_SHOW = (
    ("cost_usd", "cost $", 1.0, 2),
    ("carbon_kg", "CO2 kg", 1.0, 3),
    ("mean_start_s", "start s", 1.0, 1),
    ("p95_latency_s", "p95 s", 1.0, 1),
    ("model_hit_rate", "m-hit", 1.0, 4),
    ("data_hit_rate", "d-hit", 1.0, 4),
    ("bytes_moved_gb", "GB moved", 1.0, 0),
    ("bytes_migrated_gb", "GB migr", 1.0, 0),
    ("peer_fetch_gb", "GB peer", 1.0, 0),
)


def format_summary(summary: dict) -> str:
    """Markdown tables: mean ± 95 % CI per variant, then the paired differences."""
    head = "| | " + " | ".join(h for _, h, _, _ in _SHOW) + " |"
    rule = "|---" * (len(_SHOW) + 1) + "|"

    def cell(c: dict, digits: int, mark: str = "") -> str:
        half = "" if not math.isfinite(c["ci95"]) else f" ± {c['ci95']:,.{digits}f}"
        return f"{c['mean']:,.{digits}f}{half}{mark}"

    lines = ["mean ± 95 % CI over the training seeds", head, rule]
    for name, ms in summary["variants"].items():
        n = ms["cost_usd"]["n"]
        lines.append(f"| {name} (n={n}) | "
                     + " | ".join(cell(ms[k], d) for k, _, _, d in _SHOW) + " |")  # fmt: skip
    lines += ["", "paired differences (same seed); * = the interval excludes 0", head, rule]
    for name, ms in summary["paired"].items():
        marks = {k: (" *" if ms[k]["verdict"] != "inconclusive" else "") for k, *_ in _SHOW}
        cells = " | ".join(cell(ms[k], d, marks[k]) for k, _, _, d in _SHOW)
        lines.append(f"| {name} | {cells} |")
    return "\n".join(lines)
