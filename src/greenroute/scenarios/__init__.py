"""Scenarios: the registry and its families (demo, geo, lb, au_edge, marlin), declarative and
without import side effects."""

from greenroute.scenarios.registry import (
    SCENARIOS,
    get_scenario,
    register_scenario,
    resolve_scenario,
    scenario_descriptions,
    scenario_names,
)

__all__ = [
    "SCENARIOS",
    "get_scenario",
    "register_scenario",
    "resolve_scenario",
    "scenario_descriptions",
    "scenario_names",
]
