"""Imports point down DESIGN's package list only (../shared/DESIGN.md, "Packages").

Every ``import``/``from ... import`` of a greenroute module anywhere in a file (module level,
inside functions, under ``TYPE_CHECKING``) is checked: its layer must be the importer's own or
one below it. The checker is run on a synthetic tree too, to show it catches an upward import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "greenroute"

# top to bottom; the package root (greenroute/__init__.py) is the facade, beside api
LAYERS: tuple[str, ...] = (
    "cli",
    "api",
    "serve",
    "agent",
    "bench",
    "envs",
    "policies",
    "scenarios",
    "sim",
    "constraints",
    "physics",
    "data",
    "catalog",
    "core",
)
RANK = {name: i for i, name in enumerate(LAYERS)}


def layer_of(module: str) -> str:
    """``greenroute.sim.engine`` -> ``sim``; ``greenroute`` (the root) -> ``api``."""
    parts = module.split(".")
    assert parts[0] == "greenroute", module
    if len(parts) == 1:
        return "api"
    if parts[1] not in RANK:
        raise AssertionError(f"module {module} is in no layer of DESIGN's list: add it there")
    return parts[1]


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing module's package
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            # ``from greenroute import api`` imports the submodule greenroute.api
            if target == "greenroute":
                out += [(node.lineno, f"greenroute.{a.name}") for a in node.names]
    return [(ln, t) for ln, t in out if t == "greenroute" or t.startswith("greenroute.")]


def upward_imports(root: Path) -> list[str]:
    """Every import in the package at ``root`` that points up the layer list."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        src_layer = layer_of(module)
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, target in _imports(tree, module, path.name == "__init__.py"):
            dst_layer = layer_of(target)  # the package root is the facade, at api's level
            if RANK[dst_layer] < RANK[src_layer]:
                bad.append(f"{path}:{line}: {module} ({src_layer}) imports {target} ({dst_layer})")
    return bad


def test_no_import_points_up_the_layer_list():
    bad = upward_imports(SRC)
    assert not bad, "imports pointing up DESIGN's package list:\n" + "\n".join(bad)


def test_core_imports_nothing_else_of_greenroute():
    for path in (SRC / "core").rglob("*.py"):
        module = _module_name(path, SRC)
        tree = ast.parse(path.read_text())
        others = [t for _, t in _imports(tree, module, path.name == "__init__.py")
                  if not t.startswith("greenroute.core")]  # fmt: skip
        assert not others, f"{path} imports {others}"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "greenroute"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


@pytest.mark.parametrize(
    ("files", "n_bad"),
    [
        # sim importing a concrete policy (the old engine -> policies.local import)
        ({"sim/engine.py": "def f():\n    from greenroute.policies.local import X\n"}, 1),
        # physics importing data's builder is fine (down); data importing physics is not (up)
        ({"physics/llm_perf.py": "from greenroute.data import perf\n"}, 0),
        ({"data/build.py": "from greenroute.physics.llm_perf import fits\n"}, 1),
        # relative import resolved against the package
        ({"core/types.py": "from ..constraints import ConstraintSet\n"}, 1),
        # a TYPE_CHECKING-only import still counts
        (
            {
                "constraints.py": "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from greenroute.sim.types import X\n"
            },
            1,
        ),
        ({"sim/manifest.py": "import greenroute\n"}, 1),
        ({"cli/run.py": "import greenroute\nfrom greenroute import api\n"}, 0),
        ({"api.py": "from greenroute.sim import engine\nfrom greenroute import core\n"}, 0),
    ],
)
def test_checker_catches_upward_imports(tmp_path, files, n_bad):
    root = _tree(tmp_path, {"__init__.py": "", **files})
    assert len(upward_imports(root)) == n_bad


def test_a_module_outside_the_layer_list_is_an_error(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "", "misc.py": "x = 1\n"})
    with pytest.raises(AssertionError, match="in no layer"):
        upward_imports(root)
