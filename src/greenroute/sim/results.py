"""Turn a finished simulation into metrics, a per-epoch frame and a manifest."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from greenroute.core.errors import ConfigError
from greenroute.data.requests import CLASS_DEFERRABLE, CLASS_INTERACTIVE
from greenroute.sim import kernel as K
from greenroute.sim.ledger import bin_overlap

# keys every result carries (the CLI's JSON and later checks rely on them)
METRIC_KEYS: tuple[str, ...] = (
    "carbon_kg",
    "water_m3",
    "energy_kwh",
    "it_energy_kwh",
    "cooling_energy_kwh",
    "cost_usd",
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p99_s",
    "slo_violation_pct",
    "max_defer_delay_min",
    "requests_total",
    "requests_completed",
    "requests_dropped",
    "requests_in_flight",
)


@dataclass
class RunResult:
    """One run: ``metrics`` (``days`` is the simulated span, whole epochs; ``days_requested``
    what was asked), the per-epoch frame, the manifest and the forecaster (``forecast``,
    default ``perfect``: policies were told the true future)."""

    scenario: str
    policy: str
    local_policy: str
    seed: int
    fidelity: str
    metrics: dict[str, float]
    epochs: pd.DataFrame  # one row per (epoch, region)
    manifest: dict
    notes: list[str] = field(default_factory=list)
    requests: pd.DataFrame | None = None
    extras: dict = field(default_factory=dict)
    forecast: str = "perfect"
    # the server model ("iteration" or "slots"; the fluid model follows it too)
    server_model: str | None = None

    def summary_row(self) -> dict:
        return {"policy": self.policy, **self.metrics}


class CompareResult(list):
    """The results of :func:`greenroute.compare`: a list of :class:`RunResult` (one per policy,
    in the order asked) that is also a table: :attr:`table` / :meth:`to_frame` give a pandas
    DataFrame with one row per policy (column ``policy``, then every metric)."""

    def to_frame(self) -> pd.DataFrame:
        rows = [
            {**r.summary_row(), "forecast": r.forecast, "server_model": r.server_model}
            for r in self
        ]
        return pd.DataFrame(rows)

    @property
    def table(self) -> pd.DataFrame:
        return self.to_frame()

    def by_policy(self) -> dict[str, RunResult]:
        return {r.policy: r for r in self}


def simulated_days(sc) -> float:
    """The span a scenario simulates: ``days`` rounded up to whole epochs (n_epochs x epoch_s)."""
    return sc.n_epochs * sc.epoch_s / 86400.0


def rounding_note(sc) -> str | None:
    """A note when ``days`` is not a whole number of epochs (None otherwise)."""
    span = simulated_days(sc)
    if abs(span - sc.days) <= 1e-9 * max(sc.days, 1.0):
        return None
    return (
        f"--days {sc.days:g} is not a whole number of {sc.epoch_s / 60:g}-min epochs: simulated "
        f"{sc.n_epochs} epochs = {span * 24:.4g} h = {span:.6g} days; results (days, per-day "
        "figures) use the simulated span"
    )


def _ledger(sim, it_dyn_kwh: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Facility ledger [R, E] from dynamic IT energy plus always-on idle power."""
    from greenroute.physics.facility import FacilityFactors, facility_ledger

    prep = sim.prep
    n_e = sim.sc.n_epochs
    idle_kwh = prep.built.region_idle_kw()[:, None] * sim.sc.epoch_s / 3600.0
    it = it_dyn_kwh + idle_kwh
    f = prep.factors
    fe = FacilityFactors(**{k: np.asarray(getattr(f, k))[:n_e].T for k in f.__dataclass_fields__})
    return facility_ledger(it, fe), it


def _epoch_frame(
    sim, led: dict[str, np.ndarray], dispatched: np.ndarray, busy_slot_s
) -> pd.DataFrame:
    sc, prep = sim.sc, sim.prep
    n_e, n_r = sc.n_epochs, len(sc.regions)
    sig = prep.signals
    t = np.arange(n_e) * sc.epoch_s
    slots = prep.built.region_slots()
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where(slots[:, None] > 0, busy_slot_s / (slots[:, None] * sc.epoch_s), 0.0)
    frame = pd.DataFrame(
        {
            "epoch": np.tile(np.arange(n_e), n_r),
            "time_utc": np.tile(sc.start_utc + pd.to_timedelta(t, unit="s"), n_r),
            "region": np.repeat(np.array(sc.regions, dtype=object), n_e),
            "requests_dispatched": dispatched.ravel(),
            "utilisation": util.ravel(),
            "it_energy_kwh": led["it_energy_kwh"].ravel(),
            "cooling_energy_kwh": led["cooling_energy_kwh"].ravel(),
            "energy_kwh": led["energy_kwh"].ravel(),
            "carbon_kg": (led["carbon_g"] / 1e3).ravel(),
            "water_m3": (led["water_l"] / 1e3).ravel(),
            "cost_usd": led["cost_usd"].ravel(),
            "carbon_intensity_g_per_kwh": sig.carbon_intensity_g_per_kwh[:n_e].T.ravel(),
            "price_usd_per_kwh": sig.price_usd_per_kwh[:n_e].T.ravel(),
            "temp_c": sig.temp_c[:n_e].T.ravel(),
            "wetbulb_c": sig.wetbulb_c[:n_e].T.ravel(),
        }
    )
    frame["region"] = frame["region"].astype("string")
    return frame


def _totals(led: dict[str, np.ndarray]) -> dict[str, float]:
    return {
        "carbon_kg": float(led["carbon_g"].sum() / 1e3),
        "water_m3": float(led["water_l"].sum() / 1e3),
        "energy_kwh": float(led["energy_kwh"].sum()),
        "it_energy_kwh": float(led["it_energy_kwh"].sum()),
        "cooling_energy_kwh": float(led["cooling_energy_kwh"].sum()),
        "infra_energy_kwh": float(led["infra_energy_kwh"].sum()),
        "water_onsite_m3": float(led["water_onsite_l"].sum() / 1e3),
        "water_offsite_m3": float(led["water_offsite_l"].sum() / 1e3),
        "cost_usd": float(led["cost_usd"].sum()),
    }


def finalize_request(sim, be) -> RunResult:
    if getattr(be, "server_model", "slots") == "iteration":
        from greenroute.sim.iteration_results import finalize_iteration

        return finalize_iteration(sim, be)
    sc, prep = sim.sc, sim.prep
    reqs = prep.requests
    b = prep.built
    n_e, n_r = sc.n_epochs, b.n_regions
    t_end = sc.n_epochs * sc.epoch_s
    placed = be.drop == 0
    started = placed & np.isfinite(be.start)
    # dynamic energy: each busy slot draws (peak - idle) / slots (DESIGN: idle + (peak-idle) u)
    srv = np.where(started, be.server, 0)
    dyn_w = (b.server_peak_w[srv] - b.server_idle_w[srv]) / b.server_slots[srv]
    s = np.where(started, np.minimum(be.start, t_end), 0.0)
    f = np.where(started, np.minimum(be.finish, t_end), 0.0)
    reg = np.where(started, be.region, 0)
    busy = bin_overlap(s, f, np.where(started, 1.0, 0.0), reg, n_r, sc.epoch_s, n_e)
    dyn_ws = bin_overlap(s, f, np.where(started, dyn_w, 0.0), reg, n_r, sc.epoch_s, n_e)
    led, _ = _ledger(sim, dyn_ws / 3.6e6)
    disp_epoch = np.floor(np.nan_to_num(be.dispatch, nan=-1) / sc.epoch_s).astype(np.int64)
    ok = (be.region >= 0) & (disp_epoch >= 0) & (disp_epoch < n_e)
    dispatched = np.zeros((n_r, n_e))
    np.add.at(dispatched, (be.region[ok], disp_epoch[ok]), 1.0)
    metrics = _totals(led)
    n = len(reqs)
    dropped = be.drop > 0
    completed = placed & (be.finish <= t_end)
    net = np.zeros(n)
    has_reg = be.region >= 0
    net[has_reg] = prep.latency_s[reqs.origin[has_reg], be.region[has_reg]]
    ttft = 2.0 * net + (be.start - be.t_reg) + be.prefill
    e2e = be.finish + net - reqs.arrival_s
    metrics.update(request_metrics(sc, reqs, be, ttft, e2e, completed, dropped))
    _add_common(metrics, sim, busy)
    frame = _epoch_frame(sim, led, dispatched, busy)
    req_frame = None
    if sim.config.record_requests:
        req_frame = request_frame(reqs, be, start_s=be.start, finish_s=be.finish, ttft_s=ttft)
    return _result(sim, metrics, frame, req_frame)


def request_frame(reqs, be, **columns: np.ndarray) -> pd.DataFrame:
    """The per-request frame of a request-level run (``record_requests``): the workload,
    where each request went, the given outcome columns, its drop reason and whether it was
    held."""
    out = reqs.to_frame()
    out["region"] = be.region
    out["server"] = be.server
    out["dispatch_s"] = be.dispatch
    for name, values in columns.items():
        out[name] = values
    out["drop_reason"] = np.array(K.DROP_REASONS, dtype=object)[be.drop]
    out["held"] = be.held_flag
    return out


def finalize_fluid(sim, fl) -> RunResult:
    sc, prep = sim.sc, sim.prep
    led, _ = _ledger(sim, fl.it_dyn_kwh)
    metrics = _totals(led)
    tt = fl.ttft_summary(sc.ttft_slo_s, sim.config.seed)
    total = float(prep.counts.sum())
    dropped = float(sum(fl.dropped.values()))
    in_flight = float(fl.pool.sum() + fl.backlog_req.sum())
    completed = max(total - dropped - in_flight, 0.0)
    n_int = float(prep.counts[:, :, CLASS_INTERACTIVE, :].sum())
    viol = tt["viol_frac"] * tt["n"] + fl.deferrable_late + dropped
    denom = completed + dropped
    busy = fl.busy_slot_s
    metrics.update(
        {
            "ttft_mean_s": tt["mean"],
            "ttft_p50_s": tt["p50"],
            "ttft_p95_s": tt["p95"],
            "ttft_p99_s": tt["p99"],
            "e2e_mean_s": float("nan"),
            "slo_violation_pct": 100.0 * viol / denom if denom else 0.0,
            "max_defer_delay_min": fl.max_defer_delay_s / 60.0,
            "requests_total": total,
            "requests_completed": completed,
            "requests_dropped": dropped,
            "requests_in_flight": in_flight,
            "interactive_requests": n_int,
        }
    )
    for name, v in fl.dropped.items():
        metrics[f"dropped_{name}"] = float(v)
    _add_common(metrics, sim, busy)
    frame = _epoch_frame(sim, led, fl.dispatched, busy)
    if sc.facility == "marlin":  # seed 001 eq. 3 and 4 beside the engine's figures
        from greenroute.sim.marlin_metrics import add_marlin_metrics

        add_marlin_metrics(sim, fl, metrics, frame)
    return _result(sim, metrics, frame, None)


def _add_common(metrics: dict, sim, busy: np.ndarray) -> None:
    sc, prep = sim.sc, sim.prep
    slots = prep.built.region_slots()
    horizon = sc.n_epochs * sc.epoch_s
    for r, reg in enumerate(sc.regions):
        metrics[f"utilisation_{reg}"] = (
            float(busy[r].sum() / (slots[r] * horizon)) if slots[r] > 0 else 0.0
        )
    metrics["invalid_plans"] = float(len(sim.invalid_plans))
    if sim.config.objective_scales:
        from greenroute.core.objective import Objective

        obj = Objective(sim.config.weights, dict(sim.config.objective_scales))
        for k, v in obj.terms(metrics).items():
            metrics[f"objective_{k}"] = v
        metrics["objective"] = obj.value(metrics)
    metrics["days"] = simulated_days(sc)  # what was simulated, not what was asked
    metrics["days_requested"] = float(sc.days)
    metrics["horizon_s"] = sc.horizon_s


def _safe(fn, arr, *args) -> float:
    arr = np.asarray(arr)
    return float(fn(arr, *args)) if arr.size else float("nan")


def _policy_metrics(geo, metrics: dict) -> None:
    """Counts a policy reports about its own decisions (``metrics()``, e.g. an LLM policy's
    ``llm_fallbacks``) join the run's metrics; a name the engine already uses is refused."""
    fn = getattr(geo, "metrics", None)
    if not callable(fn):
        return
    for name, value in (fn() or {}).items():
        if name in metrics:
            raise ConfigError(
                f"policy metric {name!r} would replace the engine's metric of that name"
            )
        metrics[name] = float(value)


def _result(sim, metrics, frame, req_frame) -> RunResult:
    from greenroute.sim.manifest import build_manifest

    _policy_metrics(sim.geo, metrics)
    return RunResult(
        scenario=sim.sc.name,
        policy=getattr(sim.geo, "name", type(sim.geo).__name__),
        local_policy=sim.local[0].name,
        seed=sim.config.seed,
        fidelity=sim.sc.fidelity,
        metrics=metrics,
        epochs=frame,
        manifest=build_manifest(sim),
        notes=[*sim.prep.notes, *filter(None, [rounding_note(sim.sc)]), *sim.invalid_plans[:5]],
        requests=req_frame,
        extras={
            "policy_summary": _policy_summary(sim.geo),
            "wall_s": sim.wall_s,
            "plan_time_mean_ms": 1e3 * sim.plan_s / max(sim.sc.n_epochs, 1),
            "plan_log": sim.plan_log,
        },
        forecast=sim.config.forecast,
        server_model=sim.sc.resolved_server_model,
    )


def _policy_summary(geo) -> dict | None:
    """A policy may report its own figures (solver iterations, residuals...) via ``summary()``."""
    fn = getattr(geo, "summary", None)
    if not callable(fn):
        return None
    out = fn()
    return dict(out) if out else None


def request_metrics(sc, reqs, be, ttft, e2e, completed, dropped) -> dict[str, float]:
    """Latency, SLO, deferral and count metrics of a request-level run (both server models):
    SLO violations are interactive requests over their TTFT (or e2e) SLO, deferrable requests
    finishing after their deadline, and drops, over completed + dropped requests; drops by
    reason."""
    n = len(reqs)
    inter = reqs.cls == CLASS_INTERACTIVE
    defer = reqs.cls == CLASS_DEFERRABLE
    tt = ttft[inter & completed]
    slo_metric = ttft if sc.slo_kind == "ttft" else e2e
    viol_i = inter & completed & (slo_metric > sc.ttft_slo_s)
    viol_d = defer & completed & (be.finish > reqs.deadline_s)
    denom = int(completed.sum() + dropped.sum())
    viol = int(viol_i.sum() + viol_d.sum() + dropped.sum())
    delay = (be.dispatch - reqs.arrival_s)[defer & np.isfinite(be.dispatch)]
    out = {
        "ttft_mean_s": _safe(np.mean, tt),
        "ttft_p50_s": _safe(np.percentile, tt, 50),
        "ttft_p95_s": _safe(np.percentile, tt, 95),
        "ttft_p99_s": _safe(np.percentile, tt, 99),
        "e2e_mean_s": _safe(np.mean, e2e[completed]),
        "slo_violation_pct": 100.0 * viol / denom if denom else 0.0,
        "max_defer_delay_min": float(delay.max() / 60.0) if delay.size else 0.0,
        "requests_total": float(n),
        "requests_completed": float(completed.sum()),
        "requests_dropped": float(dropped.sum()),
        "requests_in_flight": float(n - completed.sum() - dropped.sum()),
        "interactive_requests": float(inter.sum()),
    }
    for code, name in enumerate(K.DROP_REASONS):
        if code:
            out[f"dropped_{name}"] = float((be.drop == code).sum())
    return out
