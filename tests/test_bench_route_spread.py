"""``bench.route_spread``: the region's total count and the law's parts, by hand."""

import argparse

import numpy as np
import pandas as pd
import pytest

from greenroute.bench.route_spread import (
    comma_list,
    fit_law,
    per_server_part,
    total_count_moments,
)


def test_total_count_moments_by_hand():
    # one region, two servers; the run ends at the last finish, 4. Total count 1 on [0, 1)
    # (the first), 2 on [1, 2), 3 on [2, 3), 1 on [3, 4] (the first and third leave at 3)
    rows = [  # server, dispatch, finish, drop reason
        (0, 0.0, 3.0, "none"),
        (1, 1.0, 4.0, "none"),
        (0, 2.0, 3.0, "none"),
        (1, 2.5, np.nan, "kv_overflow"),  # dropped: not counted
        (-1, 3.9, np.nan, "none"),  # still on the network at the end: not counted
    ]
    frame = pd.DataFrame(rows, columns=["server", "dispatch_s", "finish_s", "drop_reason"])
    mean, var = total_count_moments(frame, skip_s=0.0)
    # counts 1, 2, 3, 1 for 1 s each
    assert mean == pytest.approx(7 / 4)
    assert var == pytest.approx((1 + 4 + 9 + 1) / 4 - (7 / 4) ** 2)
    # the warm-up is left out: from 1 s on, counts 2, 3, 1
    mean, var = total_count_moments(frame, skip_s=1.0)
    assert mean == pytest.approx(2.0)
    assert var == pytest.approx((4 + 9 + 1) / 3 - 4.0)


def test_per_server_part_and_fit():
    # z = A / N + B (1 - 1 / N): A 1.5, B 0.8 at N 4 gives z 0.375 + 0.6
    assert per_server_part(0.975, 1.5, 4) == pytest.approx(0.8)
    # ratios made from K 0.9, c 0.5 at N 2, 4, 8 give those back
    n = np.array([2, 4, 8, 2, 4, 8])
    ratio = 0.9 * (1.0 - 0.5 / n.astype(float) ** 2)
    k, c = fit_law(ratio, n)
    assert k == pytest.approx(0.9, rel=1e-9)
    assert c == pytest.approx(0.5, rel=1e-9)


def test_list_options_are_typed_and_bounded():
    """``--servers`` / ``--shares`` parse to typed lists; a bad item is a usage error that names
    it (exit 2, no traceback)."""
    assert comma_list(int, 1, 1024)("2,4,8") == [2, 4, 8]
    assert comma_list(float, 0.0, 1.0)("0,0.1667,1") == [0.0, 0.1667, 1.0]
    with pytest.raises(argparse.ArgumentTypeError, match="'x' is not an integer"):
        comma_list(int, 1, 1024)("2,x")
    with pytest.raises(argparse.ArgumentTypeError, match=r"'1.5' is outside \[0, 1\]"):
        comma_list(float, 0.0, 1.0)("0,1.5")
    with pytest.raises(argparse.ArgumentTypeError, match="outside"):
        comma_list(int, 1, 1024)("0")
