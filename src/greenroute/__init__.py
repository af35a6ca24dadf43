"""greenroute: sustainable scheduling of LLM inference across geo-distributed datacenters.

The Python API: :func:`run`, :func:`compare`, :func:`run_manifest`; registries for policies
(:func:`register_geo_policy`) and scenarios (:func:`register_scenario`).
"""

# Before any kernel module is imported: numba picks its cache directory when a function is
# decorated, and greenroute keys it by the kernels' source (core/numba_cache.py)
from greenroute.core.numba_cache import configure_numba_cache

configure_numba_cache()

from greenroute.api import compare, results, run, run_manifest, sweep
from greenroute.constraints import ConstraintSet, Exclusion
from greenroute.core.types import (
    ClusterInfo,
    GeoPolicy,
    LocalPolicy,
    ObjectiveWeights,
    Observation,
    Plan,
)
from greenroute.core.version import __version__
from greenroute.envs import register_envs as _register_envs
from greenroute.policies.registry import (
    geo_policy_names,
    make_geo_policy,
    register_geo_policy,
)
from greenroute.scenarios import get_scenario, register_scenario, scenario_names

_register_envs()

__all__ = [
    "ClusterInfo",
    "ConstraintSet",
    "Exclusion",
    "GeoPolicy",
    "LocalPolicy",
    "ObjectiveWeights",
    "Observation",
    "Plan",
    "__version__",
    "compare",
    "geo_policy_names",
    "get_scenario",
    "make_geo_policy",
    "register_geo_policy",
    "register_scenario",
    "results",
    "run",
    "run_manifest",
    "scenario_names",
    "sweep",
]
