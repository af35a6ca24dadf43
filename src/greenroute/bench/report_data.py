"""What a report is made of: the runs found in a ``run``/``compare`` output directory, a folder
of such directories (e.g. one compare per seed), or in-memory results; grouped into series
(every run that differs only in its seed) with the mean and 95 % confidence interval."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError, DataFormatError

CI_LEVEL = 0.95  # two-sided Student-t interval of the mean over seeds (seed 001 Fig. 3)
# manifest fields that tell two runs' series apart (everything a sweep varies but the seed)
GROUP_FIELDS = ("scenario", "policy", "policy_options", "weights", "days", "fidelity", "forecast")
BASELINE = "local-only"  # the improvement figure's reference policy
# as greenroute.api.ORACLE_MIN_SAVING_FRACTION (bench may not import api): an oracle saving
# below 0.1 % of local-only's J makes a share of it meaningless
ORACLE_MIN_SAVING_FRACTION = 1e-3
IMPROVEMENT_KEYS = ("carbon_kg", "cost_usd", "energy_kwh", "water_m3")
ORACLE_GAP_KEYS = (
    "oracle_savings_captured_pct",
    "oracle_carbon_savings_captured_pct",
    "j_above_oracle_pct",
)
RUN_FILES = ("manifest.json", "metrics.json")  # a run directory (sim/output.py::write_run)
COMPARE_FILE = "summary.json"  # a compare directory (sim/output.py::write_compare)


@dataclass
class RunRecord:
    """One run: its metrics, manifest and per-epoch frame (None where not stored)."""

    metrics: dict[str, float]
    manifest: dict
    epochs: pd.DataFrame | None = None
    source: str = ""
    label: str = ""  # set by :func:`assign_labels`
    base_label: str | None = None  # a sweep's name for the policy variant (else the policy)
    run_id: str = ""  # the result store's key

    @property
    def policy(self) -> str:
        return str(self.manifest.get("policy", "?"))

    @property
    def seed(self) -> int:
        return int(self.manifest.get("seed", 0))

    @property
    def scenario(self) -> str:
        return str(self.manifest.get("scenario", "?"))

    def group_key(self) -> str:
        return json.dumps({k: self.manifest.get(k) for k in GROUP_FIELDS}, sort_keys=True)


@dataclass
class ReportInput:
    """The runs of a report and where they came from (``kind``: run, compare, collection,
    sweep or results)."""

    kind: str
    source: str
    runs: list[RunRecord]
    notes: list[str] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        """The series' labels, in the order first seen."""
        return list(dict.fromkeys(r.label for r in self.runs))

    @property
    def seeds(self) -> list[int]:
        return sorted({r.seed for r in self.runs})

    def by_label(self) -> dict[str, list[RunRecord]]:
        out: dict[str, list[RunRecord]] = {}
        for r in self.runs:
            out.setdefault(r.label, []).append(r)
        return out

    def series_run(self, label: str) -> RunRecord | None:
        """The run whose time series stand for ``label``: its lowest seed with epochs."""
        cands = [r for r in self.by_label().get(label, []) if r.epochs is not None]
        return min(cands, key=lambda r: r.seed) if cands else None


def mean_ci(values: Iterable[float], level: float = CI_LEVEL) -> tuple[float, float, int]:
    """Mean, half-width of the two-sided Student-t ``level`` interval of the mean, and the
    number of finite values; the half-width is NaN for fewer than two values."""
    from scipy.stats import t

    v = np.asarray([x for x in values if x is not None], dtype=float)
    v = v[np.isfinite(v)]
    n = len(v)
    if n == 0:
        return math.nan, math.nan, 0
    if n == 1:
        return float(v[0]), math.nan, 1
    half = float(t.ppf(0.5 + level / 2, n - 1) * v.std(ddof=1) / math.sqrt(n))
    return float(v.mean()), half, n


def metric_table(inp: ReportInput, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per (label, metric): mean, CI half-width and number of seeds."""
    rows = []
    for label, runs in inp.by_label().items():
        for m in metrics:
            mean, half, n = mean_ci(r.metrics.get(m) for r in runs)
            rows.append({"label": label, "metric": m, "mean": mean, "ci95": half, "n": n})
    return pd.DataFrame(rows, columns=["label", "metric", "mean", "ci95", "n"])


def assign_labels(runs: list[RunRecord]) -> None:
    """Label each run by the manifest fields that vary between series (the policy alone when
    only policies differ), so that runs differing only in their seed share a label. A run's
    ``base_label`` (a sweep's name for a policy variant) stands for its policy and options."""
    varying = [k for k in GROUP_FIELDS if len({json.dumps(r.manifest.get(k)) for r in runs}) > 1]
    named = any(r.base_label for r in runs)
    for r in runs:
        parts = [r.base_label or r.policy]
        for k in varying:
            if k == "policy" or (named and k == "policy_options"):
                continue
            v = r.manifest.get(k)
            if k == "weights" and isinstance(v, dict):
                v = "/".join(f"{v.get(w, 0):g}" for w in ("carbon", "water", "cost", "latency"))
            elif isinstance(v, dict):
                v = ",".join(f"{a}={b}" for a, b in sorted(v.items())) or "-"
            parts.append(f"{k}={v}")
        r.label = " ".join(parts)


# ------------------------------------------------------------------ reading directories
def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFormatError(path, f"cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, f"not valid JSON ({exc.msg})", exc.lineno) from None
    if not isinstance(data, dict):
        raise DataFormatError(path, "expected a JSON object")
    return data


def is_run_dir(d: Path) -> bool:
    return all((d / f).is_file() for f in RUN_FILES)


def is_compare_dir(d: Path) -> bool:
    return (d / COMPARE_FILE).is_file()


def read_run_dir(d: Path) -> RunRecord:
    """A ``greenroute run --out`` directory (or one policy's folder of a compare)."""
    manifest = _read_json(d / "manifest.json")
    metrics = _read_json(d / "metrics.json")
    for key in ("scenario", "policy", "seed"):
        if key not in manifest:
            raise DataFormatError(d / "manifest.json", f"field {key!r} is missing")
    metrics = {k: (math.nan if v is None else v) for k, v in metrics.items()}
    epochs = None
    path = d / "epochs.parquet"
    if path.is_file():
        try:
            epochs = pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise DataFormatError(path, f"cannot read parquet ({exc})") from None
        missing = {"epoch", "time_utc", "region"} - set(epochs.columns)
        if missing:
            raise DataFormatError(path, f"columns {sorted(missing)} are missing")
    return RunRecord(metrics=metrics, manifest=manifest, epochs=epochs, source=str(d))


def read_compare_dir(d: Path) -> list[RunRecord]:
    """A ``greenroute compare --out`` directory: one run folder per policy."""
    summary = _read_json(d / COMPARE_FILE)  # a damaged summary is an error, not skipped
    subs = sorted(p for p in d.iterdir() if p.is_dir() and is_run_dir(p))
    if not subs:
        raise DataFormatError(d / COMPARE_FILE, "the compare directory holds no run folder")
    runs = [read_run_dir(p) for p in subs]
    # the order the policies were compared in (summary.json lists them in that order)
    order = [r.get("policy") for r in summary.get("results") or () if isinstance(r, dict)]
    rank = {name: i for i, name in enumerate(order)}
    return sorted(runs, key=lambda r: rank.get(r.policy, len(rank)))


def _read_one(d: Path) -> tuple[str, list[RunRecord]] | None:
    if is_run_dir(d):
        return "run", [read_run_dir(d)]
    if is_compare_dir(d):
        return "compare", read_compare_dir(d)
    return None


def load_dir(path: str | Path) -> ReportInput:
    """The runs of a run or compare directory, or of a folder whose sub-folders are run or
    compare directories (e.g. one compare per seed). A path that is none of these is a
    :class:`ConfigError` naming what was expected."""
    d = Path(path)
    if not d.exists():
        raise ConfigError(f"report input {d} does not exist")
    if not d.is_dir():
        raise ConfigError(
            f"report input {d} is a file; give a directory written by greenroute run, compare "
            "or sweep --out"
        )
    found = _read_one(d)
    if found is not None:
        kind, runs = found
    else:
        runs = []
        for sub in sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith(".")):
            one = _read_one(sub)
            if one is not None:
                runs += one[1]
        kind = "collection"
        if not runs:
            raise ConfigError(
                f"report input {d} is not a greenroute result directory: expected a run "
                f"directory ({' and '.join(RUN_FILES)}), a compare directory ({COMPARE_FILE}), "
                "or a folder of them"
            )
    return make_input(kind, str(d), runs)


def make_input(kind: str, source: str, runs: list[RunRecord]) -> ReportInput:
    """Label the runs and note what a reader should know (several scenarios, one seed)."""
    assign_labels(runs)
    inp = ReportInput(kind=kind, source=source, runs=runs)
    scenarios = sorted({r.scenario for r in runs})
    if len(scenarios) > 1:
        inp.notes.append(
            f"{len(scenarios)} scenarios ({', '.join(scenarios)}): the signal time series show "
            f"{runs[0].scenario} only"
        )
    if len(inp.seeds) == 1:
        inp.notes.append(f"one seed ({inp.seeds[0]}): no confidence intervals")
    return inp


def from_results(results: Sequence, kind: str = "results") -> ReportInput:
    """In-memory :class:`~greenroute.sim.results.RunResult` objects (no files)."""
    runs = [
        RunRecord(
            metrics=dict(r.metrics),
            manifest=dict(r.manifest),
            epochs=r.epochs,
            source=f"{r.scenario}/{r.policy}",
        )
        for r in results
    ]
    return make_input(kind, "in memory", runs)


# ------------------------------------------------------------------ derived tables
def _same_run_key(r, *, weights: bool) -> str:
    """Runs to pair (a policy with the same seed's local-only or oracle run): same scenario,
    days, fidelity and seed (and weights, which change the oracle's plan and J)."""
    fields = ["scenario", "days", "fidelity", "seed"] + ["weights"] * weights
    return json.dumps([r.manifest.get(k) for k in fields], sort_keys=True)


def oracle_gaps(inp: ReportInput) -> dict[str, dict[str, list[float]]]:
    """Per metric of :data:`ORACLE_GAP_KEYS`, per series: the per-seed values.

    The captured shares are the runs' own metrics (``compare`` adds them); where a run lacks
    them (a sweep cell) they are computed as ``compare`` does
    (:func:`greenroute.api.add_oracle_gaps`) from the paired local-only and oracle runs:
    ``100 x (x_local - x) / (x_local - x_oracle)`` for J and for carbon, left out when the
    oracle saves less than :data:`ORACLE_MIN_SAVING_FRACTION` of x_local. ``J above the
    oracle's`` is ``100 x (J - J_oracle) / J_oracle`` with ``J_oracle`` the run's
    ``oracle_objective`` metric, else its paired oracle run's J."""
    by_key = {
        p: {_same_run_key(r, weights=True): r.metrics for r in inp.runs if r.policy == p}
        for p in ("oracle", BASELINE)
    }
    out: dict[str, dict[str, list[float]]] = {k: {} for k in ORACLE_GAP_KEYS}
    for r in inp.runs:
        key = _same_run_key(r, weights=True)
        orc, base = by_key["oracle"].get(key, {}), by_key[BASELINE].get(key, {})
        for metric, share_key in zip(("objective", "carbon_kg"), ORACLE_GAP_KEYS[:2], strict=True):
            if share_key in r.metrics:
                out[share_key].setdefault(r.label, []).append(r.metrics[share_key])
                continue
            x, b, o = r.metrics.get(metric), base.get(metric), orc.get(metric)
            saving = b - o if None not in (x, b, o) else math.nan
            # the oracle's saving over local-only, where it is large enough to take a share of
            if saving > 0 and saving >= ORACLE_MIN_SAVING_FRACTION * abs(b):
                out[share_key].setdefault(r.label, []).append(100 * (b - x) / saving)
        j = r.metrics.get("objective")
        j_or = r.metrics.get("oracle_objective", orc.get("objective"))
        if j is not None and j_or is not None and j_or > 0 and r.policy != "oracle":
            out["j_above_oracle_pct"].setdefault(r.label, []).append(100 * (j - j_or) / j_or)
    return {k: v for k, v in out.items() if v}


def improvements(inp: ReportInput) -> dict[str, dict[str, list[float]]]:
    """Per metric of :data:`IMPROVEMENT_KEYS`, per series: the per-seed improvement (%)
    over the same scenario, days and seed's ``local-only`` run, ``100 x (base - x) / base``
    (paired by seed, so the seed's signals and workload cancel out)."""
    base = {_same_run_key(r, weights=False): r.metrics for r in inp.runs if r.policy == BASELINE}
    out: dict[str, dict[str, list[float]]] = {m: {} for m in IMPROVEMENT_KEYS}
    for r in inp.runs:
        b = base.get(_same_run_key(r, weights=False))
        if r.policy == BASELINE or b is None:
            continue
        for m in IMPROVEMENT_KEYS:
            x, ref = r.metrics.get(m), b.get(m)
            if x is not None and ref:
                out[m].setdefault(r.label, []).append(100 * (ref - x) / ref)
    return {m: v for m, v in out.items() if v}


def pareto_table(inp: ReportInput) -> tuple[pd.DataFrame, float | None]:
    """Per series: the mean (carbon, water, cost, TTFT) point, whether it is on the Pareto
    front, and its own hypervolume (seed 001: a single point's hyperrectangle up to the
    reference point); and the hypervolume of the whole front (None without pymoo)."""
    from greenroute.bench.pareto import METRICS, hypervolume, non_dominated, reference_point

    groups = inp.by_label()
    pts = np.array(
        [[mean_ci(r.metrics.get(m) for r in groups[lb])[0] for m in METRICS] for lb in groups]
    )
    table = pd.DataFrame(pts, columns=list(METRICS))
    table.insert(0, "label", list(groups))
    table["on_front"] = non_dominated(pts)
    finite = np.isfinite(pts).all(axis=1)
    table["hypervolume"] = math.nan
    front_hv: float | None = None
    if finite.any():
        ref = reference_point(pts[finite])
        try:
            table.loc[finite, "hypervolume"] = [hypervolume(p, ref) for p in pts[finite]]
            front_hv = hypervolume(pts[table["on_front"].to_numpy()], ref)
        except ImportError:  # pymoo (the ``opt`` extra) computes the hypervolume
            front_hv = None
    return table, front_hv
