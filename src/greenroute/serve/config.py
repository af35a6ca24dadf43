"""The gateway's YAML config, validated at start-up: every problem is collected and reported
at once, each as ``FILE: key.path: what is wrong``.

See ``examples/gateway.yaml`` for a commented example of every section.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from greenroute.constraints import ConstraintSet
from greenroute.core.errors import ConfigError
from greenroute.core.types import ObjectiveWeights
from greenroute.serve.security import ClientKey
from greenroute.serve.shared_state import SharedConfig, shared_section

W_PER_KW = 1000.0
DEFAULT_GPU = "h100-80gb"
DEFAULT_CAPACITY = 8  # concurrent requests per upstream (engineering default; set it per server)
DEFAULT_REQUEST_S = 2.0  # expected request duration until measured (engineering default)
DEFAULT_PREFILL_S = 0.2  # expected time to first token until measured (engineering default)
PROVIDER_TYPES = ("electricitymaps", "watttime", "replay", "static")
SIGNAL_KEYS = ("carbon_intensity_g_per_kwh", "price_usd_per_kwh", "temp_c", "rh_pct",
               "low_carbon_pct", "renewable_pct")  # fmt: skip


class GatewayConfigError(ConfigError):
    """All problems of a gateway config, one per line."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.problems = [f"{source}: {p}" for p in problems]
        head = f"{source}: {len(problems)} problem(s) in the gateway config"
        super().__init__("\n".join([head, *("  " + p for p in self.problems)]))


@dataclass(frozen=True)
class UpstreamConfig:
    name: str
    region: str
    url: str  # base URL, e.g. http://10.0.0.5:8000 (paths /v1/... are appended)
    models: tuple[str, ...]
    capacity: int
    idle_power_kw: float
    peak_power_kw: float
    api_key_env: str | None = None  # env var holding the upstream's bearer token

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None


@dataclass(frozen=True)
class RegionConfig:
    name: str
    lat_deg: float
    lon_deg: float
    upstreams: tuple[UpstreamConfig, ...]
    default_request_s: float = DEFAULT_REQUEST_S
    default_prefill_s: float = DEFAULT_PREFILL_S


@dataclass(frozen=True)
class OriginConfig:
    name: str
    lat_deg: float
    lon_deg: float
    header_value: str
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    latency_ms: Mapping[str, float] = field(default_factory=dict)  # overrides per region


@dataclass(frozen=True)
class ProviderConfig:
    type: str
    name: str
    stale_after_s: float
    cache_ttl_s: float
    data_dir: Path | None = None  # replay
    start_utc: pd.Timestamp | None = None  # replay: data time at gateway start
    speedup: float = 1.0  # replay: data seconds per wall second
    values: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # static, per region
    default: Mapping[str, float] = field(default_factory=dict)  # static, any region
    # electricitymaps / watttime: url, zones, timeout_s, api_key_env, username_env, ...
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UpstreamPolicyConfig:
    connect_timeout_s: float = 2.0
    read_timeout_s: float = 60.0  # between bytes from the upstream
    max_attempts: int = 3  # tries per request before the first byte, across upstreams/regions
    backoff_s: float = 0.02  # wait before retry k: backoff_s * 2**(k-1)
    failures_to_eject: int = 3  # consecutive failures that eject an upstream
    cooldown_s: float = 10.0  # ejected at least this long; a health check re-admits it
    # at most this % of all upstreams ejected at once (Envoy's max_ejection_percent; at least
    # one may always be ejected): when the gateway itself is starved of CPU its health checks
    # and requests time out everywhere, and ejecting every upstream would turn a slow gateway
    # into one answering only 503 (engineering default: a majority stays admitted)
    max_ejection_percent: float = 50.0
    health_interval_s: float = 5.0
    health_path: str = "/v1/models"
    queue_timeout_s: float = 30.0  # wait this long for a free slot when every region is full


@dataclass(frozen=True)
class GatewayConfig:
    source: str
    host: str
    port: int
    epoch_s: float
    ttft_slo_s: float
    geo_policy: str
    geo_options: Mapping[str, Any]
    local_policy: str
    weights: ObjectiveWeights
    facility: str
    regions: tuple[RegionConfig, ...]
    origins: tuple[OriginConfig, ...]
    default_origin: str
    constraints: ConstraintSet
    providers: tuple[ProviderConfig, ...]
    upstream: UpstreamPolicyConfig
    keys: tuple[ClientKey, ...]
    auth_required: bool
    max_body_bytes: int
    decision_log: Path | None
    horizon_epochs: int = 0
    seed: int = 0
    default_deadline_s: float = 3600.0  # deferrable requests without a deadline header
    max_deadline_s: float = 86400.0  # longest deadline a client may ask for
    shared: SharedConfig | None = None  # state shared by replicas (Redis); None: in process
    # LiteLLM's ``fallbacks``: models tried in order when a model has no upstream left
    model_fallbacks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def region_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.regions)

    @property
    def origin_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.origins)

    @property
    def models(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for r in self.regions:
            for u in r.upstreams:
                seen.update(dict.fromkeys(u.models))
        return tuple(seen)

    def latency_s(self) -> np.ndarray:
        """``[O, R]`` one-way latency: great-circle model (physics.network) or the overrides."""
        from greenroute.physics.network import latency_matrix_s

        o_ll = np.array([[o.lat_deg, o.lon_deg] for o in self.origins], dtype=float)
        r_ll = np.array([[r.lat_deg, r.lon_deg] for r in self.regions], dtype=float)
        lat = latency_matrix_s(o_ll, r_ll)
        for i, o in enumerate(self.origins):
            for j, r in enumerate(self.regions):
                if r.name in o.latency_ms:
                    lat[i, j] = o.latency_ms[r.name] / 1000.0
        return lat


TOP_KEYS = ("listen", "epoch_s", "horizon_epochs", "ttft_slo_s", "policy", "weights",
            "facility", "regions", "origins", "default_origin", "constraints", "signals",
            "upstream", "auth", "limits", "decision_log", "seed", "deferrable",
            "shared", "model_fallbacks")  # fmt: skip


def load_config(path: str | Path, data_dir: Path | None = None) -> GatewayConfig:
    """Read and validate ``path`` (YAML); raise :class:`GatewayConfigError` listing every
    problem. ``data_dir`` is the default directory of replay providers."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read gateway config {p}: {err.strerror or err}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise GatewayConfigError(str(p), [f"not valid YAML: {err}".replace("\n", " ")]) from None
    return parse_config(raw, source=str(p), base_dir=p.parent, data_dir=data_dir)


def parse_config(raw: Any, source: str = "<config>", base_dir: Path | None = None,
                 data_dir: Path | None = None) -> GatewayConfig:  # fmt: skip
    from greenroute.serve.config_parity import model_fallbacks_section
    from greenroute.serve.config_sections import (
        Checker,
        auth,
        check_feasible,
        constraints_section,
        origins_section,
        policy,
        providers,
        regions_section,
        upstream_policy,
        weights_section,
    )

    ck = Checker()
    top = ck.mapping(raw, "", TOP_KEYS)
    if raw is None or (isinstance(raw, Mapping) and not raw):
        raise GatewayConfigError(source, ["the file is empty (regions and origins are required)"])
    base = base_dir or Path.cwd()
    listen = ck.mapping(top.get("listen"), "listen", ("host", "port"))
    host = ck.string(listen, "host", "listen", "127.0.0.1")
    port = ck.number(listen, "port", "listen", 8080, lo=0, hi=65535, integer=True)
    epoch_s = ck.number(top, "epoch_s", "", 60.0, lo=0.0, lo_open=True)
    horizon = ck.number(top, "horizon_epochs", "", 0, lo=0, hi=1000, integer=True)
    slo = ck.number(top, "ttft_slo_s", "", 2.0, lo=0.0, lo_open=True)
    seed = ck.number(top, "seed", "", 0, lo=0, integer=True)
    geo, geo_opts, local = policy(ck, top.get("policy"))
    weights = weights_section(ck, top.get("weights"))
    facility = ck.string(top, "facility", "", "default")
    from greenroute.physics.facility import FACILITY_PRESETS

    if facility not in FACILITY_PRESETS:
        ck.bad("facility", f"unknown facility model {facility!r}; valid: {FACILITY_PRESETS}")
    regions = regions_section(ck, top.get("regions"))
    region_names = tuple(r.name for r in regions)
    origins = origins_section(ck, top.get("origins"), region_names)
    origin_names = tuple(o.name for o in origins)
    default_origin = ck.string(top, "default_origin", "", origin_names[0] if origins else "")
    if origins and default_origin not in origin_names:
        ck.bad("default_origin", f"unknown origin {default_origin!r}; valid: {origin_names}")
    constraints = constraints_section(ck, top.get("constraints"), origin_names, region_names)
    providers = providers(ck, top.get("signals"), region_names, base, data_dir)
    upstream = upstream_policy(ck, top.get("upstream"))
    keys, required = auth(ck, top.get("auth"), origin_names)
    limits = ck.mapping(top.get("limits"), "limits", ("max_body_bytes",))
    max_body = ck.number(limits, "max_body_bytes", "limits", 1 << 20, lo=1, integer=True)
    defer = ck.mapping(
        top.get("deferrable"), "deferrable", ("default_deadline_s", "max_deadline_s")
    )
    max_dl = ck.number(defer, "max_deadline_s", "deferrable", 86400.0, lo=0.0, lo_open=True)
    def_dl = ck.number(defer, "default_deadline_s", "deferrable", 3600.0, lo=0.0, lo_open=True,
                       hi=max_dl)  # fmt: skip
    dlog = ck.mapping(top.get("decision_log"), "decision_log", ("path",))
    dlog_path = ck.string(dlog, "path", "decision_log") if "path" in dlog else None
    shared = shared_section(ck, top.get("shared"))
    served = tuple(dict.fromkeys(m for r in regions for u in r.upstreams for m in u.models))
    fallbacks = model_fallbacks_section(ck, top.get("model_fallbacks"), served)
    cfg = None
    if not ck.problems:
        cfg = GatewayConfig(
            source=source, host=host, port=int(port), epoch_s=epoch_s, ttft_slo_s=slo,
            geo_policy=geo, geo_options=geo_opts, local_policy=local, weights=weights,
            facility=facility, regions=regions, origins=origins, default_origin=default_origin,
            constraints=constraints, providers=providers, upstream=upstream, keys=keys,
            auth_required=required, max_body_bytes=int(max_body),
            decision_log=(base / dlog_path) if dlog_path else None,
            horizon_epochs=int(horizon), seed=int(seed), default_deadline_s=def_dl,
            max_deadline_s=max_dl, shared=shared, model_fallbacks=fallbacks,
        )  # fmt: skip
        check_feasible(ck, cfg)
    if ck.problems:
        raise GatewayConfigError(source, ck.problems)
    assert cfg is not None
    return cfg
