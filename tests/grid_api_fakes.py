"""A loopback stand-in for the Electricity Maps and WattTime APIs that serves the recorded
answers of ``tests/data/grid_apis`` and checks the credentials as the real APIs do."""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

RECORDINGS = Path(__file__).parent / "data" / "grid_apis"
EM_KEY = "em-test-key"
WT_USER, WT_PASSWORD = "wt-user", "wt-password"


def recording(name: str) -> dict:
    return json.loads((RECORDINGS / name).read_text(encoding="utf-8"))


@dataclass
class FakeGridApis:
    """``mode``: ``ok``, ``fail`` (HTTP 500 everywhere) or ``slow`` (answers after
    ``delay_s``). ``expire_next_token``: the next forecast call answers 401 once."""

    mode: str = "ok"
    delay_s: float = 0.0
    expire_next_token: bool = False
    calls: list[tuple[str, dict]] = field(default_factory=list)  # (path, query)
    tokens: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v3/carbon-intensity/latest", self.em_latest),
            Route("/login", self.wt_login),
            Route("/v3/forecast", self.wt_forecast),
        ])  # fmt: skip

    async def _common(self, request: Request) -> Response | None:
        self.calls.append((request.url.path, dict(request.query_params)))
        if self.mode == "slow":
            await asyncio.sleep(self.delay_s)
        if self.mode == "fail":
            return JSONResponse({"error": "internal"}, status_code=500)
        return None

    async def em_latest(self, request: Request) -> Response:
        if (bad := await self._common(request)) is not None:
            return bad
        if request.headers.get("auth-token") != EM_KEY:
            return JSONResponse({"message": "Unauthorized"}, status_code=401)
        zone = request.query_params.get("zone")
        if zone != "DE":
            return JSONResponse({"error": f"zone {zone} not available"}, status_code=404)
        return JSONResponse(recording("electricitymaps_carbon_intensity_latest_DE.json"))

    async def wt_login(self, request: Request) -> Response:
        if (bad := await self._common(request)) is not None:
            return bad
        expected = base64.b64encode(f"{WT_USER}:{WT_PASSWORD}".encode()).decode()
        if request.headers.get("authorization") != f"Basic {expected}":
            return JSONResponse({"error": "invalid credentials"}, status_code=403)
        token = recording("watttime_login.json")["token"] + str(len(self.tokens))
        self.tokens.append(token)
        return JSONResponse({"token": token})

    async def wt_forecast(self, request: Request) -> Response:
        if (bad := await self._common(request)) is not None:
            return bad
        if not self.tokens or request.headers.get("authorization") != f"Bearer {self.tokens[-1]}":
            return JSONResponse({"error": "invalid token"}, status_code=401)
        if self.expire_next_token:
            self.expire_next_token = False
            self.tokens.append("expired")  # the token sent is no longer the valid one
            return JSONResponse({"error": "token expired"}, status_code=401)
        q = request.query_params
        if q.get("signal_type") != "co2_moer" or q.get("region") != "CAISO_NORTH":
            return JSONResponse({"error": "not available"}, status_code=403)
        return JSONResponse(recording("watttime_forecast_CAISO_NORTH.json"))
