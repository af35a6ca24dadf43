"""``sim.ledger.bin_overlap``: busy time binned into epochs, by hand and against a direct
per-bin sum."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from greenroute.sim.ledger import bin_overlap


def test_hand_computed_bins():
    # bins of 10 s, 3 bins (horizon 30 s), 2 groups
    start = np.array([2.0, 8.0, 25.0, 29.0, 5.0, -4.0, 12.0])
    end = np.array([6.0, 23.0, 40.0, 29.0, 5.5, 3.0, 12.0])
    weight = np.array([1.0, 2.0, 3.0, 7.0, 10.0, 0.5, 9.0])
    group = np.array([0, 0, 1, 1, 1, 0, 0])
    out = bin_overlap(start, end, weight, group, 2, 10.0, 3)
    # group 0: [2, 6) x1 -> bin 0: 4; [8, 23) x2 -> bin 0: 2 x 2 = 4, bin 1: 10 x 2 = 20,
    # bin 2: 3 x 2 = 6; [-4, 3) x0.5 -> bin 0: 3 x 0.5 = 1.5 (before 0 not counted);
    # [12, 12) empty
    assert out[0].tolist() == [9.5, 20.0, 6.0]
    # group 1: [25, 40) x3 -> bin 2: 5 x 3 = 15 (after the horizon not counted);
    # [29, 29) empty; [5, 5.5) x10 -> bin 0: 5
    assert out[1].tolist() == [5.0, 0.0, 15.0]


def test_empty_and_nan_intervals():
    empty = np.zeros(0)
    out = bin_overlap(empty, empty, empty, np.zeros(0, int), 2, 5.0, 4)
    assert out.tolist() == [[0.0] * 4] * 2
    out = bin_overlap(
        np.array([np.nan, 1.0]), np.array([np.nan, 2.0]), np.ones(2), np.zeros(2, int), 1, 5.0, 1
    )
    assert out.tolist() == [[1.0]]


def _direct(start, end, weight, group, n_groups, bin_s, n_bins):
    out = np.zeros((n_groups, n_bins))
    for s, e, w, g in zip(start, end, weight, group, strict=True):
        for b in range(n_bins):
            ov = min(e, (b + 1) * bin_s) - max(s, b * bin_s)
            if ov > 0:
                out[g, b] += w * ov
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(-50, 400, allow_nan=False),
            st.floats(0, 300, allow_nan=False),
            st.floats(0, 5, allow_nan=False),
            st.integers(0, 2),
        ),
        min_size=1,
        max_size=40,
    ),
    st.floats(1.0, 60.0),
    st.integers(1, 8),
)
def test_matches_direct_sum(rows, bin_s, n_bins):
    start = np.array([r[0] for r in rows])
    end = start + np.array([r[1] for r in rows])
    weight = np.array([r[2] for r in rows])
    group = np.array([r[3] for r in rows])
    got = bin_overlap(start, end, weight, group, 3, bin_s, n_bins)
    want = _direct(start, end, weight, group, 3, bin_s, n_bins)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    # conservation: all the time inside the horizon is binned
    inside = np.clip(end, 0, bin_s * n_bins) - np.clip(start, 0, bin_s * n_bins)
    np.testing.assert_allclose(got.sum(), (weight * inside).sum(), rtol=1e-12, atol=1e-9)
