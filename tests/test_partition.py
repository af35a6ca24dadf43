"""Request-level runs partitioned by region (``sim/partition.py``, issue 12): the same metrics
and per-request outcomes as one process, block splitting by hand, and clear refusals."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from greenroute.core.errors import ConfigError
from greenroute.core.types import Plan
from greenroute.policies.local import LeastLoadedLocal
from greenroute.policies.registry import local_policy_factory, make_geo_policy
from greenroute.scenarios import get_scenario
from greenroute.sim.engine import SimConfig, Simulation
from greenroute.sim.partition import Block, LocalPartitionExecutor, split_regions
from greenroute.sim.prepare import prepare

DAYS = 0.125


def test_split_regions_balances_servers_contiguously():
    # regions of 4, 1, 1, 4 servers: two blocks of 5 ([0, 2) and [2, 4))
    start = np.array([0, 4, 5, 6, 10])
    assert split_regions(start, 2) == [Block(0, 2, 0, 5), Block(2, 4, 5, 10)]
    # one block per region at most, never an empty block
    assert split_regions(start, 9) == [
        Block(0, 1, 0, 4), Block(1, 2, 4, 5), Block(2, 3, 5, 6), Block(3, 4, 6, 10)
    ]  # fmt: skip
    assert split_regions(start, 1) == [Block(0, 4, 0, 10)]
    with pytest.raises(ConfigError, match="partitions must be >= 1"):
        split_regions(start, 0)


class PythonLeastLoaded(LeastLoadedLocal):
    """The built-in's choice through Python ``pick`` (overriding it drops the kernel code)."""

    def pick(self, request, servers):
        return super().pick(request, servers)


class CapFromEpoch2:
    """lowest-carbon, plus a plan power cap on every region from epoch 2 on (half of the
    dynamic range): the backend adds a throttled cost table mid-run."""

    name = "lowest-carbon+cap"

    def __init__(self) -> None:
        self.inner = make_geo_policy("lowest-carbon")

    def reset(self, cluster, seed) -> None:
        self.inner.reset(cluster, seed)

    def plan(self, obs):
        plan = self.inner.plan(obs)
        if obs.epoch < 2:
            return plan
        # demo: every region idles at 2.9 kW and peaks at 7.64 kW (2 servers)
        cap = np.full(obs.n_regions, 2.9 + 0.5 * (7.64 - 2.9))
        return Plan(route=plan.route, hold=plan.hold, power_cap_kw=cap)


def _run(executor=None, local=None, fidelity="request", fork=False, capped=False):
    sc = get_scenario("demo").with_options(fidelity=fidelity, server_model="iteration", days=DAYS)
    prep = prepare(sc, 3, None)
    local = local or local_policy_factory("least-loaded")
    config = SimConfig(seed=3, record_requests=True)
    geo = CapFromEpoch2() if capped else make_geo_policy("lowest-carbon")
    sim = Simulation(prep, geo, local, config, partition_executor=executor)
    if fork:
        sim.begin()
        sim.advance(sim.validated(obs := sim.observe(), sim.get_plan(obs)), obs)
        sim.fork().evaluate(sim.get_plan(sim.observe()))
    return sim.run()


@pytest.fixture(scope="module")
def single(no_env_data_module):
    return _run()


@pytest.fixture(scope="module")
def no_env_data_module():
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GREENROUTE_DATA_DIR", raising=False)
        yield


@pytest.mark.parametrize("parts", [2, 3])
def test_partitioned_run_equals_one_process(single, parts):
    part = _run(LocalPartitionExecutor(parts))
    assert part.metrics == single.metrics  # exactly: every server sees the same calls
    pd.testing.assert_frame_equal(part.requests, single.requests)
    pd.testing.assert_frame_equal(part.epochs, single.epochs)
    pd.testing.assert_frame_equal(part.extras["servers"], single.extras["servers"])
    assert single.metrics["requests_completed"] > 1000  # the check is not vacuous


def test_partitioned_run_with_a_new_power_cap_equals_one_process(no_env_data_module):
    """Workers keep the cost tables last sent; a cap that adds a throttled type sends them
    again (``PartitionedKernel.run_epoch``)."""
    ref = _run(capped=True)
    part = _run(LocalPartitionExecutor(2), capped=True)
    assert part.metrics == ref.metrics
    pd.testing.assert_frame_equal(part.requests, ref.requests)
    assert ref.metrics != _run().metrics  # the cap changed the run


def test_partitioned_run_refuses_what_cannot_run_in_workers(no_env_data_module):
    with pytest.raises(ConfigError, match="compiled local policies"):
        _run(LocalPartitionExecutor(2), local=PythonLeastLoaded)
    with pytest.raises(ConfigError, match="needs request fidelity"):
        _run(LocalPartitionExecutor(2), fidelity="fluid")
    with pytest.raises(ConfigError, match="single-process run"):
        _run(LocalPartitionExecutor(2), fork=True)


@pytest.mark.slow
def test_partitioned_run_on_ray_equals_one_process(single):
    ray = pytest.importorskip("ray") if not os.environ.get("GREENROUTE_REQUIRE_DATA") else None
    if ray is None:
        import ray
    from greenroute.bench.partition_ray import RayPartitionExecutor

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ex = RayPartitionExecutor(2)
        part = _run(ex)
        ex.close()
    finally:
        ray.shutdown()
    assert part.metrics == single.metrics
    pd.testing.assert_frame_equal(part.requests, single.requests)


def test_a_worker_given_read_only_arrays_runs_the_compiled_kernel_it_has():
    """Ray hands actors read-only arrays; numba would compile the kernels again for them (65 s
    per worker on the first epoch) unless the worker copies them (``partition._writable``)."""
    from greenroute.sim.iteration import flat_cost_table, stack_cost_tables
    from greenroute.sim.iteration import kernel as K
    from greenroute.sim.iteration.state import IterationConfig
    from greenroute.sim.partition import RegionPartitionWorker, warm_kernels

    warm_kernels()
    compiled = len(K.run_arrivals.signatures)

    def payload(cfg: IterationConfig, read_only: bool) -> dict:
        cost = stack_cost_tables([flat_cost_table(0.01, 0.05)])
        arrivals = dict(t_reg=np.array([0.0, 0.5, 1.0]), region=np.zeros(3, dtype=np.int64),
                        model=np.zeros(3, dtype=np.int64), ids=np.arange(3, dtype=np.int64),
                        prompt=np.array([100, 200, 300]), output=np.array([5, 6, 7]),
                        u_local=np.array([0.1, 0.6, 0.3]))  # fmt: skip
        if read_only:
            for a in [*arrivals.values(), *vars(cost).values()]:
                a.setflags(write=False)
        return {
            "arrivals": arrivals,
            "cost": cost,
            "t_end": 60.0,
            "server_type": cfg.server_type,
            "server_model": cfg.server_model,
            "max_running": cfg.max_running,
        }

    def run(read_only: bool) -> dict:
        cfg = IterationConfig.uniform(2, blocks_total=64)
        w = RegionPartitionWorker(cfg, Block(0, 1, 0, 2), np.array([0, 2]), np.zeros(1))
        return w.step(payload(cfg, read_only))

    ro, rw = run(True), run(False)
    assert len(K.run_arrivals.signatures) == compiled  # nothing compiled for read-only arrays
    np.testing.assert_array_equal(ro["out"], rw["out"])
    assert (ro["out"] >= 0).all()
    assert ro["log"]["req"].size == 3  # all three finished by t_end
    for k in ("req", "t_first_s", "t_finish_s"):
        np.testing.assert_array_equal(ro["log"][k], rw["log"][k])
