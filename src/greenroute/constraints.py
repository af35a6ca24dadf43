"""Hard rules every plan must obey: excluded regions (with time windows), data residency
(origin -> allowed regions), per-region IT power caps and an optional per-pair latency bound
for interactive work. The simulator calls :meth:`ConstraintSet.validate` on every plan, so a
buggy or hallucinating policy cannot break them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from greenroute.core.errors import ConfigError, InfeasibleConstraintsError, PlanViolationError

ROW_SUM_TOL = 1e-6  # routing rows must sum to 1 within this
SHARE_TOL = 1e-9  # a share below this counts as "nothing routed"
CAP_TOL_KW = 1e-9  # a power cap this far below idle power still counts as "at idle"


@dataclass(frozen=True)
class Exclusion:
    """Region ``region`` may receive no work during ``[start_s, end_s)`` (seconds since start)."""

    region: str
    start_s: float = -math.inf
    end_s: float = math.inf
    reason: str = ""

    def overlaps(self, t0: float, t1: float) -> bool:
        return self.start_s < t1 and t0 < self.end_s

    def describe(self) -> str:
        if math.isinf(self.start_s) and math.isinf(self.end_s):
            span = "always"
        else:
            lo = "start" if math.isinf(self.start_s) else f"{self.start_s / 3600:g} h"
            hi = "end" if math.isinf(self.end_s) else f"{self.end_s / 3600:g} h"
            span = f"from {lo} to {hi}"
        why = f" ({self.reason})" if self.reason else ""
        return f"{self.region} excluded {span}{why}"


@dataclass(frozen=True)
class ConstraintSet:
    exclusions: tuple[Exclusion, ...] = ()
    residency: Mapping[str, frozenset[str]] = field(default_factory=dict)
    power_caps_kw: Mapping[str, float] = field(default_factory=dict)
    max_one_way_latency_s: float | None = None  # interactive work only

    # ---------------------------------------------------------------- construction helpers
    def with_exclusion(self, excl: Exclusion) -> ConstraintSet:
        return ConstraintSet(
            (*self.exclusions, excl),
            self.residency,
            self.power_caps_kw,
            self.max_one_way_latency_s,
        )

    def with_residency(self, origin: str, allowed: Iterable[str]) -> ConstraintSet:
        res = dict(self.residency)
        res[origin] = frozenset(allowed)
        return ConstraintSet(self.exclusions, res, self.power_caps_kw, self.max_one_way_latency_s)

    def with_power_cap(self, region: str, cap_kw: float) -> ConstraintSet:
        caps = dict(self.power_caps_kw)
        caps[region] = float(cap_kw)
        return ConstraintSet(self.exclusions, self.residency, caps, self.max_one_way_latency_s)

    def is_empty(self) -> bool:
        return (
            not self.exclusions
            and not self.residency
            and not self.power_caps_kw
            and self.max_one_way_latency_s is None
        )

    def check_names(self, origins: Sequence[str], regions: Sequence[str]) -> None:
        """Every region/origin a rule names must exist in the scenario."""
        from greenroute.core.errors import UnknownNameError

        for ex in self.exclusions:
            if ex.region not in regions:
                raise UnknownNameError("region in exclusion", ex.region, regions)
        for origin, allowed in self.residency.items():
            if origin not in origins:
                raise UnknownNameError("origin in residency rule", origin, origins)
            for reg in allowed:
                if reg not in regions:
                    raise UnknownNameError(f"region in residency rule for {origin}", reg, regions)
        for reg, cap in self.power_caps_kw.items():
            if reg not in regions:
                raise UnknownNameError("region in power cap", reg, regions)
            if not (cap >= 0 and math.isfinite(cap)):
                raise ConfigError(f"power cap for {reg} must be a finite number >= 0, got {cap}")

    # ---------------------------------------------------------------- masks
    def allowed_mask(
        self,
        origins: Sequence[str],
        regions: Sequence[str],
        t0: float,
        t1: float,
        latency_s: np.ndarray | None = None,
    ) -> np.ndarray:
        """``[C, O, R]`` bool mask of what may be routed during ``[t0, t1)``."""
        n_o, n_r = len(origins), len(regions)
        mask = np.ones((n_o, n_r), dtype=bool)
        ridx = {r: i for i, r in enumerate(regions)}
        for ex in self.exclusions:
            if ex.overlaps(t0, t1) and ex.region in ridx:
                mask[:, ridx[ex.region]] = False
        for o, origin in enumerate(origins):
            allowed = self.residency.get(origin)
            if allowed is not None:
                keep = np.array([r in allowed for r in regions], dtype=bool)
                mask[o] &= keep
        inter = mask.copy()
        if self.max_one_way_latency_s is not None and latency_s is not None:
            inter &= np.asarray(latency_s) <= self.max_one_way_latency_s + 1e-12
        return np.stack([inter, mask])

    def check_feasible(
        self,
        origins: Sequence[str],
        regions: Sequence[str],
        horizon_s: float,
        epoch_s: float,
        latency_s: np.ndarray | None = None,
        idle_power_kw: Sequence[float] | np.ndarray | None = None,
    ) -> None:
        """Raise :class:`InfeasibleConstraintsError` if some origin has no allowed region in
        some epoch (no plan could then route its work), or if a power cap is below its
        region's idle IT power (``idle_power_kw``, per region), naming the binding rules."""
        from greenroute.core.types import CLASSES

        self.check_names(origins, regions)
        if idle_power_kw is not None:
            self.check_power_caps(regions, idle_power_kw)
        # only epochs where the exclusion set changes need checking
        edges = {0.0}
        for ex in self.exclusions:
            for t in (ex.start_s, ex.end_s):
                if math.isfinite(t) and 0.0 <= t < horizon_s:
                    edges.add(math.floor(t / epoch_s) * epoch_s)
        for t0 in sorted(edges):
            mask = self.allowed_mask(origins, regions, t0, t0 + epoch_s, latency_s)
            for c in range(mask.shape[0]):
                for o, origin in enumerate(origins):
                    if mask[c, o].any():
                        continue
                    raise InfeasibleConstraintsError(
                        self._binding_rule(origin, regions, t0, t0 + epoch_s, c, latency_s, o),
                        f"{CLASSES[c]} work from origin {origin} has no allowed region "
                        f"during [{t0 / 3600:g} h, {(t0 + epoch_s) / 3600:g} h): "
                        + self._explain(origin, regions, t0, t0 + epoch_s, c, latency_s, o),
                    )

    def check_power_caps(
        self, regions: Sequence[str], idle_power_kw: Sequence[float] | np.ndarray
    ) -> None:
        """Raise :class:`InfeasibleConstraintsError` for a cap below its region's idle power.

        Power model (DESIGN, ``physics/power.py``; Barroso, Hölzle & Ranganathan, "The
        Datacenter as a Computer", 3rd ed., 2018, ch. 5): a server draws ``idle + (peak -
        idle) * busy slots / slots``. Every server of a region stays powered on for the whole
        run (the ledger charges the idle power of all of them in every epoch; we do not model
        switching servers off), so a region's IT power can never fall below its idle power.
        A cap at or above idle is met by lowering each server's usable slots until ``idle +
        busy dynamic power <= cap`` (``Simulation.effective_slots``); work that then finds no
        usable slot is dropped with the reason ``power_cap``.
        """
        idle = np.asarray(idle_power_kw, dtype=float)
        if idle.shape != (len(regions),):
            raise ValueError(f"idle_power_kw has shape {idle.shape}, expected ({len(regions)},)")
        for r, reg in enumerate(regions):
            cap = self.power_caps_kw.get(reg)
            if cap is not None and cap < idle[r] - CAP_TOL_KW:
                raise InfeasibleConstraintsError(
                    "power-cap",
                    f"power cap {cap:g} kW for {reg} is below its idle IT power "
                    f"{idle[r]:.6g} kW (all servers stay powered on); raise the cap to at least "
                    f"{idle[r]:.6g} kW or give {reg} fewer servers",
                )

    def _binding_rule(self, origin, regions, t0, t1, c, latency_s, o) -> str:
        rules = []
        if origin in self.residency:
            rules.append("residency")
        if any(ex.overlaps(t0, t1) for ex in self.exclusions):
            rules.append("exclusion")
        if c == 0 and self.max_one_way_latency_s is not None:
            rules.append("latency")
        return "+".join(rules) or "unknown"

    def _explain(self, origin, regions, t0, t1, c, latency_s, o) -> str:
        parts = []
        if origin in self.residency:
            parts.append(f"residency allows only {sorted(self.residency[origin])}")
        active = [ex.describe() for ex in self.exclusions if ex.overlaps(t0, t1)]
        if active:
            parts.append("; ".join(active))
        if c == 0 and self.max_one_way_latency_s is not None and latency_s is not None:
            near = [r for r, lat in zip(regions, latency_s[o], strict=True)
                    if lat <= self.max_one_way_latency_s]  # fmt: skip
            parts.append(
                f"latency bound {self.max_one_way_latency_s * 1e3:g} ms one-way leaves {near}"
            )
        return "; ".join(parts)

    # ---------------------------------------------------------------- validation
    def validate(
        self,
        route: np.ndarray,
        hold: np.ndarray | None,
        power_cap_kw: np.ndarray | None,
        origins: Sequence[str],
        regions: Sequence[str],
        allowed: np.ndarray,
        epoch: int,
        idle_power_kw: np.ndarray | None = None,
    ) -> None:
        """Raise :class:`PlanViolationError` naming the first broken rule and its numbers.

        A plan's own ``power_cap_kw`` (NaN = none) may not be negative nor, when
        ``idle_power_kw`` is given, below the region's idle IT power (see
        :meth:`check_power_caps`)."""
        from greenroute.core.types import CLASSES

        n_c, n_o, n_r = len(CLASSES), len(origins), len(regions)
        route = np.asarray(route)
        if route.shape != (n_c, n_o, n_r):
            raise PlanViolationError(
                "shape",
                f"epoch {epoch}: route has shape {route.shape}, expected "
                f"(classes={n_c}, origins={n_o}, regions={n_r})",
            )
        if not np.all(np.isfinite(route)):
            c, o, r = np.argwhere(~np.isfinite(route))[0]
            raise PlanViolationError(
                "finite",
                f"epoch {epoch}: route[{CLASSES[c]}][{origins[o]} -> {regions[r]}] "
                f"= {route[c, o, r]}",
            )
        if np.any(route < -SHARE_TOL):
            c, o, r = np.argwhere(route < -SHARE_TOL)[0]
            raise PlanViolationError(
                "non-negative",
                f"epoch {epoch}: route[{CLASSES[c]}][{origins[o]} -> {regions[r]}] "
                f"= {route[c, o, r]:.6g} < 0",
            )
        sums = route.sum(axis=2)
        bad = np.abs(sums - 1.0) > ROW_SUM_TOL
        if bad.any():
            c, o = np.argwhere(bad)[0]
            raise PlanViolationError(
                "rows-sum-to-1",
                f"epoch {epoch}: route[{CLASSES[c]}][{origins[o]}] sums to {sums[c, o]:.9g}",
            )
        forbidden = (route > SHARE_TOL) & ~allowed
        if forbidden.any():
            c, o, r = np.argwhere(forbidden)[0]
            rule = self._rule_for(origins[o], regions[r], epoch, c)
            raise PlanViolationError(
                rule,
                f"epoch {epoch}: {route[c, o, r]:.4g} of {CLASSES[c]} work from {origins[o]} "
                f"sent to {regions[r]}, which is not allowed ({self._why(origins[o], regions[r])})",
            )
        if hold is not None:
            hold = np.asarray(hold, dtype=float)
            if hold.shape != (n_o,):
                raise PlanViolationError(
                    "shape", f"epoch {epoch}: hold has shape {hold.shape}, expected ({n_o},)"
                )
            if not np.all(np.isfinite(hold)) or np.any(hold < 0) or np.any(hold > 1):
                o = int(np.argmax(~np.isfinite(hold) | (hold < 0) | (hold > 1)))
                raise PlanViolationError(
                    "hold-in-[0,1]", f"epoch {epoch}: hold[{origins[o]}] = {hold[o]}"
                )
        if power_cap_kw is not None:
            cap = np.asarray(power_cap_kw, dtype=float)
            if cap.shape != (n_r,):
                raise PlanViolationError(
                    "shape", f"epoch {epoch}: power_cap_kw has shape {cap.shape}, expected ({n_r},)"
                )
            for r, reg in enumerate(regions):
                if np.isnan(cap[r]):
                    continue
                if cap[r] < 0:
                    raise PlanViolationError(
                        "power-cap", f"epoch {epoch}: power cap for {reg} is {cap[r]} kW < 0"
                    )
                if idle_power_kw is not None and cap[r] < idle_power_kw[r] - CAP_TOL_KW:
                    raise PlanViolationError(
                        "power-cap",
                        f"epoch {epoch}: power cap {cap[r]:g} kW for {reg} is below its idle IT "
                        f"power {idle_power_kw[r]:.6g} kW",
                    )

    def _rule_for(self, origin: str, region: str, epoch: int, c: int) -> str:
        if origin in self.residency and region not in self.residency[origin]:
            return "residency"
        if any(ex.region == region for ex in self.exclusions):
            return "exclusion"
        if c == 0 and self.max_one_way_latency_s is not None:
            return "latency"
        return "mask"

    def _why(self, origin: str, region: str) -> str:
        if origin in self.residency and region not in self.residency[origin]:
            return f"residency for {origin} allows {sorted(self.residency[origin])}"
        ex = [e.describe() for e in self.exclusions if e.region == region]
        if ex:
            return "; ".join(ex)
        if self.max_one_way_latency_s is not None:
            return f"one-way latency above {self.max_one_way_latency_s * 1e3:g} ms"
        return "masked"

    # ---------------------------------------------------------------- serialisation
    def to_dict(self) -> dict:
        return {
            "exclusions": [
                {
                    "region": e.region,
                    "start_s": None if math.isinf(e.start_s) else e.start_s,
                    "end_s": None if math.isinf(e.end_s) else e.end_s,
                    "reason": e.reason,
                }
                for e in self.exclusions
            ],
            "residency": {k: sorted(v) for k, v in self.residency.items()},
            "power_caps_kw": dict(self.power_caps_kw),
            "max_one_way_latency_s": self.max_one_way_latency_s,
        }

    @staticmethod
    def from_dict(d: Mapping | None) -> ConstraintSet:
        if not d:
            return ConstraintSet()
        excl = tuple(
            Exclusion(
                e["region"],
                -math.inf if e.get("start_s") is None else float(e["start_s"]),
                math.inf if e.get("end_s") is None else float(e["end_s"]),
                e.get("reason", ""),
            )
            for e in d.get("exclusions", [])
        )
        res = {k: frozenset(v) for k, v in d.get("residency", {}).items()}
        caps = {k: float(v) for k, v in d.get("power_caps_kw", {}).items()}
        return ConstraintSet(excl, res, caps, d.get("max_one_way_latency_s"))


def parse_exclusion(text: str) -> Exclusion:
    """``REGION`` or ``REGION@START_H-END_H`` (hours since scenario start)."""
    region, _, window = text.partition("@")
    if not region:
        raise ConfigError(f"bad --exclude {text!r}: expected REGION or REGION@START_H-END_H")
    if not window:
        return Exclusion(region.strip())
    lo, sep, hi = window.partition("-")
    try:
        start = float(lo) * 3600 if lo else -math.inf
        end = float(hi) * 3600 if hi else math.inf
    except ValueError:
        raise ConfigError(
            f"bad --exclude {text!r}: window must be START_H-END_H in hours, e.g. DE-LU@2-6"
        ) from None
    if not sep or end <= start:
        raise ConfigError(f"bad --exclude {text!r}: window must be START_H-END_H with END > START")
    return Exclusion(region.strip(), start, end)


def parse_residency(text: str) -> tuple[str, frozenset[str]]:
    """``ORIGIN=R1+R2+...``."""
    origin, sep, rest = text.partition("=")
    regions = [r.strip() for r in rest.split("+") if r.strip()]
    if not sep or not origin.strip() or not regions:
        raise ConfigError(f"bad --residency {text!r}: expected ORIGIN=REGION1+REGION2")
    return origin.strip(), frozenset(regions)


def parse_power_cap(text: str) -> tuple[str, float]:
    """``REGION=KW``."""
    region, sep, value = text.partition("=")
    try:
        cap = float(value)
    except ValueError:
        cap = float("nan")
    if not sep or not region.strip() or not (cap >= 0 and math.isfinite(cap)):
        raise ConfigError(f"bad --power-cap {text!r}: expected REGION=KW with KW >= 0")
    return region.strip(), cap
