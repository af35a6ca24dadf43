"""The README's examples work as written: every ```python block runs, every ```bash block's
``greenroute`` command parses (options and values accepted by the CLI), every ``python -m``
module answers ``--help`` and knows the flags used, every ``make`` target exists, and the
power-cap examples print what the README shows."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def bash_commands() -> list[str]:
    """Every command line of the ```bash blocks (continuations joined, comments dropped)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            cmd = line.split(" #")[0].strip()
            if cmd and not cmd.startswith("#"):
                out.append(cmd)
    return out


def _greenroute_args(cmd: str) -> list[str] | None:
    words = shlex.split(cmd)
    if words[0] in ("greenroute", ".venv/bin/greenroute"):
        return words[1:]
    return None


def test_readme_has_the_two_quick_start_commands():
    text = README.read_text()
    quick = text.split("## Quick start", 1)[1].split("##", 1)[0]
    block = re.search(r"```bash\n(.*?)```", quick, flags=re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]


def test_bash_blocks_hold_only_known_kinds_of_command():
    cmds = bash_commands()
    assert len(cmds) >= 15
    for cmd in cmds:
        first = shlex.split(cmd)[0]
        assert first in (
            "make",
            "greenroute",
            ".venv/bin/greenroute",
            "python",
            ".venv/bin/python",
        ), cmd


@pytest.mark.parametrize(
    "cmd", [c for c in bash_commands() if _greenroute_args(c) is not None], ids=lambda c: c[:60]
)
def test_readme_greenroute_command_parses(cmd):
    """The CLI accepts the command's subcommand, options and values (parsed, not run)."""
    import typer

    from greenroute.cli import app

    args = _greenroute_args(cmd)
    group = typer.main.get_command(app)
    assert args[0] in group.commands, f"unknown command {args[0]!r}"
    name, command, rest = args[0], group.commands[args[0]], args[1:]
    while hasattr(command, "commands"):  # a command group: descend into its subcommand
        assert rest and rest[0] in command.commands, f"{name}: unknown subcommand in {rest}"
        name, command, rest = rest[0], command.commands[rest[0]], rest[1:]
    ctx = command.make_context(name, rest)
    assert ctx.params  # parsed into the command's parameters


@pytest.mark.parametrize(
    "cmd", [c for c in bash_commands() if " -m " in c], ids=lambda c: c.split(" -m ")[1][:50]
)
def test_readme_python_module_answers_help_with_its_flags(cmd):
    words = shlex.split(cmd)
    module = words[words.index("-m") + 1]
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                          text=True, timeout=120, cwd=REPO)  # fmt: skip
    assert done.returncode == 0, done.stderr[-500:]
    for flag in (w.split("=")[0] for w in words if w.startswith("--")):
        assert flag in done.stdout, f"{module} --help does not mention {flag}"


def test_readme_make_targets_exist():
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([A-Za-z][\w-]*):", makefile, flags=re.M))
    used = {shlex.split(c)[1] for c in bash_commands() if c.startswith("make ")}
    assert used and used <= targets, used - targets


def test_readme_power_cap_examples_print_what_the_readme_shows():
    from typer.testing import CliRunner

    from greenroute.cli import app

    cmds = [c for c in bash_commands() if "--power-cap" in c]
    assert len(cmds) == 2
    runner = CliRunner()
    ok = runner.invoke(app, _greenroute_args(cmds[0]))
    assert ok.exit_code == 0, ok.output
    assert "power cap 4.5 kW on SG (idle 2.9 kW, peak 7.64 kW): 20 of 64 slots usable" in (
        " ".join(ok.output.split())
    )
    bad = runner.invoke(app, _greenroute_args(cmds[1]))
    assert bad.exit_code == 2
    assert "power cap 2 kW for SG is below its idle IT power 2.9 kW" in " ".join(bad.output.split())


@pytest.mark.realdata
def test_readme_python_examples_run(data_dir):
    blocks = python_blocks()
    assert len(blocks) >= 4
    ns: dict = {}
    for code in blocks:
        code = code.replace('"../shared/data"', repr(str(data_dir)))
        exec(compile(code, str(README), "exec"), ns)
    from greenroute.scenarios import get_scenario

    assert get_scenario("nordics-week").days == 7
    assert ns["res"].metrics["carbon_kg"] > 0
    # the README's first custom scenario is sensibly loaded, as the text says
    m = ns["base"].metrics
    for site in ("GB", "DE-LU"):
        assert 0.15 <= m[f"utilisation_{site}"] <= 0.35  # running-cap occupancy
    assert m["requests_dropped"] == 0.0
    assert m["slo_violation_pct"] < 1.0
    assert m["ttft_mean_s"] < 0.5


@pytest.fixture(autouse=True)
def _cleanup_registries():
    yield
    from greenroute.policies.registry import GEO_POLICIES
    from greenroute.scenarios import SCENARIOS

    SCENARIOS.unregister("nordics-week")
    GEO_POLICIES.unregister("cleanest-allowed")
