"""Seed 004: the bias of mixing two carbon sources in ``au-edge``.

Sydney (AU-NSW) and Melbourne (AU-VIC) carry Electricity Maps' hourly *direct* intensity
(``shared/data``); the five synthesised sites carry the National Greenhouse Accounts (NGA)
2024 scope-2 factors as their annual mean (:mod:`greenroute.data.au_normals`). The two sources
differ in method and period, and the NGA factors of NSW and VIC themselves are well above
Electricity Maps' means for the same grids. This prints, for the data year, each site's mean
intensity as the scenario has it, and what it would be with one source for all seven: NGA
everywhere (Sydney/Melbourne rescaled to their NGA factors), or Electricity Maps-like
everywhere (the five NGA sites scaled by the EM/NGA ratio of the grid they borrow their hourly
shape from, an estimate: there is no Electricity Maps series for them in ``shared/data``).

``python -m greenroute.bench.seed004_carbon [--data-dir DIR] [--year 2024]``
"""

from __future__ import annotations

import argparse

import numpy as np

from greenroute.data.au_normals import GRID_FIGURES

# NGA Factors 2024, Table 1 (scope 2, location-based), kg CO2-e/kWh, for the two states whose
# hourly series come from Electricity Maps; the same source and transcription as the five
# other sites' factors (see the comment above data/au_normals.GRID_FIGURES).
NGA_KG_PER_KWH: dict[str, float] = {"AU-NSW": 0.66, "AU-VIC": 0.77}
G_PER_KG = 1000.0


def site_means(year: int, data_dir: str | None) -> dict[str, float]:
    """Mean carbon intensity (g/kWh) per au-edge site over ``year`` as the scenario has it."""
    from greenroute.data.paths import resolve_data_dir
    from greenroute.policies.optimize.blind import year_window
    from greenroute.scenarios.au_edge import AU_EDGE_REGIONS
    from greenroute.sim.epoch_signals import build_epoch_signals

    start, hours = year_window(year)
    sig = build_epoch_signals(AU_EDGE_REGIONS, start, hours, 3600.0, 0, resolve_data_dir(data_dir))
    means = sig.carbon_intensity_g_per_kwh.mean(axis=0)
    return dict(zip(AU_EDGE_REGIONS, map(float, means), strict=True))


def one_source_tables(means: dict[str, float]) -> dict[str, dict[str, float]]:
    """Mean intensity per site: as mixed, NGA for all, Electricity Maps-like for all."""
    ratio = {k: means[k] / (G_PER_KG * v) for k, v in NGA_KG_PER_KWH.items()}  # EM / NGA
    nga = {k: (G_PER_KG * NGA_KG_PER_KWH[k] if k in NGA_KG_PER_KWH else v)
           for k, v in means.items()}  # fmt: skip
    em = {k: (v if k in NGA_KG_PER_KWH else v * ratio[GRID_FIGURES[k].shape_source])
          for k, v in means.items()}  # fmt: skip
    return {"mixed (scenario)": dict(means), "NGA for all": nga, "EM-like for all": em}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m greenroute.bench.seed004_carbon",
                                 description=__doc__)  # fmt: skip
    ap.add_argument("--data-dir", default=None, help="real data (default $GREENROUTE_DATA_DIR)")
    ap.add_argument("--year", type=int, default=2024)
    args = ap.parse_args(argv)
    means = site_means(args.year, args.data_dir)
    tables = one_source_tables(means)
    print(f"mean carbon intensity {args.year}, g CO2e/kWh (Sydney/Melbourne: Electricity Maps "
          "direct; the five others: NGA 2024 scope 2)")  # fmt: skip
    for k in NGA_KG_PER_KWH:
        print(f"  {k}: Electricity Maps {means[k]:.0f} vs NGA {G_PER_KG * NGA_KG_PER_KWH[k]:.0f}"
              f" -> NGA / EM = {G_PER_KG * NGA_KG_PER_KWH[k] / means[k]:.2f}")  # fmt: skip
    names = list(tables)
    print(f"  {'site':>11}" + "".join(f" {n:>17}" for n in names) + "   rank (mixed / NGA)")
    ranks = {n: {k: i + 1 for i, k in enumerate(sorted(t, key=t.get))} for n, t in tables.items()}
    for k in means:
        cells = "".join(f" {tables[n][k]:>17.0f}" for n in names)
        print(f"  {k:>11}{cells}   {ranks[names[0]][k]} / {ranks[names[1]][k]}")
    sydney = {n: {k: t[k] / t["AU-NSW"] for k in t} for n, t in tables.items()}
    print("  intensity relative to Sydney (what a carbon-weighted planner compares):")
    for k in means:
        print(f"  {k:>11}" + "".join(f" {sydney[n][k]:>17.2f}" for n in names))
    fleet = {n: float(np.mean(list(t.values()))) for n, t in tables.items()}
    print("  fleet mean: " + ", ".join(f"{n} {v:.0f}" for n, v in fleet.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
