"""Counterfactual forks of a running simulation: "what if this plan had been applied?".

MARLIN simulates every candidate plan of the current epoch before choosing one (seed 001,
Algorithm 1 lines 7 and 13, Algorithm 2 line 19) and the copilot answers "what if" and "why
not region X" by re-simulation. :meth:`Simulation.fork` returns a :class:`Fork` of the run at
its current epoch (after ``begin()``, between ``advance()`` calls); the fork simulates a plan,
a sequence of plans or a policy for one or more epochs and returns each epoch's figures
(:class:`EpochFigures`) without changing the original run.

How: the fork runs the original's own backend in place, after saving exactly the state those
epochs can change, and restores it afterwards (also on error). Each backend owns that choice
behind ``snapshot(e0, e1)`` / ``restore(snap)`` (code in ``sim/fork_state.py``):

* fluid (``sim/fluid.py``): the per-group queue state and running totals (tens of floats),
  the ledger columns ``e0..e1-1`` and the held-work cohorts from the oldest non-empty one on;
* request (``sim/request_mode.py``): a copy of the kernel's ``ServerState`` arrays, and a
  journal of the per-request outcomes each placement overwrites (undone in reverse order);
  copying the outcome arrays instead costs O(requests in the run) per fork, the journal
  O(requests in the forked epochs);
* iteration server model (``sim/iteration_mode.py``): ``IterationState.copy()``, the
  per-epoch accumulator figures of the forked epochs, the requests still on the network, and
  a journal of every outcome write (placements and completion-log drains). Its epoch figures
  are those of the requests whose outcome was logged in the epoch
  (``sim/iteration_results.epoch_parts``);
* the engine's own state (``fork_state.EngineState``): the epoch's held pool (request fidelity), the
  forecaster's random generator (an observation with a ``noisy`` forecast draws from it), the
  invalid-plan log.

Determinism: the fork uses the original's random streams (per-request uniforms for routing,
holding and local picks; the forecaster's draws continue where the original's are), so a fork
that replays the plan the run then takes gives bit-identical figures (``tests/test_fork.py``).

Epoch figures are the epoch's own: energy, carbon, water and cost of the epoch's window
(always-on idle power included); TTFT, SLO misses and drops of the work dispatched in the
epoch. ``objective`` is the epoch's additive share of the run's J: the run's weights over the
run's reference scales (``core/objective.py``), the TTFT term as the epoch's TTFT sum over the
reference's interactive count and the SLO term as (misses + drops) over the reference's
request count, as the optimising policies' cost model does (``policies/optimize/model.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from greenroute.core.errors import ConfigError
from greenroute.core.types import GeoPolicy, Observation, Plan
from greenroute.data.requests import CLASS_DEFERRABLE, CLASS_INTERACTIVE
from greenroute.sim import fluid_kernel as FK
from greenroute.sim.fork_state import (  # noqa: F401  (backends' snapshot/restore hooks)
    OUTCOME_FIELDS,
    EngineState,
    fluid_restore,
    fluid_snapshot,
    request_restore,
    request_snapshot,
)

# running drop totals of the fluid kernel: ACC_QUEUE_FULL, ACC_NO_SERVER, ACC_POWER_CAP
FLUID_DROPS = slice(FK.ACC_QUEUE_FULL, FK.ACC_POWER_CAP + 1)

PlanSource = Plan | Sequence[Plan] | GeoPolicy | Callable[[Observation], Plan]


@dataclass(frozen=True, eq=False)
class EpochFigures:
    """One epoch's figures (the original's or a fork's). ``==`` is exact equality of every
    field, a NaN equal to a NaN (a replayed fork equals the real epoch bit for bit)."""

    epoch: int
    carbon_kg: float
    water_m3: float
    energy_kwh: float  # facility energy (IT + cooling + infrastructure)
    it_energy_kwh: float
    cost_usd: float
    ttft_mean_s: float  # interactive requests dispatched in the epoch; NaN if none
    interactive_requests: float  # dispatched in the epoch (fluid: expected count)
    slo_misses: float  # interactive over the SLO + deferrable late (drops not included)
    dropped: float
    objective: float  # the epoch's share of the run's J (NaN when the run has no scales)
    it_energy_kwh_by_region: np.ndarray = field(repr=False)  # [R]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EpochFigures):
            return NotImplemented
        for k in self.__dataclass_fields__:
            x, y = getattr(self, k), getattr(other, k)
            if isinstance(x, np.ndarray):
                if not np.array_equal(x, y, equal_nan=True):
                    return False
            elif not (x == y or (x != x and y != y)):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def as_dict(self) -> dict[str, float]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["it_energy_kwh_by_region"] = self.it_energy_kwh_by_region.tolist()
        return out


@dataclass(frozen=True)
class ForkResult:
    """Figures of every forked epoch, in order."""

    start_epoch: int
    epochs: tuple[EpochFigures, ...]
    invalid_plans: tuple[str, ...] = ()  # plans replaced by the safe plan (on_invalid=fallback)

    def total(self, key: str) -> float:
        """Sum of an additive figure over the forked epochs (carbon_kg, objective, ...)."""
        return float(sum(getattr(f, key) for f in self.epochs))

    @property
    def objective(self) -> float:
        return self.total("objective")

    @property
    def carbon_kg(self) -> float:
        return self.total("carbon_kg")


class Fork:
    """A counterfactual branch of ``sim`` at its current epoch (see the module docstring).

    ``evaluate(plan)`` simulates one epoch; ``rollout(source, n_epochs)`` several, with a plan
    repeated, a sequence of plans, or a policy (``GeoPolicy`` or ``obs -> Plan``) asked at each
    forked epoch. A policy object is used as is: its own memory is the caller's business. A
    fork is valid until the original advances; each call starts again from the fork's epoch.
    """

    def __init__(self, sim) -> None:
        if not hasattr(sim, "_stepper"):
            raise ConfigError("fork() needs a started run: call begin() first")
        if sim.done:
            raise ConfigError(f"fork() at epoch {sim.epoch}: the run has no epoch left")
        self.sim = sim
        self.epoch = int(sim.epoch)
        self._obs: Observation | None = None
        self._coef = _objective_coefficients(sim)
        self._frac_no_cap: np.ndarray | None = None  # fluid: slot fraction without plan caps
        self._snap: tuple | None = None  # fluid: (end epoch, backend snapshot) to reuse

    def evaluate(self, plan: Plan, obs: Observation | None = None) -> EpochFigures:
        """Figures of the fork's epoch under ``plan`` (validated like the run's plans)."""
        return self.rollout(plan, 1, obs).epochs[0]

    def rollout(
        self, source: PlanSource, n_epochs: int | None = None, obs: Observation | None = None
    ) -> ForkResult:
        """Simulate ``n_epochs`` epochs from the fork's epoch; ``obs`` is the observation of the
        fork's epoch if the caller has it (otherwise it is built once and kept)."""
        sim = self.sim
        if sim.epoch != self.epoch:
            raise ConfigError(
                f"stale fork: taken at epoch {self.epoch}, the run is at epoch {sim.epoch}; "
                "call sim.fork() again"
            )
        k = _n_epochs(source, n_epochs)
        left = sim.sc.n_epochs - self.epoch
        if not 1 <= k <= left:
            raise ConfigError(f"a fork at epoch {self.epoch} can run 1..{left} epochs, not {k}")
        if obs is not None and obs.epoch != self.epoch:
            raise ConfigError(
                f"the observation is of epoch {obs.epoch}, the fork's is {self.epoch}"
            )
        e0 = self.epoch
        saved = EngineState(sim, e0, e0 + k, self._snap)
        if sim.sc.fidelity == "fluid":
            self._snap = saved.range_snap
        invalid: list[str] = []
        figures: list[EpochFigures] = []
        try:
            for i in range(k):
                e = e0 + i
                if i == 0:
                    if obs is None:
                        if self._obs is None:
                            self._obs = sim._stepper.observe(e)
                        obs_e = self._obs
                    else:
                        obs_e = obs
                else:
                    obs_e = sim._stepper.observe(e)
                n_invalid = len(sim.invalid_plans)
                plan = sim.validated(obs_e, _plan_at(source, i, obs_e))
                invalid += sim.invalid_plans[n_invalid:]
                del sim.invalid_plans[n_invalid:]
                figures.append(measure_step(sim, e, self._apply(e, plan, obs_e), self._coef))
        finally:
            saved.restore()
        return ForkResult(e0, tuple(figures), tuple(invalid))

    def _apply(self, e: int, plan: Plan, obs: Observation) -> Callable[[], dict]:
        """The stepper's ``apply`` of epoch ``e``; in fluid fidelity the per-region slot
        fraction of a plan without its own power caps is computed once per fork."""
        sim = self.sim
        if sim.sc.fidelity == "request" or plan.power_cap_kw is not None:
            return lambda: sim._stepper.apply(e, plan, obs)
        if self._frac_no_cap is None:
            self._frac_no_cap = sim.effective_slots(None)[1]
        return lambda: sim._stepper.fluid.step(e, plan, self._frac_no_cap, obs) or {}


def advance_measured(sim, plan: Plan, obs: Observation) -> EpochFigures:
    """``sim.advance(plan, obs)`` that also returns the epoch's :class:`EpochFigures`, computed
    as a fork computes them (so a replayed fork can be compared with the real epoch)."""
    e = sim.epoch
    return measure_step(sim, e, lambda: sim.advance(plan, obs), _objective_coefficients(sim))


# ---------------------------------------------------------------------------- measuring
def measure_step(
    sim, e: int, apply: Callable[[], dict], coef: tuple[float, ...] | None
) -> EpochFigures:
    """Run ``apply`` (one epoch ``e`` of ``sim``) and return that epoch's figures."""
    if sim.sc.fidelity == "request" and getattr(sim._stepper, "iteration", False):
        from greenroute.sim.iteration_results import epoch_parts

        apply()
        parts = epoch_parts(sim, sim._stepper.backend, e)
    elif sim.sc.fidelity == "request":
        be = sim._stepper.backend
        outer = be.journal
        be.journal = []
        try:
            apply()
            placed = [j[0] for j in be.journal]
        finally:
            if outer is not None:
                outer.extend(be.journal)
            be.journal = outer
        ids = np.concatenate(placed) if placed else np.zeros(0, dtype=np.int64)
        parts = _request_parts(sim, be, e, ids)
    else:
        fl = sim._stepper.fluid
        drops0 = float(fl.acc[FLUID_DROPS].sum())
        n_comp = len(fl.comp["w"])
        info = apply()
        parts = _fluid_parts(sim, fl, e, n_comp)
        parts["slo_misses"] = float(info["slo_misses"])
        parts["dropped"] = float(fl.acc[FLUID_DROPS].sum()) - drops0
    return _figures(sim, e, parts, coef)


def _figures(sim, e: int, parts: dict, coef: tuple[float, ...] | None) -> EpochFigures:
    it = parts["it_kwh"]
    carbon_g, water_l, cost, energy = (_factor_rows(sim)[e] @ it).tolist()
    carbon, water = carbon_g / 1e3, water_l / 1e3
    n_int, ttft_sum = parts["n_int"], parts["ttft_sum"]
    ttft_mean = ttft_sum / n_int if n_int > 0 else float("nan")
    obj = float("nan")
    if coef is not None:
        k_c, k_w, k_d, k_l, k_s = coef
        misses = parts["slo_misses"] + parts["dropped"]
        obj = k_c * carbon + k_w * water + k_d * cost + k_l * ttft_sum + k_s * misses
    return EpochFigures(
        epoch=e,
        carbon_kg=carbon,
        water_m3=water,
        energy_kwh=energy,
        it_energy_kwh=float(it.sum()),
        cost_usd=cost,
        ttft_mean_s=float(ttft_mean),
        interactive_requests=float(n_int),
        slo_misses=float(parts["slo_misses"]),
        dropped=float(parts["dropped"]),
        objective=float(obj),
        it_energy_kwh_by_region=it,
    )


def _factor_rows(sim) -> np.ndarray:
    """[T, 4, R]: carbon g, water l (on- + off-site), cost $ and facility kWh per IT kWh, kept
    on the simulation (one product per epoch instead of four)."""
    rows = sim.__dict__.get("_fork_factor_rows")
    if rows is None:
        f = sim.prep.factors
        water = f.water_onsite_l_per_it_kwh + f.water_offsite_l_per_it_kwh
        rows = np.ascontiguousarray(
            np.stack([f.carbon_g_per_it_kwh, water, f.cost_usd_per_it_kwh,
                      f.energy_kwh_per_it_kwh], axis=1), dtype=float,
        )  # fmt: skip
        sim._fork_factor_rows = rows
    return rows


def _objective_coefficients(sim) -> tuple[float, ...] | None:
    """Coefficients of an epoch's J on (carbon kg, water m³, cost $, TTFT sum s, SLO misses +
    drops): the run's weights over its reference scales, or None when the run has no scales
    (a lazy mapping runs its reference here). A scale that a nonzero weight needs must be a
    finite number > 0 (``core/objective.py``: no silent 1.0)."""
    scales = sim.config.objective_scales
    if not scales:
        return None
    from greenroute.core.objective import Objective

    w = sim.config.weights
    obj = Objective(w, dict(scales))

    def per(weight: float, key: str) -> float:
        return 0.0 if weight == 0 else weight / obj.scale(key)

    counts = {}
    for key in ("interactive_requests", "requests_total"):
        v = scales.get(key)
        if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
            raise ConfigError(
                f"objective reference scale {key!r} = {v!r} is not a finite number > 0: an "
                "epoch's share of the objective needs local-only's request counts"
            )
        counts[key] = float(v)
    k_l = per(w.latency, "ttft_mean_s") / counts["interactive_requests"]
    k_s = w.slo_penalty / counts["requests_total"]
    return (per(w.carbon, "carbon_kg"), per(w.water, "water_m3"), per(w.cost, "cost_usd"), k_l,
            k_s)  # fmt: skip


def _fluid_parts(sim, fl, e: int, n_comp: int) -> dict:
    it = fl.it_dyn_kwh[:, e] + fl.idle_kwh
    n_int = ttft_sum = 0.0
    if len(fl.comp["w"]) > n_comp:
        c = fl.comp
        e_pf = fl.e_pf_int
        if getattr(fl, "iteration", False):  # iteration servers: residual + prefill iteration
            e_pf = e_pf.copy()
            t = c["type"][n_comp]
            e_pf[t, t % fl.n_m] = c["pre"][n_comp]
        n_int, ttft_sum = _fluid_ttft_sum(
            c["w"][n_comp], c["net2"][n_comp], c["type"][n_comp], e_pf, fl.n_m,
            c["b0"][n_comp], c["slope"][n_comp], c["cap"][n_comp], c["pw"][n_comp],
            c["cond"][n_comp], float(sim.sc.epoch_s),
        )  # fmt: skip
    return {"it_kwh": it, "n_int": n_int, "ttft_sum": ttft_sum}


@njit(cache=True)
def _fluid_ttft_sum(w, net2, types, e_pf_int, n_m, b0, slope, cap, pw, cond, dt):
    """(interactive count, TTFT sum) of one epoch's flows: network both ways + mean prefill
    + the fluid backlog wait + the M/G/c wait while the backlog is empty, as in
    ``FluidBackend.ttft_summary``'s mean."""
    n = 0.0
    total = 0.0
    for i in range(w.size):
        wait = FK.fluid_wait_mean(b0[i], slope[i], cap[i], dt)
        wait += FK.zero_frac(b0[i], slope[i], dt) * pw[i] * cond[i]
        total += w[i] * (net2[i] + e_pf_int[types[i], types[i] % n_m] + wait)
        n += w[i]
    return n, total


def _request_parts(sim, be, e: int, ids: np.ndarray) -> dict:
    sc, prep, b, reqs = sim.sc, sim.prep, be.b, be.reqs
    t0, t1 = e * sc.epoch_s, (e + 1) * sc.epoch_s
    # energy of the window: every started request overlapping it (``_open`` holds every
    # placed request that may still run; later epochs' work starts after t1)
    run = be._open
    run = run[np.isfinite(be.start[run])]
    srv = be.server[run]
    dyn_w = (b.server_peak_w[srv] - b.server_idle_w[srv]) / b.server_slots[srv]
    overlap_s = np.clip(np.minimum(be.finish[run], t1) - np.maximum(be.start[run], t0), 0.0, None)
    dyn_kwh = np.bincount(be.region[run], weights=overlap_s * dyn_w, minlength=b.n_regions)
    it = dyn_kwh / 3.6e6 + b.region_idle_kw() * sc.epoch_s / 3600.0
    # the epoch's dispatched work
    drop = be.drop[ids]
    ok = ids[drop == 0]
    cls = reqs.cls[ok]
    net = prep.latency_s[reqs.origin[ok], be.region[ok]]
    ttft = 2.0 * net + (be.start[ok] - be.t_reg[ok]) + be.prefill[ok]
    inter = cls == CLASS_INTERACTIVE
    slo_value = ttft if sc.slo_kind == "ttft" else be.finish[ok] + net - reqs.arrival_s[ok]
    late_i = inter & (slo_value > sc.ttft_slo_s)
    late_d = (cls == CLASS_DEFERRABLE) & (be.finish[ok] > reqs.deadline_s[ok])
    return {
        "it_kwh": it,
        "n_int": float(inter.sum()),
        "ttft_sum": float(ttft[inter].sum()),
        "slo_misses": float(late_i.sum() + late_d.sum()),
        "dropped": float((drop > 0).sum()),
    }


# ---------------------------------------------------------------------------- plans
def _n_epochs(source: PlanSource, n_epochs: int | None) -> int:
    if isinstance(source, Plan) or _is_policy(source):
        return 1 if n_epochs is None else int(n_epochs)
    plans = list(source)
    if n_epochs is not None and int(n_epochs) != len(plans):
        raise ConfigError(f"n_epochs={n_epochs} but {len(plans)} plans were given")
    return len(plans)


def _is_policy(source) -> bool:
    return hasattr(source, "plan") or (callable(source) and not isinstance(source, Sequence))


def _plan_at(source: PlanSource, i: int, obs: Observation) -> Plan:
    if isinstance(source, Plan):
        return source
    if hasattr(source, "plan"):
        return source.plan(obs)  # type: ignore[union-attr]
    if callable(source):
        return source(obs)
    return source[i]  # type: ignore[index]
