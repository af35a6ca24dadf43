"""The fluid model of iteration servers (``sim/fluid_iteration.py``) against the iteration
engine (issue 8): carbon and energy within 1 %, mean TTFT within 5 % at 60-85 % utilisation.

Utilisation here (both engines): offered rate / the iteration server's sustainable rate
``1 / w`` (``fluid_iteration.saturation_work_s``: 2.834 requests/s per 4 x H100 Llama-2-70B
server; a saturated iteration engine run serves 2.83/s). Single region, 2 servers, flat load
(``bench/calibrate.py``), six seeds pooled, a quarter day each.
``python -m greenroute.bench.calibrate --server-model iteration`` prints the wider grid.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from greenroute.bench.calibrate import calibration_scenario, demo_like, sustainable_rps
from greenroute.policies.registry import local_policy_factory, make_geo_policy
from greenroute.sim.cluster import uniform_cluster
from greenroute.sim.engine import SimConfig, Simulation
from greenroute.sim.prepare import prepare

ENERGY_TOL = 0.01  # carbon and energy (issue 8)
TTFT_TOL = 0.05  # mean TTFT at 60-85 % utilisation (issue 8)
# Six seeds, a quarter day each. With two (seeds 0-1, until 2026-11-26) the minute-noise cases at
# 75-85 % passed or failed by the seeds drawn (least-loaded 75 % with noise: -4.9 % on seeds 0-1,
# +5.1 % pooled over seeds 0-5; 85 %: -1.7 % / +6.9 %; the engine's own mean TTFT there spans
# 0.24-0.32 s and 0.86-1.35 s over those seeds); six make the verdict the model's, not the
# draw's: docs/fluid_iteration_gap.md, "Two seeds are not enough for the noisy cases".
SEEDS = (0, 1, 2, 3, 4, 5)
DAYS = 0.25


def _metrics(sc, fidelity: str, server_model: str, local: str, seed: int) -> dict:
    prep = prepare(sc.with_options(fidelity=fidelity, server_model=server_model), seed, None)
    sim = Simulation(prep, make_geo_policy("local-only"), local_policy_factory(local),
                     SimConfig(seed=seed))  # fmt: skip
    return sim.run().metrics


def pooled_errors(
    local: str,
    util: float,
    sigma: float,
    fluid_model: str = "iteration",
    demo: bool = False,
    servers: int = 2,
):
    """Relative error (fluid - engine) / engine of carbon, energy and mean TTFT, seeds pooled
    (``demo``: the demo's three regions, ``bench.calibrate.demo_like``; ``servers``: the single
    region's server count, the rate scaled to keep ``util``)."""
    if demo:
        sc = demo_like(util, sigma, days=DAYS)
    else:
        sc = calibration_scenario(util * sustainable_rps() * servers / 2, sigma, days=DAYS)
        if servers != 2:
            sc = replace(sc, cluster=uniform_cluster(("DE-LU",), servers))
    keys = ("carbon_kg", "energy_kwh", "ttft_mean_s")
    eng = [_metrics(sc, "request", "iteration", local, s) for s in SEEDS]
    flu = [_metrics(sc, "fluid", fluid_model, local, s) for s in SEEDS]
    out = {}
    for k in keys:
        a = float(np.mean([m[k] for m in eng]))
        b = float(np.mean([m[k] for m in flu]))
        out[k] = (b - a) / a
    return out


def failures(err: dict) -> list[str]:
    tol = {"carbon_kg": ENERGY_TOL, "energy_kwh": ENERGY_TOL, "ttft_mean_s": TTFT_TOL}
    return [f"{k}: {v:+.2%}" for k, v in err.items() if not abs(v) <= tol[k]]


def _xfail(why: str):
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=why)


# measured 2026-11-26 (two seeds pooled, a quarter day): energy/carbon -0.2..-0.5 % in every case.
# Minute noise: the slot wait is averaged over the noise nodes, each node's stationary M/G/32
# wait weighted by how far it relaxes within the minute (Odoni & Roth's relaxation time); before
# that (the mean-rate wait + the Lindley backlog only) the noisy cases read -22 % and -6 %, and
# the full quasi-stationary average (no relaxation) +73 % and +93 %. Prompts queued ahead in
# FCFS (``IterationProfile.ahead``) moved the single region from -2..0 % to +3..+5 % and the demo
# mix from -14.5/-16.7 % to -8.4/-12.3 %.
# Round-robin (2026-11-26, evening): split arrivals get their own wait (``split_wait``: a
# birth-death queue per server, the saturated rate at the cap, Hayward's peakedness for the
# Erlang-k gaps) and residual (``erlang_overlap``); before, round-robin read +9.7 / +4.7 / -11.0 %
# at 60 / 75 / 85 % on the least-loaded model (docs/fluid_iteration_gap.md).
# Least-loaded (2026-11-26, late): the per-server M/G/S wait at the peakedness of the running
# count that the router leaves (``sim/fluid_route_wait.py``: a noisy join-the-least-work router
# over N servers, linearised, plus the prefill-stall overdispersion; Hayward's approximation);
# before it, least-loaded read +4.4 / +4.0 / +3.2 % and +4.8 / -0.3 / +1.5 % with noise.
# Queued prompts behind least-loaded (2026-11-26, night): the router seldom picks a server whose
# score holds a queued prompt, so only ``fluid_route_wait.queued_prompt_share`` of the
# prompts-ahead term is met; under minute noise the fixed part is arrival-weighted over the
# noise nodes as the wait is. Before: +4.4 / +3.3 / -1.4 % and +4.6 / -3.0 / -1.1 % with noise.
# The figures beside each case are six seeds pooled (the test's SEEDS), measured 2026-11-26;
# those quoted as "before" above were seeds 0-1.
_LL_NOISE = (
    "least-loaded with minute noise at {u}: TTFT {e} over seeds 0-5 (on seeds 0-1 alone it "
    "passed: {e01}); the engine's mean TTFT per seed spans {span}: the noise realisation of a "
    "quarter day dominates, and the model's noise-averaged wait overshoots the six-seed mean "
    "(docs/fluid_iteration_gap.md, 'Two seeds are not enough for the noisy cases')"
)
CASES = [  # local policy, utilisation, noise sigma, why it fails (None: passes)
    ("least-loaded", 0.60, 0.0, None),  # TTFT +2.1 %
    ("least-loaded", 0.75, 0.0, None),  # TTFT +1.6 %
    ("least-loaded", 0.85, 0.0, None),  # TTFT -1.0 %
    ("least-loaded", 0.60, 0.125, None),  # TTFT +2.4 %
    ("least-loaded", 0.75, 0.125,
     _LL_NOISE.format(u="75 %", e="+5.1 %", e01="-4.9 %", span="0.24-0.32 s")),
    ("least-loaded", 0.85, 0.125,
     _LL_NOISE.format(u="85 %", e="+6.9 %", e01="-1.7 %", span="0.86-1.35 s")),
    ("round-robin", 0.60, 0.0, None),  # TTFT +0.2 %
    ("round-robin", 0.75, 0.0, None),  # TTFT -3.2 %
    ("round-robin", 0.85, 0.0, None),  # TTFT +4.9 %
]  # fmt: skip


@pytest.mark.parametrize(
    ("local", "util", "sigma"),
    [pytest.param(lp, u, s, marks=[_xfail(why)] if why else []) for lp, u, s, why in CASES],
)
def test_fluid_matches_iteration_engine(local, util, sigma):
    assert failures(pooled_errors(local, util, sigma)) == []


# Cases beyond the list for the split-arrival wait: another load, four servers (Erlang-4
# gaps), random routing (Poisson thinning; the least-loaded model read -49 % at 85 %). No
# constant is fitted to them; random and four servers at 85 % were looked at while the model's
# form was chosen (docs/fluid_iteration_gap.md), 70 % was not.
# Least-loaded over four servers read +41.5 % on the per-server M/G/S wait (no dependence on the
# server count); the routed peakedness (``fluid_route_wait``) was written after that was
# measured, with no constant fitted to it.
_RND75 = (
    "random at 75 %: the birth-death chain misses most of the engine's slot wait at moderate load "
    "(TTFT -12.9 % over seeds 0-5, -14.7 % on seeds 0-1; +0.2 % at 85 %). Measured: the "
    "engine's running count at arrival has variance 33.1 at mean 20.7 (Poisson: 20.7), 5.1 % "
    "of arrivals meet a full server, the chain gives 1.8 % (docs/fluid_iteration_gap.md)"
)
HELD_OUT = [  # local policy, utilisation, servers, why it fails (None: passes)
    ("round-robin", 0.70, 2, None),  # TTFT -0.6 %
    ("round-robin", 0.85, 4, "round-robin over 4 servers at 85 %: TTFT +6.1 % over seeds 0-5 "
     "(+3.1 % on seeds 0-1); the birth-death chain with Erlang-4 gaps overshoots, not decomposed"),
    ("random", 0.85, 2, None),  # TTFT +0.2 %
    ("random", 0.75, 2, _RND75),
    ("least-loaded", 0.85, 4, None),  # TTFT +0.9 % (+5.8 % before the queued-prompt share)
    # run only after the routed peakedness was final (M/G/S before: +6.7, +29.5, +10.9, +54.5 %;
    # routed peakedness: +4.9, +2.0, +8.0, +5.7 %, the last two strict xfails, their miss in the
    # fixed part); now, with the queued-prompt share:
    ("least-loaded", 0.80, 2, None),  # TTFT +2.6 %
    ("least-loaded", 0.85, 3, None),  # TTFT +2.7 %
    ("least-loaded", 0.75, 4, None),  # TTFT +3.5 %
    ("least-loaded", 0.85, 8, None),  # TTFT +0.4 %
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("local", "util", "servers"),
    [pytest.param(lp, u, n, marks=[_xfail(why)] if why else []) for lp, u, n, why in HELD_OUT],
)
def test_fluid_matches_iteration_engine_held_out(local, util, servers):
    assert failures(pooled_errors(local, util, 0.0, servers=servers)) == []


# The demo's three regions: interactive + 0.2 deferrable (long vidur-arxiv prompts, mean 2600
# tokens) per interactive request, utilisation of each region's sustainable rate for that mix.
_DEMO_NOISE = (
    "demo mix, least-loaded, 85 % with minute noise: TTFT +18.7 % over seeds 0-5 (+12.1 % on "
    "seeds 0-1; +12.5 % before the queued-prompt share, +11.0 % before the routed peakedness; "
    "+0.9 % without noise): the excess is in the minute-noise part of the wait, which is "
    "hypersensitive to capacity here (the fluid at 0.85 / 1.0374 reads -32 %), and a saturated "
    "engine serves 3.8 % more demo-mix work per second than the fluid's 1 / w (interactive "
    "alone: -0.5 %); not explained (docs/fluid_iteration_gap.md)"
)
_DEMO_LL75 = (
    "demo mix, least-loaded, 75 %: TTFT -8.4 % over seeds 0-5, -8.7 % on seeds 0-1 (-6.6 % "
    "before the queued-prompt share, -8.4 % before the routed peakedness; +0.2 % at 60 %, "
    "+0.9 % at 85 %). The slot wait is short: "
    "the engine finds a full server for 6.2 % of arrivals (delay there 0.57 s, one seed), the "
    "model's P(wait) was 0.006 before the routed peakedness; the count's spread under the long "
    "deferrable prompts at moderate load is wider than the routed peakedness gives, not "
    "decomposed further (docs/fluid_iteration_gap.md)"
)
DEMO_CASES = [
    ("least-loaded", 0.60, 0.0, None),  # TTFT +0.2 % (+2.2 % before the queued-prompt share)
    # -8.4 % before the routed peakedness (fluid_route_wait), -6.6 % before the queued-prompt
    # share
    ("least-loaded", 0.75, 0.0, _DEMO_LL75),
    # -12.3 % before the routed peakedness, -2.0 % before the queued-prompt share
    ("least-loaded", 0.85, 0.0, None),  # TTFT +0.9 %
    # held out when the noise model was chosen (it was +20 % / +63 % before)
    ("least-loaded", 0.85, 0.125, _DEMO_NOISE),
    # held out for the split-arrival wait (it read +2.4 % on the least-loaded model)
    ("round-robin", 0.80, 0.0, None),  # TTFT -3.9 % (-6.8 % on seeds 0-1 alone)
]  # fmt: skip


@pytest.mark.parametrize(
    ("local", "util", "sigma"),
    [pytest.param(lp, u, s, marks=[_xfail(why)] if why else []) for lp, u, s, why in DEMO_CASES],
)
def test_fluid_matches_iteration_engine_on_three_regions(local, util, sigma):
    assert failures(pooled_errors(local, util, sigma, demo=True)) == []


def test_slots_fluid_fails_against_the_iteration_engine():
    """The check is not vacuous: the slots-model fluid (per-slot service times, prefill at the
    per-slot power) misses the iteration engine (measured: energy -17.9 %, TTFT -26.8 %)."""
    err = pooled_errors("least-loaded", 0.60, 0.0, fluid_model="slots")
    assert [f.split(":")[0] for f in failures(err)] == ["carbon_kg", "energy_kwh", "ttft_mean_s"]


def test_sustainable_rate_is_the_engines_saturated_throughput():
    """Utilisation's denominator: 1 / (server-seconds per request at 32 running) from the cost
    tables; an overloaded iteration engine (3 x that rate offered) completes it within 1 %."""
    mu = sustainable_rps()
    assert mu == pytest.approx(5.691, rel=1e-3)  # 2 servers x 2.846 requests/s
    sc = calibration_scenario(3.0 * mu, 0.0, days=DAYS)
    m = _metrics(sc, "request", "iteration", "least-loaded", 0)
    # the first epochs fill the servers: count the completions over the whole quarter day
    assert m["requests_completed"] / (DAYS * 86400.0) == pytest.approx(mu, rel=0.01)


def test_compiled_running_batch_equals_the_numpy_reference():
    from greenroute.sim import fluid_iteration_kernel as IK
    from greenroute.sim.fluid_iteration import IterationProfile, predict

    prep = prepare(calibration_scenario(1.0, 0.0, days=0.01).with_options(fidelity="fluid"), 0)
    prof = IterationProfile(prep.built, *prep.service.samples)
    types = np.array([[0]])
    for lam_i, lam_d in ((0.5, 0.0), (2.0, 0.3)):
        lam = np.array([[[lam_i], [lam_d]]])
        ref = predict(prof, lam, types, np.array([32.0]))["n"][0]
        got = IK.running(0, lam, lam_i + lam_d, types, prof.tau, prof.adv,
                         prof.decode.astype(float), prof.e_out, 32.0)  # fmt: skip
        assert got == pytest.approx(ref, rel=1e-12)
