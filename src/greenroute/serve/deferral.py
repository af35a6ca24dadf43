"""Deferrable requests held until the plan releases them, within their deadlines.

The simulator's rule (``sim/engine.py``, ``_RequestStepper.apply``), applied to live
requests: a deferrable arrival from origin ``o`` is held with probability ``plan.hold[o]``
unless its deadline is closer than the margin (two epochs plus the expected service time);
at each epoch boundary the held requests whose deadline is now within the margin are released
first, then ``1 - hold[o]`` of the rest, earliest deadline first. Released requests are
routed with the plan's deferrable shares. The client's connection stays open while its
request is held (header mode: ``x-greenroute-class: deferrable`` and, optionally,
``x-greenroute-deadline-s``: seconds from now).
"""

from __future__ import annotations

import asyncio
import itertools
import random
from dataclasses import dataclass, field

import numpy as np


@dataclass(order=True)
class Held:
    deadline_s: float
    seq: int
    origin: int = field(compare=False)
    since_s: float = field(compare=False)
    future: asyncio.Future = field(compare=False, repr=False)


class DeferralQueue:
    def __init__(self, n_origins: int, seed: int = 0) -> None:
        self.n_origins = n_origins
        self.held: list[list[Held]] = [[] for _ in range(n_origins)]
        self._seq = itertools.count()
        self._rng = random.Random(seed)

    @property
    def pending(self) -> int:
        return sum(len(h) for h in self.held)

    def admit(self, origin: int, deadline_s: float, now_s: float, epoch_end_s: float,
              hold_share: float, margin_s: float) -> Held | None:  # fmt: skip
        """Hold the request (returns its entry; await ``entry.future``) or None: go now."""
        if deadline_s - epoch_end_s < margin_s or self._rng.random() >= hold_share:
            return None
        fut = asyncio.get_running_loop().create_future()
        entry = Held(deadline_s, next(self._seq), origin, now_s, fut)
        self.held[origin].append(entry)
        return entry

    def release(self, now_s: float, hold: np.ndarray | None, margin_s: float) -> int:
        """Release at an epoch boundary; returns how many were released."""
        n = 0
        for o in range(self.n_origins):
            mine = [h for h in self.held[o] if not h.future.done()]
            forced = [h for h in mine if h.deadline_s - now_s < margin_s]
            rest = sorted(h for h in mine if h.deadline_s - now_s >= margin_s)
            share = 0.0 if hold is None else float(hold[o])
            k = int(np.round((1.0 - share) * len(rest)))
            out = forced + rest[:k]
            keep = rest[k:]
            for h in out:
                h.future.set_result(None)
            n += len(out)
            self.held[o] = keep
        return n

    def release_all(self) -> None:
        for o in range(self.n_origins):
            for h in self.held[o]:
                if not h.future.done():
                    h.future.set_result(None)
            self.held[o] = []

    def forget(self, entry: Held) -> None:
        """Drop an entry whose client went away."""
        lst = self.held[entry.origin]
        if entry in lst:
            lst.remove(entry)

    def summary(self, t0_s: float, horizon: int, epoch_s: float
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
        """The Observation's pending fields: count [O], earliest deadline [O] (inf when none),
        and [H+1, O] cumulative counts of held requests due before t0 + (h + 1) epochs."""
        count = np.zeros(self.n_origins)
        earliest = np.full(self.n_origins, np.inf)
        due = np.zeros((horizon + 1, self.n_origins))
        for o, lst in enumerate(self.held):
            live = [h for h in lst if not h.future.done()]
            count[o] = len(live)
            for h in live:
                earliest[o] = min(earliest[o], h.deadline_s)
                step = int(np.floor((h.deadline_s - t0_s) / epoch_s))
                if step <= horizon:
                    due[max(step, 0), o] += 1.0
        return count, earliest, np.cumsum(due, axis=0)
