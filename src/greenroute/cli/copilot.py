"""``greenroute copilot``: ask about a run (one-shot ``ask``, or an interactive session).

    greenroute copilot ask "Why did epoch 40 send California's traffic to Chile?" --run DIR
    greenroute copilot ask "What if prices rise 20 %?" --run DIR
    greenroute copilot ask "Minimize energy cost, but do not send workloads to California" \\
        --run DIR --yes
    greenroute copilot --run DIR          # interactive: one question per line, `quit` to end

See :mod:`greenroute.agent.copilot`. A question the copilot cannot answer is one line on
stderr listing what it understands, exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from greenroute.cli.app import app, out_console
from greenroute.cli.errors import print_error, print_note, user_errors
from greenroute.cli.options import DataDirOpt
from greenroute.core.errors import ConfigError, GreenrouteError

copilot_app = typer.Typer(
    help="Ask about a run: why a decision, what if, new goals and rules (seed 000 copilot).",
    invoke_without_command=True,
    no_args_is_help=False,
    rich_markup_mode=None,
)
app.add_typer(copilot_app, name="copilot")

RunOpt = Annotated[
    Path | None, typer.Option("--run", help="a run directory (greenroute run --out DIR)")
]
LlmOpt = Annotated[
    str | None,
    typer.Option(
        "--llm",
        help="parse rules with a language model: smollm2, a local HF directory or .gguf, or "
        "openai:MODEL ($OPENAI_BASE_URL); default: the rule-based parser",
    ),
]
PhraseOpt = Annotated[
    bool, typer.Option("--phrase", help="let the --llm model phrase explanations (numbers checked)")
]


def _copilot(run: Path | None, data_dir, llm, phrase):
    from greenroute.agent.copilot import Copilot

    if run is None:
        raise ConfigError("--run DIR is required (a `greenroute run --out DIR` directory)")
    return Copilot(run, data_dir=data_dir, llm=llm, phrase=phrase)


def _show(answer) -> None:
    out_console.print(answer.text, soft_wrap=True)
    for note in answer.notes:
        print_note(note)


@copilot_app.callback()
def copilot(
    ctx: typer.Context,
    run: RunOpt = None,
    data_dir: DataDirOpt = None,
    llm: LlmOpt = None,
    phrase: PhraseOpt = False,
) -> None:
    """Without a subcommand: an interactive session about --run (one question per line)."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        cp = _copilot(run, data_dir, llm, phrase)
    except GreenrouteError as err:
        print_error(str(err))
        raise typer.Exit(2) from None
    out_console.print(
        f"copilot on {run} ({cp.ctx.policy_name}, {cp.ctx.prep.scenario.name}, seed "
        f"{cp.ctx.seed}); ask a question, `help` or `quit`."
    )
    while True:
        try:
            line = input("copilot> ").strip()
        except (EOFError, KeyboardInterrupt):
            out_console.print("")
            return
        if not line:
            continue
        if line.lower() in ("quit", "exit", "q"):
            return
        if line.lower() in ("help", "?"):
            from greenroute.agent.copilot_text import UNDERSTOOD

            out_console.print(UNDERSTOOD, soft_wrap=True)
            continue
        try:
            _show(cp.ask(line, confirm=_ask_confirm))
        except GreenrouteError as err:
            print_error(str(err))


def _ask_confirm(readback: str) -> bool:
    out_console.print(f"I understood:\n{readback}", soft_wrap=True)
    return typer.confirm("Apply these rules and re-run?", default=False)


@copilot_app.command()
@user_errors
def ask(
    question: Annotated[str, typer.Argument(help="a question or a command, in quotes")],
    run: RunOpt = None,
    data_dir: DataDirOpt = None,
    llm: LlmOpt = None,
    phrase: PhraseOpt = False,
    yes: Annotated[bool, typer.Option("--yes", help="apply new rules without asking")] = False,
) -> None:
    """Answer one question about --run (new rules: read back, applied with --yes)."""
    cp = _copilot(run, data_dir, llm, phrase)
    confirm = True if yes else (_ask_confirm if sys.stdin.isatty() else False)
    _show(cp.ask(question, confirm=confirm))
