"""The deferrable batch endpoint: submit many completions at once, collect them later.

``POST /v1/greenroute/batches`` with ``{"requests": [{"endpoint": "/v1/chat/completions",
"body": {...}}, ...], "deadline_s": 3600}`` answers 202 with the batch id; every item is a
deferrable request (held while the plan says so, released within the deadline, routed with
the plan's deferrable shares, logged like any other). ``GET /v1/greenroute/batches/{id}``
returns the batch's progress and each item's result (status, region, decision id, the
upstream's JSON body). Batches live in memory (bounded; the oldest finished ones go first):
a restart loses them. Streaming items are refused (a batch has no one to stream to).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from greenroute.core.types import CLASSES
from greenroute.serve.errors import GatewayHTTPError, bad_request
from greenroute.serve.gateway import ORIGIN_HEADER, Gateway
from greenroute.serve.proxy import (
    DECISION_HEADER,
    REGION_HEADER,
    complete,
    parse_payload,
    read_body,
)

BATCH_PATH = "/v1/greenroute/batches"
ENDPOINTS = ("/v1/chat/completions", "/v1/completions")
MAX_ITEMS = 1000  # per batch
MAX_BATCHES = 10_000  # kept in memory


@dataclass
class Batch:
    id: str
    client: str | None
    count: int
    deadline_s: float
    created_s: float
    results: list[dict | None] = field(default_factory=list)

    @property
    def completed(self) -> int:
        return sum(r is not None for r in self.results)

    def view(self) -> dict[str, Any]:
        done = self.completed
        return {"id": self.id, "object": "greenroute.batch",
                "status": "completed" if done == self.count else "in_progress",
                "count": self.count, "completed": done, "deadline_s": self.deadline_s,
                "created_s": self.created_s, "results": self.results}  # fmt: skip


class BatchStore:
    def __init__(self) -> None:
        self.batches: dict[str, Batch] = {}
        self.tasks: set[asyncio.Task] = set()

    def add(self, batch: Batch) -> None:
        if len(self.batches) >= MAX_BATCHES:
            for bid, b in list(self.batches.items()):
                if b.completed == b.count:
                    del self.batches[bid]
                    break
        self.batches[batch.id] = batch

    def spawn(self, coro) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def stop(self) -> None:
        for t in list(self.tasks):
            t.cancel()


def _items(payload: Any) -> tuple[list[tuple[str, dict]], float | None]:
    if not isinstance(payload, dict) or not isinstance(payload.get("requests"), list):
        raise bad_request('a batch is {"requests": [{"endpoint", "body"}, ...], "deadline_s"}',
                          "invalid_batch")  # fmt: skip
    reqs = payload["requests"]
    if not 0 < len(reqs) <= MAX_ITEMS:
        raise bad_request(f"a batch holds 1 to {MAX_ITEMS} requests, got {len(reqs)}",
                          "invalid_batch")  # fmt: skip
    out = []
    for i, item in enumerate(reqs):
        if not isinstance(item, dict) or not isinstance(item.get("body"), dict):
            raise bad_request(f"requests[{i}] must be {{'endpoint', 'body'}}", "invalid_batch")
        endpoint = item.get("endpoint", ENDPOINTS[0])
        if endpoint not in ENDPOINTS:
            raise bad_request(f"requests[{i}].endpoint must be one of {ENDPOINTS}",
                              "invalid_batch")  # fmt: skip
        body = item["body"]
        if body.get("stream") is True:
            raise bad_request(f"requests[{i}]: a batch item cannot stream", "invalid_batch")
        if not isinstance(body.get("model"), str):
            raise bad_request(f"requests[{i}].body.model is required", "missing_model")
        out.append((endpoint, body))
    deadline = payload.get("deadline_s")
    if deadline is not None and (
        isinstance(deadline, bool) or not isinstance(deadline, int | float)
    ):
        raise bad_request("deadline_s must be a number of seconds", "invalid_deadline")
    return out, deadline


async def submit(gw: Gateway, store: BatchStore, request: Request) -> JSONResponse:
    wall = gw.clock()
    key = gw.authenticate(request.headers.get("authorization"))
    gw.check_rate(key)  # one token per batch
    raw = await read_body(request, gw.cfg.max_body_bytes)
    try:
        payload = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise bad_request(f"request body is not valid JSON: {err}", "invalid_json") from None
    items, deadline = _items(payload)
    deadline_s = float(deadline) if deadline is not None else gw.cfg.default_deadline_s
    if not 0.0 < deadline_s <= gw.cfg.max_deadline_s:
        raise bad_request(f"deadline_s must be in (0, {gw.cfg.max_deadline_s:g}]",
                          "invalid_deadline")  # fmt: skip
    origin = gw.resolve_origin(key, request.headers.get(ORIGIN_HEADER),
                               request.client.host if request.client else None)  # fmt: skip
    batch = Batch(uuid.uuid4().hex, key.name if key else None, len(items), deadline_s, wall,
                  [None] * len(items))  # fmt: skip
    store.add(batch)
    for i, (endpoint, body) in enumerate(items):
        store.spawn(_run(gw, batch, i, endpoint, body, origin, wall))
    view = batch.view()
    del view["results"]
    return JSONResponse(view, status_code=202)


async def _run(gw: Gateway, batch: Batch, i: int, endpoint: str, body: dict, origin: int,
               wall: float) -> None:  # fmt: skip
    raw = json.dumps(body).encode()
    try:
        resp = await complete(gw, endpoint, raw, parse_payload(raw), batch.client, origin,
                              CLASSES.index("deferrable"), str(batch.deadline_s),
                              time.perf_counter(), wall)  # fmt: skip
        try:
            content: Any = json.loads(resp.body)
        except (ValueError, UnicodeDecodeError):
            content = resp.body.decode("utf-8", "replace")
        batch.results[i] = {
            "status": resp.status_code,
            "region": resp.headers.get(REGION_HEADER),
            "decision_id": resp.headers.get(DECISION_HEADER),
            "body": content,
        }
    except GatewayHTTPError as err:
        batch.results[i] = {"status": err.status, "region": None, "decision_id": None,
                            "body": err.body()}  # fmt: skip


def get(gw: Gateway, store: BatchStore, request: Request, batch_id: str) -> JSONResponse:
    key = gw.authenticate(request.headers.get("authorization"))
    batch = store.batches.get(batch_id)
    if batch is None or (batch.client is not None and (key is None or key.name != batch.client)):
        raise GatewayHTTPError(404, f"no batch {batch_id!r}", "invalid_request_error",
                               "batch_not_found")  # fmt: skip
    return JSONResponse(batch.view())
