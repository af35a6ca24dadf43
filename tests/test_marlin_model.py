"""MARLIN §3 equations (seed 001) under the ``marlin`` preset, with hand-computed numbers."""

from __future__ import annotations

import numpy as np
import pytest

from greenroute.core.errors import ConfigError
from greenroute.core.types import RequestView, ServerView
from greenroute.physics import marlin_cop as MC
from greenroute.physics import marlin_model as MM
from greenroute.physics.facility import MARLIN_DEFAULT_COP_D, get_facility_model
from greenroute.physics.network import latency_matrix_s, network_preset, one_way_latency_s
from greenroute.policies.registry import LOCAL_POLICIES
from greenroute.scenarios.marlin import MARLIN8_NODE_TYPES, check_memory
from greenroute.sim.forecast import Forecaster, marlin_predict


# ---------------------------------------------------------------------------------- eq. 2
def test_eq2_plain_form_by_hand():
    # 1000 km x 1.4682 / 299792.458 s/km + (6 + 1000/800) hops x 50 µs
    # = 4.897388e-3 + 7.25 x 5e-5 = 5.259888e-3 s
    assert MM.net_latency_s(1000.0) == pytest.approx(5.259888e-3, rel=1e-6)
    assert MM.net_latency_s(1000.0, hops=2) == pytest.approx(4.897388e-3 + 1e-4, rel=1e-6)
    # the marlin preset makes the engine's latency function eq. 2 exactly ...
    plain = one_way_latency_s(1000.0, **network_preset("marlin"))
    assert plain == pytest.approx(MM.net_latency_s(1000.0), rel=1e-12)
    # ... while the default keeps the 2.1 route inflation and the 1 ms metro floor
    assert one_way_latency_s(1000.0) == pytest.approx(1e-3 + 2.1 * 4.897388e-3 + 3.625e-4, 1e-6)
    assert network_preset("default") == {}
    # same site: only the 6 end hops remain, 0.3 ms (the default adds the 1 ms floor)
    ll = np.array([[51.5, -0.16], [1.30, 103.86]])
    assert np.diag(latency_matrix_s(ll, ll, **network_preset("marlin"))) == pytest.approx(3e-4)
    assert np.diag(latency_matrix_s(ll, ll)) == pytest.approx(1.3e-3)


# ---------------------------------------------------------------------------------- eq. 3
def test_eq3_ttft_by_hand():
    # exec linear in T: (0.2 s prefill + 100 x 0.02 s decode) / 100 tokens = 0.022 s/token
    assert MM.exec_per_output_token_s(0.2, 0.02, 100) == pytest.approx(0.022)
    # LA_load 0 (resident) + 2 x 5 ms + 0.022 s
    assert MM.request_ttft_s(0.0, 5e-3, 0.022) == pytest.approx(0.032)
    # cold: Llama-2-70B (137.96 GB) over 4 x A100's 4 NVMe x 7 GB/s = 28 GB/s -> 4.927 s
    from greenroute.catalog.hardware import get_llm
    from greenroute.physics.llm_perf import cold_load_s

    cold = cold_load_s(get_llm("llama2-70b"), "a100-80gb", 4)
    assert cold == pytest.approx(137.96 / 28.0)
    assert MM.load_latency_s([cold, cold], [True, False]) == pytest.approx([0.0, 4.9271429])
    # LA_tot,e: cohorts (epoch, requests, term) (0, 2, 1 s), (0, 3, 2 s), (1, 4, 0.5 s)
    got = MM.epoch_ttft_sum_s([0, 0, 1], [2, 3, 4], [1.0, 2.0, 0.5], 3)
    assert got == pytest.approx([8.0, 2.0, 0.0])
    with pytest.raises(ConfigError, match="T_i"):
        MM.exec_per_output_token_s(0.2, 0.02, 0)


# ---------------------------------------------------------------------------------- eq. 4
def test_eq4_it_energy_by_hand():
    # TDP_n = n/8 of the DGX server TDP: 4/8 x 6500 W (DGX A100), 8/8 x 10200 W (DGX H100)
    assert MM.node_tdp_w("a100-80gb", 4) == pytest.approx(3250.0)
    assert MM.node_tdp_w("h100-80gb", 8) == pytest.approx(10200.0)
    assert MM.pstate_fraction(1625.0, 3250.0) == pytest.approx(0.5)
    # 0.5 x 3250 W x 900 s / 3.6e6 J/kWh = 0.40625 kWh
    assert MM.it_energy_kwh(0.5, 3250.0, 900.0) == pytest.approx(0.40625)
    with pytest.raises(ConfigError):
        MM.node_tdp_w("a100-80gb", 0)


# ---------------------------------------------------------------------------------- eq. 1
def test_eq1_memory_by_hand():
    # 2 x 13.48 GB of Llama-2-7B weights + 64 slots x 2000 tokens x 524,288 B on 2 x 80 GB
    head = check_memory(MARLIN8_NODE_TYPES, 2000.0)
    assert head[("a100-80gb", 2)] == pytest.approx(160e9 - 26.96e9 - 64 * 2000 * 524288)
    # Llama-2-70B on 8 x 80 GB: 640 - 137.96 - 32 x 2000 x 327,680 B
    assert head[("h100-80gb", 8)] == pytest.approx(640e9 - 137.96e9 - 32 * 2000 * 327680)
    # 7B on one A100 with 32 slots x 4096 tokens: 13.48 + 68.72 GB > 80 GB
    with pytest.raises(ConfigError, match=r"eq\. 1 violated: weights \+ KV = 82\.2 GB > 1 x"):
        MM.check_node_memory("x", [13.48e9], [524288] * 32, [4096] * 32, "a100-80gb", 1)
    # a 70B on a 2-GPU node: 137.96 + 32 x 3000 x 327,680 B = 169.4 GB > 160 GB, named
    bad = (("a100-80gb", 2, "llama2-70b", 2, 10),)
    with pytest.raises(ConfigError, match="node type 2 x a100-80gb"):
        check_memory(bad, 3000.0)


# ---------------------------------------------------------------------------------- COP_d
def test_cop_curve_by_hand():
    # ASHRAE 90.1 air-cooled minimum at AHRI's 35 °C: 10.1 EER / 3.412 = 2.9601
    assert MC.crac_cop_at_dry_bulb(35.0) == pytest.approx(10.1 / 3.412)
    # Carnot scaling of the lift (T + 15 - 6.67): 2.9601 x 43.33 / 28.33 at 20 °C
    assert MC.crac_cop_at_dry_bulb(20.0) == pytest.approx(4.5274584, rel=1e-6)
    # lift floored at 10 K below 1.67 °C: 2.9601 x 43.33 / 10
    assert MC.crac_cop_at_dry_bulb(-5.0) == pytest.approx(12.826289, rel=1e-6)
    # harmonic (annual-energy) mean: January at 35 °C, the rest at 20 °C
    table = np.full((12, 24), 20.0)
    table[0] = 35.0
    inv = (31 / 365) / 2.9601407 + (334 / 365) / 4.5274584
    assert MC.climate_cop(table) == pytest.approx(1.0 / inv, rel=1e-6)
    assert MC.climate_cop(table) == pytest.approx(4.3326245, rel=1e-6)


def test_cop_d_per_site_and_facility():
    regions = ("SG", "GB", "NOT-A-REGION")
    cop = MC.sites_cop_d(regions)
    assert cop[0] < 4.0 < 6.0 < cop[1]  # hot Singapore vs cool London
    assert cop[2] == MARLIN_DEFAULT_COP_D  # no climate profile: the preset default (4.728)
    f = get_facility_model("marlin", regions=regions)
    ones = np.ones((2, 3))
    fac = f.factors(temp_c=ones, wetbulb_c=ones, carbon_intensity_g_per_kwh=ones,
                    price_usd_per_kwh=ones, ewif_l_per_kwh=ones)  # fmt: skip
    # §3.3: E_cool = 3 x E_IT / COP_d, column by column
    assert fac.cooling_kwh_per_it_kwh == pytest.approx(np.tile(3.0 / np.array(cop), (2, 1)))
    # settable per scenario: explicit values win, one per datacenter
    g = get_facility_model("marlin", regions=regions, cop_d=(2.0, 4.0, 6.0))
    assert g.factors(temp_c=ones, wetbulb_c=ones, carbon_intensity_g_per_kwh=ones,
                     price_usd_per_kwh=ones, ewif_l_per_kwh=ones
                     ).cooling_kwh_per_it_kwh[0] == pytest.approx([1.5, 0.75, 0.5])  # fmt: skip
    with pytest.raises(ConfigError, match="cop_d has 2 values for 3 datacenters"):
        get_facility_model("marlin", regions=regions, cop_d=(2.0, 4.0))
    # without regions the preset keeps its single default; the default facility ignores it
    assert get_facility_model("marlin").cop_d == MARLIN_DEFAULT_COP_D
    assert get_facility_model("default", regions=regions).name == "default"


# ---------------------------------------------------------------------------------- local
def _servers(slots, active):
    n = len(slots)
    z = np.zeros(n)
    return ServerView(0.0, np.asarray(active), z, np.asarray(slots), z, z,
                      np.ones(n, bool), np.ones(n, bool))  # fmt: skip


def test_modified_round_robin_by_hand():
    lp = LOCAL_POLICIES.build("modified-round-robin")
    lp.reset("GB")
    req = RequestView(0, 0.0, 0, 0, 100, 10)
    free = _servers([2, 1, 1], [0, 0, 0])
    # credits (+[2,1,1], winner -4): [2,1,1]->0, [0,2,2]->1, [2,-1,3]->2, [4,0,0]->0
    assert [lp.pick(req, free) for _ in range(8)] == [0, 1, 2, 0, 0, 1, 2, 0]
    # server 0 saturated (2 running of 2 slots): skipped while 1 and 2 have room
    lp.reset("GB")
    assert [lp.pick(req, _servers([2, 1, 1], [2, 0, 0])) for _ in range(4)] == [1, 2, 1, 2]
    # all saturated: back to weighting every candidate
    lp.reset("GB")
    assert lp.pick(req, _servers([2, 1, 1], [2, 1, 1])) == 0


# ---------------------------------------------------------------------------------- §5.1
def test_marlin_predictor_by_hand():
    # alpha 0.7, t_w 4: weights 0.7 x 0.3^k = [0.0189, 0.063, 0.21, 0.7] over [2, 3, 4, 5]
    # = 4.5668 / 0.9919 = 4.604093
    hist = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert marlin_predict(hist) == pytest.approx(4.604093, rel=1e-6)
    assert marlin_predict(hist, alpha=1.0, window_epochs=2) == pytest.approx(5.0)
    with pytest.raises(ConfigError):
        marlin_predict(np.zeros((0, 3)))
    # the forecaster: demand from the past rates per (class, origin), grid signals persist
    obs = np.arange(1.0, 8.0)[:, None, None] * np.ones((7, 2, 3))
    fc = Forecaster("marlin-ewma")
    d = fc.demand(obs, np.zeros_like(obs), e=5, horizon=2)
    assert d.shape == (3, 2, 3)
    assert d == pytest.approx(np.full((3, 2, 3), 4.604093), rel=1e-6)
    sig = np.arange(10.0)[:, None] * np.ones((10, 2))
    assert fc.signal(sig, 3, 2) == pytest.approx(np.full((3, 2), 3.0))
