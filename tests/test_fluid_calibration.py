"""The fluid (epoch-level) model agrees with the request-level engine on windows both can run.

Acceptance (issue 2): carbon, energy and mean TTFT within 5 %. The check uses the ``demo``
regions and workload at moderate load (peak utilisation about 65 %), a full day with its
diurnal peaks, three seeds. ``python -m greenroute.bench.calibrate`` prints a wider grid: at
85 % utilisation with bursty arrivals the fluid TTFT is within about 35 % (documented), and
energy/carbon stay within 1 % everywhere.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

import greenroute
from greenroute.bench.scenarios import get_scenario

TOL = 0.05


def moderate_demo():
    sc = get_scenario("demo")
    wl = replace(sc.workload, interactive_rps=(1.5, 1.5, 1.5), deferrable_rps=(0.3, 0.3, 0.3))
    return replace(sc, name="demo-moderate", workload=wl)


# Policies whose plans do not read queue state: state-reading ones (least-loaded) see the
# fluid's epoch averages instead of the request engine's instantaneous queues and may route
# differently, which is a difference of decisions, not of the engines.
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("policy", ["local-only", "round-robin", "nearest"])
def test_fluid_matches_request_engine(policy, seed):
    sc = moderate_demo()
    req = greenroute.run(sc, policy, fidelity="request", seed=seed).metrics
    flu = greenroute.run(sc, policy, fidelity="fluid", seed=seed).metrics
    for key in ("carbon_kg", "energy_kwh", "ttft_mean_s"):
        assert flu[key] == pytest.approx(req[key], rel=TOL), key
    # the same requests arrive in both (fluid counts are the request engine's per-epoch counts)
    assert flu["requests_total"] == req["requests_total"]


def test_fluid_at_high_utilisation_energy_exact_ttft_approximate():
    """lowest-carbon packs the greenest region to ~85 % utilisation: queueing dominates TTFT."""
    kw = {"seed": 1, "policy_options": {"target_utilisation": 0.8}}
    req = greenroute.run("demo", "lowest-carbon", fidelity="request", **kw).metrics
    flu = greenroute.run("demo", "lowest-carbon", fidelity="fluid", **kw).metrics
    assert flu["carbon_kg"] == pytest.approx(req["carbon_kg"], rel=TOL)
    assert flu["energy_kwh"] == pytest.approx(req["energy_kwh"], rel=TOL)
    assert flu["ttft_mean_s"] == pytest.approx(req["ttft_mean_s"], rel=0.35)
