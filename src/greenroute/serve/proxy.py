"""Forwarding one completion request: route, send, retry before the first byte, stream back.

A failure before the first byte (connection refused or reset, timeout, a 5xx or 429 answer,
an empty stream) counts against the upstream and the request is sent again, after a backoff,
to another upstream the router picks within the request's rules (another region when its
own has no other). Once the first byte has gone to the client nothing is retried: a failure
mid-stream ends the stream with an SSE error event, so a completion is never duplicated.
The body goes upstream unchanged and comes back unchanged; the gateway adds the headers
``x-greenroute-region``, ``x-greenroute-model`` and ``x-greenroute-decision-id``.

Model fallbacks (``model_fallbacks`` in the config, LiteLLM's ``fallbacks``): when no upstream
the request's rules allow serves its model (403 model-placement), none can take it (503, after
the queue timeout when all are full) or every attempt fails before the first byte (502), the
next model of its list is tried, with the body's ``model`` rewritten, under the same rules and
with its own ``max_attempts``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from greenroute.core.types import CLASSES
from greenroute.serve.budgets import sse_usage_tokens
from greenroute.serve.errors import GatewayHTTPError, bad_request, sse_error_event, too_large
from greenroute.serve.gateway import Gateway
from greenroute.serve.router import Choice, RuleCheck
from greenroute.serve.security import ClientKey
from greenroute.serve.upstream_http import UpstreamError, UpstreamResponse, UpstreamTimeoutError

REGION_HEADER = "x-greenroute-region"
USER_AGENT = "greenroute-gateway"
DECISION_HEADER = "x-greenroute-decision-id"
DEADLINE_HEADER = "x-greenroute-deadline-s"
MODEL_HEADER = "x-greenroute-model"
HOP_BY_HOP = frozenset(("connection", "keep-alive", "transfer-encoding", "content-length",
                        "te", "trailer", "upgrade", "proxy-authenticate",
                        "proxy-authorization", "date", "server"))  # fmt: skip
CHARS_PER_TOKEN = 4  # rough English average for a token estimate (OpenAI's tokenizer guide)
DEFAULT_OUTPUT_TOKENS = 256  # when the request sets no max_tokens (engineering default)
RETRY_STATUS = frozenset((429, 500, 502, 503, 504))
SECONDS_PER_HOUR = 3600.0
USAGE_TAIL_BYTES = 8192  # a stream's last bytes kept for its usage chunk (budget keys only)


class _UpstreamFailedError(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


@dataclass
class _Ctx:
    gw: Gateway
    endpoint: str
    decision_id: str
    wall_s: float
    t_recv: float
    origin: int
    cls: int
    model: str  # the model being tried (a fallback's once the request falls back)
    stream: bool
    client: str | None
    tokens: tuple[int, int]
    attempts: list[dict] = field(default_factory=list)
    queued_s: float = 0.0  # time spent waiting for a free slot (not gateway overhead)
    held_s: float = 0.0  # time a deferrable request was held by the plan
    deadline_s: float | None = None  # deferrable: unix time it must be sent by
    arrival_s: float = 0.0  # unix time the request arrived (wall_s moves on when it is held)
    cpu0: float | None = None  # thread CPU clock at arrival (None: not measured)
    requested_model: str = ""  # the body's model (ctx.model differs after a model fallback)
    priority: int = 0  # place in the queue for a slot (higher first)
    budget_key: ClientKey | None = None  # the client's key when it has a budget
    stream_tokens: int = 0  # tokens of a stream's final usage chunk (budget keys only)


async def read_limited(chunks: AsyncIterator[bytes], limit: int, declared: str | None) -> bytes:
    """A request body from its ``chunks``, at most ``limit`` bytes: 413 as soon as the
    declared ``content-length`` or the bytes received pass it."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(int(declared), limit)
    parts, size = [], 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise too_large(size, limit)
        parts.append(chunk)
    return b"".join(parts)


async def read_body(request: Request, limit: int) -> bytes:
    """The body of a Starlette request (the batch endpoint), at most ``limit`` bytes."""
    return await read_limited(request.stream(), limit, request.headers.get("content-length"))


def parse_payload(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise bad_request(f"request body is not valid JSON: {err}", "invalid_json") from None
    if not isinstance(payload, dict):
        raise bad_request("request body must be a JSON object", "invalid_json")
    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("'model' is required and must be a string", "missing_model")
    return payload


def estimate_tokens(payload: dict[str, Any], body_len: int) -> tuple[int, int]:
    """(prompt, output) token estimates for the local policy and the decision log: prompt
    ~ body bytes / 4, output = max_tokens or max_completion_tokens or a default."""
    out = payload.get("max_tokens") or payload.get("max_completion_tokens")
    out_n = int(out) if isinstance(out, int) and out > 0 else DEFAULT_OUTPUT_TOKENS
    return max(body_len // CHARS_PER_TOKEN, 1), out_n


async def complete(gw: Gateway, endpoint: str, body: bytes, payload: dict[str, Any],
                   client: str | None, origin: int, cls: int, deadline: str | None,
                   t_recv: float, wall: float, cpu0: float | None = None,
                   priority: int = 0, budget_key: ClientKey | None = None,
                   ) -> Answer:  # fmt: skip
    """Hold (deferrable), route, forward and log one parsed request."""
    ctx = _Ctx(gw, endpoint, uuid.uuid4().hex, wall, t_recv, origin, cls, payload["model"],
               payload.get("stream") is True, client,
               estimate_tokens(payload, len(body)))  # fmt: skip
    ctx.cpu0 = cpu0
    ctx.arrival_s = wall
    ctx.requested_model = ctx.model
    ctx.priority = priority
    ctx.budget_key = budget_key
    gw.planner.count_arrival(cls, origin)
    if cls == CLASSES.index("deferrable"):
        await _maybe_hold(ctx, deadline)
    try:
        fallbacks = gw.cfg.model_fallbacks.get(ctx.model)
        if fallbacks is None:
            return await _forward(ctx, body)
        return await _forward_with_fallbacks(ctx, body, payload, fallbacks)
    except GatewayHTTPError as err:
        check = None
        if err.status == 403:
            gw.metrics.rejections.labels(gw.cfg.origin_names[origin], err.rule).inc()
            check = gw.router.rule_check(origin, cls, ctx.wall_s)[1]
        _log(ctx, None, check, err.status, 0.0, error=err.code)
        raise


async def _maybe_hold(ctx: _Ctx, deadline_header: str | None) -> None:
    """Hold a deferrable request while the plan says so (see ``serve/deferral.py``); routing
    then happens at release time, under the rules in force then."""
    gw, cfg = ctx.gw, ctx.gw.cfg
    deadline_in = cfg.default_deadline_s
    if deadline_header is not None:
        try:
            deadline_in = float(deadline_header)
        except ValueError:
            deadline_in = float("nan")
        if not 0.0 < deadline_in <= cfg.max_deadline_s:
            raise bad_request(f"{DEADLINE_HEADER} must be seconds in (0, {cfg.max_deadline_s:g}]"
                              f", got {deadline_header!r}", "invalid_deadline")  # fmt: skip
    ctx.deadline_s = ctx.wall_s + deadline_in
    state = gw.router.state
    if state is None or state.plan.hold is None:
        return
    entry = gw.deferrals.admit(
        ctx.origin, ctx.wall_s + deadline_in, ctx.wall_s, (state.epoch + 1) * cfg.epoch_s,
        float(state.plan.hold[ctx.origin]), gw.planner.hold_margin_s(state.obs),
    )  # fmt: skip
    if entry is None:
        return
    gw.metrics.deferred.labels(cfg.origin_names[ctx.origin]).inc()
    gw.metrics.deferred_pending.set(gw.deferrals.pending)
    t = time.perf_counter()
    try:
        await entry.future
    except asyncio.CancelledError:
        gw.deferrals.forget(entry)
        raise
    held = time.perf_counter() - t
    ctx.queued_s += held
    ctx.held_s = held
    ctx.wall_s = gw.clock()
    gw.metrics.deferred_hold.observe(held)


def _model_failed(err: GatewayHTTPError) -> bool:
    """Whether ``err`` means the model has nowhere to go (so a fallback model may)."""
    return err.status in (502, 503) or (err.status == 403 and err.rule == "model-placement")


async def _forward_with_fallbacks(ctx: _Ctx, body: bytes, payload: dict[str, Any],
                                  fallbacks: tuple[str, ...]) -> Answer:  # fmt: skip
    last: GatewayHTTPError | None = None
    for i, model in enumerate((ctx.model, *fallbacks)):
        if i:
            ctx.model = model
            body = json.dumps({**payload, "model": model}).encode()
            ctx.gw.metrics.fallbacks.labels("model-fallback").inc()
            ctx.attempts.append({"region": None, "upstream": None,
                                 "outcome": f"model-fallback:{model}"})  # fmt: skip
        try:
            return await _forward(ctx, body)
        except GatewayHTTPError as err:
            if not _model_failed(err):
                raise
            last = err
    assert last is not None
    raise last


async def _forward(ctx: _Ctx, body: bytes) -> Answer:
    gw = ctx.gw
    pol = gw.cfg.upstream
    tried: list[int] = []
    last_error = ""
    for attempt in range(pol.max_attempts):
        try:
            choice, check = await _choose(ctx, tried)
        except GatewayHTTPError as err:
            if attempt > 0 and err.status == 503:  # nowhere left to retry
                break
            raise
        if attempt == 0 and ctx.model == ctx.requested_model:
            cpu = None
            if ctx.cpu0 is not None and not ctx.queued_s:  # no await since the body was read
                cpu = time.thread_time() - ctx.cpu0
            gw.metrics.observe_overhead(time.perf_counter() - ctx.t_recv - ctx.queued_s, cpu)
            if choice.fallback:
                gw.metrics.child(gw.metrics.fallbacks, choice.fallback).inc()
        else:
            same = any(a["region"] == gw.cfg.region_names[choice.region] for a in ctx.attempts)
            gw.metrics.fallbacks.labels("retry-same-region" if same else "retry-other-region").inc()
        up = choice.upstream
        tried.append(up.index)
        try:
            return await _attempt(ctx, choice, check, body)
        except _UpstreamFailedError as fail:
            region = gw.cfg.region_names[choice.region]
            gw.metrics.errors.labels(region, up.name, fail.kind).inc()
            gw.pool.failure(up)
            ctx.attempts.append({"region": region, "upstream": up.name, "outcome": fail.kind})
            last_error = f"{up.name}: {fail}"
            if attempt + 1 < pol.max_attempts:
                await asyncio.sleep(pol.backoff_s * (2**attempt))
    raise GatewayHTTPError(502, f"no upstream answered after {len(ctx.attempts)} attempt(s); "
                           f"last: {last_error}", "upstream_error", "upstream_failed")  # fmt: skip


async def _choose(ctx: _Ctx, tried: list[int]):
    """The router's choice; when every allowed upstream is at capacity, wait for a freed
    slot (higher priority first, then arrival order) up to ``queue_timeout_s``, then 503."""
    gw = ctx.gw
    deadline = time.monotonic() + gw.cfg.upstream.queue_timeout_s
    while True:
        try:
            return gw.router.choose(ctx.origin, ctx.cls, ctx.model, ctx.wall_s, tried,
                                    ctx.tokens)  # fmt: skip
        except GatewayHTTPError as err:
            left = deadline - time.monotonic()
            if err.code != "capacity_exhausted" or left <= 0:
                raise
            gw.metrics.fallbacks.labels("queued-for-capacity").inc()
            t = time.perf_counter()
            freed = await gw.wait_for_slot(left, ctx.priority)
            ctx.queued_s += time.perf_counter() - t
            if not freed:
                raise


def _request_headers(ctx: _Ctx, up) -> bytes:
    """The upstream request's header lines (host and content-length are the pool's)."""
    static = _STATIC_HEADERS.get(up.index)
    if static is None:  # built once per upstream (its API key is read from the environment)
        key = up.cfg.api_key()
        static = (b"content-type: application/json\r\naccept-encoding: identity\r\n"
                  b"user-agent: " + USER_AGENT.encode() + b"\r\n"
                  + (f"authorization: Bearer {key}\r\n".encode() if key else b""))  # fmt: skip
        _STATIC_HEADERS[up.index] = static
    return static + DECISION_HEADER_B + b": " + ctx.decision_id.encode() + b"\r\n"


_STATIC_HEADERS: dict[int, bytes] = {}
DECISION_HEADER_B = DECISION_HEADER.encode()
REGION_HEADER_B = REGION_HEADER.encode()
MODEL_HEADER_B = MODEL_HEADER.encode()
HOP_BY_HOP_B = frozenset(h.encode() for h in HOP_BY_HOP)


@dataclass(slots=True)
class Answer:
    """What goes back to the client: status, raw headers (lower-case bytes, without
    content-length) and either the whole ``body`` or a ``stream`` of chunks."""

    status_code: int
    raw_headers: list[tuple[bytes, bytes]]
    body: bytes = b""
    stream: AsyncIterator[bytes] | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {k.decode("latin-1"): v.decode("latin-1") for k, v in self.raw_headers}


def _out_headers(ctx: _Ctx, choice: Choice, resp: UpstreamResponse) -> list[tuple[bytes, bytes]]:
    out = [(k, v) for k, v in resp.headers if k not in HOP_BY_HOP_B]
    out.append((REGION_HEADER_B, ctx.gw.region_names_b[choice.region]))
    out.append((MODEL_HEADER_B, ctx.model.encode()))
    out.append((DECISION_HEADER_B, ctx.decision_id.encode()))
    return out


async def _attempt(ctx: _Ctx, choice: Choice, check: RuleCheck, body: bytes) -> Answer:
    gw, up = ctx.gw, choice.upstream
    started = gw.pool.start(up, sum(ctx.tokens))
    t_send = time.perf_counter()
    done = False
    resp = None
    try:
        try:
            resp = await gw.upstream_pools[up.index].post(
                ctx.endpoint, _request_headers(ctx, up), body
            )
        except UpstreamTimeoutError as err:
            raise _UpstreamFailedError("timeout", repr(err)) from None
        except UpstreamError as err:
            raise _UpstreamFailedError("connect", repr(err)) from None
        if resp.status_code in RETRY_STATUS:
            raise _UpstreamFailedError(f"status-{resp.status_code}", f"HTTP {resp.status_code}")
        try:
            first = await resp.next_chunk()
        except UpstreamError as err:
            raise _UpstreamFailedError("reset-before-first-byte", repr(err)) from None
        ttfb = time.perf_counter() - t_send
        if not first and ctx.stream and resp.status_code == 200:
            raise _UpstreamFailedError("empty-stream", "the upstream closed without a byte")
        headers = _out_headers(ctx, choice, resp)
        if not ctx.stream or resp.status_code != 200:
            try:
                content = first + await resp.read() if first else first
            except UpstreamError as err:
                raise _UpstreamFailedError("reset-mid-body", repr(err)) from None
            done = True
            resp.release()
            _finish(ctx, choice, check, started, ttfb, resp.status_code, content, ok=True)
            if ctx.budget_key is not None:
                headers += gw.budgets.headers(ctx.budget_key, gw.clock())
            return Answer(resp.status_code, headers, content)
        done = True  # the stream generator owns the accounting and the response from here
        if ctx.budget_key is not None:  # before this stream's usage is known
            headers += gw.budgets.headers(ctx.budget_key, gw.clock())
        return Answer(
            resp.status_code,
            headers,
            stream=_stream(ctx, choice, check, resp, first, started, ttfb),
        )
    finally:
        if not done:
            if resp is not None:
                resp.release()
            gw.pool.finish(up, started, sum(ctx.tokens))


async def _stream(ctx, choice, check, resp, first, started, ttfb):
    outcome = "client-disconnected"  # unless the stream ends or fails first
    watch = ctx.budget_key is not None
    tail = first[-USAGE_TAIL_BYTES:] if watch else b""  # where the final usage chunk is
    try:
        yield first
        try:
            while chunk := await resp.next_chunk():
                if watch:
                    tail = (tail + chunk)[-USAGE_TAIL_BYTES:]
                yield chunk
            outcome = "ok"
        except UpstreamError as err:  # after the first byte: report, never retry
            outcome = "failed-mid-stream"
            region = ctx.gw.cfg.region_names[choice.region]
            ctx.gw.metrics.errors.labels(region, choice.upstream.name, "mid-stream").inc()
            ctx.gw.pool.failure(choice.upstream)
            yield sse_error_event(f"upstream {region} failed mid-stream: "
                                  f"{type(err).__name__}; the response is incomplete")  # fmt: skip
    finally:
        if watch:
            ctx.stream_tokens = sse_usage_tokens(tail) or 0
        # accounting first: a cancelled stream (client gone) may not get past an await
        _finish(ctx, choice, check, started, ttfb, resp.status_code, b"", ok=outcome == "ok",
                outcome=outcome)  # fmt: skip
        resp.release()


def _finish(ctx: _Ctx, choice: Choice, check: RuleCheck, started: float, ttfb: float,
            status: int, content: bytes, ok: bool, outcome: str = "") -> None:  # fmt: skip
    gw, up = ctx.gw, choice.upstream
    duration = gw.pool.clock() - started
    gw.pool.finish(up, started, sum(ctx.tokens))
    if ok and status < 400:
        gw.pool.success(up, duration, ttfb)
    region = gw.cfg.region_names[choice.region]
    m = gw.metrics
    m.child(m.requests, region, up.name, ctx.endpoint, str(status if ok else 599)).inc()
    m.child(m.latency, region, up.name).observe(time.perf_counter() - ctx.t_recv)
    m.child(m.ttfb, region, up.name).observe(ttfb)
    # dynamic IT energy of the request on its server: (peak - idle) / slots x duration
    it_kwh = (up.cfg.peak_power_kw - up.cfg.idle_power_kw) / up.cfg.capacity * duration \
        / SECONDS_PER_HOUR  # fmt: skip
    obs = gw.router.state.obs if gw.router.state is not None else None
    co2_g = water_l = None
    if obs is not None:
        co2_g = it_kwh * float(obs.carbon_g_per_it_kwh[0, choice.region])
        water_l = it_kwh * float(obs.water_l_per_it_kwh[0, choice.region])
        m.child(m.co2, region).inc(co2_g)
        m.child(m.water, region).inc(water_l)
        m.child(m.co2_per_request, region).observe(co2_g)
        m.child(m.water_per_request, region).observe(water_l)
    ctx.attempts.append({"region": region, "upstream": up.name,
                         "outcome": outcome or ("ok" if ok else "failed")})  # fmt: skip
    used = _usage(content)
    if ctx.budget_key is not None:
        spent = sum(used) if used else ctx.stream_tokens
        if spent:
            gw.budgets.spend(ctx.budget_key, spent, gw.clock())
    tokens = used or ctx.tokens
    _log(ctx, choice, check, status if ok else 599, duration, tokens=tokens, co2_g=co2_g,
         water_l=water_l)  # fmt: skip


def _usage(content: bytes) -> tuple[int, int] | None:
    if not content or len(content) > 1 << 20:
        return None
    try:
        usage = json.loads(content).get("usage") or {}
        return int(usage["prompt_tokens"]), int(usage["completion_tokens"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _log(ctx: _Ctx, choice: Choice | None, check: RuleCheck | None, status: int,
         duration_s: float, tokens: tuple[int, int] | None = None, co2_g: float | None = None,
         water_l: float | None = None, error: str | None = None) -> None:  # fmt: skip
    gw = ctx.gw
    if not gw.log.enabled:
        return
    cfg, state = gw.cfg, gw.router.state
    rec: dict[str, Any] = {
        "time_s": ctx.arrival_s or ctx.wall_s, "routed_s": ctx.wall_s,
        "decision_id": ctx.decision_id,
        "origin": cfg.origin_names[ctx.origin], "class": CLASSES[ctx.cls], "model": ctx.model,
        "endpoint": ctx.endpoint, "stream": ctx.stream, "client": ctx.client,
        "region": None, "upstream": None, "attempts": ctx.attempts, "status": status,
        "duration_s": round(duration_s, 6), "held_s": round(ctx.held_s, 6),
        "deadline_s": ctx.deadline_s, "error": error,
    }  # fmt: skip
    if ctx.requested_model != ctx.model:
        rec["requested_model"] = ctx.requested_model
    if state is not None:
        row = state.plan.route[ctx.cls, ctx.origin]
        rec["plan"] = {"epoch": state.epoch, "policy": gw.cfg.geo_policy,
                       "shares": {r: round(float(s), 6) for r, s in zip(cfg.region_names, row,
                                                                        strict=True)},
                       "rejected": state.rejected or None,
                       "fallback": choice.fallback if choice else None}  # fmt: skip
    if choice is not None:
        r = choice.region
        rec["region"] = cfg.region_names[r]
        rec["upstream"] = choice.upstream.name
        if state is not None:
            sig = state.signals
            rec["signals"] = {
                "provider": sig.providers[r], "age_s": round(float(sig.age_s[r]), 3),
                "carbon_intensity_g_per_kwh": float(sig.carbon_intensity_g_per_kwh[0, r]),
                "price_usd_per_kwh": float(sig.price_usd_per_kwh[0, r]),
                "water_intensity_l_per_kwh": float(sig.water_intensity_l_per_kwh[0, r]),
                "temp_c": float(sig.temp_c[0, r]),
            }  # fmt: skip
        rec["co2_g"], rec["water_l"] = co2_g, water_l
        if tokens is not None:
            rec["prompt_tokens"], rec["output_tokens"] = tokens
    if check is not None:
        rec["rules"] = {"allowed": check.allowed_regions, "exclusions": check.active_exclusions,
                        "residency": check.residency,
                        "latency_bound_ms": check.latency_bound_ms}  # fmt: skip
    gw.log.write(rec)
