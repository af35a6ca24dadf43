"""The ``greenroute`` command (a thin layer over :mod:`greenroute.api`).

One module per command group: :mod:`~greenroute.cli.run` (run, compare, demo),
:mod:`~greenroute.cli.catalog` (scenarios, policies), :mod:`~greenroute.cli.pareto`,
:mod:`~greenroute.cli.rl` (train, record). Shared option types and pre-run checks are in
:mod:`~greenroute.cli.options`; user errors are printed by :mod:`~greenroute.cli.errors`.
"""

from __future__ import annotations

import importlib

from greenroute.cli.app import app

# each module registers its commands on import; this order is the order of `greenroute --help`
COMMAND_MODULES = ("run", "catalog", "pareto", "report", "rl", "agent", "serve", "sweep", "results")
for _module in COMMAND_MODULES:
    importlib.import_module(f"greenroute.cli.{_module}")
importlib.import_module("greenroute.cli.copilot")  # greenroute copilot (after the others)

__all__ = ["app", "main"]


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
