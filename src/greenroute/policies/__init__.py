"""Scheduling policies: geo heuristics, local policies, registry."""
