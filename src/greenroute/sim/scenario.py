"""What a run simulates: regions, origins, cluster, workload, time window and rules."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from numbers import Real
from pathlib import Path

import numpy as np
import pandas as pd

from greenroute.constraints import ConstraintSet
from greenroute.core.errors import ConfigError
from greenroute.data.workload import WorkloadSpec
from greenroute.sim.cluster import Cluster

FIDELITIES = ("request", "fluid")
# server models of request fidelity: "iteration" = iteration-level continuous batching
# (sim/iteration/, issue 8), "slots" = one placement per request (sim/kernel.py)
SERVER_MODELS = ("iteration", "slots")


@dataclass(frozen=True)
class TraceWorkload:
    """Replay a real request trace (``--data-dir`` needed); ``fallback`` is used without it."""

    file: str  # path relative to the data dir, e.g. "llm_traces/azure_llm_2023_code.csv"
    first_n: int | None = None
    window_s: float | None = None  # compress the first_n arrivals into this window
    subsample_every: int = 1  # keep every k-th request (seed 002 VI.A subsamples every 50th)
    origin: int = 0
    model: int = 0
    fallback: WorkloadSpec | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    regions: tuple[str, ...]
    origins: tuple[str, ...]
    cluster: Cluster
    workload: WorkloadSpec | TraceWorkload
    start_utc: pd.Timestamp
    days: float
    models: tuple[str, ...] = ("llama2-70b",)
    epoch_s: float = 900.0  # 15 min (DESIGN, seed 001 section 3.1)
    fidelity: str = "request"
    ttft_slo_s: float = 2.0
    slo_kind: str = "ttft"  # "ttft" or "e2e" (seed 002 measures response time)
    constraints: ConstraintSet = field(default_factory=ConstraintSet)
    facility: str = "default"
    # MARLIN's COP_d per datacenter (seed 001 §3.3), used by the "marlin" facility only;
    # None: derived from each site's climate (greenroute.physics.marlin_cop)
    cop_d: tuple[float, ...] | None = None
    horizon: int = 8  # forecast epochs in each observation
    origin_latlon: tuple[tuple[float, float], ...] | None = None  # None: origins are regions
    network: bool = True  # False: zero network latency (single-site load-balancing scenarios)
    real_data: bool = True  # signals come from --data-dir when given
    seed_offset: int = 0
    # None: "iteration" for LLM servers, "slots" when a server group is a seed-002 throughput
    # server (ServerGroup.tokens_per_s: no per-token cost profile); see resolved_server_model
    server_model: str | None = None
    # iteration servers: split long prompts across iterations under the token budget
    # (Sarathi-Serve, Agrawal et al., OSDI 2024) instead of whole-prompt prefills (vLLM's
    # classic default, splitwise-sim). Request fidelity only: the fluid model profiles whole
    # prompts.
    chunked_prefill: bool = False

    def __post_init__(self) -> None:
        d = self.days
        if isinstance(d, bool) or not (isinstance(d, Real) and math.isfinite(d) and d > 0):
            raise ConfigError(f"scenario {self.name}: days must be a finite number > 0, got {d!r}")
        if self.fidelity not in FIDELITIES:
            raise ConfigError(f"fidelity must be one of {FIDELITIES}, got {self.fidelity!r}")
        if self.slo_kind not in ("ttft", "e2e"):
            raise ConfigError(f"slo_kind must be 'ttft' or 'e2e', got {self.slo_kind!r}")
        if self.cluster.region_keys != self.regions:
            raise ConfigError(
                f"scenario {self.name}: cluster regions {self.cluster.region_keys} differ from "
                f"{self.regions}"
            )
        self._check_server_model(self.server_model)

    def _throughput_servers(self) -> bool:
        return any(g.tokens_per_s is not None for rc in self.cluster.regions for g in rc.groups)

    def _check_server_model(self, value: str | None) -> None:
        if value is None:
            return
        if value not in SERVER_MODELS:
            raise ConfigError(
                f"unknown server model {value!r}; valid choices: {', '.join(SERVER_MODELS)}"
            )
        if value == "iteration" and self._throughput_servers():
            raise ConfigError(
                f"scenario {self.name}: server model 'iteration' needs per-token cost profiles, "
                "but its servers are throughput servers (tokens_per_s); use server_model='slots'"
            )

    @property
    def resolved_server_model(self) -> str:
        """The server model request fidelity runs: the one asked, else "iteration" for LLM
        servers and "slots" for throughput servers (fluid fidelity ignores it)."""
        if self.server_model is not None:
            return self.server_model
        return "slots" if self._throughput_servers() else "iteration"

    @property
    def duration_s(self) -> float:
        return self.days * 86400.0

    @property
    def n_epochs(self) -> int:
        return int(np.ceil(self.duration_s / self.epoch_s - 1e-9))

    @property
    def horizon_s(self) -> float:
        """The simulated span: ``days`` rounded up to whole epochs."""
        return self.n_epochs * self.epoch_s

    @property
    def simulated_days(self) -> float:
        """``days`` rounded up to whole epochs: ``n_epochs x epoch_s / 86400``."""
        return self.horizon_s / 86400.0

    def with_options(
        self,
        *,
        days: float | None = None,
        fidelity: str | None = None,
        constraints: ConstraintSet | None = None,
        facility: str | None = None,
        server_model: str | None = None,
        chunked_prefill: bool | None = None,
    ) -> Scenario:
        """A copy with these options changed. ``days`` must be a finite number > 0; the window
        limits that depend on the data and memory are checked by
        :func:`greenroute.sim.bounds.check_window` before a run."""
        kw = {}
        if days is not None:
            from greenroute.sim.bounds import check_days

            kw["days"] = check_days(days)
        if fidelity is not None:
            if fidelity not in FIDELITIES:
                raise ConfigError(
                    f"unknown fidelity {fidelity!r}; valid choices: {', '.join(FIDELITIES)}"
                )
            kw["fidelity"] = fidelity
        if constraints is not None:
            kw["constraints"] = constraints
        if facility is not None:
            kw["facility"] = facility
        if server_model is not None:
            self._check_server_model(server_model)
            kw["server_model"] = server_model
        if chunked_prefill is not None:
            if not isinstance(chunked_prefill, bool):
                raise ConfigError(f"chunked_prefill must be true or false, got {chunked_prefill!r}")
            kw["chunked_prefill"] = chunked_prefill
        out = replace(self, **kw) if kw else self
        if out.chunked_prefill and out.resolved_server_model != "iteration":
            raise ConfigError(
                f"chunked_prefill needs the iteration server model; scenario {out.name} runs "
                f"{out.resolved_server_model!r}"
            )
        if out.chunked_prefill and out.fidelity != "request":
            raise ConfigError(
                "chunked_prefill runs at request fidelity only (the fluid model profiles whole "
                "prompts); use --fidelity request"
            )
        return out

    def origin_coords(self, data_dir: Path | None = None) -> np.ndarray:
        """[O, 2] lat/lon of the origins (catalog regions, or ``data_dir``'s own regions)."""
        if self.origin_latlon is not None:
            return np.asarray(self.origin_latlon, dtype=float)
        return _latlon(self.origins, data_dir)

    def region_coords(self, data_dir: Path | None = None) -> np.ndarray:
        """[R, 2] lat/lon of the regions (catalog regions, or ``data_dir``'s own regions)."""
        return _latlon(self.regions, data_dir)

    def trace_path(self, data_dir: Path | None) -> Path | None:
        if not isinstance(self.workload, TraceWorkload) or data_dir is None:
            return None
        return Path(data_dir) / self.workload.file


def _latlon(keys: tuple[str, ...], data_dir: Path | None) -> np.ndarray:
    from greenroute.data.regions import get_region

    regions = [get_region(k, data_dir) for k in keys]
    return np.array([[r.lat_deg, r.lon_deg] for r in regions], dtype=float).reshape(-1, 2)
