"""The gateway's state: config, upstream pool, signals, planner, router, metrics, decision log,
client keys and rate limits, and the background tasks (epoch planning, health checks)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import heapq
import ipaddress
import itertools
import logging
import time
from collections.abc import Callable

from greenroute.serve.budgets import BudgetTracker
from greenroute.serve.config import GatewayConfig
from greenroute.serve.decision_log import DecisionLog
from greenroute.serve.deferral import DeferralQueue
from greenroute.serve.errors import bad_request, rate_limited, unauthorized
from greenroute.serve.metrics import GatewayMetrics
from greenroute.serve.planner import Planner, PlanState
from greenroute.serve.router import Router
from greenroute.serve.security import ClientKey, KeyStore
from greenroute.serve.shared_plan import PlanCoordinator
from greenroute.serve.shared_state import make_shared_state
from greenroute.serve.signals import SignalHub, build_provider
from greenroute.serve.upstreams import UpstreamPool

LOG = logging.getLogger("greenroute.serve")
ORIGIN_HEADER = "x-greenroute-origin"
CLASS_HEADER = "x-greenroute-class"
PRIORITY_HEADER = "x-greenroute-priority"
KEEPALIVE_PER_UPSTREAM = 128  # idle connections kept per upstream (engineering choice)


class Gateway:
    def __init__(self, cfg: GatewayConfig, clock: Callable[[], float] = time.time) -> None:
        self.cfg = cfg
        self.clock = clock
        self.metrics = GatewayMetrics()
        self.pool = UpstreamPool(cfg)
        self.pool.on_eject = self._on_eject
        self.pool.on_release = self._on_release
        self.pool.on_refused = self._on_refused_ejection
        self._signal_warned: set[tuple[str, str, str]] = set()
        # requests waiting for a slot: a heap of (-priority, arrival number, future)
        self._waiters: list[tuple[int, int, asyncio.Future]] = []
        self._waiter_seq = itertools.count()
        t0 = clock()
        self.hub = SignalHub([build_provider(p, t0) for p in cfg.providers], cfg.providers,
                             on_event=self._on_signal_event)  # fmt: skip
        self.planner = Planner(cfg, self.pool, self.hub, clock)
        self.router = Router(cfg, self.pool, self.planner.latency_s)
        self.deferrals = DeferralQueue(len(cfg.origins), cfg.seed)
        self.planner.pending_source = self.deferrals.summary
        self.log = DecisionLog(cfg.decision_log)
        self.keys = KeyStore(cfg.keys)
        self.budgets = BudgetTracker()  # per-key budgets, in process
        # rate limits, ejections and the plan: in process, or shared through Redis
        self.shared = make_shared_state(cfg.shared, cfg.epoch_s, self._on_shared_error)
        self.limiter = getattr(self.shared, "limiter", None)  # in-process only
        self.coord = PlanCoordinator(self.planner, self.pool, self.shared, cfg.geo_policy,
                                     cfg.epoch_s, clock)  # fmt: skip
        self.coord.apply = self.replan
        self.origin_by_header = {o.header_value: i for i, o in enumerate(cfg.origins)}
        self.origin_index = {o: i for i, o in enumerate(cfg.origin_names)}
        self.client = None  # httpx.AsyncClient (health checks), opened in start()
        self.upstream_pools: list = []  # one upstream_http.ConnectionPool per upstream
        self.region_names_b = [r.encode() for r in cfg.region_names]
        self._tasks: list[asyncio.Task] = []
        for up in self.pool.upstreams:
            self.metrics.healthy.labels(cfg.region_names[up.region], up.name).set(1)
        # the objects built so far (imports, config, policies: about 200k) leave the cyclic
        # collector's view: each full collection scanned them all with the event loop stopped,
        # 0.15-0.3 s measured at 500 req/s (up to 1.3 s on the loaded machine: a latency spike
        # of every request in flight). Garbage is still freed; only these are not rescanned
        gc.collect()
        gc.freeze()
        self.replan(self.coord.initial())  # a plan before the first request

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        import httpx

        pol = self.cfg.upstream
        timeout = httpx.Timeout(connect=pol.connect_timeout_s, read=pol.read_timeout_s,
                                write=pol.read_timeout_s, pool=pol.connect_timeout_s)  # fmt: skip
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
        self.client = httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False)
        # requests go through one lean keep-alive pool per upstream (serve/upstream_http.py),
        # not an AsyncClient: a client keeps a cookie jar (an upstream's Set-Cookie for one
        # user would be sent upstream with everybody's requests) and adds auth, redirect and
        # hook handling a proxy does not want; and httpx's pool cost 0.7 ms CPU per request
        from greenroute.serve.upstream_http import ConnectionPool

        ssl_ctx = httpx.create_ssl_context()  # loaded once, not once per pool
        self.upstream_pools = [
            ConnectionPool(up.cfg.url, min(up.cfg.capacity, KEEPALIVE_PER_UPSTREAM),
                           pol.connect_timeout_s, pol.read_timeout_s, ssl_ctx)
            for up in self.pool.upstreams
        ]  # fmt: skip
        self._tasks = [asyncio.create_task(self._epoch_loop()),
                       asyncio.create_task(self.pool.health_loop(self.client))]  # fmt: skip
        if self.shared.distributed:
            epoch = lambda: self.router.state.epoch if self.router.state else None  # noqa: E731
            sync = self.coord.sync_loop(epoch, self.cfg.shared.sync_interval_s)
            self._tasks.append(asyncio.create_task(sync))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self.deferrals.release_all()  # held requests go out now rather than be dropped
        if self.client is not None:
            await self.client.aclose()
        for p in self.upstream_pools:
            await p.aclose()
        self.log.close()
        self.shared.close()  # a leader lets go of its lock
        for prov in self.hub.providers:  # the live API clients' connections
            close = getattr(prov, "close", None)
            if close is not None:
                close()

    async def _epoch_loop(self) -> None:
        epoch_s = self.cfg.epoch_s
        while True:
            now = self.clock()
            await asyncio.sleep(max(epoch_s - (now % epoch_s), 0.001))  # epoch boundaries
            # the policy (an LP may take a while) and signal fetches run off the event loop;
            # they only read the live state
            try:
                state = await self.coord.step(self.router.state.epoch if self.router.state
                                              else None)  # fmt: skip
            except Exception as err:  # keep the last plan; say why in the metrics and log
                self.metrics.fallbacks.labels(f"replan-failed-{type(err).__name__}").inc()
                LOG.exception("replanning failed; the previous plan stays in force")
                continue
            if state is not None:  # None: a follower waits for the leader
                self.replan(state)

    def replan(self, state: PlanState | None = None) -> PlanState:
        """A new plan (or ``state``, computed elsewhere) put in force."""
        state = self.planner.replan() if state is None else state
        self.router.state = state
        self.metrics.publish_plan(state, self.cfg.region_names, self.cfg.origin_names)
        if self.deferrals.pending:
            self.deferrals.release(
                state.wall_s, state.plan.hold, self.planner.hold_margin_s(state.obs)
            )
        self.metrics.deferred_pending.set(self.deferrals.pending)
        return state

    # ------------------------------------------------------------------ hooks
    def _on_eject(self, up, ejected: bool) -> None:
        region = self.cfg.region_names[up.region]
        if ejected:
            LOG.warning("upstream %s (%s) ejected after %d failures", up.name, region,
                        up.failures)  # fmt: skip
        else:
            LOG.warning("upstream %s (%s) re-admitted by a health check", up.name, region)
        self.metrics.healthy.labels(region, up.name).set(0 if ejected else 1)
        self.metrics.fallbacks.labels("ejection" if ejected else "readmission").inc()
        self.shared.set_ejected(up.name, ejected)  # the other replicas follow

    def _on_refused_ejection(self, up) -> None:
        if self.pool.refused_ejections == 1 or self.pool.refused_ejections % 100 == 0:
            LOG.warning("upstream %s failing, not ejected: %d%% of the upstreams at most may be "
                        "ejected (upstream.max_ejection_percent); %d ejections refused so far",
                        up.name, self.cfg.upstream.max_ejection_percent,
                        self.pool.refused_ejections)  # fmt: skip
        self.metrics.child(self.metrics.fallbacks, "ejection-refused-max-percent").inc()

    def _on_shared_error(self, kind: str) -> None:
        self.metrics.fallbacks.labels(f"shared-{kind}-failed").inc()

    def _on_release(self) -> None:
        while self._waiters:  # wake the highest-priority, then oldest, waiting request
            fut = heapq.heappop(self._waiters)[2]
            if not fut.done():  # skip those that timed out or left
                fut.set_result(None)
                return

    async def wait_for_slot(self, timeout_s: float, priority: int = 0) -> bool:
        """Wait until a slot is freed for this request: higher ``priority`` first, first come
        first served within a priority; False after ``timeout_s`` (the only bound on how long
        a low priority waits: no ageing)."""
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (-priority, next(self._waiter_seq), fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
            return True
        except TimeoutError:
            return False

    def _on_signal_event(self, kind: str, provider: str, region: str) -> None:
        if kind == "recovered":
            self.metrics.signal_degraded.labels(provider, region).set(0)
            self._signal_warned -= {("failure", provider, region), ("stale", provider, region)}
            LOG.warning("signal provider %s for %s: answers again", provider, region)
            return
        self.metrics.signal_events.labels(kind, provider, region).inc()
        if kind in ("failure", "stale"):
            self.metrics.signal_degraded.labels(provider, region).set(1)
        key = (kind, provider, region)
        if key not in self._signal_warned:  # once per kind, provider and region until it recovers
            self._signal_warned.add(key)
            why = self.hub.last_error.get((provider, region), "") if kind != "last-known" else ""
            LOG.warning("signal provider %s for %s: %s%s; falling back", provider, region, kind,
                        f" ({why})" if why else "")  # fmt: skip

    # ------------------------------------------------------------------ request context
    def authenticate(self, authorization: str | None) -> ClientKey | None:
        raw = None
        if authorization:
            scheme, _, token = authorization.partition(" ")
            raw = token.strip() if scheme.lower() == "bearer" else None
        if raw is None:
            if self.cfg.auth_required:
                raise unauthorized("missing API key: send 'Authorization: Bearer <key>'")
            return None
        key = self.keys.lookup(raw)
        if key is None and (self.cfg.auth_required or self.keys.enabled):
            raise unauthorized("incorrect API key provided")
        return key

    def check_rate(self, key: ClientKey | None) -> None:
        if key is None:
            return
        wait = self.shared.take_token(key)
        if wait > 0:
            raise rate_limited(wait)

    @staticmethod
    def request_priority(key: ClientKey | None, header: str | None) -> int:
        """The queue priority: the key's ``priority`` (0 without a key), or the
        ``x-greenroute-priority`` header capped at it (a client may only lower itself)."""
        cap = key.priority if key is not None else 0
        if header is None:
            return cap
        try:
            asked = int(header.strip())
        except ValueError:
            raise bad_request(f"{PRIORITY_HEADER} must be an integer, got {header!r}",
                              "invalid_priority") from None  # fmt: skip
        return min(asked, cap)

    def resolve_origin(self, key: ClientKey | None, header: str | None,
                       client_ip: str | None) -> int:  # fmt: skip
        """The key's origin (authoritative), else the origin header, else the client's
        network, else the default origin."""
        if key is not None and key.origin is not None:
            return self.origin_index[key.origin]
        if header:
            o = self.origin_by_header.get(header.strip())
            if o is None:
                raise bad_request(
                    f"unknown origin {header!r} in {ORIGIN_HEADER}; valid: "
                    f"{', '.join(self.origin_by_header)}", "unknown_origin",
                )  # fmt: skip
            return o
        if client_ip:
            try:
                ip = ipaddress.ip_address(client_ip)
            except ValueError:
                ip = None
            if ip is not None:
                for i, o in enumerate(self.cfg.origins):
                    if any(ip.version == n.version and ip in n for n in o.networks):
                        return i
        return self.origin_index[self.cfg.default_origin]

    @staticmethod
    def request_class(header: str | None) -> int:
        from greenroute.core.types import CLASSES

        if not header:
            return 0
        name = header.strip().lower()
        if name not in CLASSES:
            raise bad_request(f"{CLASS_HEADER} must be one of {', '.join(CLASSES)}, got "
                              f"{header!r}", "invalid_class")  # fmt: skip
        return CLASSES.index(name)
