"""Run manifests: everything needed to reproduce a run's numbers.

Writing (:func:`build_manifest`): ``days`` is the simulated span (whole epochs, as in the
result's metrics), ``days_requested`` what was asked; ``forecast`` names the forecaster
(``perfect`` unless chosen). Reading (:func:`read_manifest`) checks every field's type and the
``manifest_version`` before anything runs, and :func:`check_input_files` compares the data
files' checksums with the recorded ones, naming each changed or missing file.
"""

from __future__ import annotations

import json
import math
import platform
from collections.abc import Callable
from numbers import Real
from pathlib import Path

import numpy as np

from greenroute.core.errors import DataFormatError
from greenroute.core.version import __version__

MANIFEST_VERSION = 2
# 1: ``days`` was the requested length; 2: ``days`` is the simulated span (whole epochs) and
# ``days_requested`` is new. Both reproduce the same epochs.
SUPPORTED_MANIFEST_VERSIONS = (1, 2)
REQUIRED_FIELDS = ("manifest_version", "scenario", "policy", "seed", "days")


def build_manifest(sim) -> dict:
    sc, prep, cfg = sim.sc, sim.prep, sim.config
    geo_opts = getattr(sim.geo, "options", None)
    return {
        "manifest_version": MANIFEST_VERSION,
        "greenroute_version": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scenario": sc.name,
        "days": sc.simulated_days,
        "days_requested": float(sc.days),
        "fidelity": sc.fidelity,
        "server_model": sc.resolved_server_model,
        "chunked_prefill": sc.chunked_prefill,
        "facility": sc.facility,
        "start_utc": sc.start_utc.isoformat(),
        "epoch_s": sc.epoch_s,
        "policy": getattr(sim.geo, "name", type(sim.geo).__name__),
        # the name that builds the policy again when it differs from its display name
        # (``rl:PATH``: the model's absolute path; the name shows only the file's)
        "policy_spec": getattr(sim.geo, "spec", None),
        "policy_options": dict(geo_opts) if isinstance(geo_opts, dict) else {},
        "local_policy": sim.local[0].name,
        "seed": cfg.seed,
        "forecast": cfg.forecast,
        "forecast_error": cfg.forecast_error,
        "weights": cfg.weights.as_dict(),
        "on_invalid": cfg.on_invalid,
        "constraints": sc.constraints.to_dict(),
        "data_dir": None if prep.data_dir is None else str(prep.data_dir),
        "signals_source": prep.signals.source,
        "workload_source": prep.workload_source,
        "input_files_sha256": dict(sorted(prep.input_files.items())),
    }


# ------------------------------------------------------------------ reading
def _is_number(v: object) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(float(v))


def _positive(v: object) -> bool:
    return _is_number(v) and float(v) > 0


def _non_negative(v: object) -> bool:
    return _is_number(v) and float(v) >= 0


def _seed(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _text(v: object) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: v is None or check(v)


def _weights(v: object) -> bool:
    from greenroute.core.objective import WEIGHT_FIELDS

    return isinstance(v, dict) and all(
        k in WEIGHT_FIELDS and _non_negative(x) for k, x in v.items()
    )


def _checksums(v: object) -> bool:
    return isinstance(v, dict) and all(_text(k) and _text(x) for k, x in v.items())


def _field_rules() -> dict[str, tuple[Callable[[object], bool], str]]:
    from greenroute.sim.forecast import FORECASTERS
    from greenroute.sim.scenario import FIDELITIES, SERVER_MODELS

    return {
        "scenario": (_text, "a scenario name"),
        "policy": (_text, "a policy name"),
        "policy_spec": (_optional(_text), "a policy name or null"),
        "local_policy": (_text, "a local policy name"),
        "seed": (_seed, "an integer >= 0"),
        "days": (_positive, "a finite number > 0"),
        "days_requested": (_positive, "a finite number > 0"),
        "fidelity": (_optional(lambda v: v in FIDELITIES), f"one of {', '.join(FIDELITIES)}"),
        "facility": (_optional(_text), "a facility name or null"),
        "server_model": (
            _optional(lambda v: v in SERVER_MODELS),
            f"one of {', '.join(SERVER_MODELS)} or null",
        ),
        "chunked_prefill": (lambda v: isinstance(v, bool), "true or false"),
        "forecast": (lambda v: v in FORECASTERS, f"one of {', '.join(FORECASTERS)}"),
        "forecast_error": (_non_negative, "a finite number >= 0"),
        "weights": (
            _optional(_weights),
            "a mapping of carbon/water/cost/latency/slo_penalty to finite numbers >= 0",
        ),
        "policy_options": (_optional(lambda v: isinstance(v, dict)), "a mapping or null"),
        "on_invalid": (lambda v: v in ("raise", "fallback"), "one of raise, fallback"),
        "constraints": (_optional(lambda v: isinstance(v, dict)), "a mapping or null"),
        "data_dir": (_optional(_text), "a directory path or null"),
        "epoch_s": (_positive, "a finite number > 0"),
        "start_utc": (_text, "an ISO timestamp"),
        "input_files_sha256": (_checksums, "a mapping of file paths to sha256 hex digests"),
    }


def read_manifest(path: str | Path) -> dict:
    """The manifest at ``path``, every field checked; a bad one is a one-line
    :class:`DataFormatError` naming the file and the field."""
    path = Path(path)
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataFormatError(path, "manifest not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFormatError(path, f"cannot read manifest ({exc})") from None
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, f"not valid JSON ({exc.msg})", exc.lineno) from None
    if not isinstance(m, dict):
        raise DataFormatError(path, "a manifest is a JSON object")
    missing = [k for k in REQUIRED_FIELDS if k not in m]
    if missing:
        raise DataFormatError(path, f"manifest lacks {missing}")
    version = m["manifest_version"]
    if isinstance(version, bool) or version not in SUPPORTED_MANIFEST_VERSIONS:
        raise DataFormatError(
            path,
            f"unknown manifest_version {version!r}; valid choices: "
            f"{', '.join(map(str, SUPPORTED_MANIFEST_VERSIONS))}",
        )
    for key, (ok, want) in _field_rules().items():
        if key in m and not ok(m[key]):
            raise DataFormatError(path, f"field {key!r} must be {want}, got {m[key]!r}")
    return m


def check_input_files(m: dict, data_dir: str | Path | None, path: str | Path) -> None:
    """Compare the recorded checksums with the files under ``data_dir`` before a re-run; a
    changed or missing file is a :class:`DataFormatError` naming it."""
    from greenroute.data.cache import file_checksum

    want = m.get("input_files_sha256") or {}
    if not want:
        return
    if data_dir is None:
        raise DataFormatError(
            path,
            f"the manifest's run read {len(want)} data file(s) (e.g. {sorted(want)[0]}) but "
            "names no data_dir; pass --data-dir",
        )
    problems = []
    for rel in sorted(want):
        file = Path(data_dir) / rel
        if not file.is_file():
            problems.append(f"{file} (missing)")
        elif file_checksum(file) != want[rel]:
            got = file_checksum(file)
            problems.append(f"{file} (changed: sha256 {got[:12]}..., manifest {want[rel][:12]}...)")
    if problems:
        raise DataFormatError(
            path, f"input data differ from the manifest's run: {'; '.join(problems)}"
        )
