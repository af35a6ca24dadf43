"""The typer application and the two consoles every command prints through.

Both consoles interpret neither rich markup nor emoji codes: text a user controls (file
names, policy names, error messages) is printed literally; styles are given as objects.
"""

from __future__ import annotations

import shutil
import sys

import typer
from rich.console import Console

PIPE_WIDTH = 200  # tables written to a pipe or file are not cut to 80 columns
HELP_WIDTH = 120  # --help: up to this many columns (a narrower terminal wraps at its width)


def _help_width() -> int:
    """Width of ``--help``: the terminal's, at most HELP_WIDTH; HELP_WIDTH in a pipe."""
    if sys.stdout.isatty():
        return max(60, min(shutil.get_terminal_size().columns, HELP_WIDTH))
    return HELP_WIDTH


app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Carbon-, water-, cost- and latency-aware scheduling of LLM inference across regions.",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: options and their help side by side, no markup
    context_settings={"max_content_width": HELP_WIDTH, "terminal_width": _help_width()},
)


def _console(**kwargs) -> Console:
    return Console(markup=False, emoji=False, highlight=False, **kwargs)


out_console = _console()
if not out_console.is_terminal:
    out_console = _console(width=PIPE_WIDTH)
err_console = _console(stderr=True)
