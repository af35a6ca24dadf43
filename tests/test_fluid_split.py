"""The least-loaded split of a region's flow over hardware groups of different speed
(``sim/fluid_split.py``), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from greenroute.sim.fluid_split import jsq_shares, work_per_request


def _groups(e_pf_s: list[float], pooled: bool = True, region=(0, 0)):
    """Two groups hosting one model, one class; work per request = e_pf (no decode term)."""
    n_g = len(e_pf_s)
    e_pf = np.array(e_pf_s, dtype=float).reshape(n_g, 1, 1)
    e_out = np.zeros((1, 1))
    decode = np.zeros((n_g, 1, 33))
    return dict(
        share_gm=np.array([[0.5], [0.5]]),
        per_region=np.array([[[900.0]]] if max(region) == 0 else [[[900.0], [300.0]]]),
        g_region=np.array(region, dtype=np.int64),
        type_ok=np.ones((n_g, 1), dtype=bool),
        pooled=np.full(n_g, pooled),
        eff_slots=np.array([300.0, 300.0]),
        util=np.array([0.5, 0.5]),
        c_eff=np.array([30.0, 30.0]),
        decode=decode,
        e_pf=e_pf,
        e_out=e_out,
    )


def test_equal_slots_different_speed_get_equal_utilisation():
    # 300 usable slots each; a request costs 2 slot-s on group 0 and 1 slot-s on group 1:
    # shares proportional to 300 / 2 = 150 and 300 / 1 = 300 -> 1/3 and 2/3. With 900
    # requests in the epoch each group then has 300 x 2 = 600 and 600 x 1 = 600 slot-s of
    # work over 300 slots: the same utilisation (the slot split gave 900 and 450).
    a = _groups([2.0, 1.0])
    assert jsq_shares(**a)
    assert a["share_gm"][:, 0] == pytest.approx([1 / 3, 2 / 3], rel=1e-12)
    work = a["share_gm"][:, 0] * 900.0 * np.array([2.0, 1.0])
    assert work[0] == pytest.approx(work[1], rel=1e-12)


def test_round_robin_and_lone_groups_keep_the_slot_split():
    a = _groups([2.0, 1.0], pooled=False)  # round robin / random: not pooled
    assert not jsq_shares(**a)
    assert a["share_gm"][:, 0].tolist() == [0.5, 0.5]
    b = _groups([2.0, 1.0], region=(0, 1))  # one group per region: nothing to balance
    b["share_gm"] = np.array([[1.0], [1.0]])
    assert not jsq_shares(**b)
    assert b["share_gm"][:, 0].tolist() == [1.0, 1.0]


def test_work_per_request_interpolates_the_decode_time_at_the_batch():
    # batch = u c_eff + 1 = 0.5 x 4 + 1 = 3: decode 0.3 s/token x 10 tokens + 1 s prefill = 4
    decode = np.zeros((1, 1, 9))
    decode[0, 0, :] = 0.1 * np.arange(9)
    e_pf = np.array([[[1.0]]])
    e_out = np.array([[10.0]])
    assert work_per_request(0, 0, 0, 0.5, 4.0, decode, e_pf, e_out) == pytest.approx(4.0)
    # u = 0.625 -> batch 3.5: decode 0.35 -> 1 + 3.5 = 4.5
    assert work_per_request(0, 0, 0, 0.625, 4.0, decode, e_pf, e_out) == pytest.approx(4.5)
