"""MARLIN's home logit scaled by the agent's TTFT weight (``ttft_home_prior``) and the local
plan as a candidate (``keep_local``), on a reduced marlin8 run (3 epochs, tiny networks)."""

from __future__ import annotations

import numpy as np
import pytest

from greenroute.api import run
from greenroute.policies.registry import make_geo_policy
from greenroute.scenarios.marlin import marlin8

pytest.importorskip("torch")

TINY = {"k_opt": 2, "updates": 2, "batch_size": 8, "actor_hidden": 8, "critic_hidden": 8,
        "pretrain_epochs": 1}  # fmt: skip
EPOCHS = 3


def test_home_logit_is_local_prior_plus_ttft_weight_times_bonus():
    p = make_geo_policy("marlin-min-latency", local_prior=2.0, ttft_home_prior=4.0)
    assert p.home_logit(np.array([1.0, 0.0, 0.0, 0.0])) == 6.0  # the TTFT agent: 2 + 4 x 1
    assert p.home_logit(np.array([0.0, 1.0, 0.0, 0.0])) == 2.0  # the carbon agent: 2 + 4 x 0
    assert p.home_logit(np.array([0.25, 0.25, 0.25, 0.25])) == 3.0  # 2 + 4 x 0.25


@pytest.fixture(scope="module")
def local_kept():
    sc = marlin8().with_options(days=EPOCHS * 900.0 / 86400.0)
    pol = make_geo_policy("marlin-min-latency", keep_local=True, ttft_home_prior=4.0, **TINY)
    return run(sc, pol, seed=1, cache=False), pol


def test_local_candidate_scores_exactly_one_and_costs_no_fork(local_kept):
    res, pol = local_kept
    # the local plan against the local reference of the same fork: every ratio is exactly 1
    local = [x for _, label, x in pol.archive if label == "ttft:local"]
    assert len(local) == EPOCHS
    assert all(np.array_equal(x, np.ones(4)) for x in local)
    # pretraining and every epoch: reference + k_opt + mean (the local candidate reuses the
    # reference's figures); then the incumbent
    k = TINY["k_opt"]
    assert pol.counts["forks"] == (EPOCHS + 1) * (1 + k + 1) + (EPOCHS - 1)
    assert res.metrics["invalid_plans"] == 0


def test_the_ttft_agents_prior_has_the_bonus_at_home(local_kept):
    _, pol = local_kept
    prior = pol.agents[0].prior.numpy()  # [origins, regions]; marlin8: origin o is region o
    assert np.all(np.diag(prior) == 6.0)
    assert np.all(prior[~np.eye(len(prior), dtype=bool)] == 0.0)
