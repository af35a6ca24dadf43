"""``rl:PATH`` geo policies (see :mod:`greenroute.policies.rl.geo`)."""

from greenroute.policies.rl.geo import load_rl_geo_policy

__all__ = ["load_rl_geo_policy"]
