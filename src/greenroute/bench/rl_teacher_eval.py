"""How much deferrable work a geo policy defers (the teacher's worker, or any policy's holds).

``python -m greenroute.bench.rl_teacher_eval --policies local-only,lp-mpc,rl:PATH`` runs each
policy through the step-wise core (``envs/geo_core.py``: the same fluid run as ``greenroute
compare`` on the same scenario, seed and data) and prints per policy:

- ``deferred_share_pct``: deferrable arrivals kept back in the epoch they arrived, in % of all
  deferrable arrivals: sum over epochs and origins of ``hold[o] x arrivals[o]`` / sum of
  arrivals (``hold`` is the plan's share kept back; arrivals are the epoch's deferrable demand);
- ``mean_hold_min``: mean time a deferrable request waits in the pool (Little's law: mean held
  stock / arrival rate);
- ``defer_decisions_pct`` (``rl:`` policies with a worker): worker decisions that were *defer*;
- ``carbon_kg``, ``slo_misses_pct``: the run's totals (a cross-check against ``compare``).
"""

from __future__ import annotations

import argparse
import json

import numpy as np


def deferral_stats(
    policy: str, scenario: str = "geo3", *, days: float | None = None, seed: int = 0,
    data_dir: str | None = None,
) -> dict:  # fmt: skip
    from greenroute.envs.geo_core import GeoCore
    from greenroute.policies.registry import make_geo_policy

    core = GeoCore(scenario, days, data_dir)
    geo = make_geo_policy(policy)
    core.reset_driven_by(geo, seed)
    arrivals = kept = held_stock = carbon = misses = requests = 0.0
    decisions = defers = 0
    while not core.done:
        obs = core.obs
        plan = geo.plan(obs)
        arr = obs.demand_rps[0, 1, :] * obs.epoch_s  # this epoch's deferrable arrivals [O]
        hold = np.zeros(obs.n_origins) if plan.hold is None else np.asarray(plan.hold)
        last = getattr(geo, "last_actions", None)
        if last is not None and getattr(geo, "worker", None) is not None:
            decisions += obs.n_origins
            defers += int(np.asarray(last[1]).sum())
        out = core.step_plan(plan)
        arrivals += float(arr.sum())
        kept += float((np.clip(hold, 0.0, 1.0) * arr).sum())
        held_stock += float(out.info.get("held", 0.0))
        carbon += float(out.info.get("carbon_kg", 0.0))
        misses += float(out.info.get("slo_misses", 0.0))
        requests += float(out.info.get("completed", 0.0))
    n_e = max(core.sc.n_epochs, 1)
    # Little's law: mean time in the pool = mean stock / arrival rate
    hold_epochs = (held_stock / n_e) / max(arrivals / n_e, 1e-9)
    return {
        "policy": policy,
        "deferred_share_pct": 100.0 * kept / max(arrivals, 1e-9),
        "mean_hold_min": hold_epochs * core.sc.epoch_s / 60.0,
        "defer_decisions_pct": 100.0 * defers / decisions if decisions else None,
        "carbon_kg": carbon,
        "slo_misses_pct": 100.0 * misses / max(requests, 1e-9),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", default="local-only")
    ap.add_argument("--scenario", default="geo3")
    ap.add_argument("--days", type=float, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args(argv)
    for p in a.policies.split(","):
        stats = deferral_stats(p, a.scenario, days=a.days, seed=a.seed, data_dir=a.data_dir)
        print(json.dumps(stats))


if __name__ == "__main__":
    main()
