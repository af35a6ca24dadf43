"""Optimising policies: LP-MPC, the clairvoyant oracle, temperature-aware ADMM, NSGA-II.

The policy registry (``greenroute.policies.registry``) imports these modules; only NSGA-II's
pymoo is optional.
"""
