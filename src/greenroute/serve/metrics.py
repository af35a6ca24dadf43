"""Prometheus metrics of the gateway (one registry per app, served at ``/metrics``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from greenroute.core.types import CLASSES

# request durations from 5 ms to 2 min; the gateway's own overhead from 50 us to 50 ms
DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
OVERHEAD_BUCKETS_S = (5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 5e-2)
SIGNAL_NAMES = ("carbon_intensity_g_per_kwh", "price_usd_per_kwh", "temp_c", "wetbulb_c",
                "water_intensity_l_per_kwh")  # fmt: skip


class Samples:
    """The last ``n`` float samples in a preallocated array: appending allocates nothing, so
    a benchmark's own sample keeping does not show as memory growth of the gateway.
    ``np.asarray(samples)`` gives them (in ring order: fine for percentiles)."""

    def __init__(self, n: int) -> None:
        self._a = np.empty(n)
        self._i = 0

    def append(self, x: float) -> None:
        self._a[self._i % self._a.size] = x
        self._i += 1

    def clear(self) -> None:
        self._i = 0

    def __len__(self) -> int:
        return min(self._i, self._a.size)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self._a[: len(self)].copy()
        return out if dtype is None else out.astype(dtype)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = reg = CollectorRegistry()
        self.requests = Counter("greenroute_requests_total", "Requests answered, by where they "
                                "went and the HTTP status", ["region", "upstream", "endpoint",
                                                             "status"], registry=reg)  # fmt: skip
        self.errors = Counter("greenroute_upstream_errors_total",
                              "Upstream failures (connect, timeout, 5xx/429, mid-stream)",
                              ["region", "upstream", "kind"], registry=reg)  # fmt: skip
        self.client_errors = Counter("greenroute_client_errors_total",
                                     "Requests refused by the gateway itself, by code",
                                     ["code"], registry=reg)  # fmt: skip
        self.latency = Histogram("greenroute_request_duration_seconds",
                                 "Whole-request time seen by the client", ["region", "upstream"],
                                 buckets=DURATION_BUCKETS_S, registry=reg)  # fmt: skip
        self.ttfb = Histogram("greenroute_upstream_ttfb_seconds",
                              "Time to the upstream's first byte", ["region", "upstream"],
                              buckets=DURATION_BUCKETS_S, registry=reg)  # fmt: skip
        self.overhead = Histogram("greenroute_routing_overhead_seconds",
                                  "Gateway time from request received to upstream request sent "
                                  "(auth, parsing, rules, plan shares, local pick), without "
                                  "waiting for the body or for a free slot",
                                  buckets=OVERHEAD_BUCKETS_S, registry=reg)  # fmt: skip
        self.share = Gauge("greenroute_routing_share", "The plan's share of an origin's class "
                           "work per region", ["class", "origin", "region"],
                           registry=reg)  # fmt: skip
        self.signal = Gauge("greenroute_signal_value", "Signal value in use now",
                            ["signal", "region", "provider"], registry=reg)  # fmt: skip
        self.signal_age = Gauge("greenroute_signal_age_seconds", "Age of the signal in use",
                                ["region", "provider"], registry=reg)  # fmt: skip
        self.signal_events = Counter("greenroute_signal_fallbacks_total",
                                     "Signal provider failures, stale values and last-known "
                                     "fallbacks", ["kind", "provider", "region"],
                                     registry=reg)  # fmt: skip
        self.signal_degraded = Gauge("greenroute_signal_provider_degraded", "1 while a "
                                     "signal provider fails or is stale for a region (the next "
                                     "in the fallback order is used)", ["provider", "region"],
                                     registry=reg)  # fmt: skip
        self.co2 = Counter("greenroute_co2_grams_total", "Estimated facility CO2 of served "
                           "requests (dynamic IT energy x the region's factor)", ["region"],
                           registry=reg)  # fmt: skip
        self.water = Counter("greenroute_water_litres_total", "Estimated water (on-site + grid) "
                             "of served requests", ["region"], registry=reg)  # fmt: skip
        self.co2_per_request = Histogram("greenroute_co2_grams_per_request",
                                         "Estimated g CO2 per request", ["region"],
                                         buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 50),
                                         registry=reg)  # fmt: skip
        self.water_per_request = Histogram("greenroute_water_litres_per_request",
                                           "Estimated litres of water per request", ["region"],
                                           buckets=(1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1),
                                           registry=reg)  # fmt: skip
        self.rejections = Counter("greenroute_constraint_rejections_total",
                                  "Requests refused because the rules leave no region",
                                  ["origin", "rule"], registry=reg)  # fmt: skip
        self.fallbacks = Counter("greenroute_fallbacks_total", "Retries elsewhere and plan "
                                 "fallbacks", ["kind"], registry=reg)  # fmt: skip
        self.healthy = Gauge("greenroute_upstream_healthy", "1 when the upstream is admitted",
                             ["region", "upstream"], registry=reg)  # fmt: skip
        self.in_flight = Gauge("greenroute_upstream_in_flight", "Requests in flight",
                               ["region", "upstream"], registry=reg)  # fmt: skip
        self.plan_epoch = Gauge("greenroute_plan_epoch", "Epoch of the plan in force",
                                registry=reg)  # fmt: skip
        self.plan_seconds = Gauge("greenroute_plan_compute_seconds", "Time the geo policy "
                                  "took for the current plan", registry=reg)  # fmt: skip
        self.plan_rejected = Counter("greenroute_plan_rejections_total", "Plans replaced by "
                                     "the safe plan (invalid or failing policy)",
                                     registry=reg)  # fmt: skip

        self.deferred = Counter("greenroute_deferred_total", "Deferrable requests held for a "
                                "later epoch", ["origin"], registry=reg)  # fmt: skip
        self.deferred_pending = Gauge("greenroute_deferred_pending", "Deferrable requests held "
                                      "now", registry=reg)  # fmt: skip
        self.deferred_hold = Histogram("greenroute_deferred_hold_seconds", "Time a deferrable "
                                       "request was held", buckets=(1, 10, 60, 300, 900, 3600,
                                                                    14400, 86400),
                                       registry=reg)  # fmt: skip
        # set to Samples to keep samples (benchmarks): wall seconds, and the gateway thread's
        # CPU seconds over the same span (not inflated by the OS running something else)
        self.overhead_samples: Samples | None = None
        self.overhead_cpu_samples: Samples | None = None
        self._children: dict[tuple, object] = {}

    def child(self, metric, *labels: str):
        """``metric.labels(*labels)``, cached (prometheus-client's lookup takes a lock and
        builds a tuple each time; the hot path asks for the same few children)."""
        key = (id(metric), labels)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = metric.labels(*labels)
        return c

    def client_error(self, code: str) -> None:
        self.child(self.client_errors, code).inc()

    def observe_overhead(self, seconds: float, cpu_seconds: float | None = None) -> None:
        self.overhead.observe(seconds)
        if self.overhead_samples is not None:
            self.overhead_samples.append(seconds)
        if self.overhead_cpu_samples is not None and cpu_seconds is not None:
            self.overhead_cpu_samples.append(cpu_seconds)

    def export(self) -> bytes:
        return generate_latest(self.registry)

    def publish_plan(self, state, regions: Sequence[str], origins: Sequence[str]) -> None:
        route = state.plan.route
        for c, cls in enumerate(CLASSES):
            for o, origin in enumerate(origins):
                for r, region in enumerate(regions):
                    self.share.labels(cls, origin, region).set(float(route[c, o, r]))
        sig = state.signals
        self.signal.clear()
        for r, region in enumerate(regions):
            prov = sig.providers[r]
            for name in SIGNAL_NAMES:
                self.signal.labels(name, region, prov).set(float(getattr(sig, name)[0, r]))
        self.signal_age.clear()
        for r, region in enumerate(regions):
            self.signal_age.labels(region, sig.providers[r]).set(float(sig.age_s[r]))
        self.plan_epoch.set(state.epoch)
        self.plan_seconds.set(state.plan_ms / 1e3)
        if state.rejected:
            self.plan_rejected.inc()
