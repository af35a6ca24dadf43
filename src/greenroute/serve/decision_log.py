"""The decision log: one JSON object per request (JSONL), in a form the simulator can replay.

Fields: ``time_utc``, ``time_s`` (arrival, unix), ``routed_s`` (when it was routed: later
for a held deferrable request), ``held_s``, ``deadline_s`` (deferrable), ``decision_id``,
``origin``, ``class``, ``model``, ``endpoint``, ``stream``, ``client`` (the API key's *name*),
``region``, ``upstream``, ``attempts`` (each tried region/upstream and its outcome), ``plan``
(epoch, the plan's shares for this origin and class, the policy, a fallback note),
``signals`` (the chosen region's values, provider and age), ``rules`` (allowed regions,
active exclusions, residency, latency bound), ``status``, ``duration_s``,
``prompt_tokens``/``output_tokens`` (estimates or the upstream's usage), ``co2_g``,
``water_l``. Never prompts, completions or keys.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any


class DecisionLog:
    """Appends JSON lines to ``path`` (created with its parent directory), flushed per line."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._fh: IO[str] | None = None
        self._lock = threading.Lock()
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115

    @property
    def enabled(self) -> bool:
        return self._fh is not None

    def write(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            return
        when = datetime.fromtimestamp(record["time_s"], tz=UTC).isoformat()
        rec = {"time_utc": when,
               **record}  # fmt: skip
        line = json.dumps(rec, separators=(",", ":"), default=_jsonable)
        with self._lock:
            self._fh.write(line + "\n")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _jsonable(x: Any) -> Any:
    if hasattr(x, "item"):
        return x.item()
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


def read_decisions(path: Path) -> list[dict]:
    """The records of a decision log (a last line still being written is left out)."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    return [json.loads(line) for line in lines[:-1] if line.strip()]
