"""Pareto fronts, hypervolume (pymoo HV) and the ``greenroute pareto`` command."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("pymoo")

from greenroute.bench.pareto import (
    METRICS,
    REFERENCE_MARGIN,
    ParetoPoint,
    analyse,
    hypervolume,
    nadir,
    non_dominated,
    pareto_sweep,
    reference_point,
    weight_set,
)
from greenroute.cli import app
from greenroute.core.errors import ConfigError
from greenroute.core.objective import PRESETS

runner = CliRunner()


# ------------------------------------------------------------------ hypervolume
def test_hypervolume_2d_hand_computed():
    ref = np.array([1.0, 1.0])
    assert hypervolume([[0.5, 0.5]], ref, normalised=False) == pytest.approx(0.25)
    # union of [0.5,1]x[0.5,1] and [0.25,1]x[0.75,1]: 0.25 + 0.25 * 0.25
    two = [[0.5, 0.5], [0.25, 0.75]]
    assert hypervolume(two, ref, normalised=False) == pytest.approx(0.3125)
    # a dominated point adds nothing; a point on the reference boundary adds nothing
    assert hypervolume([*two, [0.6, 0.8], [0.1, 1.0]], ref, normalised=False) == pytest.approx(
        0.3125
    )
    # normalised: divide by the reference point first -> share of the box [0, ref]
    assert hypervolume([[1.0, 2.0]], np.array([2.0, 4.0])) == pytest.approx(0.25)
    assert hypervolume([[1.0, 2.0]], np.array([2.0, 4.0]), normalised=False) == pytest.approx(2.0)


def test_hypervolume_4d_hand_computed():
    ref = np.ones(4)
    a = [0.5, 0.5, 0.5, 0.5]
    b = [0.25, 0.75, 0.5, 0.5]
    assert hypervolume([a], ref, normalised=False) == pytest.approx(0.5**4)  # hyperrectangle
    vb = 0.75 * 0.25 * 0.5 * 0.5
    overlap = 0.5 * 0.25 * 0.5 * 0.5  # box above max(a, b) = (0.5, 0.75, 0.5, 0.5)
    assert hypervolume([a, b], ref, normalised=False) == pytest.approx(0.0625 + vb - overlap)
    # units do not matter once normalised by the reference point
    scale = np.array([1000.0, 0.01, 50.0, 2.0])
    assert hypervolume(np.array([a, b]) * scale, ref * scale) == pytest.approx(0.078125)
    assert hypervolume(np.zeros((0, 4)), ref) == 0.0


def test_non_dominated_hand_made():
    pts = np.array(
        [
            [1.0, 5.0],  # 0 front
            [2.0, 3.0],  # 1 front
            [2.0, 4.0],  # 2 dominated by 1
            [4.0, 1.0],  # 3 front
            [4.0, 1.0],  # 4 equal to 3: not dominated
            [5.0, 5.0],  # 5 dominated
            [0.5, np.nan],  # 6 not finite: never on the front
        ]
    )
    assert non_dominated(pts).tolist() == [True, True, False, True, True, False, False]
    np.testing.assert_array_equal(nadir(pts), [5.0, 5.0])
    # the reference point lies 10 % beyond the worst observed value (pareto module docstring)
    assert REFERENCE_MARGIN == 0.1
    np.testing.assert_allclose(reference_point(pts), [5.5, 5.5], rtol=1e-12)
    np.testing.assert_allclose(reference_point([[-2.0, 0.0], [-4.0, 0.0]]), [-1.8, 0.0])


# ------------------------------------------------------------------ weights
def test_weight_set_corners_first_sum_to_one_deterministic():
    ws = weight_set(20, seed=3)
    assert len(ws) == 20
    corners = [PRESETS[k] for k in ("min-carbon", "min-water", "min-cost", "min-latency")]
    assert ws[:4] == corners
    assert ws[4] == PRESETS["balanced"]
    for w in ws:
        assert w.carbon + w.water + w.cost + w.latency == pytest.approx(1.0, abs=1e-9)
        assert min(w.carbon, w.water, w.cost, w.latency) >= 0
        assert w.slo_penalty == PRESETS["balanced"].slo_penalty
    assert ws == weight_set(20, seed=3)
    assert weight_set(2) == corners[:2]
    assert weight_set(15, seed=1) == weight_set(15, seed=2)  # structured part needs no seed
    assert len({(w.carbon, w.water, w.cost, w.latency) for w in ws}) == 20
    with pytest.raises(ConfigError):
        weight_set(0)


def test_analyse_marks_fronts_and_hv_all_covers_each():
    def pt(policy, *m):
        return ParetoPoint(policy, None, dict(zip(METRICS, m, strict=True)))

    points = [
        pt("a", 1.0, 1.0, 1.0, 2.0),
        pt("a", 2.0, 2.0, 2.0, 1.0),
        pt("b", 1.5, 1.5, 1.5, 1.5),
        pt("b", 3.0, 3.0, 3.0, 3.0),
    ]
    ref, hv = analyse(points, ["a", "b"])
    assert ref == pytest.approx(dict(zip(METRICS, (3.3, 3.3, 3.3, 3.3), strict=True)), rel=1e-12)
    assert [p.non_dominated for p in points] == [True, True, True, False]
    assert [p.non_dominated_in_policy for p in points] == [True, True, True, False]
    # by hand, normalised by the reference 3.3: a = two boxes minus their overlap; b = the box
    # of its 1.5 point (the box of its 3.0 point lies inside it)
    one, two, mid = 1 - 1 / 3.3, 1 - 2 / 3.3, 1 - 1.5 / 3.3
    va = one**3 * two + two**3 * one - two**4
    assert hv["a"] == pytest.approx(va, rel=1e-12)
    assert hv["b"] == pytest.approx(mid**4, rel=1e-12)
    assert hv["all"] >= max(hv["a"], hv["b"])


def test_two_weight_vectors_give_positive_hypervolume():
    """Two corner weight vectors: each point is the worst in some metric. With the reference
    point at the worst values both lay on its boundary and the policy got HV 0."""

    def pt(policy, *m):
        return ParetoPoint(policy, None, dict(zip(METRICS, m, strict=True)))

    points = [pt("lp-mpc", 1.0, 4.0, 2.0, 2.0), pt("lp-mpc", 4.0, 1.0, 2.0, 2.0)]
    ref, hv = analyse(points, ["lp-mpc"])
    assert ref == pytest.approx(dict(zip(METRICS, (4.4, 4.4, 2.2, 2.2), strict=True)))
    # normalised: (1/4.4, 4/4.4, 2/2.2, 2/2.2) and (4/4.4, 1/4.4, 2/2.2, 2/2.2); each box is
    # (1 - 1/4.4)(1 - 4/4.4)(1 - 2/2.2)^2, the overlap (1 - 4/4.4)^2 (1 - 2/2.2)^2
    lo, hi, mid = 1 - 1 / 4.4, 1 - 4 / 4.4, 1 - 2 / 2.2
    assert hv["lp-mpc"] == pytest.approx(2 * lo * hi * mid**2 - hi**2 * mid**2, rel=1e-12)
    assert hv["lp-mpc"] > 0
    # the old reference point (the nadir itself) gives 0 for both points
    assert hypervolume([p.vector() for p in points], nadir([p.vector() for p in points])) == 0


def test_pareto_sweep_two_weight_vectors_on_demo():
    res = pareto_sweep("demo", ("lp-mpc",), 2, days=0.05, fidelity="fluid")
    assert len(res.points) == 2
    assert res.hypervolume["lp-mpc"] > 0
    # days is the simulated span: 0.05 d = 72 min -> 5 epochs of 15 min = 75 min
    assert res.days == pytest.approx(5 * 900 / 86400, rel=1e-12)
    worst = np.array([p.vector() for p in res.points]).max(axis=0)
    np.testing.assert_allclose([res.nadir[k] for k in METRICS], worst, rtol=1e-12)
    np.testing.assert_allclose([res.reference_point[k] for k in METRICS], 1.1 * worst, rtol=1e-12)


# ------------------------------------------------------------------ CLI
def test_pareto_cli_json_shape():
    res = runner.invoke(
        app,
        [
            "pareto",
            "--scenario",
            "demo",
            "--policies",
            "lp-mpc,local-only",
            "--sweep-weights",
            "3",
            "--days",
            "0.05",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert payload["scenario"] == "demo"
    assert set(payload["reference_point"]) == set(METRICS)
    pts = payload["points"]
    assert [p["policy"] for p in pts] == ["lp-mpc"] * 3 + ["local-only"]
    assert [p["weights"]["carbon"] for p in pts[:3]] == [1.0, 0.0, 0.0]
    assert pts[3]["weights"] is None
    for p in pts:
        assert set(p["metrics"]) == set(METRICS) and isinstance(p["non_dominated"], bool)
    f = np.array([[p["metrics"][k] for k in METRICS] for p in pts])
    np.testing.assert_allclose(
        [payload["reference_point"][k] for k in METRICS], 1.1 * f.max(axis=0), rtol=1e-12
    )
    np.testing.assert_allclose([payload["nadir"][k] for k in METRICS], f.max(axis=0), rtol=1e-12)
    front = np.array([[p["metrics"][k] for k in METRICS] for p in payload["front"]])
    assert len(front) == sum(p["non_dominated"] for p in pts) >= 1
    assert non_dominated(front).all()  # front members are mutually non-dominated
    for i in range(len(front)):
        for j in range(len(front)):
            if i != j:
                assert not ((front[i] <= front[j]).all() and (front[i] < front[j]).any())
    hv = payload["hypervolume"]
    assert set(hv) == {"lp-mpc", "local-only", "all"}
    assert all(hv["all"] >= hv[k] - 1e-15 for k in hv)
    assert hv["all"] > 0


def test_pareto_cli_table():
    res = runner.invoke(
        app,
        ["pareto", "--policies", "local-only,nearest", "--sweep-weights", "1", "--days", "0.05"],
    )
    assert res.exit_code == 0, res.output
    for needle in ("reference", "Hypervolume", "local-only", "nearest", "worst observed"):
        assert needle in res.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--policies", "lp-mpc,nope"], "unknown policy 'nope'"),
        (["--sweep-weights", "0"], "--sweep-weights must be >= 1"),
        (["--policies", " , "], "--policies is empty"),
    ],
)
def test_pareto_user_errors(args, needle):
    res = runner.invoke(app, ["pareto", "--days", "0.05", *args])
    assert res.exit_code == 2, res.output
    assert needle in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.output + res.stderr
