"""``rl:PATH`` geo and local policies (see :mod:`greenroute.policies.rl.geo` and ``.local``)."""

from greenroute.policies.rl.geo import load_rl_geo_policy
from greenroute.policies.rl.local import load_rl_local_policy

__all__ = ["load_rl_geo_policy", "load_rl_local_policy"]
