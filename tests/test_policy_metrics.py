"""A policy's own counts (``metrics()``, e.g. an LLM policy's fallbacks) join the run's
metrics; a policy cannot overwrite an engine metric."""

from __future__ import annotations

import pytest

import greenroute
from greenroute.core.errors import ConfigError
from greenroute.policies.registry import make_geo_policy


class Counting:
    """local-only's plans, with a count of its decisions reported as a metric."""

    name = "counting"

    def __init__(self, extra: dict | None = None) -> None:
        self.inner = make_geo_policy("local-only")
        self.plans = 0
        self.extra = extra or {}

    def reset(self, cluster, seed):
        self.inner.reset(cluster, seed)
        self.plans = 0

    def plan(self, obs):
        self.plans += 1
        return self.inner.plan(obs)

    def metrics(self):
        return {"llm_decisions": self.plans, **self.extra}


def test_policy_metrics_join_the_run_metrics(monkeypatch):
    monkeypatch.delenv("GREENROUTE_DATA_DIR", raising=False)
    res = greenroute.run("demo", Counting(), days=0.25, fidelity="fluid")
    assert res.metrics["llm_decisions"] == 24.0  # one plan per 15-minute epoch over 6 h
    base = greenroute.run("demo", "local-only", days=0.25, fidelity="fluid")
    assert res.metrics["carbon_kg"] == base.metrics["carbon_kg"]


def test_a_policy_metric_cannot_replace_an_engine_metric(monkeypatch):
    monkeypatch.delenv("GREENROUTE_DATA_DIR", raising=False)
    with pytest.raises(ConfigError, match="'carbon_kg' would replace the engine's metric"):
        greenroute.run("demo", Counting({"carbon_kg": 0.0}), days=0.25, fidelity="fluid")
