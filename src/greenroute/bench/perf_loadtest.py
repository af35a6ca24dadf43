"""``make bench`` rows of the gateway load test (``python -m greenroute.serve.loadtest``, run
as a subprocess: the bench layer does not import the gateway)."""

from __future__ import annotations


def rows(r: dict) -> list[tuple[str, str, str]]:
    """(figure, value, bar) rows of one load test report."""
    rss = r["rss_mb"]
    return [
        (f"gateway load test, {r['rate_target_per_s']:g} req/s x {r['duration_s']:g} s, 3 "
         "regions, the cleanest killed at 1/3 and back at 2/3: answered / lost / violations",
         f"{r['rate_answered_per_s']:,.0f} req/s answered (sent at {r['rate_sent_per_s']:,.0f}"
         f"/s), {r['lost']} lost, {r['residency_violations_client']} + "
         f"{r.get('rule_violations_log', 0)} rule violations", "500 req/s, 0 lost, 0 violations"),
        ("gateway routing overhead p50 / p99 (wall; gateway-thread CPU)",
         f"{r['overhead_ms_p50']:.3f} / {r['overhead_ms_p99']:.3f} ms; "
         f"{r['overhead_cpu_ms_p50']:.3f} / {r['overhead_cpu_ms_p99']:.3f} ms CPU; "
         f"{r['gateway_cpu_ms_per_request']:.2f} ms process CPU per request"
         + (f" (client {r['client_cpu_ms_per_request']:.2f}, fake upstreams "
            f"{r['upstreams_cpu_ms_per_request']:.2f})" if "client_cpu_ms_per_request" in r
            else ""), "p99 < 2 ms"),
        ("gateway RSS at start / middle / end of the load test",
         f"{rss['start']:.0f} / {rss.get('middle', float('nan')):.0f} / "
         f"{rss.get('end', float('nan')):.0f} MB", "flat"),
    ]  # fmt: skip
