"""Every registered scenario runs, with and without real data."""

from __future__ import annotations

import pytest

import greenroute
from greenroute.core.errors import UnknownNameError
from greenroute.scenarios import get_scenario, scenario_names

SHORT = {"demo": 0.1, "geo3": 0.25, "geo5": 0.25, "geo10": 0.25}


def test_registry_lists_issue_scenarios():
    for name in ("demo", "geo3", "geo5", "geo10", "lb-nominal", "lb-highload"):
        assert name in scenario_names()
    with pytest.raises(UnknownNameError, match="geo3"):
        get_scenario("geo4")


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["demo", "geo3", "geo5", "geo10", "lb-nominal", "lb-highload"])
def test_every_scenario_runs_with_real_data(name, data_dir):
    res = greenroute.run(name, "local-only", seed=0, days=SHORT.get(name), data_dir=data_dir)
    m = res.metrics
    assert m["requests_total"] > 0
    assert m["requests_completed"] > 0.9 * m["requests_total"]
    assert m["energy_kwh"] > m["it_energy_kwh"] > 0
    if name != "demo":  # demo always uses the embedded profiles
        assert res.manifest["signals_source"] == "real"
        assert res.manifest["input_files_sha256"]


@pytest.mark.parametrize("name", ["geo3", "lb-highload"])
def test_real_data_scenarios_fall_back_to_embedded_and_say_so(name, monkeypatch):
    monkeypatch.delenv("GREENROUTE_DATA_DIR", raising=False)
    res = greenroute.run(name, "local-only", seed=0, days=SHORT.get(name))
    assert res.manifest["signals_source"] == "embedded"
    assert any("no --data-dir" in note for note in res.notes)


def test_geo_scenarios_match_seed_000_sites():
    assert get_scenario("geo3").regions == ("DE-LU", "CL-SIC", "US-CAL-CISO")
    assert get_scenario("geo5").regions[3:] == ("AU-NSW", "SG")
    assert get_scenario("geo10").regions[5:] == ("US-NY-NYIS", "BR-SP", "ZA", "GB", "KR")
    assert get_scenario("geo10").days == 31


@pytest.mark.realdata
def test_lb_scenarios_follow_seed_002(data_dir):
    nominal = get_scenario("lb-nominal")
    tps = [(g.tokens_per_s, g.max_concurrency) for g in nominal.cluster.regions[0].groups]
    assert tps == [(5000.0, 5)] * 3
    high = get_scenario("lb-highload")
    tps = [(g.tokens_per_s, g.max_concurrency) for g in high.cluster.regions[0].groups]
    assert tps == [(3000.0, 3), (5000.0, 5), (7000.0, 7)]
    res = greenroute.run("lb-highload", "local-only", data_dir=data_dir, record_requests=True)
    req = res.requests
    assert len(req) == 5000
    assert req["arrival_s"].max() == pytest.approx(1000.0)
    # throughput model: service = (prompt + output) / TPS of the chosen server
    served = req[req["finish_s"].notna()]
    rate = {0: 3000.0, 1: 5000.0, 2: 7000.0}
    svc = served["finish_s"] - served["start_s"]
    expect = (served["prompt_tokens"] + served["output_tokens"]) / served["server"].map(rate)
    assert svc.to_numpy() == pytest.approx(expect.to_numpy(), rel=1e-9)
