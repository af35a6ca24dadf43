"""MARLIN phase 2 (seed 001 Algorithm 2): every step against numbers computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from greenroute.policies.marlin import game as G

A1 = np.array([[1.0, 0.0]])  # one origin, two datacenters: all to DC 0
A2 = np.array([[0.0, 1.0]])  # all to DC 1
PLANS = np.stack([A1, A2])


def test_utility_blend_line5():
    # q = (3, 1): q_tot = 4, weights 0.75 / 0.25
    blended, w = G.utility_blend(PLANS, np.array([3.0, 1.0]))
    assert w.tolist() == [0.75, 0.25]
    assert blended.tolist() == [[0.75, 0.25]]


def test_utility_blend_clips_non_positive_utilities():
    # q = (2, -5) -> (2, floor): agent 1 weighs ~0
    _, w = G.utility_blend(PLANS, np.array([2.0, -5.0]), floor=1e-6)
    assert w[0] == pytest.approx(2.0 / (2.0 + 1e-6), abs=0)
    assert w[1] == pytest.approx(1e-6 / (2.0 + 1e-6), abs=0)


def test_capital_weights_line6():
    assert G.capital_weights(np.array([100.0, 300.0])).tolist() == [0.25, 0.75]
    assert G.capital_weights(np.array([0.0, 0.0])).tolist() == [0.5, 0.5]


def test_project_simplex_by_hand():
    # (0.2, 0.2): theta = (0.4 - 1) / 2 = -0.3 -> (0.5, 0.5)
    assert G.project_simplex(np.array([0.2, 0.2])) == pytest.approx([0.5, 0.5], abs=1e-15)
    # (1.0, 0.5): theta = (1.5 - 1) / 2 = 0.25 -> (0.75, 0.25)
    assert G.project_simplex(np.array([1.0, 0.5])) == pytest.approx([0.75, 0.25], abs=1e-15)
    # (2, 0, -1): only the first stays, theta = 1 -> (1, 0, 0)
    assert G.project_simplex(np.array([2.0, 0.0, -1.0])).tolist() == [1.0, 0.0, 0.0]
    # rows independently
    out = G.project_simplex(np.array([[0.2, 0.2], [1.0, 0.5]]))
    assert out == pytest.approx(np.array([[0.5, 0.5], [0.75, 0.25]]), abs=1e-15)


def test_refine_weights_lines_8_to_10():
    # constant gradient (1, -1), lr 0.05, 5 steps from (0.25, 0.75): stays on the simplex,
    # each step +0.05 / -0.05 -> (0.5, 0.5)
    w = G.refine_weights(np.array([0.25, 0.75]), lambda w: np.array([1.0, -1.0]), 0.05, 5)
    assert w == pytest.approx([0.5, 0.5], abs=1e-12)
    # one step of gradient (10, 0) from (0.5, 0.5): (1.0, 0.5) projected -> (0.75, 0.25)
    w = G.refine_weights(np.array([0.5, 0.5]), lambda w: np.array([10.0, 0.0]), 0.05, 1)
    assert w == pytest.approx([0.75, 0.25], abs=1e-12)


def _linear_utility(values):
    v = np.asarray(values, dtype=float)  # Q_j(a) = a . v_j (one origin)
    return lambda j, plan: float(np.asarray(plan)[0] @ v[j])


def test_veto_skipped_below_capital_threshold():
    consensus = np.array([[0.5, 0.5]])
    q = _linear_utility([[1.0, 0.0], [0.0, 1.0]])  # each loses 50 % at the consensus
    out, vetoes = G.apply_vetoes(consensus, PLANS, np.array([149.9, 149.9]), q)
    assert vetoes == []
    assert out.tolist() == [[0.5, 0.5]]


def test_veto_skipped_when_utility_loss_below_threshold():
    # agent 0: Q(a1) = 1, Q(consensus) = 0.97: delta = 0.03 <= 0.05
    consensus = np.array([[0.97, 0.03]])
    q = _linear_utility([[1.0, 0.0], [0.0, 0.0]])
    out, vetoes = G.apply_vetoes(consensus, PLANS, np.array([200.0, 0.0]), q)
    assert vetoes == []
    assert out.tolist() == [[0.97, 0.03]]


def test_veto_pulls_with_max_strength():
    # agent 0: delta = |1 - 0.5| / 1 = 0.5 > 0.05, C = 200 -> min(0.5, 100) = 0.5:
    # a~ = 0.5 (0.5, 0.5) + 0.5 (1, 0) = (0.75, 0.25)
    consensus = np.array([[0.5, 0.5]])
    q = _linear_utility([[1.0, 0.0], [0.0, 1.0]])
    out, vetoes = G.apply_vetoes(consensus, PLANS, np.array([200.0, 10.0]), q)
    assert vetoes == [(0, 0.5)]
    assert out == pytest.approx(np.array([[0.75, 0.25]]), abs=1e-15)


def test_veto_strength_below_max_and_sequential():
    # c_thresh 1: agent 0 (C = 2): delta = 0.1 -> strength min(0.5, 0.2) = 0.2:
    # (0.9, 0.1) -> 0.8 (0.9, 0.1) + 0.2 (1, 0) = (0.92, 0.08); then agent 1 (C = 3):
    # Q_1 = a[1]: own 1, consensus 0.08: delta 0.92 -> strength 0.5: (0.46, 0.54)
    cfg = G.GameConfig(c_thresh=1.0)
    consensus = np.array([[0.9, 0.1]])
    q = _linear_utility([[1.0, 0.0], [0.0, 1.0]])
    out, vetoes = G.apply_vetoes(consensus, PLANS, np.array([2.0, 3.0]), q, cfg)
    assert [j for j, _ in vetoes] == [0, 1]
    assert vetoes[0][1] == pytest.approx(0.2, abs=1e-12)
    assert vetoes[1][1] == 0.5
    assert out == pytest.approx(np.array([[0.46, 0.54]]), abs=1e-12)


def test_capital_update_line23():
    # metric of agent j (rows) on proposal i (columns): own = (2, 3), best = (1, 3)
    pm = np.array([[2.0, 1.0], [4.0, 3.0]])
    bar = np.array([1.5, 3.3])
    # Perf = (|1 - 1.5| / |1 - 2|, own is best -> 1) = (0.5, 1)
    # Bonus = (1 - 0.5 / 2, 1 - 0.3 / 3) = (0.75, 0.9)
    # C = 0.9 C + 0.1 x 120 x (Perf + 0.5 Bonus) = (90 + 12 x 0.875, 180 + 12 x 1.45)
    new = G.update_capital(np.array([100.0, 200.0]), pm, bar)
    assert new == pytest.approx([100.5, 197.4], abs=1e-12)


def test_capital_update_bounds():
    # consensus far off: Perf = 3 / 1 -> 1, Bonus = 1 - 3 / 2 < 0 -> 0
    pm = np.array([[2.0, 1.0], [4.0, 3.0]])
    bar = np.array([5.0, 3.0])
    new = G.update_capital(np.array([0.0, 0.0]), pm, bar)
    # agent 0: 12 x (1 + 0); agent 1: own best (Perf 1), Bonus 1: 12 x 1.5
    assert new == pytest.approx([12.0, 18.0], abs=1e-12)


def test_play_branches():
    q = _linear_utility([[1.0, 0.0], [0.0, 1.0]])
    cap = np.array([100.0, 300.0])
    # no blend: the richest agent's proposal
    out = G.play(PLANS, [3.0, 1.0], cap, q, None, G.GameConfig(blend=False, veto=False))
    assert out.plan.tolist() == A2.tolist()
    # no SGD: the line-5 utility blend
    out = G.play(PLANS, [3.0, 1.0], cap, q, None, G.GameConfig(sgd=False, veto=False))
    assert out.plan == pytest.approx(np.array([[0.75, 0.25]]), abs=1e-15)
    # SGD with zero gradient: the capital mix (0.25, 0.75)
    out = G.play(PLANS, [3.0, 1.0], cap, q, lambda w: np.zeros(2), G.GameConfig(veto=False))
    assert out.omega == pytest.approx([0.25, 0.75], abs=1e-15)
    assert out.plan == pytest.approx(np.array([[0.25, 0.75]]), abs=1e-15)
    # ... then agent 1 (C = 300) loses |1 - 0.75| / 1 = 0.25 > 0.05 and vetoes at 0.5:
    # (0.125, 0.875)
    out = G.play(PLANS, [3.0, 1.0], cap, q, lambda w: np.zeros(2), G.GameConfig())
    assert out.vetoes == [(1, 0.5)]
    assert out.plan == pytest.approx(np.array([[0.125, 0.875]]), abs=1e-15)
