"""Action masks of the seed-000 manager: which destinations an origin's batch may go to.

Seed 000 (appendix A) lets every manager pick any datacenter and relies on the reward to
teach it to avoid full or forbidden ones; with one destination per origin that trial and
error costs SLO misses for most of training, and a trained expert still sends a whole batch
into a datacenter that has no room for it now and then (the old expert missed 5 % of SLOs).
The mask removes those actions before the policy picks:

- *forbidden*: a destination that any class of the origin may not use this epoch
  (``obs.allowed``: exclusions, residency, outages);
- *saturated*: a destination whose busy slots this epoch would exceed ``target`` of its
  capacity with the batch added: the work already assigned by the managers that acted
  before, the home work of the origins still to act (assumed to stay home), the backlog
  carried from earlier epochs, and the batch itself (its forecast demand plus the pool of
  deferrable work it may release).

The origin's *fallback* -- its own region, else the nearest allowed one, i.e. what
``local-only`` does -- is never masked for capacity, so every origin always has a valid
action and a masked manager never does worse than ``local-only`` on capacity.
"""

from __future__ import annotations

import numpy as np

from greenroute.core.types import Observation
from greenroute.policies.rl.features import origin_load_slots

# Share of a datacenter's slots a moved batch may fill. The iteration server model queues
# past ~80 % occupancy (the 2 s TTFT SLO is missed at local-only's own peaks, which reach
# 60-70 % in geo3); 0.75 keeps a moved batch out of that regime (engineering choice, cf.
# heuristics.DEFAULT_TARGET_UTILISATION = 0.6 for splittable plans).
DEFAULT_MASK_TARGET_UTILISATION = 0.75


def fallback_destination(obs: Observation, o: int) -> int:
    """``local-only``'s choice for origin ``o``: its own region if allowed for the interactive
    class, else the nearest allowed region (region 0 if none is allowed)."""
    origin = obs.origins[o]
    if origin in obs.regions and obs.allowed[0, o, obs.regions.index(origin)]:
        return obs.regions.index(origin)
    ok = np.flatnonzero(obs.allowed[0, o])
    return int(ok[np.argmin(obs.latency_s[o, ok])]) if ok.size else 0


def batch_load_slots(obs: Observation, o: int, r: int) -> float:
    """Busy slots origin ``o``'s batch would add to region ``r``: the forecast demand of both
    classes plus the pending deferrable pool if released this epoch (spread over the epoch)."""
    pool = float(obs.pending_deferrable[o]) * float(obs.slot_s_per_request[1, r]) / obs.epoch_s
    return origin_load_slots(obs, o, r) + pool


def home_loads_after(obs: Observation, o: int) -> np.ndarray:
    """Busy slots ``[R]`` of the origins after ``o`` (not yet acted), each at its fallback."""
    out = np.zeros(obs.n_regions)
    for p in range(o + 1, obs.n_origins):
        f = fallback_destination(obs, p)
        out[f] += origin_load_slots(obs, p, f)
    return out


def manager_mask(
    obs: Observation,
    o: int,
    assigned: np.ndarray | None = None,
    target: float = DEFAULT_MASK_TARGET_UTILISATION,
) -> np.ndarray:
    """Boolean ``[R]``: the destinations origin ``o``'s manager may pick (see module doc).
    ``assigned[r]`` is the busy slots already sent to ``r`` by the managers that acted before."""
    n_r = obs.n_regions
    assigned = np.zeros(n_r) if assigned is None else np.asarray(assigned, dtype=float)
    allowed = obs.allowed[:, o, :].all(axis=0)
    cap = np.asarray(obs.capacity_slots, dtype=float)
    base = assigned + home_loads_after(obs, o) + obs.backlog_slot_s / obs.epoch_s
    load = np.array([batch_load_slots(obs, o, r) for r in range(n_r)])
    mask = allowed & (base + load <= target * cap)
    fb = fallback_destination(obs, o)
    mask[fb] = True  # local-only's choice always stays available
    return mask


def masked_choice(mask: np.ndarray, action: int, fallback: int) -> tuple[int, bool]:
    """(the action if the mask allows it, else ``fallback``; whether it was invalid)."""
    if mask[int(action)]:
        return int(action), False
    return int(fallback), True


def release_holds(
    obs: Observation,
    dest: np.ndarray,
    defer: np.ndarray,
    target: float = DEFAULT_MASK_TARGET_UTILISATION,
) -> np.ndarray:
    """The plan's ``hold[O]`` for the workers' decisions (``release="headroom"``).

    A deferring worker holds its whole pool (hold 1, seed 000's *defer*). An executing worker
    releases its pending pool at the rate its destination can absorb: as much as fits under
    ``target`` of the destination's slots after every origin's forecast demand and the carried
    backlog, the rest stays pooled (deadlines still force release). Seed 000 releases the
    whole pool at once (``release="all"``, hold 0); after a few hours of deferral that burst
    is several epochs of batch work landing in one epoch, and the queue it builds makes the
    interactive requests behind it miss their SLO (a worker deferring at random misses 5 % of
    SLOs against local-only's 0.9 % on one day of geo3).
    """
    dest = np.asarray(dest, dtype=np.int64)
    defer = np.asarray(defer, dtype=bool)
    hold = np.where(defer, 1.0, 0.0)
    cap = np.asarray(obs.capacity_slots, dtype=float)
    base = obs.backlog_slot_s / obs.epoch_s
    for o in range(obs.n_origins):
        base[dest[o]] += origin_load_slots(obs, o, int(dest[o]))
    free = np.maximum(target * cap - base, 0.0)
    for o in np.flatnonzero(~defer):
        d = int(dest[o])
        pool = float(obs.pending_deferrable[o]) * float(obs.slot_s_per_request[1, d]) / obs.epoch_s
        if pool <= 0.0:
            continue
        take = min(pool, free[d])
        hold[o] = 1.0 - take / pool
        free[d] -= take
    return hold
