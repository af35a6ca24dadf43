"""Conservation and constraint safety as properties (hypothesis), over random small runs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import greenroute
from greenroute.constraints import ConstraintSet, Exclusion
from greenroute.sim.results import METRIC_KEYS

REGIONS = ("DE-LU", "US-CAL-CISO", "SG")
POLICIES = ("local-only", "round-robin", "random", "least-loaded", "lowest-carbon",
            "lowest-price", "coolest", "nearest", "carbon-threshold")  # fmt: skip
DAYS = 0.06  # ~86 minutes: 6 epochs


@st.composite
def constraint_sets(draw):
    excl = []
    if draw(st.booleans()):
        region = draw(st.sampled_from(REGIONS))
        start_h = draw(st.sampled_from([0.0, 0.25, 0.5]))
        excl.append(Exclusion(region, start_h * 3600, (start_h + 0.75) * 3600, "test"))
    residency = {}
    if draw(st.booleans()):
        origin = draw(st.sampled_from(REGIONS))
        allowed = draw(st.sets(st.sampled_from(REGIONS), min_size=2, max_size=3))
        residency[origin] = frozenset(allowed)
    return ConstraintSet(tuple(excl), residency)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st.sampled_from(POLICIES),
    seed=st.integers(0, 10_000),
    cs=constraint_sets(),
    fidelity=st.sampled_from(["request", "fluid"]),
)
def test_conservation_ledgers_and_forbidden_regions(policy, seed, cs, fidelity):
    res = greenroute.run(
        "demo",
        policy,
        seed=seed,
        days=DAYS,
        constraints=cs,
        fidelity=fidelity,
        record_requests=fidelity == "request",
    )
    m = res.metrics
    for key in METRIC_KEYS:
        assert key in m
    # every request is exactly one of: completed, dropped, in flight
    total = m["requests_completed"] + m["requests_dropped"] + m["requests_in_flight"]
    assert total == pytest.approx(m["requests_total"], rel=1e-9, abs=1e-6)
    assert min(m["requests_completed"], m["requests_dropped"], m["requests_in_flight"]) >= 0
    # region ledgers sum to the totals; facility energy >= IT energy
    ep = res.epochs
    for col, key in (("carbon_kg", "carbon_kg"), ("energy_kwh", "energy_kwh"),
                     ("water_m3", "water_m3"), ("cost_usd", "cost_usd"),
                     ("it_energy_kwh", "it_energy_kwh")):  # fmt: skip
        assert ep[col].sum() == pytest.approx(m[key], rel=1e-9)
    assert (ep["energy_kwh"] >= ep["it_energy_kwh"] - 1e-9).all()
    assert (ep["it_energy_kwh"] > 0).all()  # idle power is always drawn
    if fidelity == "request":
        req = res.requests
        done = req["finish_s"].notna() & (req["finish_s"] <= m["horizon_s"] + 1e-6)
        dropped = req["drop_reason"] != "none"
        assert (done & dropped).sum() == 0
        assert done.sum() == m["requests_completed"]
        assert dropped.sum() == m["requests_dropped"]
        # no request was sent where the hard constraints forbid at its dispatch time
        sent = req["region"] >= 0
        for row in req[sent].itertuples():
            t = row.dispatch_s
            epoch_t0 = (t // 900) * 900
            mask = cs.allowed_mask(REGIONS, REGIONS, epoch_t0, epoch_t0 + 900)
            assert mask[int(row.cls), int(row.origin), int(row.region)]
    else:
        # fluid: dispatched work never lands in an excluded region-epoch
        for ex in cs.exclusions:
            rows = ep[(ep["region"] == ex.region)]
            t0 = rows["epoch"] * 900.0
            blocked = (t0 < ex.end_s) & (t0 + 900.0 > ex.start_s)
            assert (rows.loc[blocked, "requests_dispatched"] == 0).all()


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=9, max_size=9), st.integers(0, 1000))
def test_route_sampling_never_picks_zero_share(weights, seed):
    from greenroute.sim.engine import _sample_regions

    w = np.array(weights).reshape(3, 3)
    w[w < 0.3] = 0.0
    w[:, 1] += 1e-3  # every row has some mass
    route = np.stack([w, w]) / w.sum(axis=1)[None, :, None]
    rng = np.random.default_rng(seed)
    n = 5000
    cls = rng.integers(0, 2, n)
    origin = rng.integers(0, 3, n)
    reg = _sample_regions(route, cls, origin, rng.random(n))
    assert np.all(route[cls, origin, reg] > 0)
