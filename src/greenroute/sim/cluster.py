"""Cluster description (what runs where) and its flattened, array form used by the engine.

A *server* here is one serving instance (an inference engine such as vLLM on ``tp`` GPUs
with tensor parallelism): it is the unit of queueing. It holds ``max_concurrency`` request
slots (continuous batching) and a KV-cache memory budget, and has one resident model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from greenroute.core.errors import ConfigError

if TYPE_CHECKING:
    from greenroute.physics.llm_perf import PowerKnots


@dataclass(frozen=True)
class ServerGroup:
    """``count`` identical serving instances in one region."""

    count: int
    model: str = "llama2-70b"  # resident at start
    gpu: str = "h100-80gb"
    tp: int = 4  # GPUs per instance (tensor-parallel degree)
    max_concurrency: int = 32  # continuous-batching slots
    tokens_per_s: float | None = None  # seed 002 throughput model instead of profile tables
    idle_w: float | None = None  # override the catalog-derived server power
    peak_w: float | None = None

    def __post_init__(self) -> None:
        if self.count < 0 or self.max_concurrency < 1 or self.tp < 1:
            raise ConfigError(
                f"server group needs count >= 0, max_concurrency >= 1, tp >= 1; got {self}"
            )


@dataclass(frozen=True)
class RegionCluster:
    region: str
    groups: tuple[ServerGroup, ...]
    queue_limit: int = 1000  # per-server FIFO queue bound (seed 002 section IV)

    @property
    def n_servers(self) -> int:
        return sum(g.count for g in self.groups)


@dataclass(frozen=True)
class Cluster:
    regions: tuple[RegionCluster, ...]

    @property
    def region_keys(self) -> tuple[str, ...]:
        return tuple(rc.region for rc in self.regions)

    def to_dict(self) -> dict:
        return {
            rc.region: {
                "queue_limit": rc.queue_limit,
                "groups": [g.__dict__ for g in rc.groups],
            }
            for rc in self.regions
        }


def uniform_cluster(
    regions: Sequence[str],
    servers_per_region: int,
    *,
    model: str = "llama2-70b",
    gpu: str = "h100-80gb",
    tp: int = 4,
    max_concurrency: int = 32,
) -> Cluster:
    return Cluster(
        tuple(
            RegionCluster(r, (ServerGroup(servers_per_region, model, gpu, tp, max_concurrency),))
            for r in regions
        )
    )


@dataclass
class BuiltCluster:
    """Flat arrays over all servers, plus per-(hardware group, model) perf tables.

    A server's *perf type* is ``hw_group * n_models + model``; ``-1`` entries in tables mean the
    hardware cannot host that model (weights do not fit).
    """

    regions: tuple[str, ...]
    models: tuple[str, ...]
    region_start: np.ndarray  # [R+1] server index ranges per region
    server_region: np.ndarray  # [S]
    server_hw: np.ndarray  # [S] hardware group index
    server_slots: np.ndarray  # [S] max concurrency
    server_idle_w: np.ndarray  # [S]
    server_peak_w: np.ndarray  # [S]
    server_model0: np.ndarray  # [S] resident model at start
    queue_limit: np.ndarray  # [S]
    # perf tables indexed by perf type t = hw * n_models + m
    type_ok: np.ndarray  # [T] bool
    prefill_tok: np.ndarray  # [T, K] knots (padded with the last value)
    prefill_s: np.ndarray  # [T, K]
    decode_s: np.ndarray  # [T, Bmax+1] decode step seconds by batch size
    kv_cap_bytes: np.ndarray  # [T]
    cold_load_s: np.ndarray  # [T]
    kv_bytes_per_token: np.ndarray  # [M]
    hw_groups: tuple[ServerGroup, ...]  # one per hardware group
    hw_region: np.ndarray  # [G] region of each hardware group
    # [T] measured iteration power (TDP fractions) of each perf type; None: not profiled
    type_power: tuple[PowerKnots | None, ...] = ()

    @property
    def n_servers(self) -> int:
        return int(self.server_region.shape[0])

    @property
    def n_regions(self) -> int:
        return len(self.regions)

    @property
    def n_models(self) -> int:
        return len(self.models)

    def region_slots(self) -> np.ndarray:
        return np.bincount(self.server_region, weights=self.server_slots, minlength=self.n_regions)

    def region_servers(self) -> np.ndarray:
        return np.bincount(self.server_region, minlength=self.n_regions)

    def region_idle_kw(self) -> np.ndarray:
        w = np.bincount(self.server_region, weights=self.server_idle_w, minlength=self.n_regions)
        return w / 1e3

    def region_peak_kw(self) -> np.ndarray:
        w = np.bincount(self.server_region, weights=self.server_peak_w, minlength=self.n_regions)
        return w / 1e3


def build_cluster(cluster: Cluster, models: Sequence[str], data_dir=None) -> BuiltCluster:
    """Resolve perf models and power for every hardware group x model."""
    from greenroute.catalog import get_gpu, get_llm
    from greenroute.data.perf_knots import knot_table
    from greenroute.physics.llm_perf import available_perf, perf_model, throughput_perf_model
    from greenroute.physics.power import ServerPower

    models = tuple(models)
    for m in models:
        get_llm(m)
    n_m = len(models)
    hw_groups: list[ServerGroup] = []
    hw_region: list[int] = []
    srv_region, srv_hw, srv_slots, srv_idle, srv_peak, srv_model, srv_q = ([] for _ in range(7))
    region_start = [0]
    for r, rc in enumerate(cluster.regions):
        for g in rc.groups:
            if g.model not in models:
                raise ConfigError(
                    f"region {rc.region}: server model {g.model!r} not in the scenario's models "
                    f"{list(models)}"
                )
            get_gpu(g.gpu)
            h = len(hw_groups)
            hw_groups.append(g)
            hw_region.append(r)
            sp = ServerPower.for_gpus(g.gpu, g.tp)
            idle_w = sp.idle_w if g.idle_w is None else g.idle_w
            peak_w = sp.peak_w if g.peak_w is None else g.peak_w
            for _ in range(g.count):
                srv_region.append(r)
                srv_hw.append(h)
                srv_slots.append(g.max_concurrency)
                srv_idle.append(idle_w)
                srv_peak.append(peak_w)
                srv_model.append(models.index(g.model))
                srv_q.append(rc.queue_limit)
        region_start.append(len(srv_region))

    n_types = len(hw_groups) * n_m
    bmax = max((g.max_concurrency for g in hw_groups), default=1)
    table = knot_table(data_dir)
    available = set(available_perf(table))
    perfs = []
    for g in hw_groups:
        for m in models:
            if g.tokens_per_s is not None:
                perfs.append(throughput_perf_model(g.tokens_per_s))
                continue
            if (m, g.gpu, g.tp) in available:
                perfs.append(perf_model(m, g.gpu, g.tp, table))
            elif m == g.model:
                raise ConfigError(
                    f"no performance profile for {m} on {g.tp} x {g.gpu}; valid choices: "
                    + ", ".join(f"{k[0]} on {k[2]} x {k[1]}" for k in available)
                )
            else:  # another model of the scenario cannot run on this hardware
                perfs.append(None)
    k = max((len(p.prefill_tokens_knots) for p in perfs if p is not None), default=2)
    type_ok = np.zeros(n_types, dtype=np.bool_)
    prefill_tok = np.zeros((n_types, k))
    prefill_s = np.zeros((n_types, k))
    decode_s = np.zeros((n_types, bmax + 1))
    kv_cap = np.zeros(n_types)
    cold = np.zeros(n_types)
    for t, p in enumerate(perfs):
        if p is None:
            continue
        type_ok[t] = True
        n = len(p.prefill_tokens_knots)
        # pad by extending the last segment linearly so np.interp-style lookup stays exact
        prefill_tok[t, :n] = p.prefill_tokens_knots
        prefill_s[t, :n] = p.prefill_s_knots
        if n < k:
            x0, x1 = p.prefill_tokens_knots[-2], p.prefill_tokens_knots[-1]
            y0, y1 = p.prefill_s_knots[-2], p.prefill_s_knots[-1]
            slope = (y1 - y0) / (x1 - x0)
            extra = x1 + (x1 - x0) * np.arange(1, k - n + 1)
            prefill_tok[t, n:] = extra
            prefill_s[t, n:] = y1 + slope * (extra - x1)
        decode_s[t] = p.decode_table(bmax)
        kv_cap[t] = p.kv_capacity_bytes
        cold[t] = p.cold_load_s
    kvb = np.array([get_llm(m).kv_bytes_per_token for m in models], dtype=np.float64)
    # the throughput model has no KV limit: make tokens free
    for t, p in enumerate(perfs):
        if p is not None and not np.isfinite(p.kv_capacity_bytes):
            kv_cap[t] = np.inf
    return BuiltCluster(
        regions=cluster.region_keys,
        models=models,
        region_start=np.asarray(region_start, dtype=np.int64),
        server_region=np.asarray(srv_region, dtype=np.int64),
        server_hw=np.asarray(srv_hw, dtype=np.int64),
        server_slots=np.asarray(srv_slots, dtype=np.int64),
        server_idle_w=np.asarray(srv_idle, dtype=np.float64),
        server_peak_w=np.asarray(srv_peak, dtype=np.float64),
        server_model0=np.asarray(srv_model, dtype=np.int64),
        queue_limit=np.asarray(srv_q, dtype=np.int64),
        type_ok=type_ok,
        prefill_tok=prefill_tok,
        prefill_s=prefill_s,
        decode_s=decode_s,
        kv_cap_bytes=kv_cap,
        cold_load_s=cold,
        kv_bytes_per_token=kvb,
        hw_groups=tuple(hw_groups),
        hw_region=np.asarray(hw_region, dtype=np.int64),
        type_power=tuple(None if p is None else p.power for p in perfs),
    )
