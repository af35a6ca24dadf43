"""``greenroute.compare`` returns a table-like list; oracle-savings shares are bounded."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

import greenroute
from greenroute.api import ORACLE_MIN_SAVING_FRACTION, add_oracle_gaps
from greenroute.sim.results import CompareResult, RunResult


def test_compare_returns_a_list_and_a_frame():
    res = greenroute.compare(
        "demo", ["local-only", "lowest-carbon"], days=0.125, fidelity="fluid", oracle_gap=False
    )
    assert isinstance(res, CompareResult) and isinstance(res, list)
    assert [r.policy for r in res] == ["local-only", "lowest-carbon"]
    assert all(isinstance(r, RunResult) for r in res)
    frame = res.to_frame()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame["policy"]) == ["local-only", "lowest-carbon"]
    assert frame["carbon_kg"].tolist() == [r.metrics["carbon_kg"] for r in res]
    assert frame["forecast"].tolist() == ["perfect", "perfect"]
    pd.testing.assert_frame_equal(res.table, frame)
    assert res.by_policy()["lowest-carbon"] is res[1]


def _result(j, carbon):
    return SimpleNamespace(metrics={"objective": j, "carbon_kg": carbon}, extras={}, notes=[])


def test_oracle_share_is_nan_with_a_note_below_the_threshold():
    assert ORACLE_MIN_SAVING_FRACTION == 1e-3
    base = _result(1.0, 100.0)
    # the oracle saves 0.05 % of J (below 0.1 %) but 10 % of carbon
    orc = _result(0.9995, 90.0)
    pol = _result(1.2, 95.0)
    add_oracle_gaps([pol], base, orc)
    assert math.isnan(pol.metrics["oracle_savings_captured_pct"])
    assert pol.metrics["oracle_carbon_savings_captured_pct"] == pytest.approx(50.0, rel=1e-12)
    assert len(pol.notes) == 1 and "oracle_savings_captured_pct is NaN" in pol.notes[0]
    assert "below 0.1 % of local-only's objective" in pol.notes[0]
    # just above the threshold: 0.2 % saved, the policy loses 0.2 % -> -100 %
    orc2, pol2 = _result(0.998, 90.0), _result(1.002, 100.0)
    add_oracle_gaps([pol2], base, orc2)
    assert pol2.metrics["oracle_savings_captured_pct"] == pytest.approx(-100.0, rel=1e-9)
    # an oracle worse than the baseline: no savings to share
    worse = _result(1.1, 120.0)
    pol3 = _result(1.0, 100.0)
    add_oracle_gaps([pol3], base, worse)
    assert math.isnan(pol3.metrics["oracle_savings_captured_pct"])
    assert math.isnan(pol3.metrics["oracle_carbon_savings_captured_pct"])
