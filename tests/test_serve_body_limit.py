"""``proxy.read_limited``: one reader of request bodies for the completion endpoints (raw
ASGI) and the batch endpoint (Starlette), 413 past the limit."""

from __future__ import annotations

import asyncio

import pytest

from greenroute.serve.errors import GatewayHTTPError
from greenroute.serve.proxy import read_limited


async def _chunks(parts: list[bytes]):
    for p in parts:
        yield p


def _read(parts: list[bytes], limit: int, declared: str | None) -> bytes:
    return asyncio.run(read_limited(_chunks(parts), limit, declared))


def test_body_within_the_limit_is_joined() -> None:
    assert _read([b"ab", b"cd", b"e"], 5, "5") == b"abcde"
    assert _read([], 5, None) == b""


def test_declared_length_over_the_limit_is_refused_before_reading() -> None:
    with pytest.raises(GatewayHTTPError) as err:
        _read([b"x"], 10, "11")
    assert err.value.status == 413 and "11 bytes exceeds the 10-byte limit" in str(err.value)


def test_received_bytes_over_the_limit_are_refused_without_a_declared_length() -> None:
    # 800 + 800 = 1,600 <= 2,000; the third chunk makes 2,400
    with pytest.raises(GatewayHTTPError) as err:
        _read([b"x" * 800] * 3, 2000, None)
    assert err.value.status == 413 and "2400 bytes exceeds the 2000-byte limit" in str(err.value)
