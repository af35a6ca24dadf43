"""What a figure script needs from MARLIN (seed 001 §6): variant and ablation policy specs and
MARLIN's Pareto front for the §6.1 hypervolume.

MARLIN's front (§6.1: "MARLIN's Pareto front contained 40 points"): every plan MARLIN
simulates is archived with its objective ratios to the local-only plan of the same epoch
(TTFT, carbon, water, cost). The policy's ``summary()['front_ratios']`` holds the
non-dominated mean ratios per candidate slot over the run (each agent's k-th sample, its
proposal, the consensus: ``J x (K_opt + 1) + 1`` candidates, 37 with the defaults);
:func:`marlin_front` scales them by a local-only run's totals into run-level points, i.e.
"the run had every epoch gone like this slot's plans did". The routed run itself is one of
the points a caller should add (its measured metrics).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

# the figures' metric keys, in the order of the ratios (reward.OBJECTIVES)
FRONT_METRICS: tuple[str, ...] = ("ttft_mean_s", "carbon_kg", "water_m3", "cost_usd")

# §6: the five schemes as registered policy names
VARIANT_POLICIES: tuple[str, ...] = (
    "marlin-min-latency",
    "marlin-min-carbon",
    "marlin-min-water",
    "marlin-min-cost",
    "marlin-balanced",
)

# §6.3 ablations: name -> options of ``marlin-balanced``
ABLATIONS: dict[str, dict[str, bool]] = {
    "full": {},
    "no-film": {"film": False},
    "no-her": {"her": False},
    "no-blend": {"blend": False},
    "no-sgd": {"sgd": False},
    "no-veto": {"veto": False},
    "no-capital": {"capital": False},
}


def marlin_front(result, reference: Mapping[str, float] | object) -> np.ndarray:
    """``[n, 4]`` run-level points (``FRONT_METRICS`` order) of MARLIN's archived front.

    ``result``: a MARLIN :class:`~greenroute.sim.results.RunResult` (its
    ``extras['policy_summary']``) or the summary dict itself; ``reference``: a local-only
    RunResult of the same scenario and seed, or its metrics mapping."""
    summary = result
    extras = getattr(result, "extras", None)
    if extras is not None:
        summary = extras.get("policy_summary") or {}
    ratios = np.asarray(summary.get("front_ratios", []), dtype=float).reshape(-1, 4)
    ref_metrics = getattr(reference, "metrics", reference)
    ref = np.array([float(ref_metrics[k]) for k in FRONT_METRICS])
    return ratios * ref[None, :]
