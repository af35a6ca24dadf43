"""Why seed 001's headline ordering does not hold on marlin8: the numbers behind
``docs/seed001.md`` ("Why the headline ordering does not hold").

Run::

    python -m greenroute.bench.seed001_why hv RUNS_CSV      # Fig. 4 under other readings of §6.1
    python -m greenroute.bench.seed001_why room RUNS_CSV    # per objective: local, MARLIN, oracle
    python -m greenroute.bench.seed001_why trace OUT --seed 0 --hours 72 \\
        --policies local-only,oracle,slit,marlin-balanced
    python -m greenroute.bench.seed001_why report OUT       # tables of a trace

``RUNS_CSV`` is a ``runs.csv`` of ``bench.seed001`` (Figs 3+4 cells). ``trace`` runs the
policies on one prepared ``marlin8`` (as ``bench.seed001`` does: perfect forecast,
least-loaded local policy, balanced weights) and writes, per policy, the per-epoch frame, the
share of demand each plan sends away from the origin's own datacenter and, for MARLIN, its
``epoch_log`` (phase-1 proposals' ratios to local-only per agent, the consensus's, omega,
vetoes, capital).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.bench.pareto import METRICS as HV_METRICS
from greenroute.bench.pareto import hypervolume, reference_point
from greenroute.bench.seed001_figures import framework_points

OBJ = ("ttft", "carbon", "water", "cost")
OBJ_METRIC = dict(zip(OBJ, ("ttft_mean_s", "carbon_kg", "water_m3", "cost_usd"), strict=True))
OBJ_PRESET = {"ttft": "min-latency", "carbon": "min-carbon", "water": "min-water",
              "cost": "min-cost"}  # fmt: skip


# ------------------------------------------------------------------ hypervolume readings
def _shares(points: dict[str, np.ndarray], hv_of) -> dict[str, float]:
    hv = {k: hv_of(v) for k, v in points.items()}
    base = hv.get("MARLIN") or float("nan")
    return {k: 100 * v / base for k, v in hv.items()}


def minmax_hv(points: np.ndarray, ideal: np.ndarray, ref: np.ndarray) -> float:
    """Hypervolume after min-max normalisation: each metric mapped to ``(f - ideal) /
    (ref - ideal)``, so every objective spans [0, 1] between the best observed value and the
    reference, whatever its size relative to zero."""
    span = np.where(ref > ideal, ref - ideal, 1.0)
    f = (np.atleast_2d(points) - ideal) / span
    return hypervolume(f, np.ones_like(ref), normalised=False)


def hv_readings(df: pd.DataFrame) -> pd.DataFrame:
    """Each Fig. 4 framework's hypervolume as % of MARLIN's under several readings of §6.1.

    - ``ours``: the figure (reference = worst x 1.1, each metric divided by it);
    - ``ref_worst``: reference exactly at the worst observed values (§6.1's words);
    - ``minmax``: min-max normalisation between the best observed value and the reference;
    - ``no_ttft``: carbon, water and cost only;
    - ``per_seed``: points of one seed only (one workload), mean of the 5 seeds' shares;
    - ``balanced_only``: MARLIN = MARLIN-Balanced's mean point (a single-point method);
    - ``paper_set``: only the paper's frameworks (no LP-MPC / oracle) set the reference.

    Dividing each metric by a constant (``ours`` divides by the reference, ``minmax`` maps
    best..reference to 0..1) scales every hypervolume by the same factor, so the shares do not
    depend on it: only the reference point and the point sets do.
    """
    pts = framework_points(df)
    allp = np.vstack(list(pts.values()))
    ref = reference_point(allp)
    ref0 = reference_point(allp, margin=0.0)
    ideal = np.nanmin(allp, axis=0)
    cols: dict[str, dict[str, float]] = {}
    cols["ours"] = _shares(pts, lambda p: hypervolume(p, ref))
    cols["ref_worst"] = _shares(pts, lambda p: hypervolume(p, ref0))
    cols["minmax"] = _shares(pts, lambda p: minmax_hv(p, ideal, ref))
    ref3 = ref[:3]
    cols["no_ttft"] = _shares({k: v[:, :3] for k, v in pts.items()},
                              lambda p: hypervolume(p, ref3))  # fmt: skip
    m8 = df[(df.scenario == "marlin8") & (_untagged(df))]
    per_seed: dict[str, list[float]] = {}
    for s in sorted(m8.seed.unique()):
        ps = framework_points(_one_seed(m8, s))
        r = reference_point(np.vstack(list(ps.values())))
        for k, v in _shares(ps, lambda p, r=r: hypervolume(p, r)).items():
            per_seed.setdefault(k, []).append(v)
    cols["per_seed"] = {k: float(np.mean(v)) for k, v in per_seed.items()}
    bal = m8[(m8.policy == "marlin-balanced") & (m8.weights == "balanced")]
    pb = dict(pts)
    pb["MARLIN"] = bal[list(HV_METRICS)].to_numpy(float).mean(axis=0, keepdims=True)
    cols["balanced_only"] = _shares(pb, lambda p: hypervolume(p, ref))
    paper = {k: v for k, v in pts.items() if k not in ("LP-MPC", "oracle")}
    refp = reference_point(np.vstack(list(paper.values())))
    cols["paper_set"] = _shares(paper, lambda p: hypervolume(p, refp))
    t = pd.DataFrame(cols)
    t.index.name = "framework"
    return t.reset_index()


def _untagged(df: pd.DataFrame) -> pd.Series:
    return df.tag.astype(object).fillna("") == ""


def _one_seed(m8: pd.DataFrame, seed: int) -> pd.DataFrame:
    return m8[m8.seed == seed]


def axis_factors(df: pd.DataFrame, policies=("marlin-balanced", "slit")) -> pd.DataFrame:
    """The single-point hypervolume ``prod_i (1 - f_i / ref_i)`` split into its factors, for
    the mean point of each policy (which objective makes the difference)."""
    pts = framework_points(df)
    ref = reference_point(np.vstack(list(pts.values())))
    m8 = df[(df.scenario == "marlin8") & (df.weights == "balanced") & (_untagged(df))]
    rows = []
    for p in policies:
        f = m8[m8.policy == p][list(HV_METRICS)].to_numpy(float).mean(axis=0)
        fac = 1 - f / ref
        rows.append({"policy": p, **dict(zip(HV_METRICS, fac, strict=True)),
                     **{f"ref_{m}": r for m, r in zip(HV_METRICS, ref, strict=True)},
                     "product": float(np.prod(fac))})  # fmt: skip
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ room per objective
def room_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per objective: local-only, the matching MARLIN variant, MARLIN-Balanced, SLIT, the best
    baseline, and lp-mpc / oracle at the matching weight preset (means over seeds), with the
    share of the oracle's improvement over local-only that each captures."""
    m8 = df[(df.scenario == "marlin8") & (_untagged(df))]
    mean = m8.groupby(["policy", "weights"])[list(OBJ_METRIC.values())].mean()
    from greenroute.bench.seed001 import BASELINES

    rows = []
    for o, m in OBJ_METRIC.items():
        loc = mean.loc[("local-only", "balanced"), m]
        var = {"ttft": "min-latency"}.get(o, f"min-{o}")
        orc = mean.loc[("oracle", OBJ_PRESET[o]), m]
        vals = {
            "local-only": loc,
            f"MARLIN-{var}": mean.loc[(f"marlin-{var}", "balanced"), m],
            "MARLIN-Balanced": mean.loc[("marlin-balanced", "balanced"), m],
            "SLIT": mean.loc[("slit", "balanced"), m],
            "best baseline": min(mean.loc[(b, "balanced"), m] for b in BASELINES),
            "lp-mpc[preset]": mean.loc[("lp-mpc", OBJ_PRESET[o]), m],
            "oracle[preset]": orc,
        }
        for k, v in vals.items():
            gap = loc - orc
            captured = 100 * (loc - v) / gap if gap else float("nan")
            rows.append({"objective": o, "policy": k, "value": float(v),
                         "vs_local_pct": 100 * (v - loc) / loc,
                         "room_captured_pct": captured})  # fmt: skip
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ trace
def run_trace(out: Path, seed: int, hours: float, policies: list[str], marlin_opts: dict) -> None:
    """Run each policy (``name`` or ``name@preset``) on one prepared marlin8; write the
    per-epoch frame, the off-local share per epoch and MARLIN's ``epoch_log``."""
    import torch

    from greenroute.bench.runner import prepare_checked, run_prepared
    from greenroute.bench.seed001 import PRESETS
    from greenroute.policies.registry import make_geo_policy

    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    prep = prepare_checked("marlin8", seed=seed, data_dir=_data_dir(), days=hours / 24)[0]
    for spec in policies:
        name, _, preset = spec.partition("@")
        pol = make_geo_policy(name, **(marlin_opts if name.startswith("marlin") else {}))
        rec = _OffLocal(pol)
        c0, t0 = time.process_time(), time.perf_counter()
        res = run_prepared(prep, rec, seed=seed, weights=PRESETS[preset or "balanced"])
        tag = spec.replace("@", "_")
        res.epochs.to_csv(out / f"{tag}_epochs.csv", index=False)
        log = getattr(pol, "epoch_log", None)
        row = {k: res.metrics[k] for k in OBJ_METRIC.values()}
        row.update(policy=spec, seed=seed, hours=hours, cpu_s=time.process_time() - c0,
                   wall_s=time.perf_counter() - t0, vetoes=(pol.summary()["vetoes"]
                   if log is not None else 0))  # fmt: skip
        (out / f"{tag}_trace.json").write_text(
            json.dumps({"summary": row, "moved": rec.moved, "log": log or []}, default=float)
        )
        print(json.dumps(row, default=float), flush=True)


_DATA_DIR: list[str | None] = [None]


def _data_dir() -> str | None:
    return _DATA_DIR[0]


class _OffLocal:
    """Wraps a geo policy and records, per epoch, the share of forecast demand its plan
    routes away from the origin's own datacenter (0 = local-only)."""

    def __init__(self, inner) -> None:
        self.__dict__["inner"] = inner
        self.__dict__["moved"] = []

    def __getattr__(self, k):
        return getattr(self.inner, k)

    def plan(self, obs):
        p = self.inner.plan(obs)
        d = np.maximum(np.asarray(obs.demand_rps[0], dtype=float), 0.0)  # [C, O]
        stay = np.zeros_like(d)
        for o, name in enumerate(obs.origins):
            if name in obs.regions:
                stay[:, o] = p.route[:, o, obs.regions.index(name)]
        self.moved.append(float((d * (1 - stay)).sum() / max(d.sum(), 1e-12)))
        return p


def trace_report(out: Path, block_epochs: int = 24) -> dict[str, pd.DataFrame]:
    """Tables from a trace folder: per policy and block of epochs, the metrics as % vs
    local-only of the same epochs and the mean off-local share; for MARLIN, per block, each
    agent's proposal ratio on its own objective, the consensus's ratios, vetoes and capital."""
    traces = {p.name.removesuffix("_trace.json"): json.loads(p.read_text())
              for p in sorted(out.glob("*_trace.json"))}  # fmt: skip
    frames = {k: pd.read_csv(out / f"{k}_epochs.csv") for k in traces}
    if "local-only" not in frames:
        raise FileNotFoundError(f"{out} has no local-only trace (run it with the others)")
    per_epoch = {k: _epoch_totals(f) for k, f in frames.items()}
    base = per_epoch["local-only"]
    rows = []
    for k, e in per_epoch.items():
        blk = e.index // block_epochs
        moved = np.asarray(traces[k]["moved"])
        for b in sorted(set(blk)):
            sel = blk == b
            row = {"policy": k, "block": int(b)}
            for m in ("carbon_kg", "water_m3", "cost_usd"):
                row[f"{m}_vs_local_pct"] = 100 * (e[m][sel].sum() / base[m][sel].sum() - 1)
            row["ttft_eq3_vs_local_pct"] = 100 * (_ttft(e, sel) / _ttft(base, sel) - 1)
            row["moved_share_pct"] = 100 * float(moved[: len(sel)][sel].mean())
            rows.append(row)
    tables = {"blocks": pd.DataFrame(rows), "where": where_served(frames, traces)}
    game_rows = []
    for k, tr in traces.items():
        log = tr.get("log") or []
        for b in sorted({r["epoch"] // block_epochs for r in log}):
            rs = [r for r in log if r["epoch"] // block_epochs == b]
            px = np.array([r["prop_x"] for r in rs])  # [E, J, 4]
            agents = rs[0]["agents"]
            row = {"policy": k, "block": int(b)}
            for j, a in enumerate(agents):
                row[f"prop_{a}_own_ratio"] = float(px[:, j, OBJ.index(a)].mean())
            if "x_bar" in rs[0]:
                xb = np.array([r["x_bar"] for r in rs])
                for i, a in enumerate(OBJ):
                    row[f"consensus_{a}_ratio"] = float(xb[:, i].mean())
                row["veto_epochs"] = int(sum(bool(r["vetoes"]) for r in rs))
                om = np.array([r["omega"] for r in rs])
                for j, a in enumerate(agents):
                    row[f"omega_{a}"] = float(om[:, j].mean())
                cap = np.array([r["capital"] for r in rs])
                for j, a in enumerate(agents):
                    row[f"capital_{a}_end"] = float(cap[-1, j])
            game_rows.append(row)
    tables["marlin"] = pd.DataFrame(game_rows)
    return tables


def where_served(frames: dict[str, pd.DataFrame], traces: dict) -> pd.DataFrame:
    """Per policy, over the run: the mean off-local share, the share of requests served in
    the epoch's two lowest and two highest grid-carbon datacenters, the request-weighted grid
    carbon intensity and each datacenter's mean utilisation."""
    rows = []
    for k, f in frames.items():
        rank = f.groupby("epoch")["carbon_intensity_g_per_kwh"].rank(method="first")
        n_r = f.region.nunique()
        req = f.requests_dispatched
        tot = float(req.sum())
        rows.append({
            "policy": k,
            "moved_share_pct": 100 * float(np.mean(traces[k]["moved"])),
            "served_2_cleanest_pct": 100 * float(req[rank <= 2].sum()) / tot,
            "served_2_dirtiest_pct": 100 * float(req[rank > n_r - 2].sum()) / tot,
            "grid_g_per_kwh_weighted": float((req * f.carbon_intensity_g_per_kwh).sum()) / tot,
            **{f"util_{r}": float(u) for r, u in f.groupby("region").utilisation.mean().items()},
        })  # fmt: skip
    return pd.DataFrame(rows)


def _epoch_totals(f: pd.DataFrame) -> pd.DataFrame:
    """Per-epoch totals over regions: carbon, water, cost, requests and eq. 3's TTFT sum (the
    frame has no per-epoch engine TTFT; ``marlin_ttft_sum_s`` is §3's latency model)."""
    g = f.groupby("epoch")
    return pd.DataFrame(
        {
            "carbon_kg": g["carbon_kg"].sum(),
            "water_m3": g["water_m3"].sum(),
            "cost_usd": g["cost_usd"].sum(),
            "served": g["requests_dispatched"].sum(),
            "ttft_x_served": g["marlin_ttft_sum_s"].sum(),
        }
    ).reset_index(drop=True)


def _ttft(e: pd.DataFrame, sel) -> float:
    return float(e["ttft_x_served"][sel].sum() / max(e["served"][sel].sum(), 1e-12))


# ------------------------------------------------------------------ CLI
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for c in ("hv", "room"):
        sub.add_parser(c).add_argument("runs_csv", type=Path)
    t = sub.add_parser("trace")
    t.add_argument("out", type=Path)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--hours", type=float, default=24.0)
    t.add_argument("--policies", default="local-only,oracle,slit,marlin-balanced")
    t.add_argument("--data-dir", default=None)
    t.add_argument("--marlin-option", action="append", default=[], metavar="KEY=VALUE")
    r = sub.add_parser("report")
    r.add_argument("out", type=Path)
    r.add_argument("--block", type=int, default=24, help="epochs per block (24 = 6 h)")
    a = ap.parse_args(argv)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 40)
    if a.cmd == "hv":
        df = pd.read_csv(a.runs_csv)
        print(hv_readings(df).round(1).to_string(index=False))
        print(axis_factors(df).round(4).to_string(index=False))
    elif a.cmd == "room":
        print(room_table(pd.read_csv(a.runs_csv)).round(2).to_string(index=False))
    elif a.cmd == "trace":
        from greenroute.bench.seed001 import _literal

        _DATA_DIR[0] = a.data_dir
        opts = {k: _literal(v) for k, v in (kv.split("=", 1) for kv in a.marlin_option)}
        run_trace(a.out, a.seed, a.hours, a.policies.split(","), opts)
    else:
        for name, tab in trace_report(a.out, a.block).items():
            print(f"== {name}")
            print(tab.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
