"""greedy_fill's compiled loop (policies/fill_kernel.py) gives the Python loop's routes bit
for bit, and numpy_sum reproduces numpy's summation order."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from greenroute.policies.fill_kernel import numpy_sum
from greenroute.policies.heuristics import greedy_fill


def test_numpy_sum_is_numpys_order():
    rng = np.random.default_rng(0)
    for n in range(0, 129):
        for _ in range(20):
            a = rng.standard_normal(n) * 10.0 ** rng.integers(-4, 5, n)
            assert numpy_sum(a, n) == a.sum()  # exact, not approximate


def _obs(rng, n_o, n_r, share_allowed, demand_scale):
    return SimpleNamespace(
        allowed=rng.random((2, n_o, n_r)) < share_allowed,
        slot_s_per_request=rng.random((2, n_r)) * 30.0,
        demand_rps=rng.random((3, 2, n_o)) * demand_scale,
        backlog_slot_s=rng.random(n_r) * rng.choice([0.0, 1e5]),
        epoch_s=900.0,
        capacity_slots=rng.integers(0, 3, n_r) * rng.random(n_r) * 6400.0,
    )


def test_compiled_greedy_fill_equals_python_loop():
    rng = np.random.default_rng(1)
    for t in range(1500):
        n_o, n_r = int(rng.integers(1, 12)), int(rng.integers(1, 20))
        obs = _obs(rng, n_o, n_r, rng.choice([1.0, 0.7, 0.3]), rng.choice([0.0, 1.0, 100.0]))
        score = rng.random(n_r) if t % 2 else rng.random((n_o, n_r))
        if t % 3 == 0:
            score = np.round(score, 1)  # ties: the stable order decides
        fast = greedy_fill(obs, score, 0.6, compiled=True)
        slow = greedy_fill(obs, score, 0.6, compiled=False)
        np.testing.assert_array_equal(fast, slow)


def test_greedy_fill_hand_case():
    # two regions with 10 and 4 free slots at target 1.0, one origin needing 12 slots: the
    # cheaper region (score 1) is filled first (10), the rest (2) goes to the other
    obs = SimpleNamespace(
        allowed=np.ones((2, 1, 2), dtype=bool),
        slot_s_per_request=np.ones((2, 2)),
        demand_rps=np.array([[[12.0], [0.0]]]),
        backlog_slot_s=np.zeros(2),
        epoch_s=900.0,
        capacity_slots=np.array([4.0, 10.0]),
    )
    route = greedy_fill(obs, np.array([2.0, 1.0]), 1.0)
    np.testing.assert_allclose(route[0, 0], [2.0 / 12.0, 10.0 / 12.0], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(route[1, 0], [0.0, 1.0])  # no demand: best-scoring region
