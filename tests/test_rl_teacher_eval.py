"""``bench.rl_teacher_eval`` drives a policy through the step-wise core (``envs/geo_core.py``);
its carbon total must be the one ``greenroute run`` reports for the same scenario, seed and days.
lp-mpc asks the engine for a 24-epoch look-ahead (``horizon_epochs``): the core used to build its
observations with the scenario's default horizon instead (2 days of geo3: 25,453 kg against
``run``'s 25,423 kg)."""

from __future__ import annotations

import pytest

import greenroute
from greenroute.bench.rl_teacher_eval import deferral_stats


@pytest.mark.realdata
@pytest.mark.parametrize("policy", ["local-only", "lp-mpc"])
def test_step_wise_carbon_equals_run(data_dir, policy):
    stats = deferral_stats(policy, "geo3", days=0.5, seed=0, data_dir=str(data_dir))
    ref = greenroute.run("geo3", policy, days=0.5, seed=0, data_dir=data_dir, cache=False)
    assert stats["carbon_kg"] == pytest.approx(ref.metrics["carbon_kg"], rel=1e-9)
