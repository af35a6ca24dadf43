"""GCOS LP (lp-mpc style, one window): place a window's tasks by a linear program with
transfer costs, solved with HiGHS (scipy ``linprog``).

Variables ``x[b, r]`` in [0, 1] (share of task b at region r) and slack ``s[r] >= 0``::

    min  sum c[b, r] x[b, r] + penalty_usd_per_s * sum s[r]
    s.t. sum_r x[b, r] = 1                                   (every task placed)
         sum_b est[b] x[b, r] - s[r] <= cap[r]               (GPU-seconds this window)

``c[b, r]`` is the task's estimated objective at r (compute, fetch of uncached objects at their
egress price, energy and carbon, wait), each task costed on the cache state at the window's
start; ``cap[r] = gpus * window_s * max_util - backlog work``. Rows are rounded to their
largest share.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from greenroute.policies.gcos.common import Weights, task_cost
from greenroute.policies.gcos.predictor import ExecPredictor, make_backlog
from greenroute.sim.gcos.engine import Decision


class GcosLP:
    name = "lp"

    def __init__(self, predictor: ExecPredictor, weights: Weights, max_util: float = 0.9,
                 penalty_usd_per_s: float = 0.01) -> None:  # fmt: skip
        self.predictor, self.weights = predictor, weights
        self.max_util, self.penalty = max_util, penalty_usd_per_s

    def reset(self, sim) -> None:
        self.backlog = make_backlog(sim, self.predictor)

    def decide(self, sim) -> Decision:
        self.backlog.refresh()
        batch = [int(i) for i in sim.batch()]
        B, R = len(batch), sim.n_regions
        if B == 0:
            return Decision([])
        c = np.empty((B, R))
        for b, i in enumerate(batch):
            for r in range(R):
                c[b, r] = task_cost(sim, i, r, self.backlog.energy_est[i], set(), self.weights,
                                    self.backlog.wait_s(r))[2]  # fmt: skip
        est = self.backlog.est[batch]
        cap = np.maximum(
            sim.sc.gpus_per_region * sim.sc.window_s * self.max_util - self.backlog.work_s, 0.0
        )
        n = B * R
        cost = np.concatenate([c.ravel(), np.full(R, self.penalty)])
        a_eq = np.zeros((B, n + R))
        for b in range(B):
            a_eq[b, b * R : (b + 1) * R] = 1.0
        a_ub = np.zeros((R, n + R))
        for r in range(R):
            a_ub[r, r:n:R] = est
            a_ub[r, n + r] = -1.0
        res = linprog(cost, A_ub=a_ub, b_ub=cap, A_eq=a_eq, b_eq=np.ones(B),
                      bounds=[(0.0, 1.0)] * n + [(0.0, None)] * R, method="highs")  # fmt: skip
        if res.status != 0:  # pragma: no cover - the slack keeps it feasible
            raise RuntimeError(f"GCOS LP failed: {res.message}")
        x = res.x[:n].reshape(B, R)
        self.last_x, self.last_cap = x, cap
        out = [int(np.argmax(x[b])) for b in range(B)]
        for i, r in zip(batch, out, strict=True):
            self.backlog.add(i, r)
        return Decision(out)
