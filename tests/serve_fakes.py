"""Gateway test helpers: the fake upstream and server runner (``greenroute.serve.
fake_upstream``) and a config builder."""

from __future__ import annotations

from greenroute.serve.fake_upstream import FakeUpstream, ServerThread

__all__ = ["FakeUpstream", "ServerThread", "gateway_dict"]


def gateway_dict(upstreams: dict[str, list[str]], **extra) -> dict:
    """A gateway config mapping: ``upstreams`` maps a catalog region to upstream base URLs
    (each serving model ``tiny``, capacity 64); static signals with DE-LU the cleanest."""
    ci = {"DE-LU": 100.0, "GB": 200.0, "US-CAL-CISO": 300.0, "JP-TK": 400.0}
    cfg = {
        "epoch_s": 3600,
        "policy": {"geo": "lowest-carbon", "local": "least-connections"},
        "regions": {
            reg: {"upstreams": [{"name": f"{reg}-{i}", "url": url, "models": ["tiny"],
                                 "capacity": 64} for i, url in enumerate(urls)]}
            for reg, urls in upstreams.items()
        },
        "origins": {"eu": {"region": "DE-LU"}, "uk": {"region": "GB"}},
        "signals": {"providers": [{"type": "static", "values": {
            r: {"carbon_intensity_g_per_kwh": ci.get(r, 250.0)} for r in upstreams}}]},
        "upstream": {"max_attempts": 3, "backoff_s": 0.001, "failures_to_eject": 2,
                     "cooldown_s": 0.2, "health_interval_s": 0.1, "connect_timeout_s": 1.0,
                     "read_timeout_s": 5.0},
    }  # fmt: skip
    cfg.update(extra)
    return cfg
