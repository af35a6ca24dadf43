"""The compiled serving kernel against queueing theory and hand-built cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from greenroute.sim import kernel as K
from greenroute.sim.queueing import erlang_c, mgc_wait_s


def _run(
    arrivals, tokens, *, slots=4, tps=1.0, servers=1, code=K.LP_LEAST_LOADED,
    kv_cap=np.inf, kv_per_token=0.0, queue_limit=10**7, u_local=None,
):  # fmt: skip
    """One region, identical throughput-model servers: service = tokens / tps."""
    n = arrivals.size
    state = K.ServerState(np.full(servers, slots), np.zeros(servers, dtype=np.int64),
                          np.full(servers, min(queue_limit, 10**6)))  # fmt: skip
    state.ensure_regions(1)
    out = {k: np.empty(n) for k in ("start", "finish", "prefill", "cold")}
    out_server = np.empty(n, dtype=np.int64)
    out_batch = np.empty(n, dtype=np.int64)
    out_drop = np.empty(n, dtype=np.int64)
    prefill_tok = np.array([[0.0, 1e9]])
    prefill_s = np.array([[0.0, 1e9 / tps]])
    decode = np.full((1, slots + 1), 1.0 / tps)
    decode[0, 0] = 0.0
    K.run_batch(
        arrivals, np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
        (tokens - 1).astype(np.int64), np.ones(n, dtype=np.int64),
        np.zeros(n) if u_local is None else u_local,
        np.array([0, servers], dtype=np.int64), np.array([code], dtype=np.int64),
        np.zeros(servers, dtype=np.int64), np.full(servers, slots, dtype=np.int64),
        np.full(servers, slots, dtype=np.int64), 1, np.full(servers, queue_limit, dtype=np.int64),
        np.array([True]), prefill_tok, prefill_s, decode, np.array([kv_cap]), np.array([0.0]),
        np.array([kv_per_token]),
        state.slot_free, state.slot_start, state.slot_prev, state.slot_kv, state.slot_tok,
        state.last_start, state.resident, state.qbuf, state.qhead, state.qtail, state.qtok,
        state.rr,
        out_server, out["start"], out["finish"], out["prefill"], out["cold"], out_batch, out_drop,
    )  # fmt: skip
    return out, out_server, out_batch, out_drop


def test_mmc_mean_wait_matches_erlang_c():
    """Poisson arrivals, exponential service, FCFS, c slots: mean wait = C(c,a) / (cμ - λ)."""
    rng = np.random.default_rng(7)
    c, lam, mean_s = 4, 3.2, 1.0  # rho = 0.8
    n = 1_000_000
    arrivals = np.cumsum(rng.exponential(1 / lam, n))
    tokens = np.maximum(np.round(rng.exponential(mean_s * 10_000, n)), 2).astype(np.int64)
    out, _, _, drop = _run(arrivals, tokens, slots=c, tps=10_000.0)
    assert (drop == 0).all()
    wait = out["start"] - arrivals
    burn = n // 20  # discard the warm-up
    measured = wait[burn:].mean()
    expected = erlang_c(np.array(c), np.array(lam * mean_s)) / (c / mean_s - lam)
    assert measured == pytest.approx(float(expected), rel=0.05)
    # closed form at these numbers: a = 3.2, C(4, 3.2) = 0.5964 -> W = 0.7455 s
    assert float(expected) == pytest.approx(0.7455, abs=5e-4)


def test_erlang_c_hand_values():
    # M/M/1: C = rho
    assert float(erlang_c(np.array(1), np.array(0.5))) == pytest.approx(0.5)
    # M/M/2, a = 1: B(2,1) = 0.2, C = 2*0.2/(2 - 1*(0.8)) = 1/3
    assert float(erlang_c(np.array(2), np.array(1.0))) == pytest.approx(1 / 3)
    wait, _pw, _cond = mgc_wait_s(np.array(1.0), np.array(1.0), np.array(1.0), np.array(2))
    assert float(wait) == pytest.approx((1 / 3) / (2 - 1))


def test_mg1_wait_is_pollaczek_khinchine():
    """c = 1: Allen-Cunneen is exact, W = rho E[S] (1 + cs^2) / (2 (1 - rho)) (P-K formula).
    lambda = 0.5/s, E[S] = 1 s: W = 0.5 (1 + cs^2) / 1 -> 0.5 s (M/D/1), 1 s (M/M/1), 2 s
    (cs^2 = 3)."""
    for scv, expected in ((0.0, 0.5), (1.0, 1.0), (3.0, 2.0)):
        wait, pw, cond = mgc_wait_s(np.array(0.5), np.array(1.0), np.array(scv), np.array(1))
        assert float(wait) == pytest.approx(expected, rel=1e-12)
        assert float(pw) == pytest.approx(0.5, rel=1e-12)  # M/G/1: P(wait) = rho
        assert float(cond) == pytest.approx(expected / 0.5, rel=1e-12)
    # the compiled kernel with deterministic service (M/D/1) waits half the M/M/1 wait
    rng = np.random.default_rng(3)
    n = 200_000
    arrivals = np.cumsum(rng.exponential(2.0, n))  # lambda = 0.5 / s
    out, _, _, drop = _run(arrivals, np.full(n, 1000), slots=1, tps=1000.0)  # S = 1 s
    assert (drop == 0).all()
    measured = (out["start"] - arrivals)[n // 20 :].mean()
    assert measured == pytest.approx(0.5, rel=0.05)


def test_fifo_and_slots_by_hand():
    # one server, 2 slots, service 10 s each; arrivals at 0, 1, 2, 3
    arrivals = np.array([0.0, 1.0, 2.0, 3.0])
    tokens = np.array([10, 10, 10, 10])
    out, _srv, batch, _drop = _run(arrivals, tokens, slots=2, tps=1.0)
    np.testing.assert_allclose(out["start"], [0, 1, 10, 11])
    np.testing.assert_allclose(out["finish"], [10, 11, 20, 21])
    np.testing.assert_array_equal(batch, [1, 2, 2, 2])


def test_kv_memory_blocks_start_until_release():
    # KV cap 15 tokens-worth; each request needs 10 -> only one at a time despite 4 slots
    arrivals = np.array([0.0, 0.5, 1.0])
    tokens = np.array([10, 10, 10])
    out, _, _, _drop = _run(arrivals, tokens, slots=4, tps=1.0, kv_cap=15.0, kv_per_token=1.0)
    np.testing.assert_allclose(out["start"], [0, 10, 20])


def test_kv_overflow_dropped_and_queue_limit():
    arrivals = np.array([0.0, 0.1])
    tokens = np.array([100, 5])
    _, _, _, drop = _run(arrivals, tokens, slots=1, tps=1.0, kv_cap=50.0, kv_per_token=1.0)
    assert drop.tolist() == [K.DROP_KV_OVERFLOW, K.DROP_NONE]
    # queue bound 1 per server: the third waiting request is dropped
    arrivals = np.array([0.0, 0.1, 0.2, 0.3])
    _, _, _, drop = _run(arrivals, np.full(4, 100), slots=1, tps=1.0, queue_limit=1)
    assert drop.tolist() == [0, 0, K.DROP_QUEUE_FULL, K.DROP_QUEUE_FULL]


def test_round_robin_and_least_connections_spread():
    arrivals = np.arange(6, dtype=float) * 0.01
    tokens = np.full(6, 1000)
    _, srv, _, _ = _run(arrivals, tokens, servers=3, slots=1, code=K.LP_ROUND_ROBIN)
    assert srv.tolist() == [0, 1, 2, 0, 1, 2]
    _, srv, _, _ = _run(arrivals, tokens, servers=3, slots=1, code=K.LP_LEAST_CONNECTIONS)
    assert sorted(srv[:3].tolist()) == [0, 1, 2]
    assert math.isclose(np.bincount(srv).std(), 0.0)
