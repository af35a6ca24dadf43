"""Temperature-aware ADMM (seed 004): each datacenter solves its own subproblem, and the
regions agree on how to split the demand through the alternating direction method of
multipliers (Boyd et al. 2011).

Seed 004 (only its abstract survives) schedules LLM inference across geo-distributed edge
datacenters with a distributed optimisation algorithm based on ADMM, with each site's cooling
efficiency depending on its own ambient temperature. Here the per-request costs come from the
shared cost model (:mod:`.model`): they already hold each region's cooling through its
facility factors (the COP follows that region's ambient temperature), its carbon, water,
price and network/prefill latency, and a convex piecewise-linear congestion cost of the
region's busy slots from the simulator's queueing curve.

**The epoch problem** (step 0 of the cost model; ``admm`` is spatial only: all deferrable
work is dispatched now, ``hold = 0``; temporal shifting is what ``lp-mpc`` adds). With
``D[c, o]`` the work to place this epoch (interactive: forecast arrivals; deferrable: held +
arriving), choose request counts ``x[c, o, r] >= 0`` on allowed pairs::

    min  sum unit[c, o, r] x[c, o, r] + sum_r phi_r(B_r)
    s.t. sum_r x[c, o, r] = D[c, o]
         B_r = sum_{c, o} x[c, o, r] slot_s[c, r] / epoch_s + backlog_r / epoch_s
    phi_r(B) = max_k (slope[r, k] B + icept[r, k]) + big * max(0, B - max_util cap_r)

(the hinge is the LP's heavily penalised overflow, so the program is always feasible). It is
a linear program: :func:`centralized_epoch_lp` solves it with HiGHS as the reference.

**ADMM, consensus/sharing form.** Region r owns ``x_r = x[:, :, r]`` and
``f_r(x_r) = unit_r . x_r + phi_r(B_r(x_r))`` (+ x_r >= 0, masks). The coupling
``sum_r x_r = D`` is held by a copy ``z`` projected on that affine set: minimise
``sum_r f_r(x_r) + I{sum_r z_r = D}`` s.t. ``x_r = z_r``. With the scaled dual ``u``::

    x_r <- argmin f_r(x_r) + rho/2 ||x_r - z_r + u_r||^2     (each region, in parallel)
    z   <- projection of x + u on {sum_r z_r = D}             (per (c, o): add the mean gap)
    u   <- u + x - z

The region step is a small strictly convex QP with one scalar coupling (its busy slots), solved
exactly by :func:`region_prox`: for a congestion price lambda, ``x_p = max(0, v_p - (a_p +
lambda w_p)/rho)``; the optimum is where the (non-increasing, piecewise linear) busy-slot curve
B(lambda) meets the subdifferential staircase of phi_r, found among a finite candidate set and
one linear interpolation — no iterative inner solver (compiled with numba, like the request
kernel). Residuals and stopping are Boyd section 3.3 (``r = x - z``, ``s = rho (z - z_prev)``,
absolute + relative tolerances, in units scaled so costs and allocations are ~1); rho follows
residual balancing (section 3.4.1) every 10 iterations for the first 500, then only at
500 x 2^k (finitely many changes, which keeps the convergence guarantee, yet lets rho grow
when the prices must climb far, e.g. to a full region's overflow price).

**Plan and certificate.** The plan is the regions' own ``x`` made exactly feasible
(:func:`recover_feasible`: rows over demand scaled down, a region over its capacity scales
its column down, shortfalls go to spare slots cheapest first); its objective is what is
compared with the LP. From ADMM's prices each region also computes its term of the Lagrangian
dual (:func:`_dual_bound`), so ``(objective - dual bound) / objective`` bounds the true gap
without the centralised solve; while it exceeds ``gap_tol`` (default 0.1 %) and iterations
remain, ADMM resumes with tolerances / 10 (at most ``max_refine`` times). Each epoch
warm-starts from the previous one (its shares, its prices and its rho), with ``max_iter``
iterations at most.
"""

from __future__ import annotations

import time

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.core.types import ClusterInfo, Observation, Plan
from greenroute.policies.optimize.admm_horizon import (
    admm_horizon,
    horizon_problem,
    horizon_solution,
    shift_warm,
)
from greenroute.policies.optimize.admm_solver import ADMMResult, admm_epoch
from greenroute.policies.optimize.epoch_problem import (
    EpochProblem,
    busy_slots,
    epoch_problem,
    solve_epoch_lp,
)
from greenroute.policies.optimize.lp import (
    COOLING_HELP,
    COOLING_UNITS,
    LPSolution,
    _LPBase,
    plan_from_solution,
    solve_horizon_lp,
)
from greenroute.policies.optimize.model import (
    DEFAULT_MAX_UTILISATION,
    DEFERRABLE,
    INTERACTIVE,
    CostModel,
    build_cost_model,
)
from greenroute.policies.registry import register_geo_policy

# ADMM options the horizon solver takes (the rest are the spatial solver's)
_HORIZON_OPTIONS = ("eps_abs", "eps_rel", "max_iter", "adaptive_rho", "mu", "tau", "rho_every",
                    "rho_freeze")  # fmt: skip


# ---------------------------------------------------------------------------- the policy
@register_geo_policy(
    "admm",
    "Temperature-aware ADMM (seed 004): per-region subproblems agree on the demand split; "
    "with horizon > 0 they also hold deferrable work within its deadline, like lp-mpc.",
    units={
        "horizon": "epochs",
        "rho": "penalty (per normalised request)",
        "max_iter": "iterations",
        "gap_tol": "relative gap",
        "rho_every": "iterations",
        "rho_freeze": "iterations",
        "max_utilisation": "share of usable slots",
        "weights": "objective weights",
        **COOLING_UNITS,
    },
    help={
        "check_gap": "also solve the centralised LP each epoch to report ADMM's gap",
        "pair_scale": "scaling of the pair variables: mean | sqrt | demand",
        "horizon": "0: spatial only (deferrable work dispatched at once); H: plan H epochs "
        "ahead and hold deferrable work within its deadline (lp-mpc's pool)",
        **COOLING_HELP,
    },
)
class ADMMPolicy(_LPBase):
    """Each epoch, ADMM over the regions on the step-0 cost model (deferrable work is
    dispatched at once: temporal shifting is lp-mpc's). ``check_gap`` also solves the
    centralised LP each epoch to report ADMM's optimality gap (not used for the plan)."""

    name = "admm"

    def __init__(
        self,
        rho: float = 1.0,
        adaptive_rho: bool = True,
        eps_abs: float = 1e-5,
        eps_rel: float = 1e-4,
        max_iter: int = 5000,
        gap_tol: float | None = 1e-3,
        pair_scale: str = "mean",
        warm_start: bool = True,
        check_gap: bool = True,
        mu: float = 10.0,
        tau: float = 2.0,
        rho_every: int = 10,
        rho_freeze: int = 500,
        alpha: float = 1.0,
        max_refine: int = 4,
        weights: dict | None = None,
        max_utilisation: float = DEFAULT_MAX_UTILISATION,
        cooling_model: str = "aware",
        blind_pue: float | None = None,
        blind_cop: float | None = None,
        blind_data_dir: str | None = None,
        horizon: int = 0,
    ) -> None:
        if rho <= 0 or max_iter < 1:
            raise ConfigError(f"admm needs rho > 0 and max_iter >= 1 (got {rho}, {max_iter})")
        if horizon < 0:
            raise ConfigError(f"admm horizon must be >= 0 epochs, got {horizon}")
        self.horizon = int(horizon)
        self.horizon_epochs = self.horizon if self.horizon > 0 else None
        admm = {
            "adaptive_rho": adaptive_rho,
            "eps_abs": eps_abs,
            "eps_rel": eps_rel,
            "max_iter": max_iter,
            "gap_tol": gap_tol,
            "pair_scale": pair_scale,
            "mu": mu,
            "tau": tau,
            "rho_every": rho_every,
            "rho_freeze": rho_freeze,
            "alpha": alpha,
            "max_refine": max_refine,
        }
        cooling = (cooling_model, blind_pue, blind_cop, blind_data_dir)
        super().__init__(weights, max_utilisation, cooling)
        self.admm_options = admm
        self.rho0 = float(rho)
        self.warm_start = warm_start
        self.check_gap = check_gap
        self._reset_state()

    def _reset_state(self) -> None:
        self._x_h: np.ndarray | None = None  # horizon mode's warm start
        self._price_h: np.ndarray | None = None
        self.records: list[dict] = []
        self._shares: np.ndarray | None = None
        self._price: np.ndarray | None = None
        self._rho = self.rho0

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        super().reset(cluster, seed)
        self._reset_state()

    def solve(
        self, obs: Observation, model: CostModel | None = None
    ) -> tuple[EpochProblem, ADMMResult, dict]:
        """One epoch: the problem, ADMM's result and its record (the plan is built from it)."""
        if model is None:
            model = build_cost_model(obs, self.weights, self.max_util)
        prob = epoch_problem(obs, model)
        t0 = time.perf_counter()
        warm = self.warm_start and self._shares is not None
        res = admm_epoch(
            prob,
            rho=self._rho if warm else self.rho0,
            shares0=self._shares if warm else None,
            price0=self._price if warm else None,
            **self.admm_options,
        )
        solve_s = time.perf_counter() - t0
        rec = {
            "epoch": int(obs.epoch),
            "iterations": res.iterations,
            "primal_res": res.primal_res,
            "dual_res": res.dual_res,
            "eps_pri": float(res.eps_pri),
            "eps_dual": float(res.eps_dual),
            "converged": res.converged,
            "rounds": res.rounds,
            "rho": res.rho,
            "objective": res.objective,
            "lower_bound": res.lower_bound,
            "certified_gap": res.certified_gap,
            "solve_s": solve_s,
        }
        if self.check_gap:
            _, lp_obj = solve_epoch_lp(prob)
            rec["central_objective"] = lp_obj
            rec["gap"] = (res.objective - lp_obj) / max(abs(lp_obj), 1e-300)
        self.records.append(rec)
        self._shares, self._price, self._rho = res.shares, res.price, res.rho
        return prob, res, rec

    def plan(self, obs: Observation) -> Plan:
        obs = self.planning_obs(obs)  # temperature-blind comparator: one constant PUE
        model = build_cost_model(obs, self.weights, self.max_util)
        if self.horizon > 0:
            return self._plan_horizon(obs, model)
        prob, res, rec = self.solve(obs, model)
        self.solve_times.append(rec["solve_s"])
        n_o = prob.demand.shape[1]
        sol = LPSolution(
            xi=res.x[INTERACTIVE][None],
            xd=res.x[DEFERRABLE][None],
            d=prob.demand[DEFERRABLE][None],
            pool=np.zeros((1, n_o)),
            busy=busy_slots(prob, res.x)[None],
            status=0,
            objective=res.objective,
            solve_s=rec["solve_s"],
            n_vars=int(prob.ok.sum()),
            n_rows=int(prob.demand.size),
        )
        plan = plan_from_solution(obs, model, sol, 0)
        plan.hold = np.zeros(n_o)  # spatial only: everything is dispatched now
        share = res.x.sum(axis=(0, 1))
        tot = share.sum()
        top = [r for r in np.argsort(share)[::-1][:3] if share[r] > 0]
        parts = ", ".join(f"{obs.regions[r]} {100 * share[r] / tot:.0f}%" for r in top)
        plan.rationale = f"ADMM {res.iterations} it: {parts or 'no demand'}"
        return plan

    def _plan_horizon(self, obs: Observation, model: CostModel) -> Plan:
        """Time shifting (:mod:`.admm_horizon`): lp-mpc's horizon program solved by ADMM; the
        plan executes its first step. When the run ends inside the horizon, plan to its end
        and leave nothing held (as lp-mpc)."""
        left = self.cluster.n_epochs - obs.epoch
        steps = min(self.horizon + 1, model.horizon + 1)
        terminal = "zero-pool" if left <= steps else "cost"
        hp = horizon_problem(obs, model, self.slack, terminal=terminal, steps=min(steps, left))
        t0 = time.perf_counter()
        warm = self.warm_start and self._x_h is not None
        opts = {k: self.admm_options[k] for k in _HORIZON_OPTIONS}
        res = admm_horizon(
            hp,
            rho=self._rho if warm else self.rho0,
            x0=shift_warm(self._x_h, hp.n_steps) if warm else None,
            price0=shift_warm(self._price_h, hp.n_steps) if warm else None,
            **opts,
        )
        solve_s = time.perf_counter() - t0
        self.solve_times.append(solve_s)
        self._x_h, self._price_h, self._rho = res.x_raw, res.price, res.rho
        rec = {"epoch": int(obs.epoch), "iterations": res.iterations,
               "primal_res": res.primal_res, "dual_res": res.dual_res,
               "eps_pri": res.eps_pri, "eps_dual": res.eps_dual, "converged": res.converged,
               "rounds": 1, "rho": res.rho, "objective": res.objective,
               "lower_bound": float("nan"), "certified_gap": float("nan"),
               "solve_s": solve_s, "held": float(res.pool[0].sum())}  # fmt: skip
        if self.check_gap:
            lp = solve_horizon_lp(obs, model, self.slack, terminal=terminal, steps=hp.n_steps)
            rec["central_objective"] = lp.objective
            rec["gap"] = (res.objective - lp.objective) / max(abs(lp.objective), 1e-300)
        self.records.append(rec)
        plan = plan_from_solution(obs, model, horizon_solution(hp, res, solve_s), 0)
        plan.rationale = f"ADMM-H{hp.n_steps - 1} {res.iterations} it; " + (
            f"{res.pool[0].sum():.0f} deferrable held"
        )
        return plan

    def summary(self) -> dict:
        if not self.records:
            return {}
        it = np.array([r["iterations"] for r in self.records])
        cert = np.array([r["certified_gap"] for r in self.records])
        out = {
            "epochs": len(self.records),
            "iters_mean": float(it.mean()),
            "iters_max": int(it.max()),
            "converged_share": float(np.mean([r["converged"] for r in self.records])),
            "primal_res_max": float(max(r["primal_res"] for r in self.records)),
            "dual_res_max": float(max(r["dual_res"] for r in self.records)),
            "primal_res_last": float(self.records[-1]["primal_res"]),
            "dual_res_last": float(self.records[-1]["dual_res"]),
            "rho_last": float(self.records[-1]["rho"]),
            "cert_gap_mean": float(np.mean(cert)) if np.isfinite(cert).all() else None,
            "cert_gap_max": float(np.max(cert)) if np.isfinite(cert).all() else None,
            "admm_ms_mean": 1e3 * float(np.mean([r["solve_s"] for r in self.records])),
        }
        gaps = np.array([r["gap"] for r in self.records if "gap" in r])
        if gaps.size:
            out["gap_mean"] = float(gaps.mean())
            out["gap_max"] = float(gaps.max())
            adm = sum(r["objective"] for r in self.records if "gap" in r)
            cen = sum(r["central_objective"] for r in self.records if "gap" in r)
            out["gap_total"] = (adm - cen) / max(abs(cen), 1e-300)
        return out
