"""Regenerate the embedded signal profiles from the real data.

Usage::

    python -m greenroute.data.build_profiles --data-dir ../shared/data [--out PATH]

Writes :data:`greenroute.data.profiles.EMBEDDED_PROFILES_PATH` by default. The output depends
only on the data files (their sha256 is recorded inside), so rerunning on the same data gives
a byte-identical file.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from greenroute.core.errors import ConfigError, exits_on_user_error
from greenroute.data.paths import resolve_data_dir
from greenroute.data.profiles import EMBEDDED_PROFILES_PATH, build_profiles, save_profiles


@exits_on_user_error
def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m greenroute.data.build_profiles",
        description="Rebuild the embedded per-region signal profiles from shared/data.",
    )
    parser.add_argument(
        "--data-dir", default=None, help="real-data directory (default: $GREENROUTE_DATA_DIR)"
    )
    parser.add_argument("--out", type=Path, default=EMBEDDED_PROFILES_PATH, help="output .npz path")
    args = parser.parse_args(argv)
    data_dir = resolve_data_dir(args.data_dir)
    if data_dir is None:
        raise ConfigError("no data directory: pass --data-dir or set GREENROUTE_DATA_DIR")
    profiles = build_profiles(data_dir)
    save_profiles(profiles, args.out)
    size_kb = args.out.stat().st_size / 1024
    print(f"wrote {args.out} ({size_kb:.1f} KiB, {len(profiles['regions'])} regions)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
