"""The completion endpoints as raw ASGI, in front of the FastAPI app (``GatewayApp``).

``POST /v1/chat/completions`` and ``POST /v1/completions`` are the gateway's hot path: at
500 requests/s FastAPI's routing, dependency and middleware layers cost about as much CPU as
everything the gateway itself does per request (measured with py-spy), so these two paths are
answered here, straight from the ASGI scope, with the same OpenAI-style error bodies and
metrics; every other path (``/v1/models``, ``/metrics``, ``/healthz``, batches) and the
lifespan go to FastAPI unchanged.
"""

from __future__ import annotations

import logging
import time

from fastapi import FastAPI
from starlette.responses import StreamingResponse

from greenroute.serve.errors import GatewayHTTPError
from greenroute.serve.gateway import CLASS_HEADER, ORIGIN_HEADER, PRIORITY_HEADER, Gateway
from greenroute.serve.proxy import DEADLINE_HEADER, Answer, complete, parse_payload, read_limited

LOG = logging.getLogger("greenroute.serve")
COMPLETION_PATHS = ("/v1/chat/completions", "/v1/completions")
_WANTED = frozenset((b"authorization", b"content-length", ORIGIN_HEADER.encode(),
                     CLASS_HEADER.encode(), DEADLINE_HEADER.encode(),
                     PRIORITY_HEADER.encode()))  # fmt: skip
_JSON = (b"content-type", b"application/json")


class _ClientGoneError(Exception):
    """The client disconnected before its request body was read."""


class GatewayApp(FastAPI):
    """FastAPI, with the completion endpoints answered by ``serve_completion``."""

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] in COMPLETION_PATHS:
            await serve_completion(self.state.gateway, scope, receive, send, scope["path"])
            return
        await super().__call__(scope, receive, send)


async def send_json(send, status: int, body: dict, headers=()) -> None:
    import json

    raw = json.dumps(body).encode()
    hdrs = [_JSON, (b"content-length", b"%d" % len(raw))]
    hdrs += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in dict(headers).items()]
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": raw})


async def serve_completion(gw: Gateway, scope, receive, send, endpoint: str) -> None:
    try:
        if scope["method"] != "POST":
            raise GatewayHTTPError(405, f"method {scope['method']} not allowed on {endpoint}",
                                   "invalid_request_error", "method_not_allowed",
                                   {"allow": "POST"})  # fmt: skip
        ans = await _handle(gw, scope, receive, endpoint)
    except GatewayHTTPError as err:
        gw.metrics.client_error(err.code)
        await send_json(send, err.status, err.body(), err.headers)
        return
    except _ClientGoneError:
        return
    if ans.stream is None:
        headers = ans.raw_headers
        headers.append((b"content-length", b"%d" % len(ans.body)))
        await send({"type": "http.response.start", "status": ans.status_code,
                    "headers": headers})  # fmt: skip
        await send({"type": "http.response.body", "body": ans.body})
        return
    resp = StreamingResponse(ans.stream, status_code=ans.status_code)
    resp.raw_headers = ans.raw_headers
    await resp(scope, receive, send)


async def _body_chunks(receive):
    """The request body's chunks from ASGI ``receive`` (a disconnect ends the request)."""
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise _ClientGoneError
        chunk = msg.get("body", b"")
        if chunk:
            yield chunk
        if not msg.get("more_body", False):
            return


async def _handle(gw: Gateway, scope, receive, endpoint: str) -> Answer:
    t_recv, cpu0 = time.perf_counter(), time.thread_time()
    wall = gw.clock()
    hdr = {k.decode(): v.decode("latin-1") for k, v in scope["headers"] if k in _WANTED}
    key = gw.authenticate(hdr.get("authorization"))
    gw.check_rate(key)
    t_body, cpu_body = time.perf_counter(), time.thread_time()
    body = await read_limited(_body_chunks(receive), gw.cfg.max_body_bytes,
                              hdr.get("content-length"))  # fmt: skip
    t_recv += time.perf_counter() - t_body  # waiting for the client's bytes is not overhead
    cpu0 += time.thread_time() - cpu_body  # nor what other requests did meanwhile
    payload = parse_payload(body)
    client = scope.get("client")
    origin = gw.resolve_origin(key, hdr.get(ORIGIN_HEADER), client[0] if client else None)
    cls = gw.request_class(hdr.get(CLASS_HEADER))
    prio_hdr = hdr.get(PRIORITY_HEADER)
    prio = 0 if key is None and prio_hdr is None else gw.request_priority(key, prio_hdr)
    budget_key = None
    if key is not None and key.budget is not None:  # counted once the request is valid
        gw.budgets.admit(key, wall)
        budget_key = key
    return await complete(gw, endpoint, body, payload, key.name if key else None, origin, cls,
                          hdr.get(DEADLINE_HEADER), t_recv, wall, cpu0, prio,
                          budget_key)  # fmt: skip
