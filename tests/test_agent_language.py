"""Language API of seed 000 Appendix B.1 (greenroute.agent.language): prompts, responses,
parsing with counted fallbacks, candidate actions."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenroute.agent.language import (
    DEFER,
    EXECUTE,
    LanguageCounters,
    Role,
    candidate_actions,
    effective_action,
    fallback_action,
    parse,
    render,
    textualize,
)
from greenroute.catalog.regions import REGIONS
from greenroute.constraints import ConstraintSet, Exclusion
from greenroute.core.errors import ConfigError
from greenroute.core.types import ObjectiveWeights, Observation
from greenroute.policies.rl import features as F

KEYS3 = ("DE-LU", "CL-SIC", "US-CAL-CISO")


def hand_obs() -> Observation:
    """3 regions, horizon 2, round numbers; origin CL-SIC may not use DE-LU."""
    h1 = 3
    allowed = np.ones((2, 3, 3), bool)
    allowed[:, 1, 0] = False
    ci = np.array([[300.0, 250.04, 100.06], [300.0, 260.04, 100.06], [300.0, 230.04, 100.06]])
    temp = np.array([[20.0, 10.04, 25.0], [20.0, 10.04, 25.0], [20.0, 12.04, 25.0]])
    dem = np.zeros((h1, 2, 3))
    dem[:, 0] = [10.0, 20.0, 30.0]
    dem[:, 1] = [1.0, 2.0, 3.0]
    ones = np.ones((h1, 3))
    return Observation(
        epoch=4, time_s=3600.0, time_utc=pd.Timestamp("2023-07-01 01:00", tz="UTC"),
        epoch_s=900.0, regions=KEYS3, origins=KEYS3,
        carbon_intensity_g_per_kwh=ci,
        price_usd_per_kwh=np.tile([0.1, 0.12346, 0.05], (h1, 1)),
        temp_c=temp, wetbulb_c=temp - 5, water_intensity_l_per_kwh=ones,
        energy_kwh_per_it_kwh=ones * 1.2, carbon_g_per_it_kwh=ci * 1.2,
        water_l_per_it_kwh=np.tile([2.5, 1.0, 2.25], (h1, 1)), cost_usd_per_it_kwh=ones * 0.1,
        it_kwh_per_request=np.array([[0.0002] * 3, [0.0005] * 3]),
        slot_s_per_request=np.array([[2.0] * 3, [4.0] * 3]),
        prefill_s_per_request=np.full((2, 3), 0.1),
        capacity_slots=np.array([100.0, 100.0, 100.0]),
        busy_slots=np.array([50.0, 0.0, 0.0]), queue_len=np.array([3.0, 0.0, 0.0]),
        backlog_slot_s=np.array([0.0, 9000.0, 0.0]), kv_free_frac=np.ones(3),
        resident_models=(frozenset(),) * 3, idle_power_kw=np.full(3, 10.0),
        peak_power_kw=np.full(3, 30.0), demand_rps=dem,
        pending_deferrable=np.array([0.0, 50.0, 0.0]),
        pending_deadline_s=np.array([math.inf, 10800.0, math.inf]), pending_due=None,
        latency_s=np.array([[0.001, 0.12, 0.09], [0.12, 0.001, 0.1], [0.09, 0.1, 0.001]]),
        allowed=allowed, ttft_slo_s=2.0, weights=ObjectiveWeights(), constraints=ConstraintSet(),
    )  # fmt: skip


MANAGER_PROMPT = """### INSTRUCTION:
You are an intelligent workload scheduler for a cluster of 3 geo-distributed Data Centers. \
Based on the aggregated workload originating at each datacenter and the current global status \
of the cluster, your goal is to decide the optimal destination for the workload originating at \
DC-2 (CL-SIC) to minimize carbon emissions, energy costs, and SLA violations. Your output must \
be one destination datacenter ID, DC-1 to DC-3; the destinations already decided this epoch \
for the other origins are listed. Prioritize minimizing carbon intensity, but respect resource \
constraints and never choose a datacenter marked not allowed. Do not explain your answer.

### INPUT:
Time: 2023-07-01 01:00 UTC, epoch 4, epoch length 15.0 min, TTFT SLO 2.00 s
Workloads:
- Workload at DC-1 (DE-LU): interactive 10.00 req/s, deferrable 1.00 req/s, held 0 req, \
next deadline none
- Workload at DC-2 (CL-SIC): interactive 20.00 req/s, deferrable 2.00 req/s, held 50 req, \
next deadline in 2.00 h
- Workload at DC-3 (US-CAL-CISO): interactive 30.00 req/s, deferrable 3.00 req/s, held 0 req, \
next deadline none
Cluster Status (latency one-way from DC-2 (CL-SIC)):
- DC-1 (DE-LU): Avail 100.0%, Util 50.0%, Queue 3 req, CI 300.0 g/kWh, Price 0.1000 $/kWh, \
Water 2.50 L/kWh, Temp 20.0 degC, Latency 120.0 ms, not allowed
- DC-2 (CL-SIC): Avail 90.0%, Util 0.0%, Queue 0 req, CI 250.0 g/kWh, Price 0.1235 $/kWh, \
Water 1.00 L/kWh, Temp 10.0 degC, Latency 1.0 ms, allowed
- DC-3 (US-CAL-CISO): Avail 76.0%, Util 0.0%, Queue 0 req, CI 100.1 g/kWh, Price 0.0500 $/kWh, \
Water 2.25 L/kWh, Temp 25.0 degC, Latency 100.0 ms, allowed
Decided this epoch: DC-1 (DE-LU) -> DC-3
Decide for: workload at DC-2 (CL-SIC)

### RESPONSE:
"""

WORKER_PROMPT = """### INSTRUCTION:
You are an expert temporal scheduler for 3 local data centers. Based on the current pending \
task and the local status of DC-2 (CL-SIC), decide whether to execute the task now (1) or \
defer it (0). Your goal is to execute tasks when local conditions (carbon intensity, \
electricity price) are most favorable, without violating the task's SLA. Your output must be \
one integer (0 or 1) for the worker of DC-2 (CL-SIC). Be concise.

### INPUT:
Time: 2023-07-01 01:00 UTC, epoch 4, epoch length 15.0 min, TTFT SLO 2.00 s
-- DC-2 (CL-SIC) Status --
Pending Task: held 50 req, next deadline in 2.00 h, urgency 0.83, arrivals 2.00 req/s, \
service 4.00 slot-s/req, energy 0.500 Wh/req
Local State: Avail 90.0%, Util 0.0%, Queue 0 req, CI 250.0 g/kWh, Price 0.1235 $/kWh, \
Temp 10.0 degC
CI Trend (g/kWh vs now): past [+0.0, +0.0, -10.0, +0.0], next 4 epochs [+10.0, -20.0, -20.0, \
-20.0]
Temp Trend (degC vs now): past [+0.0, +0.0, -1.0, +0.0], next 4 epochs [+0.0, +2.0, +2.0, +2.0]

### RESPONSE:
"""


def test_manager_prompt_exact_text():
    """Avail: DC-2 has 9000 slot-s backlog / 900 s / 100 slots = 10 % busy -> 90.0 %; DC-3
    gets DE-LU's decided load 10 req/s x 2 slot-s + 1 req/s x 4 slot-s = 24 slots -> 76.0 %."""
    assert textualize(hand_obs(), Role.manager(1, decided=(2,))) == MANAGER_PROMPT


def test_worker_prompt_exact_text():
    """Urgency 1 - 2 h / 12 h = 0.83; CI trend: past (250.04 padded, 240.04, 250.04) - now,
    forecast (260.04, 230.04, then the last value repeated) - now."""
    obs = hand_obs()
    mem = F.TrendMemory(3)
    mem.ci.extend([np.array([300.0, 240.04, 100.0]), np.array([300.0, 250.04, 100.0])])
    mem.temp.extend([np.array([20.0, 9.04, 25.0]), np.array([20.0, 10.04, 25.0])])
    assert textualize(obs, Role.worker(1, memory=mem)) == WORKER_PROMPT


def test_prompt_numbers_are_the_experts_features():
    """The Avail figure is the expert's free-capacity feature (features.dc_features[0])."""
    obs = geo_obs(5)
    decided = (4, 4, 0)
    assigned = np.zeros(5)
    for o, d in enumerate(decided):
        assigned[d] += F.origin_load_slots(obs, o, d)
    text = textualize(obs, Role.manager(3, decided=decided))
    for r, key in enumerate(obs.regions):
        feat = F.dc_features(obs, 3, r, assigned)
        line = re.search(rf"^- DC-{r + 1} \({key}\): Avail (-?[\d.]+)%", text, re.M)
        assert float(line.group(1)) == pytest.approx(100 * feat[0], abs=0.05)
        assert f"CI {obs.carbon_intensity_g_per_kwh[0, r]:.1f} g/kWh" in text


def test_render_formats():
    obs = hand_obs()
    assert render(2, obs, Role.manager(0)) == "DC-3 (US-CAL-CISO)"
    assert render(EXECUTE, obs, Role.worker(0)) == "1 (execute)"
    assert render(DEFER, obs, Role.worker(0)) == "0 (defer)"
    with pytest.raises(ConfigError):
        render(3, obs, Role.manager(0))
    with pytest.raises(ConfigError):
        textualize(obs, "manager")


@pytest.mark.parametrize(
    "text, action",
    [
        ("DC-3", 2), ("dc3", 2), ("  3  ", 2), ("3 (US-CAL-CISO)", 2), ("**California**", 2),
        ("us-cal-ciso", 2), ("San Jose", 2), ("DC-2.", 1), ("Chile\nbecause DC-3 is busy", 1),
        ("DC-3 because DC-2 has a higher CI", 2), ("### RESPONSE:\nDC-2 (CL-SIC)", 1),
        ("Destination: data center 3", 2),
    ],
)  # fmt: skip
def test_manager_parse_tolerates_noise(text, action):
    res = parse(text, hand_obs(), Role.manager(1))
    assert (res.action, res.valid, res.status) == (action, True, "ok")


@pytest.mark.parametrize(
    "text, status",
    [
        ("", "unparseable"), ("blah blah", "unparseable"), ("France", "unparseable"),
        ("3 3 1", "unparseable"), ("9" * 5000, "unparseable"), (None, "unparseable"),
        ("DC-7", "unknown"), ("Japan", "unknown"), ("0", "unknown"),
        ("DC-2 or DC-3", "ambiguous"), ("DC-3 (CL-SIC)", "ambiguous"),
        ("DC-2 (JP-TK)", "ambiguous"), ("DC-1", "forbidden"), ("Germany", "forbidden"),
    ],
)  # fmt: skip
def test_manager_fallbacks(text, status):
    """Origin CL-SIC's fallback is its own region, DC-2; DE-LU (DC-1) is forbidden to it."""
    res = parse(text, hand_obs(), Role.manager(1))
    assert (res.action, res.valid, res.status) == (1, False, status)
    assert res.fallback and "fallback DC-2 (CL-SIC)" in res.reason


def test_manager_fallback_when_own_region_forbidden():
    """Origin DE-LU without DE-LU: the allowed region nearest to it (US-CAL-CISO, 90 ms)."""
    obs = hand_obs()
    allowed = obs.allowed.copy()
    allowed[:, 0, 0] = False
    obs = replace(obs, allowed=allowed)
    assert fallback_action(obs, Role.manager(0)) == 2
    assert parse("garbage", obs, Role.manager(0)).action == 2


def test_ambiguous_alias_is_never_resolved():
    """geo10 has two US regions: 'USA' fits both and is refused; 'New York' is one."""
    obs = geo_obs(10)
    assert parse("USA", obs, Role.manager(0)).status == "ambiguous"
    ny = obs.regions.index("US-NY-NYIS")
    assert parse("New York", obs, Role.manager(0)).action == ny
    assert parse("DC-10", obs, Role.manager(0)).action == 9  # not DC-1


@pytest.mark.parametrize(
    "text, action, status",
    [
        ("1", EXECUTE, "ok"), ("0 (defer)", DEFER, "ok"), ("Execute now.", EXECUTE, "ok"),
        ("DEFER", DEFER, "ok"), ("wait", DEFER, "ok"), ("1 because CI is low", EXECUTE, "ok"),
        ("maybe", EXECUTE, "unparseable"), ("2", EXECUTE, "unknown"),
        ("1 0 1", EXECUTE, "ambiguous"), ("do not execute", EXECUTE, "ambiguous"),
        ("execute or defer", EXECUTE, "ambiguous"),
    ],
)  # fmt: skip
def test_worker_parse(text, action, status):
    res = parse(text, hand_obs(), Role.worker(1))
    assert (res.action, res.status, res.valid) == (action, status, status == "ok")


def test_counters_count_invalid_and_fallbacks():
    obs, c = hand_obs(), LanguageCounters()
    for text in ("DC-2", "DC-1", "DC-7", "nonsense", "DC-2 or DC-3", "3"):
        c.record(parse(text, obs, Role.manager(1)))
    c.record(parse("2", obs, Role.worker(1)))
    c.record(parse("0", obs, Role.worker(1)))
    # invalid: DC-1 (forbidden), DC-7 and worker "2" (unknown); fallbacks add two more
    assert c.as_metrics() == {"llm_decisions": 8, "llm_invalid_actions": 3, "llm_fallbacks": 5}


def test_excluded_region_never_a_candidate():
    obs = geo_obs(10)
    cal = obs.regions.index("US-CAL-CISO")
    rules = ConstraintSet(exclusions=(Exclusion("US-CAL-CISO"),))
    for o in range(obs.n_origins):
        cands = candidate_actions(obs, Role.manager(o), rules)
        assert cal not in cands and len(cands) == 9
        res = parse("California", obs, Role.manager(o), rules)
        assert res.status == "forbidden" and res.action != cal
        assert "- DC-3 (US-CAL-CISO):" in textualize(obs, Role.manager(o), rules)
        assert textualize(obs, Role.manager(o), rules).split("\n- DC-3 (US-CAL-CISO):")[1]\
            .split("\n")[0].endswith("not allowed")  # fmt: skip
    # an exclusion window that is over is no rule now; a residency rule is
    past = ConstraintSet(exclusions=(Exclusion("US-CAL-CISO", 0.0, obs.time_s),))
    assert cal in candidate_actions(obs, Role.manager(0), past)
    eu = ConstraintSet(residency={"DE-LU": frozenset({"DE-LU", "GB"})})
    assert candidate_actions(obs, Role.manager(0), eu) == [0, obs.regions.index("GB")]


def test_capacity_and_power_cap_masks():
    obs = hand_obs()
    assert candidate_actions(obs, Role.manager(0)) == [0, 1, 2]
    no_cap = replace(obs, capacity_slots=np.array([100.0, 0.0, 100.0]))
    assert candidate_actions(no_cap, Role.manager(0)) == [0, 2]
    at_idle = ConstraintSet(power_caps_kw={"US-CAL-CISO": 10.0})  # idle power is 10 kW
    assert candidate_actions(obs, Role.manager(0), at_idle) == [0, 1]
    # with no allowed region left with capacity, the allowed ones stay candidates
    none = replace(obs, capacity_slots=np.zeros(3))
    assert candidate_actions(none, Role.manager(1)) == [1, 2]
    assert candidate_actions(obs, Role.worker(1)) == [EXECUTE, DEFER]


def test_effective_action_maps_forbidden_teacher_choice():
    """A fixed-size expert may pick a forbidden region: the plan sends the work to the allowed
    region nearest the origin, and that is the action recorded."""
    obs = hand_obs()
    assert effective_action(0, obs, Role.manager(1)) == 1  # DE-LU forbidden -> own (1 ms)
    assert effective_action(2, obs, Role.manager(1)) == 2
    allowed = obs.allowed.copy()
    allowed[:, 1, 1] = False
    no_own = replace(obs, allowed=allowed)
    assert effective_action(0, no_own, Role.manager(1)) == 2  # -> CAL (100 ms), the only one
    assert effective_action(1, obs, Role.worker(1)) == EXECUTE


# ------------------------------------------------------------------------- property tests
@functools.cache
def geo_obs(n: int) -> Observation:
    """The first observation of geo3/geo5/geo10 as the environment builds it (embedded data)."""
    from greenroute.envs.geo_core import GeoCore

    return GeoCore(f"geo{n}", days=0.25).reset(0)


CATALOG = sorted(REGIONS)


@st.composite
def decisions(draw):
    """A real geo observation with random region names, rules mask, capacity and role."""
    n = draw(st.sampled_from([3, 5, 10]))
    obs = geo_obs(n)
    if draw(st.booleans()):
        keys = tuple(draw(st.permutations(CATALOG))[:n])
    else:
        keys = tuple(f"site-{i}" for i in draw(st.permutations(range(20)))[:n])
    allowed = np.array(draw(st.lists(st.booleans(), min_size=2 * n * n, max_size=2 * n * n)))
    allowed = allowed.reshape(2, n, n)
    allowed[1, np.arange(n), np.arange(n)] = True  # every origin keeps somewhere to go
    cap = np.array(draw(st.lists(st.sampled_from([0.0, 50.0, 1e4]), min_size=n, max_size=n)))
    obs = replace(obs, regions=keys, origins=keys, allowed=allowed, capacity_slots=cap)
    o = draw(st.integers(0, n - 1))
    decided = tuple(draw(st.lists(st.integers(0, n - 1), min_size=o, max_size=o)))
    role = draw(st.sampled_from([Role.manager(o, decided), Role.worker(o)]))
    return obs, role


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decisions())
def test_render_parse_round_trip_every_candidate(case):
    obs, role = case
    cands = candidate_actions(obs, role)
    assert cands, "every origin keeps an allowed region"
    text = textualize(obs, role)
    assert text == textualize(obs, role)  # deterministic
    assert text.startswith("### INSTRUCTION:\n") and text.endswith("### RESPONSE:\n")
    if role.kind == "manager":
        status = re.findall(r"^- DC-(\d+) \(.*, (allowed|not allowed)$", text, re.M)
        assert [int(k) - 1 for k, s in status if s == "allowed"] == cands
        assert len(status) == obs.n_regions
        assert len(re.findall(r"^- Workload at ", text, re.M)) == obs.n_origins
        mask = obs.allowed[:, role.origin].any(axis=0)
        assert all(mask[a] for a in cands)
    for a in cands:
        res = parse(render(a, obs, role), obs, role)
        assert (res.action, res.valid, res.status) == (a, True, "ok")
        assert effective_action(a, obs, role) == a


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decisions(), st.text(max_size=60))
def test_parse_never_raises_and_returns_a_candidate(case, text):
    obs, role = case
    res = parse(text, obs, role)
    assert res.action in candidate_actions(obs, role)
    assert res.valid == (res.status == "ok")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decisions(), st.integers(0, 9))
def test_any_teacher_choice_records_as_a_parseable_candidate(case, raw):
    """A fixed-size expert's Manager can name any region index, allowed or not; the recorded
    action (effective_action) is a candidate and survives render -> parse."""
    obs, role = case
    raw = raw % obs.n_regions if role.kind == "manager" else raw % 2
    a = effective_action(raw, obs, role)
    assert a in candidate_actions(obs, role)
    if raw in candidate_actions(obs, role):
        assert a == raw
    assert parse(render(a, obs, role), obs, role).action == a


def test_origins_that_are_not_regions():
    """Two user populations over three regions: the prompt names them as origins, the Manager
    fallback is the allowed region nearest the origin, the Worker is the same-index region's."""
    base = hand_obs()
    origins = ("eu-users", "us-users")
    obs = replace(
        base, origins=origins, demand_rps=base.demand_rps[:, :, :2],
        pending_deferrable=np.array([0.0, 7.0]), pending_deadline_s=np.array([math.inf] * 2),
        latency_s=np.array([[0.01, 0.12, 0.15], [0.09, 0.1, 0.02]]),
        allowed=np.ones((2, 2, 3), bool),
    )  # fmt: skip
    text = textualize(obs, Role.manager(1, decided=(0,)))
    assert "- Workload at origin us-users: interactive 20.00 req/s" in text
    assert "Decided this epoch: origin eu-users -> DC-1\n" in text
    assert "Cluster Status (latency one-way from origin us-users):" in text
    assert "Latency 20.0 ms, allowed\n" in text
    assert parse("nothing", obs, Role.manager(1)).action == 2  # US-CAL-CISO, 20 ms
    assert "-- DC-2 (CL-SIC) Status --\nPending Task: held 7 req" in textualize(obs, Role.worker(1))


def test_render_epoch_decision_text():
    from greenroute.agent.language import render_epoch

    assert render_epoch([2, 1, 2], [1, 0, 1], hand_obs()) == (
        "DC-1 (DE-LU) routes to DC-3 (US-CAL-CISO), DC-2 (CL-SIC) routes to DC-2 (CL-SIC), "
        "DC-3 (US-CAL-CISO) routes to DC-3 (US-CAL-CISO); deferred at DC-2 (CL-SIC)"
    )
