"""The GCOS seed loop: paired intervals over PPO seeds and the resumable run store."""

from __future__ import annotations

import math

import pytest

from greenroute.bench.gcos_seeds import SUMMARY_METRICS, SeedStore, seed_summary, verdict
from greenroute.core.errors import ConfigError


def _run(cost: float, carbon: float = 1.0) -> dict:
    return {m: 0.0 for m in SUMMARY_METRICS} | {"cost_usd": cost, "carbon_kg": carbon}


def test_paired_difference_uses_the_same_seed():
    # maccs is 1 USD cheaper than the ablation under every seed although the seeds spread by
    # 10 USD: the paired interval is exactly [-1, -1], the unpaired means overlap widely
    per_seed = {
        "maccs": {0: _run(10.0), 1: _run(20.0), 2: _run(30.0)},
        "maccs-no-migration": {0: _run(11.0), 1: _run(21.0), 2: _run(31.0)},
    }
    s = seed_summary(per_seed, {"lowest-carbon": _run(25.0)})
    v = s["variants"]["maccs"]["cost_usd"]
    # mean 20, sd 10, t(0.975, 2) = 4.302653: half-width 4.302653 * 10 / sqrt(3)
    assert v["mean"] == pytest.approx(20.0)
    assert v["ci95"] == pytest.approx(4.302653 * 10 / math.sqrt(3), rel=1e-6)
    p = s["paired"]["maccs - maccs-no-migration"]["cost_usd"]
    assert (p["mean"], p["ci95"], p["n"]) == (pytest.approx(-1.0), pytest.approx(0.0), 3)
    assert p["verdict"] == "lower"
    # a deterministic baseline is the same value under every seed: differences -15, -5, +5
    b = s["paired"]["maccs - lowest-carbon"]["cost_usd"]
    assert b["mean"] == pytest.approx(-5.0) and b["ci95"] == pytest.approx(v["ci95"])
    assert b["verdict"] == "inconclusive"


def test_paired_difference_only_over_common_seeds():
    per_seed = {"maccs": {0: _run(1.0), 1: _run(2.0)}, "maccs-no-diptree": {1: _run(5.0)}}
    p = seed_summary(per_seed, {})["paired"]["maccs - maccs-no-diptree"]["cost_usd"]
    assert p["mean"] == pytest.approx(-3.0) and p["n"] == 1
    assert p["verdict"] == "inconclusive"  # one seed: no interval, no verdict


@pytest.mark.parametrize(
    ("mean", "half", "word"),
    [(-2.0, 1.0, "lower"), (2.0, 1.0, "higher"), (0.5, 1.0, "inconclusive"),
     (-1.0, 1.0, "inconclusive"), (3.0, math.nan, "inconclusive")],
)  # fmt: skip
def test_verdict_only_where_the_interval_excludes_zero(mean, half, word):
    assert verdict(mean, half) == word


def test_store_resumes_and_refuses_another_configuration(tmp_path):
    cfg = {"scenario": "gcos", "options": {"seed": "0"}, "train_steps": 100}
    store = SeedStore(tmp_path, cfg)
    assert store.load_run("maccs", 3) is None
    store.save_run("maccs", 3, _run(7.0))
    assert SeedStore(tmp_path, cfg).load_run("maccs", 3)["cost_usd"] == 7.0
    assert store.model_path("maccs", 3) == tmp_path / "models" / "maccs-s3.zip"
    with pytest.raises(ConfigError, match="train_steps: saved 100, asked 200"):
        SeedStore(tmp_path, cfg | {"train_steps": 200})
    assert SeedStore(None, cfg).load_run("maccs", 3) is None
