"""Fluid-vs-request calibration: ``python -m greenroute.bench.calibrate [--fit]
[--server-model iteration]``.

``--server-model iteration`` compares the fluid model of iteration servers with the iteration
engine over a utilisation grid (offered rate / the sustainable rate of ``sustainable_rps``, the
same definition for both engines), local policies least-loaded and round-robin, with and
without minute noise, two seeds pooled: relative errors of carbon, energy and mean TTFT.

Runs a single-region, flat-rate workload (2 x 32-slot Llama-2-70B instances on 4 x H100,
least-loaded) at several utilisations and per-minute noise levels through both engines and
prints mean TTFT, utilisation, carbon and energy side by side. ``--fit`` grid-searches the two
fluid constants (``JSQ_POOLING_EXPONENT``, ``NOISE_SIGMA_SCALE``) for the least squared log
error of mean TTFT on points up to 75 % utilisation (takes a few minutes).
"""

from __future__ import annotations

import argparse
import functools
import itertools
from dataclasses import replace

import numpy as np
import pandas as pd

from greenroute.data.workload import WorkloadSpec
from greenroute.policies.registry import local_policy_factory, make_geo_policy
from greenroute.scenarios import get_scenario
from greenroute.sim.cluster import uniform_cluster
from greenroute.sim.engine import SimConfig, Simulation
from greenroute.sim.prepare import prepare
from greenroute.sim.scenario import Scenario

GRID_RPS = (4.0, 5.5, 6.3, 6.8, 7.1)  # utilisation ~0.44 .. 0.86
GRID_SIGMA = (0.0, 0.125, 0.21)
FIT_MAX_UTILISATION = 0.75


def calibration_scenario(rps: float, sigma: float, days: float = 0.5) -> Scenario:
    spec = WorkloadSpec(
        origins=("DE-LU",),
        origin_timezones=("UTC",),
        interactive_rps=(rps,),
        deferrable_rps=(0.0,),
        diurnal="flat",
        rate_noise_sigma=sigma,
    )
    return Scenario(
        name="calibration",
        description="single region, flat load",
        regions=("DE-LU",),
        origins=("DE-LU",),
        cluster=uniform_cluster(("DE-LU",), 2),
        workload=spec,
        start_utc=pd.Timestamp("2023-07-01", tz="UTC"),
        days=days,
        real_data=False,
    )


ITER_GRID_UTIL = (0.3, 0.45, 0.6, 0.75, 0.85)
ITER_GRID_SIGMA = (0.0, 0.125)
ITER_GRID_LOCAL = ("least-loaded", "round-robin")


DEMO_DEFERRABLE_PER_INTERACTIVE = 0.2  # the demo's 0.4 deferrable per 2.0 interactive rps
DEMO_NOISE_SIGMA = 0.2126  # the demo workload's per-minute rate noise (scenarios/demo.py)


def _work_per_request_s(sc: Scenario, deferrable_share: float) -> tuple[float, int]:
    """(server-seconds per request at the running cap for the class mix, servers per region)
    of a scenario whose regions have identical servers (``fluid_iteration``)."""
    from greenroute.sim.fluid_iteration import IterationProfile, saturation_work_s

    prep = prepare(sc.with_options(fidelity="fluid", days=0.01), 0)
    b = prep.built
    prof = IterationProfile(b, *prep.service.samples)
    types = (b.server_hw * b.n_models + b.server_model0)[:1, None]
    w = saturation_work_s(prof, types, b.server_slots[:1].astype(float))[0, :, 0]
    w_mix = (1.0 - deferrable_share) * w[0] + deferrable_share * w[1]
    return float(w_mix), int(b.region_start[1] - b.region_start[0])


def sustainable_rps() -> float:
    """The calibration region's sustainable rate on iteration servers (requests/s): servers /
    the server-seconds per interactive request at the running cap (``fluid_iteration``)."""
    return mix_sustainable_rps(0.0)


@functools.cache
def mix_sustainable_rps(deferrable_share: float) -> float:
    """The calibration region's sustainable rate on iteration servers (requests/s, its 2
    servers) for arrivals of which ``deferrable_share`` are deferrable (long prompts)."""
    w, servers = _work_per_request_s(calibration_scenario(1.0, 0.0), deferrable_share)
    return servers / w


def demo_like(util: float, sigma: float, days: float = 0.5) -> Scenario:
    """The demo's three regions (2 servers each), flat load at ``util`` of each region's
    sustainable rate on iteration servers (interactive + 0.2 deferrable per interactive)."""
    sc = get_scenario("demo")
    share = DEMO_DEFERRABLE_PER_INTERACTIVE / (1.0 + DEMO_DEFERRABLE_PER_INTERACTIVE)
    w, servers = _demo_work()
    rps = util * servers / w
    n = len(sc.origins)
    wl = replace(
        sc.workload,
        interactive_rps=((1 - share) * rps,) * n,
        deferrable_rps=(share * rps,) * n,
        diurnal="flat",
        rate_noise_sigma=sigma,
    )
    return replace(sc, name="demo-like", workload=wl, days=days)


@functools.cache
def _demo_work() -> tuple[float, int]:
    share = DEMO_DEFERRABLE_PER_INTERACTIVE / (1.0 + DEMO_DEFERRABLE_PER_INTERACTIVE)
    return _work_per_request_s(get_scenario("demo"), share)


def local_simulation(
    sc: Scenario,
    fidelity: str,
    server_model: str,
    local: str,
    seed: int,
    record_requests: bool = False,
) -> Simulation:
    """The calibration runs' simulation: ``sc`` at ``fidelity`` and ``server_model``, the
    local-only geo policy, ``local`` as every region's balancer, seed ``seed`` (the request
    frame kept with ``record_requests``)."""
    prep = prepare(sc.with_options(fidelity=fidelity, server_model=server_model), seed, None)
    cfg = SimConfig(seed=seed, record_requests=record_requests)
    return Simulation(prep, make_geo_policy("local-only"), local_policy_factory(local), cfg)


def local_run_metrics(
    sc: Scenario, fidelity: str, server_model: str, local: str, seed: int
) -> dict[str, float]:
    """One run's metrics of ``local_simulation`` (the calibration runs)."""
    return local_simulation(sc, fidelity, server_model, local, seed).run().metrics


def iteration_grid(days: float = 0.5, seeds: tuple[int, ...] = (0, 1)) -> pd.DataFrame:
    """Fluid (iteration, and slots as the 'before') vs the iteration engine over the grid:
    the single region (``calibration_scenario``) and the demo's three regions (``demo_like``)."""
    rows = []
    mu = sustainable_rps()
    cases = [
        ("1-region", lp, s, u, calibration_scenario(u * mu, s, days=days))
        for lp, s, u in itertools.product(ITER_GRID_LOCAL, ITER_GRID_SIGMA, ITER_GRID_UTIL)
    ]
    cases += [("demo-like", lp, s, u, demo_like(u, s, days=days))
              for lp, s, u in itertools.product(ITER_GRID_LOCAL, (0.0, DEMO_NOISE_SIGMA),
                                                ITER_GRID_UTIL)]  # fmt: skip
    for name, local, sigma, u, sc in cases:
        got: dict[str, list[dict]] = {"engine": [], "iteration": [], "slots": []}
        for seed in seeds:
            for label, fid, sm in (("engine", "request", "iteration"),
                                   ("iteration", "fluid", "iteration"),
                                   ("slots", "fluid", "slots")):  # fmt: skip
                got[label].append(local_run_metrics(sc, fid, sm, local, seed))
        row: dict[str, object] = {"scenario": name, "local": local, "sigma": sigma, "util": u}
        for k in ("carbon_kg", "energy_kwh", "ttft_mean_s"):
            a = float(np.mean([m[k] for m in got["engine"]]))
            row[f"engine_{k}"] = a
            for label in ("slots", "iteration"):
                b = float(np.mean([m[k] for m in got[label]]))
                row[f"{k}_err_{label}"] = (b - a) / a
        print(pd.DataFrame([row]).round(4).to_string(index=False, header=not rows), flush=True)
        rows.append(row)
    return pd.DataFrame(rows)


def _run(prep, seed: int = 0) -> dict[str, float]:
    sim = Simulation(
        prep,
        make_geo_policy("local-only"),
        local_policy_factory("least-loaded"),
        SimConfig(seed=seed),
    )
    return sim.run().metrics


def measure(rps: float, sigma: float, seed: int = 0) -> dict[str, float]:
    out: dict[str, float] = {"rps": rps, "sigma": sigma}
    for fid in ("request", "fluid"):
        sc = calibration_scenario(rps, sigma).with_options(fidelity=fid, server_model="slots")
        prep = prepare(sc, seed, None)
        m = _run(prep, seed)
        out[f"{fid}_ttft_s"] = m["ttft_mean_s"]
        out[f"{fid}_util"] = m["utilisation_DE-LU"]
        out[f"{fid}_carbon_kg"] = m["carbon_kg"]
        out[f"{fid}_energy_kwh"] = m["energy_kwh"]
    return out


def fit(df: pd.DataFrame) -> tuple[float, float]:
    from greenroute.sim import fluid as F

    preps = {
        (r, s): prepare(
            calibration_scenario(r, s).with_options(fidelity="fluid", server_model="slots"), 0, None
        )
        for r, s in zip(df["rps"], df["sigma"], strict=True)
    }
    sel = df["request_util"] <= FIT_MAX_UTILISATION
    target = np.log(df.loc[sel, "request_ttft_s"].to_numpy())
    old = (F.JSQ_POOLING_EXPONENT, F.NOISE_SIGMA_SCALE)
    best = (np.inf, *old)
    try:
        for x, k in itertools.product(np.arange(0.3, 1.01, 0.05), np.arange(0.3, 1.01, 0.05)):
            F.JSQ_POOLING_EXPONENT, F.NOISE_SIGMA_SCALE = float(x), float(k)
            pairs = zip(df["rps"], df["sigma"], strict=True)
            pred = np.array([_run(preps[(r, s)])["ttft_mean_s"] for r, s in pairs])
            err = float(((np.log(pred[sel.to_numpy()]) - target) ** 2).sum())
            if err < best[0]:
                best = (err, float(x), float(k))
    finally:
        F.JSQ_POOLING_EXPONENT, F.NOISE_SIGMA_SCALE = old
    return best[1], best[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="grid-search the fluid constants")
    parser.add_argument("--server-model", choices=("slots", "iteration"), default="slots",
                        help="the server model to calibrate against")  # fmt: skip
    args = parser.parse_args()
    pd.set_option("display.width", 200)
    if args.server_model == "iteration":
        print(f"sustainable rate {sustainable_rps():.3f} requests/s (utilisation = rate / it)")
        iteration_grid()
        return
    df = pd.DataFrame([measure(r, s) for s in GRID_SIGMA for r in GRID_RPS])
    err = (df["fluid_ttft_s"] - df["request_ttft_s"]) / df["request_ttft_s"]
    df["ttft_rel_err"] = err
    df["energy_rel_err"] = (df["fluid_energy_kwh"] - df["request_energy_kwh"]) / df[
        "request_energy_kwh"
    ]
    pd.set_option("display.width", 200)
    print(df.round(4).to_string(index=False))
    if args.fit:
        x, k = fit(df)
        print(f"best JSQ_POOLING_EXPONENT = {x:.2f}, NOISE_SIGMA_SCALE = {k:.2f}")


if __name__ == "__main__":
    main()
