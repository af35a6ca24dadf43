"""MARLIN's §3 model and §6 utilisation cap in the simulator (``marlin8``, fluid, one epoch)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from greenroute.api import run
from greenroute.constraints import ConstraintSet
from greenroute.core.types import Plan
from greenroute.physics.marlin_cop import sites_cop_d
from greenroute.scenarios.marlin import MARLIN8_UTILISATION_CAP, marlin8
from greenroute.sim.prepare import prepare

ONE_EPOCH_DAYS = 900.0 / 86400.0


class _AllToFirst:
    """Sends every origin's work to region 0 and asks for no power cap at all (inf kW)."""

    name = "all-to-first"

    def reset(self, cluster, seed):
        self.n_o, self.n_r = len(cluster.origins), len(cluster.regions)

    def plan(self, obs):
        route = np.zeros((self.n_o, self.n_r))
        route[:, 0] = 1.0
        p = Plan.single(route)
        return Plan(p.route, None, np.full(self.n_r, np.inf))


@pytest.fixture(scope="module")
def marlin_scenario():
    return marlin8().with_options(days=ONE_EPOCH_DAYS)


def test_marlin8_cap_is_95_percent_of_dynamic_power(marlin_scenario):
    prep = prepare(marlin_scenario, seed=0)
    idle, peak = prep.built.region_idle_kw(), prep.built.region_peak_kw()
    caps = np.array([marlin_scenario.constraints.power_caps_kw[r] for r in prep.scenario.regions])
    assert (caps - idle) / (peak - idle) == pytest.approx(np.full(8, MARLIN8_UTILISATION_CAP))
    # COP_d per datacenter from the climate, and eq. 2 in plain form (0.3 ms in one's own site)
    cop = np.array(sites_cop_d(prep.scenario.regions))
    assert prep.factors.cooling_kwh_per_it_kwh[0] == pytest.approx(3.0 / cop)
    assert np.diag(prep.latency_s) == pytest.approx(np.full(8, 6 * 50e-6))


def test_plan_above_the_cap_is_clipped(marlin_scenario):
    capped = run(marlin_scenario, _AllToFirst(), cache=False)
    u = capped.epochs.set_index("region")["utilisation"]
    region0 = marlin_scenario.regions[0]
    # 8 origins' work on one site: without the cap every slot is busy (and work is dropped);
    # with it at most 95 % of the slots serve, whatever the plan asked for
    free = replace(marlin_scenario, constraints=ConstraintSet())
    uncapped = run(free, _AllToFirst(), cache=False).epochs.set_index("region")["utilisation"]
    assert uncapped[region0] == pytest.approx(1.0)
    assert 0.8 < u[region0] <= MARLIN8_UTILISATION_CAP + 1e-9
    assert capped.metrics["requests_dropped"] > 0


def test_marlin_metrics_in_fluid_runs(marlin_scenario):
    res = run(marlin_scenario, "local-only", cache=False)
    m, fr = res.metrics, res.epochs
    sc, prep = marlin_scenario, prepare(marlin_scenario, seed=0)
    # eq. 4 with PC_pstate = P(u) / TDP_n: TDP cancels, leaving idle + u x (peak - idle)
    idle, peak = prep.built.region_idle_kw(), prep.built.region_peak_kw()
    expect = (idle + fr["utilisation"].to_numpy() * (peak - idle)) * sc.epoch_s / 3600.0
    assert fr["marlin_it_energy_kwh"].to_numpy() == pytest.approx(expect, rel=1e-9)
    assert m["marlin_it_energy_kwh"] == pytest.approx(expect.sum(), rel=1e-9)
    # eq. 3 local-only: 2 x 0.3 ms of network + a mix of the node types' exec per token
    from greenroute.sim.marlin_metrics import type_exec_per_token_s

    exec_t = type_exec_per_token_s(prep.built, prep.service)
    lo, hi = np.nanmin(exec_t), np.nanmax(exec_t)
    assert lo + 6e-4 < m["marlin_ttft_s"] < hi + 6e-4
    assert m["marlin_la_tot_s"] == pytest.approx(fr["marlin_ttft_sum_s"].sum())
    # the default physics gets none of these
    plain = run("geo3", "local-only", days=ONE_EPOCH_DAYS, cache=False)
    assert "marlin_ttft_s" not in plain.metrics
