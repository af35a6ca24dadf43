"""Signal providers of the gateway: replay of the real files, static values, caching,
staleness and the fallback order."""

from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("yaml")

from greenroute.serve.config import SIGNAL_KEYS, ProviderConfig
from greenroute.serve.signals import (
    ReplayProvider,
    SignalHub,
    SignalSample,
    SignalUnavailableError,
    StaticProvider,
    epoch_signals,
)

T0 = 1_800_000_000.0  # wall clock of the tests (unix s)


def _cfg(name: str, stale_after_s: float = 7200.0, cache_ttl_s: float = 0.0) -> ProviderConfig:
    return ProviderConfig("static", name, stale_after_s, cache_ttl_s)


class Flaky:
    """A provider whose answers the test sets; counts its calls."""

    can_forecast = False

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0
        self.fail = False
        self.measured_at = T0
        self.ci = 111.0

    def sample(self, region: str, wall_s: float) -> SignalSample:
        self.calls += 1
        if self.fail:
            raise SignalUnavailableError("down")
        vals = dict.fromkeys(SIGNAL_KEYS, 50.0) | {"carbon_intensity_g_per_kwh": self.ci}
        return SignalSample(vals, self.measured_at, self.name)


@pytest.mark.realdata
def test_replay_gives_the_files_values_with_offset_and_speedup(data_dir):
    from greenroute.data.grid_loaders import load_region_signals

    start = pd.Timestamp("2023-06-01T00:00Z")
    prov = ReplayProvider("replay", data_dir, start, speedup=60.0, t0_s=T0)
    ref = load_region_signals(data_dir, "DE-LU", start, start + pd.Timedelta(hours=4))
    s0 = prov.sample("DE-LU", T0 + 30.0)  # 30 wall s = 30 data min: still hour 0
    assert s0.values["carbon_intensity_g_per_kwh"] == ref["carbon_intensity_g_per_kwh"].iloc[0]
    assert s0.measured_at_s == T0
    s2 = prov.sample("DE-LU", T0 + 150.0)  # 150 wall s x 60 = 2.5 data hours: hour 2
    assert s2.values["price_usd_per_kwh"] == ref["price_usd_per_kwh"].iloc[2]
    assert s2.measured_at_s == T0 + 120.0  # hour 2 began 120 wall seconds after start
    with pytest.raises(SignalUnavailableError):
        prov.sample("NO-SUCH-REGION", T0)


def test_fallback_order_staleness_and_cache():
    first, second = Flaky("first"), Flaky("second")
    second.ci = 222.0
    events = []
    hub = SignalHub([first, second], [_cfg("first", 100.0, cache_ttl_s=10.0), _cfg("second")],
                    on_event=lambda *e: events.append(e))  # fmt: skip
    i, s = hub.current("DE-LU", T0)
    assert (i, s.values["carbon_intensity_g_per_kwh"]) == (0, 111.0)
    hub.current("DE-LU", T0 + 5.0)
    assert first.calls == 1  # cached for 10 s
    first.fail = True
    hub.current("DE-LU", T0 + 9.0)
    assert first.calls == 1 and events == []  # still the cached value
    i, s = hub.current("DE-LU", T0 + 11.0)
    assert (i, s.provider) == (1, "second") and events == [("failure", "first", "DE-LU")]
    first.fail = False  # answers again, but its value is 150 s old: stale (limit 100 s)
    i, s = hub.current("DE-LU", T0 + 150.0)
    assert (i, s.provider) == (1, "second") and events[-1] == ("stale", "first", "DE-LU")
    second.fail = True
    first.measured_at = T0 + 200.0
    i, s = hub.current("DE-LU", T0 + 300.0)  # 100 s old: not stale (limit is exclusive)
    assert (i, s.provider) == (0, "first")
    first.fail = True
    i, s = hub.current("DE-LU", T0 + 400.0)  # nobody answers: the last good value is kept
    assert (i, s.provider) == (-1, "first") and events[-1] == ("last-known", "first", "DE-LU")


def test_static_provider_and_derived_signals():
    prov = StaticProvider("st", {"GB": {"carbon_intensity_g_per_kwh": 200.0, "temp_c": 20.0,
                                        "rh_pct": 50.0}},
                          {"carbon_intensity_g_per_kwh": 400.0})  # fmt: skip
    hub = SignalHub([prov], [_cfg("st")])
    arr = epoch_signals(hub, ["GB", "DE-LU"], T0, horizon=2, epoch_s=60.0)
    assert arr.carbon_intensity_g_per_kwh.shape == (3, 2)
    assert arr.carbon_intensity_g_per_kwh[:, 0].tolist() == [200.0, 200.0, 200.0]
    assert arr.carbon_intensity_g_per_kwh[0, 1] == 400.0
    assert arr.price_usd_per_kwh[0, 1] == 0.10  # STATIC_DEFAULTS
    # Stull (2011) wet bulb at 20 degC and 50 % RH is 13.7 degC (his Fig. 1 example)
    assert arr.wetbulb_c[0, 0] == pytest.approx(13.7, abs=0.05)
    assert arr.providers == ("st", "st") and arr.age_s.tolist() == [0.0, 0.0]
    with pytest.raises(SignalUnavailableError):
        StaticProvider("none", {}, {}).sample("GB", T0)
