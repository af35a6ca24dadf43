"""Electricity Maps and WattTime clients against recorded answers on a loopback fake server
(never the internet), and the fallback order EM -> WattTime -> static in a gateway, seen in
its metrics and log."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

pytest.importorskip("httpx")
pytest.importorskip("yaml")

from greenroute.serve.config import ProviderConfig, parse_config
from greenroute.serve.grid_apis import (
    G_PER_KWH_PER_LBS_PER_MWH,
    ElectricityMapsProvider,
    WattTimeProvider,
)
from greenroute.serve.signals import (
    STATIC_DEFAULTS,
    SignalHub,
    SignalUnavailableError,
    StaticProvider,
)
from grid_api_fakes import EM_KEY, WT_PASSWORD, WT_USER, FakeGridApis

T_REC = pd.Timestamp("2026-11-26T13:00Z").timestamp()  # start of the recorded values
ENV = {"ELECTRICITYMAPS_API_KEY": EM_KEY, "WATTTIME_USER": WT_USER,
       "WATTTIME_PASSWORD": WT_PASSWORD}  # fmt: skip


@pytest.fixture
def grid(servers):
    fake = FakeGridApis()
    return fake, servers(fake.app()).url


def test_electricity_maps_latest_value_zone_map_and_other_keys(grid):
    fake, url = grid
    prov = ElectricityMapsProvider("em", url=url, zones={"DE-LU": "DE"}, env=ENV,
                                   default={"temp_c": 7.5})  # fmt: skip
    s = prov.sample("DE-LU", T_REC + 600.0)
    assert s.values["carbon_intensity_g_per_kwh"] == 302.0
    assert s.measured_at_s == T_REC  # the recording's "datetime"
    assert s.values["temp_c"] == 7.5  # from the config's default
    assert s.values["price_usd_per_kwh"] == STATIC_DEFAULTS["price_usd_per_kwh"]
    assert fake.calls == [("/v3/carbon-intensity/latest", {"zone": "DE"})]
    with pytest.raises(SignalUnavailableError, match="HTTP 404"):
        prov.sample("GB", T_REC)  # zone GB is not in the recording


def test_electricity_maps_credentials_and_failures(grid):
    fake, url = grid
    with pytest.raises(SignalUnavailableError, match="ELECTRICITYMAPS_API_KEY is not set"):
        ElectricityMapsProvider("em", url=url, env={}).sample("DE", T_REC)
    assert fake.calls == []  # nothing sent without a key
    wrong = ElectricityMapsProvider("em", url=url, env={"ELECTRICITYMAPS_API_KEY": "nope"})
    with pytest.raises(SignalUnavailableError, match="HTTP 401"):
        wrong.sample("DE", T_REC)
    fake.mode, fake.delay_s = "slow", 1.0
    slow = ElectricityMapsProvider("em", url=url, env=ENV, timeout_s=0.1)
    with pytest.raises(SignalUnavailableError, match="timed out"):
        slow.sample("DE", T_REC)
    down = ElectricityMapsProvider("em", url="http://127.0.0.1:9", env=ENV)  # discard port
    with pytest.raises(SignalUnavailableError, match="ConnectError"):
        down.sample("DE", T_REC)


def test_watttime_login_forecast_units_and_cache(grid):
    fake, url = grid
    prov = WattTimeProvider("wt", url=url, zones={"US-CAL-CISO": "CAISO_NORTH"}, env=ENV,
                            cache_ttl_s=600.0)  # fmt: skip
    s = prov.sample("US-CAL-CISO", T_REC + 60.0)
    # 870 lbs/MWh x 0.45359237 kg/lb = 394.625 g/kWh
    assert s.values["carbon_intensity_g_per_kwh"] == pytest.approx(394.6253619, rel=1e-12)
    assert s.measured_at_s == T_REC  # the forecast's generated_at
    later = prov.sample("US-CAL-CISO", T_REC + 7 * 60.0)  # the 13:05 point
    assert later.values["carbon_intensity_g_per_kwh"] == pytest.approx(
        865.0 * G_PER_KWH_PER_LBS_PER_MWH, rel=1e-12
    )
    assert [c[0] for c in fake.calls] == ["/login", "/v3/forecast"]  # cached, logged in once
    assert fake.calls[1][1] == {"region": "CAISO_NORTH", "signal_type": "co2_moer"}
    fake.expire_next_token = True  # past the cache TTL: fetched again, 401, log in, retry
    s2 = prov.sample("US-CAL-CISO", T_REC + 700.0)  # the 13:10 point
    assert s2.values["carbon_intensity_g_per_kwh"] == pytest.approx(
        852.0 * G_PER_KWH_PER_LBS_PER_MWH, rel=1e-12
    )
    assert prov.logins == 2
    assert [c[0] for c in fake.calls[2:]] == ["/v3/forecast", "/login", "/v3/forecast"]
    with pytest.raises(SignalUnavailableError, match="does not cover"):
        prov.sample("US-CAL-CISO", T_REC + 30 * 60.0)  # after the last point's 5 minutes


def test_watttime_bad_credentials(grid):
    _, url = grid
    env = {"WATTTIME_USER": WT_USER, "WATTTIME_PASSWORD": "wrong"}
    with pytest.raises(SignalUnavailableError, match="login: HTTP 403"):
        WattTimeProvider("wt", url=url, env=env).sample("CAISO_NORTH", T_REC)
    with pytest.raises(SignalUnavailableError, match="WATTTIME_PASSWORD is not set"):
        WattTimeProvider("wt", url=url, env={"WATTTIME_USER": "u"}).sample("CAISO_NORTH", T_REC)


def _cfg(name: str, stale_after_s: float = 7200.0) -> ProviderConfig:
    return ProviderConfig("static", name, stale_after_s, 0.0)


def test_hub_order_em_watttime_static_with_degraded_set(grid):
    _, url = grid
    em = ElectricityMapsProvider("em", url=url, zones={"US-CAL-CISO": "US-CAL-CISO"}, env=ENV)
    wt = WattTimeProvider("wt", url=url, zones={"US-CAL-CISO": "CAISO_NORTH"}, env=ENV)
    st = StaticProvider("static", {}, {"carbon_intensity_g_per_kwh": 500.0})
    events = []
    hub = SignalHub([em, wt, st], [_cfg("em"), _cfg("wt", stale_after_s=1800.0),
                                   _cfg("static")],
                    on_event=lambda *e: events.append(e))  # fmt: skip
    i, s = hub.current("US-CAL-CISO", T_REC + 60.0)  # EM has no such zone (404): WattTime
    assert (i, s.provider) == (1, "wt")
    assert hub.degraded == {("em", "US-CAL-CISO")}
    assert "HTTP 404" in hub.last_error[("em", "US-CAL-CISO")]
    # 40 min later the recorded forecast no longer covers the time: static
    i, s = hub.current("US-CAL-CISO", T_REC + 2400.0)
    assert (i, s.values["carbon_intensity_g_per_kwh"]) == (2, 500.0)
    assert hub.degraded == {("em", "US-CAL-CISO"), ("wt", "US-CAL-CISO")}
    assert events == [("failure", "em", "US-CAL-CISO"), ("failure", "em", "US-CAL-CISO"),
                      ("failure", "wt", "US-CAL-CISO")]  # fmt: skip


def test_gateway_shows_degraded_providers_in_metrics_and_log(grid, monkeypatch, caplog):
    from greenroute.serve.gateway import Gateway

    fake, url = grid
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    fake.mode = "fail"  # both APIs answer HTTP 500
    raw = {
        "regions": {"DE-LU": {"upstreams": [{"name": "de", "url": "http://127.0.0.1:9",
                                             "models": ["tiny"]}]}},
        "origins": {"eu": {"region": "DE-LU"}},
        "signals": {"providers": [
            {"type": "electricitymaps", "name": "em", "url": url, "zones": {"DE-LU": "DE"}},
            {"type": "watttime", "name": "wt", "url": url, "timeout_s": 2.0},
            {"type": "static", "name": "fixed",
             "default": {"carbon_intensity_g_per_kwh": 321.0}},
        ]},
    }  # fmt: skip
    cfg = parse_config(raw)
    assert [p.type for p in cfg.providers] == ["electricitymaps", "watttime", "static"]
    caplog.set_level(logging.WARNING, logger="greenroute.serve")
    gw = Gateway(cfg, clock=lambda: T_REC + 60.0)
    text = gw.metrics.export().decode()
    assert 'greenroute_signal_provider_degraded{provider="em",region="DE-LU"} 1.0' in text
    assert 'greenroute_signal_provider_degraded{provider="wt",region="DE-LU"} 1.0' in text
    assert ('greenroute_signal_value{provider="fixed",region="DE-LU",'
            'signal="carbon_intensity_g_per_kwh"} 321.0') in text  # fmt: skip
    assert 'greenroute_signal_fallbacks_total{kind="failure",provider="em",region="DE-LU"} 1.0' \
        in text  # fmt: skip
    msgs = [r.getMessage() for r in caplog.records]
    assert any("signal provider em for DE-LU: failure (em: zone DE: HTTP 500" in m for m in msgs)
    assert any("signal provider wt for DE-LU: failure (wt: login: HTTP 500" in m for m in msgs)
    # the EM API comes back: the next epoch uses it and the gauge drops to 0
    fake.mode = "ok"
    gw.replan(gw.planner.replan(T_REC + 120.0))
    text = gw.metrics.export().decode()
    assert 'greenroute_signal_provider_degraded{provider="em",region="DE-LU"} 0.0' in text
    assert ('greenroute_signal_value{provider="em",region="DE-LU",'
            'signal="carbon_intensity_g_per_kwh"} 302.0') in text  # fmt: skip
    assert any("signal provider em for DE-LU: answers again" in r.getMessage()
               for r in caplog.records)  # fmt: skip


def test_config_rejects_bad_live_options():
    from greenroute.serve.config import GatewayConfigError

    raw = {
        "regions": {"DE-LU": {"upstreams": [{"name": "de", "url": "http://127.0.0.1:9",
                                             "models": ["tiny"]}]}},
        "origins": {"eu": {"region": "DE-LU"}},
        "signals": {"providers": [
            {"type": "electricitymaps", "url": "ftp://x", "username_env": "U",
             "zones": {"XX": "DE"}},
            {"type": "static", "api_key_env": "K"},
        ]},
    }  # fmt: skip
    with pytest.raises(GatewayConfigError) as err:
        parse_config(raw, source="gw.yaml")
    problems = err.value.problems
    assert "gw.yaml: signals.providers[0].url: must start with http:// or https://, got " \
        "'ftp://x'" in problems  # fmt: skip
    assert "gw.yaml: signals.providers[0].username_env: not an option of the " \
        "electricitymaps provider" in problems  # fmt: skip
    assert any(
        p.startswith("gw.yaml: signals.providers[0].zones.XX: unknown key") for p in problems
    )
    assert "gw.yaml: signals.providers[1].api_key_env: not an option of the static provider" \
        in problems  # fmt: skip
