"""User errors and notes on stderr: one line each, printed literally (no markup, no emoji)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import typer
from rich.text import Text

from greenroute.cli.app import err_console
from greenroute.core.errors import GreenrouteError

F = TypeVar("F", bound=Callable)

USER_ERROR_EXIT_CODE = 2  # as click's usage errors: the command line was wrong


def _one_line(message: str) -> str:
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip())


def print_error(message: str) -> None:
    """``error: MESSAGE`` on stderr, on one line, the message taken literally."""
    err_console.print(
        Text.assemble(("error:", "bold red"), " ", _one_line(message)), soft_wrap=True
    )


def print_note(message: str, label: str = "note", style: str = "yellow") -> None:
    """``LABEL: MESSAGE`` on stderr (notes, policy summaries), the message taken literally."""
    err_console.print(Text.assemble((f"{label}:", style), " ", _one_line(message)), soft_wrap=True)


def user_errors(fn: F) -> F:
    """Turn every :class:`GreenrouteError` into one line on stderr and exit code 2 (no
    traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except GreenrouteError as err:
            print_error(str(err))
            raise typer.Exit(USER_ERROR_EXIT_CODE) from None

    return wrapper  # type: ignore[return-value]
