"""Per-key budgets (LiteLLM's ``max_budget`` per key, in tokens and requests rather than
dollars): ``auth.keys[].budget: {max_tokens, max_requests, period_s}``.

Windows are fixed: window ``w`` of a key covers ``[w * period_s, (w + 1) * period_s)`` in Unix
seconds, so a daily budget (``period_s: 86400``) resets at 00:00 UTC. A request is counted when
it is admitted; its tokens (prompt + completion) when the upstream reports them: the ``usage``
of a non-streamed answer, or of the last SSE chunk of a stream when it carries one (OpenAI's
``stream_options: {include_usage: true}``); a stream without usage counts only as a request.
A key is refused (HTTP 429 ``budget_exceeded``) once either total has reached its maximum, so
the request that crosses the token maximum is served in full: the overshoot is at most one
request's tokens. State is in process: each gateway replica keeps its own counts.
"""

from __future__ import annotations

import json
import math

from greenroute.serve.errors import GatewayHTTPError
from greenroute.serve.security import ClientKey

REMAINING_TOKENS_HEADER = b"x-greenroute-budget-remaining-tokens"
REMAINING_REQUESTS_HEADER = b"x-greenroute-budget-remaining-requests"


def budget_exceeded(name: str, what: str, retry_after_s: float) -> GatewayHTTPError:
    secs = max(1, math.ceil(retry_after_s))
    return GatewayHTTPError(429, f"budget of key {name!r} exhausted ({what}); it renews in "
                            f"{secs} s", "budget_exceeded", "budget_exceeded",
                            {"retry-after": str(secs)})  # fmt: skip


class BudgetTracker:
    """Tokens and requests used per key in its current window (in process)."""

    def __init__(self) -> None:
        self._used: dict[str, list[int]] = {}  # key name -> [window, tokens, requests]

    def _window(self, key: ClientKey, now_s: float) -> list[int]:
        assert key.budget is not None
        w = int(now_s // key.budget.period_s)
        used = self._used.get(key.name)
        if used is None or used[0] != w:
            used = self._used[key.name] = [w, 0, 0]
        return used

    def admit(self, key: ClientKey, now_s: float) -> None:
        """Count one request of ``key``, or raise 429 when its budget is spent."""
        b = key.budget
        assert b is not None
        used = self._window(key, now_s)
        what = ""
        if b.max_requests is not None and used[2] >= b.max_requests:
            what = f"{used[2]} of {b.max_requests} requests"
        elif b.max_tokens is not None and used[1] >= b.max_tokens:
            what = f"{used[1]} of {b.max_tokens} tokens"
        if what:
            raise budget_exceeded(key.name, what, (used[0] + 1) * b.period_s - now_s)
        used[2] += 1

    def spend(self, key: ClientKey, tokens: int, now_s: float) -> None:
        self._window(key, now_s)[1] += tokens

    def headers(self, key: ClientKey, now_s: float) -> list[tuple[bytes, bytes]]:
        """The remaining-budget response headers of ``key`` (never below 0)."""
        b = key.budget
        assert b is not None
        used = self._window(key, now_s)
        out = []
        if b.max_tokens is not None:
            out.append((REMAINING_TOKENS_HEADER, b"%d" % max(b.max_tokens - used[1], 0)))
        if b.max_requests is not None:
            out.append((REMAINING_REQUESTS_HEADER, b"%d" % max(b.max_requests - used[2], 0)))
        return out


def sse_usage_tokens(tail: bytes) -> int | None:
    """Prompt + completion tokens of the last ``data:`` event in ``tail`` whose ``usage`` is
    set, or None when there is none (or it does not parse)."""
    for line in reversed(tail.split(b"\n")):
        line = line.strip()
        if not line.startswith(b"data:") or b'"usage"' not in line:
            continue
        try:
            usage = json.loads(line[5:]).get("usage")
            if usage:
                return int(usage["prompt_tokens"]) + int(usage["completion_tokens"])
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
    return None
