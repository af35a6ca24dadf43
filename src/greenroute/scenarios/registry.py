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
    with the scenario's own, the stricter rule winning: exclusions add up, an origin's allowed
    regions are the intersection of both residency rules, the lower power cap and latency
    bound are kept."""
    sc = get_scenario(scenario) if isinstance(scenario, str) else scenario
    merged = constraints
    if constraints is not None and not sc.constraints.is_empty():
        own, new = sc.constraints, constraints
        res = {o: frozenset(a) for o, a in own.residency.items()}
        for o, a in new.residency.items():
            res[o] = res[o] & frozenset(a) if o in res else frozenset(a)
        caps = dict(own.power_caps_kw)
        for r, kw in new.power_caps_kw.items():
            caps[r] = min(caps.get(r, kw), kw)
        lats = [v for v in (own.max_one_way_latency_s, new.max_one_way_latency_s) if v is not None]
        merged = ConstraintSet(
            own.exclusions + new.exclusions, res, caps, min(lats) if lats else None
        )
    return sc.with_options(days=days, fidelity=fidelity, constraints=merged, facility=facility)
