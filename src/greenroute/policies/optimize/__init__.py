"""Optimising policies: LP-MPC, the clairvoyant oracle, temperature-aware ADMM, NSGA-II."""

from greenroute.policies.optimize import lp  # noqa: F401  (registers lp-mpc, oracle)
