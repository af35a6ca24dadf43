"""``bench.route_states``: server states rebuilt from a hand-built request frame (every figure
computed on paper in the comments)."""

import numpy as np
import pandas as pd
import pytest

from greenroute.bench.route_states import (
    K_MAX,
    engine_parts,
    free_slot_split,
    server_states,
    summarise,
)
from greenroute.data.requests import CLASS_DEFERRABLE, CLASS_INTERACTIVE


def _frame() -> pd.DataFrame:
    # region 0: servers 0 and 1; region 1: server 2 (H, the one deferrable request). F still
    # runs at the end (no finish), G was dropped (ignored). The run ends at the last finish, 6.
    rows = [  # name, region, server, dispatch, finish, ttft, drop reason
        ("A", 0, 0, 0.0, 4.0, 0.1, "none"),
        ("B", 0, 0, 1.0, 3.0, 0.2, "none"),
        ("C", 0, 0, 2.0, 5.0, 0.3, "none"),
        ("D", 0, 1, 0.5, 2.5, 0.4, "none"),
        ("E", 0, 1, 3.5, 6.0, 0.5, "none"),
        ("F", 0, 1, 5.5, np.nan, 0.6, "none"),
        ("G", 0, 1, 1.5, np.nan, np.nan, "kv_overflow"),
        ("H", 1, 2, 1.0, 2.0, 0.7, "none"),
    ]
    cols = ["name", "region", "server", "dispatch_s", "finish_s", "ttft_s", "drop_reason"]
    frame = pd.DataFrame(rows, columns=cols)
    frame["cls"] = np.where(frame["name"] == "H", CLASS_DEFERRABLE, CLASS_INTERACTIVE)
    # the iteration that produced the first token: a tenth of the TTFT, with 0..7 decodes
    frame["first_iteration_s"] = frame["ttft_s"] / 10.0
    frame["first_iteration_decodes"] = np.arange(len(frame), dtype=float)
    # reached the server 0.05 s after dispatch; first token at dispatch + TTFT
    frame["server_arrival_s"] = frame["dispatch_s"] + 0.05
    frame["first_token_s"] = frame["dispatch_s"] + frame["ttft_s"]
    frame["arrival_residual_s"] = 0.01
    frame["arrival_queue_ahead"] = 0.0
    return frame


def test_states_are_rebuilt_from_dispatch_and_finish():
    st = server_states(_frame(), skip_s=0.0)
    # own state before each arrival (A..F, H): server 0 holds A, then A+B; E arrives to an empty
    # server 1 (D left at 2.5); F meets E
    assert st.k_own.tolist() == [0, 1, 2, 0, 0, 1, 0]
    # least state of the region's other servers: A meets server 1 empty, B and C meet D, D meets
    # A, E meets A+C (B left at 3), F meets nothing (C left at 5); H's region has no other
    assert st.k_min_other.tolist() == [0, 1, 1, 1, 2, 0, K_MAX]
    # server 0: k 1/2/3/2/1/0 over [0,1) [1,2) [2,3) [3,4) [4,5) [5,6]; server 1: 0 [0,0.5),
    # 1 [0.5,2.5), 0 [2.5,3.5), 1 [3.5,5.5), 2 [5.5,6]; server 2: 0 [0,1), 1 [1,2), 0 [2,6]
    assert st.time_s[:5].tolist() == pytest.approx([1 + 1.5 + 5, 2 + 4 + 1, 2 + 0.5, 1, 0])
    assert st.time_s.sum() == pytest.approx(18.0)  # three servers x 6 s
    # completions by the state before them: B at 3, A at 2, C at 1; D at 1, E at 2; H at 1
    assert st.completions[:4].tolist() == [0, 3, 2, 1]
    assert st.arrivals[:4].tolist() == [4, 2, 1, 0]  # A D E H at 0; B F at 1; C at 2
    assert st.servers == 3


def test_summary_little_and_rates():
    r = summarise(server_states(_frame(), skip_s=0.0), cap=2)
    lam = 7 / 18  # arrivals per server-second
    assert r["lam_per_server"] == pytest.approx(lam)
    assert r["p_meets_cap"] == pytest.approx(1 / 7)  # only C meets two running
    assert r["room_elsewhere"] == 1.0  # server 1 held D only
    assert r["queue_ahead_mean"] == 0.0
    # C waited in state 3 from 2 to 3: E[(k - 2)^+] = 1 / 18, W = (1/18) / (lam / 7) = 1 s
    assert r["wait_full_little_s"] == pytest.approx(1.0)
    assert r["ttft_full_s"] == pytest.approx(0.3)
    assert r["ttft_not_full_s"] == pytest.approx(np.mean([0.1, 0.2, 0.4, 0.5, 0.6, 0.7]))
    assert r["ttft_by_queue_s"][0] == pytest.approx(0.3)
    assert r["mu"][2] == pytest.approx(2 / 2.5)
    assert r["theta"][1] == pytest.approx((2 / 7) / lam)
    assert r["pi"].sum() == pytest.approx(1.0)
    assert r["k_mean"] == pytest.approx((7 * 1 + 2.5 * 2 + 1 * 3) / 18)


def test_warm_up_is_left_out():
    st = server_states(_frame(), skip_s=2.2)
    # arrivals after 2.2: E, F (H, A-D before); time from 2.2 to 6 on each of three servers
    assert st.k_own.tolist() == [0, 1]
    assert st.time_s.sum() == pytest.approx(3 * 3.8)
    assert st.completions.sum() == 5  # B 3, A 4, C 5, D 2.5, E 6 (H at 2 is before)


def test_engine_parts_read_interactive_arrivals():
    st = server_states(_frame(), skip_s=0.0)
    assert st.interactive.tolist() == [True] * 6 + [False]
    e = engine_parts(st, st.interactive, cap=2)
    assert e["p_wait"] == pytest.approx(1 / 6)  # C of A-F
    assert e["wait_given_s"] == pytest.approx(1.0)  # Little over all arrivals
    assert e["pre_s"] == pytest.approx(np.mean([0.1, 0.2, 0.4, 0.5, 0.6]))  # H left out
    # the same arrivals split by free_slot_split (every one found the cap's room, C did not)
    f = free_slot_split(st, cap=2)
    assert f["own_s"] == pytest.approx(np.mean([0.01, 0.02, 0.04, 0.05, 0.06]))
    assert f["own_decodes"] == pytest.approx(np.mean([0, 1, 3, 4, 5]))  # G dropped
    # TTFT - 0.05 - TTFT / 10 for A, B, D, E, F
    assert f["start_s"] == pytest.approx(np.mean([0.09, 0.18, 0.36, 0.45, 0.54]) - 0.05)
    assert e["after_wait_s"] == pytest.approx(0.3 - 1.0)
    assert e["ttft_mean_s"] == pytest.approx(0.35)


def test_model_parts_add_up_to_the_fluid_ttft():
    # a quarter day of the calibration region at 60 %, no minute noise: no epoch saturates, so
    # the mean TTFT is the fixed part plus P(wait) x the wait given waiting, exactly
    from greenroute.bench.calibration_cases import CalibrationCase
    from greenroute.bench.route_states import model_parts

    m = model_parts(CalibrationCase("t", "least-loaded", 0.6), seed=0)
    assert m["other_s"] == pytest.approx(0.0, abs=1e-12)
    assert 0.0 < m["p_wait"] < 0.05  # 60 %: the cap is seldom met
    assert m["pre_s"] > 0.1  # a prefill iteration of ~1,150 tokens plus the residual


def test_a_request_still_on_the_network_is_no_server():
    """A request dispatched within its network latency of the run's end never reaches a server
    (``server`` -1, no drop reason, no finish): it must not count as a fourth, empty server
    (it did until 2026-11-27: 5.5 h of state 0 and every arrival of its region meeting "room
    elsewhere")."""
    frame = _frame()
    late = frame.iloc[[0]].assign(name="I", server=-1, dispatch_s=5.9, finish_s=np.nan,
                                  ttft_s=np.nan)  # fmt: skip
    with_late = pd.concat([frame, late], ignore_index=True)
    a, b = server_states(_frame(), skip_s=0.0), server_states(with_late, skip_s=0.0)
    assert b.servers == 3
    assert b.time_s.tolist() == a.time_s.tolist()
    assert b.k_min_other.tolist() == a.k_min_other.tolist()
    assert b.k_own.tolist() == a.k_own.tolist()


def test_count_law_figures_by_hand():
    """Time-average law of ``_frame`` (cap 2): ``pi`` = (7.5, 7, 2.5, 1) / 18 over k = 0..3."""
    from greenroute.bench.route_states import theta_slope
    from greenroute.sim.queueing_kernel import erlang_c

    r = summarise(server_states(_frame(), skip_s=0.0), cap=2)
    mean = 15 / 18
    var = (7 + 2.5 * 4 + 9) / 18 - mean**2  # 0.75
    assert r["p_time"] == pytest.approx(3.5 / 18)
    assert r["z_time"] == pytest.approx(var / mean)  # 0.9
    assert r["n_run"] == pytest.approx((7 + 2.5 * 2 + 2) / 18)  # E[min(k, 2)]
    assert r["hayward_p"] == pytest.approx(erlang_c(2 / 0.9, (14 / 18) / 0.9))
    # arrivals see 0 1 2 0 0 1 0
    assert r["k_seen"] == pytest.approx(4 / 7)
    assert r["seen_excess"] == pytest.approx(4 / 7 - mean)
    # theta(0) = 4 / 7.5 / lam, theta(1) = 2 / 7 / lam (lam = 7 / 18); states 0 and 1 below the cap
    lam = 7 / 18
    th = [4 / 7.5 / lam, 2 / 7 / lam]
    x = [-mean, 1 - mean]
    num = 7.5 * x[0] * (th[0] - 1) + 7 * x[1] * (th[1] - 1)
    den = 7.5 * x[0] ** 2 + 7 * x[1] ** 2
    assert r["theta_slope"] == pytest.approx(num / den)
    # random routing's flat preference has no slope; one state is not enough to fit one
    pi = np.array([0.2, 0.5, 0.3])
    assert theta_slope(pi, np.ones(3), 1.1, 3) == pytest.approx(0.0)
    assert np.isnan(theta_slope(pi, np.ones(3), 1.1, 1))


def test_iteration_split_by_hand():
    """Two servers' figures pooled. Server 0 is the kernel's hand case
    (``test_iteration_boundaries_ttft_e2e_and_accumulators``): busy 1.27 s, prefill iterations
    [0, 0.8] (prompts A+B, 2 running) and [0.8, 1.22] (prompt C, decodes A and B, 3 running),
    one decode-only iteration of 0.05 s with 2 running. Server 1: 2 s busy, one prefill
    iteration of 0.5 s (1 prompt, 4 decodes, 5 running), then 1.5 s decode-only with 4."""
    from greenroute.bench.route_states import iteration_split

    servers = pd.DataFrame(
        {
            "busy_s": [1.27, 2.0],
            "running_request_s": [2 * 0.8 + 3 * 0.42 + 2 * 0.05, 5 * 0.5 + 4 * 1.5],
            "prefill_iteration_s": [1.22, 0.5],
            "prefill_iterations": [2, 1],
            "prefill_prompts": [3, 1],
            "prefill_carried_decodes": [2, 4],
            "prefill_running_request_s": [2 * 0.8 + 3 * 0.42, 5 * 0.5],
        }
    )
    s = iteration_split(servers)
    assert s["prefill_busy_share"] == pytest.approx(1.72 / 3.27)
    assert s["prompts_per_prefill"] == pytest.approx(4 / 3)
    assert s["decodes_per_prefill"] == pytest.approx(6 / 3)
    assert s["running_decode_only"] == pytest.approx((2 * 0.05 + 4 * 1.5) / (0.05 + 1.5))
    assert s["running_prefill"] == pytest.approx((2.86 + 2.5) / 1.72)
    assert s["running_busy"] == pytest.approx((2.96 + 8.5) / 3.27)


def test_free_arrival_residual_by_hand():
    """Two servers pooled: server 0 the kernel's hand case (arrivals A at an idle server and C
    with 0.7 s of a prefill iteration left, B behind A's queued prompt); server 1 three free
    arrivals, one meeting 0.2 s of a prefill iteration, two meeting 0.01 and 0.03 s of
    decode-only ones, and two behind queued prompts."""
    from greenroute.bench.route_states import free_arrival_residual

    servers = pd.DataFrame(
        {
            "free_arrivals": [2, 3],
            "free_arrival_residual_s": [0.7, 0.2 + 0.01 + 0.03],
            "free_arrivals_in_prefill": [1, 1],
            "free_arrival_prefill_residual_s": [0.7, 0.2],
            "queued_arrivals": [1, 2],
            "queued_arrival_prompts_ahead": [1, 1 + 3],
        }
    )
    r = free_arrival_residual(servers)
    assert r["arrivals"] == 5
    assert r["residual_s"] == pytest.approx(0.94 / 5)
    assert r["in_prefill_share"] == pytest.approx(2 / 5)
    assert r["prefill_residual_s"] == pytest.approx(0.9 / 2)
    assert r["decode_residual_s"] == pytest.approx(0.04 / 3)
    # three more found a free slot behind queued prompts: B on server 0 (1 ahead), two on
    # server 1 (1 and 3 ahead)
    assert r["queued_share"] == pytest.approx(3 / 8)
    assert r["prompts_ahead"] == pytest.approx(5 / 3)


def test_free_slot_split_by_queue_ahead():
    # interactive arrivals below the cap 2: A, B, D, E, F (C meets 2; H is deferrable). Give B
    # and E a queue ahead (1 and 3 requests), a residual of 0.1 s (0.01 s for the others), and
    # own iterations of 0.3 s (0.1 s for the others): start = TTFT - 0.05 - own
    frame = _frame()
    frame["arrival_queue_ahead"] = [0.0, 1.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0]
    frame["arrival_residual_s"] = np.where(frame["arrival_queue_ahead"] > 0, 0.1, 0.01)
    frame["first_iteration_s"] = np.where(frame["arrival_queue_ahead"] > 0, 0.3, 0.1)
    frame["first_token_s"] = frame["dispatch_s"] + 0.05 + frame["first_iteration_s"] + 0.2
    f = free_slot_split(server_states(frame, skip_s=0.0), cap=2)
    assert f["queued_share"] == pytest.approx(2 / 5)
    assert f["queued_mean"] == pytest.approx(2.0)
    assert f["start_s"] == pytest.approx(0.2)  # every start delay is 0.2 s here
    assert f["own_s"] == pytest.approx((3 * 0.1 + 2 * 0.3) / 5)
    assert (f["resid_q0_s"], f["resid_q_s"]) == pytest.approx((0.01, 0.1))
    # per arrival: (0.2 - 0.1) x 2/5 of start beyond the residual, (0.3 - 0.1) x 2/5 of own
    assert f["ahead_start_s"] == pytest.approx(0.04)
    assert f["ahead_own_s"] == pytest.approx(0.08)
