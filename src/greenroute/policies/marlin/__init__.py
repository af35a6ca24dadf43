"""MARLIN (seed 001): per-objective SAC agents with FiLM and HER (phase 1) and the
competitive-proposal game (phase 2). Registered geo policies: ``marlin`` (option ``variant``)
and ``marlin-balanced``, ``marlin-min-latency``, ``marlin-min-carbon``, ``marlin-min-water``,
``marlin-min-cost``. Torch is imported only when a MARLIN policy plans."""

from greenroute.policies.marlin.front import ABLATIONS, VARIANT_POLICIES, marlin_front
from greenroute.policies.marlin.game import GameConfig
from greenroute.policies.marlin.policy import VARIANTS, MarlinPolicy, non_dominated
from greenroute.policies.marlin.registration import register as _register

_register()

__all__ = [
    "ABLATIONS",
    "VARIANTS",
    "VARIANT_POLICIES",
    "GameConfig",
    "MarlinPolicy",
    "marlin_front",
    "non_dominated",
]
