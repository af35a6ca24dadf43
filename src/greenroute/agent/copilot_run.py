"""The run the copilot talks about: a ``--out`` directory re-created from its manifest.

:class:`RunContext` reads ``RUN_DIR/manifest.json`` (checked field by field, data checksums
compared, as ``greenroute.api.run_manifest`` does; the agent layer sits below the API, so the
re-run is built here from :mod:`greenroute.bench.runner`), prepares the same scenario with the
same seed and data, and simulates it again with the same geo and local policies, forecast and
weights. Every number the copilot states comes from these simulations (or their forks) and
from the observations they build: nothing is read from the model's text.

Counterfactuals (what-ifs, new rules) reuse the run's objective reference scales (its
``local-only`` totals), so the objective J before and after a change is on one scale.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from greenroute.constraints import ConstraintSet
from greenroute.core.errors import ConfigError
from greenroute.core.types import ObjectiveWeights, Observation, Plan
from greenroute.sim.engine import SimConfig, Simulation
from greenroute.sim.prepare import Prepared
from greenroute.sim.results import RunResult

# invalid plans in a counterfactual are replaced by the safe plan and counted (never a crash):
# a policy that ignores a new rule is caught by the simulator's validator
COUNTERFACTUAL_ON_INVALID = "fallback"


@dataclass
class RunContext:
    """A run directory re-created in memory (see the module docstring)."""

    run_dir: Path
    manifest: dict
    prep: Prepared
    weights: ObjectiveWeights
    notes: list[str] = field(default_factory=list)
    _scales: dict | None = None
    _baseline: RunResult | None = None
    _adopted: bool = False  # re-run with new rules: invalid plans fall back, as in that re-run

    # ---------------------------------------------------------------- loading
    @classmethod
    def load(cls, run_dir: str | Path, data_dir: str | Path | None = None) -> RunContext:
        from greenroute.bench.runner import prepare_checked
        from greenroute.core.errors import DataFormatError
        from greenroute.sim.manifest import check_input_files, read_manifest

        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            raise ConfigError(f"--run {run_dir} is not a directory (give a `greenroute run --out`)")
        path = run_dir / "manifest.json"
        if not path.is_file():
            subs = sorted(p.name for p in run_dir.iterdir() if (p / "manifest.json").is_file())
            if subs:
                raise ConfigError(
                    f"--run {run_dir} is a compare directory; pass one of its runs: "
                    + ", ".join(str(run_dir / s) for s in subs)
                )
            raise ConfigError(f"--run {run_dir} holds no manifest.json (not a greenroute run)")
        m = read_manifest(path)
        data = data_dir if data_dir is not None else m.get("data_dir")
        check_input_files(m, data, path)
        try:
            constraints = ConstraintSet.from_dict(m.get("constraints"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DataFormatError(path, f"field 'constraints' is malformed ({exc!r})") from None
        scenario = m["scenario"]
        if m.get("chunked_prefill"):
            from greenroute.scenarios import get_scenario

            scenario = get_scenario(scenario).with_options(
                fidelity=m.get("fidelity"), server_model=m.get("server_model"),
                chunked_prefill=True,
            )  # fmt: skip
        prep, notes = prepare_checked(
            scenario,
            seed=int(m["seed"]),
            data_dir=data,
            days=float(m.get("days_requested", m["days"])),
            fidelity=m.get("fidelity"),
            constraints=None if constraints.is_empty() else constraints,
            facility=m.get("facility"),
            server_model=m.get("server_model"),
        )
        w = m.get("weights") or {}
        weights = ObjectiveWeights(**w) if w else ObjectiveWeights()
        return cls(run_dir, m, prep, weights, list(notes))

    # ---------------------------------------------------------------- facts
    @property
    def regions(self) -> tuple[str, ...]:
        return self.prep.scenario.regions

    @property
    def origins(self) -> tuple[str, ...]:
        return self.prep.scenario.origins

    @property
    def policy_name(self) -> str:
        return str(self.manifest.get("policy_spec") or self.manifest["policy"])

    @property
    def seed(self) -> int:
        return int(self.manifest["seed"])

    @property
    def start(self) -> dt.datetime:
        return self.prep.scenario.start_utc.to_pydatetime()

    @property
    def horizon_s(self) -> float:
        return float(self.prep.scenario.duration_s)

    @property
    def n_epochs(self) -> int:
        return int(self.prep.scenario.n_epochs)

    def epoch_time(self, epoch: int) -> dt.datetime:
        return self.start + dt.timedelta(seconds=epoch * float(self.prep.scenario.epoch_s))

    def stored_metrics(self) -> dict:
        """The run directory's own ``metrics.json`` (empty when absent)."""
        import json

        p = self.run_dir / "metrics.json"
        return json.loads(p.read_text()) if p.is_file() else {}

    # ---------------------------------------------------------------- simulating
    def scales(self) -> dict:
        """The run's objective reference scales (simulated once, then cached)."""
        if self._scales is None:
            from greenroute.policies.registry import local_policy_factory
            from greenroute.sim.reference import LazyScales

            self._scales = dict(LazyScales(self.prep, local_policy_factory("least-loaded")))
        return self._scales

    def simulation(
        self,
        prep: Prepared | None = None,
        weights: ObjectiveWeights | None = None,
        on_invalid: str | None = None,
    ) -> Simulation:
        """A fresh simulation of the run's policy (same seed, forecast, local policy)."""
        from greenroute.bench.runner import make_policy
        from greenroute.policies.registry import local_policy_factory

        m = self.manifest
        forecast, err = m.get("forecast", "perfect"), float(m.get("forecast_error", 0.0))
        config = SimConfig(
            seed=self.seed,
            forecast=forecast,
            forecast_error=err,
            weights=weights or self.weights,
            on_invalid=on_invalid
            or (COUNTERFACTUAL_ON_INVALID if self._adopted else m.get("on_invalid", "raise")),
            objective_scales=self.scales(),
        )
        geo = make_policy(self.policy_name, m.get("policy_options") or None)
        local = local_policy_factory(m.get("local_policy", "least-loaded"))
        return Simulation(prep or self.prep, geo, local, config)

    def baseline(self) -> RunResult:
        """The run re-simulated as recorded (cached)."""
        if self._baseline is None:
            self._baseline = self.simulation().run()
            self._check_against_stored(self._baseline)
        return self._baseline

    def simulate(
        self,
        prep: Prepared | None = None,
        weights: ObjectiveWeights | None = None,
        on_invalid: str = COUNTERFACTUAL_ON_INVALID,
    ) -> RunResult:
        return self.simulation(prep, weights, on_invalid).run()

    def stepped_to(self, epoch: int) -> tuple[Simulation, Observation, Plan]:
        """The run replayed up to ``epoch`` (the policy deciding every epoch before it), with
        the observation and the validated plan the policy takes at ``epoch``."""
        if not 0 <= epoch < self.n_epochs:
            raise ConfigError(
                f"epoch {epoch} is not in this run: it has epochs 0..{self.n_epochs - 1} "
                f"({self.prep.scenario.simulated_days:g} days of "
                f"{self.prep.scenario.epoch_s / 60:g}-minute epochs)"
            )
        sim = self.simulation()
        sim.begin()
        while sim.epoch < epoch:
            obs = sim.observe()
            sim.advance(sim.get_plan(obs), obs)
        obs = sim.observe()
        return sim, obs, sim.get_plan(obs)

    # ---------------------------------------------------------------- variants
    def with_constraints(self, extra: ConstraintSet) -> Prepared:
        """The prepared run with ``extra`` hard rules merged into the scenario's (exclusions
        added, residency intersected, the lower power cap and latency bound kept)."""
        from greenroute.scenarios import resolve_scenario

        sc = resolve_scenario(self.prep.scenario, constraints=extra)
        sc.constraints.check_feasible(
            sc.origins, sc.regions, sc.duration_s, sc.epoch_s, self.prep.latency_s,
            idle_power_kw=self.prep.built.region_idle_kw(),
        )  # fmt: skip
        return replace(self.prep, scenario=sc, reference_scales=None)

    def adopt(self, prep: Prepared, weights: ObjectiveWeights, result: RunResult) -> None:
        """Make a re-run with new rules the run this context talks about from now on."""
        self.prep, self.weights, self._baseline = prep, weights, result
        self._adopted = True

    def _check_against_stored(self, res: RunResult) -> None:
        stored = self.stored_metrics()
        for key in ("carbon_kg", "cost_usd", "energy_kwh"):
            a, b = stored.get(key), res.metrics.get(key)
            both = isinstance(a, float) and isinstance(b, float)
            if both and not math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9):
                self.notes.append(
                    f"the re-simulated run differs from {self.run_dir}/metrics.json "
                    f"({key}: {b:.6g} vs {a:.6g}); the copilot uses the re-simulation"
                )
                return


def region_share_pct(res: RunResult, regions: tuple[str, ...]) -> np.ndarray:
    """Share (%) of the dispatched requests that each region received over the run."""
    by = res.epochs.groupby("region")["requests_dispatched"].sum()
    tot = float(by.sum())
    vals = np.array([float(by.get(r, 0.0)) for r in regions])
    return 100.0 * vals / tot if tot > 0 else np.zeros(len(regions))
