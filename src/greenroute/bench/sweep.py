"""Run a sweep's cells on Ray (local or a cluster) or a process pool, into the result store.

Idempotent and resumable: each cell is keyed by the hash of its configuration
(:attr:`greenroute.bench.sweep_spec.Cell.key`) and stored as ``runs/<key>.parquet``
(:mod:`greenroute.bench.store`); a cell whose successful result is already there is skipped,
so a killed sweep, run again, does only the cells it had not finished. A cell that raises is
recorded with ``status='failed'`` and its error, and the other cells go on; running the sweep
again retries it (its row is replaced, never duplicated).

Workers return each cell's record (a row and the per-epoch frame) to the driver, which writes
it atomically as it arrives: the workers need greenroute and the data directory, not a file
system shared with the driver (so ``--address`` works with any Ray cluster whose nodes have
greenroute installed and the data at the spec's ``data_dir``). At most one task per CPU is
in flight, so the progress bar's ``running`` is exact and a killed driver loses at most that
many cells' work.

Training cells (a spec's ``train`` key, :mod:`greenroute.bench.sweep_train`) run in the same
pool: each is keyed by its manifest's hash, trains into ``MODELS/<key>/`` (default: the store's
``models/``), and is skipped when its saved model's ``cell.json`` matches its manifest. A grid
cell whose policy is ``rl:train/<key>`` is submitted only once that training cell has
finished; if the training failed, the cell is recorded as failed without running. Training
cells write their models themselves, so with ``--address`` the models directory must be on a
file system the workers share with the driver (with a local Ray or ``--local`` it is).

Backends: ``ray`` (default; a local Ray with ``workers`` CPUs, or the cluster at ``address``),
``local`` (a :class:`concurrent.futures.ProcessPoolExecutor`; with one worker the cells run in
this process).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from greenroute.bench.store import ResultStore, failure_record, run_record
from greenroute.bench.sweep_spec import Cell, SweepSpec
from greenroute.bench.sweep_train import TrainCell, execute_train, resolve_model, train_row, trained
from greenroute.core.errors import ConfigError

BACKENDS = ("ray", "local")
POLL_S = 0.5  # how often the driver wakes to refresh progress while cells run
RAY_OBJECT_STORE_BYTES = 256 * 1024**2  # a cell's record is ~100 kB; Ray's minimum is 75 MiB


@dataclass
class SweepProgress:
    """Counts while a sweep runs (``skipped``: already in the store before it started)."""

    total: int
    skipped: int
    done: int = 0
    failed: int = 0
    running: int = 0

    @property
    def to_run(self) -> int:
        return self.total - self.skipped


@dataclass
class SweepSummary:
    name: str
    store: Path
    total: int
    skipped: int
    done: int
    failed: int
    wall_s: float
    backend: str
    workers: int
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # key, label, error

    @property
    def complete(self) -> bool:
        return self.skipped + self.done == self.total


def _identity(cell: Cell) -> dict[str, Any]:
    import json

    w = cell.weights
    return {
        "scenario": cell.scenario,
        "policy": cell.policy,
        "label": cell.label or cell.policy,
        "policy_options": json.dumps(cell.policy_options, sort_keys=True),
        "local_policy": cell.local_policy,
        "seed": cell.seed,
        "days_requested": cell.days,
        "fidelity": cell.fidelity,
        "forecast": cell.forecast,
        "data_dir": cell.data_dir,
        **{f"weight_{k}": v for k, v in w.items()},
    }


def execute_cell(
    cell_dict: dict[str, Any], sweep: str | None, models_root: str | None = None
) -> tuple[dict, pd.DataFrame | None]:
    """Run one cell (in a worker) and return its store record; never raises for the cell's
    own errors, which become a ``failed`` record. A training cell trains into
    ``models_root``; a grid cell's ``rl:train/<key>`` policy is that cell's model there."""
    from greenroute.bench.runner import prepare_checked, run_prepared
    from greenroute.core.types import ObjectiveWeights

    if cell_dict.get("cell_kind") == "train":
        return execute_train(cell_dict, sweep, str(models_root))
    cell = Cell.from_dict(cell_dict)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        policy = resolve_model(cell.policy, models_root)
        prep, notes = prepare_checked(
            cell.scenario,
            seed=cell.seed,
            data_dir=cell.data_dir,
            days=cell.days,
            fidelity=cell.fidelity,
        )
        res = run_prepared(
            prep,
            policy,
            local_policy=cell.local_policy,
            seed=cell.seed,
            weights=ObjectiveWeights(**cell.weights),
            forecast=cell.forecast,
            policy_options=cell.policy_options or None,
        )
        res.notes[:0] = notes
        row, epochs = run_record(
            res, run_id=cell.key, source="sweep", sweep=sweep, label=cell.label
        )
        row["wall_s"] = time.perf_counter() - t0  # the whole cell, preparing the scenario too
        row["cpu_s"] = time.process_time() - c0  # CPU time of the cell (the machine may be shared)
        if policy != cell.policy:  # a trained model: keep the key's name, say where it is
            row["policy"] = cell.policy
            row["model_path"] = policy[len("rl:") :]
        return row, epochs
    except Exception as err:
        return failure_record(_identity(cell), cell.key, "sweep", err, sweep), None


# ------------------------------------------------------------------ executors
class _Inline:
    """Cells run in this process, one at a time (``local`` with one worker)."""

    slots = 1

    def __init__(self) -> None:
        self._results: dict[int, Any] = {}
        self._n = 0

    def submit(self, cell: Cell | TrainCell, sweep: str | None, models_root: str):
        self._n += 1
        self._results[self._n] = execute_cell(cell.to_dict(), sweep, models_root)
        return self._n

    def wait(self, handles: list, timeout: float) -> list:
        return list(handles)

    def result(self, handle):
        return self._results.pop(handle)

    def close(self) -> None:
        pass


class _Pool:
    def __init__(self, workers: int) -> None:
        self.slots = workers
        self.pool = self._new_pool()

    def _new_pool(self):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn: the driver runs a progress thread, and forking a threaded process is unsafe
        ctx = multiprocessing.get_context("spawn")
        return ProcessPoolExecutor(max_workers=self.slots, mp_context=ctx)

    def submit(self, cell: Cell | TrainCell, sweep: str | None, models_root: str):
        from concurrent.futures.process import BrokenProcessPool

        try:
            return self.pool.submit(execute_cell, cell.to_dict(), sweep, models_root)
        except BrokenProcessPool:
            # a worker died (e.g. killed for memory): its cells were recorded as failed; the
            # rest go to a new pool
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = self._new_pool()
            return self.pool.submit(execute_cell, cell.to_dict(), sweep, models_root)

    def wait(self, handles: list, timeout: float) -> list:
        from concurrent.futures import FIRST_COMPLETED, wait

        done, _ = wait(handles, timeout=timeout, return_when=FIRST_COMPLETED)
        return list(done)

    def result(self, handle):
        return handle.result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class _Ray:
    def __init__(self, address: str | None, workers: int | None) -> None:
        import ray

        self.ray = ray
        self.owned = not ray.is_initialized()
        if self.owned:
            if address:
                ray.init(address=address, logging_level="ERROR", log_to_driver=False)
            else:
                ray.init(
                    num_cpus=workers or os.cpu_count() or 1,
                    include_dashboard=False,
                    logging_level="ERROR",
                    log_to_driver=False,
                    object_store_memory=RAY_OBJECT_STORE_BYTES,
                )
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.slots = max(1, min(cpus, workers) if workers else cpus)
        self.task = ray.remote(num_cpus=1, max_retries=0)(execute_cell)

    def submit(self, cell: Cell | TrainCell, sweep: str | None, models_root: str):
        return self.task.remote(cell.to_dict(), sweep, models_root)

    def wait(self, handles: list, timeout: float) -> list:
        done, _ = self.ray.wait(handles, num_returns=1, timeout=timeout)
        return done

    def result(self, handle):
        return self.ray.get(handle)

    def close(self) -> None:
        if self.owned:
            self.ray.shutdown()


def _executor(backend: str, address: str | None, workers: int | None):
    if backend not in BACKENDS:
        raise ConfigError(
            f"unknown sweep backend {backend!r}; valid choices: {', '.join(BACKENDS)}"
        )
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    if backend == "local":
        if address:
            raise ConfigError("--address names a Ray cluster; it does not combine with --local")
        n = workers or os.cpu_count() or 1
        return _Inline() if n == 1 else _Pool(n)
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError(
            "sweeps on Ray need the 'scale' extra (pip install 'greenroute[scale]'); "
            "or run them in a process pool with --local"
        ) from None
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local, single-user Ray
    return _Ray(address, workers)


def _identity_of(cell: Cell | TrainCell) -> dict[str, Any]:
    if isinstance(cell, TrainCell):
        from greenroute.bench.sweep_train import identity

        return identity(cell)
    return _identity(cell)


def _already_done(cells: list, st: ResultStore, models_root: Path, sweep: str) -> set[str]:
    """Keys of the cells with a result: grid cells with an ``ok`` row in the store, training
    cells whose model is saved with their manifest (their row is rewritten from ``cell.json``
    when the driver was killed before writing it)."""
    grid = [c for c in cells if not isinstance(c, TrainCell)]
    done = st.completed(c.key for c in grid)
    train = [c for c in cells if isinstance(c, TrainCell)]
    rows_ok = st.completed(c.key for c in train)
    for c in train:
        result = trained(c, models_root)
        if result is None:
            continue
        done.add(c.key)
        if c.key not in rows_ok:
            st.write(train_row(c, result, sweep), None)
    return done


def run_sweep(
    spec: SweepSpec,
    *,
    store: str | Path | ResultStore | None = None,
    backend: str = "ray",
    address: str | None = None,
    workers: int | None = None,
    limit: int | None = None,
    on_progress: Callable[[SweepProgress], None] | None = None,
    models_dir: str | Path | None = None,
) -> SweepSummary:
    """Run the cells of ``spec`` that are not yet in ``store`` (default store: see
    :func:`greenroute.bench.store.default_store_dir`): its training cells first, then the grid
    (a grid cell that evaluates a trained model waits for its training cell).

    ``limit``: run at most this many of the missing cells and stop (a partial sweep; running
    again continues). ``on_progress`` is called with the counts whenever they change and
    every :data:`POLL_S` seconds. ``models_dir``: where training cells save their models
    (default: ``models/`` in the store)."""
    t0 = time.perf_counter()
    st = store if isinstance(store, ResultStore) else ResultStore(store)
    models_root = Path(models_dir if models_dir is not None else st.root / "models").resolve()
    cells: list[Cell | TrainCell] = [*spec.train, *spec.cells]
    st.save_sweep(spec.name, [c.key for c in cells], {"source": spec.source, "cells": len(cells)})
    done_keys = _already_done(cells, st, models_root, spec.name)
    todo = [c for c in cells if c.key not in done_keys]
    if limit is not None:
        todo = todo[: max(0, limit)]
    prog = SweepProgress(total=len(cells), skipped=len(done_keys))
    if limit is not None:
        prog.total = prog.skipped + len(todo)
    train_keys = {c.key for c in spec.train}
    ok_keys = set(done_keys)  # training cells whose models exist (grid cells may use them)
    failed_keys: set[str] = set()
    failures: list[tuple[str, str, str]] = []
    ex = None
    n_workers = 0

    def record(cell, row, epochs) -> None:
        st.write(row, epochs)
        if row["status"] == "ok":
            prog.done += 1
            ok_keys.add(cell.key)
        else:
            prog.failed += 1
            failed_keys.add(cell.key)
            failures.append((cell.key, cell.label, str(row["error"])))

    def waiting_on(cell) -> str | None:
        dep = getattr(cell, "depends_on", None)
        return dep if dep in train_keys and dep not in ok_keys else None

    try:
        if todo:
            ex = _executor(backend, address, workers)
            n_workers = ex.slots
        inflight: dict[Any, Cell | TrainCell] = {}
        while todo or inflight:
            for cell in list(todo):
                if len(inflight) >= ex.slots:
                    break
                dep = waiting_on(cell)
                if dep in failed_keys:  # its training failed: recorded, not run
                    todo.remove(cell)
                    err = ConfigError(f"its training cell {dep} failed")
                    record(cell, failure_record(_identity_of(cell), cell.key, "sweep", err,
                                                spec.name), None)  # fmt: skip
                elif dep is None:
                    todo.remove(cell)
                    inflight[ex.submit(cell, spec.name, str(models_root))] = cell
            prog.running = len(inflight)
            if on_progress:
                on_progress(prog)
            if not inflight:
                if todo and all(waiting_on(c) not in failed_keys for c in todo):
                    # a dependency outside this run (limit): those cells wait for a later run
                    break
                continue
            for handle in ex.wait(list(inflight), POLL_S):
                cell = inflight.pop(handle)
                try:
                    row, epochs = ex.result(handle)
                except Exception as err:
                    row, epochs = (
                        failure_record(_identity_of(cell), cell.key, "sweep", err, spec.name),
                        None,
                    )
                record(cell, row, epochs)
        prog.running = 0
        if on_progress:
            on_progress(prog)
    finally:
        if ex is not None:
            ex.close()
    return SweepSummary(
        name=spec.name,
        store=st.root,
        total=len(cells),
        skipped=prog.skipped,
        done=prog.done,
        failed=prog.failed,
        wall_s=time.perf_counter() - t0,
        backend=backend,
        workers=n_workers,
        failures=failures,
    )
