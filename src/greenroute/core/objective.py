"""The scalar objective every optimising policy and every comparison uses.

J = w_carbon * carbon_kg / s_carbon + w_water * water_m3 / s_water + w_cost * cost_usd / s_cost
    + w_latency * ttft_mean_s / s_latency + slo_penalty * slo_violation_pct / 100

The scales ``s_*`` are the scenario's own reference values — the metrics of ``local-only``
in the fluid model, same scenario, seed and data — so weights are comparable across units and
J(local-only) is about sum(w). Seed 001 eq. 11 weighs TTFT, carbon, water and cost the same
way (weights summing to 1); its five MARLIN variants are the presets below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.core.types import ObjectiveWeights

DEFAULT_SLO_PENALTY = 5.0  # 1 % of requests over their SLO costs 0.05, i.e. 5 % of J(local-only)

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
        s = self.scales.get(key, 1.0)
        return s if s and math.isfinite(s) and s > 0 else 1.0

    def terms(self, metrics: dict[str, float]) -> dict[str, float]:
        w = self.weights
        return {
            "carbon": w.carbon * metrics["carbon_kg"] / self.scale("carbon_kg"),
            "water": w.water * metrics["water_m3"] / self.scale("water_m3"),
            "cost": w.cost * metrics["cost_usd"] / self.scale("cost_usd"),
            "latency": w.latency * _finite(metrics["ttft_mean_s"]) / self.scale("ttft_mean_s"),
            "slo": w.slo_penalty * metrics["slo_violation_pct"] / 100.0,
        }

    def value(self, metrics: dict[str, float]) -> float:
        return float(sum(self.terms(metrics).values()))


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


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
