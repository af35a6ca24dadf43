"""Reference scales of the objective: ``local-only``'s totals on the same scenario and data.

The objective (``core/objective.py``) divides carbon, water, cost and TTFT by what
``local-only`` + ``least-loaded`` achieves in the fluid model on the same scenario, seed and
data. That reference is a whole extra simulation, so it is

* computed lazily: :class:`LazyScales` is a mapping that runs the reference the first time
  anyone reads it (a policy that looks at ``obs.objective_scales``, or the result computing
  ``objective``); runs whose policy never looks pay for it only once, at the end;
* cached in memory (on the :class:`Prepared` and per process) and on disk (``data/cache.py``,
  namespace ``reference``), keyed by the scenario (all its fields, fluid fidelity), the seed,
  the checksums of the data files and of the prepared signals, and a fingerprint of
  greenroute's own code: a second run of the same scenario reads 6 numbers from a file.

The local-only plan is built here (the sim layer does not import ``policies``); it is the
same plan as ``policies/heuristics.py``'s ``local-only``: each origin to its own region, or,
where that is not allowed or absent, to the nearest allowed region.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

import numpy as np

from greenroute.core.types import N_CLASSES, ClusterInfo, LocalPolicy, Observation, Plan

# bump when the reference run's definition changes (the code fingerprint covers the rest)
REFERENCE_FORMAT_VERSION = 2  # 2: gross (absolute) cost scale
_MEMORY: dict[str, dict[str, float]] = {}


class LocalOnlyReference:
    """Every origin's work in its own region (nearest allowed region otherwise)."""

    name = "local-only"

    def reset(self, cluster: ClusterInfo, seed: int) -> None:
        del cluster, seed

    def plan(self, obs: Observation) -> Plan:
        route = np.zeros(obs.allowed.shape)
        for c in range(N_CLASSES):
            for o, origin in enumerate(obs.origins):
                ok = np.flatnonzero(obs.allowed[c, o])
                if origin in obs.regions and obs.allowed[c, o, obs.regions.index(origin)]:
                    route[c, o, obs.regions.index(origin)] = 1.0
                elif ok.size:  # origin region not allowed/absent: the nearest allowed one
                    route[c, o, ok[np.argmin(obs.latency_s[o, ok])]] = 1.0
        return Plan(route=route, rationale="")


def _reference_scenario(sc):
    """The scenario of the reference run: fluid fidelity (whole-prompt prefills: chunking is a
    request-fidelity option of the servers, not part of the reference)."""
    return replace(sc, chunked_prefill=False).with_options(fidelity="fluid")


def reference_key(prep) -> str:
    """Cache key of ``prep``'s reference run (see the module docstring)."""
    from greenroute.data.cache import code_fingerprint, make_key

    sc = replace(_reference_scenario(prep.scenario), description="")
    sig = prep.signals
    h = hashlib.sha256()
    for arr in (
        sig.carbon_intensity_g_per_kwh,
        sig.price_usd_per_kwh,
        sig.temp_c,
        sig.rh_pct,
        sig.wetbulb_c,
        sig.water_intensity_l_per_kwh,
    ):
        h.update(np.ascontiguousarray(arr, dtype=np.float64).tobytes())
    return make_key(
        "reference",
        REFERENCE_FORMAT_VERSION,
        code_fingerprint(),
        repr(sc),
        int(prep.seed),
        sorted(prep.input_files.items()),
        sig.source,
        h.hexdigest(),
    )


def _simulate(prep, local: Callable[[], LocalPolicy]) -> dict[str, float]:
    from greenroute.core.objective import SCALE_KEYS
    from greenroute.sim.engine import SimConfig, Simulation
    from greenroute.sim.prepare import prepare

    sc = prep.scenario
    fprep = prep
    if sc.fidelity != "fluid":
        fprep = prepare(_reference_scenario(sc), seed=prep.seed, data_dir=prep.data_dir)
    sim = Simulation(fprep, LocalOnlyReference(), local, SimConfig(seed=prep.seed))
    res = sim.run()
    m = res.metrics
    scales = {k: float(m[k]) for k in SCALE_KEYS}
    # The cost scale is local-only's gross electricity bill, sum |price x energy| over epochs
    # and regions: equal to its cost when prices are >= 0, and still a positive magnitude when
    # negative wholesale prices (e.g. DE-LU, AU at midday) make the net cost <= 0. Prices are
    # hourly and epochs divide the hour, so each (epoch, region) cost has one price's sign.
    scales["cost_usd"] = float(np.abs(res.epochs["cost_usd"].to_numpy()).sum())
    scales["interactive_requests"] = float(m.get("interactive_requests", m["requests_total"]))
    scales["requests_total"] = float(m["requests_total"])
    return scales


def reference_scales(prep, local: Callable[[], LocalPolicy]) -> dict[str, float]:
    """Normalisation of the objective: ``local-only``'s metrics in the fluid model, same
    scenario, seed and data (cached on ``prep``, per process and on disk). ``local`` is the
    factory of the reference's local policy, ``least-loaded`` by definition (the sim layer
    cannot name policies: ``greenroute.policies.registry.local_policy_factory``)."""
    from greenroute.data import cache

    if prep.reference_scales is not None:
        return prep.reference_scales
    key = reference_key(prep)
    scales = _MEMORY.get(key) if cache.enabled() else None
    if scales is None:
        stored = cache.load_json("reference", key)
        if stored is not None and _valid(stored):
            scales = {k: float(v) for k, v in stored.items()}
    if scales is None:
        scales = _simulate(prep, local)
        cache.store_json("reference", key, scales)
    if cache.enabled():
        _MEMORY[key] = dict(scales)
    prep.reference_scales = scales
    return scales


def _valid(stored: dict) -> bool:
    from greenroute.core.objective import SCALE_KEYS

    need = (*SCALE_KEYS, "interactive_requests", "requests_total")
    return all(isinstance(stored.get(k), (int, float)) for k in need)


class LazyScales(Mapping):
    """The reference scales of ``prep``, simulated on first read (``len``, ``bool``, ``[]``,
    ``get``, iteration all count as reads)."""

    def __init__(self, prep, local: Callable[[], LocalPolicy]) -> None:
        self._prep = prep
        self._local = local

    def _scales(self) -> dict[str, float]:
        return reference_scales(self._prep, self._local)

    def __getitem__(self, key: str) -> float:
        return self._scales()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._scales())

    def __len__(self) -> int:
        return len(self._scales())

    def __reduce__(self):
        # pickled / deep-copied as the plain dict it stands for (not the prepared scenario)
        return (dict, (dict(self._scales()),))

    def __repr__(self) -> str:
        ready = self._prep.reference_scales
        return f"LazyScales({ready!r})" if ready is not None else "LazyScales(<not yet run>)"
