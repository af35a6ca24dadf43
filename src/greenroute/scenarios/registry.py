"""Scenario registry: ``greenroute scenarios`` lists these; ``get_scenario(name)`` builds one.

The built-in families (demo, geo, lb, au_edge, marlin) register on first use; registering has
no side effect on any other package. Add your own with :func:`register_scenario` (see the
README's worked example).
"""

from __future__ import annotations

from greenroute.constraints import ConstraintSet
from greenroute.core.registry import Registry
from greenroute.sim.scenario import Scenario


def _load_builtins() -> None:
    from greenroute.scenarios import au_edge, demo, geo, lb, marlin  # noqa: F401


SCENARIOS: Registry[Scenario] = Registry("scenario", _load_builtins)


def register_scenario(name: str, description: str = ""):
    """Decorator: register a zero-argument factory returning a :class:`Scenario`."""
    return SCENARIOS.register(name, description)


def scenario_names() -> list[str]:
    return SCENARIOS.names()


def scenario_descriptions() -> dict[str, str]:
    return {e.name: e.description for e in SCENARIOS.entries()}


def get_scenario(name: str) -> Scenario:
    return SCENARIOS.build(name)


def resolve_scenario(
    scenario: str | Scenario,
    *,
    days: float | None = None,
    fidelity: str | None = None,
    constraints: ConstraintSet | None = None,
    facility: str | None = None,
) -> Scenario:
    """A registered (or given) scenario with run options applied; extra constraints are merged
    with the scenario's own."""
    sc = get_scenario(scenario) if isinstance(scenario, str) else scenario
    merged = constraints
    if constraints is not None and not sc.constraints.is_empty():
        merged = ConstraintSet(
            sc.constraints.exclusions + constraints.exclusions,
            {**sc.constraints.residency, **constraints.residency},
            {**sc.constraints.power_caps_kw, **constraints.power_caps_kw},
            constraints.max_one_way_latency_s or sc.constraints.max_one_way_latency_s,
        )
    return sc.with_options(days=days, fidelity=fidelity, constraints=merged, facility=facility)
