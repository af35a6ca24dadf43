"""The eight baselines of seed 001 §6 (MARLIN), each a registered geo policy: ``helix``,
``splitwise``, ``nsga2`` (``policies/optimize/nsga2.py``, reused), ``perllm``, ``slit``,
``qlearning``, ``ddqn`` and ``actor-critic``. Each module's docstring states our reading of
the cited method; ``common.py`` holds what they share (MARLIN's reward shape, the discrete
routing actions of the RL baselines)."""

from greenroute.policies.baselines import (  # noqa: F401  (register on import)
    actor_critic,
    ddqn,
    helix,
    perllm,
    qlearning,
    slit,
    splitwise,
)

SEED001_BASELINES: tuple[str, ...] = (
    "helix",
    "splitwise",
    "nsga2",
    "perllm",
    "slit",
    "qlearning",
    "ddqn",
    "actor-critic",
)
RL_BASELINES: tuple[str, ...] = ("qlearning", "ddqn", "actor-critic")
