"""Each epoch: an :class:`Observation` from live signals and live upstream state, the geo
policy's plan, validated against the hard constraints (the simulator's rules and fallback).

The geo policy is the registry's object, the one the simulator runs, unchanged. What the
gateway measures instead of simulating:

* capacity: usable slots (``capacity`` x the power-cap fraction) of the healthy upstreams;
* busy slots: requests in flight; backlog: their expected remaining slot-seconds;
* per-request service: the measured mean duration and time to first byte per region (config
  defaults until measured); IT energy per request = (peak - idle) / slots x duration (the
  power model of ``physics/power.py``);
* demand: the arrivals of the previous epoch per class and origin (persistence forecast).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError, PlanViolationError
from greenroute.core.types import CLASSES, N_CLASSES, ClusterInfo, Observation, Plan
from greenroute.serve.config import GatewayConfig
from greenroute.serve.signals import EpochSignalArrays, SignalHub, epoch_signals
from greenroute.serve.upstreams import UpstreamPool

SECONDS_PER_HOUR = 3600.0
NOMINAL_RUN_EPOCHS = 10**6  # ClusterInfo.n_epochs of an open-ended live run


@dataclass(frozen=True)
class PlanState:
    """The plan in force and what it was made from."""

    epoch: int
    wall_s: float
    plan: Plan
    obs: Observation
    signals: EpochSignalArrays
    rejected: str = ""  # why the policy's own plan was replaced by the safe plan
    plan_ms: float = 0.0


class Planner:
    def __init__(self, cfg: GatewayConfig, pool: UpstreamPool, hub: SignalHub,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        from greenroute.physics.facility import get_facility_model
        from greenroute.policies.registry import make_geo_policy

        self.cfg, self.pool, self.hub, self.clock = cfg, pool, hub, clock
        self.regions, self.origins = cfg.region_names, cfg.origin_names
        self.models = cfg.models
        self.latency_s = cfg.latency_s()
        self.facility = get_facility_model(cfg.facility)
        n_r = len(self.regions)
        self.idle_kw = np.array([sum(u.idle_power_kw for u in r.upstreams) for r in cfg.regions])
        self.peak_kw = np.array([sum(u.peak_power_kw for u in r.upstreams) for r in cfg.regions])
        self.slots_total = np.array([sum(u.capacity for u in r.upstreams) for r in cfg.regions],
                                    dtype=float)  # fmt: skip
        hard = np.array([cfg.constraints.power_caps_kw.get(r, np.inf) for r in self.regions])
        self.power_frac = power_fraction(hard, self.idle_kw, self.peak_kw)
        pool.set_power_fractions(self.power_frac)
        self.dyn_kw_per_slot = (self.peak_kw - self.idle_kw) / np.maximum(self.slots_total, 1.0)
        self.default_req_s = np.array([r.default_request_s for r in cfg.regions])
        self.default_pre_s = np.array([r.default_prefill_s for r in cfg.regions])
        self.arrivals = np.zeros((N_CLASSES, len(self.origins)))
        self.demand_rps = np.zeros((N_CLASSES, len(self.origins)))
        self._last_wall: float | None = None
        # held deferrable requests: (t0, horizon, epoch_s) -> (count, earliest, due)
        self.pending_source: Callable | None = None
        self.geo = make_geo_policy(cfg.geo_policy, **dict(cfg.geo_options))
        if getattr(self.geo, "needs_simulator", False) or hasattr(self.geo, "bind_simulator"):
            raise ConfigError(  # it simulates candidate plans (MARLIN)
                f"{cfg.source}: policy.geo: {cfg.geo_policy!r} plans by simulating candidate "
                "plans, which needs the simulator; it cannot plan live traffic (choose another "
                "geo policy, or compare it offline with greenroute replay)"
            )
        self.info = ClusterInfo(
            regions=self.regions, origins=self.origins, models=self.models, epoch_s=cfg.epoch_s,
            n_epochs=NOMINAL_RUN_EPOCHS, capacity_slots=self.slots_total * self.power_frac,
            n_servers=np.array([len(r.upstreams) for r in cfg.regions]),
            idle_power_kw=self.idle_kw, peak_power_kw=self.peak_kw, latency_s=self.latency_s,
            region_latlon=np.array([[r.lat_deg, r.lon_deg] for r in cfg.regions]),
            origin_latlon=np.array([[o.lat_deg, o.lon_deg] for o in cfg.origins]),
            ttft_slo_s=cfg.ttft_slo_s, scenario="gateway",
        )  # fmt: skip
        self.geo.reset(self.info, cfg.seed)
        assert n_r == len(pool.by_region)

    def count_arrival(self, cls: int, origin: int) -> None:
        self.arrivals[cls, origin] += 1.0

    def region_durations(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean measured request duration and time to first byte per region (defaults until
        an upstream of the region has served a request)."""
        dur, pre = self.default_req_s.copy(), self.default_pre_s.copy()
        for r, ups in enumerate(self.pool.by_region):
            d = [u.duration_s for u in ups if not math.isnan(u.duration_s)]
            p = [u.ttfb_s for u in ups if not math.isnan(u.ttfb_s)]
            if d:
                dur[r] = float(np.mean(d))
            if p:
                pre[r] = float(np.mean(p))
        return dur, pre

    def observe(self, wall_s: float) -> tuple[Observation, EpochSignalArrays]:
        cfg, h = self.cfg, self.cfg.horizon_epochs
        epoch = int(wall_s // cfg.epoch_s)
        sig = epoch_signals(self.hub, self.regions, wall_s, h, cfg.epoch_s)
        fac = self.facility.factors(
            temp_c=sig.temp_c, wetbulb_c=sig.wetbulb_c,
            carbon_intensity_g_per_kwh=sig.carbon_intensity_g_per_kwh,
            price_usd_per_kwh=sig.price_usd_per_kwh, ewif_l_per_kwh=sig.water_intensity_l_per_kwh,
        )  # fmt: skip
        # swap first: arrivals counted (on the event loop) while this runs go to the next epoch
        arrivals, self.arrivals = self.arrivals, np.zeros_like(self.arrivals)
        if self._last_wall is not None and wall_s > self._last_wall:
            self.demand_rps = arrivals / (wall_s - self._last_wall)
        self._last_wall = wall_s
        dur, pre = self.region_durations()
        slot_s = np.repeat(dur[None], N_CLASSES, axis=0)
        it_kwh = self.dyn_kw_per_slot[None] * slot_s / SECONDS_PER_HOUR
        mono = self.pool.clock()
        busy = np.zeros(len(self.regions))
        backlog = np.zeros(len(self.regions))
        for up in self.pool.upstreams:
            busy[up.region] += up.in_flight
            backlog[up.region] += up.backlog_s(mono, dur[up.region])
        cap = self.pool.region_slots(healthy_only=True)
        resident = tuple(
            frozenset(m for u in ups if not u.ejected for m in u.models)
            for ups in self.pool.by_region
        )
        allowed = self.cfg.constraints.allowed_mask(
            self.origins, self.regions, wall_s, wall_s + cfg.epoch_s, self.latency_s
        )
        water = fac.water_onsite_l_per_it_kwh + fac.water_offsite_l_per_it_kwh
        n_o = len(self.origins)
        if self.pending_source is not None:
            pend, earliest, due = self.pending_source(wall_s, h, cfg.epoch_s)
        else:
            pend, earliest, due = np.zeros(n_o), np.full(n_o, np.inf), None
        obs = Observation(
            epoch=epoch, time_s=wall_s,
            time_utc=pd.Timestamp(wall_s, unit="s", tz="UTC"), epoch_s=cfg.epoch_s,
            regions=self.regions, origins=self.origins,
            carbon_intensity_g_per_kwh=sig.carbon_intensity_g_per_kwh,
            price_usd_per_kwh=sig.price_usd_per_kwh, temp_c=sig.temp_c, wetbulb_c=sig.wetbulb_c,
            water_intensity_l_per_kwh=sig.water_intensity_l_per_kwh,
            energy_kwh_per_it_kwh=fac.energy_kwh_per_it_kwh,
            carbon_g_per_it_kwh=fac.carbon_g_per_it_kwh, water_l_per_it_kwh=water,
            cost_usd_per_it_kwh=fac.cost_usd_per_it_kwh,
            it_kwh_per_request=it_kwh, slot_s_per_request=slot_s,
            prefill_s_per_request=np.repeat(pre[None], N_CLASSES, axis=0),
            capacity_slots=cap, busy_slots=busy, queue_len=np.zeros(len(self.regions)),
            backlog_slot_s=backlog,
            kv_free_frac=np.clip(1.0 - busy / np.maximum(cap, 1.0), 0.0, 1.0),
            resident_models=resident, idle_power_kw=self.idle_kw, peak_power_kw=self.peak_kw,
            demand_rps=np.repeat(self.demand_rps[None], h + 1, axis=0),
            pending_deferrable=pend, pending_deadline_s=earliest, pending_due=due,
            latency_s=self.latency_s, allowed=allowed, ttft_slo_s=cfg.ttft_slo_s,
            weights=cfg.weights, constraints=cfg.constraints,
        )  # fmt: skip
        obs.objective_scales.update(live_objective_scales(obs))
        return obs, sig

    def replan(self, wall_s: float | None = None) -> PlanState:
        """Observe, plan, validate; an invalid or failing plan is replaced by the simulator's
        safe plan (allowed regions weighted by capacity) and the reason kept."""
        from greenroute.sim.engine import safe_plan

        wall = self.clock() if wall_s is None else wall_s
        obs, sig = self.observe(wall)
        t = time.perf_counter()
        rejected = ""
        try:
            plan = self.geo.plan(obs)
            self.cfg.constraints.validate(
                plan.route, plan.hold, plan.power_cap_kw, self.origins, self.regions,
                obs.allowed, obs.epoch, idle_power_kw=self.idle_kw,
            )  # fmt: skip
        except PlanViolationError as err:
            rejected, plan = str(err), safe_plan(obs)
        except Exception as err:  # a crashing policy must not take the gateway down
            rejected, plan = f"policy raised {type(err).__name__}: {err}", safe_plan(obs)
        plan_ms = (time.perf_counter() - t) * 1e3
        caps = np.array([self.cfg.constraints.power_caps_kw.get(r, np.inf) for r in self.regions])
        if plan.power_cap_kw is not None:  # a plan's cap may only tighten the hard cap
            pc = np.asarray(plan.power_cap_kw, dtype=float)
            caps = np.where(np.isnan(pc), caps, np.minimum(caps, pc))
        self.pool.set_power_fractions(power_fraction(caps, self.idle_kw, self.peak_kw))
        return PlanState(obs.epoch, wall, plan, obs, sig, rejected, plan_ms)

    def hold_margin_s(self, obs: Observation) -> float:
        """The simulator's margin: a held request is released when its deadline is closer
        than two epochs plus the expected deferrable service time."""
        return 2.0 * self.cfg.epoch_s + float(np.max(obs.slot_s_per_request[1]))


MIN_SCALE_REQUESTS = 1.0  # per class and origin: scales stay > 0 before any traffic


def live_objective_scales(obs: Observation) -> dict[str, float]:
    """The objective's reference magnitudes for a live epoch: what ``local-only`` (the
    simulator's reference policy, ``sim/reference.py``) would cost over this epoch at the
    forecast demand (at least ``MIN_SCALE_REQUESTS`` per class and origin), with every
    region's idle IT power charged as the simulator's reference run does. Per epoch instead of
    per run: the objective's terms keep the simulator's relative weights."""
    from greenroute.sim.reference import LocalOnlyReference

    route = LocalOnlyReference().plan(obs).route  # [C, O, R]
    n = np.maximum(obs.demand_rps[0] * obs.epoch_s, MIN_SCALE_REQUESTS)  # [C, O]
    per_region = np.einsum("co,cor->cr", n, route)  # requests per class and region
    it_kwh = (per_region * obs.it_kwh_per_request).sum(axis=0)
    it_kwh = it_kwh + obs.idle_power_kw * obs.epoch_s / SECONDS_PER_HOUR
    ttft = 2.0 * obs.latency_s + obs.prefill_s_per_request[0][None, :]  # [O, R]
    n_int = float(n[0].sum())
    return {
        "carbon_kg": float(it_kwh @ obs.carbon_g_per_it_kwh[0]) / 1e3,
        "water_m3": float(it_kwh @ obs.water_l_per_it_kwh[0]) / 1e3,
        "cost_usd": float(it_kwh @ obs.cost_usd_per_it_kwh[0]),
        "ttft_mean_s": float((n[0][:, None] * route[0] * ttft).sum()) / n_int,
        "interactive_requests": n_int,
        "requests_total": float(n.sum()),
    }


def power_fraction(cap_kw: np.ndarray, idle_kw: np.ndarray, peak_kw: np.ndarray) -> np.ndarray:
    """Share of each region's slots usable under ``cap_kw`` (the simulator's rule,
    ``Simulation.effective_slots``): (cap - idle) / (peak - idle), clipped to [0, 1]."""
    dyn = peak_kw - idle_kw
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(dyn > 0, (cap_kw - idle_kw) / dyn, np.where(cap_kw >= idle_kw, 1.0, 0.0))
    return np.clip(np.nan_to_num(frac, nan=1.0, posinf=1.0), 0.0, 1.0)


def class_index(name: str) -> int:
    return CLASSES.index(name)
