"""The simulation engine: epochs, observations, plan validation, dispatch, ledgers.

One loop drives both fidelities. At each epoch the geo policy sees an :class:`Observation`
and returns a :class:`Plan`; the plan is validated against the hard constraints; then either
every request is placed on a server by the compiled kernel (``request`` fidelity) or the
epoch's demand is served by the fluid model (``fluid`` fidelity, see ``sim/fluid.py``).
Request fidelity has two server models (``Scenario.server_model``): ``iteration``
(iteration-level continuous batching, ``sim/iteration_mode.py``; the default for LLM servers)
and ``slots`` (one placement per request, ``sim/request_mode.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError, PlanViolationError
from greenroute.core.types import (
    GeoPolicy,
    LocalPolicy,
    ObjectiveWeights,
    Observation,
    Plan,
)
from greenroute.data.requests import CLASS_DEFERRABLE, Requests
from greenroute.sim import kernel as K
from greenroute.sim.forecast import Forecaster
from greenroute.sim.prepare import Prepared, _seed_int, cluster_info

ON_INVALID = ("raise", "fallback")


@dataclass
class SimConfig:
    seed: int = 0
    forecast: str = "perfect"
    forecast_error: float = 0.0
    weights: ObjectiveWeights = field(default_factory=ObjectiveWeights)
    on_invalid: str = "raise"  # "fallback": replace an invalid plan by the safe default, log it
    record_requests: bool = False
    objective_scales: dict | None = None  # normalisation of the objective (see objective.py)


def _local_instance(local: LocalPolicy | Callable[[], LocalPolicy]) -> LocalPolicy:
    """A region's local policy: the object itself (shared by every region) or a fresh one from
    a zero-argument factory. Names are resolved above the engine
    (``greenroute.policies.registry.local_policy_factory``)."""
    if isinstance(local, str):
        raise TypeError(
            f"Simulation takes a LocalPolicy or a factory, not the name {local!r}; use "
            "greenroute.policies.registry.local_policy_factory(name)"
        )
    if hasattr(local, "pick") and not isinstance(local, type):
        return local  # type: ignore[return-value]
    return local()


class Simulation:
    """Run one geo policy (and a local policy) over a prepared scenario."""

    def __init__(
        self,
        prep: Prepared,
        geo: GeoPolicy,
        local: LocalPolicy | Callable[[], LocalPolicy],
        config: SimConfig | None = None,
        progress: Callable[[int, int], None] | None = None,
        partition_executor=None,
    ) -> None:
        """``partition_executor`` (request fidelity, iteration servers): run the regions'
        servers in blocks on workers within each epoch (``sim/partition.py``; same metrics)."""
        self.prep = prep
        self.partition_executor = partition_executor
        self.sc = prep.scenario
        self.geo = geo
        self.config = config or SimConfig(seed=prep.seed)
        if self.config.on_invalid not in ON_INVALID:
            raise ConfigError(f"on_invalid must be one of {ON_INVALID}")
        self.local = [_local_instance(local) for _ in self.sc.regions]
        for r, lp in enumerate(self.local):
            lp.reset(self.sc.regions[r])
        self.progress = progress
        sc = self.sc
        # look-ahead: the scenario's, or longer if the policy asks ("all" = to the run's end);
        # a clairvoyant policy (the oracle) always gets perfect forecasts
        self.h_request = getattr(geo, "horizon_epochs", None)
        forecast_kind = "perfect" if getattr(geo, "clairvoyant", False) else self.config.forecast
        self.forecaster = Forecaster(
            forecast_kind,
            self.config.forecast_error,
            _seed_int(self.config.seed, 4) % (2**31),
            epochs_per_day=max(1, round(86400 / sc.epoch_s)),
        )
        self.info = cluster_info(prep)
        self.hard_caps_kw = np.array(
            [sc.constraints.power_caps_kw.get(r, np.inf) for r in sc.regions], dtype=float
        )
        # static per-region quantities used by every observation
        b = prep.built
        _, frac = self.effective_slots(None)
        self._cap_slots = b.region_slots() * frac
        ty = b.server_hw * b.n_models + b.server_model0
        kv = b.kv_cap_bytes[ty]
        self._kv_cap = np.bincount(
            b.server_region, weights=np.where(np.isfinite(kv), kv, 0.0), minlength=b.n_regions
        )
        self._idle_kw = b.region_idle_kw()
        self._peak_kw = b.region_peak_kw()
        # observation caches: the allowed mask when no rule depends on time, the resident
        # model names, the total water factor
        self._allowed_static: np.ndarray | None = None
        self._times: list | None = None  # Timestamp of every epoch (see _epoch_time)
        self._kv_cap_safe = np.where(self._kv_cap > 0, self._kv_cap, 1.0)
        self._resident_src = None
        self._resident_names: tuple = ()
        f = prep.factors
        self._water_l_per_it_kwh = f.water_onsite_l_per_it_kwh + f.water_offsite_l_per_it_kwh
        self.plan_log: list[dict] = []
        self.invalid_plans: list[str] = []
        self.wall_s = 0.0
        self.plan_s = 0.0

    # ------------------------------------------------------------------ helpers
    def effective_slots(self, plan_cap_kw: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Per-server usable slots and per-region slot fraction under the power caps.

        Every server stays on (idle power always drawn) and each busy slot adds (peak - idle) /
        slots (``physics/power.py``), so ``floor(slots * (cap - idle) / (peak - idle))`` usable
        slots per server keep a region's IT power <= its cap (caps below idle are refused:
        ``ConstraintSet.check_power_caps``). A plan's cap binds admissions from its epoch on;
        in request fidelity work already running finishes (no preemption)."""
        b = self.prep.built
        cap = self.hard_caps_kw.copy()
        if plan_cap_kw is not None:
            pc = np.asarray(plan_cap_kw, dtype=float)
            cap = np.where(np.isnan(pc), cap, np.minimum(cap, pc))
        idle = b.region_idle_kw()
        dyn = b.region_peak_kw() - idle
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(dyn > 0, (cap - idle) / dyn, np.where(cap >= idle, 1.0, 0.0))
        frac = np.clip(np.nan_to_num(frac, nan=1.0, posinf=1.0), 0.0, 1.0)
        eff = np.floor(b.server_slots * frac[b.server_region] + 1e-9).astype(np.int64)
        return eff, frac

    def obs_horizon(self, e: int) -> int:
        sc = self.sc
        avail = self.prep.signals.n_steps - e - 1
        self.h_request = getattr(self.geo, "horizon_epochs", None)  # a policy may change it
        if self.h_request == "all":
            return max(0, min(sc.n_epochs - 1 - e, avail))
        want = sc.horizon if self.h_request is None else max(sc.horizon, int(self.h_request))
        return max(0, min(want, avail))

    def observation(self, e: int, state: dict[str, np.ndarray], resident, pending) -> Observation:
        sc, prep, fc = self.sc, self.prep, self.forecaster
        h = self.obs_horizon(e)
        sig, f = prep.signals, prep.factors
        t0 = e * sc.epoch_s
        allowed = self._allowed_static
        if allowed is None:
            allowed = sc.constraints.allowed_mask(
                sc.origins, sc.regions, t0, t0 + sc.epoch_s, prep.latency_s
            )
            if not sc.constraints.exclusions:  # no time windows: the same mask every epoch
                self._allowed_static = allowed
        allowed = allowed.copy()
        if resident is not self._resident_src:  # names of the resident models, per region
            self._resident_src = resident
            self._resident_names = tuple(frozenset(sc.models[m] for m in ms) for ms in resident)
        cap_slots = self._cap_slots
        kv_cap = self._kv_cap
        kv_free = np.where(kv_cap > 0, 1.0 - state["kv_used"] / self._kv_cap_safe, 1.0)
        cs = prep.class_stats
        return Observation(
            epoch=e,
            time_s=t0,
            time_utc=self._epoch_time(e, t0),
            epoch_s=sc.epoch_s,
            regions=sc.regions,
            origins=sc.origins,
            carbon_intensity_g_per_kwh=fc.signal(sig.carbon_intensity_g_per_kwh, e, h),
            price_usd_per_kwh=fc.signal(sig.price_usd_per_kwh, e, h),
            temp_c=fc.signal(sig.temp_c, e, h),
            wetbulb_c=fc.signal(sig.wetbulb_c, e, h),
            water_intensity_l_per_kwh=fc.signal(sig.water_intensity_l_per_kwh, e, h),
            energy_kwh_per_it_kwh=fc.signal(f.energy_kwh_per_it_kwh, e, h),
            carbon_g_per_it_kwh=fc.signal(f.carbon_g_per_it_kwh, e, h),
            water_l_per_it_kwh=fc.signal(self._water_l_per_it_kwh, e, h),
            cost_usd_per_it_kwh=fc.signal(f.cost_usd_per_it_kwh, e, h),
            it_kwh_per_request=cs["it_kwh"],
            slot_s_per_request=cs["slot_s"],
            prefill_s_per_request=cs["prefill_s"],
            capacity_slots=cap_slots,
            busy_slots=state["busy"],
            queue_len=state["queue"],
            backlog_slot_s=state["backlog"],
            kv_free_frac=np.clip(kv_free, 0.0, 1.0),
            resident_models=self._resident_names,
            idle_power_kw=self._idle_kw,
            peak_power_kw=self._peak_kw,
            demand_rps=fc.demand(prep.observed_rps, prep.expected_rps, e, h),
            pending_deferrable=pending[0],
            pending_deadline_s=pending[1],
            pending_due=pending[2](t0, h) if len(pending) > 2 else None,
            latency_s=prep.latency_s,
            allowed=allowed,
            ttft_slo_s=sc.ttft_slo_s,
            weights=self.config.weights,
            constraints=sc.constraints,
            objective_scales=_scales_or_empty(self.config.objective_scales),
            util_grid=prep.util_grid,
            wait_curve_s=prep.wait_curve_s,
            slo_miss_curve=prep.slo_miss_curve,
            forecast_error=self.config.forecast_error,
        )

    def _epoch_time(self, e: int, t0: float) -> pd.Timestamp:
        """``start_utc + t0`` (a Timestamp costs ~10 us to build: whole-second epochs are
        built once, as one index, when the result is the same Timestamp)."""
        times = self._times
        if times is None:
            times = []
            sc = self.sc
            if float(sc.epoch_s).is_integer() and self.prep.signals.n_steps > 1:
                steps = np.arange(self.prep.signals.n_steps) * sc.epoch_s
                idx = sc.start_utc + pd.to_timedelta(steps, unit="s")
                if idx[1] == sc.start_utc + pd.Timedelta(seconds=steps[1]) and (
                    idx[1].unit == (sc.start_utc + pd.Timedelta(seconds=steps[1])).unit
                ):
                    times = list(idx)
            self._times = times
        if e < len(times):
            return times[e]
        return self.sc.start_utc + pd.Timedelta(seconds=t0)

    def get_plan(self, obs: Observation) -> Plan:
        t = time.perf_counter()
        plan = self.geo.plan(obs)
        self.plan_s += time.perf_counter() - t
        return self.validated(obs, plan)

    # ------------------------------------------------------------------ run / step
    def run(self):
        """Run every epoch with the geo policy and return the :class:`RunResult`."""
        self.begin()
        while not self.done:
            obs = self.observe()
            plan = self.get_plan(obs)
            self.advance(plan, obs)
        return self.finish()

    def begin(self, reset_policy: bool = True) -> None:
        """Start a run that the caller steps epoch by epoch (Gymnasium envs, the gateway)."""
        self._t_start = time.perf_counter()
        if reset_policy:
            self.geo.reset(self.info, self.config.seed)
        bind = getattr(self.geo, "bind_simulator", None)
        if callable(bind):  # a policy that simulates candidates on forks (MARLIN, seed 001)
            bind(self)
        self.epoch = 0
        if self.partition_executor is not None and self.sc.fidelity != "request":
            raise ConfigError("a partitioned run needs request fidelity")
        if self.sc.fidelity == "request":
            self._stepper = _RequestStepper(self)
        else:
            self._stepper = _FluidStepper(self)

    @property
    def done(self) -> bool:
        return self.epoch >= self.sc.n_epochs

    def observe(self) -> Observation:
        return self._stepper.observe(self.epoch)

    def validated(self, obs: Observation, plan: Plan) -> Plan:
        """Check a plan against the hard constraints (raise or fall back, per config)."""
        sc = self.sc
        try:
            sc.constraints.validate(
                plan.route, plan.hold, plan.power_cap_kw, sc.origins, sc.regions, obs.allowed,
                obs.epoch, idle_power_kw=self._idle_kw,
            )  # fmt: skip
        except PlanViolationError as err:
            if self.config.on_invalid == "raise":
                raise PlanViolationError(
                    err.rule,
                    f"policy {getattr(self.geo, 'name', '?')}: " + str(err).split(": ", 1)[1],
                ) from None
            self.invalid_plans.append(str(err))
            plan = safe_plan(obs)
        return plan

    def advance(self, plan: Plan, obs: Observation) -> dict:
        """Apply a (validated) plan to the current epoch; returns the epoch's figures."""
        self._log_plan(self.epoch, plan)
        info = self._stepper.apply(self.epoch, plan, obs)
        self.epoch += 1
        if self.progress is not None:
            self.progress(self.epoch, self.sc.n_epochs)
        return info

    def fork(self):
        """A counterfactual :class:`~greenroute.sim.fork.Fork` at the current epoch: simulate
        candidate plans without changing this run (see ``sim/fork.py``)."""
        from greenroute.sim.fork import Fork

        return Fork(self)

    def finish(self):
        from greenroute.sim.results import finalize_fluid, finalize_request

        self.wall_s = time.perf_counter() - self._t_start
        if self.sc.fidelity == "request":
            return finalize_request(self, self._stepper.finish())
        return finalize_fluid(self, self._stepper.finish())

    def _log_plan(self, e: int, plan: Plan) -> None:
        if plan.rationale or e == 0:
            self.plan_log.append({"epoch": e, "rationale": plan.rationale})


class _RequestStepper:
    """Request fidelity: per-epoch dispatch of individual requests to the compiled kernel."""

    def __init__(self, sim: Simulation) -> None:
        from greenroute.sim.request_mode import RequestBackend

        self.sim = sim
        sc, prep = sim.sc, sim.prep
        reqs = prep.requests
        assert reqs is not None
        n = len(reqs)
        self.reqs = reqs
        codes = np.array([K.kernel_code(lp) for lp in sim.local], dtype=np.int64)
        self.iteration = sc.resolved_server_model == "iteration"
        if self.iteration:  # continuous batching per iteration (sim/iteration_mode.py)
            from greenroute.sim.iteration_mode import IterationBackend

            self.backend = IterationBackend(
                prep.built, reqs, codes, sim.local, sc.n_epochs, sc.chunked_prefill,
                partition_executor=sim.partition_executor,
            )  # fmt: skip
        else:
            if sim.partition_executor is not None:
                raise ConfigError("a partitioned run needs the iteration server model")
            self.backend = RequestBackend(prep.built, reqs, codes, sim.local)
        rng = np.random.default_rng(_seed_int(sim.config.seed, 5))
        self.u_route = rng.random(n)
        self.u_hold = rng.random(n)
        self.u_local = rng.random(n)
        self.bounds = np.searchsorted(reqs.arrival_s, np.arange(sc.n_epochs + 1) * sc.epoch_s)
        self.pool = np.zeros(0, dtype=np.int64)
        self.n_o = len(sc.origins)
        self.held_flag = np.zeros(n, dtype=bool)

    def observe(self, e: int) -> Observation:
        sc = self.sim.sc
        state = self.backend.region_state(e * sc.epoch_s)
        pending = _pending_summary(self.pool, self.reqs, self.n_o, sc.epoch_s)
        return self.sim.observation(e, state, self.backend.resident_models(), pending)

    def apply(self, e: int, plan: Plan, obs: Observation) -> dict:
        sim = self.sim
        sc, prep, reqs, n_o = sim.sc, sim.prep, self.reqs, self.n_o
        t0 = e * sc.epoch_s
        t1 = t0 + sc.epoch_s
        slots_eff, _ = sim.effective_slots(plan.power_cap_kw)
        hold = np.zeros(n_o) if plan.hold is None else np.asarray(plan.hold, dtype=float)
        ids = np.arange(self.bounds[e], self.bounds[e + 1])
        cls = reqs.cls[ids]
        margin = 2 * sc.epoch_s + float(np.max(obs.slot_s_per_request[CLASS_DEFERRABLE]))
        # deferrable arrivals: hold a share (plan.hold) unless the deadline is too close
        defer = ids[cls == CLASS_DEFERRABLE]
        can_hold = reqs.deadline_s[defer] - t1 >= margin
        to_pool = defer[(self.u_hold[defer] < hold[reqs.origin[defer]]) & can_hold]
        self.held_flag[to_pool] = True
        now = np.setdiff1d(ids, to_pool, assume_unique=True)
        # release from the pool: forced by deadline, then (1 - hold) of the rest, EDF
        released = np.zeros(0, dtype=np.int64)
        pool = self.pool
        if pool.size:
            forced = reqs.deadline_s[pool] - t0 < margin
            rel = [pool[forced]]
            rest = pool[~forced]
            for o in range(n_o):
                mine = rest[reqs.origin[rest] == o]
                k = int(np.round((1.0 - hold[o]) * mine.size))
                if k > 0:
                    order = np.argsort(reqs.deadline_s[mine], kind="stable")
                    rel.append(mine[order[:k]])
            released = np.concatenate(rel)
            pool = np.setdiff1d(pool, released, assume_unique=True)
        self.pool = np.concatenate([pool, to_pool])
        # released work is paced evenly over the epoch, earliest deadline first, instead of
        # arriving as one burst at the epoch boundary (deadlines are >= 2 epochs away
        # unless forced, and forced work goes first)
        released = released[np.argsort(reqs.deadline_s[released], kind="stable")]
        pace = t0 + sc.epoch_s * np.arange(released.size) / max(released.size, 1)
        disp_ids = np.concatenate([now, released])
        disp_t = np.concatenate([reqs.arrival_s[now], pace])
        regions = _sample_regions(plan.route, reqs.cls[disp_ids], reqs.origin[disp_ids],
                                  self.u_route[disp_ids])  # fmt: skip
        net = prep.latency_s[reqs.origin[disp_ids], regions]
        self.backend.place(disp_ids, disp_t, regions, net, slots_eff, self.u_local[disp_ids])
        if self.iteration:
            self.backend.end_epoch(e, t1, self.u_local)
        return {"dispatched": float(disp_ids.size), "held": float(self.pool.size)}

    def finish(self):
        self.backend.pool = self.pool
        self.backend.held_flag = self.held_flag
        return self.backend


class _FluidStepper:
    """Fluid fidelity: per-epoch work in slot-seconds (see ``sim/fluid.py``)."""

    def __init__(self, sim: Simulation) -> None:
        from greenroute.sim.fluid import FluidBackend

        self.sim = sim
        self.fluid = FluidBackend(sim)
        self._frac0: np.ndarray | None = None  # slot fractions under the hard caps only

    def observe(self, e: int) -> Observation:
        fl = self.fluid
        return self.sim.observation(e, fl.region_state(e), fl.resident_models(),
                                    fl.pending_summary(e))  # fmt: skip

    def apply(self, e: int, plan: Plan, obs: Observation) -> dict:
        if plan.power_cap_kw is None:  # the same fractions every epoch: computed once
            if self._frac0 is None:
                self._frac0 = self.sim.effective_slots(None)[1]
            frac = self._frac0
        else:
            _slots_eff, frac = self.sim.effective_slots(plan.power_cap_kw)
        return self.fluid.step(e, plan, frac, obs) or {}

    def finish(self):
        return self.fluid


def _scales_or_empty(scales):
    """The config's scales as is: a lazy mapping (sim/reference.py) is not read here, so
    the reference run happens only if the policy looks at them."""
    return {} if scales is None else scales


def _pending_summary(pool: np.ndarray, reqs: Requests, n_o: int, epoch_s: float):
    """(count [O], earliest deadline [O], due(t0, H) -> [H+1, O] cumulative count of held
    requests whose deadline falls before t0 + (h + 1) epoch_s)."""
    count = np.bincount(reqs.origin[pool], minlength=n_o).astype(float)
    earliest = np.full(n_o, np.inf)
    if pool.size:
        np.minimum.at(earliest, reqs.origin[pool], reqs.deadline_s[pool])

    def due(t0: float, h: int) -> np.ndarray:
        out = np.zeros((h + 1, n_o))
        if pool.size:
            step = np.floor((reqs.deadline_s[pool] - t0) / epoch_s).astype(np.int64)
            step = np.clip(step, 0, h + 1)
            keep = step <= h
            np.add.at(out, (step[keep], reqs.origin[pool][keep]), 1.0)
        return np.cumsum(out, axis=0)

    return count, earliest, due


def _sample_regions(route: np.ndarray, cls: np.ndarray, origin: np.ndarray, u: np.ndarray):
    """Region of each request from ``route[c, o, :]`` and a uniform ``u``; a zero share is never
    chosen (searchsorted on the normalised cumulative sum with side='right')."""
    cum = np.cumsum(route, axis=2)
    cum = cum / cum[:, :, -1:]
    rows = cum[cls.astype(np.int64), origin.astype(np.int64)]
    reg = (rows <= u[:, None]).sum(axis=1)
    return np.minimum(reg, route.shape[2] - 1).astype(np.int64)


def safe_plan(obs: Observation) -> Plan:
    """The fallback when a plan is rejected: allowed regions weighted by capacity, no hold."""
    w = obs.allowed * np.maximum(obs.capacity_slots, 1e-9)[None, None, :]
    sums = w.sum(axis=2, keepdims=True)
    route = np.where(sums > 0, w / np.where(sums > 0, sums, 1.0), 0.0)
    return Plan(route=route, hold=np.zeros(obs.n_origins), rationale="fallback: plan rejected")
