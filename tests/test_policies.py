"""Geo heuristics on hand-built observations: the choices are checked, not just the shapes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from greenroute.constraints import ConstraintSet
from greenroute.core.errors import ConfigError
from greenroute.core.types import ClusterInfo, ObjectiveWeights, Observation
from greenroute.policies.heuristics import greedy_fill
from greenroute.policies.registry import geo_policy_names, make_geo_policy

REGIONS = ("A", "B", "C")


def make_obs(
    ci=(300.0, 100.0, 200.0),
    price=(0.1, 0.2, 0.05),
    temp=(30.0, 10.0, 20.0),
    demand=(10.0, 10.0, 10.0),
    capacity=(100.0, 100.0, 100.0),
    latency=None,
    allowed=None,
    horizon_ci=None,
    epoch=0,
):
    h = 4
    n = len(REGIONS)
    lat = np.array(latency if latency is not None else
                   [[0.001, 0.05, 0.1], [0.05, 0.001, 0.08], [0.1, 0.08, 0.001]])  # fmt: skip
    ci_h = np.tile(np.asarray(ci, float), (h + 1, 1))
    if horizon_ci is not None:
        ci_h = np.asarray(horizon_ci, float)
    dem = np.zeros((h + 1, 2, n))
    dem[:, 0, :] = np.asarray(demand) / 10.0  # rps; slot_s = 10 -> busy slots = demand
    ones = np.ones((h + 1, n))
    return Observation(
        epoch=epoch,
        time_s=epoch * 900.0,
        time_utc=pd.Timestamp("2023-07-01", tz="UTC"),
        epoch_s=900.0,
        regions=REGIONS,
        origins=REGIONS,
        carbon_intensity_g_per_kwh=ci_h,
        price_usd_per_kwh=np.tile(np.asarray(price, float), (h + 1, 1)),
        temp_c=np.tile(np.asarray(temp, float), (h + 1, 1)),
        wetbulb_c=np.tile(np.asarray(temp, float) - 5, (h + 1, 1)),
        water_intensity_l_per_kwh=ones,
        energy_kwh_per_it_kwh=ones * 1.2,
        carbon_g_per_it_kwh=ci_h * 1.2,
        water_l_per_it_kwh=ones,
        cost_usd_per_it_kwh=ones * 0.1,
        it_kwh_per_request=np.full((2, n), 0.01),
        slot_s_per_request=np.full((2, n), 10.0),
        prefill_s_per_request=np.full((2, n), 0.1),
        capacity_slots=np.asarray(capacity, float),
        busy_slots=np.zeros(n),
        queue_len=np.zeros(n),
        backlog_slot_s=np.zeros(n),
        kv_free_frac=np.ones(n),
        resident_models=tuple(frozenset({"llama2-70b"}) for _ in REGIONS),
        idle_power_kw=np.full(n, 10.0),
        peak_power_kw=np.full(n, 30.0),
        demand_rps=dem,
        pending_deferrable=np.zeros(n),
        pending_deadline_s=np.full(n, np.inf),
        pending_due=None,
        latency_s=lat,
        allowed=np.ones((2, n, n), bool) if allowed is None else allowed,
        ttft_slo_s=2.0,
        weights=ObjectiveWeights(),
        constraints=ConstraintSet(),
        # local-only's magnitudes for one day of this toy cluster (what the simulator supplies)
        objective_scales={
            "carbon_kg": 500.0,
            "water_m3": 5.0,
            "cost_usd": 100.0,
            "ttft_mean_s": 0.5,
            "interactive_requests": 2.6e5,
            "requests_total": 2.9e5,
        },
    )


def test_optimising_policy_refuses_missing_objective_scales():
    """A weighted term without its reference scale is an error, not a raw-unit sum."""
    obs = make_obs()
    bad = replace(obs, objective_scales={k: v for k, v in obs.objective_scales.items()
                                         if k != "water_m3"})  # fmt: skip
    with pytest.raises(ConfigError, match="water_m3"):
        policy("lp-mpc").plan(bad)
    # not needed when its weight is 0
    no_water = replace(bad, weights=ObjectiveWeights(0.5, 0.0, 0.25, 0.25))
    policy("lp-mpc").plan(no_water)


def policy(name, **kw):
    p = make_geo_policy(name, **kw)
    info = ClusterInfo(REGIONS, REGIONS, ("llama2-70b",), 900.0, 96, np.full(3, 100.0),
                       np.full(3, 4), np.full(3, 10.0), np.full(3, 30.0), np.zeros((3, 3)),
                       np.zeros((3, 2)), np.zeros((3, 2)), 2.0)  # fmt: skip
    p.reset(info, 0)
    return p


def test_every_registered_policy_returns_a_valid_plan():
    obs = make_obs()
    for name in geo_policy_names():
        p = policy(name)
        if getattr(p, "needs_simulator", False):  # plans on forks of a run (MARLIN: its tests)
            continue
        plan = p.plan(obs)
        assert plan.route.shape == (2, 3, 3), name
        assert np.allclose(plan.route.sum(axis=2), 1.0), name
        assert (plan.route >= 0).all(), name


def test_lowest_carbon_sends_everything_to_greenest_when_it_fits():
    plan = policy("lowest-carbon").plan(make_obs())
    assert np.allclose(plan.route[0, :, 1], 1.0)  # B has 100 g/kWh; 30 slots fit in 80


def test_lowest_carbon_spills_in_carbon_order_when_capacity_binds():
    # demand 3 x 40 = 120 slots; target 0.8 x 100 = 80 per region: B full, then C
    plan = policy("lowest-carbon", target_utilisation=0.8).plan(make_obs(demand=(40, 40, 40)))
    sent = (plan.route[0] * 40).sum(axis=0)
    assert sent[1] == pytest.approx(80.0)
    assert sent[2] == pytest.approx(40.0)
    assert sent[0] == pytest.approx(0.0)


def test_greedy_fill_respects_masks():
    allowed = np.ones((2, 3, 3), bool)
    allowed[:, 0, 1] = False  # origin A may not use B
    obs = make_obs(allowed=allowed)
    route = greedy_fill(obs, obs.carbon_intensity_g_per_kwh[0])
    assert route[0, 0, 1] == 0.0
    assert route[0, 0, 2] == pytest.approx(1.0)  # next greenest for A


def test_price_temperature_latency_heuristics_pick_their_signal():
    obs = make_obs()
    assert np.allclose(policy("lowest-price").plan(obs).route[0, :, 2], 1.0)
    assert np.allclose(policy("coolest").plan(obs).route[0, :, 1], 1.0)
    near = policy("nearest").plan(obs).route[0]
    assert np.allclose(np.diag(near), 1.0)


def test_local_only_round_robin():
    obs = make_obs()
    assert np.allclose(policy("local-only").plan(obs).route[0], np.eye(3))
    rr = policy("round-robin")
    r0 = rr.plan(make_obs(epoch=0)).route[0].argmax(axis=1)
    r1 = rr.plan(make_obs(epoch=1)).route[0].argmax(axis=1)
    assert (r0 != r1).all()


def test_least_loaded_equalises_utilisation():
    obs = make_obs(demand=(30, 0, 0), capacity=(100, 50, 50))
    route = policy("least-loaded").plan(obs).route[0, 0]
    sent = route * 30
    # utilisation equal: x_A/100 = x_B/50 = x_C/50 -> 15, 7.5, 7.5
    assert sent == pytest.approx([15.0, 7.5, 7.5])


def test_carbon_threshold_holds_when_now_is_dirty():
    dirty_now = np.array([[500, 500, 500]] + [[100, 100, 100]] * 4, float)
    clean_now = np.array([[100, 100, 100]] + [[500, 500, 500]] * 4, float)
    p = policy("carbon-threshold")
    assert np.all(p.plan(make_obs(horizon_ci=dirty_now)).hold == 1.0)
    assert np.all(p.plan(make_obs(horizon_ci=clean_now)).hold == 0.0)
