"""The LLM performance knot table (prefill and decode curves per model, GPU and tp).

The embedded table ships in ``greenroute/data/embedded/perf_knots.json`` (regenerate it with
``python -m greenroute.data.build_perf_knots``); a data directory's raw Splitwise/vidur tables
rebuild it instead. :func:`greenroute.physics.llm_perf.perf_model` takes the table as an
argument: physics reads no files.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from greenroute.core.errors import DataFormatError

EMBEDDED_KNOTS_RESOURCE = ("greenroute.data", "embedded/perf_knots.json")


def _check(table: Any, where: str) -> dict[str, Any]:
    if not isinstance(table, dict) or not isinstance(table.get("entries"), list):
        raise DataFormatError(where, "not a perf knot table (no 'entries' list)")
    for i, e in enumerate(table["entries"]):
        missing = [k for k in ("model", "gpu", "tp", "prefill_tokens", "prefill_ms",
                               "decode_batch", "decode_step_ms") if k not in e]  # fmt: skip
        if missing:
            raise DataFormatError(where, f"entry {i} lacks {missing}")
    return table


@cache
def embedded_knots() -> dict[str, Any]:
    """The shipped knot table; a missing or corrupt file is an error naming it."""
    package, name = EMBEDDED_KNOTS_RESOURCE
    where = f"{package.replace('.', '/')}/{name}"
    try:
        text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataFormatError(
            where, "missing; rebuild it with python -m greenroute.data.build_perf_knots"
        ) from None
    try:
        table = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(where, f"not valid JSON ({exc.msg})", exc.lineno) from None
    return _check(table, where)


@cache
def _knots_from_data(data_dir: str) -> dict[str, Any]:
    from greenroute.data.build_perf_knots import build_perf_knots

    return _check(build_perf_knots(data_dir), data_dir)


def knot_table(data_dir: str | Path | None = None) -> dict[str, Any]:
    """The embedded table, or the one rebuilt from ``data_dir``'s raw profiles."""
    return embedded_knots() if data_dir is None else _knots_from_data(str(data_dir))
