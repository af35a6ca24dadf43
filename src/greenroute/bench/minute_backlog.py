"""The minute backlog of iteration servers, seed by seed: ``python -m greenroute.bench.
minute_backlog --case ll16_75s [--seeds 64] [--first-seed 0]``.

The fluid model's minute-noise term (``sim/fluid_noise_backlog.py``) is an expectation over the
noise given each epoch's count. This probe asks what the iteration engine's TTFT follows, seed
by seed, on the seed's **own** minute counts (the engine's arrivals binned by minute), with two
pathwise models of the region's queue (docs/fluid_iteration_gap.md, "The minute backlog seed by
seed"):

* ``lindley_wait_by_minute``: Lindley's recursion at the region's saturated rate (the
  sustainable rate ``calibrate.mix_sustainable_rps``), a fluid queue that starts at once when a
  minute's arrivals exceed it: the fluid model's slow part, without its expectation.
* ``cohort_wait_by_minute``: the region's slots as a delay system. Admitted requests leave by
  the survival of the residence time measured in the engine at the case's flat mean load,
  their progress slowed as the batch grows (residence ``r0 + r1 n`` at ``n`` running per server,
  fitted on flat engine runs) and as admissions outrun the stationary rate (each admitted
  prompt's prefill, ``prefill_s``, holds every decode back); arrivals queue only when the
  region's slots are full, and the wait an arrival meets is read off the path with the region's
  count spread about it (``total_spread``) and one server's about its share (the count law's
  ``z``): the region's queue at the saturated rate, and a full server's wait for its first
  slot (``wait_full_s``) with the chance that its server is full. The region's count variance
  about the path is carried from step to step (``count_variance_step``, a Gaussian moment
  closure: on a queue the count's randomness accumulates), unless ``--count-variance
  stationary``. ``--law fluid`` takes the residence law from the fluid model's profile
  (``fluid_residence_law``) instead of flat engine runs, ``--law fluid-spread`` with its
  corrections for the slots held at load and the prompt's slot at the cap; ``--per-server``
  runs the model on one server (split arrivals). It also prints the model's noise part on the
  fluid's own flat-load TTFT: what a fluid with this noise term would read.

It prints each model's mean wait next to the engine's mean TTFT less its flat-load value, their
correlation over seeds, and both per minute, binned by the model's wait. The seed's engine runs
and the fluid's mean TTFT come from the calibration case (``bench/calibration_cases.py``).
"""

from __future__ import annotations

import argparse
import itertools
import math
from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from greenroute.bench.calibrate import local_run_metrics, local_simulation, mix_sustainable_rps
from greenroute.bench.calibration_cases import ALL_CASES, CalibrationCase, paired_error
from greenroute.sim import fluid_minute_path as FMP

SUBSTEPS_PER_MINUTE = 120  # 0.5 s steps: the cohort survival's grid is the same step
SECONDS_PER_MINUTE = 60.0
# the flat loads whose engine runs give the residence law r0 + r1 n (with the saturated point)
PROFILE_UTILS = (0.6, 0.75, 0.85)
PROFILE_HOURS = 1.0  # each flat profile run
# The region's count spread about its mean (variance / mean): least-loaded's and random
# routing's total count, measured 1.5-1.7 at 60 % (``sim/fluid_route_wait.py``: ``amp``).
DEFAULT_TOTAL_SPREAD = 1.6
# One server's count about the region's share given the region's count (variance across
# servers / mean, n / (n - 1) corrected): 0.48 / 0.48 / 0.44 over 16 / 8 / 2 servers below 80 %
# of the region's slots (least-loaded, engine, 2026-12-06; docs/fluid_iteration_gap.md, "The
# minute backlog seed by seed"), falling to 0.07-0.03 just above the cap.
DEFAULT_SERVER_SPREAD = 0.46
# A full server's wait for its first free slot: the engine's wait given full for least-loaded
# over 8-16 servers at 85 % (0.276-0.298 s, docs/fluid_iteration_gap.md, "Every calibration case
# within 5 %").
DEFAULT_WAIT_FULL_S = 0.3
BIN_EDGES_S = (0.0, 1e-9, 0.1, 0.5, 1.0, 2.0, 5.0, 20.0, math.inf)


@njit(cache=True)
def lindley_wait_by_minute(counts, capacity_rps, substeps):
    """Mean backlog (s) over each minute of a fluid queue fed ``counts[i]`` arrivals evenly over
    minute ``i`` and drained at ``capacity_rps``: Lindley's W' = (W + (a / c - 1) dt)^+ in
    ``substeps`` steps a minute, each step's value at its midpoint (exact for a backlog that
    does not empty mid-step)."""
    out = np.zeros(counts.size)
    dt = SECONDS_PER_MINUTE / substeps
    w = 0.0
    for i in range(counts.size):
        drift = counts[i] / SECONDS_PER_MINUTE / capacity_rps - 1.0
        acc = 0.0
        for _ in range(substeps):
            end = w + drift * dt
            if end >= 0.0:
                acc += w + 0.5 * drift * dt
                w = end
            else:  # empties mid-step: the triangle's mean over the step
                acc += 0.5 * w * (w / -drift) / dt
                w = 0.0
        out[i] = acc / substeps
    return out


def cohort_wait_by_minute(
    counts, servers, slots, r0, r1, n_ref, survival, capacity_rps, prefill_s, total_spread,
    server_spread, wait_full_s, substeps, variance_state=False,
):  # fmt: skip
    """Mean wait (s) over each minute of the region's slots as a delay system, from an empty
    region (``sim/fluid_minute_path.path_waits``, whose docstring has the model)."""
    survival = np.asarray(survival, dtype=float)
    mass, adm_at, scal = FMP.new_state(survival)
    return FMP.path_waits(np.asarray(counts, dtype=float), servers, slots, r0, r1, n_ref,
                          survival, capacity_rps, prefill_s, total_spread, server_spread,
                          wait_full_s, substeps, variance_state, mass, adm_at, scal)  # fmt: skip


def minute_sums(arrival_s: np.ndarray, ttft_s: np.ndarray, n_minutes: int):
    """Per minute of arrival: ``(arrivals, arrivals with a TTFT, sum of their TTFT)``."""
    minute = np.minimum((np.asarray(arrival_s) // SECONDS_PER_MINUTE).astype(np.int64),
                        n_minutes - 1)  # fmt: skip
    ttft = np.asarray(ttft_s, dtype=float)
    ok = np.isfinite(ttft)
    counts = np.bincount(minute, minlength=n_minutes)
    served = np.bincount(minute[ok], minlength=n_minutes)
    sums = np.bincount(minute[ok], weights=ttft[ok], minlength=n_minutes)
    return counts, served, sums


@dataclass(frozen=True)
class ResidenceLaw:
    """What the cohort model reads from the engine's flat runs: ``r0 + r1 n`` (s) the mean
    residence at ``n`` running per server, ``n_ref`` the running count at the case's load,
    ``survival`` the residence survival there on the model's grid, ``flat_ttft_s`` the mean
    TTFT there, ``prefill_s`` what a prompt's prefill adds to its first iteration there (the
    first iteration's mean less the mean time per output token)."""

    r0: float
    r1: float
    n_ref: float
    survival: np.ndarray
    flat_ttft_s: float
    prefill_s: float


def _flat_run(case: CalibrationCase, util: float, seed: int):
    flat = replace(case, util=util, sigma=0.0)
    sc = replace(flat.scenario(), days=PROFILE_HOURS / 24.0)
    sim = local_simulation(sc, "request", "iteration", case.local, seed, record_requests=True)
    res = sim.run()
    fr = res.requests
    resid = (fr.finish_s - fr.first_token_s + fr.first_iteration_s).to_numpy()
    resid = resid[np.isfinite(resid)]
    n_per_server = len(fr) / (PROFILE_HOURS * 3600.0) * resid.mean() / case.servers
    per_token = np.nanmean((fr.finish_s - fr.first_token_s).to_numpy()) / fr.output_tokens.mean()
    prefill = float(np.nanmean(fr.first_iteration_s.to_numpy()) - per_token)
    return resid, n_per_server, float(res.metrics["ttft_mean_s"]), prefill


def residence_law(case: CalibrationCase, slots: int, capacity_rps: float) -> ResidenceLaw:
    """Profile, then predict: the residence law from flat engine runs at ``PROFILE_UTILS`` and
    the saturated point (``slots`` running per server, ``servers * slots / capacity``)."""
    ns, rs = [float(slots)], [case.servers * slots / capacity_rps]
    own = None
    for util in sorted(set(PROFILE_UTILS) | {case.util}):
        resid, n, ttft, prefill = _flat_run(case, util, 0)
        ns.append(n)
        rs.append(float(resid.mean()))
        if util == case.util:
            own = (resid, n, ttft, prefill)
    r1, r0 = np.polyfit(ns, rs, 1)
    resid, n_ref, ttft, prefill = own
    return ResidenceLaw(float(r0), float(r1), float(n_ref), _survival(resid), ttft, prefill)


def fluid_residence_law(
    case: CalibrationCase, slots: int, capacity_rps: float, spread_z: float | None = None
) -> ResidenceLaw:
    """The residence law as the fluid model's profile gives it (no engine run but the flat TTFT,
    which only places the noise's part): at the case's load a server runs ``N`` decodes
    (``fluid_iteration.predict``) and holds ``N + lam tau`` slots (its own prefill iteration
    ``tau`` too, as the engine counts a request from admission); the line ``r0 + r1 n`` runs
    through that point (``n``, ``n / lam``) and the saturated one (``slots``, ``servers slots /
    capacity``); the survival is of ``tau`` plus ``(O - 1)`` times the time per output token
    that gives that mean, ``O`` the class's output-length samples.

    ``spread_z``: the saturated point is at the rate ``prompt_slot_capacity_ratio`` times
    ``capacity_rps``, and one server's count spreads with variance ``spread_z N`` (the count
    law), and the slots held are ``N + d1 spread_z N / d(N) + p / (1 - p)`` instead: decode-only
    iterations hold the iteration-average ``N``, so their time average is higher by Jensen's
    term (``d(n) = d0 + d1 n``, the decode step), and prefill iterations (a share ``p = lam
    E[tau]`` of the time) hold the count an arrival meets (the time average, Poisson arrivals)
    plus its own prompt: ``N_occ = (1 - p) N_d + p (N_occ + 1)`` (docs/fluid_iteration_gap.md,
    "How closely the noise term can be calibrated")."""
    from greenroute.sim.fluid_iteration import predict

    sc = case.scenario()
    sim = local_simulation(sc, "fluid", "iteration", case.local, 0)
    svc = sim.prep.service
    prof = svc.iteration_profile()
    lam = case.util * capacity_rps / case.servers
    types = np.zeros((1, 1), dtype=np.int64)
    p = predict(prof, np.array([[[lam], [0.0]]]), types, np.array([float(slots)]))
    n_dec, tau = float(p["n"][0]), float(p["tau"][0, 0, 0])
    n_ref = n_dec + lam * tau
    if spread_z is not None:
        k = int(n_dec)
        d1 = float(prof.decode[0, k + 1] - prof.decode[0, k])
        share = lam * tau
        n_ref = n_dec + d1 * spread_z * n_dec / float(p["d"][0]) + share / (1.0 - share)
        capacity_rps *= prompt_slot_capacity_ratio(prof, slots)
    r_sat = case.servers * slots / capacity_rps
    r1 = (r_sat - n_ref / lam) / (slots - n_ref)
    r0 = n_ref / lam - r1 * n_ref
    out = np.asarray(svc.samples[1][0], dtype=float)
    resid = tau + (out - 1.0) * (n_ref / lam - tau) / (out.mean() - 1.0)
    flat = replace(case, sigma=0.0)
    ttft = float(local_run_metrics(flat.scenario(), "request", "iteration", case.local, 0)
                 ["ttft_mean_s"])  # fmt: skip
    return ResidenceLaw(r0, r1, n_ref, _survival(resid), ttft, tau - float(p["d"][0]))


def prompt_slot_capacity_ratio(prof, slots: int) -> float:
    """The saturated rate when a prefill iteration at the cap carries at most ``slots - 1``
    decodes (its prompt holds a slot: the engine caps admitted requests, prompts included),
    over the fluid's, which lets it carry ``min(slots, B - P)`` (``saturation_work_s``):
    ``w(S, adv(S)) / w(S, adv(S - 1))`` of the interactive class on the first perf type, ``w =
    tau + (E[O] - 1 - adv) d(S) / S`` server-seconds per request."""
    s = float(slots)
    tau, d = float(prof.tau[0, 0, slots]), float(prof.decode[0, slots])

    def work(adv: float) -> float:
        return tau + (float(prof.e_out[0]) - 1.0 - adv) * d / s

    return work(float(prof.adv[0, 0, slots])) / work(float(prof.adv[0, 0, slots - 1]))


def _survival(resid: np.ndarray) -> np.ndarray:
    """P(residence > t) on the cohort model's grid from residence samples."""
    dt = SECONDS_PER_MINUTE / SUBSTEPS_PER_MINUTE
    grid = np.arange(0.0, resid.max() + 2 * dt, dt)
    return 1.0 - np.searchsorted(np.sort(resid), grid, side="right") / resid.size


def _bin_table(model: np.ndarray, engine: np.ndarray, weight: np.ndarray) -> list[str]:
    rows = []
    for lo, hi in itertools.pairwise(BIN_EDGES_S):
        m = (model >= lo) & (model < hi) & (weight > 0)
        if not m.any():
            continue
        e = np.average(engine[m], weights=weight[m])
        x = np.average(model[m], weights=weight[m])
        rows.append(f"  [{lo:g}, {hi:g}) s: {int(m.sum()):6d} minutes, engine {e:8.3f}, "
                    f"model {x:8.3f}")  # fmt: skip
    return rows


def _capacity_rps(case: CalibrationCase) -> float:
    """The case's region at its saturated rate (req/s): the sustainable rate of its class mix
    over its servers (``calibrate.mix_sustainable_rps`` is per 2 servers)."""
    return mix_sustainable_rps(case.deferrable_share) * case.servers / 2


def _slots(case: CalibrationCase) -> int:
    """The running cap of the case's servers (all alike)."""
    sc = replace(case.scenario(), days=0.001)
    return int(
        local_simulation(sc, "request", "iteration", case.local, 0).prep.built.server_slots[0]
    )


def probe(
    case: CalibrationCase,
    seeds: range,
    spreads: tuple[float, float],
    wait_full_s: float,
    prefill_s: float | None,
    law_source: str = "engine",
    variance_state: bool = True,
    per_server: bool = False,
) -> str:
    """Run the case's engine and fluid on ``seeds`` and compare both pathwise models
    (``spreads`` = total, server; ``prefill_s`` None: the flat run's). ``per_server``: the
    model runs on one server (split arrivals, round-robin or random: each server queues alone)
    fed ``1 / servers`` of the region's minute counts, its count spread ``spreads[0]`` (one
    server's, by router), no pooled wait given full."""
    capacity = _capacity_rps(case)
    sc = case.scenario()
    n_minutes = math.ceil(sc.days * 1440)
    slots = _slots(case)
    if law_source == "engine":
        law = residence_law(case, slots, capacity)
    else:
        z = spreads[0] if per_server else FMP.server_count_spread(*spreads, case.servers)
        law = fluid_residence_law(
            case, slots, capacity, z if law_source == "fluid-spread" else None
        )
        if law_source == "fluid-spread":  # the queue drains at the law's saturated rate
            capacity = case.servers * slots / (law.r0 + law.r1 * slots)
    pre = law.prefill_s if prefill_s is None else prefill_s

    def cohort(counts: np.ndarray) -> np.ndarray:
        if per_server:
            k = case.servers
            return cohort_wait_by_minute(counts / k, 1, slots, law.r0, law.r1, law.n_ref,
                                         law.survival, capacity / k, pre, spreads[0], 0.0, 0.0,
                                         SUBSTEPS_PER_MINUTE, variance_state)  # fmt: skip
        return cohort_wait_by_minute(counts, case.servers, slots, law.r0, law.r1, law.n_ref,
                                     law.survival, capacity, pre, *spreads, wait_full_s,
                                     SUBSTEPS_PER_MINUTE, variance_state)  # fmt: skip

    eng, flu, lin, coh = [], [], [], []
    per_minute = {"lindley": [], "cohort": [], "engine": [], "weight": []}
    for seed in seeds:
        sim = local_simulation(sc, "request", "iteration", case.local, seed, record_requests=True)
        res = sim.run()
        counts, served, sums = minute_sums(res.requests.arrival_s, res.requests.ttft_s,
                                           n_minutes)  # fmt: skip
        c = counts.astype(float)
        w_l = lindley_wait_by_minute(c, capacity, SUBSTEPS_PER_MINUTE)
        w_c = cohort(c)
        eng.append(float(res.metrics["ttft_mean_s"]))
        flu.append(float(local_run_metrics(sc, "fluid", "iteration", case.local, seed)
                         ["ttft_mean_s"]))  # fmt: skip
        lin.append(float(np.dot(w_l, served) / served.sum()))
        coh.append(float(np.dot(w_c, served) / served.sum()))
        per_minute["lindley"].append(w_l)
        per_minute["cohort"].append(w_c)
        per_minute["engine"].append(np.where(served > 0, sums / np.maximum(served, 1), 0.0)
                                    - law.flat_ttft_s)  # fmt: skip
        per_minute["weight"].append(served)
    eng_a, flu_a, lin_a, coh_a = map(np.asarray, (eng, flu, lin, coh))
    # the cohort model's own wait at the flat load (its spreads give one): the engine's flat
    # TTFT holds the stationary wait, so the noise's part is the model's wait less this
    flat = np.full(n_minutes, case.util * capacity * SECONDS_PER_MINUTE)
    coh_flat = float(cohort(flat)[n_minutes // 2 :].mean())
    coh_a = coh_a - coh_flat
    noise = eng_a.mean() - law.flat_ttft_s
    err, se = paired_error(eng_a, flu_a)
    lines = [
        f"{case.name}: {len(eng)} seeds, {case.servers} servers x {slots} slots, saturated "
        f"{capacity:.2f} req/s; residence law from the {law_source}: {law.r0:.3f} + "
        f"{law.r1:.4f} n s, {law.n_ref:.2f} running per server at the flat load; prefill "
        f"{pre:.4f} s, spreads {spreads[0]:g} / {spreads[1]:g}, wait given full {wait_full_s:g} s,"
        f" count variance {'carried' if variance_state else 'stationary'}"
        f"{', per server' if per_server else ''}",
        f"  mean TTFT: engine {eng_a.mean():.4f} s, fluid {flu_a.mean():.4f} s ({err:+.2%} +- "
        f"{se:.2%}, paired); engine at the flat load {law.flat_ttft_s:.4f} s, so the noise's "
        f"part {noise:.4f} s",
    ]
    lines.append(f"  cohort model's wait at the flat load {coh_flat:.4f} s (taken off its figures)")
    for name, arr in (("lindley", lin_a), ("cohort", coh_a)):
        corr = float(np.corrcoef(arr, eng_a)[0, 1]) if arr.size > 1 else math.nan
        rel = arr.mean() / noise - 1
        ttft_err, ttft_se = paired_error(eng_a, law.flat_ttft_s + arr)
        lines.append(f"  {name}: mean wait {arr.mean():.4f} s ({rel:+.2%} of the noise's part; "
                     f"as TTFT, flat + wait, {ttft_err:+.2%} +- {ttft_se:.2%}), correlation "
                     f"with the engine over seeds {corr:.4f}")  # fmt: skip
    # what a fluid with this noise term would read: its own flat-load TTFT (the stationary
    # part, deterministic) plus the cohort model's noise part
    flat_fluid = float(local_run_metrics(replace(case, sigma=0.0).scenario(), "fluid",
                                         "iteration", case.local, 0)["ttft_mean_s"])  # fmt: skip
    both_err, both_se = paired_error(eng_a, flat_fluid + coh_a)
    lines.append(f"  cohort on the fluid's own flat TTFT ({flat_fluid:.4f} s), a pathwise "
                 f"fluid's figure: {both_err:+.2%} +- {both_se:.2%}")  # fmt: skip
    cat = {k: np.concatenate(v) for k, v in per_minute.items()}
    cat["cohort"] = cat["cohort"] - coh_flat
    for name in ("lindley", "cohort"):
        lines.append(f"  engine TTFT less its flat value against {name}, per minute:")
        lines += _bin_table(cat[name], cat["engine"], cat["weight"])
    return "\n".join(lines)


STATE_EDGES = (0.0, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.2, math.inf)
STATE_BIN_S = 5.0  # the completion rate's bins


def count_at(times_s: np.ndarray, arrival_s: np.ndarray, finish_s: np.ndarray) -> np.ndarray:
    """Requests in the system (arrived, not finished) at each of ``times_s``; an arrival at the
    instant itself is not counted yet, a request finishing then no longer is."""
    fin = np.sort(finish_s[np.isfinite(finish_s)])
    return np.searchsorted(np.sort(arrival_s), times_s, side="left") - np.searchsorted(
        fin, times_s, side="right"
    )


def engine_states(case: CalibrationCase, seeds: range, slots: int, capacity: float) -> str:
    """What an arrival meets at the region's count ``N`` (in units of its slots): the share that
    waits for a slot, the mean wait, the spread of one server's count about the region's share
    (variance over servers, ``n / (n - 1)`` corrected, / mean, 1 s samples), and the completion
    rate over the saturated rate in ``STATE_BIN_S`` bins where ``N`` rose and where it fell."""
    sc = case.scenario()
    edges = np.asarray(STATE_EDGES)
    n_bins = edges.size - 1
    total = case.servers * slots
    # rows: arrivals, waiting, wait sum, count variance sum, count mean sum, completions rising,
    # completions falling, bins rising, bins falling
    acc = np.zeros((9, n_bins))

    def add(row, b, weights=None):
        acc[row] += np.bincount(b, weights=weights, minlength=n_bins)

    def bins(x):
        return np.clip(np.searchsorted(edges, x, side="right") - 1, 0, n_bins - 1)

    for seed in seeds:
        sim = local_simulation(sc, "request", "iteration", case.local, seed, record_requests=True)
        fr = sim.run().requests
        arr = fr.arrival_s.to_numpy()
        fin = fr.finish_s.to_numpy()
        # an arrival's wait for a slot: its TTFT less its first iteration and the residual
        # iteration it met
        wait = (fr.ttft_s - fr.first_iteration_s - fr.arrival_residual_s).to_numpy()
        ok = np.isfinite(wait)
        b = bins(count_at(arr, arr, fin) / total)[ok]
        add(0, b)
        add(1, b, (wait[ok] > 0.01).astype(float))
        add(2, b, wait[ok])
        ts = np.arange(1.0, sc.days * 86400.0, 1.0)
        srv = fr.server.to_numpy()
        per = np.stack([count_at(ts, arr[srv == j], fin[srv == j]) for j in range(case.servers)])
        bt = bins(per.sum(0) / total)
        if case.servers > 1:
            add(3, bt, per.var(0, ddof=1))
            add(4, bt, per.mean(0))
        t5 = np.arange(0.0, sc.days * 86400.0 + STATE_BIN_S, STATE_BIN_S)
        n5 = count_at(t5, arr, fin)
        done = np.histogram(fin[np.isfinite(fin)], bins=t5)[0] / STATE_BIN_S / capacity
        b5 = bins(0.5 * (n5[1:] + n5[:-1]) / total)
        rose = n5[1:] > n5[:-1]
        add(5, b5[rose], done[rose])
        add(6, b5[~rose], done[~rose])
        add(7, b5[rose])
        add(8, b5[~rose])
    with np.errstate(invalid="ignore", divide="ignore"):
        waiting, mean_wait = acc[1] / acc[0], acc[2] / acc[0]
        spread, rising, falling = acc[3] / acc[4], acc[5] / acc[7], acc[6] / acc[8]
    lines = [f"{case.name}, engine, seeds {seeds.start}-{seeds.stop - 1}, by N / (region's slots):"]
    for i in range(n_bins):
        if acc[0, i]:
            lines.append(
                f"  [{edges[i]:.2f}, {edges[i + 1]:.2f}): arrivals {int(acc[0, i]):8d}, waiting "
                f"{waiting[i]:.3f}, mean wait {mean_wait[i]:.3f} s, server spread "
                f"{spread[i]:.3f}, completions / saturated rate rising {rising[i]:.3f} falling "
                f"{falling[i]:.3f}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    cases = {c.name: c for c in ALL_CASES}
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", required=True, choices=sorted(cases), metavar="CASE",
                    help="a calibration case (bench/calibration_cases.py)")  # fmt: skip
    ap.add_argument("--seeds", type=int, default=64)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--total-spread", type=float, default=DEFAULT_TOTAL_SPREAD)
    ap.add_argument("--server-spread", type=float, default=DEFAULT_SERVER_SPREAD)
    ap.add_argument("--wait-full-s", type=float, default=DEFAULT_WAIT_FULL_S)
    ap.add_argument(
        "--prefill-s", type=float, default=None, help="prefill stall per prompt (0: none)"
    )
    ap.add_argument(
        "--law",
        choices=("engine", "fluid", "fluid-spread"),
        default="engine",
        help="the cohort model's residence law from flat engine runs (default) or as the fluid "
        "model's profile gives it (fluid-spread: with the count spread's terms in the slots "
        "held, fluid_residence_law)",
    )
    ap.add_argument(
        "--count-variance",
        choices=("state", "stationary"),
        default="state",
        help="the region's count variance about the path: carried step to step (default; "
        "count_variance_step) or the stationary count law's (as until 2026-12-06)",
    )
    ap.add_argument(
        "--per-server",
        action="store_true",
        help="run the model per server on 1 / servers of the region's counts (split arrivals: "
        "round-robin, random); --total-spread is then one server's count spread",
    )
    ap.add_argument(
        "--engine-states",
        action="store_true",
        help="print the engine's waits, count spread and completion rate by the region's count",
    )
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.first_seed < 0:
        ap.error("--seeds must be >= 1 and --first-seed >= 0")
    values = (args.total_spread, args.server_spread, args.wait_full_s, args.prefill_s or 0.0)
    if min(values) < 0:
        ap.error("--total-spread, --server-spread, --wait-full-s and --prefill-s must be >= 0")
    if cases[args.case].demo:
        ap.error(f"--case {args.case}: the probe takes single-region cases, not the demo's")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    case = cases[args.case]
    if args.engine_states:
        print(engine_states(case, seeds, _slots(case), _capacity_rps(case)))
        return
    spreads = (args.total_spread, args.server_spread)
    state = args.count_variance == "state"
    print(probe(case, seeds, spreads, args.wait_full_s, args.prefill_s, args.law, state,
                args.per_server))  # fmt: skip


if __name__ == "__main__":
    main()
