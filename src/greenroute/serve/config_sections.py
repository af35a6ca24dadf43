"""Section parsers of the gateway config (``serve/config.py``): each reads one section,
records one problem per bad key in the :class:`Checker` and returns typed values."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from greenroute.catalog.hardware import GPUS
from greenroute.catalog.regions import REGIONS
from greenroute.constraints import ConstraintSet, Exclusion
from greenroute.core.errors import GreenrouteError
from greenroute.core.types import ObjectiveWeights
from greenroute.serve.config import (
    DEFAULT_CAPACITY,
    DEFAULT_GPU,
    DEFAULT_PREFILL_S,
    DEFAULT_REQUEST_S,
    PROVIDER_TYPES,
    SIGNAL_KEYS,
    W_PER_KW,
    GatewayConfig,
    OriginConfig,
    ProviderConfig,
    RegionConfig,
    UpstreamConfig,
    UpstreamPolicyConfig,
)
from greenroute.serve.config_parity import key_budget, key_priority
from greenroute.serve.grid_apis import LIVE_KEYS, live_options
from greenroute.serve.security import ClientKey, parse_key_hash


class Checker:
    """Reads typed values out of nested mappings, recording one problem per bad key."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def bad(self, path: str, msg: str) -> None:
        self.problems.append(f"{path}: {msg}")

    def mapping(self, d: Any, path: str, known: tuple[str, ...] | None = None) -> dict:
        if d is None:
            return {}
        if not isinstance(d, Mapping):
            self.bad(path, f"expected a mapping, got {type(d).__name__}")
            return {}
        if known is not None:
            for k in d:
                if k not in known:
                    self.bad(f"{path}.{k}" if path else str(k),
                             f"unknown key; valid keys: {', '.join(known)}")  # fmt: skip
        return dict(d)

    def number(self, d: Mapping, key: str, path: str, default: float | None, *,
               lo: float | None = None, lo_open: bool = False, hi: float | None = None,
               integer: bool = False) -> float | None:  # fmt: skip
        v = d.get(key, default)
        where = f"{path}.{key}" if path else key
        if v is None:
            if default is None and key in d:
                self.bad(where, "must be a number")
            elif default is None:
                self.bad(where, "required")
            return None
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            self.bad(where, f"must be a finite number, got {v!r}")
            return default
        if integer and int(v) != v:
            self.bad(where, f"must be an integer, got {v!r}")
            return default
        if lo is not None and (v <= lo if lo_open else v < lo):
            self.bad(where, f"must be {'>' if lo_open else '>='} {lo:g}, got {v!r}")
            return default
        if hi is not None and v > hi:
            self.bad(where, f"must be <= {hi:g}, got {v!r}")
            return default
        return int(v) if integer else float(v)

    def string(self, d: Mapping, key: str, path: str, default: str | None = None) -> str | None:
        v = d.get(key, default)
        where = f"{path}.{key}" if path else key
        if v is None:
            if default is None:
                self.bad(where, "required")
            return default
        if not isinstance(v, str) or not v.strip():
            self.bad(where, f"must be a non-empty string, got {v!r}")
            return default
        return v.strip()

    def str_list(self, v: Any, where: str) -> tuple[str, ...]:
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            self.bad(where, f"must be a list of names, got {v!r}")
            return ()
        return tuple(v)

    def guard(self, where: str, fn: Callable[[], Any], default: Any = None) -> Any:
        try:
            return fn()
        except GreenrouteError as err:
            self.bad(where, str(err))
        except (ValueError, TypeError) as err:
            self.bad(where, str(err))
        return default


def policy(ck: Checker, raw: Any) -> tuple[str, dict, str]:
    from greenroute.policies.registry import GEO_POLICIES, make_local_policy

    d = ck.mapping(raw, "policy", ("geo", "options", "local"))
    geo = ck.string(d, "geo", "policy", "lowest-carbon") or "lowest-carbon"
    opts = ck.mapping(d.get("options"), "policy.options")
    local = ck.string(d, "local", "policy", "least-connections") or "least-connections"
    if geo.startswith("rl:"):
        if opts:
            ck.bad("policy.options", f"policy {geo!r} takes no options")
    else:
        entry = ck.guard("policy.geo", lambda: GEO_POLICIES.get(geo))
        if entry is not None:
            opts = ck.guard("policy.options", lambda: entry.validate(opts), opts)
    ck.guard("policy.local", lambda: make_local_policy(local))
    return geo, dict(opts or {}), local


def weights_section(ck: Checker, raw: Any) -> ObjectiveWeights:
    from greenroute.core.objective import PRESETS

    if raw is None:
        return PRESETS["balanced"]
    if isinstance(raw, str):
        if raw not in PRESETS:
            ck.bad("weights", f"unknown preset {raw!r}; valid: {', '.join(PRESETS)}")
            return PRESETS["balanced"]
        return PRESETS[raw]
    keys = ("carbon", "water", "cost", "latency", "slo_penalty")
    d = ck.mapping(raw, "weights", keys)
    base = ObjectiveWeights()
    vals = {k: ck.number(d, k, "weights", getattr(base, k), lo=0.0) for k in keys}
    return ObjectiveWeights(**{k: float(v) for k, v in vals.items() if v is not None})


def _coords(ck: Checker, d: Mapping, path: str, name: str) -> tuple[float, float]:
    """lat/lon from the keys, or a catalog region's (``region:`` key or the name itself)."""
    ref = d.get("region", name)
    if "lat_deg" in d or "lon_deg" in d:
        lat = ck.number(d, "lat_deg", path, None, lo=-90, hi=90)
        lon = ck.number(d, "lon_deg", path, None, lo=-180, hi=180)
        return (lat or 0.0, lon or 0.0)
    if isinstance(ref, str) and ref in REGIONS:
        return (REGIONS[ref].lat_deg, REGIONS[ref].lon_deg)
    ck.bad(path, f"give lat_deg and lon_deg, or region: a catalog region ({', '.join(REGIONS)})")
    return (0.0, 0.0)


UPSTREAM_KEYS = ("name", "url", "models", "capacity", "gpu", "gpus", "idle_power_kw",
                 "peak_power_kw", "api_key_env")  # fmt: skip


def regions_section(ck: Checker, raw: Any) -> tuple[RegionConfig, ...]:
    d = ck.mapping(raw, "regions")
    if not d:
        ck.bad("regions", "required: at least one region with upstreams")
        return ()
    out, seen_up = [], set()
    for name, body in d.items():
        path = f"regions.{name}"
        rd = ck.mapping(body, path, ("lat_deg", "lon_deg", "region", "upstreams",
                                     "default_request_s", "default_prefill_s"))  # fmt: skip
        lat, lon = _coords(ck, rd, path, str(name))
        ups_raw = rd.get("upstreams")
        if not isinstance(ups_raw, list) or not ups_raw:
            ck.bad(f"{path}.upstreams", "required: a non-empty list of upstream servers")
            ups_raw = []
        ups = []
        for i, u in enumerate(ups_raw):
            up = _upstream(ck, u, f"{path}.upstreams[{i}]", str(name), i)
            if up is None:
                continue
            if up.name in seen_up:
                ck.bad(f"{path}.upstreams[{i}].name", f"duplicate upstream name {up.name!r}")
            seen_up.add(up.name)
            ups.append(up)
        req_s = ck.number(rd, "default_request_s", path, DEFAULT_REQUEST_S, lo=0, lo_open=True)
        pre_s = ck.number(rd, "default_prefill_s", path, DEFAULT_PREFILL_S, lo=0, lo_open=True)
        out.append(RegionConfig(str(name), lat, lon, tuple(ups), req_s or DEFAULT_REQUEST_S,
                                pre_s or DEFAULT_PREFILL_S))  # fmt: skip
    return tuple(out)


def _upstream(ck: Checker, raw: Any, path: str, region: str, i: int) -> UpstreamConfig | None:
    d = ck.mapping(raw, path, UPSTREAM_KEYS)
    if not d:
        if raw is not None and not isinstance(raw, Mapping):
            return None
        ck.bad(path, "empty upstream (url and models are required)")
        return None
    url = ck.string(d, "url", path)
    if url and not (url.startswith("http://") or url.startswith("https://")):
        ck.bad(f"{path}.url", f"must start with http:// or https://, got {url!r}")
    models = ck.str_list(d.get("models"), f"{path}.models") if "models" in d else ()
    if "models" not in d:
        ck.bad(f"{path}.models", "required: the model names this server serves")
    cap = ck.number(d, "capacity", path, DEFAULT_CAPACITY, lo=1, integer=True)
    gpu_key = ck.string(d, "gpu", path, DEFAULT_GPU)
    gpus = ck.number(d, "gpus", path, 1, lo=1, integer=True)
    gpu = GPUS.get(gpu_key or "")
    if gpu is None:
        ck.bad(f"{path}.gpu", f"unknown GPU {gpu_key!r}; valid: {', '.join(GPUS)}")
        gpu = GPUS[DEFAULT_GPU]
    # power model of physics/power.py: idle = GPU idle draw (SplitwiseSim constant.yaml), peak =
    # the GPU's share of its DGX server's TDP (SplitwiseSim hardware_repo), per catalog/hardware
    idle_def = (gpus or 1) * gpu.idle_w / W_PER_KW
    peak_def = (gpus or 1) * gpu.server_tdp_w / gpu.gpus_per_server / W_PER_KW
    idle = ck.number(d, "idle_power_kw", path, idle_def, lo=0.0)
    peak = ck.number(d, "peak_power_kw", path, peak_def, lo=0.0)
    if idle is not None and peak is not None and peak < idle:
        ck.bad(f"{path}.peak_power_kw", f"must be >= idle_power_kw ({idle:g}), got {peak:g}")
    env = d.get("api_key_env")
    if env is not None and not (isinstance(env, str) and env):
        ck.bad(f"{path}.api_key_env", "must be the name of an environment variable")
    name = ck.string(d, "name", path, f"{region}-{i}")
    if not url:
        return None
    return UpstreamConfig(name or f"{region}-{i}", region, url.rstrip("/"), models,
                          int(cap or DEFAULT_CAPACITY), float(idle or 0.0),
                          float(peak if peak is not None else idle_def), env)  # fmt: skip


def origins_section(ck: Checker, raw: Any, regions: tuple[str, ...]) -> tuple[OriginConfig, ...]:
    d = ck.mapping(raw, "origins")
    if not d:
        ck.bad("origins", "required: at least one origin (where clients are)")
        return ()
    out = []
    for name, body in d.items():
        path = f"origins.{name}"
        od = ck.mapping(body, path, ("lat_deg", "lon_deg", "region", "networks", "header",
                                     "latency_ms"))  # fmt: skip
        lat, lon = _coords(ck, od, path, str(name))
        nets = []
        for j, n in enumerate(od.get("networks") or []):
            net = ck.guard(f"{path}.networks[{j}]", lambda n=n: ipaddress.ip_network(str(n)))
            if net is not None:
                nets.append(net)
        lat_ms = ck.mapping(od.get("latency_ms"), f"{path}.latency_ms", regions)
        lat_clean = {}
        for r in lat_ms:
            v = ck.number(lat_ms, r, f"{path}.latency_ms", None, lo=0.0)
            if v is not None:
                lat_clean[r] = v
        header = ck.string(od, "header", path, str(name))
        out.append(OriginConfig(str(name), lat, lon, header or str(name), tuple(nets), lat_clean))
    return tuple(out)


def _when(ck: Checker, v: Any, where: str) -> float | None:
    """An ISO-8601 UTC time (naive = UTC) as unix seconds; None stays open-ended."""
    if v is None:
        return None
    try:
        ts = pd.Timestamp(v)
    except (ValueError, TypeError):
        ck.bad(where, f"expected an ISO-8601 time like 2026-01-31T18:00Z, got {v!r}")
        return None
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return ts.timestamp()


def constraints_section(ck: Checker, raw: Any, origins: tuple[str, ...],
                 regions: tuple[str, ...]) -> ConstraintSet:  # fmt: skip
    d = ck.mapping(raw, "constraints", ("residency", "exclusions", "power_caps_kw",
                                        "max_one_way_latency_ms"))  # fmt: skip
    cs = ConstraintSet()
    res = ck.mapping(d.get("residency"), "constraints.residency")
    for origin, allowed in res.items():
        where = f"constraints.residency.{origin}"
        if origin not in origins:
            ck.bad(where, f"unknown origin; valid: {', '.join(origins)}")
            continue
        names = ck.str_list(allowed, where)
        for r in names:
            if r not in regions:
                ck.bad(where, f"unknown region {r!r}; valid: {', '.join(regions)}")
        cs = cs.with_residency(origin, names)
    ex_raw = d.get("exclusions") or []
    if not isinstance(ex_raw, list):
        ck.bad("constraints.exclusions", "must be a list of {region, start, end, reason}")
        ex_raw = []
    for i, e in enumerate(ex_raw):
        where = f"constraints.exclusions[{i}]"
        ed = ck.mapping(e, where, ("region", "start", "end", "reason"))
        reg = ck.string(ed, "region", where)
        if reg is not None and reg not in regions:
            ck.bad(f"{where}.region", f"unknown region {reg!r}; valid: {', '.join(regions)}")
        t0 = _when(ck, ed.get("start"), f"{where}.start")
        t1 = _when(ck, ed.get("end"), f"{where}.end")
        if t0 is not None and t1 is not None and t1 <= t0:
            ck.bad(f"{where}.end", "must be after start")
        if reg:
            cs = cs.with_exclusion(Exclusion(reg, -math.inf if t0 is None else t0,
                                             math.inf if t1 is None else t1,
                                             str(ed.get("reason", ""))))  # fmt: skip
    caps = ck.mapping(d.get("power_caps_kw"), "constraints.power_caps_kw", regions)
    for r in caps:
        v = ck.number(caps, r, "constraints.power_caps_kw", None, lo=0.0)
        if v is not None and r in regions:
            cs = cs.with_power_cap(r, v)
    lat_ms = ck.number(d, "max_one_way_latency_ms", "constraints", None, lo=0.0, lo_open=True) \
        if "max_one_way_latency_ms" in d else None  # fmt: skip
    if lat_ms is not None:
        cs = ConstraintSet(cs.exclusions, cs.residency, cs.power_caps_kw, lat_ms / 1000.0)
    return cs


def providers(ck: Checker, raw: Any, regions: tuple[str, ...], base: Path,
               data_dir: Path | None) -> tuple[ProviderConfig, ...]:  # fmt: skip
    d = ck.mapping(raw, "signals", ("stale_after_s", "cache_ttl_s", "providers"))
    stale = ck.number(d, "stale_after_s", "signals", 7200.0, lo=0.0, lo_open=True)
    ttl = ck.number(d, "cache_ttl_s", "signals", 30.0, lo=0.0)
    plist = d.get("providers")
    if plist is None:
        plist = [{"type": "static"}]  # the built-in averages (see serve/signals.py)
    if not isinstance(plist, list) or not plist:
        ck.bad("signals.providers", "must be a non-empty list (the fallback order)")
        return ()
    out = []
    for i, p in enumerate(plist):
        where = f"signals.providers[{i}]"
        known = ("type", "name", "stale_after_s", "cache_ttl_s", "data_dir", "start", "speedup",
                 "values", "default", *LIVE_KEYS)  # fmt: skip
        pd_ = ck.mapping(p, where, known)
        kind = ck.string(pd_, "type", where)
        if kind is not None and kind not in PROVIDER_TYPES:
            valid = ", ".join(PROVIDER_TYPES)
            ck.bad(f"{where}.type", f"unknown provider {kind!r}; valid: {valid}")
            continue
        name = ck.string(pd_, "name", where, f"{kind}{i}")
        p_stale = ck.number(pd_, "stale_after_s", where, stale, lo=0.0, lo_open=True)
        p_ttl = ck.number(pd_, "cache_ttl_s", where, ttl, lo=0.0)
        common = dict(type=kind or "static", name=name or f"p{i}",
                      stale_after_s=p_stale or 7200.0, cache_ttl_s=p_ttl or 0.0)  # fmt: skip
        if kind == "replay":
            dd = pd_.get("data_dir")
            root = data_dir if dd is None else (base / str(dd))
            if root is None:
                ck.bad(f"{where}.data_dir", "required (or pass --data-dir)")
            elif not (Path(root) / "grid" / "regions.csv").is_file():
                ck.bad(f"{where}.data_dir", f"{root} has no grid/regions.csv")
            start = _when(ck, pd_.get("start"), f"{where}.start")
            if start is None and "start" not in pd_:
                ck.bad(f"{where}.start", "required: the data time replayed at gateway start")
            speed = ck.number(pd_, "speedup", where, 1.0, lo=0.0, lo_open=True)
            out.append(ProviderConfig(**common, data_dir=Path(root) if root else None,
                                      start_utc=None if start is None
                                      else pd.Timestamp(start, unit="s", tz="UTC"),
                                      speedup=speed or 1.0))  # fmt: skip
        else:
            vals = {}
            for r, vd in ck.mapping(pd_.get("values"), f"{where}.values", regions).items():
                vals[r] = _signal_values(ck, vd, f"{where}.values.{r}")
            default = _signal_values(ck, pd_.get("default"), f"{where}.default")
            opts = live_options(ck, pd_, where, kind, regions)
            out.append(ProviderConfig(**common, values=vals, default=default, options=opts))
    return tuple(out)


def _signal_values(ck: Checker, raw: Any, where: str) -> dict[str, float]:
    d = ck.mapping(raw, where, SIGNAL_KEYS)
    out = {}
    for k in d:
        v = ck.number(d, k, where, None, lo=0.0 if k != "temp_c" else -90.0)
        if v is not None:
            out[k] = v
    return out


def upstream_policy(ck: Checker, raw: Any) -> UpstreamPolicyConfig:
    base = UpstreamPolicyConfig()
    keys = tuple(base.__dataclass_fields__)
    d = ck.mapping(raw, "upstream", keys)
    vals: dict[str, Any] = {}
    for k in keys:
        default = getattr(base, k)
        if k == "health_path":
            v = ck.string(d, k, "upstream", default)
            if v and not v.startswith("/"):
                ck.bad("upstream.health_path", "must start with /")
            vals[k] = v or default
        elif k == "max_ejection_percent":
            vals[k] = ck.number(d, k, "upstream", default, lo=0.0, hi=100.0)
        elif isinstance(default, int):
            vals[k] = ck.number(d, k, "upstream", default, lo=1, integer=True)
        else:
            vals[k] = ck.number(
                d,
                k,
                "upstream",
                default,
                lo=0.0,
                lo_open=k.endswith("timeout_s") or k == "health_interval_s",
            )
    return UpstreamPolicyConfig(**{k: v for k, v in vals.items() if v is not None})


def auth(ck: Checker, raw: Any, origins: tuple[str, ...]) -> tuple[tuple[ClientKey, ...], bool]:
    d = ck.mapping(raw, "auth", ("keys", "required"))
    klist = d.get("keys") or []
    if not isinstance(klist, list):
        ck.bad(
            "auth.keys", "must be a list of {name, hash, origin, rate_rps, burst, priority, budget}"
        )
        klist = []
    keys, names = [], set()
    for i, k in enumerate(klist):
        where = f"auth.keys[{i}]"
        kd = ck.mapping(k, where, ("name", "hash", "origin", "rate_rps", "burst", "priority",
                                   "budget"))  # fmt: skip
        name = ck.string(kd, "name", where)
        h = ck.string(kd, "hash", where)
        if h is not None:
            ck.guard(f"{where}.hash", lambda h=h: parse_key_hash(h))
        origin = kd.get("origin")
        if origin is not None and origin not in origins:
            ck.bad(f"{where}.origin", f"unknown origin {origin!r}; valid: {', '.join(origins)}")
        rate = ck.number(kd, "rate_rps", where, None, lo=0.0, lo_open=True) \
            if "rate_rps" in kd else None  # fmt: skip
        burst = ck.number(kd, "burst", where, None, lo=1.0) if "burst" in kd else None
        if name in names:
            ck.bad(f"{where}.name", f"duplicate key name {name!r}")
        names.add(name)
        if name and h:
            keys.append(ClientKey(name, h, origin, rate, burst, key_priority(ck, kd, where),
                                  key_budget(ck, kd.get("budget"), where)))  # fmt: skip
    req = d.get("required", bool(klist))
    if not isinstance(req, bool):
        ck.bad("auth.required", f"must be true or false, got {req!r}")
        req = True
    if req and not klist:
        ck.bad("auth.required", "is true but auth.keys is empty (no client could get in)")
    return tuple(keys), bool(req)


def check_feasible(ck: Checker, cfg: GatewayConfig) -> None:
    """Rules that leave an origin no region at all times are config errors (a time window
    that does so for a while is allowed: its requests get 403 during the window). A power cap
    below its region's idle power is an error too."""
    always = tuple(e for e in cfg.constraints.exclusions
                   if math.isinf(e.start_s) and math.isinf(e.end_s))  # fmt: skip
    cs = cfg.constraints
    permanent = ConstraintSet(always, cs.residency, cs.power_caps_kw, cs.max_one_way_latency_s)
    idle = [sum(u.idle_power_kw for u in r.upstreams) for r in cfg.regions]
    try:
        permanent.check_feasible(cfg.origin_names, cfg.region_names, 1.0, 1.0, cfg.latency_s(),
                                 idle_power_kw=idle)  # fmt: skip
    except GreenrouteError as err:
        ck.bad("constraints", str(err))
