"""The scalar objective every optimising policy and every comparison uses.

J = w_carbon * carbon_kg / s_carbon + w_water * water_m3 / s_water + w_cost * cost_usd / s_cost
    + w_latency * ttft_mean_s / s_latency + slo_penalty * slo_violation_pct / 100

The scales ``s_*`` are the scenario's own reference values — the metrics of ``local-only``
in the fluid model, same scenario, seed and data — so weights are comparable across units and
J(local-only) is about sum(w). Seed 001 eq. 11 weighs TTFT, carbon, water and cost the same
way (weights summing to 1); its five MARLIN variants are the presets below.

Strictness: a term with a non-zero weight needs its reference scale; a missing, non-finite or
non-positive scale raises :class:`ConfigError` (no silent fallback to 1.0, which would add kg,
m³, $ and s raw). A run in which no interactive request completed has no TTFT (NaN): its
latency term is then :data:`NO_TTFT_PENALTY` x ``slo_penalty`` — the SLO term's value when 100 %
of requests violate their SLO — instead of zero cost (a run with no interactive requests at
all, ``interactive_requests == 0``, has nothing to wait for: latency term 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.core.types import ObjectiveWeights

DEFAULT_SLO_PENALTY = 5.0  # 1 % of requests over their SLO costs 0.05, i.e. 5 % of J(local-only)
# latency term of a run whose TTFT is undefined (nothing completed), in units of slo_penalty:
# counted as if 100 % of requests missed their SLO (slo_violation_pct = 100 -> 100 / 100 = 1)
NO_TTFT_PENALTY = 1.0

PRESETS: dict[str, ObjectiveWeights] = {
    "min-carbon": ObjectiveWeights(1.0, 0.0, 0.0, 0.0, DEFAULT_SLO_PENALTY),
    "min-water": ObjectiveWeights(0.0, 1.0, 0.0, 0.0, DEFAULT_SLO_PENALTY),
    "min-cost": ObjectiveWeights(0.0, 0.0, 1.0, 0.0, DEFAULT_SLO_PENALTY),
    "min-latency": ObjectiveWeights(0.0, 0.0, 0.0, 1.0, DEFAULT_SLO_PENALTY),
    "balanced": ObjectiveWeights(0.25, 0.25, 0.25, 0.25, DEFAULT_SLO_PENALTY),
}
DEFAULT_PRESET = "balanced"
SCALE_KEYS = ("carbon_kg", "water_m3", "cost_usd", "ttft_mean_s")
WEIGHT_FIELDS = ("carbon", "water", "cost", "latency", "slo_penalty")


def default_weights() -> ObjectiveWeights:
    return PRESETS[DEFAULT_PRESET]


def parse_weights(text: str | None) -> ObjectiveWeights | None:
    """A preset name (``balanced``) or ``carbon=0.4,water=0.2,cost=0.2,latency=0.2``.

    Unnamed weights are 0; ``slo_penalty`` defaults to :data:`DEFAULT_SLO_PENALTY`.
    """
    if text is None or not text.strip():
        return None
    text = text.strip()
    if "=" not in text:
        try:
            return PRESETS[text]
        except KeyError:
            raise UnknownNameError("weights preset", text, PRESETS) from None
    values: dict[str, float] = {}
    for part in text.split(","):
        key, sep, val = part.partition("=")
        key = key.strip()
        if not sep or key not in WEIGHT_FIELDS:
            raise ConfigError(
                f"bad --weights {text!r}: expected NAME=VALUE pairs with NAME in "
                f"{list(WEIGHT_FIELDS)}, or a preset {sorted(PRESETS)}"
            )
        try:
            values[key] = float(val)
        except ValueError:
            raise ConfigError(f"bad --weights {text!r}: {val.strip()!r} is not a number") from None
        if not (values[key] >= 0 and math.isfinite(values[key])):
            raise ConfigError(f"bad --weights {text!r}: weights must be finite and >= 0")
    base = {"carbon": 0.0, "water": 0.0, "cost": 0.0, "latency": 0.0}
    base["slo_penalty"] = DEFAULT_SLO_PENALTY
    base.update(values)
    if base["carbon"] + base["water"] + base["cost"] + base["latency"] <= 0:
        raise ConfigError(f"bad --weights {text!r}: at least one of carbon/water/cost/latency > 0")
    return ObjectiveWeights(**base)


@dataclass(frozen=True)
class Objective:
    weights: ObjectiveWeights = field(default_factory=default_weights)
    scales: dict[str, float] = field(default_factory=dict)

    def scale(self, key: str) -> float:
        """The reference scale of ``key``; raises :class:`ConfigError` when it is missing or
        not a finite number > 0."""
        if key not in self.scales:
            raise ConfigError(
                f"objective reference scale {key!r} is missing (have {sorted(self.scales)}); "
                "the objective needs local-only's totals (greenroute.sim.reference)"
            )
        s = self.scales[key]
        ok = isinstance(s, int | float) and not isinstance(s, bool) and math.isfinite(s) and s > 0
        if not ok:
            raise ConfigError(
                f"objective reference scale {key!r} = {s!r} is not a finite number > 0 "
                "(local-only's value on this scenario): its term cannot be normalised; give "
                "its weight 0"
            )
        return float(s)

    def _term(self, weight: float, value: float, key: str) -> float:
        return 0.0 if weight == 0 else weight * value / self.scale(key)

    def terms(self, metrics: dict[str, float]) -> dict[str, float]:
        w = self.weights
        ttft = metrics["ttft_mean_s"]
        if math.isfinite(ttft):
            latency = self._term(w.latency, ttft, "ttft_mean_s")
        elif metrics.get("interactive_requests", math.nan) == 0:
            latency = 0.0  # no interactive request to wait for
        else:  # nothing completed: a penalty, not zero cost (module docstring)
            latency = w.slo_penalty * NO_TTFT_PENALTY
        return {
            "carbon": self._term(w.carbon, metrics["carbon_kg"], "carbon_kg"),
            "water": self._term(w.water, metrics["water_m3"], "water_m3"),
            "cost": self._term(w.cost, metrics["cost_usd"], "cost_usd"),
            "latency": latency,
            "slo": w.slo_penalty * metrics["slo_violation_pct"] / 100.0,
        }

    def value(self, metrics: dict[str, float]) -> float:
        return float(sum(self.terms(metrics).values()))


def objective_weights_option(weights: dict | None) -> ObjectiveWeights | None:
    """A policy's own ``weights`` option (``{"carbon": 1}``; unnamed weights 0, ``slo_penalty``
    defaults to :data:`DEFAULT_SLO_PENALTY`) as :class:`ObjectiveWeights`, or None: the policy
    then optimises the run's weights (``obs.weights``)."""
    if weights is None:
        return None
    unknown = sorted(set(weights) - set(WEIGHT_FIELDS))
    if unknown:
        raise ConfigError(
            f"unknown weight(s) {unknown} in the weights option; valid choices: "
            f"{', '.join(WEIGHT_FIELDS)}"
        )
    values = {k: 0.0 for k in WEIGHT_FIELDS}
    values["slo_penalty"] = DEFAULT_SLO_PENALTY
    for k, v in weights.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise ConfigError(f"weight {k!r} must be a finite number >= 0, got {v!r}")
        values[k] = float(v)
    return ObjectiveWeights(**values)
