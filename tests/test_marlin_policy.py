"""The MARLIN geo policy (seed 001 §5-6) in the simulator: registration, the engine's
``bind_simulator`` hook, a reduced run (a few epochs of ``marlin8``, tiny networks) that is
deterministic by seed, and the archived front."""

from __future__ import annotations

import numpy as np
import pytest

from greenroute.api import run
from greenroute.core.errors import ConfigError
from greenroute.policies.registry import make_geo_policy
from greenroute.scenarios.marlin import marlin8

pytest.importorskip("torch")

TINY = {"k_opt": 2, "updates": 2, "batch_size": 8, "actor_hidden": 8, "critic_hidden": 8,
        "pretrain_epochs": 1}  # fmt: skip
EPOCHS = 3
DAYS = EPOCHS * 900.0 / 86400.0


def test_registered_names_and_options():
    for v in ("balanced", "min-latency", "min-carbon", "min-water", "min-cost"):
        assert make_geo_policy(f"marlin-{v}").name == f"marlin-{v}"
    p = make_geo_policy("marlin", variant="min-water", film=False, k_opt=3)
    got = (p.variant, p.agents_idx, p.k_opt, p.sac_options["film"])
    assert got == ("min-water", (2,), 3, False)
    with pytest.raises(ConfigError, match="valid choices: balanced, min-latency"):
        make_geo_policy("marlin", variant="greenest")
    with pytest.raises(ConfigError, match="unknown option"):
        make_geo_policy("marlin-balanced", variant="balanced")


def test_plan_needs_the_simulator():
    p = make_geo_policy("marlin-min-cost")
    p.reset(None, 0)
    with pytest.raises(ConfigError, match="bind_simulator"):
        p.plan(None)


@pytest.fixture(scope="module")
def scenario():
    return marlin8().with_options(days=DAYS)


@pytest.fixture(scope="module")
def balanced_runs(scenario):
    out = []
    for _ in range(2):
        pol = make_geo_policy("marlin-balanced", **TINY)
        out.append((run(scenario, pol, seed=3, cache=False), pol))
    return out


def test_reduced_balanced_run_is_deterministic(balanced_runs):
    (a, pa), (b, pb) = balanced_runs
    assert a.metrics["carbon_kg"] == b.metrics["carbon_kg"]
    assert a.metrics["ttft_mean_s"] == b.metrics["ttft_mean_s"]
    assert pa.capital.tolist() == pb.capital.tolist()
    # every epoch and the pretraining round: local reference + 4 agents x (k_opt + local plan
    # + mean); every epoch but the first: each agent's previous proposal; every epoch: the
    # consensus
    k = TINY["k_opt"]
    assert pa.counts["forks"] == (EPOCHS + 1) * (1 + 4 * (k + 1)) + 4 * (EPOCHS - 1) + EPOCHS
    assert a.metrics["invalid_plans"] == 0
    # the capital moved by the bounded EMA: 0.9 x 100 + 0.1 x 120 x (Perf + 0.5 Bonus) with
    # Perf, Bonus in [0, 1] each epoch
    lo, hi = 100.0 * 0.9**EPOCHS, 100.0 * 0.9**EPOCHS + 180.0 * (1 - 0.9**EPOCHS)
    assert np.all((pa.capital >= lo) & (pa.capital <= hi))


def test_front_is_non_dominated_and_scaled(balanced_runs, scenario):
    from greenroute.policies.marlin import marlin_front, non_dominated

    res, _ = balanced_runs[0]
    summary = res.extras["policy_summary"]
    ratios = np.array(summary["front_ratios"])
    assert ratios.shape[1] == 4 and len(ratios) == len(summary["front_labels"]) >= 1
    assert non_dominated(ratios).all()
    ref = {"ttft_mean_s": 2.0, "carbon_kg": 10.0, "water_m3": 3.0, "cost_usd": 5.0}
    pts = marlin_front(res, ref)
    assert pts == pytest.approx(ratios * np.array([2.0, 10.0, 3.0, 5.0]))


def test_single_objective_variant_plays_no_game(scenario):
    pol = make_geo_policy("marlin-min-carbon", **TINY)
    res = run(scenario, pol, seed=0, cache=False)
    assert len(pol.agents) == 1
    # reference + k_opt + local plan + mean per round; the incumbent from the second epoch
    assert pol.counts["forks"] == (EPOCHS + 1) * (1 + TINY["k_opt"] + 1) + (EPOCHS - 1)
    assert pol.capital.tolist() == [100.0]
    assert res.metrics["invalid_plans"] == 0


def test_epoch_log_records_proposals_and_the_game(balanced_runs, scenario):
    res, pol = balanced_runs[0]
    log = pol.epoch_log
    assert [e["epoch"] for e in log] == list(range(EPOCHS))
    for e in log:
        assert e["agents"] == ["ttft", "carbon", "water", "cost"]
        assert np.array(e["prop_x"]).shape == (4, 4) and len(e["x_bar"]) == 4
        assert sum(e["omega"]) == pytest.approx(1.0)  # a convex mix of the proposals
    assert log[-1]["capital"] == pol.capital.tolist()
    assert sum(len(e["vetoes"]) for e in log) == res.extras["policy_summary"]["vetoes"]
    single = make_geo_policy("marlin-min-carbon", **TINY)
    run(scenario, single, seed=0, cache=False)
    assert [sorted(e) for e in single.epoch_log] == [["agents", "epoch", "prop_x"]] * EPOCHS
    assert single.epoch_log[0]["agents"] == ["carbon"]
