"""LLM performance model: embedded knots, KV capacity, cold load, throughput model."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from greenroute.core.errors import UnknownNameError
from greenroute.data.build_perf_knots import build_perf_knots, dumps, pool_adjacent_violators
from greenroute.data.perf_knots import embedded_knots, knot_table
from greenroute.physics import llm_perf as lp

KNOTS = embedded_knots()
AVAILABLE_PERF = lp.available_perf(KNOTS)


def _pm(model: str, gpu: str, tp: int) -> lp.PerfModel:
    return lp.perf_model(model, gpu, tp, KNOTS)


def _embedded() -> dict:
    text = resources.files("greenroute.data").joinpath("embedded/perf_knots.json").read_text()
    return json.loads(text)


def _entry(model: str, gpu: str, tp: int) -> dict:
    return next(
        e for e in _embedded()["entries"] if (e["model"], e["gpu"], e["tp"]) == (model, gpu, tp)
    )


def test_available_combinations() -> None:
    avail = set(AVAILABLE_PERF)
    for gpu in ("a100-80gb", "h100-80gb"):
        for tp in (2, 4, 8):
            assert ("llama2-70b", gpu, tp) in avail
            assert ("llama3-70b", gpu, tp) in avail
        assert ("llama2-7b", gpu, 1) in avail
        assert ("llama3-8b", gpu, 1) in avail
    assert len(avail) == 16
    # A 70B model does not fit one 80 GB GPU (138-141 GB of fp16 weights).
    assert ("llama2-70b", "a100-80gb", 1) not in avail
    with pytest.raises(UnknownNameError):
        _pm("llama2-70b", "a100-80gb", 1)


def test_kv_bytes_and_capacity_by_hand() -> None:
    pm = _pm("llama2-70b", "a100-80gb", 4)
    # 2 (K, V) x 80 layers x 8 KV heads x 128 head dim x 2 bytes = 327,680 B/token
    assert pm.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 == 327_680
    # 4 x 80 GB = 320e9 B; weights 68.98e9 x 2 = 137.96e9 B; reserve 10 % = 32e9 B.
    capacity = 320e9 - 137.96e9 - 32e9
    assert pm.kv_capacity_bytes == pytest.approx(capacity)  # 150.04 GB
    # 2,048-token requests: floor(150.04e9 / (327,680 x 2,048)) = floor(223.58) = 223
    assert pm.max_batch_for_kv(2048) == 223
    assert pm.max_batch_for_kv(2048) == math.floor(capacity / (327_680 * 2048))
    with pytest.raises(ValueError):
        pm.max_batch_for_kv(0)


def test_cold_load_by_hand() -> None:
    # MARLIN LA_load = MF_v / BW_n. A100 DGX: min(4 NVMe x 7 GB/s, 4 x 31.5 GB/s) = 28 GB/s.
    a = _pm("llama2-70b", "a100-80gb", 4)
    assert a.cold_load_s == pytest.approx(137.96e9 / 28e9)  # 4.93 s
    # H100 DGX: min(8 x 7, 4 x 63) = 56 GB/s.
    h = _pm("llama2-70b", "h100-80gb", 4)
    assert h.cold_load_s == pytest.approx(137.96e9 / 56e9)  # 2.46 s
    # Small model on one A100: min(28, 31.5) = 28 GB/s; 6.74e9 x 2 B.
    s = _pm("llama2-7b", "a100-80gb", 1)
    assert s.cold_load_s == pytest.approx(13.48e9 / 28e9)


@pytest.mark.parametrize("key", AVAILABLE_PERF, ids=lambda k: f"{k[0]}-{k[1]}-tp{k[2]}")
def test_monotone_curves(key: tuple[str, str, int]) -> None:
    pm = _pm(*key)
    tokens = np.arange(0, 20_001, 7)
    assert np.all(np.diff(pm.prefill_s(tokens)) >= 0)
    batches = np.arange(1, 513)
    assert np.all(np.diff(pm.decode_step_s(batches)) >= 0)
    assert np.all(pm.prefill_s(tokens) >= 0)


@given(st.floats(0, 50_000), st.floats(0, 50_000), st.integers(1, 400), st.integers(1, 400))
def test_monotone_property(p1: float, p2: float, b1: int, b2: int) -> None:
    pm = _pm("llama2-70b", "h100-80gb", 8)
    assert float(pm.prefill_s(min(p1, p2))) <= float(pm.prefill_s(max(p1, p2)))
    assert float(pm.decode_step_s(min(b1, b2))) <= float(pm.decode_step_s(max(b1, b2)))


def test_interpolation_and_extrapolation_by_hand() -> None:
    e = _entry("llama2-70b", "a100-80gb", 4)
    pm = _pm("llama2-70b", "a100-80gb", 4)
    x, y = e["prefill_tokens"], e["prefill_ms"]
    assert x == [128, 256, 512, 1024, 2048, 4096, 8192]
    # At a knot: the knot value (ms -> s).
    assert float(pm.prefill_s(1024)) == pytest.approx(y[3] / 1000)
    # Midway between 1024 and 2048.
    assert float(pm.prefill_s(1536)) == pytest.approx((y[3] + y[4]) / 2 / 1000)
    # Beyond 8192: the last segment extended.
    slope = (y[6] - y[5]) / (8192 - 4096)
    assert float(pm.prefill_s(10_000)) == pytest.approx((y[6] + slope * (10_000 - 8192)) / 1000)
    # Decode: knots 1..32 (batch 64 excluded); batch 64 extrapolates the 16-32 segment.
    b, d = e["decode_batch"], e["decode_step_ms"]
    assert b == [1, 2, 4, 8, 16, 32]
    assert float(pm.decode_step_s(64)) == pytest.approx((d[5] + (d[5] - d[4]) / 16 * 32) / 1000)


def test_decode_table_and_service() -> None:
    pm = _pm("llama2-70b", "h100-80gb", 4)
    table = pm.decode_table(40)
    assert table.shape == (41,)
    assert table[0] == 0.0
    np.testing.assert_allclose(table[1:], pm.decode_step_s(np.arange(1, 41)))
    s = pm.service_s(np.array([512, 2048]), np.array([100, 10]), np.array([8, 16]))
    expected = pm.prefill_s([512, 2048]) + np.array([100, 10]) * pm.decode_step_s([8, 16])
    np.testing.assert_allclose(s, expected)


def test_reported_numbers_plausible() -> None:
    a = _pm("llama2-70b", "a100-80gb", 4)
    h = _pm("llama2-70b", "h100-80gb", 4)
    # H100 is faster than A100 for both phases.
    assert float(h.prefill_s(1000)) < float(a.prefill_s(1000))
    for b in (1, 16, 32):
        assert float(h.decode_step_s(b)) < float(a.decode_step_s(b))
    # Small models are much faster than 70B ones on the same GPU.
    small = _pm("llama2-7b", "a100-80gb", 1)
    assert float(small.decode_step_s(1)) < 0.5 * float(a.decode_step_s(1))


def test_throughput_model_closed_form() -> None:
    pm = lp.throughput_perf_model(50.0)
    assert pm.model == "tps"
    assert float(pm.prefill_s(200)) == pytest.approx(200 / 50)
    for b in (1, 2, 7, 300):
        assert float(pm.decode_step_s(b)) == pytest.approx(1 / 50)
    # service = (prompt + output) / tps for any batch.
    assert float(pm.service_s(200, 100, 9)) == pytest.approx((200 + 100) / 50)
    assert pm.cold_load_s == 0.0
    assert math.isinf(pm.kv_capacity_bytes)
    assert pm.max_batch_for_kv(10_000) == lp.UNBOUNDED_BATCH
    assert pm.decode_table(3).tolist() == [0.0, 0.02, 0.02, 0.02]
    with pytest.raises(Exception, match="tokens_per_s"):
        lp.throughput_perf_model(0.0)


def test_pool_adjacent_violators() -> None:
    assert pool_adjacent_violators([1.0, 2.0, 3.0]) == [1.0, 2.0, 3.0]
    assert pool_adjacent_violators([55.3, 52.5, 56.6]) == pytest.approx([53.9, 53.9, 56.6])
    assert pool_adjacent_violators([3.0, 2.0, 1.0]) == [2.0, 2.0, 2.0]


def _splitwise_raw(data_dir: Path) -> pd.DataFrame:
    df = pd.read_csv(data_dir / "perf" / "splitwise_perf_model.csv")
    return df


@pytest.mark.realdata
def test_knots_reproduce_splitwise_raw(data_dir: Path) -> None:
    df = _splitwise_raw(data_dir)
    df = df[df["model"] == "llama2-70b"]
    for gpu in ("a100-80gb", "h100-80gb"):
        for tp in (2, 4, 8):
            e = _entry("llama2-70b", gpu, tp)
            sel = df[(df["hardware"] == gpu) & (df["tensor_parallel"] == tp)]
            pre = sel[(sel["batch_size"] == 1) & (sel["token_size"] == 128)]
            for n, ms in zip(e["prefill_tokens"], e["prefill_ms_measured"], strict=True):
                rows = pre[pre["prompt_size"] == n]["prompt_time"]
                assert len(rows) == (15 if n == 512 else 5)  # base point in three sweeps
                assert ms == pytest.approx(rows.sum() / len(rows), rel=1e-12)
            dec = sel[(sel["prompt_size"] == 512) & (sel["token_size"] == 128)]
            assert 64 not in e["decode_batch"]
            for b, ms in zip(e["decode_batch"], e["decode_step_ms_measured"], strict=True):
                rows = dec[dec["batch_size"] == b]["token_time"]
                assert ms == pytest.approx(rows.sum() / len(rows), rel=1e-12)
            # Monotone knots equal the measured means except where neighbours were pooled.
            for key in ("prefill_ms", "decode_step_ms"):
                measured = e[f"{key}_measured"]
                mono = e[key]
                assert mono == pool_adjacent_violators(measured)
                changed = [i for i, (m, v) in enumerate(zip(measured, mono, strict=True)) if m != v]
                assert len(changed) <= 2
                for i in changed:  # pooled only within run-to-run noise
                    assert abs(mono[i] - measured[i]) / measured[i] < 0.03


@pytest.mark.realdata
def test_power_knots_reproduce_splitwise_raw(data_dir: Path) -> None:
    """Prefill power = the batch-1 sweep's peak_power, decode power = the 512-token batch
    sweep's average_power (TDP fractions), at the time knots' x; 0 (unmeasured) is skipped."""
    df = _splitwise_raw(data_dir)
    df = df[df["model"] == "llama2-70b"]
    for tp in (2, 4, 8):
        e = _entry("llama2-70b", "a100-80gb", tp)
        sel = df[(df["hardware"] == "a100-80gb") & (df["tensor_parallel"] == tp)]
        pre = sel[(sel["batch_size"] == 1) & (sel["token_size"] == 128)]
        assert e["prefill_power_tokens"] == e["prefill_tokens"]
        for n, f in zip(e["prefill_power_tokens"], e["prefill_power_tdp_fraction"], strict=True):
            rows = pre[pre["prompt_size"] == n]["peak_power"]
            assert rows.min() == rows.max() == f  # repeats carry one power value
        dec = sel[(sel["prompt_size"] == 512) & (sel["token_size"] == 128)]
        # batch 32's average_power is 0 (unmeasured), batch 64 is excluded
        assert e["decode_power_batch"] == [1, 2, 4, 8, 16]
        assert (dec[dec["batch_size"] == 32]["average_power"] == 0).all()
        for b, f in zip(e["decode_power_batch"], e["decode_power_tdp_fraction"], strict=True):
            rows = dec[dec["batch_size"] == b]["average_power"]
            assert rows.min() == rows.max() == f
    pm = _pm("llama2-70b", "a100-80gb", 4)
    assert pm.power is not None
    dec16 = _a100_tp4_decode16_fraction(df)
    assert float(pm.power.decode_tdp_fraction(16)) == dec16
    assert float(pm.power.decode_tdp_fraction(1000)) == dec16  # held, not extrapolated
    assert float(pm.power.prefill_tdp_fraction(96)) == pm.power.prefill_tdp_fraction_knots[0]
    # H100 rows have no power (all 0); scaled models have none
    assert (df[df["hardware"] == "h100-80gb"][["peak_power", "average_power"]] == 0).all().all()
    for key in [("llama2-70b", "h100-80gb", 4), ("llama3-70b", "a100-80gb", 4)]:
        assert _pm(*key).power is None
        assert "prefill_power_tdp_fraction" not in _entry(*key)


def _a100_tp4_decode16_fraction(df: pd.DataFrame) -> float:
    rows = df[
        (df["hardware"] == "a100-80gb")
        & (df["tensor_parallel"] == 4)
        & (df["prompt_size"] == 512)
        & (df["token_size"] == 128)
        & (df["batch_size"] == 16)
    ]["average_power"]
    return float(rows.iloc[0])


@pytest.mark.realdata
def test_ratio_scaling_by_hand(data_dir: Path) -> None:
    """llama2-7b on A100 at TP 1, decode batch 1: the llama2-70b A100 TP 2 (nearest Splitwise
    TP) batch-1 decode step x vidur linear-layer time ratio at 1 token."""
    vid = data_dir / "perf" / "vidur"
    ops = [
        "input_layernorm",
        "attn_pre_proj",
        "attn_rope",
        "attn_post_proj",
        "post_attention_layernorm",
        "mlp_up_proj",
        "mlp_act",
        "mlp_down_proj",
        "add",
    ]

    def linear_ms(path: Path, tp: int, n_layers: int) -> float:
        df = pd.read_csv(path)
        rows = df[(df["num_tokens"] == 1) & (df["num_tensor_parallel_workers"] == tp)]
        per_layer = sum(rows[f"time_stats.{op}.mean"].mean() for op in ops)
        return per_layer * n_layers + rows["time_stats.emb.mean"].mean()

    target = linear_ms(vid / "a100_Llama-2-7b-hf_mlp.csv.gz", tp=1, n_layers=32)
    reference = linear_ms(vid / "a100_Llama-2-70b-hf_mlp.csv.gz", tp=2, n_layers=80)
    ratio = target / reference
    assert 0.18 < ratio < 0.23  # ~1/10 of the parameters on 1/2 of the GPUs

    sw = _splitwise_raw(data_dir)
    base = sw[
        (sw["model"] == "llama2-70b")
        & (sw["hardware"] == "a100-80gb")
        & (sw["tensor_parallel"] == 2)
        & (sw["prompt_size"] == 512)
        & (sw["batch_size"] == 1)
        & (sw["token_size"] == 128)
    ]["token_time"].mean()
    e = _entry("llama2-7b", "a100-80gb", 1)
    assert e["reference"] == {"model": "llama2-70b", "gpu": "a100-80gb", "tp": 2}
    assert e["decode_ratio"][0] == pytest.approx(ratio, rel=1e-12)
    assert e["decode_step_ms_scaled"][0] == pytest.approx(base * ratio, rel=1e-12)
    pm = _pm("llama2-7b", "a100-80gb", 1)
    assert float(pm.decode_step_s(1)) == pytest.approx(e["decode_step_ms"][0] / 1000)


@pytest.mark.realdata
def test_llama3_on_h100_uses_a100_ratio(data_dir: Path) -> None:
    e = _entry("llama3-70b", "h100-80gb", 4)
    assert e["ratio_gpu"] == "a100-80gb"
    assert e["decode_ratio"] == _entry("llama3-70b", "a100-80gb", 4)["decode_ratio"]
    # Knots above vidur's 4,096-token Llama-2 sweep reuse the ratio at 4,096.
    assert e["prefill_ratio_tokens"][-1] == 4096


@pytest.mark.realdata
def test_embedded_table_regenerates_identically(data_dir: Path) -> None:
    text = resources.files("greenroute.data").joinpath("embedded/perf_knots.json").read_text()
    assert dumps(build_perf_knots(data_dir)) == text


@pytest.mark.realdata
def test_perf_model_from_data_dir_matches_embedded(data_dir: Path) -> None:
    a = _pm("llama3-8b", "h100-80gb", 1)
    b = lp.perf_model("llama3-8b", "h100-80gb", 1, knot_table(data_dir))
    np.testing.assert_array_equal(a.prefill_s_knots, b.prefill_s_knots)
    np.testing.assert_array_equal(a.decode_step_s_knots, b.decode_step_s_knots)
