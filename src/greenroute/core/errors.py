"""User-facing errors.

Everything a user can cause (a bad file, an unknown name, a constraint no plan can meet)
raises a subclass of :class:`GreenrouteError`. The CLI prints its message on one line and
exits with a non-zero code, without a traceback. Programming errors stay ordinary exceptions.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from pathlib import Path


class GreenrouteError(Exception):
    """Base class of errors caused by user input; ``str(err)`` is the whole message."""

    exit_code: int = 2


class UnknownNameError(GreenrouteError, KeyError):
    """An unknown scenario, policy, region, ... name; the message lists the valid choices."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.choices = sorted(choices)
        super().__init__(
            f"unknown {kind} {name!r}; valid choices: {', '.join(self.choices) or '(none)'}"
        )

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0])


class DataFormatError(GreenrouteError):
    """A data file that cannot be read as documented: names the file and, if known, the line."""

    def __init__(self, path: str | Path, message: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class PlanViolationError(GreenrouteError):
    """A plan broke a hard constraint; the message names the rule and the numbers."""

    def __init__(self, rule: str, message: str) -> None:
        self.rule = rule
        super().__init__(f"plan rejected by rule '{rule}': {message}")


class InfeasibleConstraintsError(GreenrouteError):
    """No plan can satisfy the active constraints; the message names the binding one."""

    def __init__(self, rule: str, message: str) -> None:
        self.rule = rule
        super().__init__(f"infeasible constraints ({rule}): {message}")


class ConfigError(GreenrouteError):
    """A bad option value or a manifest that cannot be reproduced."""


def exits_on_user_error(main: Callable[..., int]) -> Callable[..., int]:
    """A ``python -m`` command's ``main``: a :class:`GreenrouteError` becomes one ``error: ...``
    line on stderr and its exit code, with no traceback (the typer CLI has ``cli/errors.py``)."""

    @functools.wraps(main)
    def run(*args, **kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except GreenrouteError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.exit_code

    return run
