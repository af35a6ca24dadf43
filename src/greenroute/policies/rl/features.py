"""Observation encodings of seed 000 (appendix A.1, Tables 3 and 4), shared by the Gymnasium
environments, the RL-backed geo policy and trajectory recording.

- Manager (Table 3): meta-task features (8) + global cluster state (5 per datacenter) + time
  (4) = 12 + 5N — fixed-size, so a trained expert only runs with the N it was trained on.
- Worker (Table 4): pending task (7) + local datacenter state (6) + carbon-intensity trend (8)
  + temperature trend (8) + time (4) = 33 — local, any N.
- Scale-free manager (ours): meta (8) + own datacenter (5) + K candidate datacenters (5 each,
  the K with the lowest carbon intensity among the allowed ones, ordered) + time (4); the
  action picks a candidate. Same size for any N, so one policy runs on 3, 5 or 10 sites.

Units are scaled to O(1) with named constants.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from greenroute.core.types import Observation

CI_SCALE_G_PER_KWH = 500.0  # typical grid intensity (PROVENANCE summary: 47-691 g/kWh)
PRICE_SCALE_USD_PER_KWH = 0.1
TEMP_SCALE_C = 30.0
LATENCY_SCALE_S = 0.1
TOKENS_SCALE = 1000.0
HOURS_SCALE = 12.0
SCALE_FREE_K = 3
OBS_CLIP = 10.0  # every feature is clipped to [-10, 10] (the Box bounds of the envs)
MANAGER_META = 8
DC_FEATURES = 5
TIME_FEATURES = 4
WORKER_DIM = 33
TREND_PAST = 4
TREND_FUTURE = 4


def manager_dim(n: int) -> int:
    return MANAGER_META + DC_FEATURES * n + TIME_FEATURES


def scale_free_dim(k: int = SCALE_FREE_K) -> int:
    return MANAGER_META + DC_FEATURES * (k + 1) + TIME_FEATURES


def time_features(obs: Observation) -> np.ndarray:
    t = obs.time_utc
    hour = (t.hour + t.minute / 60.0) / 24.0
    day = (t.day_of_year - 1) / 365.25
    return np.array([np.sin(2 * np.pi * hour), np.cos(2 * np.pi * hour),
                     np.sin(2 * np.pi * day), np.cos(2 * np.pi * day)])  # fmt: skip


def meta_features(obs: Observation, o: int) -> np.ndarray:
    """The origin's workload batch this epoch (Table 3 'meta-task features')."""
    dem = obs.demand_rps[0, :, o]  # [C] req/s
    slot = obs.slot_s_per_request.mean(axis=1)  # [C]
    cap = max(float(obs.capacity_slots.sum()) / max(obs.n_regions, 1), 1e-9)
    slack_h = obs.pending_deadline_s[o] - obs.time_s
    slack_h = min(slack_h / 3600.0, 24.0) if np.isfinite(slack_h) else 24.0
    return np.array([
        dem[0] * slot[0] / cap,  # interactive load, in mean-region capacities
        dem[1] * slot[1] / cap,  # deferrable load
        np.log1p(dem[0]) / 5.0,
        np.log1p(dem[1]) / 5.0,
        np.log1p(obs.pending_deferrable[o]) / 10.0,
        slack_h / HOURS_SCALE,
        obs.prefill_s_per_request[0].mean(),
        obs.ttft_slo_s / 2.0,
    ])  # fmt: skip


def origin_load_slots(obs: Observation, o: int, r: int) -> float:
    """Busy slots origin ``o``'s forecast work would add to region ``r`` this epoch."""
    return float((obs.demand_rps[0, :, o] * obs.slot_s_per_request[:, r]).sum())


def dc_features(obs: Observation, o: int, r: int, assigned: np.ndarray | None = None) -> np.ndarray:
    """One datacenter as seen from origin ``o`` (Table 3 'global cluster state', 5 per DC).

    Free capacity counts the work already assigned to the datacenter this epoch by the
    managers that acted before (``assigned`` busy slots; the managers act in turn) plus the
    backlog carried from earlier epochs.
    """
    cap = max(float(obs.capacity_slots[r]), 1e-9)
    extra = 0.0 if assigned is None else float(assigned[r])
    busy = (extra + obs.backlog_slot_s[r] / obs.epoch_s) / cap
    return np.array([
        1.0 - min(busy, 2.0),  # free capacity share (negative when backlogged)
        obs.carbon_intensity_g_per_kwh[0, r] / CI_SCALE_G_PER_KWH,
        obs.price_usd_per_kwh[0, r] / PRICE_SCALE_USD_PER_KWH,
        obs.temp_c[0, r] / TEMP_SCALE_C,
        obs.latency_s[o, r] / LATENCY_SCALE_S,
    ])  # fmt: skip


def manager_obs(obs: Observation, o: int, assigned: np.ndarray | None = None) -> np.ndarray:
    """Table 3 vector: :func:`meta_features`, :func:`dc_features` of every datacenter, then
    :func:`time_features`. The parts that depend on the epoch only are built (and clipped)
    once per observation; the same values as assembling the three functions' outputs."""
    c = _per_obs(obs)
    n = obs.n_regions
    out = c["template"].copy()
    out[:MANAGER_META] = [_clip_scalar(x) for x in _meta(obs, c, o)]
    dcs = out[MANAGER_META : MANAGER_META + DC_FEATURES * n].reshape(n, DC_FEATURES)
    extra = 0.0 if assigned is None else np.asarray(assigned, dtype=float)
    busy = (extra + c["backlog_per_s"]) / c["cap"]
    dcs[:, 0] = _clip_inplace64(1.0 - np.minimum(busy, 2.0))
    dcs[:, 4] = c["latency"][o]
    return out.astype(np.float32)


_LAST: list = [None, None]  # (observation, its per-epoch feature parts)


def _per_obs(obs: Observation) -> dict:
    """Parts of the manager features that depend on the epoch only, for the last observation
    seen (an environment step builds N vectors from the same observation)."""
    if _LAST[0] is obs:
        return _LAST[1]
    n = obs.n_regions
    template = np.zeros(manager_dim(n))
    dcs = template[MANAGER_META : MANAGER_META + DC_FEATURES * n].reshape(n, DC_FEATURES)
    dcs[:, 1] = obs.carbon_intensity_g_per_kwh[0] / CI_SCALE_G_PER_KWH
    dcs[:, 2] = obs.price_usd_per_kwh[0] / PRICE_SCALE_USD_PER_KWH
    dcs[:, 3] = obs.temp_c[0] / TEMP_SCALE_C
    template[-TIME_FEATURES:] = time_features(obs)
    parts = {
        "slot": obs.slot_s_per_request.mean(axis=1),
        "cap_mean": max(float(obs.capacity_slots.sum()) / max(obs.n_regions, 1), 1e-9),
        "prefill": obs.prefill_s_per_request[0].mean(),
        "cap": np.maximum(obs.capacity_slots.astype(float), 1e-9),
        "backlog_per_s": obs.backlog_slot_s / obs.epoch_s,
        "template": _clip_inplace64(template),
        "latency": _clip_inplace64(np.asarray(obs.latency_s, dtype=float) / LATENCY_SCALE_S),
    }
    _LAST[0], _LAST[1] = obs, parts
    return parts


def _meta(obs: Observation, c: dict, o: int) -> list[float]:
    """:func:`meta_features` with the per-epoch parts precomputed (same arithmetic)."""
    dem = obs.demand_rps[0, :, o]
    slot, cap = c["slot"], c["cap_mean"]
    slack_h = obs.pending_deadline_s[o] - obs.time_s
    slack_h = min(slack_h / 3600.0, 24.0) if math.isfinite(slack_h) else 24.0
    return [
        dem[0] * slot[0] / cap,
        dem[1] * slot[1] / cap,
        np.log1p(dem[0]) / 5.0,
        np.log1p(dem[1]) / 5.0,
        np.log1p(obs.pending_deferrable[o]) / 10.0,
        slack_h / HOURS_SCALE,
        c["prefill"],
        obs.ttft_slo_s / 2.0,
    ]


def _clip_scalar(x: float) -> float:
    """One feature as :func:`_clip` treats it (NaN -> 0, clipped to +-OBS_CLIP)."""
    return 0.0 if x != x else min(max(float(x), -OBS_CLIP), OBS_CLIP)


def _clip(v: np.ndarray) -> np.ndarray:
    """NaN -> 0, then clipped to +-OBS_CLIP (infinities included), as float32."""
    return _clip_inplace(np.array(v, dtype=float))


def _clip_inplace(v: np.ndarray) -> np.ndarray:
    return _clip_inplace64(v).astype(np.float32)


def _clip_inplace64(v: np.ndarray) -> np.ndarray:
    np.copyto(v, 0.0, where=np.isnan(v))
    return np.clip(v, -OBS_CLIP, OBS_CLIP, out=v)


def scale_free_candidates(obs: Observation, o: int, k: int = SCALE_FREE_K) -> np.ndarray:
    """The K allowed datacenters with the lowest carbon intensity now (padded by repeats)."""
    allowed = np.flatnonzero(obs.allowed[0, o])
    if allowed.size == 0:
        allowed = np.arange(obs.n_regions)
    order = allowed[np.argsort(obs.carbon_intensity_g_per_kwh[0, allowed], kind="stable")]
    reps = int(np.ceil(k / order.size))
    return np.tile(order, reps)[:k]


def scale_free_manager_obs(
    obs: Observation, o: int, k: int = SCALE_FREE_K, assigned: np.ndarray | None = None
):
    """(vector, candidate region indices)."""
    cands = scale_free_candidates(obs, o, k)
    own = obs.regions.index(obs.origins[o]) if obs.origins[o] in obs.regions else int(cands[0])
    parts = [meta_features(obs, o), dc_features(obs, o, own, assigned)]
    parts += [dc_features(obs, o, int(r), assigned) for r in cands]
    parts.append(time_features(obs))
    return _clip(np.concatenate(parts)), cands


class TrendMemory:
    """Past values of a per-region signal, for the worker's trend features."""

    def __init__(self, n_regions: int, depth: int = TREND_PAST) -> None:
        self.ci: deque = deque(maxlen=depth)
        self.temp: deque = deque(maxlen=depth)
        self.n = n_regions

    def push(self, obs: Observation) -> None:
        self.ci.append(obs.carbon_intensity_g_per_kwh[0].copy())
        self.temp.append(obs.temp_c[0].copy())

    def past(self, which: str, r: int, now: float) -> np.ndarray:
        hist = list(self.ci if which == "ci" else self.temp)
        vals = [h[r] for h in hist]
        vals = [now] * (TREND_PAST - len(vals)) + vals
        return np.asarray(vals[-TREND_PAST:], dtype=float)


def worker_region(obs: Observation, o: int) -> int:
    """The datacenter whose worker serves origin ``o``: the region with the origin's key, else
    the region with the same index (capped)."""
    origin = obs.origins[o]
    return obs.regions.index(origin) if origin in obs.regions else min(o, obs.n_regions - 1)


def worker_obs(obs: Observation, j: int, memory: TrendMemory | None = None) -> np.ndarray:
    """Worker at datacenter ``j`` (the origin with the same key), Table 4: 33 features."""
    o = (
        obs.origins.index(obs.regions[j])
        if obs.regions[j] in obs.origins
        else min(j, obs.n_origins - 1)
    )
    slack = obs.pending_deadline_s[o] - obs.time_s
    slack_h = min(slack / 3600.0, 24.0) if np.isfinite(slack) else 24.0
    dem_def = obs.demand_rps[0, 1, o]
    task = np.array([
        np.log1p(obs.pending_deferrable[o]) / 10.0,
        slack_h / HOURS_SCALE,
        1.0 - min(slack_h / HOURS_SCALE, 1.0),  # urgency
        np.log1p(dem_def) / 5.0,
        obs.slot_s_per_request[1, j] / 10.0,
        obs.it_kwh_per_request[1, j] * 1e3,
        float(obs.pending_deferrable[o] > 0),
    ])  # fmt: skip
    cap = max(float(obs.capacity_slots[j]), 1e-9)
    local = np.array([
        min(obs.busy_slots[j] / cap, 2.0),
        1.0 - min((obs.busy_slots[j] + obs.backlog_slot_s[j] / obs.epoch_s) / cap, 2.0),
        np.log1p(obs.queue_len[j]) / 10.0,
        obs.carbon_intensity_g_per_kwh[0, j] / CI_SCALE_G_PER_KWH,
        obs.price_usd_per_kwh[0, j] / PRICE_SCALE_USD_PER_KWH,
        obs.temp_c[0, j] / TEMP_SCALE_C,
    ])  # fmt: skip
    ci_now = obs.carbon_intensity_g_per_kwh[0, j]
    t_now = obs.temp_c[0, j]
    fut_ci = _future(obs.carbon_intensity_g_per_kwh[:, j])
    fut_t = _future(obs.temp_c[:, j])
    past_ci = memory.past("ci", j, ci_now) if memory else np.full(TREND_PAST, ci_now)
    past_t = memory.past("temp", j, t_now) if memory else np.full(TREND_PAST, t_now)
    ci_trend = np.concatenate([past_ci - ci_now, fut_ci - ci_now]) / CI_SCALE_G_PER_KWH
    t_trend = np.concatenate([past_t - t_now, fut_t - t_now]) / TEMP_SCALE_C
    return _clip(np.concatenate([task, local, ci_trend, t_trend, time_features(obs)]))


def _future(series: np.ndarray) -> np.ndarray:
    vals = series[1 : 1 + TREND_FUTURE]
    if vals.size < TREND_FUTURE:
        vals = np.concatenate([vals, np.full(TREND_FUTURE - vals.size, series[-1])])
    return vals
