"""Preparing a scenario for simulation: the built cluster, epoch signals, facility factors,
network latency, the workload (requests or per-epoch counts) and the service model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from greenroute.core.errors import ConfigError
from greenroute.core.types import (
    N_CLASSES,
    ClusterInfo,
)
from greenroute.data.requests import Requests
from greenroute.sim.cluster import BuiltCluster, build_cluster
from greenroute.sim.epoch_signals import EpochSignals, build_epoch_signals
from greenroute.sim.scenario import Scenario, TraceWorkload
from greenroute.sim.service import N_LENGTH_SAMPLES, ServiceModel

# signals and demand are prepared this many epochs past the run, so that policies asking for
# a long look-ahead (``horizon_epochs``) see real data at the end of the run too
LOOKAHEAD_PAD_EPOCHS = 192


@dataclass
class Prepared:
    """Everything that does not depend on the policy: reusable across policies of a compare."""

    scenario: Scenario
    seed: int
    data_dir: Path | None
    built: BuiltCluster
    signals: EpochSignals
    factors: object  # FacilityFactors over [T, R]
    latency_s: np.ndarray  # [O, R] one way
    requests: Requests | None  # request fidelity
    counts: np.ndarray | None  # fluid fidelity: [E, O, C, M]
    # fluid fidelity, synthetic workload with minute noise: (start_s [P], length_s [P], counts
    # [P, O] float32), arrivals per piece of the horizon (minutes cut at epoch bounds)
    piece_counts: tuple | None
    expected_rps: np.ndarray  # [E+H, C, O] noise-free arrival rates
    observed_rps: np.ndarray  # [E+H, C, O] realised arrival rates
    service: ServiceModel
    class_stats: dict[str, np.ndarray]
    notes: list[str]
    input_files: dict[str, str]
    workload_source: str
    prompt_sample: np.ndarray  # interactive prompt lengths (fluid TTFT percentiles)
    util_grid: np.ndarray | None = None
    wait_curve_s: np.ndarray | None = None
    slo_miss_curve: np.ndarray | None = None
    reference_scales: dict | None = None  # filled by greenroute.api (local-only, fluid)

    @property
    def n_epochs(self) -> int:
        return self.scenario.n_epochs


def _seed_int(seed: int, *tag: int) -> int:
    return int(np.random.SeedSequence([seed, *tag]).generate_state(1)[0])


def prepare(scenario: Scenario, seed: int = 0, data_dir: Path | None = None) -> Prepared:
    """Build the cluster, signals, workload and service model of a scenario."""
    from greenroute.data import lengths, trace_replay
    from greenroute.data import workload as W
    from greenroute.physics.network import latency_matrix_s, network_preset
    from greenroute.sim.bounds import check_window

    notes: list[str] = []
    use_real = data_dir is not None and scenario.real_data
    # every caller (API, envs, benchmarks) gets the window and memory checks before any work
    scenario, _ = check_window(scenario, data_dir if use_real else None)
    built = build_cluster(scenario.cluster, scenario.models, data_dir=None)
    n_e, h = scenario.n_epochs, max(scenario.horizon, LOOKAHEAD_PAD_EPOCHS)
    signals = build_epoch_signals(
        scenario.regions,
        scenario.start_utc,
        n_e + h + 1,
        scenario.epoch_s,
        _seed_int(seed, 1) % (2**31),
        data_dir if use_real else None,
    )
    if not use_real and scenario.real_data:
        notes.append("no --data-dir: grid signals synthesised from the embedded profiles")
    facility = scenario_facility(scenario)
    factors = facility.factors(
        temp_c=signals.temp_c,
        wetbulb_c=signals.wetbulb_c,
        carbon_intensity_g_per_kwh=signals.carbon_intensity_g_per_kwh,
        price_usd_per_kwh=signals.price_usd_per_kwh,
        ewif_l_per_kwh=signals.water_intensity_l_per_kwh,
    )
    if scenario.network:
        latency = latency_matrix_s(
            scenario.origin_coords(data_dir), scenario.region_coords(data_dir),
            **network_preset(scenario.facility),
        )  # fmt: skip
    else:
        latency = np.zeros((len(scenario.origins), len(scenario.regions)))
    scenario.constraints.check_feasible(
        scenario.origins, scenario.regions, scenario.duration_s, scenario.epoch_s, latency,
        idle_power_kw=built.region_idle_kw(),
    )  # fmt: skip
    notes.extend(_power_cap_notes(scenario, built))
    n_o, n_m = len(scenario.origins), len(scenario.models)
    rng_len = np.random.default_rng(_seed_int(seed, 2))
    input_files = dict(signals.files)
    requests = None
    counts = None
    pieces = None
    wl = scenario.workload
    t_total = n_e + h + 1
    if isinstance(wl, TraceWorkload):
        trace_path = scenario.trace_path(data_dir)
        if trace_path is not None:
            from greenroute.data.paths import file_sha256
            from greenroute.data.traces import load_azure_llm_trace

            df = load_azure_llm_trace(trace_path)
            input_files[wl.file] = file_sha256(trace_path)
            if wl.subsample_every > 1:
                df = df.iloc[:: wl.subsample_every].reset_index(drop=True)
                df["arrival_s"] = df["arrival_s"] - df["arrival_s"].iloc[0]
            if wl.first_n is not None and wl.window_s is not None:
                requests = trace_replay.compress_to_window(
                    df, wl.first_n, wl.window_s, origin=wl.origin, model=wl.model
                )
            else:
                requests = trace_replay.requests_from_trace(
                    df, origin=wl.origin, model=wl.model, first_n=wl.first_n
                )
            keep = requests.arrival_s < scenario.horizon_s
            requests = requests.take(np.flatnonzero(keep))
            workload_source = f"trace:{wl.file}"
            length_p = [requests.prompt_tokens, np.array([], dtype=float)]
            length_o = [requests.output_tokens, np.array([], dtype=float)]
            mix = np.zeros((N_CLASSES, n_m))
            mix[:, wl.model] = 1.0
            rate = np.zeros((t_total, N_CLASSES, n_o))
            cnt = requests.counts_by_epoch(scenario.epoch_s, t_total, n_o, n_m)
            rate[:, :, :] = cnt.sum(axis=3).transpose(0, 2, 1) / scenario.epoch_s
            expected = np.repeat(rate[:n_e].mean(axis=0, keepdims=True), t_total, axis=0)
            observed = rate
        else:
            if wl.fallback is None:
                raise ConfigError(f"scenario {scenario.name} needs --data-dir (trace {wl.file})")
            notes.append(
                f"no --data-dir: trace {wl.file} replaced by a synthetic workload of the same shape"
            )
            wl = wl.fallback
    if not isinstance(wl, TraceWorkload):
        spec = wl
        workload_source = "synthetic"
        mix = np.zeros((N_CLASSES, n_m))
        for k, m in enumerate(spec.models):
            if m not in scenario.models:
                raise ConfigError(f"workload model {m!r} not in scenario models {scenario.models}")
            mix[:, scenario.models.index(m)] = spec.model_mix[k]
        lm_i = lengths.get_length_model(spec.interactive_lengths)
        lm_d = lengths.get_length_model(spec.deferrable_lengths)
        pi, oi = lm_i.sample(N_LENGTH_SAMPLES, rng_len)
        pd_, od = lm_d.sample(N_LENGTH_SAMPLES, rng_len)
        length_p, length_o = [pi, pd_], [oi, od]
        exp = W.expected_rate_rps(spec, scenario.start_utc, scenario.epoch_s, t_total)
        expected = exp.transpose(0, 2, 1)  # [T, C, O]
        wseed = _seed_int(seed, 3) % (2**31)
        if scenario.fidelity == "request":
            requests = W.generate_requests(spec, scenario.start_utc, scenario.horizon_s, wseed)
            cnt = requests.counts_by_epoch(scenario.epoch_s, t_total, n_o, n_m)
        else:
            pcs = W.sample_piece_counts(spec, scenario.start_utc, scenario.epoch_s, t_total, wseed)
            cnt = pcs.by_epoch(scenario.epoch_s, t_total)
            counts = cnt[:n_e].astype(float)
            if spec.rate_noise_sigma > 0:  # the seed's own minutes (``sim/fluid_path_noise``)
                pieces = (pcs.start_s, pcs.length_s, pcs.counts.sum(axis=(2, 3), dtype=np.float32))
        observed = cnt.sum(axis=3).transpose(0, 2, 1) / scenario.epoch_s
    if scenario.fidelity == "fluid" and counts is None:
        assert requests is not None
        counts = requests.counts_by_epoch(scenario.epoch_s, n_e, n_o, n_m).astype(float)
        requests = None
    service = ServiceModel.from_samples(built, length_p, length_o, mix)
    class_stats = service.region_class_stats(server_model=scenario.resolved_server_model)
    sigma = 0.0 if isinstance(wl, TraceWorkload) else float(wl.rate_noise_sigma)
    from greenroute.sim.fluid import queue_curves

    grid, wait_c, miss_c = queue_curves(
        built, service, np.asarray(length_p[0]), prep_slo(scenario), sigma, prep_origins(scenario)
    )
    return Prepared(
        scenario=scenario,
        seed=seed,
        data_dir=data_dir,
        built=built,
        signals=signals,
        factors=factors,
        latency_s=latency,
        requests=requests,
        counts=counts,
        piece_counts=pieces,
        expected_rps=expected,
        observed_rps=observed,
        service=service,
        class_stats=class_stats,
        notes=notes,
        input_files=input_files,
        workload_source=workload_source,
        prompt_sample=np.asarray(length_p[0]),
        util_grid=grid,
        wait_curve_s=wait_c,
        slo_miss_curve=miss_c,
    )


def scenario_facility(scenario: Scenario):
    """The scenario's facility model; under ``marlin`` (seed 001 §3.3) with ``COP_d`` per
    datacenter: the scenario's ``cop_d``, else each site's climate-derived value."""
    from greenroute.physics.facility import get_facility_model

    marlin = scenario.facility == "marlin"
    return get_facility_model(
        scenario.facility, regions=scenario.regions, **({"cop_d": scenario.cop_d} if marlin else {})
    )


def _power_cap_notes(scenario: Scenario, built: BuiltCluster) -> list[str]:
    """One note per hard power cap: the usable slots it leaves (see ``effective_slots``)."""
    out = []
    idle, peak = built.region_idle_kw(), built.region_peak_kw()
    for r, reg in enumerate(scenario.regions):
        cap = scenario.constraints.power_caps_kw.get(reg)
        if cap is None or cap >= peak[r]:
            continue
        frac = (cap - idle[r]) / (peak[r] - idle[r]) if peak[r] > idle[r] else 1.0
        sel = built.server_region == r
        usable = np.floor(built.server_slots[sel] * frac + 1e-9).sum()
        out.append(
            f"power cap {cap:g} kW on {reg} (idle {idle[r]:.4g} kW, peak {peak[r]:.4g} kW): "
            f"{usable:.0f} of {built.server_slots[sel].sum():.0f} slots usable"
        )
    return out


def prep_slo(scenario: Scenario) -> float:
    return float(scenario.ttft_slo_s)


def prep_origins(scenario: Scenario) -> int:
    return len(scenario.origins)


def cluster_info(prep: Prepared) -> ClusterInfo:
    sc, b = prep.scenario, prep.built
    return ClusterInfo(
        regions=sc.regions,
        origins=sc.origins,
        models=sc.models,
        epoch_s=sc.epoch_s,
        n_epochs=sc.n_epochs,
        capacity_slots=b.region_slots(),
        n_servers=b.region_servers(),
        idle_power_kw=b.region_idle_kw(),
        peak_power_kw=b.region_peak_kw(),
        latency_s=prep.latency_s,
        region_latlon=sc.region_coords(prep.data_dir),
        origin_latlon=sc.origin_coords(prep.data_dir),
        ttft_slo_s=sc.ttft_slo_s,
        scenario=sc.name,
        deadline_slack_s=_slack(sc),
    )


def _slack(sc: Scenario) -> tuple[float, float]:
    wl = sc.workload
    if isinstance(wl, TraceWorkload):
        wl = wl.fallback
    if wl is None:
        return (0.0, 0.0)
    return (float(wl.deadline_slack_s[0]), float(wl.deadline_slack_s[1]))
