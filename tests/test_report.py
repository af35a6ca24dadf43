"""``greenroute report``: inputs read from run/compare directories, the statistics and figures,
the HTML file and the image files, bad inputs, and the notebook views of results.

Inputs are small real runs: the demo scenario (embedded signals), one day, fluid model, two
seeds, written with the same writers ``greenroute run/compare --out`` use.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import greenroute
from greenroute.bench.report import make_report, metrics_summary
from greenroute.bench.report_data import (
    improvements,
    load_dir,
    mean_ci,
    metric_table,
    oracle_gaps,
    pareto_table,
)
from greenroute.bench.report_figures import all_figures, routing_shares
from greenroute.cli import app
from greenroute.core.errors import ConfigError, DataFormatError
from greenroute.sim.output import write_compare, write_run

pytest.importorskip("plotly")
pytest.importorskip("pymoo")

POLICIES = ["local-only", "lowest-carbon", "least-loaded", "oracle"]
SEEDS = (0, 1)
FIGURES = ["signals", "shares", "metrics", "improvement", "pareto", "oracle"]
runner = CliRunner()


@pytest.fixture(scope="module")
def results() -> dict:
    return {
        s: greenroute.compare("demo", POLICIES, days=1, fidelity="fluid", seed=s) for s in SEEDS
    }


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory, results):
    """A folder of compare directories, one per seed (what a report over seeds reads)."""
    root = tmp_path_factory.mktemp("report-input")
    for s, res in results.items():
        write_compare(res, root / f"seed{s}")
    return root


# ------------------------------------------------------------------ statistics
def test_mean_ci_is_the_student_t_interval():
    # values 1, 2, 3, 4: mean 2.5, s = sqrt(5/3) = 1.29099; t(0.975, 3) = 3.18245 (tables)
    mean, half, n = mean_ci([1.0, 2.0, 3.0, 4.0, float("nan"), None])
    assert (mean, n) == (2.5, 4)
    assert half == pytest.approx(3.182446 * math.sqrt(5 / 3) / 2, rel=1e-6)
    one = mean_ci([7.0])
    assert one[0] == 7.0 and math.isnan(one[1]) and one[2] == 1


def test_routing_shares_by_hand():
    t0, t1 = pd.Timestamp("2023-07-01", tz="UTC"), pd.Timestamp("2023-07-01 00:15", tz="UTC")
    ep = pd.DataFrame(
        {
            "epoch": [0, 1, 0, 1],
            "time_utc": [t0, t1, t0, t1],
            "region": ["A", "A", "B", "B"],
            "requests_dispatched": [3.0, 0.0, 1.0, 0.0],
        }
    )
    share = routing_shares(ep)
    assert share.loc[t0].tolist() == [0.75, 0.25]
    assert share.loc[t1].tolist() == [0.0, 0.0]  # nothing dispatched: no share


# ------------------------------------------------------------------ reading
def test_compare_dir_reads_back_every_policy(tmp_path, results):
    write_compare(results[0], tmp_path / "cmp")
    inp = load_dir(tmp_path / "cmp")
    assert inp.kind == "compare"
    assert inp.labels == POLICIES  # in the order compared (summary.json), not alphabetical
    by = {r.policy: r for r in inp.runs}
    for res in results[0]:
        assert by[res.policy].metrics["carbon_kg"] == res.metrics["carbon_kg"]
        assert len(by[res.policy].epochs) == len(res.epochs)


def test_run_dir_reads_back(tmp_path, results):
    write_run(results[0][1], tmp_path / "run")
    inp = load_dir(tmp_path / "run")
    assert inp.kind == "run" and inp.labels == ["lowest-carbon"] and inp.seeds == [0]
    assert "one seed (0): no confidence intervals" in inp.notes


def test_seeds_group_into_one_series_with_its_interval(sweep_dir, results):
    inp = load_dir(sweep_dir)
    assert inp.kind == "collection" and inp.seeds == [0, 1]
    assert inp.labels == POLICIES  # the seed does not split a series
    t = metric_table(inp, ["carbon_kg"]).set_index("label")
    a, b = (results[s].by_policy()["lowest-carbon"].metrics["carbon_kg"] for s in SEEDS)
    assert t.loc["lowest-carbon", "n"] == 2
    assert t.loc["lowest-carbon", "mean"] == pytest.approx((a + b) / 2, rel=1e-12)
    # n = 2: s = |a - b| / sqrt(2), half = t(0.975, 1) x s / sqrt(2), t(0.975, 1) = 12.7062
    assert t.loc["lowest-carbon", "ci95"] == pytest.approx(12.7062047 * abs(a - b) / 2, rel=1e-6)
    assert a != b  # the seeds really differ, so the interval is not trivially 0


# ------------------------------------------------------------------ figures
def test_improvement_is_paired_by_seed(sweep_dir, results):
    imp = improvements(load_dir(sweep_dir))
    expected = []
    for s in SEEDS:
        by = results[s].by_policy()
        base, x = by["local-only"].metrics["carbon_kg"], by["lowest-carbon"].metrics["carbon_kg"]
        expected.append(100 * (base - x) / base)
    assert imp["carbon_kg"]["lowest-carbon"] == pytest.approx(expected, rel=1e-12)
    assert "local-only" not in imp["carbon_kg"]  # the baseline is not compared with itself


def test_pareto_table_front_and_single_point_hypervolume(sweep_dir):
    from greenroute.bench.pareto import METRICS, non_dominated

    table, front_hv = pareto_table(load_dir(sweep_dir))
    pts = table[list(METRICS)].to_numpy()
    assert table["on_front"].tolist() == non_dominated(pts).tolist()
    ref = pts.max(axis=0) * 1.1  # all metrics positive: worst + 10 % of |worst|
    # one point's hypervolume is its box up to the reference, normalised: prod(1 - f / ref)
    expected = np.prod(1 - pts / ref, axis=1)
    assert table["hypervolume"].to_numpy() == pytest.approx(expected, rel=1e-9)
    assert front_hv >= table["hypervolume"].max() - 1e-12  # the front dominates each point


def test_oracle_gap_from_the_runs(sweep_dir):
    inp = load_dir(sweep_dir)
    gaps = oracle_gaps(inp)
    assert gaps["oracle_savings_captured_pct"]["oracle"] == pytest.approx([100.0, 100.0])
    assert gaps["oracle_savings_captured_pct"]["local-only"] == pytest.approx([0.0, 0.0])
    assert "oracle" not in gaps["j_above_oracle_pct"]
    for r in inp.runs:
        if r.policy == "lowest-carbon":
            j, jo = r.metrics["objective"], r.metrics["oracle_objective"]
            assert 100 * (j - jo) / jo in gaps["j_above_oracle_pct"]["lowest-carbon"]


def test_oracle_share_computed_from_paired_runs_matches_compare(sweep_dir):
    """Sweep cells lack compare's oracle shares: computed from the same seed's local-only and
    oracle runs they equal what greenroute.compare (api.add_oracle_gaps) reported."""
    inp = load_dir(sweep_dir)
    keys = ["oracle_savings_captured_pct", "oracle_carbon_savings_captured_pct"]
    want = oracle_gaps(inp)
    for r in inp.runs:
        for k in [*keys, "oracle_objective"]:
            del r.metrics[k]
    got = oracle_gaps(inp)
    for k in keys:
        assert set(got[k]) == set(POLICIES)
        for label in POLICIES:
            assert got[k][label] == pytest.approx(want[k][label], rel=1e-9, abs=1e-9)


def test_figures_have_one_trace_per_region_and_series(sweep_dir):
    inp = load_dir(sweep_dir)
    figs = {f.slug: f.fig for f in all_figures(inp)}
    assert list(figs) == FIGURES
    n_regions = 3  # demo: DE-LU, US-CAL-CISO, SG
    assert len(figs["signals"].data) == 3 * n_regions  # CI, price, temperature per region
    assert len(figs["shares"].data) == len(POLICIES) * n_regions
    bars = figs["metrics"].data
    assert len(bars) == 6 and all(list(b.x) == inp.labels for b in bars)
    carbon = next(b for b in bars if b.xaxis == "x2")  # second panel: carbon
    t = metric_table(inp, ["carbon_kg"]).set_index("label")
    assert list(carbon.y) == pytest.approx(t.loc[inp.labels, "mean"].tolist())
    assert list(carbon.error_y.array) == pytest.approx(t.loc[inp.labels, "ci95"].tolist())


# ------------------------------------------------------------------ the HTML file
def test_html_report_is_self_contained(sweep_dir, tmp_path):
    out = tmp_path / "r" / "report.html"
    info = make_report(sweep_dir, out)
    text = out.read_text()
    assert info["figures"] == FIGURES
    # plotly's JavaScript is inline; nothing is loaded from the network
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=[\"']?(https?:)?//", text)
    assert text.count("Plotly.newPlot(") == len(FIGURES) and len(text) > 3_000_000
    for label in POLICIES:
        assert f"manifest: {label} seed 1" in text
    _, hv = pareto_table(load_dir(sweep_dir))
    assert f"hypervolume {hv:.4f}" in text
    assert list(tmp_path.joinpath("r").iterdir()) == [out]  # no temporary file left


def test_metrics_summary_rows(sweep_dir):
    s = metrics_summary(load_dir(sweep_dir)).set_index("policy")
    assert set(s.index) == set(POLICIES) and (s["seeds"] == 2).all()
    assert " ± " in s.loc["lowest-carbon", "carbon_kg"]


def _cli(*args):
    return runner.invoke(app, list(map(str, args)))


def test_cli_writes_html_and_refuses_to_overwrite(sweep_dir, tmp_path):
    out = tmp_path / "rep.html"
    r = _cli("report", sweep_dir / "seed0", "--out", out)
    assert r.exit_code == 0, r.output
    assert "wrote" in r.stdout and f"{len(FIGURES)} figures" in r.stdout
    first = out.stat().st_mtime_ns
    r = _cli("report", sweep_dir / "seed0", "--out", out)
    assert r.exit_code == 2 and "use --force" in r.stderr
    assert out.stat().st_mtime_ns == first
    assert _cli("report", sweep_dir / "seed0", "--out", out, "--force").exit_code == 0


@pytest.mark.parametrize("case", ["missing", "file", "empty", "bad-json", "bad-parquet"])
def test_bad_input_is_one_error_and_writes_nothing(tmp_path, results, case):
    src = tmp_path / "in"
    if case == "file":
        src.write_text("x")
    elif case == "empty":
        src.mkdir()
    elif case in ("bad-json", "bad-parquet"):
        write_run(results[0][0], src)
        name = "manifest.json" if case == "bad-json" else "epochs.parquet"
        (src / name).write_text("{not json")
    out = tmp_path / "out" / "report.html"
    r = _cli("report", src, "--out", out)
    assert r.exit_code == 2
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr
    assert not out.parent.exists()
    with pytest.raises(ConfigError if case in ("missing", "file", "empty") else DataFormatError):
        load_dir(src)


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_image_formats(sweep_dir, tmp_path, fmt):
    out = tmp_path / "figs"
    info = make_report(sweep_dir / "seed1", out, fmt=fmt)
    listing = json.loads((out / "figures.json").read_text())["figures"]
    assert [f["file"] for f in listing] == [f"{s}.{fmt}" for s in info["figures"]]
    for f in listing:
        head = (out / f["file"]).read_bytes()[:200]
        assert head.startswith(b"\x89PNG") if fmt == "png" else b"<svg" in head
    assert info["engine"] in ("kaleido", "matplotlib")
    with pytest.raises(ConfigError, match="--force"):
        make_report(sweep_dir / "seed1", out, fmt=fmt)


def test_unknown_format_lists_the_choices(sweep_dir, tmp_path):
    r = _cli("report", sweep_dir, "--out", tmp_path / "x", "--format", "pdf")
    assert r.exit_code == 2 and "valid choices: html, png, svg" in r.stderr


# ------------------------------------------------------------------ run/compare and notebooks
def test_run_prints_the_report_command(tmp_path):
    out = tmp_path / "run"
    r = _cli("run", "--scenario", "demo", "--days", "0.25", "--fidelity", "fluid", "--out", out)
    assert r.exit_code == 0, r.output
    assert f"greenroute report {out} --out {tmp_path / 'run-report.html'}" in r.stderr


def test_notebook_views(results):
    cmp = results[0]
    html_text = cmp._repr_html_()
    assert html_text.count("<tr>") == 1 + len(POLICIES)
    assert f"{cmp[1].metrics['carbon_kg']:.4g}" in html_text
    one = cmp[1]
    assert "lowest-carbon" in one._repr_html_()
    shares = one.plot()
    assert len(shares.data) == 3 and all(t.stackgroup for t in shares.data)
    bars = cmp.plot()
    assert len(bars.data) == 6 and list(bars.data[0].x) == POLICIES
    assert len(cmp.plot("pareto").data) == 2 * len(POLICIES)
    with pytest.raises(ConfigError, match="valid choices"):
        cmp.plot("pie")


def test_matplotlib_redraw_keeps_panels_and_values(sweep_dir):
    from greenroute.bench.report_figures import metric_bars_figure, shares_figure
    from greenroute.bench.report_static import to_matplotlib

    inp = load_dir(sweep_dir)
    fig = metric_bars_figure(inp).fig
    axes = to_matplotlib(fig).axes
    assert len(axes) == 6
    for ax, bar in zip(axes, fig.data, strict=True):
        assert [p.get_height() for p in ax.patches] == pytest.approx(list(bar.y))
        assert [t.get_text() for t in ax.get_xticklabels()] == POLICIES
    shares = to_matplotlib(shares_figure(inp).fig).axes
    assert len(shares) == len(POLICIES)
    for ax in shares:  # stacked shares reach 100 % where anything was dispatched
        assert ax.collections[-1].get_paths()[0].vertices[:, 1].max() == pytest.approx(100)


def test_table_numbers_are_readable():
    from greenroute.bench.report import _num

    assert [_num(81690.3), _num(120.4, 2), _num(0.2486), _num(3e-5), _num(float("nan"))] == [
        "81,690",
        "120",
        "0.2486",
        "3e-05",
        "–",
    ]
