"""GCOS simulator (seed 003): caches, the byte ledger, one transfer by hand, the registry."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.sim.gcos.cache import ObjectCache
from greenroute.sim.gcos.engine import Decision, GcosSim, Migration
from greenroute.sim.gcos.scenario import GCOS_SCENARIOS, get_gcos_scenario
from greenroute.sim.gcos.transfer import aslan_kwh_per_gb, transfer_cost


def _small(**kw):
    base = dict(hours=2.0, tasks_per_hour=300.0, model_cache_gb=12.0, data_cache_gb=10.0)
    return get_gcos_scenario("gcos").with_options(**{**base, **kw})


def test_one_wan_transfer_by_hand():
    # 10 GB, 0.05 s latency, 1 Gbit/s: 0.05 + 80 s; 0.003 kWh/GB -> 0.03 kWh;
    # carbon 0.03 * (100 + 500) / 2 / 1000 = 0.009 kg; cost 10 * 0.08 + 0.03 * 0.2 = 0.806 USD
    tc = transfer_cost(10.0, same_region=False, latency_s=0.05, wan_gbit_per_s=1.0,
                       local_gbit_per_s=4.0, kwh_per_gb=0.003, ci_src_g_per_kwh=100.0,
                       ci_dst_g_per_kwh=500.0, egress_usd_per_gb=0.08,
                       electricity_usd_per_kwh=0.2)  # fmt: skip
    assert tc.time_s == pytest.approx(80.05, rel=1e-12)
    assert tc.energy_kwh == pytest.approx(0.03, rel=1e-12)
    assert tc.carbon_kg == pytest.approx(0.009, rel=1e-12)
    assert tc.cost_usd == pytest.approx(0.806, rel=1e-12)


def test_same_region_read_is_free_and_takes_local_bandwidth():
    tc = transfer_cost(2.0, same_region=True, latency_s=0.05, wan_gbit_per_s=1.0,
                       local_gbit_per_s=4.0, kwh_per_gb=0.003, ci_src_g_per_kwh=100.0,
                       ci_dst_g_per_kwh=500.0, egress_usd_per_gb=0.08,
                       electricity_usd_per_kwh=0.2)  # fmt: skip
    assert (tc.time_s, tc.energy_kwh, tc.carbon_kg, tc.cost_usd) == (4.0, 0.0, 0.0, 0.0)


def test_aslan_extrapolation():
    assert aslan_kwh_per_gb(2015) == 0.06
    assert aslan_kwh_per_gb(2019) == pytest.approx(0.015, rel=1e-12)  # two halvings


def test_lru_lfu_gdsf_victims():
    # a (6 GB) used twice and most recently, b (2 GB) once; c (4 GB) needs 2 GB more.
    # LRU and LFU evict b (6 + 4 = 10 GB left); GDSF's H(a) = 2 * 1 / 6 = 0.33 is below
    # H(b) = 1 * 1 / 2 = 0.5, so it evicts the big object a (2 + 4 = 6 GB left).
    for policy, victim, used in (
        ("lru", ("b",), 10.0),
        ("lfu", ("b",), 10.0),
        ("gdsf", ("a",), 6.0),
    ):
        c = ObjectCache(10.0, policy)
        c.insert(("a",), 6.0, fetch_cost=1.0)
        c.insert(("b",), 2.0, fetch_cost=1.0)
        c.touch(("a",))
        assert c.insert(("c",), 4.0, fetch_cost=1.0)
        assert victim not in c and ("c",) in c
        assert c.used_gb == pytest.approx(used, abs=1e-12)
        assert c.evicted_gb == pytest.approx(12.0 - used, abs=1e-12)  # inserted - held


def test_oversized_object_is_not_admitted_and_hits_are_counted():
    c = ObjectCache(5.0, "lru")
    assert not c.insert(("x",), 6.0)
    assert c.used_gb == 0.0
    c.insert(("y",), 1.0)
    assert c.touch(("y",)) and not c.touch(("x",))
    assert (c.hits, c.misses, c.hit_rate) == (1, 1, 0.5)


@settings(max_examples=60, deadline=None)
@given(
    policy=st.sampled_from(["lru", "lfu", "gdsf"]),
    cap=st.floats(1.0, 50.0),
    ops=st.lists(st.tuples(st.integers(0, 15), st.floats(0.01, 30.0), st.booleans()), max_size=80),
)
def test_cache_never_exceeds_capacity(policy, cap, ops):
    c = ObjectCache(cap, policy)
    sizes: dict = {}
    for k, size, touch in ops:
        key = ("k", k)
        if touch:
            c.touch(key)
        else:
            sizes.setdefault(key, size)
            c.insert(key, sizes[key], fetch_cost=size)
        held = sum(sizes[x] for x in c.contents())
        assert held <= cap + 1e-9
        assert c.used_gb == pytest.approx(held, abs=1e-9)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), eviction=st.sampled_from(["lru", "lfu", "gdsf"]))
def test_bytes_conserved_and_caches_bounded_under_random_policy(seed, eviction):
    sim = GcosSim(_small(eviction=eviction, hours=0.5))
    rng = np.random.default_rng(seed)
    R = sim.n_regions
    while not sim.done:
        n = len(sim.batch())
        migs = [Migration(("d", int(rng.integers(0, sim.cat.data_gb.size))), int(rng.integers(R)))
                for _ in range(int(rng.integers(0, 3)))]  # fmt: skip
        sim.step(Decision([int(x) for x in rng.integers(0, R, size=n)], migs))
        for c in sim.model_cache + sim.data_cache:
            assert sum(sim.size_gb(k) for k in c.contents()) <= c.capacity_gb + 1e-9
    sent = sum(t.size_gb for t in sim.ledger.transfers)
    assert sent == pytest.approx(sum(sim.ledger.arrived_gb), rel=1e-12)
    per_dst = np.zeros(R)
    for t in sim.ledger.transfers:
        per_dst[t.dst] += t.size_gb
    np.testing.assert_allclose(per_dst, sim.ledger.arrived_gb, rtol=1e-12)
    # every miss made exactly one transfer
    misses = sum(c.misses for c in sim.model_cache + sim.data_cache)
    assert misses == sum(t.reason == "miss" for t in sim.ledger.transfers)


def test_task_energy_and_a_repeat_hit():
    sc = _small(hours=0.1)
    sim = GcosSim(sc)
    # the first window's tasks all to region 0; compute energy = sum(exec) * 400 W * PUE
    while not sim.done:
        sim.step(Decision([0] * len(sim.batch())))
    done = sim.placement >= 0
    expect = sim.tasks.exec_s[done].sum() * sc.gpu_busy_w / 1000.0 * sc.pue / 3600.0
    assert sim.compute["energy_kwh"] == pytest.approx(expect, rel=1e-12)
    first = sim.task_keys(0)[0]
    assert sim.cached(first, 0) or sim.model_cache[0].evicted_gb > 0


def test_registry_errors_list_choices():
    with pytest.raises(UnknownNameError, match="valid choices: gcos"):
        get_gcos_scenario("nope")
    with pytest.raises(ConfigError, match="valid choices"):
        GCOS_SCENARIOS.build("gcos", bogus=1)
    with pytest.raises(UnknownNameError, match="gdsf, lfu, lru"):
        get_gcos_scenario("gcos", eviction="fifo")


@pytest.mark.realdata
def test_real_trace_catalogue(data_dir):
    sim = GcosSim(_small(hours=0.2), data_dir=data_dir)
    assert sim.trace_source == "trace" and sim.signal_source == "real"
    assert len(sim.cat.model_ids) == 40
    # the trace's most used checkpoint (8,229 of 26,392 SUCCEED rows) comes first
    assert sim.cat.model_ids[0] == sim.trace["checkpoint_model_version_id"].mode()[0]
    assert sim.trace["num_lora"].max() == 6


def test_without_peer_fetch_every_copy_comes_from_origin_storage():
    sim = GcosSim(_small(hours=0.5, peer_fetch=False))
    rng = np.random.default_rng(1)
    while not sim.done:
        n = len(sim.batch())
        sim.step(Decision([int(x) for x in rng.integers(0, sim.n_regions, size=n)]))
    assert sim.ledger.transfers
    assert all(t.src == sim.home(t.key) for t in sim.ledger.transfers)
    with_peers = GcosSim(_small(hours=0.5))
    rng = np.random.default_rng(1)
    while not with_peers.done:
        n = len(with_peers.batch())
        with_peers.step(Decision([int(x) for x in rng.integers(0, with_peers.n_regions, size=n)]))
    assert any(t.src != with_peers.home(t.key) for t in with_peers.ledger.transfers)


def test_per_task_costs_add_up_to_the_run_total():
    sim = GcosSim(_small(hours=0.5))
    rng = np.random.default_rng(2)
    while not sim.done:
        n = len(sim.batch())
        migs = [Migration(("d", int(rng.integers(0, sim.cat.data_gb.size))), 1)]
        sim.step(Decision([int(x) for x in rng.integers(0, sim.n_regions, size=n)], migs))
    m = sim.metrics()
    mig = [t for t in sim.ledger.transfers if t.reason == "migrate"]
    assert mig
    assert sim.task_usd.sum() + sum(t.cost_usd for t in mig) == pytest.approx(m["cost_usd"])
    assert sim.task_kg.sum() + sum(t.carbon_kg for t in mig) == pytest.approx(m["carbon_kg"])


def test_tight_variant_changes_only_its_documented_fields():
    base, tight = get_gcos_scenario("gcos"), get_gcos_scenario("gcos-tight")
    changed = {k for k in vars(base) if getattr(base, k) != getattr(tight, k)}
    assert changed == {"name", "gpus_per_region", "wait_usd_per_h", "model_cache_gb",
                       "data_cache_gb"}  # fmt: skip
    assert (tight.gpus_per_region, tight.wait_usd_per_h) == (2, 5.0)
    assert (tight.model_cache_gb, tight.data_cache_gb) == (30.0, 75.0)
    assert get_gcos_scenario("gcos-tight", data_cache_gb=10.0).data_cache_gb == 10.0


def test_start_delay_splits_into_window_cold_start_and_queue():
    # everything to region 0 at 300 tasks/h: region 0's 8 GPUs queue; a task's delay from
    # arrival to start is its wait for the window's end + its cold start + its wait for a GPU
    sim = GcosSim(_small(hours=1.0))
    while not sim.done:
        sim.step(Decision([0] * len(sim.batch())))
    m = sim.metrics()
    to_window = ((np.floor(sim.tasks.arrival_s / 300.0) + 1) * 300.0 - sim.tasks.arrival_s).mean()
    assert 0.0 < to_window < 300.0
    parts = to_window + m["mean_cold_start_s"] + m["mean_queue_s"]
    assert m["mean_start_s"] == pytest.approx(parts, rel=1e-12)
    assert m["mean_cold_start_s"] > 0.0 and 0.0 < m["queued_share"] <= 1.0
    roomy = GcosSim(_small(hours=1.0, gpus_per_region=10_000))
    while not roomy.done:
        roomy.step(Decision([0] * len(roomy.batch())))
    assert roomy.metrics()["queued_share"] == 0.0 and roomy.metrics()["mean_queue_s"] == 0.0
