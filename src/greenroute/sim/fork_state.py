"""Saving and restoring what a counterfactual fork's epochs change (``sim/fork.py``).

Each backend exposes ``snapshot(e0, e1)`` / ``restore(snap)`` and delegates here:

* fluid: the per-group queue state, running totals and step outputs (tens of floats), the
  ledger columns ``e0..e1-1`` and the held-work cohorts from the oldest non-empty one on. The
  snapshot is a pure copy, so one snapshot serves every candidate of an epoch;
* request: a copy of the kernel's ``ServerState`` arrays (per server: small) and a journal of
  the per-request outcome entries each placement overwrites, undone in reverse order.
  Measured on the 10-region request bench (``bench/perf.py``, 0.96 M requests in an hour):
  journaling one epoch (239k placements) costs 13 ms, copying the run's outcome arrays 95 ms;
  the copy grows with the run's length, the journal with the forked epochs only.

:class:`EngineState` adds the engine's own state: the request stepper's held pool and held
flags, the forecaster's random generator (a ``noisy`` forecast draws from it at every
observation), the policy's horizon request and the invalid-plan log.
"""

from __future__ import annotations

import copy

import numpy as np

# per-request outcome arrays of ``RequestBackend`` that ``place`` writes
OUTCOME_FIELDS = (
    "region", "server", "dispatch", "t_reg", "start", "finish", "prefill", "cold", "batch",
    "drop",
)  # fmt: skip
# fluid backend state arrays updated in place by ``fluid_kernel.fluid_step``
FLUID_GROUP_STATE = ("backlog_s", "backlog_req", "util", "busy_slots")  # [G]
FLUID_LEDGERS = ("it_dyn_kwh", "served_req", "busy_slot_s", "dispatched")  # [R, E]
# running totals, first held cohort, the step's outputs (read right after the step), the
# minute backlog's epoch history and the minute path's state (iteration servers)
FLUID_SCRATCH = ("acc", "first", "n_int", "outs", "info", "n_gcm", "pre", "e_pf_it", "noise_hist",
                 "path_law", "path_mass", "path_adm", "path_scal")  # fmt: skip


class EngineState:
    """What forked epochs ``e0..e1-1`` may change, saved before and put back after."""

    def __init__(self, sim, e0: int, e1: int, snap: tuple | None = None) -> None:
        self.sim = sim
        st = sim._stepper
        self.backend = st.backend if sim.sc.fidelity == "request" else st.fluid
        # a fluid snapshot is a pure copy, reusable while the original stays at e0: a fork
        # keeps the widest one it took (``Fork._snap``); a request snapshot starts a journal
        if snap is None or snap[0] < e1:
            snap = (e1, self.backend.snapshot(e0, e1))
        self.range_snap = snap
        self.snap = snap[1]
        self.rng_state = sim.forecaster._rng.bit_generator.state  # a fresh dict per read
        self.h_request = sim.h_request
        self.n_invalid = len(sim.invalid_plans)
        self.request = None
        if sim.sc.fidelity == "request":
            lo, hi = int(st.bounds[e0]), int(st.bounds[e1])
            self.request = (st.pool, lo, st.held_flag[lo:hi].copy())

    def restore(self) -> None:
        sim = self.sim
        self.backend.restore(self.snap)
        sim.forecaster._rng.bit_generator.state = self.rng_state
        sim.h_request = self.h_request
        del sim.invalid_plans[self.n_invalid :]
        if self.request is not None:
            pool, lo, held = self.request
            sim._stepper.pool = pool
            sim._stepper.held_flag[lo : lo + held.size] = held


def _fluid_state(fl, e0: int, e1: int) -> list[tuple[np.ndarray, tuple]]:
    """(array, index) of every piece of fluid state epochs ``e0..e1-1`` may change; packed
    arrays (one per kind, rows as views) are saved whole where the backend packs them."""
    # held cohorts before ``first`` are empty for good with one model (fluid_kernel.release);
    # with several models release updates every cohort's lower deadline
    a0 = min(int(fl.first.min()) if fl.n_m == 1 and fl.first.size else 0, e0)
    whole = (Ellipsis,)
    if hasattr(fl, "gstate"):
        parts = [(fl.gstate, whole), (fl.ledgers, (slice(None), slice(None), slice(e0, e1)))]
        parts.append((fl.pools, (Ellipsis, slice(a0, e1))))
    else:
        parts = [(getattr(fl, k), whole) for k in FLUID_GROUP_STATE]
        parts += [(getattr(fl, k), (slice(None), slice(e0, e1))) for k in FLUID_LEDGERS]
        parts += [(fl.pool, (Ellipsis, slice(a0, e1))), (fl.pool_lo, (Ellipsis, slice(a0, e1)))]
    parts += [(getattr(fl, k), whole) for k in FLUID_SCRATCH if hasattr(fl, k)]
    if not hasattr(fl, "outs"):
        parts += [(a, whole) for a in fl.out]
    return parts


def fluid_snapshot(fl, e0: int, e1: int) -> dict:
    """``FluidBackend.snapshot``: state epochs ``e0..e1-1`` may change."""
    parts = _fluid_state(fl, e0, e1)
    return {"parts": [(a, i, a[i].copy()) for a, i in parts], "comp": len(fl.comp["w"])}


def fluid_restore(fl, snap: dict) -> None:
    """``FluidBackend.restore``: put a :func:`fluid_snapshot` back (reusable)."""
    for a, i, v in snap["parts"]:
        a[i] = v
    n = snap["comp"]
    if len(fl.comp["w"]) != n:
        for v in fl.comp.values():
            del v[n:]


def request_snapshot(be, e0: int, e1: int) -> dict:
    """``RequestBackend.snapshot``: the kernel's server state (copied) and a journal of the
    outcome arrays that placements overwrite (started here, undone by restore)."""
    del e0, e1  # server state is per server, not per epoch
    st = be.state
    python_lp = bool((be.lp_codes < 0).any())
    snap = {
        "state": {k: v.copy() for k, v in vars(st).items() if isinstance(v, np.ndarray)},
        "open": be._open,
        "journal": be.journal,
        "local_policies": be.local_policies,
    }
    be.journal = []
    if python_lp:  # a Python pick() may keep memory: the fork works on copies
        be.local_policies = [copy.deepcopy(p) for p in be.local_policies]
    return snap


def request_restore(be, snap: dict) -> None:
    """``RequestBackend.restore``: undo the journal in reverse, copy the server state back."""
    for ids, *old in reversed(be.journal):
        for k, v in zip(OUTCOME_FIELDS, old, strict=True):
            getattr(be, k)[ids] = v
    be.journal = snap["journal"]
    for k, v in snap["state"].items():
        getattr(be.state, k)[...] = v
    be._open = snap["open"]
    be.local_policies = snap["local_policies"]
