"""GCOS policies (seed 003): baselines, the per-task cost, the LP, the predictor stand-in."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from greenroute.core.errors import UnknownNameError
from greenroute.policies.gcos.baselines import CacheAffinity, LowestCarbon, LowestPrice
from greenroute.policies.gcos.common import Backlog, Weights, task_cost
from greenroute.policies.gcos.lp import GcosLP
from greenroute.policies.gcos.predictor import ExecPredictor, task_exec_estimates
from greenroute.sim.gcos.engine import Decision, GcosSim
from greenroute.sim.gcos.scenario import get_gcos_scenario


@pytest.fixture(scope="module")
def sim():
    sc = get_gcos_scenario("gcos").with_options(hours=1.0, tasks_per_hour=240.0)
    return GcosSim(sc)


@pytest.fixture(scope="module")
def pred(sim):
    return ExecPredictor("mean").fit(sim.trace)


def test_mean_predictor_is_the_per_checkpoint_mean():
    rows = pd.DataFrame(
        {"checkpoint_model_version_id": ["A", "A", "B"], "exec_time_seconds": [10.0, 30.0, 7.0]}
    )
    p = ExecPredictor("mean").fit(rows)
    q = pd.DataFrame({"checkpoint_model_version_id": ["A", "B", "C"]})
    np.testing.assert_allclose(p.predict(q), [20.0, 7.0, 47.0 / 3.0])


def test_cache_oblivious_baselines_pick_the_lowest_signal(sim, pred):
    for pol, signal in ((LowestCarbon(pred, max_wait_s=1e12), sim.ci),
                        (LowestPrice(pred, max_wait_s=1e12), sim.price)):  # fmt: skip
        sim.reset()
        pol.reset(sim)
        for _ in range(3):
            d = pol.decide(sim)
            want = int(np.argmin(signal[sim.hour(sim.now_s)]))
            assert d.placements == [want] * len(sim.batch())
            sim.step(d)


def test_cache_affinity_follows_cached_bytes(sim, pred):
    sim.reset()
    pol = CacheAffinity(pred, max_wait_s=1e12)
    pol.reset(sim)
    i = int(sim.batch()[0])
    for key in sim.task_keys(i):  # warm region 3 with everything task i needs
        sim.cache_of(key)[3].insert(key, sim.size_gb(key))
    assert pol.decide(sim).placements[0] == 3


def test_task_cost_of_a_fully_cached_task_by_hand(sim, pred):
    sim.reset()
    i, r = int(sim.batch()[0]), 2
    for key in sim.task_keys(i):
        sim.cache_of(key)[r].insert(key, sim.size_gb(key))
    w = Weights(carbon_usd_per_kg=10.0, wait_usd_per_h=3.0)
    usd, kg, obj = task_cost(sim, i, r, 360.0, set(), w, wait_s=720.0)
    h = sim.hour(sim.now_s)
    energy = 360.0 * 0.4 * 1.2 / 3600.0  # 400 W, PUE 1.2, 6 min -> 0.048 kWh
    assert usd == pytest.approx(energy * sim.price[h, r], rel=1e-12)
    assert kg == pytest.approx(energy * sim.ci[h, r] / 1000.0, rel=1e-12)
    assert obj == pytest.approx(usd + 10.0 * kg + 3.0 * 720.0 / 3600.0, rel=1e-12)


def test_lp_without_binding_capacity_is_the_per_task_argmin(sim, pred):
    sim.reset()
    w = Weights(200.0, 0.5)
    lp = GcosLP(pred, w, max_util=1e9)
    lp.reset(sim)
    backlog = Backlog(sim, task_exec_estimates(sim, pred))
    want = []
    for i in sim.batch():
        costs = [task_cost(sim, int(i), r, backlog.est[i], set(), w, 0.0)[2]
                 for r in range(sim.n_regions)]  # fmt: skip
        want.append(int(np.argmin(costs)))
    assert lp.decide(sim).placements == want


def test_lp_respects_a_binding_capacity(sim, pred):
    sim.reset()
    w = Weights(200.0, 0.5)
    est_all = task_exec_estimates(sim, pred)
    while len(sim.batch()) < 6:
        sim.step(Decision([0] * len(sim.batch())))
    est = est_all[sim.batch()]
    # each region may take a third of the window's estimated work: feasible (6 regions), and
    # binding, since the unconstrained argmin (previous test) crowds the cheapest region
    util = est.sum() / 3.0 / (sim.sc.gpus_per_region * sim.sc.window_s)
    lp = GcosLP(pred, w, max_util=util, penalty_usd_per_s=1e3)
    lp.reset(sim)
    lp.decide(sim)
    assert np.allclose(lp.last_cap, est.sum() / 3.0)  # nothing unfinished yet
    assert np.all(est @ lp.last_x <= est.sum() / 3.0 + 1e-6)
    free = GcosLP(pred, w, max_util=1e9)
    free.reset(sim)
    free.decide(sim)
    assert (est @ free.last_x).max() > est.sum() / 3.0


def test_diptree_backend_reads_the_upper_quantile(sim):
    from greenroute.policies.gcos.diptree import DiPTree, task_features

    rows = sim.trace.iloc[:4000]
    p = ExecPredictor("diptree", quantile=0.9).fit(rows)
    assert p.backend == "diptree"
    tree = DiPTree(quantiles=(0.5, 0.9)).fit(task_features(rows), rows["exec_time_seconds"])
    q = tree.predict_quantiles(task_features(sim.tasks.trace_rows))
    np.testing.assert_array_equal(p.predict(sim.tasks.trace_rows), q[:, 1])
    est = task_exec_estimates(sim, p)
    data_s = sim.cat.data_gb[sim.tasks.data] * sim.sc.process_s_per_gb
    np.testing.assert_allclose(est, q[:, 1] + data_s, rtol=1e-12)


def test_energy_uses_the_mean_and_waits_the_upper_quantile_by_hand(sim):
    """One checkpoint, times 10, 20, 30, 100 s: no split, one leaf. Waits read p90 (linear:
    30 + 0.7 * 70 = 79 s), energy the leaf mean (40 s), in every scheduler's backlog."""
    from greenroute.policies.gcos.common import Weights
    from greenroute.policies.gcos.greedy import GcosGreedy
    from greenroute.policies.gcos.predictor import make_backlog, task_energy_estimates

    rows = pd.DataFrame({"checkpoint_model_version_id": ["M1"] * 4, "num_lora": [0] * 4,
                         "exec_time_seconds": [10.0, 20.0, 30.0, 100.0]})  # fmt: skip
    p = ExecPredictor("diptree", quantile=0.9).fit(rows)
    assert p.backend == "diptree" and p.energy_stat == "mean"
    q = rows.iloc[:2]
    np.testing.assert_allclose(p.predict(q), [79.0, 79.0], rtol=1e-12)
    np.testing.assert_allclose(p.predict_energy(q), [40.0, 40.0], rtol=1e-12)
    upper = ExecPredictor("diptree", quantile=0.9, energy_stat="upper").fit(rows)
    np.testing.assert_allclose(upper.predict_energy(q), [79.0, 79.0], rtol=1e-12)
    mean = ExecPredictor("mean", energy_stat="mean").fit(rows)  # no quantile: mean for both
    np.testing.assert_allclose([*mean.predict(q), *mean.predict_energy(q)], [40.0] * 4)
    with pytest.raises(UnknownNameError, match="upper"):
        ExecPredictor("diptree", energy_stat="p90")

    sim.reset()
    data_s = sim.cat.data_gb[sim.tasks.data] * sim.sc.process_s_per_gb
    np.testing.assert_allclose(task_energy_estimates(sim, p), 40.0 + data_s, rtol=1e-12)
    w = Weights(200.0, 0.5)
    for pol in (LowestCarbon(p), LowestPrice(p), CacheAffinity(p), GcosLP(p, w),
                GcosGreedy(p, w)):  # fmt: skip
        pol.reset(sim)
        np.testing.assert_allclose(pol.backlog.est, 79.0 + data_s, rtol=1e-12)
        np.testing.assert_allclose(pol.backlog.energy_est, 40.0 + data_s, rtol=1e-12)
    b = make_backlog(sim, p)
    b.refresh()
    i, r = int(sim.batch()[0]), 2
    b.add(i, r)
    assert b.wait_s(r) == pytest.approx((79.0 + data_s[i]) / sim.sc.gpus_per_region, rel=1e-12)
    # greedy prices the first task's compute at 40 s + data (nothing queued yet at any region)
    g = GcosGreedy(p, w)
    g.reset(sim)
    want = int(np.argmin([task_cost(sim, i, r, 40.0 + data_s[i], set(), w, 0.0)[2]
                          for r in range(sim.n_regions)]))  # fmt: skip
    assert g.decide(sim).placements[0] == want
