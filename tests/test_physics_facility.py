"""Facility presets: MARLIN (seed 001 §3.3-3.5) by hand, and the default physics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.physics import cooling as c
from greenroute.physics import facility as fac
from greenroute.physics.psychro import wet_bulb_stull_c

LITRES_PER_KWH_OF_HEAT = 3.6e6 / 2_429_800.0 / 0.99565  # evaporate 1 kWh of heat: 1.48808 L
EPRI_SUPPLY_KWH_PER_M3 = 1406.0 / 3785.411784  # 1,406 kWh per million US gallons


def _signals(**kw: object) -> dict[str, object]:
    base = dict(
        temp_c=25.0,
        wetbulb_c=20.0,
        carbon_intensity_g_per_kwh=300.0,
        price_usd_per_kwh=0.05,
        ewif_l_per_kwh=1.2,
    )
    base.update(kw)
    return base


def test_presets_listed() -> None:
    assert fac.FACILITY_PRESETS == ("default", "marlin")
    for name in fac.FACILITY_PRESETS:
        model = fac.get_facility_model(name)
        assert model.name == name
        assert isinstance(model, fac.FacilityModel)


def test_marlin_by_hand() -> None:
    """E_IT = 100 kWh, COP_d = 4, CI = 0.4 kg/kWh (= 400 g/kWh), price 0.1 $/kWh, GI = 2 L/kWh,
    φ = 0.2, EI_pot = 0.4 kWh/m3 (0.0004 kWh/L), EI_waste = 0.3 kWh/m3 (0.0003 kWh/L)."""
    model = fac.get_facility_model(
        "marlin", cop_d=4.0, phi=0.2, ei_pot_kwh_per_l=0.0004, ei_waste_kwh_per_l=0.0003
    )
    f = model.factors(
        temp_c=30.0,
        wetbulb_c=25.0,
        carbon_intensity_g_per_kwh=400.0,
        price_usd_per_kwh=0.1,
        ewif_l_per_kwh=2.0,
    )
    ledger = fac.facility_ledger(100.0, f)

    e_it = 100.0
    e_crac = e_it / 4.0  # 25 kWh
    e_cool = 3 * e_crac  # 75 kWh (§3.3)
    e_infra = 0.13 * e_it  # 13 kWh (§3.3)
    e_tot = e_it + e_cool + e_infra  # 188 kWh (eq. 6)
    cost = e_tot * 0.1  # 18.8 $ (eq. 7)
    g_e = e_it * 3.6e6 / 2_429_800.0 / 0.99565  # H_cool = E_IT -> 148.81 L
    g_blow = g_e / (1 - 0.2)  # 186.01 L (as written: larger than G_E)
    g_grid = e_tot * 2.0  # 376 L
    z_grid = 400.0 * e_tot  # 75,200 g = 75.2 kg
    z_pot = (g_blow + g_e) * 0.0004  # kWh
    z_waste = g_grid * 0.0003  # 0.1128 kWh
    z_g = (z_pot + z_waste) * 400.0  # eq. 9, g
    z_tot = z_grid + z_g  # eq. 10

    assert float(ledger["it_energy_kwh"]) == pytest.approx(100.0)
    assert float(ledger["cooling_energy_kwh"]) == pytest.approx(75.0)
    assert float(ledger["infra_energy_kwh"]) == pytest.approx(13.0)
    assert float(ledger["energy_kwh"]) == pytest.approx(188.0)
    assert float(ledger["cost_usd"]) == pytest.approx(cost)
    assert cost == pytest.approx(18.8)
    assert float(ledger["water_onsite_l"]) == pytest.approx(g_e + g_blow)
    assert float(ledger["water_offsite_l"]) == pytest.approx(376.0)
    assert float(ledger["water_l"]) == pytest.approx(g_e + g_blow + 376.0)  # eq. 8
    assert float(ledger["carbon_g"]) == pytest.approx(z_tot)
    assert g_e == pytest.approx(148.81, abs=0.01)
    assert z_tot == pytest.approx(75_200.0 + (334.82 * 0.0004 + 0.1128) * 400.0, abs=0.01)


def test_marlin_defaults() -> None:
    m = fac.get_facility_model("marlin")
    assert isinstance(m, fac.MarlinFacility)
    assert m.cop_d == pytest.approx(0.0068 * 25**2 + 0.0008 * 25 + 0.458)  # 4.728
    assert m.phi == pytest.approx(1 / 6)
    assert m.ei_pot_kwh_per_l == pytest.approx(EPRI_SUPPLY_KWH_PER_M3 / 1000)
    assert m.ei_waste_kwh_per_l == pytest.approx(0.35 / 1000)
    f = m.factors(**_signals())
    assert float(f.energy_kwh_per_it_kwh) == pytest.approx(1 + 3 / 4.728 + 0.13)
    # As written, G_blow = G_E / (1 - 1/6) = 1.2 G_E: on-site = 2.2 x evaporation.
    assert float(f.water_onsite_l_per_it_kwh) == pytest.approx(2.2 * LITRES_PER_KWH_OF_HEAT)


def test_marlin_h_cool_basis_and_weather_independence() -> None:
    m = fac.get_facility_model("marlin", cop_d=4.0, h_cool_basis="it+cooling")
    f = m.factors(**_signals())
    g_e = (1.0 + 0.75) * LITRES_PER_KWH_OF_HEAT
    assert float(f.water_onsite_l_per_it_kwh) == pytest.approx(g_e + g_e / (1 - 1 / 6))
    hot = m.factors(**_signals(temp_c=45.0, wetbulb_c=30.0))
    assert float(hot.energy_kwh_per_it_kwh) == float(f.energy_kwh_per_it_kwh)  # fixed COP_d
    with pytest.raises(UnknownNameError):
        fac.get_facility_model("marlin", h_cool_basis="ambient")
    with pytest.raises(ConfigError):
        fac.get_facility_model("marlin", phi=1.0)


def test_default_point_by_hand() -> None:
    # T_db 25 °C, T_wb 20 °C, water-cooled plant: chiller carries the whole load (m = 1),
    # lift = 20 + 11 - 15 = 16 K.
    chiller = c.WATER_COOLED_CARNOT_FRACTION * (15 + 273.15) / 16.0
    compressor = 1.0 / chiller
    cooling = 1.0 / 15.0 + compressor  # fans/pumps + compressor, per kWh IT
    total = 1.0 + cooling + 0.05
    heat = 1.0 + compressor  # IT heat + compressor work go to the tower
    evap = heat * 1.0 * 0.85 * LITRES_PER_KWH_OF_HEAT  # 25 + 5.6 >= 21 -> fully wet
    blow = evap / (6 - 1)
    onsite = evap + blow
    water_kwh = (onsite * EPRI_SUPPLY_KWH_PER_M3 + blow * 0.35) / 1000.0
    f = fac.get_facility_model("default").factors(**_signals())
    assert float(f.cooling_kwh_per_it_kwh) == pytest.approx(cooling)
    assert float(f.infra_kwh_per_it_kwh) == pytest.approx(0.05)
    assert float(f.energy_kwh_per_it_kwh) == pytest.approx(total)
    assert float(f.water_onsite_l_per_it_kwh) == pytest.approx(onsite)
    assert float(f.water_offsite_l_per_it_kwh) == pytest.approx(total * 1.2)
    assert float(f.carbon_g_per_it_kwh) == pytest.approx(300.0 * (total + water_kwh))
    assert float(f.cost_usd_per_it_kwh) == pytest.approx(0.05 * total)
    assert 1.15 < total < 1.2


def test_default_zero_evaporation_in_free_cooling() -> None:
    # Cold: T_db 0 °C -> full free cooling (fans/pumps only) and the hybrid cooler runs dry.
    wb = float(wet_bulb_stull_c(0.0, 80.0))
    f = fac.get_facility_model("default").factors(**_signals(temp_c=0.0, wetbulb_c=wb))
    assert float(f.cooling_kwh_per_it_kwh) == pytest.approx(1 / 15)
    assert float(f.water_onsite_l_per_it_kwh) == 0.0


def test_default_dry_climate_assumption_documented() -> None:
    # Dry and mild (20 °C, 10 % RH): the wet bulb (~7 °C) allows full free cooling, but the dry
    # bulb is too warm for dry operation, so the tower evaporates (the documented assumption).
    wb = float(wet_bulb_stull_c(20.0, 10.0))
    f = fac.get_facility_model("default").factors(**_signals(temp_c=20.0, wetbulb_c=wb))
    assert float(f.cooling_kwh_per_it_kwh) == pytest.approx(1 / 15)
    assert float(f.water_onsite_l_per_it_kwh) == pytest.approx(0.85 * LITRES_PER_KWH_OF_HEAT * 1.2)


def test_default_air_cooled_has_no_onsite_water() -> None:
    f = fac.get_facility_model("default", plant="air-cooled").factors(**_signals(temp_c=40.0))
    assert float(f.water_onsite_l_per_it_kwh) == 0.0
    assert float(f.cooling_kwh_per_it_kwh) > 1 / 15


temps = st.floats(min_value=-30.0, max_value=48.0)
rhs = st.floats(min_value=5.0, max_value=99.0)


@given(temps, temps, rhs)
def test_default_monotone_in_temperature(t1: float, t2: float, rh: float) -> None:
    lo, hi = sorted((t1, t2))
    model = fac.get_facility_model("default")
    f_lo = model.factors(**_signals(temp_c=lo, wetbulb_c=wet_bulb_stull_c(lo, rh)))
    f_hi = model.factors(**_signals(temp_c=hi, wetbulb_c=wet_bulb_stull_c(hi, rh)))
    assert float(f_lo.energy_kwh_per_it_kwh) <= float(f_hi.energy_kwh_per_it_kwh) + 1e-12
    assert float(f_lo.water_onsite_l_per_it_kwh) <= float(f_hi.water_onsite_l_per_it_kwh) + 1e-12


@given(
    st.floats(0, 1e4),
    st.floats(0, 1e4),
    st.floats(0, 50),
    temps,
    st.floats(0, 1000),
    st.sampled_from(fac.FACILITY_PRESETS),
)
def test_linear_in_it_energy(
    a: float, b: float, k: float, t: float, ci: float, preset: str
) -> None:
    f = fac.get_facility_model(preset).factors(
        **_signals(temp_c=t, wetbulb_c=t - 3.0, carbon_intensity_g_per_kwh=ci)
    )
    la, lb = fac.facility_ledger(a, f), fac.facility_ledger(b, f)
    lab, lka = fac.facility_ledger(a + b, f), fac.facility_ledger(k * a, f)
    for key in fac.LEDGER_KEYS:
        assert float(lab[key]) == pytest.approx(float(la[key] + lb[key]), rel=1e-9, abs=1e-9)
        assert float(lka[key]) == pytest.approx(k * float(la[key]), rel=1e-9, abs=1e-9)


def test_ledger_identities_and_broadcast() -> None:
    t = np.array([[0.0], [15.0], [30.0]])  # 3 regions
    ci = np.array([[100.0, 400.0, 700.0, 50.0]])  # 4 epochs
    for preset in fac.FACILITY_PRESETS:
        f = fac.get_facility_model(preset).factors(
            temp_c=t,
            wetbulb_c=t - 4.0,
            carbon_intensity_g_per_kwh=ci,
            price_usd_per_kwh=0.1,
            ewif_l_per_kwh=1.5,
        )
        for arr in (
            f.cooling_kwh_per_it_kwh,
            f.infra_kwh_per_it_kwh,
            f.energy_kwh_per_it_kwh,
            f.water_onsite_l_per_it_kwh,
            f.carbon_g_per_it_kwh,
        ):
            assert arr.shape == (3, 4)
        np.testing.assert_allclose(
            f.energy_kwh_per_it_kwh, 1.0 + f.cooling_kwh_per_it_kwh + f.infra_kwh_per_it_kwh
        )
        it = np.full((3, 4), 7.0)
        led = fac.facility_ledger(it, f)
        assert set(led) == set(fac.LEDGER_KEYS)
        np.testing.assert_allclose(
            led["energy_kwh"],
            led["it_energy_kwh"] + led["cooling_energy_kwh"] + led["infra_energy_kwh"],
        )
        np.testing.assert_allclose(led["water_l"], led["water_onsite_l"] + led["water_offsite_l"])


def test_unknown_names() -> None:
    with pytest.raises(UnknownNameError):
        fac.get_facility_model("pue-1.5")
    with pytest.raises(ConfigError):
        fac.get_facility_model("marlin", cop=4.0)
    with pytest.raises(UnknownNameError):
        fac.get_facility_model("default", plant="immersion")
