"""GCOS policy names. ``make_gcos_policy`` builds the non-learned ones; MACCS variants need a
trained actor (``greenroute.bench.gcos`` trains them)."""

from __future__ import annotations

from greenroute.core.errors import UnknownNameError
from greenroute.policies.gcos.baselines import CacheAffinity, LocalOnly, LowestCarbon, LowestPrice
from greenroute.policies.gcos.common import Weights
from greenroute.policies.gcos.greedy import GcosGreedy
from greenroute.policies.gcos.lp import GcosLP
from greenroute.policies.gcos.predictor import ExecPredictor

CACHE_OBLIVIOUS = ("lowest-carbon", "lowest-price")
HEURISTICS = (*CACHE_OBLIVIOUS, "local", "cache-affinity", "gcos-greedy", "lp")
LEARNED = ("maccs", "maccs-no-migration", "maccs-no-diptree")
GCOS_POLICY_NAMES = (*HEURISTICS, *LEARNED)


def make_gcos_policy(name: str, predictor: ExecPredictor, weights: Weights):
    if name not in HEURISTICS:
        raise UnknownNameError("gcos policy", name, HEURISTICS)
    if name == "lowest-carbon":
        return LowestCarbon(predictor)
    if name == "lowest-price":
        return LowestPrice(predictor)
    if name == "local":
        return LocalOnly(predictor)
    if name == "cache-affinity":
        return CacheAffinity(predictor)
    if name == "gcos-greedy":
        return GcosGreedy(predictor, weights)
    return GcosLP(predictor, weights)
