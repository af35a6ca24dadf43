"""Seed 004's temperature-blind comparator (``cooling_model="blind"`` of ``admm`` and
``lp-mpc``): the blind planner's per-request costs are the same at sites whose grid signals are
the same, whatever their temperature; the aware planner's cooling terms differ by the sites'
COP ratio. Hand-computed values from the documented formulas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.core.types import ClusterInfo, ObjectiveWeights, Observation
from greenroute.physics.cooling import FANS_PUMPS_COP, WATER_COOLED_CARNOT_FRACTION
from greenroute.physics.facility import INFRA_LOSS_FRACTION, DefaultFacility
from greenroute.policies.optimize.blind import BlindFactors, blind_observation
from greenroute.policies.optimize.model import DEFERRABLE, INTERACTIVE, build_cost_model
from greenroute.policies.registry import make_geo_policy

AB = ("AU-NSW", "AU-TAS-HBA")  # catalog sites: the fleet mean (water terms) is computable
IT_KWH = 0.01  # per request
CI_G = 500.0
PRICE = 0.1  # $/kWh
EWIF = 2.0  # L/kWh
# Site A: wet bulb 5 °C -> economizer water 5 + 3.9 + 1.1 = 10 °C <= 15 °C supply: full free
# cooling, COP = FANS_PUMPS_COP = 15. Site B: wet bulb 25 °C -> economizer water 30 °C >= 21 °C
# return: fully mechanical; lift = 25 + (3.9 + 5.6 + 1.5) - 15 = 21 K, chiller COP =
# carnot_fraction x 288.15 / 21, so 1/COP_B = 1/15 + 21 / (carnot_fraction x 288.15).
INV_COP_A = 1.0 / FANS_PUMPS_COP
INV_COP_B = 1.0 / FANS_PUMPS_COP + 21.0 / (WATER_COOLED_CARNOT_FRACTION * 288.15)


def two_site_obs(price_b: float = PRICE, weights: ObjectiveWeights | None = None) -> Observation:
    """Two sites, equal grid signals (but B's price when given), A cool and B hot; facility
    factors from the simulator's default facility, as the engine computes them."""
    h1, n = 3, 2
    temp = np.tile([10.0, 32.0], (h1, 1))
    wetbulb = np.tile([5.0, 25.0], (h1, 1))
    ci = np.full((h1, n), CI_G)
    price = np.tile([PRICE, price_b], (h1, 1))
    ewif = np.full((h1, n), EWIF)
    f = DefaultFacility().factors(temp_c=temp, wetbulb_c=wetbulb, carbon_intensity_g_per_kwh=ci,
                                  price_usd_per_kwh=price, ewif_l_per_kwh=ewif)  # fmt: skip
    demand = np.zeros((h1, 2, n))
    demand[:, INTERACTIVE] = [1.0, 1.0]
    return Observation(
        epoch=0, time_s=0.0, time_utc=pd.Timestamp("2024-01-15", tz="UTC"), epoch_s=900.0,
        regions=AB, origins=AB, carbon_intensity_g_per_kwh=ci, price_usd_per_kwh=price,
        temp_c=temp, wetbulb_c=wetbulb, water_intensity_l_per_kwh=ewif,
        energy_kwh_per_it_kwh=f.energy_kwh_per_it_kwh, carbon_g_per_it_kwh=f.carbon_g_per_it_kwh,
        water_l_per_it_kwh=f.water_onsite_l_per_it_kwh + f.water_offsite_l_per_it_kwh,
        cost_usd_per_it_kwh=f.cost_usd_per_it_kwh,
        it_kwh_per_request=np.full((2, n), IT_KWH), slot_s_per_request=np.full((2, n), 9.0),
        prefill_s_per_request=np.full((2, n), 0.1), capacity_slots=np.array([100.0, 100.0]),
        busy_slots=np.zeros(n), queue_len=np.zeros(n), backlog_slot_s=np.zeros(n),
        kv_free_frac=np.ones(n), resident_models=(frozenset({"m"}),) * 2,
        idle_power_kw=np.full(n, 10.0), peak_power_kw=np.full(n, 30.0), demand_rps=demand,
        pending_deferrable=np.zeros(n), pending_deadline_s=np.full(n, np.inf), pending_due=None,
        latency_s=np.full((n, n), 0.01), allowed=np.ones((2, n, n), dtype=bool), ttft_slo_s=2.0,
        weights=weights or ObjectiveWeights(carbon=1.0, water=1.0, cost=1.0, latency=0.0,
                                            slo_penalty=0.0),
        objective_scales={"carbon_kg": 1.0, "water_m3": 1.0, "cost_usd": 1.0,
                          "ttft_mean_s": 1.0, "interactive_requests": 1000.0},
    )  # fmt: skip


BF = BlindFactors(pue=1.2, water_onsite_l_per_it_kwh=1.0, water_energy_kwh_per_it_kwh=0.0005)


def test_blind_costs_are_identical_across_sites_and_hand_computed():
    obs = two_site_obs()
    unit = build_cost_model(blind_observation(obs, BF)).unit  # [H+1, C, O, R]
    # per request: carbon 0.01 x 500 x (1.2 + 0.0005) g = 6.0025e-3 kg; cost 0.01 x 0.1 x 1.2 =
    # 1.2e-3 $; water 0.01 x (1.0 + 1.2 x 2.0) L = 3.4e-5 m3; weights 1, scales 1
    expected = 6.0025e-3 + 1.2e-3 + 3.4e-5
    np.testing.assert_allclose(unit, expected, rtol=1e-12)


def test_aware_costs_differ_by_the_cop_ratio():
    w = ObjectiveWeights(carbon=0.0, water=0.0, cost=1.0, latency=0.0, slo_penalty=0.0)
    obs = two_site_obs(weights=w)
    unit = build_cost_model(obs).unit[0, DEFERRABLE, 0]  # [R], $ per request
    # cost = it x price x (1 + 1/COP + infra): the cooling parts are 1/COP_A and 1/COP_B
    cooling = unit / (IT_KWH * PRICE) - 1.0 - INFRA_LOSS_FRACTION
    np.testing.assert_allclose(cooling, [INV_COP_A, INV_COP_B], rtol=1e-12)
    assert cooling[1] / cooling[0] == pytest.approx(INV_COP_B / INV_COP_A, rel=1e-12)
    assert INV_COP_B / INV_COP_A > 2.5  # the hot site's cooling costs several times more
    blind = build_cost_model(blind_observation(obs, BF)).unit[0, DEFERRABLE, 0]
    assert blind[0] == blind[1] == pytest.approx(IT_KWH * PRICE * 1.2, rel=1e-12)


def _cluster() -> ClusterInfo:
    return ClusterInfo(AB, AB, ("m",), 900.0, 96, np.array([100.0, 100.0]), np.full(2, 2),
                       np.full(2, 10.0), np.full(2, 30.0), np.zeros((2, 2)), np.zeros((2, 2)),
                       np.zeros((2, 2)), 2.0)  # fmt: skip


@pytest.mark.parametrize("name", ["admm", "lp-mpc"])
def test_blind_planner_goes_for_the_cheaper_grid_the_aware_one_for_the_cooler_site(name):
    # B's electricity is 3 % cheaper, but its cooling costs 1/COP_B - 1/COP_A ~ 0.17 kWh more
    # per IT kWh: aware cost per IT kWh A 0.1 x 1.117 = 0.1117 < B 0.097 x 1.28 ~ 0.124; blind
    # (PUE 1.2 everywhere) sees A 0.12 > B 0.1164
    w = ObjectiveWeights(carbon=0.0, water=0.0, cost=1.0, latency=0.0, slo_penalty=0.0)
    obs = two_site_obs(price_b=0.097, weights=w)
    routes = {}
    for model in ("aware", "blind"):
        pol = make_geo_policy(name, cooling_model=model, blind_pue=1.2)
        pol.reset(_cluster(), 0)
        routes[model] = pol.plan(obs).route[INTERACTIVE]
    np.testing.assert_allclose(routes["aware"][:, 0], 1.0, atol=1e-6)  # both origins -> A
    np.testing.assert_allclose(routes["blind"][:, 1], 1.0, atol=1e-6)  # both origins -> B


def test_blind_cop_option_and_errors():
    pol = make_geo_policy("admm", cooling_model="blind", blind_cop=4.0)
    pol.reset(_cluster(), 0)
    seen = pol.planning_obs(two_site_obs())
    # PUE = 1 + 1/4 + 0.05 = 1.3 at both sites
    np.testing.assert_allclose(seen.energy_kwh_per_it_kwh, 1.3, rtol=1e-12)
    assert pol.blind is not None and pol.blind.pue == pytest.approx(1.3)
    with pytest.raises(UnknownNameError):
        make_geo_policy("lp-mpc", cooling_model="guess")
    bad = make_geo_policy("admm", cooling_model="blind", blind_pue=1.2, blind_cop=4.0)
    bad.reset(_cluster(), 0)
    with pytest.raises(ConfigError):
        bad.planning_obs(two_site_obs())
    with pytest.raises(ConfigError):
        BlindFactors(pue=0.9, water_onsite_l_per_it_kwh=0.0, water_energy_kwh_per_it_kwh=0.0)
