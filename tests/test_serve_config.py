"""Gateway config validation, client keys and rate limits (no server needed)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

from greenroute.serve.config import GatewayConfigError, load_config, parse_config  # noqa: E402
from greenroute.serve.security import (  # noqa: E402
    ClientKey,
    KeyStore,
    RateLimiter,
    TokenBucket,
    hash_api_key,
)
from serve_fakes import gateway_dict  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gateway.yaml"


def test_example_config_is_valid(tmp_path):
    data = tmp_path / "data" / "grid"
    data.mkdir(parents=True)
    (data / "regions.csv").write_text("region\n")
    cfg = load_config(EXAMPLE, data_dir=tmp_path / "data")
    assert cfg.region_names == ("DE-LU", "GB", "US-CAL-CISO")
    assert cfg.origin_names == ("eu", "uk", "us")
    assert cfg.constraints.residency["eu"] == frozenset({"DE-LU", "GB"})
    ex = cfg.constraints.exclusions[0]
    assert ex.region == "GB" and ex.end_s - ex.start_s == 4 * 3600.0
    assert cfg.constraints.max_one_way_latency_s == pytest.approx(0.080)
    assert [p.type for p in cfg.providers] == ["replay", "static"]
    assert cfg.keys[0].matches("demo-key-a") and not cfg.keys[0].matches("demo-key-b")
    # the h100-80gb default power model: 75 W idle per GPU, 10.2 kW / 8 GPUs at peak
    up = cfg.regions[0].upstreams[0]
    assert up.idle_power_kw == pytest.approx(0.075)
    assert up.peak_power_kw == pytest.approx(10.2 / 8)


def test_every_problem_is_listed_with_its_key():
    raw = gateway_dict({"DE-LU": ["http://127.0.0.1:1"]})
    raw["epoch_s"] = -5
    raw["regions"]["DE-LU"]["upstreams"].append({"url": "ftp://x", "models": ["tiny"],
                                                 "capacity": 0})  # fmt: skip
    raw["policy"] = {"geo": "no-such-policy", "local": "least-connections"}
    raw["constraints"] = {"residency": {"mars": ["DE-LU"]}, "exclusions": [{"region": "XX"}]}
    raw["bogus"] = 1
    with pytest.raises(GatewayConfigError) as info:
        parse_config(raw, source="gw.yaml")
    keys = [p.split(": ")[1] for p in info.value.problems]
    assert sorted(keys) == sorted([
        "bogus", "epoch_s", "policy.geo", "regions.DE-LU.upstreams[1].url",
        "regions.DE-LU.upstreams[1].capacity", "constraints.residency.mars",
        "constraints.exclusions[0].region",
    ])  # fmt: skip
    assert all(p.startswith("gw.yaml: ") for p in info.value.problems)
    assert "no-such-policy" in str(info.value) and "lowest-carbon" in str(info.value)


def test_rules_that_always_leave_an_origin_nowhere_are_refused():
    raw = gateway_dict({"DE-LU": ["http://127.0.0.1:1"], "GB": ["http://127.0.0.1:2"]})
    raw["constraints"] = {"residency": {"uk": ["GB"]}, "exclusions": [{"region": "GB"}]}
    with pytest.raises(GatewayConfigError, match=r"constraints: infeasible.*origin uk"):
        parse_config(raw)
    # the same exclusion inside a time window is accepted (requests get 403 during it)
    raw["constraints"]["exclusions"] = [{"region": "GB", "start": "2030-01-01T00:00Z",
                                         "end": "2030-01-01T01:00Z"}]  # fmt: skip
    cfg = parse_config(raw)
    assert cfg.constraints.exclusions[0].start_s == 1893456000.0  # 2030-01-01 UTC


def test_latency_from_coordinates_and_overrides():
    raw = gateway_dict({"DE-LU": ["http://127.0.0.1:1"], "GB": ["http://127.0.0.1:2"]})
    raw["origins"]["uk"]["latency_ms"] = {"DE-LU": 12.5}
    cfg = parse_config(raw)
    lat = cfg.latency_s()
    assert lat[1, 0] == pytest.approx(0.0125)
    assert lat[0, 0] < lat[0, 1]  # eu (Frankfurt) is nearer to DE-LU than to GB


def test_key_hash_is_salted_sha256():
    salt = bytes(range(16))
    text = hash_api_key("s3cret", salt)
    assert text == f"sha256:{salt.hex()}:{hashlib.sha256(salt + b's3cret').hexdigest()}"
    assert hash_api_key("s3cret") != hash_api_key("s3cret")  # fresh salts
    store = KeyStore((ClientKey("a", text), ClientKey("b", hash_api_key("other"))))
    assert store.lookup("s3cret").name == "a"
    assert store.lookup("other").name == "b"
    assert store.lookup("wrong") is None and store.lookup(None) is None


def test_token_bucket_refills_at_its_rate():
    b = TokenBucket(rate_rps=2.0, burst=3.0, stamp=0.0)
    assert [b.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert b.take(0.0) == pytest.approx(0.5)  # one token at 2/s
    assert b.take(0.25) == pytest.approx(0.25)  # half a token accrued
    assert b.take(0.5) == 0.0
    lim = RateLimiter()
    unlimited = ClientKey("u", hash_api_key("x"))
    assert all(lim.check(unlimited) == 0.0 for _ in range(1000))
    one = ClientKey("one", hash_api_key("y"), rate_rps=1.0)  # burst defaults to 1
    first = lim.check(one)
    assert first == 0.0 and lim.check(one) > 0.0


def test_cli_check_lists_every_problem(tmp_path):
    from typer.testing import CliRunner

    from greenroute.cli import app

    good = tmp_path / "gw.yaml"
    good.write_text(yaml.safe_dump(gateway_dict({"DE-LU": ["http://127.0.0.1:1"]})))
    res = CliRunner().invoke(app, ["serve", "--config", str(good), "--check"])
    assert res.exit_code == 0, res.output
    assert "ok (1 regions, 2 origins)" in res.output
    raw = gateway_dict({"DE-LU": ["http://127.0.0.1:1"]})
    raw["epoch_s"] = 0
    raw["default_origin"] = "mars"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["serve", "--config", str(bad), "--check"])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert lines[0] == f"error: {bad}: epoch_s: must be > 0, got 0"
    assert lines[1].startswith(f"error: {bad}: default_origin: unknown origin 'mars'")
    assert len(lines) == 2
