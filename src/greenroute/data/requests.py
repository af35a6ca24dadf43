"""Workload classes and the request container shared by the generators and the engines."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

CLASS_INTERACTIVE = 0
CLASS_DEFERRABLE = 1
CLASS_NAMES = ("interactive", "deferrable")
N_CLASSES = 2


# ---------------------------------------------------------------------------------------------
# Request container
# ---------------------------------------------------------------------------------------------

_FIELDS: tuple[tuple[str, type], ...] = (
    ("arrival_s", np.float64),
    ("origin", np.int32),
    ("cls", np.int8),
    ("model", np.int16),
    ("prompt_tokens", np.int32),
    ("output_tokens", np.int32),
    ("deadline_s", np.float64),
)


@dataclass
class Requests:
    """Struct of arrays, one entry per request, sorted by ``arrival_s`` (non-decreasing)."""

    arrival_s: np.ndarray  # float64 seconds since scenario start
    origin: np.ndarray  # int32 index into the scenario's origins
    cls: np.ndarray  # int8, CLASS_INTERACTIVE or CLASS_DEFERRABLE
    model: np.ndarray  # int16 index into the scenario's model list
    prompt_tokens: np.ndarray  # int32 >= 1
    output_tokens: np.ndarray  # int32 >= 1
    deadline_s: np.ndarray  # float64 absolute deadline; +inf for interactive

    def __post_init__(self) -> None:
        n = None
        for name, dtype in _FIELDS:
            arr = np.ascontiguousarray(getattr(self, name), dtype=dtype)
            if arr.ndim != 1:
                raise ValueError(f"Requests.{name} must be 1-D, got shape {arr.shape}")
            if n is None:
                n = arr.shape[0]
            elif arr.shape[0] != n:
                raise ValueError(f"Requests.{name} has {arr.shape[0]} entries, expected {n}")
            object.__setattr__(self, name, arr)
        if n and np.any(self.arrival_s[1:] < self.arrival_s[:-1]):
            raise ValueError("Requests.arrival_s must be sorted (non-decreasing)")
        if n and (self.prompt_tokens.min() < 1 or self.output_tokens.min() < 1):
            raise ValueError("Requests token counts must be >= 1")

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    @staticmethod
    def empty() -> Requests:
        """A container with no requests."""
        return Requests(*(np.empty(0, dtype=dtype) for _, dtype in _FIELDS))

    def _columns(self) -> tuple[np.ndarray, ...]:
        return tuple(getattr(self, name) for name, _ in _FIELDS)

    def take(self, idx: np.ndarray | Sequence[int] | slice) -> Requests:
        """Subset by integer indices, boolean mask or slice; re-sorted (stable) if needed."""
        cols = [c[idx] for c in self._columns()]
        arrival = cols[0]
        if arrival.size > 1 and np.any(arrival[1:] < arrival[:-1]):
            order = np.argsort(arrival, kind="stable")
            cols = [c[order] for c in cols]
        return Requests(*cols)

    @staticmethod
    def concat(parts: Sequence[Requests]) -> Requests:
        """Concatenate and re-sort by arrival (stable: ties keep the order of ``parts``)."""
        parts = list(parts)
        if not parts:
            return Requests.empty()
        cols = [np.concatenate(c) for c in zip(*(p._columns() for p in parts), strict=True)]
        order = np.argsort(cols[0], kind="stable")
        return Requests(*(c[order] for c in cols))

    def to_frame(self) -> pd.DataFrame:
        """One row per request; columns named like the fields."""
        return pd.DataFrame({name: getattr(self, name) for name, _ in _FIELDS})

    def counts_by_epoch(
        self, epoch_s: float, n_epochs: int, n_origins: int, n_models: int
    ) -> np.ndarray:
        """Arrivals per ``[epoch, origin, class, model]`` (int64).

        Epoch ``e`` covers ``[e * epoch_s, (e + 1) * epoch_s)``; requests before 0 or at/after
        ``n_epochs * epoch_s`` are not counted.
        """
        if epoch_s <= 0 or n_epochs < 0:
            raise ValueError("epoch_s must be > 0 and n_epochs >= 0")
        shape = (n_epochs, n_origins, N_CLASSES, n_models)
        if len(self) and (
            self.origin.max() >= n_origins
            or self.model.max() >= n_models
            or self.origin.min() < 0
            or self.model.min() < 0
        ):
            raise ValueError("origin or model index out of range for counts_by_epoch")
        epoch = _epoch_index(self.arrival_s, float(epoch_s))
        keep = (self.arrival_s >= 0) & (epoch < n_epochs)
        flat = ((epoch * n_origins + self.origin) * N_CLASSES + self.cls) * n_models + self.model
        counts = np.bincount(flat[keep], minlength=math.prod(shape))
        return counts.astype(np.int64).reshape(shape)


def _epoch_index(t_s: np.ndarray, epoch_s: float) -> np.ndarray:
    """``floor(t / epoch_s)`` made exact against ``k * epoch_s`` boundaries (int64)."""
    e = np.floor(t_s / epoch_s).astype(np.int64)
    e -= e * epoch_s > t_s
    e += (e + 1) * epoch_s <= t_s
    return e
