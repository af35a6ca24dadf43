"""MARLIN phase 1 parts (seed 001 §5.2): reward terms by hand, HER relabelling, the 30/70
buffer split, FiLM at initialisation, the action -> plan map and a deterministic SAC update."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from greenroute.policies.marlin import reward as R
from greenroute.policies.marlin.buffers import AgentBuffers, Batch, her_relabel

torch = pytest.importorskip("torch")

GOALS = np.eye(4, dtype=np.float32)


def test_reward_terms_by_hand():
    # carbon agent (w = e_1): x = (1.1, 0.8, 1.0, 0.9), EMA ratios (1, 1, 1, 1)
    # metric = 1 / 0.8 - 1 = 0.25; EMA = 0.5 x (1 - 0.8) = 0.1; ECO = 0.05 x 0.5 = 0.025;
    # penalty = 5 x 0.01 = 0.05 -> r = 0.325, x the reward scale 10
    x = np.array([1.1, 0.8, 1.0, 0.9])
    r = R.reward(x, GOALS[1], np.ones(4), eco=0.5, sla=0.01)
    assert r == pytest.approx(3.25, abs=1e-12)
    # balanced weights 0.25 each, no EMA gain, no ECO, no penalty: mean of 1 / x - 1 (scale 1)
    r = R.reward(x, np.full(4, 0.25), x, eco=0.0, sla=0.0, cfg=R.RewardConfig(scale=1.0))
    assert r == pytest.approx(0.25 * (1 / 1.1 + 1 / 0.8 + 1 + 1 / 0.9) - 1.0, abs=1e-12)


def test_overload_by_hand():
    # two origins (10 and 20 slot-s/s of demand), two DCs of 20 slots; DC 1 carries
    # 1800 slot-s of backlog = 2 slots over a 900 s epoch. Local routing: u = (0.5, 1.1);
    # above 0.9: (0, 0.2), weighted by capacity: 20 x 0.2 / 40 = 0.1
    obs = SimpleNamespace(
        demand_rps=np.array([[[10.0, 20.0]]]), slot_s_per_request=np.array([[1.0, 1.0]]),
        capacity_slots=np.array([20.0, 20.0]), backlog_slot_s=np.array([0.0, 1800.0]),
        epoch_s=900.0,
    )  # fmt: skip
    assert R.overload(np.eye(2), obs, 0.9) == pytest.approx(0.1, abs=1e-12)
    # origin 1 sent to DC 0: loads (30, 0) + backlog (0, 2): u = (1.5, 0.1) -> 20 x 0.6 / 40
    route = np.array([[1.0, 0.0], [1.0, 0.0]])
    assert R.overload(route, obs, 0.9) == pytest.approx(0.3, abs=1e-12)


def test_consolidation_herfindahl():
    demand = np.array([1.0, 3.0])
    # all to DC 0: shares (1, 0, 0) -> (1 - 1/3) / (1 - 1/3) = 1
    assert R.consolidation(np.array([[1.0, 0, 0], [1.0, 0, 0]]), demand) == pytest.approx(1.0)
    # evenly spread: 0
    even = np.full((2, 3), 1 / 3)
    assert R.consolidation(even, demand) == pytest.approx(0.0, abs=1e-15)
    # local: loads (1, 3, 0) -> shares (.25, .75, 0): sum s^2 = 0.625 -> (0.625 - 1/3) / (2/3)
    local = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    assert R.consolidation(local, demand) == pytest.approx((0.625 - 1 / 3) / (2 / 3))


def test_ratios_and_sla_share():
    got = R.ratios(np.array([2.0, 0.0, 3.0, 1.0]), np.array([4.0, 1.0, 0.0, np.nan]))
    assert got.tolist() == [0.5, 0.05, 1.0, 1.0]  # floor 0.05; no finite reference -> 1
    # nothing served: TTFT NaN -> inf -> the ceiling, not a free 0
    fig = SimpleNamespace(ttft_mean_s=float("nan"), carbon_kg=1.0, water_m3=2.0, cost_usd=3.0)
    x = R.ratios(R.figures_vector(fig), np.array([0.5, 1.0, 1.0, 1.0]))
    assert x.tolist() == [10.0, 1.0, 2.0, 3.0]

    fig = SimpleNamespace(interactive_requests=90.0, slo_misses=5.0, dropped=10.0)
    assert R.sla_share(fig) == pytest.approx(0.15)


def _batch(x: np.ndarray, w: np.ndarray) -> Batch:
    n = len(x)
    z = np.hstack([np.repeat(w[None], n, 0), np.zeros((n, 3))]).astype(np.float32)
    return Batch(
        s=np.zeros((n, 2), np.float32), z=z, w=np.repeat(w[None], n, 0), plan=np.zeros((n, 4)),
        a=np.zeros((n, 4)), r=np.zeros(n), s2=np.zeros((n, 2)), z2=z.copy(), done=np.zeros(n),
        x=x.astype(np.float32), eco=np.zeros(n), sla=np.zeros(n), ema=np.ones((n, 4)),
    )  # fmt: skip


def test_her_relabels_with_the_achieved_goal():
    # sample 0 is best (relative to the epoch's mean) on water, sample 1 on TTFT
    x = np.array([[1.0, 1.0, 0.5, 1.0], [0.5, 1.0, 1.0, 1.0]])
    rng = np.random.default_rng(0)
    out = her_relabel(_batch(x, GOALS[1]), GOALS, 4, rng, her_ratio=1.0, her_mix=1.0)
    assert out.w.tolist() == [GOALS[2].tolist(), GOALS[0].tolist()]
    assert out.z[:, :4].tolist() == out.w.tolist()
    # reward recomputed: 10 x ((1 / 0.5 - 1) + EMA 0.5 x (1 - 0.5)) = 12.5 for both
    assert out.r == pytest.approx([12.5, 12.5])
    # mixed goals: half the achieved goal, half the agent's own (carbon, where x = 1)
    out = her_relabel(_batch(x, GOALS[1]), GOALS, 4, rng, her_ratio=1.0, her_mix=0.5)
    assert out.w.tolist() == [[0, 0.5, 0.5, 0], [0.5, 0.5, 0, 0]]
    # 10 x (0.5 x (1 / 0.5 - 1) + 0.5 x 0.5 x (1 - 0.5)) = 6.25
    assert out.r == pytest.approx([6.25, 6.25])
    # ratio 0: nothing relabelled, the original weights kept
    same = her_relabel(_batch(x, GOALS[1]), GOALS, 4, np.random.default_rng(0), her_ratio=0.0)
    assert same.w.tolist() == [GOALS[1].tolist()] * 2


def test_buffer_split_30_70():
    buf = AgentBuffers(replay_size=100, cross_size=50)
    x = np.ones((10, 4))
    cur = _batch(x, GOALS[0])
    cur.r[:] = 1.0
    old = _batch(x, GOALS[0])
    old.r[:] = 2.0
    buf.replay.add(cur)
    buf.cross.add(old)
    b = buf.sample(20, np.random.default_rng(0))
    assert (b.r == 1.0).sum() == 6 and (b.r == 2.0).sum() == 14
    # a ring keeps the newest capacity samples
    buf.cross.add(_batch(np.ones((45, 4)), GOALS[0]))
    assert len(buf.cross) == 50


def test_film_is_identity_at_init_and_plans_are_distributions():
    from greenroute.policies.marlin.nets import FiLM, to_plan

    film = FiLM(3, 5)
    h = torch.randn(2, 5)
    assert torch.equal(film(h, torch.randn(2, 3)), h)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    prior = torch.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    plan = to_plan(torch.zeros(1, 6), prior, mask, 4.0).reshape(2, 3)
    # origin 0: softmax(2, 0) over its two allowed DCs; origin 1: uniform
    e2 = np.exp(2.0)
    assert plan[0].tolist() == pytest.approx([e2 / (e2 + 1), 1 / (e2 + 1), 0.0])
    assert plan[1].tolist() == pytest.approx([1 / 3] * 3)


def _agent(seed: int):
    from greenroute.policies.marlin.sac import SACAgent, SACConfig

    mask = np.ones((2, 2), dtype=bool)
    cfg = SACConfig(actor_hidden=8, critic_hidden=8, batch_size=8)
    buf = AgentBuffers(replay_size=64, cross_size=32)
    return SACAgent(3, 7, mask, np.zeros((2, 2)), GOALS[1], cfg, seed, buf)


def test_sac_update_is_deterministic_by_seed_and_learns():
    rng = np.random.default_rng(0)
    s = rng.random(3).astype(np.float32)
    z = np.concatenate([GOALS[1], s]).astype(np.float32)
    runs = []
    for _ in range(2):
        agent = _agent(7)
        acts, plans = agent.sample(s, z, 16)
        assert plans.reshape(16, 2, 2).sum(axis=-1) == pytest.approx(np.ones((16, 2)))
        b = _batch(np.ones((16, 4)), GOALS[1])
        b.s = np.repeat(s[None], 16, 0)
        b.s2 = b.s.copy()
        b.z = np.hstack([b.w, b.s])
        b.z2 = b.z.copy()
        b.plan, b.a = plans, acts
        b.r = plans[:, 0].astype(np.float32)  # reward: share of origin 0 sent to DC 0
        agent.buffers.replay.add(b)
        before = [p.detach().clone() for p in agent.critic.parameters()]
        agent.update(np.random.default_rng(1), 5)
        after = list(agent.critic.parameters())
        changed = any(not torch.equal(p, q) for p, q in zip(after, before, strict=True))
        assert changed and agent.updates_done == 5
        runs.append(agent.exploit(s, z)[1])
    assert np.array_equal(runs[0], runs[1])
