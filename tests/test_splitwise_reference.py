"""The splitwise-sim reference: seeded traces and the micro case recomputed by hand.

splitwise-sim itself is not run here (it lives outside the repo, in its own venv); these tests
check the committed numbers against a paper computation from the Splitwise profile, so the
semantics written in the runner's docstring (prefill first, > 2048-token prompts alone, the
1.1x mixed-iteration cost, the first token from the prefill) are what produced them.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from greenroute.bench import splitwise_reference as sr

_JSON = Path(sr.__file__).with_name("splitwise_reference.json")


def _knots() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """performance_model.py:92-118: median prompt/token time (s) by prompt_size*batch_size."""
    rows: dict[int, tuple[list[float], list[float]]] = {}
    with (sr.DEFAULT_DATA_DIR / sr.PERF_CSV_RELPATH).open() as f:
        for r in csv.DictReader(f):
            key = (r["model"], r["hardware"], r["tensor_parallel"])
            if key != ("llama2-70b", "a100-80gb", "8"):
                continue
            bt = int(r["prompt_size"]) * int(r["batch_size"])
            p, t = rows.setdefault(bt, ([], []))
            p.append(float(r["prompt_time"]) / 1000)
            t.append(float(r["token_time"]) / 1000)
    x = np.array(sorted(rows), dtype=float)
    return (
        x,
        np.array([np.median(rows[int(k)][0]) for k in x]),
        np.array([np.median(rows[int(k)][1]) for k in x]),
    )


def _interp(x: np.ndarray, y: np.ndarray, v: float) -> float:
    """scipy interp1d(fill_value='extrapolate'): linear, extrapolated with the end segments."""
    i = int(np.clip(np.searchsorted(x, v) - 1, 0, len(x) - 2))
    return float(y[i] + (y[i + 1] - y[i]) * (v - x[i]) / (x[i + 1] - x[i]))


def test_micro_case_matches_a_hand_computed_iteration_timeline() -> None:
    x, prompt_t, token_t = _knots()

    def prompt(n: int) -> float:
        return _interp(x, prompt_t, n)

    def token(n: int) -> float:
        return _interp(x, token_t, n)

    req = sr.micro_requests()
    a = req.arrival_s + sr.ARRIVAL_OFFSET_S
    t1 = a[0] + prompt(1000)  # r0 prefills alone (r1 arrives during it)
    t2 = t1 + prompt(3000)  # r1: 3000 > 2048 budget, runs alone; r0's decode waits
    t3 = t2 + 1.1 * prompt(500 + 700 + 2)  # mixed: r2, r3 prefills + r0, r1 decodes
    t4 = t3 + token(4)  # r1 (3 outputs) finishes here
    t5 = t4 + 2 * token(3)  # r0, r2 finish
    t6 = t5 + 2 * token(1)  # r3 finishes
    ttft = np.array([t1, t2, t3, t3]) - a
    e2e = np.array([t5, t4, t5, t6]) - a
    got = json.loads(_JSON.read_text())["cases"]["micro_1dgx"]["per_request"]
    assert got["request_id"] == [0, 1, 2, 3]
    np.testing.assert_allclose(got["ttft_s"], ttft, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got["e2e_s"], e2e, rtol=0, atol=1e-9)


def test_constructed_traces_are_seeded_and_in_range() -> None:
    a = sr.case_requests("long_prompt_2dgx_high")
    b = sr.case_requests("long_prompt_2dgx_high")
    np.testing.assert_array_equal(a.arrival_s, b.arrival_s)
    np.testing.assert_array_equal(a.prompt_tokens, b.prompt_tokens)
    assert a.prompt_tokens.min() >= 4096 and a.prompt_tokens.max() <= 8192
    assert a.output_tokens.min() >= 16 and a.output_tokens.max() <= 64
    # 1500 Poisson(1.2/s) arrivals: mean gap 1/1.2 s within 3 standard errors (sd/sqrt(n))
    gap = np.diff(a.arrival_s).mean()
    assert abs(gap - 1 / 1.2) < 3 * (1 / 1.2) / np.sqrt(1499)
    m = sr.case_requests("mixed_4dgx_moderate")
    long_share = float(np.mean(m.prompt_tokens >= 6144))
    assert abs(long_share - 0.2) < 3 * np.sqrt(0.2 * 0.8 / m.prompt_tokens.size)


def test_conversation_trace_10x_divides_arrivals_by_ten() -> None:
    one = sr.case_requests("azure_conv_1x")
    ten = sr.case_requests("azure_conv_10x")
    assert one.arrival_s.size == 19366
    np.testing.assert_allclose(ten.arrival_s * 10, one.arrival_s)
    assert one.arrival_s[0] == 0.0


def test_written_trace_has_splitwise_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    sr.write_splitwise_trace(sr.micro_requests(), path)
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == [
        "request_id",
        "request_type",
        "application_id",
        "arrival_timestamp",
        "batch_size",
        "prompt_size",
        "token_size",
    ]
    assert [float(r["arrival_timestamp"]) for r in rows] == pytest.approx(
        [0.001, 0.05, 0.1, 0.12], abs=1e-12
    )
    assert [int(r["prompt_size"]) for r in rows] == [1000, 3000, 500, 700]
