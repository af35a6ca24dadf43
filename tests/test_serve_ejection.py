"""Overload safety of upstream ejection (Envoy's max_ejection_percent): a gateway whose own
starvation makes every upstream look failed must not eject them all (no server needed)."""

from __future__ import annotations

import pytest

pytest.importorskip("yaml")

from greenroute.serve.config import GatewayConfigError, parse_config
from greenroute.serve.upstreams import UpstreamPool
from serve_fakes import gateway_dict


def _pool(per_region: int, regions: tuple[str, ...], **policy) -> UpstreamPool:
    raw = gateway_dict({r: [f"http://127.0.0.1:{9000 + i}" for i in range(per_region)]
                        for r in regions})  # fmt: skip
    raw["upstream"] = {**raw["upstream"], "failures_to_eject": 1, **policy}
    return UpstreamPool(parse_config(raw, source="gw.yaml"), clock=lambda: 100.0)


def test_at_most_half_of_the_upstreams_are_ejected_by_default():
    pool = _pool(2, ("DE-LU", "GB"))  # 4 upstreams, default cap 50 %: 2 may be ejected
    a, b, c, d = pool.upstreams
    assert pool.cfg.upstream.max_ejection_percent == 50.0
    assert pool.failure(a) is True  # 1/4 ejected
    assert pool.failure(b) is True  # 2/4 = 50 %: still within the cap
    assert pool.failure(c) is False  # 3/4 = 75 % > 50 %: refused, c stays admitted
    assert pool.failure(d) is False
    assert [u.ejected for u in pool.upstreams] == [True, True, False, False]
    assert pool.refused_ejections == 2
    assert (c.failures, d.failures) == (1, 1)  # their failures keep counting
    pool.readmit(a)  # one comes back: the next failure of c ejects it (2/4 again)
    assert pool.failure(c) is True
    assert [u.ejected for u in pool.upstreams] == [False, True, True, False]


def test_one_ejection_is_always_allowed_and_100_percent_allows_all():
    pool = _pool(1, ("DE-LU", "GB", "US-CAL-CISO"), max_ejection_percent=0)
    x, y, _ = pool.upstreams
    assert pool.failure(x) is True  # at least one, whatever the cap (as Envoy)
    assert pool.failure(y) is False  # 2/3 > 0 %
    pool = _pool(1, ("DE-LU", "GB", "US-CAL-CISO"), max_ejection_percent=100)
    assert [pool.failure(u) for u in pool.upstreams] == [True, True, True]


def test_the_load_test_layout_ejects_the_dead_region_but_never_two():
    # 3 regions of one upstream each, the default cap: 1/3 = 33 % may go, 2/3 = 67 % not
    pool = _pool(1, ("DE-LU", "GB", "US-CAL-CISO"))
    de, gb, us = pool.upstreams
    refused = []
    pool.on_refused = refused.append
    assert pool.failure(de) is True
    assert pool.failure(gb) is False and pool.failure(us) is False
    assert refused == [gb, us]


def test_the_cap_is_validated():
    raw = gateway_dict({"DE-LU": ["http://127.0.0.1:9000"]})
    raw["upstream"] = {**raw["upstream"], "max_ejection_percent": 150}
    with pytest.raises(GatewayConfigError) as info:
        parse_config(raw, source="gw.yaml")
    assert [p.split(": ")[1] for p in info.value.problems] == ["upstream.max_ejection_percent"]
