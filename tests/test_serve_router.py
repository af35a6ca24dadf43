"""Per-request rules of the gateway's router and the planner's use of the simulator's policy
objects (in process, no sockets: nothing here is sent upstream)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("fastapi")

from greenroute.core.types import Plan
from greenroute.policies.heuristics import LowestCarbon
from greenroute.serve.config import parse_config
from greenroute.serve.errors import GatewayHTTPError
from greenroute.serve.gateway import Gateway
from serve_fakes import gateway_dict

T0 = 1_900_000_000.0  # the wall clock the tests run at (unix s)
REGIONS = ("DE-LU", "GB", "US-CAL-CISO", "JP-TK")


def _gateway(clock, **extra) -> Gateway:
    raw = gateway_dict({r: [f"http://127.0.0.1:{9 + i}"] for i, r in enumerate(REGIONS)},
                       **extra)  # fmt: skip
    raw["origins"]["us"] = {"region": "US-CAL-CISO"}
    return Gateway(parse_config(raw), clock=clock)


RULES = {
    "residency": {"eu": ["DE-LU", "GB", "JP-TK"]},
    "exclusions": [{"region": "GB", "start": "2030-03-17T17:48:20Z",  # T0 + 100 s
                    "end": "2030-03-17T17:50:00Z"}],  # T0 + 200 s
    "max_one_way_latency_ms": 50,  # Frankfurt-London ~8 ms, transatlantic > 85 ms
}  # fmt: skip
# allowed regions by hand, outside / inside the GB window: (origin, class) -> set
EXPECTED = {
    ("eu", 0): {"DE-LU", "GB"}, ("eu", 1): {"DE-LU", "GB", "JP-TK"},
    ("uk", 0): {"DE-LU", "GB"}, ("uk", 1): set(REGIONS),
    ("us", 0): {"US-CAL-CISO"}, ("us", 1): set(REGIONS),
}  # fmt: skip


def test_no_request_goes_where_a_rule_forbids_whatever_the_plan_says():
    now = [T0]
    gw = _gateway(lambda: now[0], constraints=RULES)
    rng = np.random.default_rng(7)
    seen = Counter()
    for wall in (T0, T0 + 150.0, T0 + 250.0):  # before, inside, after the GB window
        now[0] = wall
        for _ in range(30):  # random plans, forbidden regions included (a stale/buggy plan)
            route = rng.dirichlet(np.ones(4), size=(2, 3))
            gw.router.state = dataclasses.replace(gw.router.state, plan=Plan(route=route))
            for o, origin in enumerate(("eu", "uk", "us")):
                for c in (0, 1):
                    choice, check = gw.router.choose(o, c, "tiny", wall)
                    region = REGIONS[choice.region]
                    allowed = EXPECTED[(origin, c)] - ({"GB"} if wall == T0 + 150 else set())
                    assert region in allowed, (wall, origin, c, region)
                    assert set(check.allowed_regions) == allowed
                    seen[(wall, region)] += 1
    assert seen[(T0 + 150.0, "GB")] == 0 and seen[(T0, "GB")] > 0 and seen[(T0 + 250, "GB")] > 0


def test_shares_are_followed_among_the_allowed_regions():
    gw = _gateway(lambda: T0, constraints={"residency": {"uk": ["GB", "JP-TK"]}})
    route = np.zeros((2, 2, 4))
    route[:, 1] = [0.5, 0.3, 0.0, 0.2]  # half of it to DE-LU, which residency forbids
    route[:, 0, 0] = 1.0
    gw.router.state = dataclasses.replace(gw.router.state, plan=Plan(route=route))
    n = 4000
    got = Counter(REGIONS[gw.router.choose(1, 0, "tiny", T0)[0].region] for _ in range(n))
    assert set(got) == {"GB", "JP-TK"}
    # GB gets 0.3 / (0.3 + 0.2) = 0.6 of them: binomial sd 0.0077, 4 sd tolerance
    assert got["GB"] / n == pytest.approx(0.6, abs=0.031)


def test_down_or_full_regions_are_skipped_and_power_caps_cut_slots():
    idle, peak = 0.075, 10.2 / 8  # kW per h100-80gb upstream (catalog defaults)
    gw = _gateway(lambda: T0, constraints={"power_caps_kw": {"GB": idle + 0.5 * (peak - idle)}})
    ups = {REGIONS[u.region]: u for u in gw.pool.upstreams}
    assert ups["GB"].usable_slots == 32 and ups["DE-LU"].usable_slots == 64  # capacity 64
    assert gw.router.state.obs.capacity_slots.tolist() == [64.0, 32.0, 64.0, 64.0]
    choice, _ = gw.router.choose(0, 0, "tiny", T0)
    assert REGIONS[choice.region] == "DE-LU" and not choice.fallback  # lowest carbon
    ups["DE-LU"].in_flight = 64  # full: the plan's only region cannot take it
    choice, _ = gw.router.choose(0, 0, "tiny", T0)
    assert REGIONS[choice.region] != "DE-LU" and choice.fallback == "plan-share-zero"
    ups["DE-LU"].in_flight = 0
    ups["DE-LU"].ejected = True
    assert REGIONS[gw.router.choose(0, 0, "tiny", T0)[0].region] != "DE-LU"
    for u in gw.pool.upstreams:
        u.ejected = True
    with pytest.raises(GatewayHTTPError) as info:
        gw.router.choose(0, 0, "tiny", T0)
    assert info.value.status == 503


def test_the_plan_is_the_registry_policys_and_invalid_plans_fall_back():
    gw = _gateway(lambda: T0, constraints={"residency": {"eu": ["GB", "JP-TK"]}})
    assert isinstance(gw.planner.geo, LowestCarbon)
    state = gw.replan()
    # no demand yet: each origin's work goes to its cleanest allowed region
    assert state.plan.route[0, 0].tolist() == [0.0, 1.0, 0.0, 0.0]  # eu: GB (200 < JP's 400)
    assert state.plan.route[0, 1].tolist() == [1.0, 0.0, 0.0, 0.0]  # uk: DE-LU
    assert state.obs.carbon_intensity_g_per_kwh[0].tolist() == [100.0, 200.0, 300.0, 400.0]
    assert not state.rejected

    class Rogue:
        name = "rogue"

        def plan(self, obs):
            return Plan(route=np.full((2, 3, 4), 0.25))  # sends eu work to DE-LU

    gw.planner.geo = Rogue()
    state = gw.replan()
    assert "residency" in state.rejected
    assert state.plan.route[0, 0, 0] == 0.0  # the safe plan: allowed regions by capacity
    assert state.plan.route[0, 0].tolist() == [0.0, 0.5, 0.0, 0.5]


def test_a_failing_signal_provider_falls_back_and_shows_in_metrics(tmp_path):
    (tmp_path / "grid").mkdir()
    (tmp_path / "grid" / "regions.csv").write_text("region\n")  # no region has data here
    signals = {"providers": [
        {"type": "replay", "name": "files", "data_dir": str(tmp_path), "start": "2023-06-01"},
        {"type": "static", "name": "fixed", "default": {"carbon_intensity_g_per_kwh": 321.0}},
    ]}  # fmt: skip
    gw = _gateway(lambda: T0, signals=signals)
    sig = gw.router.state.signals
    assert sig.providers == ("fixed",) * 4
    assert sig.carbon_intensity_g_per_kwh[0].tolist() == [321.0] * 4
    text = gw.metrics.export().decode()
    assert 'greenroute_signal_fallbacks_total{kind="failure",provider="files",region="GB"} 1.0' \
        in text  # fmt: skip
    assert ('greenroute_signal_value{provider="fixed",region="GB",'
            'signal="carbon_intensity_g_per_kwh"} 321.0') in text  # fmt: skip


def test_origin_comes_from_the_key_then_the_header_then_the_network():
    from greenroute.serve.security import ClientKey, hash_api_key

    raw_origins = {"eu": {"region": "DE-LU", "networks": ["10.1.0.0/16", "fd00::/8"]},
                   "uk": {"region": "GB", "header": "london"}}  # fmt: skip
    gw = _gateway(lambda: T0, origins=raw_origins, default_origin="uk")
    key_eu = ClientKey("k", hash_api_key("x"), origin="eu")
    assert gw.resolve_origin(key_eu, "london", "192.0.2.1") == 0  # the key's origin wins
    assert gw.resolve_origin(None, "london", "10.1.2.3") == 1  # then the header
    assert gw.resolve_origin(None, None, "10.1.2.3") == 0  # then the network
    assert gw.resolve_origin(None, None, "fd12::1") == 0
    assert gw.resolve_origin(None, None, "10.2.0.1") == 1  # else the default origin
    assert gw.resolve_origin(None, "eu", None) == 0  # a header value is the origin's header
    with pytest.raises(GatewayHTTPError) as info:
        gw.resolve_origin(None, "uk", None)  # uk's header value is "london"
    assert info.value.status == 400 and info.value.code == "unknown_origin"


def test_every_registered_geo_policy_plans_live_without_rejection():
    """The optimisers need the objective's reference scales: the gateway supplies local-only's
    cost of the current epoch (``live_objective_scales``)."""
    from greenroute.core.errors import ConfigError
    from greenroute.policies.registry import geo_policy_names, make_geo_policy

    refused = []
    for name in geo_policy_names():
        try:
            gw = _gateway(lambda: T0, policy={"geo": name}, horizon_epochs=2,
                          constraints={"residency": {"eu": ["DE-LU", "GB"]}})  # fmt: skip
        except ConfigError as err:  # a policy that plans on simulator forks (MARLIN)
            assert "needs the simulator" in str(err), name
            refused.append(name)
            continue
        for _ in range(2):
            gw.planner.count_arrival(0, 0)
            state = gw.replan()
        assert state.rejected == "", (name, state.rejected)
        assert state.plan.route[:, 0, 2:].sum() == 0.0, name  # residency kept
        scales = state.obs.objective_scales
        assert scales["interactive_requests"] >= 2.0 and scales["carbon_kg"] > 0, name
    # refused exactly when the policy says it needs the simulator
    needs = [n for n in geo_policy_names() if getattr(make_geo_policy(n), "needs_simulator", False)]
    assert refused == needs and "marlin" in refused


def test_live_scales_are_local_only_over_the_epoch():
    gw = _gateway(lambda: T0)
    obs = gw.router.state.obs
    s = obs.objective_scales
    # no traffic yet: one request per class and origin (eu, uk, us), each in its own region
    assert (s["interactive_requests"], s["requests_total"]) == (3.0, 6.0)
    # TTFT = 2 x one-way latency inside a region (the network model's 1.3 ms floor) + the
    # default prefill of 0.2 s
    assert s["ttft_mean_s"] == pytest.approx(2 * 0.0013 + 0.2, rel=1e-9)
    # carbon: every region's idle IT energy over the hour (4 x 75 W x 1 h) plus two requests'
    # dynamic energy in DE-LU, GB and US-CAL-CISO ((1.275 - 0.075) kW / 64 slots x 2 s
    # each), times each region's facility carbon factor
    it_kwh = np.full(4, 0.075)
    it_kwh[:3] += 2 * 1.2 / 64 * 2.0 / 3600
    assert s["carbon_kg"] == pytest.approx(float(it_kwh @ obs.carbon_g_per_it_kwh[0]) / 1e3)


def test_demand_is_the_last_epochs_arrival_rate():
    now = [T0]
    gw = _gateway(lambda: now[0])
    for _ in range(10):
        gw.planner.count_arrival(0, 1)  # interactive, uk
    gw.planner.count_arrival(1, 0)  # deferrable, eu
    now[0] = T0 + 5.0
    obs = gw.replan().obs
    assert obs.demand_rps.shape == (1, 2, 3)  # [H+1, C, O], no look-ahead configured
    assert obs.demand_rps[0].tolist() == [[0.0, 2.0, 0.0], [0.2, 0.0, 0.0]]
