"""Optimising policies: LP-MPC, the clairvoyant oracle, temperature-aware ADMM, NSGA-II.

Importing this package registers them (modules whose optional dependencies are missing are
skipped).
"""

import contextlib

from greenroute.policies.optimize import lp  # noqa: F401  (registers lp-mpc, oracle)

with contextlib.suppress(ImportError):
    from greenroute.policies.optimize import admm  # noqa: F401
with contextlib.suppress(ImportError):
    from greenroute.policies.optimize import nsga2  # noqa: F401
