"""``scenarios`` and ``policies``: what is registered (with --verbose: policy options)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from greenroute.cli.app import app, out_console
from greenroute.cli.errors import user_errors
from greenroute.cli.options import JsonOpt


@app.command()
@user_errors
def scenarios(json_out: JsonOpt = False) -> None:
    """List the registered scenarios."""
    from greenroute.scenarios import scenario_descriptions

    desc = scenario_descriptions()
    if json_out:
        sys.stdout.write(json.dumps(desc, indent=2) + "\n")
        return
    table = Table(title="scenarios", title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("description")
    for k, v in desc.items():
        table.add_row(Text(k), Text(v))
    out_console.print(table)


@app.command()
@user_errors
def policies(
    json_out: JsonOpt = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show each policy's options (defaults, units).")
    ] = False,
) -> None:
    """List the registered geo and local policies (with --verbose: their options)."""
    from greenroute.policies.registry import GEO_POLICIES, LOCAL_POLICIES

    groups = {"geo": GEO_POLICIES.entries(), "local": LOCAL_POLICIES.entries()}
    if json_out:
        payload = {
            kind: {
                e.name: {
                    "description": e.description,
                    "options": {
                        o.name: {"type": o.type_name, "default": o.default, "unit": o.unit,
                                 "help": o.help}
                        for o in e.options
                    },
                }
                if verbose
                else e.description
                for e in entries
            }
            for kind, entries in groups.items()
        }  # fmt: skip
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    for kind, entries in groups.items():
        table = Table(title=f"{kind} policies", title_justify="left")
        table.add_column("name", style="bold")
        table.add_column("description")
        if verbose:
            table.add_column("options (type = default unit)")
        for e in entries:
            row = [Text(e.name), Text(e.description)]
            if verbose:
                row.append(Text("\n".join(o.describe() for o in e.options) or "(none)"))
            table.add_row(*row)
        out_console.print(table)
