"""Training-seed spread of the RL agents (issue 12): t-intervals by hand, the verdicts they
support, and a tiny 2-seed run of the command."""

from __future__ import annotations

import csv
import math

import pytest

from greenroute.bench import load_balancing_tables as lbt
from greenroute.bench import rl_spread
from greenroute.bench.rl_spread_stats import (
    Interval,
    headline,
    paired_interval,
    t_interval,
    verdict,
)
from greenroute.bench.sweep_spec import parse_spec
from greenroute.core.errors import ConfigError

T975_4 = 2.7764451051977987  # Student t, 97.5 % quantile, 4 degrees of freedom (tables)
T975_1 = 12.706204736174698  # ... 1 degree of freedom


def test_t_interval_by_hand():
    iv = t_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    # s^2 = (4 + 1 + 0 + 1 + 4) / 4 = 2.5; half = t * sqrt(2.5) / sqrt(5) = t / sqrt(2)
    assert iv.n == 5 and iv.mean == 3.0 and iv.std == pytest.approx(math.sqrt(2.5), rel=1e-12)
    assert iv.half == pytest.approx(T975_4 / math.sqrt(2.0), rel=1e-9)  # 1.963243
    assert (iv.lo, iv.hi) == pytest.approx((3.0 - 1.9632432, 3.0 + 1.9632432), rel=1e-7)
    two = t_interval([1.0, 3.0])  # s = sqrt(2), half = t * sqrt(2) / sqrt(2) = t
    assert two.mean == 2.0 and two.half == pytest.approx(T975_1, rel=1e-9)
    assert t_interval([7.0, 7.0, 7.0]).half == 0.0
    d = paired_interval([3.0, 5.0], [1.0, 1.0])  # differences 2, 4
    assert d.mean == 3.0 and d.half == pytest.approx(T975_1, rel=1e-9)
    with pytest.raises(ConfigError, match="at least 2"):
        t_interval([1.0])
    with pytest.raises(ConfigError, match="finite"):
        t_interval([1.0, float("nan")])


def test_verdicts_only_where_the_interval_excludes_zero():
    below = Interval(5, -2.0, 1.0, 1.5)  # [-3.5, -0.5]
    around = Interval(5, -2.0, 1.0, 2.5)  # [-4.5, 0.5]
    above = Interval(5, 2.0, 1.0, 1.5)
    assert verdict(below, lower_is_better=True) == "better"
    assert verdict(below, lower_is_better=False) == "worse"
    assert verdict(above, lower_is_better=True) == "worse"
    assert verdict(around, lower_is_better=True) == "inconclusive"
    assert headline("PPO", "LL", "RT", below, True).startswith("PPO beats LL on RT")
    assert headline("PPO", "LL", "RT", above, True).startswith("LL beats PPO on RT")
    assert "inconclusive" in headline("PPO", "LL", "RT", around, True)
    assert Interval(5, 3.0, 1.0, 1.0).shifted(1.0).mean == 2.0


def _fake_results(ppo_rt: float, ppo_slo: float) -> dict:
    base = {"mean": 0.0, "episodes": [0.0, 0.0]}

    def baseline(rt: float, slo: float) -> dict:
        m = {k: dict(base) for k in lbt.METRICS}
        m["avg_response_time_s"] = {"mean": rt, "episodes": [rt - 0.01, rt + 0.01]}
        m["slo_violation_pct"] = {"mean": slo, "episodes": [slo, slo]}
        return m

    res = {b: baseline(0.50, 2.0) for b in lbt.BASELINE_ORDER}
    res["least-loaded"] = baseline(0.47, 1.3)
    res["ppo"] = {k: {"mean": 0.0} for k in lbt.METRICS}
    res["ppo"]["avg_response_time_s"]["mean"] = ppo_rt
    res["ppo"]["slo_violation_pct"]["mean"] = ppo_slo
    return {"scenarios": {sc: {"results": res} for sc in lbt.SCENARIOS}}


def test_lb_summary_states_a_headline_only_when_supported():
    # PPO over 5 seeds: RT 0.40..0.44 (mean 0.42, half t4 * 0.0158114 / sqrt 5 = 0.0196324)
    # against LL's 0.47: difference [-0.0696, -0.0304] -> PPO beats LL on response time;
    # SLO 1..5 % (mean 3, half 1.963) against LL's 1.3 %: [-0.26, +3.66] -> inconclusive
    results = [_fake_results(0.40 + 0.01 * i, 1.0 + i) for i in range(5)]
    b = rl_spread.BUDGETS["reduced"]
    rows, verdicts, text = rl_spread.summarise_lb(results, b)
    by = {(v["scenario"], v["agent"], v["baseline"], v["metric"]): v for v in verdicts}
    rt = by[("lb-highload", "ppo", "least-loaded", "avg_response_time_s")]
    assert rt["verdict"] == "better"
    assert (rt["diff_lo"], rt["diff_hi"]) == pytest.approx((-0.0696324316, -0.0303675684), rel=1e-8)
    slo = by[("lb-highload", "ppo", "least-loaded", "slo_violation_pct")]
    assert slo["verdict"] == "inconclusive"
    assert slo["diff_mean"] == pytest.approx(1.7)
    assert "PPO beats Least Loaded on Resp. time (s)" in text
    assert "PPO vs Least Loaded on SLO violations (%): inconclusive" in text
    ppo_rt = [r for r in rows if (r["agent"], r["metric"]) == ("ppo", "avg_response_time_s")]
    assert ppo_rt[0]["over"] == "training seeds" and ppo_rt[0]["n"] == 5
    assert ppo_rt[0]["ci95_half"] == pytest.approx(T975_4 * math.sqrt(2.5e-4) / math.sqrt(5))
    ll = [r for r in rows if (r["agent"], r["metric"]) == ("least-loaded", "avg_response_time_s")]
    assert ll[0]["over"] == "eval episodes" and ll[0]["n"] == 2


def test_spread_is_one_sweep_of_training_then_evaluation_cells():
    b = {"lb_nominal": 0, "lb_high": 300, "manager": 30, "worker": 6}
    raw = rl_spread.build_spec([0, 1], b, ["lb", "teacher"], ["ppo", "dqn"], None, 3, 1.0)
    spec = parse_spec(raw)
    assert [(t.agent, t.scenario, t.seed, t.steps) for t in spec.train] == [
        ("lb-ppo", "lb-highload", 0, {"steps": 300}), ("lb-ppo", "lb-highload", 1, {"steps": 300}),
        ("lb-dqn", "lb-highload", 0, {"steps": 300}), ("lb-dqn", "lb-highload", 1, {"steps": 300}),
        ("teacher", "geo3", 0, {"manager": 30, "worker": 6}),
        ("teacher", "geo3", 1, {"manager": 30, "worker": 6}),
    ]  # fmt: skip
    assert all(t.options["episodes"] == 3 for t in spec.train if t.agent != "teacher")
    teachers = {t.key: t.seed for t in spec.train if t.agent == "teacher"}
    evals = [(c.policy, c.label, c.depends_on) for c in spec.cells]
    assert evals[0] == ("local-only", "local-only", None)
    assert {lab: teachers[dep] for _, lab, dep in evals[1:]} == {"teacher-seed0": 0,
                                                                  "teacher-seed1": 1}  # fmt: skip
    # nothing to train (every budget 0): no sweep, seed 002's baselines only
    assert rl_spread.build_spec([0, 1], {**b, "lb_high": 0}, ["lb"], ["ppo"], None, 3, 1) is None


def test_bad_options():
    with pytest.raises(ConfigError, match=">= 2"):
        rl_spread.main(["--seeds", "1"])
    with pytest.raises(ConfigError, match="valid choices: lb, teacher"):
        rl_spread.main(["--seeds", "2", "--parts", "marlin"])
    with pytest.raises(ConfigError, match="valid choices: ppo, a2c, dqn"):
        rl_spread.main(["--seeds", "2", "--algos", "sac"])


def test_tiny_two_seed_run(tmp_path):
    out = tmp_path / "spread"
    rl_spread.main(["--seeds", "2", "--parts", "lb", "--algos", "ppo", "--lb-steps-nominal", "0",
                    "--lb-steps-high", "64", "--episodes", "2", "--workers", "2",
                    "--out", str(out)])  # fmt: skip
    from greenroute.bench.store import ResultStore

    trained = ResultStore(out / "store").runs(sweep="rl-spread")
    assert sorted(trained["seed"]) == [0, 1] and set(trained["policy"]) == {"train:lb-ppo"}
    assert (trained["train_steps"] == 64).all() and (trained["heldout_episodes"] == 2).all()
    rows = list(csv.DictReader((out / "spread.csv").open()))
    ppo = {r["metric"]: r for r in rows if r["agent"] == "ppo"}
    assert set(ppo) == set(lbt.METRICS)
    assert all(r["scenario"] == "lb-highload" for r in ppo.values())
    r = ppo["avg_response_time_s"]
    vals = [float(v) for v in r["values"].split(";")]
    by_seed = trained.sort_values("seed")["avg_response_time_s"].tolist()
    assert r["n"] == "2" and vals == pytest.approx(by_seed, rel=1e-5)
    iv = t_interval(vals)
    assert float(r["mean"]) == pytest.approx(iv.mean, rel=1e-5)
    assert float(r["ci95_half"]) == pytest.approx(iv.half, rel=1e-5, abs=1e-9)
    verdicts = list(csv.DictReader((out / "verdicts.csv").open()))
    assert {v["verdict"] for v in verdicts} <= {"better", "worse", "inconclusive"}
    text = (out / "spread.txt").read_text()
    assert "Table II (lb-highload): 2 training seeds" in text
    assert "the sweep 'rl-spread' (2 cells: 0 already done, 2 run now" in text
    # run again: both training cells are skipped (their models match), same numbers
    rl_spread.main(["--seeds", "2", "--parts", "lb", "--algos", "ppo", "--lb-steps-nominal", "0",
                    "--lb-steps-high", "64", "--episodes", "2", "--workers", "2",
                    "--out", str(out)])  # fmt: skip
    assert "(2 cells: 2 already done, 0 run now" in (out / "spread.txt").read_text()
    assert list(csv.DictReader((out / "spread.csv").open())) == rows


def test_sweep_spec_takes_saved_rl_models():
    pols = ["local-only", {"name": "rl:m/worker.zip", "label": "t0"}]
    spec = parse_spec({"scenarios": ["geo3"], "seeds": [0], "days": [1], "policies": pols})
    assert [(c.policy, c.label) for c in spec.cells] == [
        ("local-only", "local-only"),
        ("rl:m/worker.zip", "t0"),
    ]
    with pytest.raises(ConfigError, match="takes no options"):
        parse_spec({"scenarios": ["geo3"],
                    "policies": [{"name": "rl:m.zip", "options": {"k": 1}}]})  # fmt: skip


def test_cli_user_error_is_one_line_without_traceback(tmp_path, capsys) -> None:
    from greenroute.bench.rl_spread import cli

    assert cli(["--seeds", "2", "--algos", "nope", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err == "error: unknown --algos ['nope']; valid choices: ppo, a2c, dqn\n"
