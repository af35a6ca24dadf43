"""GCOS (seed 003): a standalone task-level simulator with per-region model and data caches.

Tasks here are whole jobs (a base checkpoint plus LoRA adapters, applied to one data object),
not LLM token requests, so this package does not touch the main engine. Modules:

- :mod:`.transfer`: WAN transfer physics (time, energy, carbon, egress price) and the byte ledger;
- :mod:`.cache`: a capacity-bounded object cache with LRU / LFU / GDSF eviction;
- :mod:`.workload`: the model catalogue from the Alibaba GenAI trace and synthetic data objects;
- :mod:`.scenario`: :class:`GcosScenario` and the ``GCOS_SCENARIOS`` registry (``gcos``);
- :mod:`.engine`: the window-stepped simulator and its metrics.
"""
