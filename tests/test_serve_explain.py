"""``greenroute explain DECISION_ID``: a gateway decision explained from its log record."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("httpx")
pytest.importorskip("yaml")

import httpx
from typer.testing import CliRunner

from greenroute.cli import app
from greenroute.serve.app import create_app
from greenroute.serve.config import parse_config
from greenroute.serve.decision_log import read_decisions
from greenroute.serve.explain import explain_record
from serve_fakes import FakeUpstream, gateway_dict

runner = CliRunner()


def test_explain_a_real_decision_through_the_cli(servers, tmp_path):
    de, gb = FakeUpstream("DE-LU"), FakeUpstream("GB")
    urls = {"DE-LU": [servers(de.app()).url], "GB": [servers(gb.app()).url]}
    log = tmp_path / "decisions.jsonl"
    raw = gateway_dict(urls, decision_log={"path": str(log)},
                       constraints={"residency": {"uk": ["DE-LU", "GB"]}})  # fmt: skip
    srv = servers(create_app(parse_config(raw, source="gw.yaml")))
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(srv.url + "/v1/chat/completions", json=body,
                   headers={"x-greenroute-origin": "uk"}, trust_env=False)  # fmt: skip
    assert r.status_code == 200
    did = r.headers["x-greenroute-decision-id"]
    rec = read_decisions(log)[0]
    res = runner.invoke(app, ["explain", did[:12], "--log", str(log)])
    assert res.exit_code == 0, res.output
    out = res.output
    assert f"Decision {did} at {rec['time_utc']}: interactive request from origin 'uk'" in out
    assert "Routed to DE-LU (upstream DE-LU-0), HTTP 200" in out
    assert "Rules: allowed regions DE-LU, GB; residency of uk: DE-LU, GB; active exclusions: " \
        "none." in out  # fmt: skip
    epoch = rec["plan"]["epoch"]
    assert f"Plan of epoch {epoch} (lowest-carbon) for uk's interactive work: DE-LU 100 %, " \
        "GB 0 %." in out  # fmt: skip
    assert "DE-LU was drawn with probability 100 %" in out
    # the static signals of serve_fakes: DE-LU 100 g/kWh, the default price 0.100 $/kWh
    assert "Signals in DE-LU (provider static0, 0 s old): carbon intensity 100 g/kWh, price " \
        "0.100 $/kWh" in out  # fmt: skip
    assert f"Estimated footprint: {rec['co2_g']:.3g} g CO2" in out
    as_json = runner.invoke(app, ["explain", did, "--log", str(log), "--json"])
    assert json.loads(as_json.output) == rec


def test_unknown_decision_is_a_clear_error(tmp_path):
    log = tmp_path / "d.jsonl"
    log.write_text(json.dumps({"decision_id": "a" * 32, "time_s": 0}) + "\n")
    res = runner.invoke(app, ["explain", "feedbeef", "--log", str(log)])
    assert res.exit_code == 2
    assert "error: no decision 'feedbeef' in" in res.output and f"the latest is {'a' * 32}" \
        in res.output  # fmt: skip
    res = runner.invoke(app, ["explain", "feedbeef"])
    assert res.exit_code == 2 and "give the decision log: --log PATH" in res.output
    res = runner.invoke(app, ["explain", "feedbeef", "--log", str(tmp_path / "none.jsonl")])
    assert res.exit_code == 2 and "cannot read decision log" in res.output


def test_fallback_retries_and_refusals_are_explained():
    rec = {
        "decision_id": "d1", "time_utc": "2026-11-26T13:00:00+00:00", "origin": "eu",
        "class": "interactive", "model": "tiny", "endpoint": "/v1/chat/completions",
        "stream": True, "region": "GB", "upstream": "GB-0", "status": 200, "duration_s": 0.0123,
        "attempts": [{"region": "DE-LU", "upstream": "DE-LU-0", "outcome": "connect"},
                     {"region": "GB", "upstream": "GB-0", "outcome": "ok"}],
        "plan": {"epoch": 7, "policy": "lowest-carbon", "shares": {"DE-LU": 1.0, "GB": 0.0},
                 "rejected": None, "fallback": "plan-share-zero"},
        "rules": {"allowed": ["DE-LU", "GB"], "exclusions": ["US excluded always"],
                  "residency": ["DE-LU", "GB"], "latency_bound_ms": 40.0},
    }  # fmt: skip
    out = explain_record(rec)
    assert "on /v1/chat/completions (streamed)." in out
    assert "HTTP 200 after 12.3 ms" in out
    assert "active exclusions: US excluded always; one-way latency bound 40 ms." in out
    assert "Fallback 'plan-share-zero': the plan gives no share to any region that could " \
        "take it" in out  # fmt: skip
    assert "Attempts (failures before the first byte are retried within the rules): " \
        "DE-LU/DE-LU-0 connect -> GB/GB-0 ok." in out  # fmt: skip
    refused = {"decision_id": "d2", "time_utc": "t", "origin": "eu", "class": "interactive",
               "model": "tiny", "endpoint": "/v1/completions", "region": None, "status": 403,
               "error": "no_allowed_region"}  # fmt: skip
    assert "Not routed: HTTP 403 (no_allowed_region)." in explain_record(refused)
