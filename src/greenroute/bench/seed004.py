"""Seed 004: what temperature awareness buys on ``au-edge``.

Each planner (``admm`` spatial, ``admm`` with time shifting over ``--horizon`` epochs,
``lp-mpc`` over the same horizon) is run twice on the same scenario, seed and signals:
temperature-aware (each site's COP from its own wet bulb) and temperature-blind
(``cooling_model=blind``: one PUE everywhere, the fleet's 2024 mean; see
:mod:`greenroute.policies.optimize.blind`). Both plans are evaluated by the same
temperature-aware simulator, so the difference is the saving. Two weeks of 2024, the data year
present for AU-NSW/AU-VIC in ``shared/data`` (2021-2024): a summer week (Mon 15 January, the
scenario's own) and a winter week (Mon 15 July), local time.

Costs: the simulator's prices are US$ (the AU-NSW/AU-VIC files hold A$ and are converted with
SustainCluster's fixed rate, 1 A$ = 0.63056 US$, in ``data/grid_loaders.py``; the synthesised
sites' A$ figures likewise, ``data/au_normals.py``); the table shows US$ and the same figure
in A$ at that rate.

``python -m greenroute.bench.seed004 [--out DIR] [--data-dir DIR] [--days 7] [--horizon 16]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.data.grid_loaders import AUD_TO_USD

# Seed 004's abstract (arXiv, 8 Mar 2026), the only text of the paper available
# (shared/seeds/temperature-aware-admm-edge.txt). It states no number.
PAPER_CLAIM = (
    'Seed 004 claims (abstract, no figure given): cooling systems "are frequently modeled with '
    'a location-independent efficiency term" although "their energy efficiency is highly '
    'influenced by ambient temperature"; its temperature-aware ADMM "demonstrates reductions '
    'in cooling energy consumption and improves overall cost efficiency".'
)
DATA_YEAR = 2024
# Monday 00:00 local (AEDT = UTC+11 in January, AEST = UTC+10 in July)
WEEKS: dict[str, pd.Timestamp] = {
    "summer (15-21 Jan 2024)": pd.Timestamp("2024-01-14 13:00", tz="UTC"),
    "winter (15-21 Jul 2024)": pd.Timestamp("2024-07-14 14:00", tz="UTC"),
}
METRICS: tuple[str, ...] = (
    "cooling_energy_kwh", "energy_kwh", "cost_usd", "carbon_kg", "ttft_mean_s", "ttft_p95_s",
    "water_m3", "slo_violation_pct",
)  # fmt: skip


def planners(horizon: int, blind_data_dir: str | None) -> list[tuple[str, str, dict]]:
    """(label, policy, options) for every planner x cooling model."""
    base = [
        ("admm", "admm", {}),
        (f"admm-H{horizon}", "admm", {"horizon": horizon, "check_gap": False}),
        (f"lp-mpc-H{horizon}", "lp-mpc", {"horizon": horizon}),
    ]
    out = []
    for label, pol, opts in base:
        out.append((label, pol, {**opts, "cooling_model": "aware"}))
        blind = {"cooling_model": "blind", "blind_data_dir": blind_data_dir}
        out.append((label, pol, {**opts, **blind}))
    return out


def site_pue(regions: tuple[str, ...], start: pd.Timestamp, hours: int, root: Path | None):
    """Mean PUE (default facility) per site over ``hours`` from ``start``."""
    from greenroute.physics.facility import DefaultFacility
    from greenroute.sim.epoch_signals import build_epoch_signals

    sig = build_epoch_signals(regions, start, hours, 3600.0, 0, root)
    f = DefaultFacility().factors(temp_c=sig.temp_c, wetbulb_c=sig.wetbulb_c,
                                  carbon_intensity_g_per_kwh=sig.carbon_intensity_g_per_kwh,
                                  price_usd_per_kwh=sig.price_usd_per_kwh,
                                  ewif_l_per_kwh=sig.water_intensity_l_per_kwh)  # fmt: skip
    return f.energy_kwh_per_it_kwh.mean(axis=0), sig.wetbulb_c.mean(axis=0)


def run_all(data_dir: str | None, days: float, horizon: int, seed: int) -> pd.DataFrame:
    from greenroute.bench.runner import prepare_checked, run_prepared
    from greenroute.data.paths import resolve_data_dir
    from greenroute.scenarios.registry import resolve_scenario

    root = resolve_data_dir(data_dir)
    rows = []
    for week, start in WEEKS.items():
        sc = dataclasses.replace(resolve_scenario("au-edge", days=days), start_utc=start)
        prepared, _ = prepare_checked(sc, seed=seed, data_dir=root)  # one week, every planner
        runs = planners(horizon, None if root is None else str(root))
        for label, pol, opts in [("local-only", "local-only", {}), *runs]:
            t0 = time.perf_counter()
            res = run_prepared(prepared, pol, seed=seed, policy_options=opts)
            m = res.metrics
            row = {"week": week, "planner": label, "cooling": opts.get("cooling_model", "-")}
            row.update({k: float(m[k]) for k in METRICS})
            row["cost_aud"] = row["cost_usd"] / AUD_TO_USD
            row["wall_s"] = time.perf_counter() - t0
            rows.append(row)
            print(f"  {week} {label:>14} {row['cooling']:>5}: cooling "
                  f"{row['cooling_energy_kwh']:.2f} kWh, cost {row['cost_usd']:.3f} US$, "
                  f"{row['wall_s']:.0f} s", flush=True)  # fmt: skip
    return pd.DataFrame(rows)


def savings(df: pd.DataFrame) -> pd.DataFrame:
    """Per week and planner: (blind - aware) / blind in % (positive = awareness saves)."""
    out = []
    for (week, planner), g in df[df.cooling != "-"].groupby(["week", "planner"], sort=False):
        aware = g[g.cooling == "aware"].iloc[0]
        blind = g[g.cooling == "blind"].iloc[0]
        row = {"week": week, "planner": planner}
        for k in ("cooling_energy_kwh", "energy_kwh", "cost_usd", "carbon_kg", "ttft_mean_s",
                  "water_m3"):  # fmt: skip
            row[f"{k}_saved_pct"] = 100.0 * (blind[k] - aware[k]) / blind[k]
        row["cooling_saved_kwh"] = blind["cooling_energy_kwh"] - aware["cooling_energy_kwh"]
        row["cost_saved_aud"] = blind["cost_aud"] - aware["cost_aud"]
        out.append(row)
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m greenroute.bench.seed004", description=__doc__)
    ap.add_argument("--out", type=Path, default=None, help="write results.csv/savings.csv/json")
    ap.add_argument("--data-dir", default=None, help="real data (default $GREENROUTE_DATA_DIR)")
    ap.add_argument("--days", type=float, default=7.0, help="days per week run (default 7)")
    ap.add_argument("--horizon", type=int, default=16, help="admm-H / lp-mpc look-ahead, epochs")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from greenroute.data.paths import resolve_data_dir
    from greenroute.policies.optimize.blind import fleet_mean_factors, year_window
    from greenroute.scenarios.au_edge import AU_EDGE_REGIONS

    root = resolve_data_dir(args.data_dir)
    bf = fleet_mean_factors(AU_EDGE_REGIONS, DATA_YEAR, root)
    print(f"blind planner: PUE {bf.pue:.4f}, on-site water {bf.water_onsite_l_per_it_kwh:.3f} "
          f"L/IT kWh ({bf.basis})")  # fmt: skip
    start, hours = year_window(DATA_YEAR)
    pue_year, _ = site_pue(AU_EDGE_REGIONS, start, hours, root)
    print("site PUE (aware model):")
    print(f"  {'site':>11} {'2024 mean':>9}" + "".join(f" {w.split()[0]:>14}" for w in WEEKS))
    week_pue = {w: site_pue(AU_EDGE_REGIONS, s, int(args.days * 24), root) for w, s in
                WEEKS.items()}  # fmt: skip
    for i, r in enumerate(AU_EDGE_REGIONS):
        cells = "".join(f" {week_pue[w][0][i]:>6.3f} ({week_pue[w][1][i]:4.1f}°C)" for w in WEEKS)
        print(f"  {r:>11} {pue_year[i]:>9.3f}{cells}")
    print("(in brackets: mean wet bulb)")
    t0 = time.perf_counter()
    df = run_all(None if root is None else str(root), args.days, args.horizon, args.seed)
    sv = savings(df)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 30)
    show = df.drop(columns=["wall_s"]).copy()
    print("\nresults (cost in US$ and A$ at 1 A$ = 0.63056 US$):")
    print(show.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print("\nwhat temperature awareness saves, (blind - aware) / blind, %:")
    print(sv.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print("\n" + PAPER_CLAIM)
    print(f"total wall time {time.perf_counter() - t0:.0f} s")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out / "results.csv", index=False)
        sv.to_csv(args.out / "savings.csv", index=False)
        meta = {"data_year": DATA_YEAR, "weeks": {k: str(v) for k, v in WEEKS.items()},
                "days": args.days, "horizon": args.horizon, "seed": args.seed,
                "data_dir": None if root is None else str(root), "blind": dataclasses.asdict(bf),
                "site_pue_year": dict(zip(AU_EDGE_REGIONS, map(float, pue_year), strict=True)),
                "paper_claim": PAPER_CLAIM, "aud_to_usd": AUD_TO_USD}  # fmt: skip
        (args.out / "seed004.json").write_text(json.dumps(meta, indent=1))
        print(f"wrote {args.out}/results.csv, savings.csv, seed004.json")
    return 0 if np.isfinite(df[list(METRICS)].to_numpy()).all() else 1


if __name__ == "__main__":
    raise SystemExit(main())
