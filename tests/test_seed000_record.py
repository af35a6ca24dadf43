"""``bench.rl_record`` reads the RL expert's own actions (``last_actions``), not the plan's hold.

With the ``headroom`` release rule an executing worker can keep most of its pool held, so a
hold share above one half does not mean *defer*; the recorder must take the Workers' defer flags
(and the Managers' destinations) that the policy exposes."""

from __future__ import annotations

import numpy as np

from greenroute.bench.rl_record import record
from greenroute.core.types import Plan
from greenroute.policies.heuristics import LocalOnly


class ExposesActions(LocalOnly):
    """local-only's routes with hold 0.9 everywhere, and agents' actions that differ from both:
    Managers chose DC-3 for every origin, only origin 1's Worker deferred."""

    name = "exposes-actions"

    def plan(self, obs):
        p = super().plan(obs)
        self.last_actions = (np.full(obs.n_origins, 2), np.array([False, True, False]))
        return Plan(route=p.route, hold=np.full(obs.n_origins, 0.9), rationale="test")


def test_record_uses_the_policys_own_actions() -> None:
    frame = record(ExposesActions(), "geo3", days=2 * 900 / 86400, seed=0)  # 2 epochs
    assert len(frame) == 2 * 6
    mgr = frame[frame["role"] == "manager"]
    wrk = frame[frame["role"] == "worker"]
    assert list(mgr["action"]) == [2, 2, 2, 2, 2, 2]  # not the routes' argmax (0, 1, 2)
    assert [int(np.argmax(r)) for r in mgr["route"]] == [0, 1, 2, 0, 1, 2]
    assert list(wrk["action"]) == [1, 0, 1, 1, 0, 1]  # execute, defer, execute per epoch
    assert set(wrk["hold"]) == {0.9}


def test_record_without_exposed_actions_reads_the_plan() -> None:
    frame = record("local-only", "geo3", days=900 / 86400, seed=0)
    assert list(frame[frame["role"] == "manager"]["action"]) == [0, 1, 2]
    assert list(frame[frame["role"] == "worker"]["action"]) == [1, 1, 1]
