"""Iteration energy from the profile's power columns (issue 8): one prefill and one decode
iteration on a Splitwise-measured type (llama2-70b, 8 x A100) by hand; the linear model kept
where the profile has no power (a scaled model, H100).

Hand values below are rows of ``perf/splitwise_perf_model.csv`` (llama2-70b, a100-80gb, TP 8,
128 output tokens; row numbers are 0-based data rows). Instance power = TP x (host share + TDP
x fraction) (``sim/iteration/cost.py``), clipped to the server's [idle, peak].
"""

from __future__ import annotations

import numpy as np
import pytest

from greenroute.catalog import get_gpu
from greenroute.sim.cluster import Cluster, RegionCluster, ServerGroup, build_cluster
from greenroute.sim.iteration import (
    LP_ROUND_ROBIN,
    IterationState,
    run_arrivals,
    stack_cost_tables,
)
from greenroute.sim.iteration.kernel import A_BUSY_S, A_ENERGY_J, A_ITER
from greenroute.sim.iteration_mode import cost_tables, iteration_config, throttled

EXACT = 1e-12  # relative: only float rounding
TP = 8
# A100-80GB: TDP 400 W; DGX A100 6,500 W for 8 GPUs -> host share (6500 - 8 x 400) / 8 W
TDP_W = 400.0
HOST_SHARE_W = (6500.0 - 8 * 400.0) / 8
# server power (physics/power.py): idle 8 x (63 + 0.5 x host), peak 8 x (250 + host)
IDLE_W = TP * (63.0 + 0.5 * HOST_SHARE_W)
PEAK_W = TP * (250.0 + HOST_SHARE_W)

# prefill, batch 1, 128-token prompt: rows 490-494
PREFILL_128_MS = [65.13794790953398, 65.53922686725855, 65.34724007360637, 64.0853380318731,
                  65.37348916754127]  # fmt: skip
PEAK_POWER_128 = 0.4604625
# prefill, batch 1, 512-token prompt: rows 420-424 (repeated in rows 510-514, 560-564)
PREFILL_512_MS = [94.41493987105788, 94.31009995751084, 103.8918630219996, 92.83238695934416,
                  93.17487897351384]  # fmt: skip
PEAK_POWER_512 = 0.748775
# decode, batch 4, 512-token prompts: rows 440-444
DECODE_4_MS = [45.79184104424469, 45.93287816630515, 45.83150245648933, 45.70988111938606,
               45.63603298206938]  # fmt: skip
AVERAGE_POWER_4 = 0.4377796875


def _mean_s(ms: list[float]) -> float:
    return sum(ms) / len(ms) / 1000.0


def _server(model: str, gpu: str = "a100-80gb", tp: int = TP):
    built = build_cluster(
        Cluster((RegionCluster("r0", (ServerGroup(1, model, gpu, tp, max_concurrency=8),)),)),
        [model],
    )
    return built, stack_cost_tables(cost_tables(built)), iteration_config(built)


def _run(built, cost, cfg, reqs: list[tuple[int, int]]) -> np.ndarray:
    """Arrivals at t = 0 of (prompt, output) requests; the server's accumulators at the end."""
    st = IterationState.empty(cfg, 1)
    n = len(reqs)
    run_arrivals(
        st, cfg, cost, np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
        np.arange(n), np.array([r[0] for r in reqs]), np.array([r[1] for r in reqs]),
        np.zeros(n), 1e6, np.array([0, 1]), np.array([LP_ROUND_ROBIN]),
    )  # fmt: skip
    return st.acc[0]


def test_catalog_power_is_the_hand_figures() -> None:
    gpu = get_gpu("a100-80gb")
    assert (gpu.tdp_w, gpu.host_share_w) == (TDP_W, HOST_SHARE_W)
    built, _, _ = _server("llama2-70b")
    assert (built.server_idle_w[0], built.server_peak_w[0]) == (IDLE_W, PEAK_W)


def test_prefill_iteration_energy_is_duration_times_profile_power() -> None:
    # one request, 1 output token: a single prefill iteration of 128 tokens
    power_w = TP * (HOST_SHARE_W + TDP_W * PEAK_POWER_128)  # 4,773.5 W: inside [idle, peak]
    assert IDLE_W < power_w < PEAK_W
    acc = _run(*_server("llama2-70b"), [(128, 1)])
    assert acc[A_ITER] == 1
    assert acc[A_BUSY_S] == pytest.approx(_mean_s(PREFILL_128_MS), rel=EXACT)
    assert acc[A_ENERGY_J] == pytest.approx(_mean_s(PREFILL_128_MS) * power_w, rel=EXACT)


def test_decode_iteration_energy_and_clipped_prefill() -> None:
    # four requests (128, 2) at once: iteration 1 prefills 4 x 128 = 512 batch tokens (the
    # 512-token prompt time); its profile power 8 x (412.5 + 400 x 0.748775) = 5,696 W is above
    # the server's peak 5,300 W, so it draws the peak. Iteration 2 decodes the 4 requests.
    prefill_w = TP * (HOST_SHARE_W + TDP_W * PEAK_POWER_512)
    assert prefill_w > PEAK_W
    decode_w = TP * (HOST_SHARE_W + TDP_W * AVERAGE_POWER_4)  # 4,700.9 W
    assert IDLE_W < decode_w < PEAK_W
    acc = _run(*_server("llama2-70b"), [(128, 2)] * 4)
    assert acc[A_ITER] == 2
    want = _mean_s(PREFILL_512_MS) * PEAK_W + _mean_s(DECODE_4_MS) * decode_w
    assert acc[A_ENERGY_J] == pytest.approx(want, rel=EXACT)


UNMEASURED = [("llama3-70b", "a100-80gb"), ("llama2-70b", "h100-80gb")]


@pytest.mark.parametrize(("model", "gpu"), UNMEASURED)
def test_unmeasured_power_keeps_the_linear_model(model: str, gpu: str) -> None:
    """A scaled model (no Splitwise rows) and H100 (power columns 0): prefill at the peak,
    a decode of n requests at idle + (peak - idle) x n / slots."""
    built, cost, cfg = _server(model, gpu)
    assert built.type_power == (None,)
    idle, peak = built.server_idle_w[0], built.server_peak_w[0]
    one = _run(built, cost, cfg, [(128, 1)])
    assert one[A_ENERGY_J] == pytest.approx(one[A_BUSY_S] * peak, rel=EXACT)
    four = _run(built, cost, cfg, [(128, 2)] * 4)
    decode_s = four[A_BUSY_S] - float(built.prefill_s[0][2])  # prefill of 512 batch tokens
    assert float(built.prefill_tok[0][2]) == 512.0
    want = float(built.prefill_s[0][2]) * peak + decode_s * (idle + (peak - idle) * 4 / 8)
    assert four[A_ENERGY_J] == pytest.approx(want, rel=EXACT)
    assert decode_s == pytest.approx(float(built.decode_s[0, 4]), rel=EXACT)


def test_power_capped_measured_type_keeps_dynamic_energy_under_the_cap() -> None:
    """Half the slots usable (u = 0.5): prefill twice as long at idle + u (P - idle), so its
    dynamic energy (above idle) is unchanged; every decode knot at most the cap."""
    built, _, cfg = _server("llama2-70b")
    base = cost_tables(built)[0]
    capped = throttled(base, 0.5, 8.0, profile_power=True)
    cap_w = IDLE_W + 0.5 * (PEAK_W - IDLE_W)
    assert np.all(capped.power_decode_w <= cap_w)
    assert np.all(capped.power_prefill_w <= cap_w)
    # decode batch 4 (4,700.9 W) is above the cap (3,727 W): clipped to it
    i4 = int(np.flatnonzero(capped.power_decode_x == 4)[0])
    assert capped.power_decode_w[i4] == cap_w
    one = _run(built, stack_cost_tables([base]), cfg, [(128, 1)])
    low = _run(built, stack_cost_tables([capped]), cfg, [(128, 1)])
    assert low[A_BUSY_S] == pytest.approx(2 * _mean_s(PREFILL_128_MS), rel=EXACT)
    dyn = one[A_ENERGY_J] - IDLE_W * one[A_BUSY_S]
    assert low[A_ENERGY_J] - IDLE_W * low[A_BUSY_S] == pytest.approx(dyn, rel=1e-9)
