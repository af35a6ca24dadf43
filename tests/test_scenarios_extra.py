"""The au-edge (seed 004) and marlin8 (seed 001 §6) scenarios and the Australian normals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import greenroute
from greenroute.api import metrics_equal
from greenroute.catalog import REGIONS, get_region
from greenroute.catalog.regions import SIGNAL_REGIONS
from greenroute.data import au_normals as A
from greenroute.data.perf_knots import embedded_knots
from greenroute.physics.llm_perf import available_perf
from greenroute.scenarios import au_edge, get_scenario, marlin, scenario_names
from greenroute.sim.epoch_signals import HOURLY_COLUMNS, hourly_signals

AVAILABLE_PERF = available_perf(embedded_knots())

NEW = ("AU-QLD-BNE", "AU-SA-ADL", "AU-WA-PER", "AU-TAS-HBA", "AU-NT-DRW")
YEAR = 2023


@pytest.fixture
def no_env_data(monkeypatch):
    """Borrowed grid shapes from the embedded generator (no $GREENROUTE_DATA_DIR)."""
    monkeypatch.delenv("GREENROUTE_DATA_DIR", raising=False)
    yield
    A.clear_cache()


@pytest.fixture
def env_data(monkeypatch, data_dir):
    """Borrowed grid shapes from the real AU-NSW / AU-VIC files."""
    monkeypatch.setenv("GREENROUTE_DATA_DIR", str(data_dir))
    yield data_dir
    A.clear_cache()


def _year(key: str, seed: int = 3, **kw) -> pd.DataFrame:
    start = pd.Timestamp(f"{YEAR}-01-01", tz="UTC")
    hours = int((pd.Timestamp(f"{YEAR + 1}-01-01", tz="UTC") - start) / pd.Timedelta(hours=1))
    return A.hourly_signals(key, start, hours, seed, **kw)


def _local_std(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    out = frame.copy()
    shift = pd.Timedelta(hours=A.CITY_NORMALS[key].std_utc_offset_h)
    out.index = frame.index.tz_convert("UTC").tz_localize(None) + shift
    return out


# ------------------------------------------------------------------------------ registry
def test_both_scenarios_registered_with_their_regions_and_sources():
    names = scenario_names()
    assert "au-edge" in names and "marlin8" in names
    for key in NEW:
        r = get_region(key)
        assert r.has_signals is False
        assert (r.continent, r.jurisdiction) == ("oceania", "AU")
        assert r.timezone.startswith("Australia/")
        assert r.koppen and -45 < r.lat_deg < -10 and 110 < r.lon_deg < 155
        start = pd.Timestamp("2023-07-01", tz="UTC")
        frame, source = hourly_signals(key, start, 3, seed=1, data_dir=None)
        assert source == "normals"
        pd.testing.assert_frame_equal(frame, A.hourly_signals(key, start, 3, 1))
        assert key not in SIGNAL_REGIONS  # not a real-data region
    assert get_region("AU-NT-DRW").koppen == "Aw" and get_region("AU-TAS-HBA").koppen == "Cfb"


def test_standard_offsets_match_the_time_zones():
    july = pd.Timestamp("2023-07-01 00:00", tz="UTC")  # no daylight saving anywhere in AU
    for key, city in A.CITY_NORMALS.items():
        off = july.tz_convert(REGIONS[key].timezone).utcoffset().total_seconds() / 3600.0
        assert off == city.std_utc_offset_h


# ------------------------------------------------------------------------------ au-edge
def test_au_edge_structure():
    sc = get_scenario("au-edge")
    assert len(sc.regions) == 7 and set(NEW) <= set(sc.regions)
    assert {"AU-NSW", "AU-VIC"} <= set(sc.regions)
    assert sc.fidelity == "fluid" and sc.facility == "default" and sc.days == 7.0
    start_local = sc.start_utc.tz_convert("Australia/Sydney")
    assert start_local.month in (12, 1, 2) and 2021 <= start_local.year <= 2024
    assert (start_local.hour, start_local.day_of_week) == (0, 0)  # Monday midnight
    for rc in sc.cluster.regions:
        for g in rc.groups:
            assert (g.model, g.gpu, g.tp) in AVAILABLE_PERF and g.tp == 1
            assert 8 <= g.count <= 60  # edge-sized
    # request rates proportional to metro population
    spec = sc.workload
    pop = np.array([au_edge.AU_METRO_POPULATION[o] for o in spec.origins], dtype=float)
    rps = np.asarray(spec.interactive_rps)
    np.testing.assert_allclose(rps / pop, rps[0] / pop[0], rtol=1e-12)
    assert spec.models == sc.models == ("llama3-8b",)


@pytest.mark.realdata
def test_au_edge_runs_with_real_data(data_dir):
    res = greenroute.run("au-edge", "local-only", seed=0, days=1.0, data_dir=data_dir)
    m = res.metrics
    assert m["requests_total"] > 0 and m["requests_dropped"] == 0
    assert m["requests_completed"] > 0.99 * m["requests_total"]
    assert m["energy_kwh"] > m["it_energy_kwh"] > 0
    assert res.manifest["signals_source"] == "normals+real"
    assert any(k.startswith("grid/") and "AU-NSW" in k for k in res.manifest["input_files_sha256"])


def test_au_edge_runs_without_data(no_env_data):
    res = greenroute.run("au-edge", "lowest-carbon", seed=0, days=0.5)
    assert res.manifest["signals_source"] == "embedded+normals"
    assert res.metrics["requests_completed"] > 0.99 * res.metrics["requests_total"] > 0


@pytest.fixture(scope="module")
def au_week(data_dir):
    """The full au-edge week, local-only, real data for Sydney/Melbourne."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GREENROUTE_DATA_DIR", raising=False)
        # the default (iteration) server model, on which au-edge is sized
        yield greenroute.run("au-edge", "local-only", seed=0, data_dir=data_dir)
    A.clear_cache()


@pytest.mark.realdata
def test_au_edge_week_load_is_moderate(au_week):
    ep = au_week.epochs.assign(w=au_week.epochs.region.map(au_edge.AU_EDGE_SERVERS))
    cluster = ep.groupby("epoch").apply(lambda d: np.average(d.utilisation, weights=d.w))
    assert 0.15 < cluster.mean() < 0.4
    assert cluster.max() < 0.85
    assert au_week.metrics["slo_violation_pct"] < 5.0
    assert au_week.metrics["requests_dropped"] == 0


@pytest.mark.realdata
def test_darwin_is_much_hotter_than_hobart_over_the_summer_week(au_week):
    temp = au_week.epochs.groupby("region").temp_c.mean()
    assert temp["AU-NT-DRW"] - temp["AU-TAS-HBA"] > 7.0
    # The week's mean temperature = climatological curve + day-to-day AR(1) anomaly.
    # Climatology: January normals (BoM), Darwin (31.8 + 24.8) / 2 = 28.3 °C, Hobart
    # (21.7 + 12.0) / 2 = 16.85 °C; 14-21 January sits mid-month, where the mean-preserving
    # daily curve is within 0.2 °C of the month's mean (28.22 and 17.01 °C here).
    idx = pd.date_range(au_edge.AU_EDGE_START, periods=int(au_edge.AU_EDGE_DAYS * 24), freq="h")
    for key, january in (("AU-NT-DRW", 28.3), ("AU-TAS-HBA", 16.85)):
        clim = A.hourly_weather(key, idx, 0, anomaly=False).temp_c.mean()
        assert clim == pytest.approx(january, abs=0.2)
        # Anomaly: the mean of n = 7 daily AR(1) values (sd sigma, lag-1 phi) has variance
        # sigma^2 / n^2 x (n + 2 sum_{k=1}^{n-1} (n - k) phi^k): 0.68 sigma for phi = 0.64
        # (Darwin, sigma 1.0 -> 0.68 °C), 0.66 sigma for phi = 0.61 (Hobart, sigma 2.68 ->
        # 1.76 °C). The week's anomaly lies within 3 of those standard deviations.
        spec = A.CITY_NORMALS[key].anomaly
        n = 7
        var = n + 2 * sum((n - k) * spec.phi**k for k in range(1, n))
        sd_week = spec.sigma_c * np.sqrt(var) / n
        assert abs(temp[key] - clim) <= 3 * sd_week, (key, temp[key], clim, sd_week)
    assert temp["AU-NT-DRW"] == temp.max()


# ------------------------------------------------------------------------------ normals
@pytest.mark.parametrize("key", NEW)
def test_synthesised_monthly_means_reproduce_the_cited_normals(key, no_env_data):
    city = A.CITY_NORMALS[key]
    loc = _local_std(_year(key, anomaly=False), key)
    whole = loc.groupby(loc.index.normalize()).temp_c.transform("size") == 24
    loc = loc[whole]  # the UTC year starts and ends in the middle of local days
    day = loc.groupby(loc.index.normalize()).temp_c.agg(["max", "min", "mean"])
    month = day.groupby(day.index.month).mean()
    np.testing.assert_allclose(month["max"], city.tmax_c, atol=0.3)
    np.testing.assert_allclose(month["min"], city.tmin_c, atol=0.3)
    hourly = loc.groupby(loc.index.month).temp_c.mean()
    np.testing.assert_allclose(hourly, city.tmean_c, atol=0.05)
    for hour, normal in ((9, city.rh9_pct), (15, city.rh15_pct)):
        at = loc[(loc.index.hour == hour) & (loc.index.minute == 0)]
        if at.empty:  # half-hour offsets (Adelaide, Darwin): average 08:30 and 09:30 etc.
            at = loc[(loc.index.hour.isin((hour - 1, hour))) & (loc.index.minute == 30)]
        rh = at.groupby(at.index.month).rh_pct.mean()
        np.testing.assert_allclose(rh, normal, atol=0.5)


def test_daily_curve_is_mean_preserving_and_continuous():
    monthly = np.array(A.CITY_NORMALS["AU-SA-ADL"].tmax_c)
    days = np.arange(365) + 0.5
    curve = A.daily_normal(monthly, days)
    month = np.repeat(np.arange(12), (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31))
    np.testing.assert_allclose(np.bincount(month, curve) / np.bincount(month), monthly, 1e-9)
    assert np.abs(np.diff(A.daily_normal(monthly, np.linspace(0, 365, 20001)))).max() < 0.01
    hours = np.arange(24.0)
    assert A.diurnal_shape(hours).mean() == pytest.approx(0.5, abs=1e-12)
    assert A.diurnal_shape(hours + 0.5).mean() == pytest.approx(0.5, abs=1e-12)
    assert A.diurnal_shape(np.array([A.T_MIN_HOUR, A.T_MAX_HOUR])).tolist() == [0.0, 1.0]


@pytest.mark.parametrize("key", ["AU-TAS-HBA", "AU-NT-DRW"])
def test_daily_anomaly_has_the_documented_sigma_and_phi(key):
    spec = A.CITY_NORMALS[key].anomaly
    start = pd.Timestamp("2000-01-01", tz="UTC")
    n = 24 * 365 * 15
    idx = pd.date_range(start, periods=n, freq="h", unit="us")
    base = A.hourly_weather(key, idx, 11, anomaly=False).temp_c
    anom = A.hourly_weather(key, idx, 11).temp_c - base
    off = pd.Timedelta(hours=A.CITY_NORMALS[key].std_utc_offset_h)
    anom.index = idx.tz_localize(None) + off
    daily = anom.groupby(anom.index.normalize()).mean().iloc[1:-1]
    # 15 years of days: sampling error ~2 % on sigma, ~0.01 on phi
    assert daily.std() == pytest.approx(spec.sigma_c, rel=0.06)
    assert daily.autocorr(1) == pytest.approx(spec.phi, abs=0.04)


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("region", "spec"), [("AU-NSW", A.SYDNEY_ANOMALY), ("AU-VIC", A.MELBOURNE_ANOMALY)]
)
def test_anomaly_parameters_are_the_fit_on_the_real_series(region, spec, data_dir):
    from greenroute.data.grid_loaders import load_region_signals

    s = load_region_signals(
        data_dir, region, "2021-01-01", pd.Timestamp("2024-12-31 12:00", tz="UTC")
    )["temp_c"]
    s.index = s.index.tz_localize(None) + pd.Timedelta(hours=10)  # AEST, no daylight saving
    daily = s.resample("D").mean()
    anomaly = (daily - daily.groupby(daily.index.month).transform("mean")).dropna()
    assert anomaly.std() == pytest.approx(spec.sigma_c, abs=0.01)
    assert anomaly.autocorr(1) == pytest.approx(spec.phi, abs=0.01)


# ------------------------------------------------------------------------------ grid
def _check_annual_figures(key: str, frame: pd.DataFrame) -> None:
    g = A.GRID_FIGURES[key]
    assert frame.carbon_intensity_g_per_kwh.mean() == pytest.approx(
        g.ef_kg_per_kwh * 1000.0, rel=1e-9
    )
    assert frame.renewable_pct.mean() == pytest.approx(g.renewable_share_pct, rel=1e-3)
    assert (frame.low_carbon_pct == frame.renewable_pct).all()
    if g.price_kind == "nem":
        assert frame.price_usd_per_kwh.mean() == pytest.approx(
            g.price_aud_per_kwh * A.AUD_TO_USD, rel=1e-9
        )
    assert frame.carbon_intensity_g_per_kwh.std() > 0.05 * frame.carbon_intensity_g_per_kwh.mean()


@pytest.mark.parametrize("key", NEW)
def test_annual_mean_intensity_equals_the_cited_factor_embedded(key, no_env_data):
    _check_annual_figures(key, _year(key))
    assert A.shape_source_mode(key, pd.Timestamp("2023-06-01", tz="UTC"), 24, 3) == {"embedded"}


@pytest.mark.realdata
@pytest.mark.parametrize("key", NEW)
def test_annual_mean_intensity_equals_the_cited_factor_real(key, env_data):
    _check_annual_figures(key, _year(key))
    assert A.shape_source_mode(key, pd.Timestamp("2023-06-01", tz="UTC"), 24, 3) == {"real"}


def test_cited_factors():
    f = {k: g.ef_kg_per_kwh for k, g in A.GRID_FIGURES.items()}
    # NGA Factors 2024, Table 1
    assert f == {
        "AU-QLD-BNE": 0.71,
        "AU-SA-ADL": 0.23,
        "AU-WA-PER": 0.51,
        "AU-TAS-HBA": 0.15,
        "AU-NT-DRW": 0.56,
    }


@pytest.mark.realdata
def test_borrowed_carbon_shape_follows_the_source_at_the_same_local_time(env_data):
    from greenroute.data.grid_loaders import load_region_signals

    start = pd.Timestamp("2024-01-14 13:00", tz="UTC")
    per = A.hourly_signals("AU-WA-PER", start, 48, 0)
    nsw = load_region_signals(
        env_data, "AU-NSW", start - pd.Timedelta(hours=6), start + pd.Timedelta(hours=48)
    )
    # January: Perth UTC+8, Sydney UTC+11 (daylight saving): Perth 14:00 reads Sydney 14:00,
    # i.e. the Sydney value three hours earlier in UTC
    src = nsw.carbon_intensity_g_per_kwh.reindex(per.index - pd.Timedelta(hours=3)).to_numpy()
    ratio = per.carbon_intensity_g_per_kwh.to_numpy() / src
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)


def test_wa_and_nt_tariffs():
    start = pd.Timestamp("2024-01-15 00:00", tz="Australia/Perth").tz_convert("UTC")  # Monday
    wa = A.hourly_signals("AU-WA-PER", start, 24 * 7, 0).price_usd_per_kwh
    local = wa.index.tz_convert("Australia/Perth")
    peak = (local.day_of_week < 5) & (local.hour >= 8) & (local.hour < 22)
    g = A.GRID_FIGURES["AU-WA-PER"]
    assert wa[peak].unique() == pytest.approx([18.8935 / 100 / 1.1 * A.AUD_TO_USD])
    assert wa[~peak].unique() == pytest.approx([g.price_aud_per_kwh * A.AUD_TO_USD])
    nt = A.hourly_signals("AU-NT-DRW", start, 48, 0).price_usd_per_kwh
    assert nt.unique() == pytest.approx([0.3337363 * A.AUD_TO_USD])


@pytest.mark.parametrize("key", NEW)
def test_signal_contract(key, no_env_data):
    start = pd.Timestamp("2023-12-31 20:00", tz="UTC")  # crosses a year boundary
    f = A.hourly_signals(key, start, 30, 5)
    assert list(f.columns) == list(HOURLY_COLUMNS)
    assert len(f) == 30 and str(f.index.tz) == "UTC"
    assert (np.diff(f.index.asi8) == np.diff(f.index.asi8)[0]).all() and f.index[0] == start
    assert np.isfinite(f.to_numpy()).all()
    assert f.rh_pct.between(1, 100).all() and f.renewable_pct.between(0, 100).all()
    assert (f.carbon_intensity_g_per_kwh >= 0).all()
    # a shorter window is a prefix of a longer one
    pd.testing.assert_frame_equal(A.hourly_signals(key, start, 10, 5), f.iloc[:10])


def test_determinism_by_seed(no_env_data):
    start = pd.Timestamp("2024-01-14 13:00", tz="UTC")
    a = A.hourly_signals("AU-SA-ADL", start, 72, 7)
    pd.testing.assert_frame_equal(a, A.hourly_signals("AU-SA-ADL", start, 72, 7))
    b = A.hourly_signals("AU-SA-ADL", start, 72, 8)
    assert not np.allclose(a.temp_c, b.temp_c)
    assert not np.allclose(a.carbon_intensity_g_per_kwh, b.carbon_intensity_g_per_kwh)
    r1 = greenroute.run("au-edge", "local-only", seed=1, days=0.5)
    r2 = greenroute.run("au-edge", "local-only", seed=1, days=0.5)
    r3 = greenroute.run("au-edge", "local-only", seed=2, days=0.5)
    assert metrics_equal(r1.metrics, r2.metrics)
    assert not metrics_equal(r1.metrics, r3.metrics)


# ------------------------------------------------------------------------------ marlin8
def test_marlin8_structure():
    sc = get_scenario("marlin8")
    assert len(sc.regions) == len(set(sc.regions)) == 8
    assert set(sc.regions) <= set(SIGNAL_REGIONS)
    assert len({REGIONS[r].continent for r in sc.regions}) >= 5
    assert sc.facility == "marlin" and sc.fidelity == "fluid"
    assert sc.epoch_s == 900.0 and sc.days == 1.0 and sc.n_epochs == 96
    assert set(sc.models) == {"llama2-7b", "llama2-70b"}
    assert sc.workload.models == sc.models and min(sc.workload.model_mix) > 0
    types = {(gpu, gpus) for gpu, gpus, *_ in marlin.MARLIN8_NODE_TYPES}
    assert types == {(g, k) for g in ("a100-80gb", "h100-80gb") for k in (2, 4, 8)}
    for rc in sc.cluster.regions:
        assert len(rc.groups) == 6
        nodes = []
        for g, (gpu, gpus, model, tp, n) in zip(rc.groups, marlin.MARLIN8_NODE_TYPES, strict=True):
            assert (g.gpu, g.model, g.tp) == (gpu, model, tp)
            assert (g.model, g.gpu, g.tp) in AVAILABLE_PERF
            assert g.count * g.tp == n * gpus  # every GPU of every node serves
            nodes.append(g.count * g.tp // gpus)
        assert sum(nodes) == 1000 and max(nodes) - min(nodes) <= 1
    # uniform origins
    assert sc.origins == sc.regions
    assert len(set(sc.workload.interactive_rps)) == 1


def _check_marlin8_run(data_dir) -> None:
    # the default (iteration) server model, on which marlin8 is sized
    res = greenroute.run("marlin8", "local-only", seed=0, days=0.25, data_dir=data_dir)
    m = res.metrics
    assert m["requests_total"] > 0 and m["energy_kwh"] > m["it_energy_kwh"] > 0
    assert res.manifest["facility"] == "marlin"
    assert res.manifest["signals_source"] == ("real" if data_dir else "embedded")
    # MARLIN §3.3: E_cool = 3 E_IT / COP_d, E_infra = 0.13 E_IT
    assert m["infra_energy_kwh"] == pytest.approx(0.13 * m["it_energy_kwh"], rel=1e-9)


@pytest.mark.realdata
def test_marlin8_runs_with_real_data(data_dir):
    _check_marlin8_run(data_dir)


def test_marlin8_runs_without_data(monkeypatch):
    monkeypatch.delenv("GREENROUTE_DATA_DIR", raising=False)
    _check_marlin8_run(None)


@pytest.mark.realdata
def test_marlin8_serves_both_models_without_drops(data_dir):
    # the default (iteration) server model, on which marlin8 is sized
    res = greenroute.run("marlin8", "local-only", seed=0, days=0.25, data_dir=data_dir)
    assert res.metrics["dropped_no_server_for_model"] == 0
    assert res.metrics["requests_dropped"] < 1e-3 * res.metrics["requests_total"]
