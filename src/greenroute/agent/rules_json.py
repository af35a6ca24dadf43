"""JSON form of a :class:`~greenroute.agent.rules.RuleSet`, for schema-constrained LLM output.

:data:`RULES_JSON_SCHEMA` is a JSON Schema (draft 2020-12 subset that grammar-constrained
decoders accept: objects, arrays, enums, numbers, null); :func:`rules_json_schema` narrows the
region names to one scenario's. :func:`ruleset_from_json` checks an object against the schema
by hand (no ``jsonschema`` dependency) and then applies the same checks as the plain-language
parser (:func:`~greenroute.agent.rules.validate_ruleset`: unknown regions with suggestions,
impossible numbers, unsatisfiable rules). Times are seconds from the run's start (``null`` =
open-ended), so ``ruleset_from_json(ruleset_to_json(r), regions) == r`` exactly.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from greenroute.agent.rules_errors import RuleCommandError
from greenroute.agent.rules_model import GOAL_FIELDS, RuleSet, validate_ruleset
from greenroute.constraints import ConstraintSet, Exclusion
from greenroute.core.types import ObjectiveWeights


class RuleJSONError(RuleCommandError):
    """A rules object that does not follow :data:`RULES_JSON_SCHEMA` (names the field)."""


_NUM = {"type": "number"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_WEIGHT_FIELDS = (*GOAL_FIELDS, "slo_penalty")

RULES_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "greenroute rules",
    "type": "object",
    "additionalProperties": False,
    "required": ["goal", "exclusions", "residency", "power_caps_kw", "max_one_way_latency_s"],
    "properties": {
        "goal": {
            "description": "objective weights (>= 0); null keeps the current goal",
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": list(_WEIGHT_FIELDS),
                    "properties": {f: {**_NUM, "minimum": 0} for f in _WEIGHT_FIELDS},
                },
            ],
        },
        "exclusions": {
            "description": "regions that receive no work during [start_s, end_s) (s from the "
            "run's start; null = open-ended)",
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["region", "start_s", "end_s", "reason"],
                "properties": {
                    "region": {"type": "string"},
                    "start_s": _NUM_OR_NULL,
                    "end_s": _NUM_OR_NULL,
                    "reason": {"type": "string"},
                },
            },
        },
        "residency": {
            "description": "work from origin may only go to the allowed regions",
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["origin", "allowed"],
                "properties": {
                    "origin": {"type": "string"},
                    "allowed": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                },
            },
        },
        "power_caps_kw": {
            "description": "IT power cap per region, kW",
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["region", "cap_kw"],
                "properties": {"region": {"type": "string"}, "cap_kw": {**_NUM, "minimum": 0}},
            },
        },
        "max_one_way_latency_s": {
            "description": "one-way network latency bound for interactive work, s; null = none",
            **_NUM_OR_NULL,
        },
    },
}


def rules_json_schema(regions: Sequence[str], origins: Sequence[str] | None = None) -> dict:
    """:data:`RULES_JSON_SCHEMA` with region and origin names restricted to a scenario's."""
    schema = copy.deepcopy(RULES_JSON_SCHEMA)
    regs = {"type": "string", "enum": list(regions)}
    origs = {"type": "string", "enum": list(origins if origins is not None else regions)}
    props = schema["properties"]
    props["exclusions"]["items"]["properties"]["region"] = regs
    props["residency"]["items"]["properties"]["origin"] = origs
    props["residency"]["items"]["properties"]["allowed"]["items"] = regs
    props["power_caps_kw"]["items"]["properties"]["region"] = regs
    return schema


def _time(v: float) -> float | None:
    return None if math.isinf(v) else v


def ruleset_to_json(rs: RuleSet) -> dict[str, Any]:
    """The JSON-compatible object of ``rs`` (follows :data:`RULES_JSON_SCHEMA`)."""
    cs = rs.constraints
    return {
        "goal": None if rs.weights is None else rs.weights.as_dict(),
        "exclusions": [
            {
                "region": e.region,
                "start_s": _time(e.start_s),
                "end_s": _time(e.end_s),
                "reason": e.reason,
            }
            for e in cs.exclusions
        ],
        "residency": [
            {"origin": o, "allowed": sorted(allowed)} for o, allowed in cs.residency.items()
        ],
        "power_caps_kw": [{"region": r, "cap_kw": kw} for r, kw in cs.power_caps_kw.items()],
        "max_one_way_latency_s": cs.max_one_way_latency_s,
    }


def ruleset_from_json(
    obj: Mapping[str, Any] | str,
    regions: Sequence[str],
    origins: Sequence[str] | None = None,
) -> RuleSet:
    """Read a rules object (or its JSON text) and validate it for a scenario's regions."""
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError as err:
            raise RuleJSONError(f"rules are not valid JSON: {err}") from None
    _obj(obj, "rules", RULES_JSON_SCHEMA)
    goal = obj["goal"]
    weights = None
    if goal is not None:
        _obj(goal, "goal", RULES_JSON_SCHEMA["properties"]["goal"]["anyOf"][1])
        weights = ObjectiveWeights(**{f: _num(goal[f], f"goal.{f}") for f in _WEIGHT_FIELDS})
    exclusions = []
    for i, e in enumerate(_list(obj["exclusions"], "exclusions")):
        where = f"exclusions[{i}]"
        _obj(e, where, RULES_JSON_SCHEMA["properties"]["exclusions"]["items"])
        start, end = e["start_s"], e["end_s"]
        exclusions.append(
            Exclusion(
                _str(e["region"], f"{where}.region"),
                -math.inf if start is None else _num(start, f"{where}.start_s"),
                math.inf if end is None else _num(end, f"{where}.end_s"),
                _str(e["reason"], f"{where}.reason"),
            )
        )
    residency: dict[str, frozenset[str]] = {}
    for i, r in enumerate(_list(obj["residency"], "residency")):
        where = f"residency[{i}]"
        _obj(r, where, RULES_JSON_SCHEMA["properties"]["residency"]["items"])
        origin = _str(r["origin"], f"{where}.origin")
        allowed = [_str(a, f"{where}.allowed") for a in _list(r["allowed"], f"{where}.allowed")]
        if not allowed or origin in residency:
            raise RuleJSONError(f"{where}: one entry per origin, with at least one region")
        residency[origin] = frozenset(allowed)
    caps: dict[str, float] = {}
    for i, c in enumerate(_list(obj["power_caps_kw"], "power_caps_kw")):
        where = f"power_caps_kw[{i}]"
        _obj(c, where, RULES_JSON_SCHEMA["properties"]["power_caps_kw"]["items"])
        region = _str(c["region"], f"{where}.region")
        if region in caps:
            raise RuleJSONError(f"{where}: a second cap for {region}")
        caps[region] = _num(c["cap_kw"], f"{where}.cap_kw")
    lat = obj["max_one_way_latency_s"]
    lat = None if lat is None else _num(lat, "max_one_way_latency_s")
    rs = RuleSet(weights, ConstraintSet(tuple(exclusions), residency, caps, lat))
    validate_ruleset(rs, regions, origins)
    return rs


def _obj(value: Any, where: str, schema: Mapping[str, Any]) -> None:
    if not isinstance(value, Mapping):
        raise RuleJSONError(f"{where} must be an object, got {type(value).__name__}")
    missing = [k for k in schema["required"] if k not in value]
    extra = [k for k in value if k not in schema["properties"]]
    if missing or extra:
        raise RuleJSONError(
            f"{where}: missing {missing} / unexpected {extra}; fields: {schema['required']}"
        )


def _list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise RuleJSONError(f"{where} must be an array, got {type(value).__name__}")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise RuleJSONError(f"{where} must be a string, got {value!r}")
    return value


def _num(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RuleJSONError(f"{where} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise RuleJSONError(f"{where} must be finite, got {value!r}")
    return float(value)
