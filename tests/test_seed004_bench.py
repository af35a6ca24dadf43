"""``python -m greenroute.bench.seed004``: the saving table (hand numbers) and a short smoke run
of the whole command on the embedded data."""

from __future__ import annotations

import pandas as pd
import pytest

from greenroute.bench import seed004
from greenroute.data.grid_loaders import AUD_TO_USD


def test_savings_are_blind_minus_aware_over_blind():
    base = {"energy_kwh": 100.0, "carbon_kg": 10.0, "ttft_mean_s": 0.1, "water_m3": 1.0}
    rows = [
        {"week": "w", "planner": "p", "cooling": "aware", "cooling_energy_kwh": 9.0,
         "cost_usd": 4.0, **base},
        {"week": "w", "planner": "p", "cooling": "blind", "cooling_energy_kwh": 10.0,
         "cost_usd": 5.0, **base},
        {"week": "w", "planner": "local-only", "cooling": "-", "cooling_energy_kwh": 11.0,
         "cost_usd": 6.0, **base},
    ]  # fmt: skip
    df = pd.DataFrame(rows)
    df["cost_aud"] = df.cost_usd / AUD_TO_USD
    sv = seed004.savings(df)
    assert len(sv) == 1  # local-only has no blind twin
    r = sv.iloc[0]
    assert r.cooling_energy_kwh_saved_pct == pytest.approx(10.0)  # (10 - 9) / 10
    assert r.cost_usd_saved_pct == pytest.approx(20.0)  # (5 - 4) / 5
    assert r.energy_kwh_saved_pct == 0.0
    assert r.cost_saved_aud == pytest.approx(1.0 / 0.63056)


def test_planners_pair_every_policy_with_both_cooling_models():
    runs = seed004.planners(16, None)
    assert [(lab, o["cooling_model"]) for lab, _, o in runs] == [
        ("admm", "aware"), ("admm", "blind"), ("admm-H16", "aware"), ("admm-H16", "blind"),
        ("lp-mpc-H16", "aware"), ("lp-mpc-H16", "blind"),
    ]  # fmt: skip
    assert runs[2][2]["horizon"] == runs[4][2]["horizon"] == 16  # the same look-ahead


@pytest.mark.slow
def test_command_smoke(tmp_path, capsys):
    assert seed004.main(["--days", "0.05", "--horizon", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "what temperature awareness saves" in out and "no figure given" in out
    df = pd.read_csv(tmp_path / "results.csv")
    assert len(df) == 2 * 7  # two weeks x (local-only + 3 planners x aware/blind)
