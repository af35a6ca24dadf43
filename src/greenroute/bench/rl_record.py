"""``greenroute record``: (observation, action, reward) trajectories from any geo policy.

Each epoch the policy plans as usual; the recorder encodes what the seed-000 agents would
have seen and done: per origin a *manager* row (Table 3 observation, action = the region that
received most of the origin's interactive work, also the full routing row) and a *worker*
row (Table 4 observation, action 1 = execute / 0 = defer), with the shared reward of seed 000
eq. 1 for that epoch. These are the expert trajectories the LLM copilot is distilled from.

A policy that exposes its agents' own actions (the RL expert's ``last_actions``: the Managers'
destinations and the Workers' defer flags of its last plan) is recorded with those: with the
``headroom`` release rule an *executing* worker can still keep most of its pool held (it
releases only what the destination absorbs), so the hold share does not tell its decision.
Other policies: the manager action is the region that received most of the origin's
interactive work and the worker *executes* when the plan holds less than half of the origin's
deferrable work.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.core.errors import DataFormatError
from greenroute.policies.rl import features as F

COLUMNS = ("epoch", "time_utc", "agent", "role", "obs", "action", "reward", "route", "hold",
           "rationale")  # fmt: skip


def record(
    policy,
    scenario: str = "geo3",
    *,
    days: float | None = None,
    seed: int = 0,
    data_dir: str | None = None,
    progress=None,
) -> pd.DataFrame:
    from greenroute.envs.geo_core import GeoCore
    from greenroute.policies.registry import make_geo_policy

    geo = make_geo_policy(policy) if isinstance(policy, str) else policy
    core = GeoCore(scenario, days, data_dir)
    core.reset(seed)
    sim = core.sim
    from greenroute.sim.prepare import cluster_info

    geo.reset(cluster_info(sim.prep), seed)
    rows: list[dict] = []
    n_e = core.sc.n_epochs
    while not core.done:
        obs = core.obs
        plan = sim.validated(obs, geo.plan(obs))
        assigned = np.zeros(obs.n_regions)
        mgr_rows, wrk_rows = [], []
        hold = np.zeros(obs.n_origins) if plan.hold is None else np.asarray(plan.hold)
        acts = getattr(geo, "last_actions", None)  # (destinations [O], defer flags [O])
        for o, origin in enumerate(obs.origins):
            dest = int(acts[0][o]) if acts is not None else int(np.argmax(plan.route[0, o]))
            mgr_rows.append({
                "agent": f"manager_{origin}", "role": "manager",
                "obs": F.manager_obs(obs, o, assigned).tolist(), "action": dest,
                "route": plan.route[0, o].tolist(), "hold": float(hold[o]),
            })  # fmt: skip
            assigned[dest] += F.origin_load_slots(obs, o, dest)
            j = F.worker_region(obs, o)
            wrk_rows.append({
                "agent": f"worker_{origin}", "role": "worker",
                "obs": F.worker_obs(obs, j, core.memory).tolist(),
                "action": int(not acts[1][o]) if acts is not None else int(hold[o] < 0.5),
                "route": plan.route[1, o].tolist(),
                "hold": float(hold[o]),
            })  # fmt: skip
        out = core.step_plan(plan)
        for r in (*mgr_rows, *wrk_rows):
            r.update(epoch=obs.epoch, time_utc=obs.time_utc, reward=out.reward,
                     rationale=plan.rationale)  # fmt: skip
            rows.append(r)
        if progress is not None:
            progress(obs.epoch + 1, n_e)
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame.attrs["policy"] = getattr(geo, "name", str(policy))
    frame.attrs["scenario"] = scenario
    return frame


def save_trajectories(frame: pd.DataFrame, path: str | Path) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    frame.to_parquet(tmp, index=False)
    tmp.replace(path)


def load_trajectories(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, "trajectory file not found")
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise DataFormatError(
            path, f"not a Parquet trajectory file ({type(exc).__name__})"
        ) from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise DataFormatError(path, f"missing columns {missing}")
    return frame
