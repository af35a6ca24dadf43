"""Config sections of the router-parity features (LiteLLM / production-stack): per-model
fallbacks, and per-key priority and budget (``auth.keys[]``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from greenroute.serve.security import KeyBudget


def model_fallbacks_section(ck, raw: Any, served: tuple[str, ...]
                            ) -> dict[str, tuple[str, ...]]:  # fmt: skip
    """``model_fallbacks: {MODEL: [OTHER, ...]}``; every model named must be served by an
    upstream (one problem per unknown model), and a model may not fall back to itself."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        ck.bad("model_fallbacks", f"expected a mapping MODEL: [OTHER_MODEL, ...], got {raw!r}")
        return {}
    valid = ", ".join(served)
    out: dict[str, tuple[str, ...]] = {}
    for model, others in raw.items():
        where = f"model_fallbacks.{model}"
        ok = True
        if model not in served:
            ck.bad(where, f"unknown model {model!r} (no upstream serves it); valid: {valid}")
            ok = False
        names = ck.str_list(others, where)
        for i, other in enumerate(names):
            if other not in served:
                ck.bad(
                    f"{where}[{i}]",
                    f"unknown model {other!r} (no upstream serves it); valid: {valid}",
                )
                ok = False
            elif other == model:
                ck.bad(f"{where}[{i}]", f"{model!r} cannot fall back to itself")
                ok = False
        if len(set(names)) != len(names):
            ck.bad(where, f"lists a model twice: {list(names)}")
            ok = False
        if ok and names:
            out[str(model)] = names
    return out


def key_priority(ck, kd: Mapping, where: str) -> int:
    """``auth.keys[].priority``: an integer, higher is served first when queued (default 0)."""
    v = kd.get("priority", 0)
    if isinstance(v, bool) or not isinstance(v, int):
        ck.bad(f"{where}.priority", f"must be an integer, got {v!r}")
        return 0
    return v


def key_budget(ck, raw: Any, where: str) -> KeyBudget | None:
    """``auth.keys[].budget: {max_tokens, max_requests, period_s}`` (at least one maximum)."""
    if raw is None:
        return None
    path = f"{where}.budget"
    d = ck.mapping(raw, path, ("max_tokens", "max_requests", "period_s"))
    if not d:
        if isinstance(raw, Mapping):
            ck.bad(path, "needs max_tokens and/or max_requests (and period_s)")
        return None
    tok = ck.number(d, "max_tokens", path, None, lo=1, integer=True) \
        if "max_tokens" in d else None  # fmt: skip
    req = ck.number(d, "max_requests", path, None, lo=1, integer=True) \
        if "max_requests" in d else None  # fmt: skip
    period = ck.number(d, "period_s", path, None, lo=0.0, lo_open=True)
    if tok is None and req is None:
        if "max_tokens" not in d and "max_requests" not in d:
            ck.bad(path, "needs max_tokens and/or max_requests")
        return None
    if period is None:
        return None
    return KeyBudget(period_s=float(period), max_tokens=tok, max_requests=req)
