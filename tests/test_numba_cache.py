"""Compiled kernels are cached under a directory keyed by the kernels' source
(``core/numba_cache.py``): editing a callee in another module recompiles its callers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from greenroute.core import numba_cache

CALLEE = "from numba import njit\n\n\n@njit(cache=True)\ndef g(x):\n    return x + {inc}\n"
CALLER = (
    "from numba import njit\n\nfrom pkg.b import g\n\n\n"
    "@njit(cache=True)\ndef f(x):\n    return g(x) * 2\n"
)


def _package(root: Path) -> Path:
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(CALLER)
    (pkg / "b.py").write_text(CALLEE.format(inc=1))
    (pkg / "notes.py").write_text("X = 1\n")  # no numba in it
    return pkg


def _run_f(root: Path, cache: Path, keyed: bool) -> int:
    """f(1) in a fresh process; ``keyed``: through configure_numba_cache, else numba alone
    (its default cache next to the source)."""
    setup = (
        "from pathlib import Path\nfrom greenroute.core.numba_cache import configure_numba_cache\n"
        f"configure_numba_cache(Path({str(root / 'pkg')!r}))\n"
        if keyed
        else ""
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (numba_cache.NUMBA_CACHE_ENV, numba_cache._SET_ENV)
    }
    env["GREENROUTE_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", setup + "from pkg.a import f\nprint(f(1))"],
        env=env, cwd=root, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(out.stdout.split()[-1])


def test_editing_a_callee_recompiles_its_caller(tmp_path):
    keyed_root, plain_root = tmp_path / "keyed", tmp_path / "plain"
    for root in (keyed_root, plain_root):
        root.mkdir()
        _package(root)
    cache = tmp_path / "cache"
    before = numba_cache.kernel_source_key(keyed_root / "pkg")
    assert _run_f(keyed_root, cache, keyed=True) == 4  # (1 + 1) * 2
    assert _run_f(plain_root, cache, keyed=False) == 4
    for root in (keyed_root, plain_root):
        (root / "pkg" / "b.py").write_text(CALLEE.format(inc=100))
    assert _run_f(keyed_root, cache, keyed=True) == 202  # (1 + 100) * 2: recompiled
    # the hazard this module removes: numba alone keeps f's stale machine code
    assert _run_f(plain_root, cache, keyed=False) == 4
    after = numba_cache.kernel_source_key(keyed_root / "pkg")
    dirs = {p.name for p in (cache / "numba").iterdir()}
    assert before != after and {before, after} <= dirs  # one directory per source state


def test_the_key_follows_numba_modules_only(tmp_path):
    pkg = _package(tmp_path)
    key = numba_cache.kernel_source_key(pkg)
    assert len(key) == 16 and key == numba_cache.kernel_source_key(pkg)
    (pkg / "notes.py").write_text("X = 2\n")
    assert numba_cache.kernel_source_key(pkg) == key
    (pkg / "b.py").write_text(CALLEE.format(inc=2))
    assert numba_cache.kernel_source_key(pkg) != key


def test_a_users_numba_cache_dir_is_left_alone_and_ours_is_recomputed(tmp_path, monkeypatch):
    import numba

    pkg = _package(tmp_path)
    monkeypatch.setattr(numba.config, "CACHE_DIR", numba.config.CACHE_DIR)  # restored after
    monkeypatch.setenv("GREENROUTE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(numba_cache.NUMBA_CACHE_ENV, str(tmp_path / "mine"))
    assert numba_cache.configure_numba_cache(pkg) is None
    assert os.environ[numba_cache.NUMBA_CACHE_ENV] == str(tmp_path / "mine")
    # one this module set (inherited from a parent process) is recomputed for this source
    monkeypatch.setenv(numba_cache._SET_ENV, str(tmp_path / "mine"))
    got = numba_cache.configure_numba_cache(pkg)
    assert got == tmp_path / "cache" / "numba" / numba_cache.kernel_source_key(pkg)
    assert os.environ[numba_cache.NUMBA_CACHE_ENV] == str(got) == numba.config.CACHE_DIR


def test_old_directories_are_pruned_to_the_newest(tmp_path):
    parent = tmp_path / "numba"
    for i in range(numba_cache.KEEP_DIRS + 3):
        d = parent / f"k{i}"
        d.mkdir(parents=True)
        os.utime(d, (time.time() - 1000 + i, time.time() - 1000 + i))
    numba_cache._prune(parent, keep=numba_cache.KEEP_DIRS)
    kept = sorted(p.name for p in parent.iterdir())
    assert kept == sorted(f"k{i}" for i in range(3, numba_cache.KEEP_DIRS + 3))
