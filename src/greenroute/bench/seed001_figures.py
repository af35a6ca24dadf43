"""Tables, hypervolumes, figures and headline numbers of the seed 001 reproduction
(``bench/seed001.py`` runs the simulations; this module only reads their ``runs.csv`` frame).

Hypervolume (§6.1): each framework's points are (carbon_kg, water_m3, cost_usd, ttft_mean_s),
all minimised; the reference point is the worst observed value of each metric over every
point of the figure, moved 10 % beyond it and used to normalise (``bench/pareto.py``: without
the margin the worst point in any metric adds no volume). Points per framework:

- heuristics (Helix, Splitwise, NSGA-II, PerLLM, SLIT, local-only): one point, the mean over
  seeds, so its hypervolume is the hyperrectangle between it and the reference point;
- RL baselines (QLearning, DDQN, ActorCritic): the archive of their runs, one point per seed
  (§6.1 archives the best points "along the confidence interval", 10-15 of them);
- MARLIN: the front of every variant's run (five variants x seeds; §6.1: 40 points);
- LP-MPC and the oracle: the front of their runs at the five weight presets x seeds (they are
  weight-parametrised like MARLIN's variants).

Fig. 6 normalises each ablation's hypervolume (MARLIN-Balanced's runs over the seeds, one
ablation switched off) by the full framework's, under one reference point for all of them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.bench.pareto import METRICS as HV_METRICS
from greenroute.bench.pareto import hypervolume, reference_point

FIG_METRICS = (
    ("ttft_mean_s", "TTFT (s)"),
    ("carbon_kg", "carbon (kg CO2e)"),
    ("water_m3", "water (m3)"),
    ("cost_usd", "energy cost ($)"),
)
HEURISTICS = ("helix", "splitwise", "nsga2", "perllm", "slit", "local-only")
RL = ("qlearning", "ddqn", "actor-critic")
FRONTS = ("lp-mpc", "oracle")
PAPER = {  # seed 001 §6.1 and §6.3
    "MARLIN-Balanced vs SLIT TTFT %": -2.29,
    "MARLIN-Balanced vs SLIT carbon %": -61.07,
    "MARLIN-Balanced vs SLIT water %": -81.11,
    "MARLIN-Balanced vs SLIT cost %": -60.90,
    "SLIT HV share of MARLIN %": 40.09,
    "best RL baseline HV share of MARLIN %": 68.27,
    "no-veto ablation HV change %": -14.9,
    "no-blend ablation HV change %": -66.5,
}


def _tags(df: pd.DataFrame) -> pd.Series:
    """The run's tag, "" where none: an all-empty tag column reads back from CSV as float NaN,
    and pandas will refuse to fill a float column with a string."""
    return df.tag.astype(object).fillna("")


def ci95(values) -> tuple[float, float, int]:
    """Mean, 95 % CI half-width (Student t, n - 1 dof; 0 for one value) and n
    (``report_data.mean_ci``, which leaves the half-width NaN for one value)."""
    from greenroute.bench.report_data import mean_ci

    mean, half, n = mean_ci(np.asarray(values, dtype=float), level=0.95)
    return mean, (0.0 if n == 1 else half), n


def _main_rows(df: pd.DataFrame, scenario: str = "marlin8") -> pd.DataFrame:
    return df[(df.scenario == scenario) & (df.weights == "balanced") & (_tags(df) == "")]


def metric_table(df: pd.DataFrame, by: tuple[str, ...] = ("label",)) -> pd.DataFrame:
    """Mean and CI of each figure metric per group."""
    rows = []
    for key, g in df.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key, strict=True))
        row["policy"] = g.policy.iloc[0]
        for m, _ in FIG_METRICS:
            row[m], row[f"{m}_ci95"], row["n_seeds"] = ci95(g[m])
        rows.append(row)
    return pd.DataFrame(rows)


def framework_points(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each Fig. 4 framework's points ``[n, 4]`` (module docstring)."""
    m8 = df[(df.scenario == "marlin8") & (_tags(df) == "")]
    cols = list(HV_METRICS)
    out: dict[str, np.ndarray] = {}
    marlin = m8[m8.policy.str.startswith("marlin") & (m8.weights == "balanced")]
    if len(marlin):
        out["MARLIN"] = marlin[cols].to_numpy(float)
    for p in HEURISTICS:
        g = m8[(m8.policy == p) & (m8.weights == "balanced")]
        if len(g):
            out[g.label.iloc[0]] = g[cols].to_numpy(float).mean(axis=0, keepdims=True)
    for p in RL:
        g = m8[(m8.policy == p) & (m8.weights == "balanced")]
        if len(g):
            out[g.label.iloc[0]] = g[cols].to_numpy(float)
    for p in FRONTS:
        g = m8[m8.policy == p]
        if len(g):
            out[g.label.iloc[0].split(" [")[0]] = g[cols].to_numpy(float)
    return out


def hv_table(points: dict[str, np.ndarray], base: str = "MARLIN") -> pd.DataFrame:
    """Normalised hypervolume per framework and its share of ``base``'s (%)."""
    if not points:
        return pd.DataFrame()
    ref = reference_point(np.vstack(list(points.values())))
    hv = {k: hypervolume(v, ref) for k, v in points.items()}
    b = hv.get(base)
    return pd.DataFrame(
        [
            {
                "framework": k,
                "n_points": len(points[k]),
                "hypervolume": hv[k],
                f"share_of_{base}_pct": 100 * hv[k] / b if b else float("nan"),
            }
            for k in points
        ]
    )


def ablation_table(df: pd.DataFrame) -> pd.DataFrame:
    g = df[(df.scenario == "marlin8") & (df.policy == "marlin-balanced")]
    if g.empty or not (_tags(g) != "").any():
        return pd.DataFrame()
    pts = {
        (t or "full_baseline"): s[list(HV_METRICS)].to_numpy(float)
        for t, s in g.groupby(_tags(g), sort=False)
    }
    t = hv_table(pts, base="full_baseline")
    return t.rename(columns={"share_of_full_baseline_pct": "normalised_hv_pct"})


def headline(df: pd.DataFrame) -> list[dict]:
    """The paper's headline numbers beside ours (NaN where a policy did not run)."""
    ours: dict[str, float] = {k: float("nan") for k in PAPER}
    tab = metric_table(_main_rows(df)).set_index("policy") if len(df) else pd.DataFrame()
    if {"marlin-balanced", "slit"} <= set(tab.index):
        for m, name in (
            ("ttft_mean_s", "TTFT"),
            ("carbon_kg", "carbon"),
            ("water_m3", "water"),
            ("cost_usd", "cost"),
        ):
            a, b = tab.loc["marlin-balanced", m], tab.loc["slit", m]
            ours[f"MARLIN-Balanced vs SLIT {name} %"] = 100 * (a - b) / b
    hv = hv_table(framework_points(df))
    if len(hv) and "MARLIN" in set(hv.framework):
        share = hv.set_index("framework")["share_of_MARLIN_pct"]
        ours["SLIT HV share of MARLIN %"] = float(share.get("SLIT", np.nan))
        rl = [share[k] for k in ("QLearning", "DDQN", "ActorCritic") if k in share]
        ours["best RL baseline HV share of MARLIN %"] = max(rl) if rl else float("nan")
    ab = ablation_table(df)
    if len(ab):
        s = ab.set_index("framework")["normalised_hv_pct"]
        for a in ("veto", "blend"):
            if f"no-{a}" in s:
                ours[f"no-{a} ablation HV change %"] = float(s[f"no-{a}"] - 100.0)
    return [{"quantity": k, "paper": PAPER[k], "ours": ours[k]} for k in PAPER]


def headline_text(rows: list[dict]) -> str:
    lines = [f"{'seed 001 headline':48s} {'paper':>9s} {'ours':>9s}"]
    for r in rows:
        lines.append(f"{r['quantity']:48s} {r['paper']:9.2f} {r['ours']:9.2f}")
    return "\n".join(lines)


# ------------------------------------------------------------------ figures
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fig3(tab: pd.DataFrame, path: Path) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.5))
    for ax, (m, title) in zip(axes, FIG_METRICS, strict=True):
        ax.bar(
            tab.label,
            tab[m],
            yerr=tab[f"{m}_ci95"],
            capsize=3,
            color=["tab:green" if p.startswith("marlin") else "tab:gray" for p in tab.policy],
        )
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=75, labelsize=7)
    fig.suptitle("Seed 001 Fig. 3 on marlin8 (mean, 95 % CI over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bar_figure(tab: pd.DataFrame, x: str, y: str, title: str, path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.bar(tab[x], tab[y], color="tab:blue")
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=60, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fig5(tab: pd.DataFrame, path: Path) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.5))
    for ax, (m, title) in zip(axes, FIG_METRICS, strict=True):
        for label, g in tab.groupby("label", sort=False):
            g = g.sort_values("n_dc")
            ax.plot(g.n_dc, g[m], marker="o", label=label, lw=2 if "MARLIN" in label else 1)
            ax.fill_between(g.n_dc, g[m] - g[f"{m}_ci95"], g[m] + g[f"{m}_ci95"], alpha=0.15)
        ax.set_title(title)
        ax.set_xlabel("datacenters")
    axes[-1].legend(fontsize=6, loc="best")
    fig.suptitle("Seed 001 Fig. 5: scaling from 4 to 12 datacenters (95 % CI shaded)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(df: pd.DataFrame, cfg, out: Path) -> list[str]:
    """Write each requested figure's CSV and PNG into ``out``; returns the file names."""
    written: list[str] = []

    def save(tab: pd.DataFrame, name: str) -> None:
        tab.to_csv(out / name, index=False)
        written.append(name)

    if 3 in cfg.figures:
        tab = metric_table(_main_rows(df))
        save(tab, "fig3_metrics.csv")
        fig3(tab, out / "fig3_metrics.png")
        written.append("fig3_metrics.png")
    if 4 in cfg.figures:
        tab = hv_table(framework_points(df))
        save(tab, "fig4_hypervolume.csv")
        bar_figure(
            tab,
            "framework",
            "hypervolume",
            "Seed 001 Fig. 4: normalised Pareto hypervolume on marlin8",
            out / "fig4_hypervolume.png",
        )
        written.append("fig4_hypervolume.png")
    if 5 in cfg.figures:
        rows = df[(df.weights == "balanced") & (_tags(df) == "")]
        tab = metric_table(rows, by=("n_dc", "label"))
        save(tab, "fig5_scaling.csv")
        fig5(tab, out / "fig5_scaling.png")
        written.append("fig5_scaling.png")
    if 6 in cfg.figures:
        tab = ablation_table(df)
        if len(tab):
            save(tab, "fig6_ablation.csv")
            bar_figure(
                tab,
                "framework",
                "normalised_hv_pct",
                "Seed 001 Fig. 6: MARLIN ablations, hypervolume % of full",
                out / "fig6_ablation.png",
            )
            written.append("fig6_ablation.png")
    return written
