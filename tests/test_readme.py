"""The README's Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_the_two_quick_start_commands():
    text = README.read_text()
    quick = text.split("## Quick start", 1)[1].split("##", 1)[0]
    block = re.search(r"```bash\n(.*?)```", quick, flags=re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]


@pytest.mark.realdata
def test_readme_python_examples_run(data_dir):
    blocks = python_blocks()
    assert len(blocks) >= 3
    ns: dict = {}
    for code in blocks:
        code = code.replace('"../shared/data"', repr(str(data_dir)))
        exec(compile(code, str(README), "exec"), ns)
    from greenroute.scenarios import get_scenario

    assert get_scenario("nordics-week").days == 7
    assert ns["res"].metrics["carbon_kg"] > 0


@pytest.fixture(autouse=True)
def _cleanup_registries():
    yield
    from greenroute.policies.registry import GEO_POLICIES
    from greenroute.scenarios import SCENARIOS

    SCENARIOS.unregister("nordics-week")
    GEO_POLICIES.unregister("cleanest-allowed")
