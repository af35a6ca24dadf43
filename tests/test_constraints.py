"""Hard constraints: masks, validation messages, infeasibility, parsing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greenroute.constraints import (
    ConstraintSet,
    Exclusion,
    parse_exclusion,
    parse_power_cap,
    parse_residency,
)
from greenroute.core.errors import ConfigError, InfeasibleConstraintsError, PlanViolationError

ORIGINS = ("DE-LU", "US-CAL-CISO", "SG")
REGIONS = ("DE-LU", "US-CAL-CISO", "SG")


def _route(rows):
    r = np.array(rows, dtype=float)
    return np.stack([r, r])


def test_exclusion_window_mask():
    cs = ConstraintSet((Exclusion("SG", 3600, 7200),))
    m0 = cs.allowed_mask(ORIGINS, REGIONS, 0, 900)
    m1 = cs.allowed_mask(ORIGINS, REGIONS, 3600, 4500)
    m2 = cs.allowed_mask(ORIGINS, REGIONS, 3000, 3900)  # overlaps the window start
    assert m0.all()
    assert not m1[:, :, 2].any() and m1[:, :, :2].all()
    assert not m2[:, :, 2].any()
    # the window is half-open [start, end): the epoch ending at its start and the one starting
    # at its end are both free
    assert cs.allowed_mask(ORIGINS, REGIONS, 2700, 3600).all()
    assert cs.allowed_mask(ORIGINS, REGIONS, 7200, 8100).all()
    assert not cs.allowed_mask(ORIGINS, REGIONS, 7199, 8100)[:, :, 2].any()


def test_exclusion_window_in_a_run_is_exactly_its_epochs():
    """SG excluded from 2 h to 6 h: with 15-min epochs exactly epochs 8..23 get nothing; the
    epochs either side (7 and 24) are served as usual."""
    import greenroute

    cs = ConstraintSet((Exclusion("SG", 2 * 3600.0, 6 * 3600.0),))
    res = greenroute.run("demo", "nearest", days=0.3, constraints=cs, fidelity="fluid")
    sg = res.epochs[res.epochs["region"] == "SG"].set_index("epoch")["requests_dispatched"]
    assert (sg.loc[8:23] == 0).all()
    assert sg.loc[7] > 0 and sg.loc[24] > 0


def test_residency_and_latency_masks():
    cs = ConstraintSet(residency={"DE-LU": frozenset({"DE-LU"})}, max_one_way_latency_s=0.05)
    lat = np.array([[0.001, 0.08, 0.09], [0.08, 0.001, 0.09], [0.09, 0.09, 0.001]])
    m = cs.allowed_mask(ORIGINS, REGIONS, 0, 900, lat)
    assert m[1, 0].tolist() == [True, False, False]  # deferrable: residency only
    assert m[0, 1].tolist() == [False, True, False]  # interactive: latency bound too


def test_validate_names_rule_and_numbers():
    cs = ConstraintSet(residency={"DE-LU": frozenset({"DE-LU"})})
    allowed = cs.allowed_mask(ORIGINS, REGIONS, 0, 900)
    bad = _route([[0.7, 0.3, 0.0], [0, 1, 0], [0, 0, 1]])
    with pytest.raises(PlanViolationError) as ei:
        cs.validate(bad, None, None, ORIGINS, REGIONS, allowed, epoch=4)
    msg = str(ei.value)
    assert "residency" in msg and "0.3" in msg and "DE-LU" in msg and "US-CAL-CISO" in msg
    assert "epoch 4" in msg


@pytest.mark.parametrize(
    ("rows", "rule"),
    [
        ([[0.5, 0.6, 0.0], [0, 1, 0], [0, 0, 1]], "rows-sum-to-1"),
        ([[1.2, -0.2, 0.0], [0, 1, 0], [0, 0, 1]], "non-negative"),
        ([[math.nan, 1.0, 0.0], [0, 1, 0], [0, 0, 1]], "finite"),
    ],
)
def test_validate_rejects_malformed_rows(rows, rule):
    cs = ConstraintSet()
    allowed = cs.allowed_mask(ORIGINS, REGIONS, 0, 900)
    with pytest.raises(PlanViolationError, match=rule):
        cs.validate(_route(rows), None, None, ORIGINS, REGIONS, allowed, epoch=0)


def test_validate_hold_and_shape():
    cs = ConstraintSet()
    allowed = cs.allowed_mask(ORIGINS, REGIONS, 0, 900)
    ok = _route(np.eye(3))
    with pytest.raises(PlanViolationError, match=r"hold\[SG\] = 1.5"):
        cs.validate(ok, np.array([0, 0, 1.5]), None, ORIGINS, REGIONS, allowed, epoch=0)
    with pytest.raises(PlanViolationError, match="shape"):
        cs.validate(ok[:, :2], None, None, ORIGINS, REGIONS, allowed, epoch=0)


def test_infeasible_constraints_name_the_binding_rule():
    cs = ConstraintSet(
        exclusions=(Exclusion("DE-LU", 0, 7200, "grid emergency"),),
        residency={"DE-LU": frozenset({"DE-LU"})},
    )
    with pytest.raises(InfeasibleConstraintsError) as ei:
        cs.check_feasible(ORIGINS, REGIONS, 86400, 900)
    msg = str(ei.value)
    assert "residency+exclusion" in msg and "DE-LU" in msg and "grid emergency" in msg


def test_feasible_when_window_leaves_a_region():
    cs = ConstraintSet(exclusions=(Exclusion("DE-LU", 0, 7200),))
    cs.check_feasible(ORIGINS, REGIONS, 86400, 900)  # other regions remain


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=9, max_size=9),
    st.sets(st.sampled_from(REGIONS), min_size=1, max_size=3),
)
def test_any_validated_plan_routes_nothing_forbidden(weights, allowed_for_de):
    """Property: a plan that passes validation never sends work where the mask forbids."""
    cs = ConstraintSet(residency={"DE-LU": frozenset(allowed_for_de)})
    allowed = cs.allowed_mask(ORIGINS, REGIONS, 0, 900)
    w = np.array(weights).reshape(3, 3) + 1e-3
    route = np.stack([w, w]) * allowed
    route = route / route.sum(axis=2, keepdims=True)
    cs.validate(route, None, None, ORIGINS, REGIONS, allowed, epoch=0)
    assert np.all(route[~allowed] == 0)


def test_parsers():
    assert parse_exclusion("SG@2-6") == Exclusion("SG", 7200.0, 21600.0)
    assert parse_exclusion("SG").start_s == -math.inf
    assert parse_residency("DE-LU=DE-LU+GB") == ("DE-LU", frozenset({"DE-LU", "GB"}))
    assert parse_power_cap("SG=1500") == ("SG", 1500.0)
    for bad, fn in (("SG@6-2", parse_exclusion), ("DE-LU", parse_residency),
                    ("SG=-1", parse_power_cap), ("SG@x-y", parse_exclusion)):  # fmt: skip
        with pytest.raises(ConfigError):
            fn(bad)


def test_roundtrip_dict():
    cs = ConstraintSet(
        (Exclusion("SG", 0, 3600, "maintenance"),),
        {"DE-LU": frozenset({"DE-LU", "GB"})},
        {"SG": 100.0},
        0.05,
    )
    assert ConstraintSet.from_dict(cs.to_dict()) == cs


def test_power_cap_below_idle_is_infeasible_and_at_idle_is_not():
    idle = np.array([2.9, 1.45, 4.35])
    ok = ConstraintSet(power_caps_kw={"DE-LU": 2.9, "SG": 100.0})
    ok.check_feasible(ORIGINS, REGIONS, 86400, 900, idle_power_kw=idle)  # cap == idle is met
    bad = ConstraintSet(power_caps_kw={"US-CAL-CISO": 1.4})
    with pytest.raises(InfeasibleConstraintsError) as ei:
        bad.check_feasible(ORIGINS, REGIONS, 86400, 900, idle_power_kw=idle)
    assert ei.value.rule == "power-cap"
    assert "1.4 kW for US-CAL-CISO" in str(ei.value) and "idle IT power 1.45 kW" in str(ei.value)
    bad.check_feasible(ORIGINS, REGIONS, 86400, 900)  # without idle powers: names only


def test_plan_power_cap_below_idle_is_rejected():
    cs = ConstraintSet()
    allowed = cs.allowed_mask(ORIGINS, REGIONS, 0, 900)
    route = _route(np.eye(3))
    idle = np.array([2.9, 2.9, 2.9])
    cs.validate(route, None, np.array([np.nan, 2.9, 7.0]), ORIGINS, REGIONS, allowed, 0, idle)
    with pytest.raises(PlanViolationError) as ei:
        cs.validate(route, None, np.array([np.nan, 2.0, 7.0]), ORIGINS, REGIONS, allowed, 3, idle)
    assert ei.value.rule == "power-cap"
    assert "epoch 3" in str(ei.value) and "2 kW for US-CAL-CISO" in str(ei.value)
