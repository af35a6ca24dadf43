"""Run manifests: everything needed to reproduce a run's numbers."""

from __future__ import annotations

import platform

import numpy as np

from greenroute.core.version import __version__

MANIFEST_VERSION = 1


def build_manifest(sim) -> dict:
    sc, prep, cfg = sim.sc, sim.prep, sim.config
    geo_opts = getattr(sim.geo, "options", None)
    return {
        "manifest_version": MANIFEST_VERSION,
        "greenroute_version": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scenario": sc.name,
        "days": sc.days,
        "fidelity": sc.fidelity,
        "facility": sc.facility,
        "start_utc": sc.start_utc.isoformat(),
        "epoch_s": sc.epoch_s,
        "policy": getattr(sim.geo, "name", type(sim.geo).__name__),
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
