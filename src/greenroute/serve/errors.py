"""OpenAI-style HTTP errors: ``{"error": {"message", "type", "code", "param"}}``."""

from __future__ import annotations

import json
from collections.abc import Mapping


class GatewayHTTPError(Exception):
    """An error answered to the client with ``status`` and an OpenAI-style body."""

    def __init__(self, status: int, message: str, type_: str, code: str,
                 headers: Mapping[str, str] | None = None, rule: str = "") -> None:  # fmt: skip
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.headers = dict(headers or {})
        self.rule = rule  # the binding rule of a constraint rejection

    def body(self) -> dict:
        return error_body(self.message, self.type, self.code)


def error_body(message: str, type_: str, code: str, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "code": code, "param": param}}


def sse_error_event(message: str, code: str = "upstream_failed_mid_stream") -> bytes:
    """An SSE event carrying an OpenAI-style error (the OpenAI client raises on it)."""
    payload = json.dumps(error_body(message, "upstream_error", code))
    return f"data: {payload}\n\n".encode()


def bad_request(message: str, code: str = "invalid_request") -> GatewayHTTPError:
    return GatewayHTTPError(400, message, "invalid_request_error", code)


def unauthorized(message: str) -> GatewayHTTPError:
    return GatewayHTTPError(401, message, "authentication_error", "invalid_api_key",
                            {"www-authenticate": "Bearer"})  # fmt: skip


def model_not_found(model: str, models: tuple[str, ...]) -> GatewayHTTPError:
    return GatewayHTTPError(
        404, f"The model {model!r} does not exist; available: {', '.join(models)}",
        "invalid_request_error", "model_not_found",
    )  # fmt: skip


def too_large(size: int, limit: int) -> GatewayHTTPError:
    return GatewayHTTPError(413, f"request body of {size} bytes exceeds the {limit}-byte limit",
                            "invalid_request_error", "request_too_large")  # fmt: skip


def rate_limited(retry_after_s: float) -> GatewayHTTPError:
    secs = max(1, int(retry_after_s + 0.999))
    return GatewayHTTPError(429, f"rate limit reached for this API key; retry in {secs} s",
                            "rate_limit_error", "rate_limit_exceeded",
                            {"retry-after": str(secs)})  # fmt: skip


def no_allowed_region(message: str, rule: str) -> GatewayHTTPError:
    return GatewayHTTPError(403, message, "permission_error", "no_allowed_region", rule=rule)


def unavailable(message: str, code: str = "no_upstream_available") -> GatewayHTTPError:
    return GatewayHTTPError(503, message, "service_unavailable", code, {"retry-after": "1"})
