"""The gateway load test (``python -m greenroute.serve.loadtest``): its accounting of lost
requests, rule violations and phases, and a short real run with a region killed and
restored."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("httpx")
pytest.importorskip("yaml")

from greenroute.serve import loadtest as L


def _res(status, region, origin) -> dict:
    n = len(status)
    return {"status": status, "region": region, "origin": origin,
            "latency_s": [0.001 * (i + 1) for i in range(n)], "late_s": [0.0] * n,
            "send_s": float(n), "done_s": float(n)}  # fmt: skip


def test_report_counts_lost_requests_violations_and_phases():
    de, gb, us = (L.REGIONS.index(r) for r in ("DE-LU", "GB", "US-CAL-CISO"))
    eu, uk = L.ORIGINS.index("eu"), L.ORIGINS.index("uk")
    # 6 requests at 1/s over 6 s: phases before [0, 2), killed [2, 4), restored [4, 6)
    status = [200, 200, 502, 200, 0, 200]
    region = [de, us, -1, gb, -1, us]
    origin = [eu, eu, uk, eu, uk, uk]  # request 1: eu served in US-CAL-CISO, a violation
    r = L._report(_res(status, region, origin), rate=1.0, duration_s=6.0, over=np.array([0.1]),
                  over_cpu=np.array([0.05]), rss={"start": 100.0}, rss_series=[],
                  cpu_s=0.6, fallbacks={}, log=None, start_at=0.0)  # fmt: skip
    assert (r["requests"], r["answered_200"], r["lost"]) == (6, 4, 2)
    assert r["lost_by_status"] == {"0": 1, "502": 1}
    assert r["residency_violations_client"] == 1
    assert [p["requests"] for p in r["phases"].values()] == [2, 2, 2]
    assert [p["lost"] for p in r["phases"].values()] == [0, 1, 1]
    assert r["phases"]["before"]["regions"] == {"DE-LU": 1, "GB": 0, "US-CAL-CISO": 1}
    assert r["phases"]["killed"]["regions"] == {"DE-LU": 0, "GB": 1, "US-CAL-CISO": 0}
    assert r["phases"]["before"]["latency_ms_p50"] == pytest.approx(1.5)  # 1 ms and 2 ms
    assert r["gateway_cpu_ms_per_request"] == 100.0
    assert r["answered_by_killed_region_while_down"] == 0  # no kill time given: none counted
    from greenroute.bench.perf_loadtest import rows

    (_, served, _), (_, overhead, _), (_, rss, _) = rows(r)
    assert served == "1 req/s answered (sent at 1/s), 2 lost, 1 + 0 rule violations"
    assert overhead.startswith("0.100 / 0.100 ms; 0.050 / 0.050 ms CPU; 100.00 ms process")
    assert rss == "100 / nan / nan MB"
    res = _res(status, region, origin) | {"down_s": [0.5, 4.0]}
    r = _again(res)
    assert r["answered_by_killed_region_while_down"] == 0  # request 0 (DE-LU) was sent at 0 s
    res["down_s"] = [0.0, 4.0]
    r = _again(res)
    assert r["answered_by_killed_region_while_down"] == 1  # sent at 0 s, answered at 0.001 s
    res["down_s"] = [0.0, 0.0005]  # restarted before that answer: it may have come from there
    assert _again(res)["answered_by_killed_region_while_down"] == 0


def _again(res: dict) -> dict:
    return L._report(res, rate=1.0, duration_s=6.0, over=np.array([0.1]),
                     over_cpu=np.array([0.05]), rss={}, rss_series=[], cpu_s=0.6, fallbacks={},
                     log=None, start_at=0.0)  # fmt: skip


def test_rule_violations_from_the_decision_log(tmp_path):
    log = tmp_path / "d.jsonl"
    t0, dur = 1000.0, 12.0  # exclusion window of US-CAL-CISO: [1005, 1007)
    recs = [
        {"routed_s": 1004.9, "origin": "uk", "region": "US-CAL-CISO"},  # before the window
        {"routed_s": 1005.0, "origin": "uk", "region": "US-CAL-CISO"},  # inside: violation
        {"routed_s": 1006.0, "origin": "us", "region": "GB"},
        {"routed_s": 1007.0, "origin": "us", "region": "US-CAL-CISO"},  # window over
        {"routed_s": 1001.0, "origin": "eu", "region": "US-CAL-CISO"},  # residency violation
        {"routed_s": 1002.0, "origin": "eu", "region": None},  # refused: no region
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert L._exclusion_violations(log, t0, dur) == (6, 2)
    cfg = L.loadtest_config({r: "http://127.0.0.1:1" for r in L.REGIONS}, t0, dur, log)
    ex = cfg["constraints"]["exclusions"][0]
    assert (ex["region"], ex["start"], ex["end"]) == (
        "US-CAL-CISO", "1970-01-01T00:16:45+00:00", "1970-01-01T00:16:47+00:00")  # fmt: skip


@pytest.mark.slow
def test_short_run_loses_nothing_when_a_region_is_killed_and_restored():
    r = L.run(rate=20.0, duration_s=3.0, max_conns=64)
    assert r["requests"] == 60
    assert r["lost"] == 0, r["lost_by_status"]
    assert r["residency_violations_client"] == 0 and r["rule_violations_log"] == 0
    assert r["decision_log_records"] == 60 + L.WARMUP_REQUESTS
    # sent after DE-LU's process was killed and before its restart: none answered there
    assert r["killed_region_down_s"][0] < r["killed_region_down_s"][1]
    assert r["answered_by_killed_region_while_down"] == 0
    assert r["overhead_samples"] == 60


def test_overhead_samples_keep_the_last_n_in_a_fixed_array():
    from greenroute.serve.metrics import Samples

    s = Samples(3)
    for x in (1.0, 2.0):
        s.append(x)
    assert np.asarray(s).tolist() == [1.0, 2.0] and len(s) == 2
    for x in (3.0, 4.0):  # 4.0 overwrites the oldest, 1.0
        s.append(x)
    assert sorted(np.asarray(s).tolist()) == [2.0, 3.0, 4.0] and len(s) == 3
    s.clear()
    assert np.asarray(s).size == 0
