"""The contract between the simulator and every policy (DESIGN "The two levels").

A :class:`GeoPolicy` reads an :class:`Observation` once per epoch and returns a :class:`Plan`;
a :class:`LocalPolicy` picks a server inside a region for each request. Policies never touch
the simulator: they only read observations. The simulator validates each plan against the
hard constraints before applying it (``greenroute.constraints``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

CLASSES: tuple[str, ...] = ("interactive", "deferrable")
N_CLASSES = len(CLASSES)


@dataclass(frozen=True)
class ObjectiveWeights:
    """Weights of the scalar objective (seed 001 eq. 11 generalised): carbon kg, water m³,
    cost $, latency (mean TTFT s) plus a penalty on the SLO-violation share. The default is
    the ``balanced`` preset; see :mod:`greenroute.core.objective`."""

    carbon: float = 0.25
    water: float = 0.25
    cost: float = 0.25
    latency: float = 0.25
    slo_penalty: float = 5.0

    def as_dict(self) -> dict[str, float]:
        return {
            "carbon": self.carbon,
            "water": self.water,
            "cost": self.cost,
            "latency": self.latency,
            "slo_penalty": self.slo_penalty,
        }


@dataclass(frozen=True)
class ClusterInfo:
    """Static facts a policy may read at ``reset`` (they do not change during a run)."""

    regions: tuple[str, ...]
    origins: tuple[str, ...]
    models: tuple[str, ...]
    epoch_s: float
    n_epochs: int
    capacity_slots: np.ndarray  # [R] serving slots (continuous-batching seats) per region
    n_servers: np.ndarray  # [R]
    idle_power_kw: np.ndarray  # [R] IT power with every server idle
    peak_power_kw: np.ndarray  # [R] IT power with every slot busy
    latency_s: np.ndarray  # [O, R] one-way network latency
    region_latlon: np.ndarray  # [R, 2]
    origin_latlon: np.ndarray  # [O, 2]
    ttft_slo_s: float
    scenario: str = ""
    deadline_slack_s: tuple[float, float] = (0.0, 0.0)  # deferrable deadline = arrival + U(lo, hi)


@dataclass(frozen=True)
class Observation:
    """What a geo policy sees at the start of epoch ``epoch``.

    Signal arrays have a leading horizon axis: index 0 is the current epoch (measured), 1..H
    come from the run's forecaster. Shapes: ``[H+1, R]`` for signals and facility factors,
    ``[H+1, C, O]`` for demand, ``[C, O, R]`` for routing masks.
    """

    epoch: int
    time_s: float
    time_utc: pd.Timestamp
    epoch_s: float
    regions: tuple[str, ...]
    origins: tuple[str, ...]
    # grid and weather signals, now + forecast
    carbon_intensity_g_per_kwh: np.ndarray
    price_usd_per_kwh: np.ndarray
    temp_c: np.ndarray
    wetbulb_c: np.ndarray
    water_intensity_l_per_kwh: np.ndarray  # off-site (grid) water per kWh
    # facility model factors per kWh of IT energy (physics preset applied to the signals)
    energy_kwh_per_it_kwh: np.ndarray
    carbon_g_per_it_kwh: np.ndarray
    water_l_per_it_kwh: np.ndarray
    cost_usd_per_it_kwh: np.ndarray
    # per-request service model: expected dynamic IT energy and slot occupancy, by class, region
    it_kwh_per_request: np.ndarray  # [C, R]
    slot_s_per_request: np.ndarray  # [C, R]
    prefill_s_per_request: np.ndarray  # [C, R] mean prefill (part of TTFT)
    # state per region
    capacity_slots: np.ndarray  # [R] usable now (after power caps)
    busy_slots: np.ndarray  # [R] slots serving at time_s
    queue_len: np.ndarray  # [R] requests waiting at time_s
    backlog_slot_s: np.ndarray  # [R] slot-seconds of already-assigned work left at time_s
    kv_free_frac: np.ndarray  # [R] free KV-cache memory share
    resident_models: tuple[frozenset[str], ...]
    idle_power_kw: np.ndarray  # [R]
    peak_power_kw: np.ndarray  # [R]
    # demand
    demand_rps: np.ndarray  # [H+1, C, O] forecast arrival rate
    pending_deferrable: np.ndarray  # [O] deferrable requests held so far
    pending_deadline_s: np.ndarray  # [O] earliest deadline among them (inf when none)
    pending_due: np.ndarray | None  # [H+1, O] held requests due before the end of step h
    # network, rules, goals
    latency_s: np.ndarray  # [O, R] one-way
    allowed: np.ndarray  # [C, O, R] bool: the hard constraints' mask for this epoch
    ttft_slo_s: float
    weights: ObjectiveWeights
    constraints: Any = None  # the run's greenroute.constraints.ConstraintSet (core can't import it)
    # reference magnitudes that normalise the objective (local-only's carbon_kg, water_m3,
    # cost_usd, ttft_mean_s) and expected run totals (interactive requests)
    objective_scales: dict = field(default_factory=dict)
    # the simulator's queueing curve per region: mean wait (s) and P(TTFT > SLO) of interactive
    # requests at utilisation grid ``util_grid`` (busy slots / usable slots)
    util_grid: np.ndarray | None = None
    wait_curve_s: np.ndarray | None = None  # [R, K]
    slo_miss_curve: np.ndarray | None = None  # [R, K]
    forecast_error: float = 0.0
    extras: dict = field(default_factory=dict)

    @property
    def horizon(self) -> int:
        return int(self.carbon_intensity_g_per_kwh.shape[0]) - 1

    @property
    def n_regions(self) -> int:
        return len(self.regions)

    @property
    def n_origins(self) -> int:
        return len(self.origins)


@dataclass
class Plan:
    """A geo decision for one epoch.

    ``route[c, o, r]`` is the share of class ``c`` work from origin ``o`` sent to region ``r``
    (rows sum to 1). ``hold[o]`` is the share of pending deferrable work from ``o`` kept back
    for later epochs (deadlines still force release). ``power_cap_kw[r]`` optionally caps IT
    power (NaN = no policy cap; it may only tighten the hard cap).
    """

    route: np.ndarray
    hold: np.ndarray | None = None
    power_cap_kw: np.ndarray | None = None
    rationale: str = ""

    @staticmethod
    def single(route_or: np.ndarray, hold: np.ndarray | None = None, rationale: str = "") -> Plan:
        """Same ``[O, R]`` routing for every class."""
        route = np.repeat(np.asarray(route_or, dtype=float)[None], N_CLASSES, axis=0)
        return Plan(route=route, hold=hold, rationale=rationale)


@runtime_checkable
class GeoPolicy(Protocol):
    """Epoch-level policy. The same object runs in the simulator, a Gymnasium env, the gateway."""

    name: str

    def reset(self, cluster: ClusterInfo, seed: int) -> None: ...

    def plan(self, obs: Observation) -> Plan: ...


@dataclass(frozen=True)
class RequestView:
    """The request a local policy is placing."""

    index: int
    arrival_s: float
    cls: int
    model: int
    prompt_tokens: int
    output_tokens: int
    uniform: float = 0.5  # a seeded U(0,1) draw for this request (for randomised policies)


@dataclass(frozen=True)
class ServerView:
    """State of one region's servers at the time of a pick (arrays over the region's servers)."""

    time_s: float
    active: np.ndarray  # requests running now
    queued: np.ndarray  # requests assigned but not started
    slots: np.ndarray  # usable concurrency per server
    backlog_s: np.ndarray  # assigned slot-seconds left, divided by slots
    tokens_in_flight: np.ndarray  # prompt+output tokens of running+queued requests
    eligible: np.ndarray  # bool: can host the request's model
    resident: np.ndarray  # bool: the request's model is loaded


@runtime_checkable
class LocalPolicy(Protocol):
    """Per-request server choice inside one region.

    Optional attribute ``kernel_code`` (one of ``greenroute.sim.kernel.LP_*``): the policy's
    rule is also compiled into the request kernel, which then places requests without calling
    ``pick`` (it must make the same choices; the built-ins are tested for it)."""

    name: str

    def reset(self, region: str) -> None: ...

    def pick(self, request: RequestView, servers: ServerView) -> int: ...
