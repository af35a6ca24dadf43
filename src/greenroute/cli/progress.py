"""Progress bars on stderr, shown only once the work has taken more than a second."""

from __future__ import annotations

import time

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from greenroute.cli.app import err_console

SHOW_AFTER_S = 1.0  # a bar for work shorter than this would only flicker


def _text(template: str) -> TextColumn:
    return TextColumn(template, markup=False)  # names are printed literally


class EpochBar:
    """Epochs of one run."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.t0 = time.perf_counter()
        self.progress: Progress | None = None
        self.task = None

    def __call__(self, done: int, total: int) -> None:
        if self.progress is None:
            if time.perf_counter() - self.t0 < SHOW_AFTER_S:
                return
            self.progress = Progress(
                _text("{task.description}"),
                BarColumn(),
                _text("{task.completed}/{task.total} epochs"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=err_console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=total)
        self.progress.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


class TwoLevelBar:
    """Runs (outer) and epochs of the current run (inner)."""

    def __init__(self, outer_label: str) -> None:
        self.outer_label = outer_label
        self.t0 = time.perf_counter()
        self.progress: Progress | None = None
        self.outer_done, self.outer_total = 0, 1

    def _ensure(self) -> bool:
        if self.progress is None and time.perf_counter() - self.t0 > SHOW_AFTER_S:
            self.progress = Progress(
                _text("{task.description}"),
                BarColumn(),
                _text("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                console=err_console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task(self.outer_label, total=self.outer_total)
            self.sub = self.progress.add_task("epochs", total=1)
        return self.progress is not None

    def outer(self, done: int, total: int) -> None:
        self.outer_done, self.outer_total = done, total
        if self._ensure():
            self.progress.update(self.task, completed=done, total=total)

    def inner(self, done: int, total: int, label: str) -> None:
        if self._ensure():
            self.progress.update(self.sub, completed=done, total=total, description=label)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def steps_progress(label: str, unit: str) -> Progress:
    """A bar for a known number of steps (RL training)."""
    return Progress(
        _text(label),
        BarColumn(),
        _text("{task.completed}/{task.total} " + unit),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    )
