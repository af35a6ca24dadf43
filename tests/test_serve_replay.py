"""``greenroute replay``: a decision log's arrivals through the simulator."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("yaml")

from greenroute.serve.config import parse_config
from greenroute.serve.replay import RecordedPolicy, read_replay_input, replay
from serve_fakes import gateway_dict

T0 = 1_699_999_600.0  # 2023-11-14 22:06:40 UTC: 400 s into its hour


def _log(tmp_path, n: int = 40):
    path = tmp_path / "d.jsonl"
    rows = []
    for i in range(n):
        origin = "eu" if i % 2 else "uk"
        region = "GB" if i % 4 else "DE-LU"  # every 4th request (all from uk) to DE-LU
        rows.append({"time_s": T0 + 90.0 * i, "origin": origin, "class": "interactive",
                     "region": region, "status": 200, "prompt_tokens": 100,
                     "output_tokens": 20})  # fmt: skip
    rows.append({"time_s": T0 + 5.0, "origin": "eu", "class": "interactive", "region": None,
                 "status": 403})  # a refused request is not replayed  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)))
    return path


def test_recorded_plan_is_what_the_gateway_did(tmp_path):
    cfg = parse_config(gateway_dict({"DE-LU": ["http://x:1"], "GB": ["http://x:2"]}))
    data = read_replay_input(_log(tmp_path), cfg)
    assert data.start_unix_s == T0 - 400.0 and len(data.arrival_s) == 40
    assert np.all(np.diff(data.arrival_s) > 0) and data.arrival_s[0] == 400.0
    pol = RecordedPolicy(data, 2, 2, 3600.0, 2)
    # epoch 0 holds arrivals at 400 + 90 i < 3600, i.e. i = 0..35: uk (even i) sent 9 of its
    # 18 to DE-LU (i % 4 == 0), eu (odd i) sent all 18 to GB
    assert pol.counts[0, 0].tolist() == [[0.0, 18.0], [9.0, 9.0]]
    assert pol.counts[1, 0].tolist() == [[0.0, 2.0], [1.0, 1.0]]


def test_replay_runs_the_same_arrivals_under_each_policy(tmp_path):
    cfg = parse_config(gateway_dict({"DE-LU": ["http://x:1"], "GB": ["http://x:2"]}))
    table = replay(_log(tmp_path), cfg, ["lowest-carbon", "round-robin"])
    assert table.index.tolist() == ["recorded", "lowest-carbon", "round-robin"]
    assert table["requests_total"].tolist() == [40.0, 40.0, 40.0]
    assert table["invalid_plans"].tolist() == [0.0, 0.0, 0.0]
    assert (table["carbon_kg"] > 0).all()


def test_replay_cli(tmp_path):
    import yaml
    from typer.testing import CliRunner

    from greenroute.cli import app

    conf = tmp_path / "gw.yaml"
    conf.write_text(yaml.safe_dump(gateway_dict({"DE-LU": ["http://x:1"], "GB": ["http://x:2"]})))
    res = CliRunner().invoke(app, ["replay", str(_log(tmp_path)), "--config", str(conf),
                                   "--policy", "local-only", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["policy"] for r in rows] == ["recorded", "local-only"]
    assert [r["requests_total"] for r in rows] == [40.0, 40.0]
    res = CliRunner().invoke(app, ["replay", str(tmp_path / "missing.jsonl"), "--config",
                                   str(conf)])  # fmt: skip
    assert res.exit_code == 2 and "cannot read decision log" in res.output
