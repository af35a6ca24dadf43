"""``--days`` bounds: finite and > 0, inside the real data, within memory; the simulated span
is what results report and divide by."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

import greenroute
from greenroute.core.errors import ConfigError, DataFormatError
from greenroute.scenarios import get_scenario
from greenroute.sim import bounds as B

GIB = 2**30


@pytest.mark.parametrize("days", [math.inf, -math.inf, math.nan, 0.0, -1.0, "abc", True])
def test_days_must_be_finite_and_positive(days):
    with pytest.raises(ConfigError, match="--days must be a finite number > 0"):
        get_scenario("demo").with_options(days=days)
    with pytest.raises(ConfigError, match="finite number > 0"):
        greenroute.run("demo", "local-only", days=days)


def test_scenario_itself_refuses_non_finite_days():
    from dataclasses import replace

    with pytest.raises(ConfigError, match="days must be a finite number > 0, got inf"):
        replace(get_scenario("demo"), days=math.inf)


def test_memory_estimate_by_hand():
    sc = get_scenario("demo").with_options(days=10)  # 3 origins x (1.5 + 0.3) req/s
    est = B.estimate_memory(sc)
    n_req = 5.4 * 10 * 86400  # 4,665,600 requests
    assert est.requests == pytest.approx(n_req, rel=1e-12)
    assert est.epochs == 960
    want = 450 * 2**20 + 256 * n_req + 2048 * 960 * 3  # = 1,672,151,040 B
    assert est.total_bytes == pytest.approx(want, rel=1e-12)
    assert B.estimate_memory(sc, "fluid").total_bytes == pytest.approx(
        450 * 2**20 + 2048 * 960 * 3, rel=1e-12
    )


def test_request_run_too_big_is_refused_and_names_fluid(monkeypatch):
    monkeypatch.setenv(B.MEMORY_ENV_VAR, "1")
    with pytest.raises(ConfigError) as err:
        greenroute.run("demo", "local-only", days=10)
    msg = str(err.value)
    # 1,672,151,040 B = 1.557 GiB needed; per epoch 256 x 5.4 x 900 + 2048 x 3 = 1,250,304 B,
    # so (2^30 - 450 MiB) / 1,250,304 = 481.4 -> 481 epochs = 5.0104 days fit
    assert "needs about 1.56 GiB" in msg and "1 GiB available" in msg
    assert "at most --days 5.01 fits" in msg
    assert "--fidelity fluid would run it" in msg
    assert "\n" not in msg


def test_even_fluid_too_big_gives_the_fluid_limit(monkeypatch):
    monkeypatch.setenv(B.MEMORY_ENV_VAR, "0.5")
    with pytest.raises(ConfigError) as err:
        greenroute.run("demo", "local-only", days=400)
    # fluid: 450 MiB + 2048 x 38,400 x 3 = 0.659 GiB > 0.5; (0.5 GiB - 450 MiB) / 6144 B
    # = 10,581 epochs = 110.22 days
    assert "even --fidelity fluid needs about 0.659 GiB" in str(err.value)
    assert "at most --days 110.2 fits in the fluid model" in str(err.value)
    with pytest.raises(ConfigError, match=r"\(fluid\) needs about 0.659 GiB"):
        greenroute.run("demo", "local-only", days=400, fidelity="fluid")


def test_auto_fidelity_switches_to_fluid_with_a_note(monkeypatch):
    # request: 450 MiB + 256 x 1,244,160 + 2048 x 192 x 3 = 0.737 GiB; fluid 0.441 GiB
    monkeypatch.setenv(B.MEMORY_ENV_VAR, "0.6")
    res = greenroute.run("demo", "local-only", days=2, fidelity="auto")
    assert res.fidelity == "fluid"
    assert any("ran the fluid model instead" in n for n in res.notes)
    with pytest.raises(ConfigError, match="--fidelity fluid would run it"):
        greenroute.run("demo", "local-only", days=2)  # default: refuse


def test_unrepresentable_end_time(monkeypatch):
    monkeypatch.setenv(B.MEMORY_ENV_VAR, "1e12")
    with pytest.raises(ConfigError, match="last representable time"):
        greenroute.run("demo", "local-only", days=1e6, fidelity="fluid")


def test_bad_memory_override(monkeypatch):
    monkeypatch.setenv(B.MEMORY_ENV_VAR, "lots")
    with pytest.raises(ConfigError, match="GREENROUTE_MAX_MEMORY_GB"):
        greenroute.run("demo", "local-only", days=1)


def test_simulated_span_is_reported_and_noted():
    res = greenroute.run("demo", "local-only", days=0.1, fidelity="fluid")
    # 0.1 d = 144 min -> 10 epochs of 15 min = 150 min = 0.1041667 d
    assert res.metrics["days"] == pytest.approx(150 / 1440, rel=1e-12)
    assert res.metrics["days_requested"] == 0.1
    assert res.manifest["days"] == pytest.approx(150 / 1440, rel=1e-12)
    assert res.manifest["days_requested"] == 0.1
    assert len(res.epochs) == 10 * 3
    assert any("simulated 10 epochs = 2.5 h" in n for n in res.notes)
    # a whole number of epochs: no note, both the same
    whole = greenroute.run("demo", "local-only", days=0.125, fidelity="fluid")
    assert whole.metrics["days"] == whole.metrics["days_requested"] == 0.125
    assert not any("whole number of" in n for n in whole.notes)


def test_per_day_divides_by_the_simulated_span():
    from typer.testing import CliRunner

    from greenroute.cli import app

    res = CliRunner().invoke(
        app, ["compare", "--days", "0.1", "--fidelity", "fluid", "--per-day", "--json"]
    )
    assert res.exit_code == 0, res.output
    results = json.loads(res.stdout)["results"]
    for r in results:
        assert r["metrics"]["days"] == pytest.approx(150 / 1440, rel=1e-12)
    args = ["compare", "--days", "0.1", "--fidelity", "fluid", "--per-day"]
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0, table.output
    carbon = results[0]["metrics"]["carbon_kg"]
    assert f"{carbon / (150 / 1440):,.1f}" in table.stdout  # per simulated day
    assert f"{carbon / 0.1:,.1f}" not in table.stdout  # not per requested day (4.2 % high)


@pytest.mark.realdata
def test_window_past_the_real_data_names_the_last_hour(data_dir):
    sc = get_scenario("geo3")  # DE-LU, CL-SIC, US-CAL-CISO from 2023-07-01
    # DE-LU's weather ends 2024-12-31 22:00 UTC (local 23:00, UTC+1): 13,198 h after the start;
    # the run reads ceil((n + 192 + 1) x 0.25) hours after it -> n <= 13,198 x 4 - 193 = 52,599
    # epochs = 547.90625 days
    assert B.real_data_span(data_dir, "DE-LU")[1] == pd.Timestamp("2024-12-31 22:00", tz="UTC")
    ok = sc.with_options(days=52599 * 900 / 86400)
    B.check_real_data_window(ok, data_dir)
    with pytest.raises(ConfigError) as err:
        B.check_real_data_window(sc.with_options(days=52600 * 900 / 86400), data_dir)
    msg = str(err.value)
    assert "real data of DE-LU: last available hour 2024-12-31 22:00:00+00:00" in msg
    assert "at most --days 547.906 fits" in msg
    with pytest.raises(ConfigError, match="last available hour"):
        greenroute.run("geo3", "local-only", days=700, data_dir=data_dir)


@pytest.mark.realdata
def test_real_data_limit_agrees_with_the_loader(data_dir):
    """The loader reads exactly the hours the check allows (the boundary, one epoch past)."""
    from greenroute.sim.epoch_signals import build_epoch_signals

    sc = get_scenario("geo3")
    for n, fits in ((52599, True), (52600, False)):
        s = sc.with_options(days=n * 900 / 86400)
        args = (("DE-LU",), s.start_utc, B.signal_steps(s), s.epoch_s, 0, data_dir)
        if fits:
            assert build_epoch_signals(*args).n_steps == B.signal_steps(s)
        else:
            with pytest.raises(DataFormatError, match="is not covered"):
                build_epoch_signals(*args)
