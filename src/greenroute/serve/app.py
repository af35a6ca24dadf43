"""The FastAPI application: OpenAI-compatible endpoints, ``/metrics`` and ``/healthz``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from greenroute.serve import batch as batch_api
from greenroute.serve.asgi import GatewayApp
from greenroute.serve.batch import BATCH_PATH, BatchStore
from greenroute.serve.config import GatewayConfig
from greenroute.serve.errors import GatewayHTTPError, error_body
from greenroute.serve.gateway import Gateway

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def create_app(cfg: GatewayConfig, clock: Callable[[], float] = time.time) -> GatewayApp:
    """The gateway as an ASGI app (``uvicorn.run(create_app(cfg))``): FastAPI, with the
    completion endpoints served as raw ASGI (``serve/asgi.py``)."""
    gw = Gateway(cfg, clock)
    batches = BatchStore()

    @contextlib.asynccontextmanager
    async def lifespan(app: GatewayApp):
        await gw.start()
        try:
            yield
        finally:
            await batches.stop()
            await gw.stop()

    app = GatewayApp(title="greenroute gateway", lifespan=lifespan, docs_url=None,
                  redoc_url=None, openapi_url=None)  # fmt: skip
    app.state.gateway = gw

    @app.exception_handler(GatewayHTTPError)
    async def _gateway_error(request: Request, err: GatewayHTTPError) -> JSONResponse:
        gw.metrics.client_error(err.code)
        return JSONResponse(err.body(), status_code=err.status, headers=err.headers)

    @app.exception_handler(404)
    async def _not_found(request: Request, err) -> JSONResponse:
        return JSONResponse(error_body(f"no route {request.method} {request.url.path}",
                                       "invalid_request_error", "unknown_url"),
                            status_code=404)  # fmt: skip

    @app.exception_handler(405)
    async def _bad_method(request: Request, err) -> JSONResponse:
        return JSONResponse(error_body(f"method {request.method} not allowed on "
                                       f"{request.url.path}", "invalid_request_error",
                                       "method_not_allowed"), status_code=405)  # fmt: skip

    @app.post(BATCH_PATH)
    async def submit_batch(request: Request) -> Response:
        return await batch_api.submit(gw, batches, request)

    @app.get(BATCH_PATH + "/{batch_id}")
    async def get_batch(request: Request, batch_id: str) -> Response:
        return batch_api.get(gw, batches, request, batch_id)

    @app.get("/v1/models")
    async def models(request: Request) -> JSONResponse:
        gw.authenticate(request.headers.get("authorization"))
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "greenroute"}
                for m in cfg.models]  # fmt: skip
        return JSONResponse({"object": "list", "data": data})

    @app.get("/metrics")
    async def metrics() -> Response:
        for up in gw.pool.upstreams:
            gw.metrics.in_flight.labels(cfg.region_names[up.region], up.name).set(up.in_flight)
        return Response(gw.metrics.export(), media_type=PROMETHEUS_CONTENT_TYPE)

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        regions = {}
        for r, ups in enumerate(gw.pool.by_region):
            regions[cfg.region_names[r]] = {"healthy": sum(not u.ejected for u in ups),
                                            "upstreams": len(ups)}  # fmt: skip
        state = gw.router.state
        any_up = any(v["healthy"] for v in regions.values())
        body = {"status": "ok" if any_up else "degraded", "regions": regions,
                "plan_epoch": state.epoch if state else None,
                "policy": cfg.geo_policy}  # fmt: skip
        return JSONResponse(body, status_code=200 if any_up else 503)

    return app
