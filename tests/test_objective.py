"""The scalar objective: hand-computed terms, strict reference scales, NaN TTFT as a penalty."""

from __future__ import annotations

import math

import numpy as np
import pytest

import greenroute
from greenroute.core.errors import ConfigError
from greenroute.core.objective import NO_TTFT_PENALTY, Objective
from greenroute.core.types import ObjectiveWeights

SCALES = {"carbon_kg": 200.0, "water_m3": 4.0, "cost_usd": 50.0, "ttft_mean_s": 0.5}
METRICS = {
    "carbon_kg": 100.0,
    "water_m3": 6.0,
    "cost_usd": 25.0,
    "ttft_mean_s": 1.0,
    "slo_violation_pct": 2.0,
    "interactive_requests": 1000.0,
}


def test_terms_hand_computed():
    w = ObjectiveWeights(carbon=0.4, water=0.2, cost=0.2, latency=0.2, slo_penalty=5.0)
    terms = Objective(w, SCALES).terms(METRICS)
    # 0.4*100/200, 0.2*6/4, 0.2*25/50, 0.2*1/0.5, 5*2/100
    assert terms == pytest.approx(
        {"carbon": 0.2, "water": 0.3, "cost": 0.1, "latency": 0.4, "slo": 0.1}, rel=1e-12
    )
    assert Objective(w, SCALES).value(METRICS) == pytest.approx(1.1, rel=1e-12)


@pytest.mark.parametrize(
    "bad", [None, 0.0, -3.0, math.nan, math.inf, "1.0", True], ids=lambda v: repr(v)
)
def test_invalid_scale_raises_instead_of_falling_back_to_one(bad):
    scales = {**SCALES, "water_m3": bad}
    with pytest.raises(ConfigError, match="water_m3"):
        Objective(ObjectiveWeights(), scales).value(METRICS)


def test_missing_scale_raises():
    scales = {k: v for k, v in SCALES.items() if k != "cost_usd"}
    with pytest.raises(ConfigError, match="'cost_usd' is missing"):
        Objective(ObjectiveWeights(), scales).terms(METRICS)
    with pytest.raises(ConfigError, match="missing"):
        Objective(ObjectiveWeights(), {}).value(METRICS)


def test_zero_weight_term_needs_no_scale():
    # min-carbon: only the carbon scale is used; a bad water scale is irrelevant
    w = ObjectiveWeights(carbon=1.0, water=0.0, cost=0.0, latency=0.0, slo_penalty=5.0)
    obj = Objective(w, {"carbon_kg": 200.0, "water_m3": 0.0})
    assert obj.value(METRICS) == pytest.approx(100.0 / 200.0 + 5.0 * 2.0 / 100.0, rel=1e-12)


def test_nan_ttft_is_a_penalty_not_zero_cost():
    w = ObjectiveWeights(carbon=0.25, water=0.25, cost=0.25, latency=0.25, slo_penalty=5.0)
    nothing_done = {**METRICS, "ttft_mean_s": math.nan, "slo_violation_pct": 0.0}
    terms = Objective(w, SCALES).terms(nothing_done)
    # counted as the SLO penalty for 100 % of requests: 5.0 * 100 / 100
    assert NO_TTFT_PENALTY == 1.0
    assert terms["latency"] == pytest.approx(5.0, rel=1e-12)
    # costlier than a run that completed everything at 10x the reference TTFT (0.25 * 10)
    slow = {**METRICS, "ttft_mean_s": 5.0, "slo_violation_pct": 0.0}
    assert Objective(w, SCALES).value(nothing_done) > Objective(w, SCALES).value(slow)
    # an infinite TTFT is treated the same way
    inf_ttft = {**nothing_done, "ttft_mean_s": math.inf}
    assert Objective(w, SCALES).terms(inf_ttft)["latency"] == pytest.approx(5.0, rel=1e-12)


def test_nan_ttft_without_interactive_requests_costs_nothing():
    none_asked = {**METRICS, "ttft_mean_s": math.nan, "interactive_requests": 0.0}
    assert Objective(ObjectiveWeights(), SCALES).terms(none_asked)["latency"] == 0.0


@pytest.mark.realdata
def test_cost_scale_is_the_gross_bill_when_prices_go_negative(data_dir):
    """DE-LU's wholesale price is negative on sunny July 2023 afternoons, so local-only's net
    cost undercounts the bill (and can reach <= 0 on short windows). The cost scale is the
    gross bill sum |price x energy| over (epoch, region), i.e. sum |cost_usd| of the epochs."""
    from greenroute.data.cache import use_cache
    from greenroute.policies.registry import local_policy_factory
    from greenroute.scenarios import resolve_scenario
    from greenroute.sim.prepare import prepare
    from greenroute.sim.reference import reference_scales

    with use_cache(False):
        sc = resolve_scenario("geo3", days=2.0)
        prep = prepare(sc, seed=0, data_dir=data_dir)
        scales = reference_scales(prep, local_policy_factory("least-loaded"))
        ref = greenroute.run(sc, "local-only", seed=0, data_dir=data_dir)
    epochs_cost = ref.epochs["cost_usd"].to_numpy()
    assert (epochs_cost < 0).any()  # the window has negative-price epochs
    assert scales["cost_usd"] == pytest.approx(np.abs(epochs_cost).sum(), rel=1e-12)
    assert scales["cost_usd"] > ref.metrics["cost_usd"] * (1 + 1e-6)
