"""``greenroute replay LOG``: the gateway's recorded arrivals through the simulator, to
compare what happened with what other policies would have done.

The decision log's answered requests (arrival time, origin, class, token counts, deferrable
deadline) become the simulator's :class:`~greenroute.data.requests.Requests` on a scenario
built from the gateway config: its regions, origins (coordinates), epoch, SLO, facility model
and rules (exclusion windows moved to seconds since the replay's start). Live upstreams have
no simulator model, so every region gets the same stand-in cluster (``uniform_cluster``:
Llama-2-70B on 4 x H100 per server, ``servers_per_region`` servers): the comparison is between
routings of the same arrivals, not a prediction of the live servers' figures.

``recorded`` is what the gateway did: per epoch, each (class, origin) row of its plan is the
share of that row's requests the gateway sent to each region.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.constraints import ConstraintSet, Exclusion
from greenroute.core.errors import ConfigError
from greenroute.core.types import CLASSES, N_CLASSES, ClusterInfo, Observation, Plan
from greenroute.serve.config import GatewayConfig
from greenroute.serve.decision_log import read_decisions

RECORDED = "recorded"
DEFAULT_SERVERS_PER_REGION = 4
SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class ReplayInput:
    start_unix_s: float  # wall time of the replay's t = 0 (the first arrival's epoch start)
    arrival_s: np.ndarray  # since start
    origin: np.ndarray
    cls: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    deadline_s: np.ndarray  # since start; inf for interactive
    region: np.ndarray  # region index the gateway chose


def read_replay_input(path: Path, cfg: GatewayConfig) -> ReplayInput:
    """The answered requests (HTTP status < 400) of a decision log, sorted by arrival."""
    try:
        all_recs = read_decisions(path)
    except OSError as err:
        raise ConfigError(f"cannot read decision log {path}: {err.strerror or err}") from None
    except ValueError as err:
        raise ConfigError(f"{path}: not a JSONL decision log ({err})") from None
    recs = [r for r in all_recs
            if r.get("region") is not None and int(r.get("status", 599)) < 400]  # fmt: skip
    if not recs:
        raise ConfigError(f"{path}: no answered requests to replay")
    o_idx = {o: i for i, o in enumerate(cfg.origin_names)}
    r_idx = {r: i for i, r in enumerate(cfg.region_names)}
    bad = sorted({r["origin"] for r in recs if r["origin"] not in o_idx}
                 | {r["region"] for r in recs if r["region"] not in r_idx})  # fmt: skip
    if bad:
        raise ConfigError(f"{path}: origins/regions {bad} are not in the gateway config "
                          f"{cfg.source}; replay with the config that wrote the log")  # fmt: skip
    recs.sort(key=lambda r: float(r["time_s"]))
    t0 = math.floor(float(recs[0]["time_s"]) / cfg.epoch_s) * cfg.epoch_s
    arrival = np.array([float(r["time_s"]) - t0 for r in recs])
    cls = np.array([CLASSES.index(r["class"]) for r in recs])
    deadline = np.array([float(r.get("deadline_s") or math.inf) - t0 for r in recs])
    deadline = np.where(cls == 1, np.where(np.isfinite(deadline), deadline,
                                           arrival + cfg.default_deadline_s), np.inf)  # fmt: skip
    return ReplayInput(
        start_unix_s=t0, arrival_s=arrival,
        origin=np.array([o_idx[r["origin"]] for r in recs]), cls=cls,
        prompt_tokens=np.array([max(int(r.get("prompt_tokens") or 1), 1) for r in recs]),
        output_tokens=np.array([max(int(r.get("output_tokens") or 1), 1) for r in recs]),
        deadline_s=deadline, region=np.array([r_idx[r["region"]] for r in recs]),
    )  # fmt: skip


class RecordedPolicy:
    """The gateway's own routing as a geo plan: per epoch, the shares it actually sent."""

    name = RECORDED

    def __init__(self, data: ReplayInput, n_origins: int, n_regions: int, epoch_s: float,
                 n_epochs: int) -> None:  # fmt: skip
        counts = np.zeros((n_epochs, N_CLASSES, n_origins, n_regions))
        e = np.minimum((data.arrival_s // epoch_s).astype(np.int64), n_epochs - 1)
        np.add.at(counts, (e, data.cls, data.origin, data.region), 1.0)
        self.counts = counts

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        del cluster, seed

    def plan(self, obs: Observation) -> Plan:
        c = self.counts[min(obs.epoch, len(self.counts) - 1)]
        tot = c.sum(axis=2, keepdims=True)
        safe = obs.allowed * np.maximum(obs.capacity_slots, 1e-9)[None, None, :]
        safe = safe / np.maximum(safe.sum(axis=2, keepdims=True), 1e-300)
        route = np.where(tot > 0, c / np.where(tot > 0, tot, 1.0), safe)
        return Plan(route=route, hold=np.zeros(obs.n_origins), rationale="")


def replay_scenario(cfg: GatewayConfig, data: ReplayInput, servers_per_region: int,
                    start_utc: pd.Timestamp | None = None):  # fmt: skip
    """The simulator scenario of a replay (request fidelity, the config's rules)."""
    from greenroute.data.workload import WorkloadSpec
    from greenroute.sim.cluster import uniform_cluster
    from greenroute.sim.scenario import Scenario

    n_o = len(cfg.origins)
    span_s = max(float(data.arrival_s.max()) + 1.0, cfg.epoch_s)
    n_epochs = math.ceil(span_s / cfg.epoch_s)
    rate = np.zeros((N_CLASSES, n_o))
    np.add.at(rate, (data.cls, data.origin), 1.0 / (n_epochs * cfg.epoch_s))
    spec = WorkloadSpec(origins=cfg.origin_names, origin_timezones=("UTC",) * n_o,
                        interactive_rps=tuple(rate[0]), deferrable_rps=tuple(rate[1]),
                        diurnal="flat", rate_noise_sigma=0.0)  # fmt: skip
    shift = data.start_unix_s
    cs = cfg.constraints
    rules = ConstraintSet(
        tuple(Exclusion(e.region, e.start_s - shift, e.end_s - shift, e.reason)
              for e in cs.exclusions),
        cs.residency, cs.power_caps_kw, cs.max_one_way_latency_s,
    )  # fmt: skip
    start = start_utc if start_utc is not None else pd.Timestamp(shift, unit="s", tz="UTC")
    return Scenario(
        name="gateway-replay", description=f"replay of {len(data.arrival_s)} requests",
        regions=cfg.region_names, origins=cfg.origin_names,
        cluster=uniform_cluster(cfg.region_names, servers_per_region), workload=spec,
        start_utc=start, days=n_epochs * cfg.epoch_s / SECONDS_PER_DAY, epoch_s=cfg.epoch_s,
        fidelity="request", ttft_slo_s=cfg.ttft_slo_s, constraints=rules,
        facility=cfg.facility, horizon=cfg.horizon_epochs,
        origin_latlon=tuple((o.lat_deg, o.lon_deg) for o in cfg.origins),
    )  # fmt: skip


def replay(log: Path, cfg: GatewayConfig, policies: Sequence[str], *,
           data_dir: Path | None = None, servers_per_region: int = DEFAULT_SERVERS_PER_REGION,
           start_utc: pd.Timestamp | None = None, seed: int = 0) -> pd.DataFrame:  # fmt: skip
    """One row per policy (``recorded`` first): the simulator's metrics on the recorded
    arrivals."""
    from greenroute.bench.runner import prepare_checked, run_prepared
    from greenroute.data.requests import Requests

    data = read_replay_input(log, cfg)
    sc = replay_scenario(cfg, data, servers_per_region, start_utc)
    prep, _ = prepare_checked(sc, seed=seed, data_dir=data_dir)
    n_o, n_e = len(sc.origins), sc.n_epochs
    reqs = Requests(
        arrival_s=data.arrival_s, origin=data.origin, cls=data.cls,
        model=np.zeros(len(data.arrival_s), dtype=np.int64),
        prompt_tokens=data.prompt_tokens, output_tokens=data.output_tokens,
        deadline_s=data.deadline_s,
    )  # fmt: skip
    prep.requests = reqs
    t_total = prep.observed_rps.shape[0]
    cnt = reqs.counts_by_epoch(sc.epoch_s, t_total, n_o, len(sc.models))
    prep.observed_rps = cnt.sum(axis=3).transpose(0, 2, 1) / sc.epoch_s
    rows = []
    for name in (RECORDED, *policies):
        if name == RECORDED:
            pol = RecordedPolicy(data, n_o, len(sc.regions), sc.epoch_s, n_e)
            res = run_prepared(prep, pol, local_policy=cfg.local_policy, seed=seed,
                               weights=cfg.weights, on_invalid="fallback")  # fmt: skip
        else:
            res = run_prepared(prep, name, local_policy=cfg.local_policy, seed=seed,
                               weights=cfg.weights)  # fmt: skip
        m = res.metrics
        rows.append({"policy": name, **{k: m.get(k) for k in REPORT_METRICS}})
    return pd.DataFrame(rows).set_index("policy")


REPORT_METRICS = ("requests_total", "requests_completed", "carbon_kg", "water_m3", "cost_usd",
                  "ttft_mean_s", "ttft_p99_s", "slo_violation_pct", "invalid_plans")  # fmt: skip
