"""Execution-time estimates for GCOS schedulers: DiPTree's upper quantile, or a point mean.

A task's execution time is the trace part (predicted from the trace columns) plus the data
processing part ``data_gb * process_s_per_gb``, which a scheduler knows from the object size.

Each predictor gives two estimates per task, used for two different things:

- the **wait** estimate (:meth:`ExecPredictor.predict`, :func:`task_exec_estimates`): DiPTree's
  upper quantile. It fills the per-region backlog that gives the estimated waits (the wait term
  of the objective, MACCS's observation, the ``lowest-*`` wait filters, the LP's GPU-seconds
  capacity). This is where the seed's point is: uncertain execution times, so plan waits on a
  pessimistic quantile;
- the **energy** estimate (:meth:`ExecPredictor.predict_energy`,
  :func:`task_energy_estimates`), which prices a task's compute energy, cost and carbon. With
  ``energy_stat="mean"`` (default) it is the predictive mean (DiPTree's leaf mean). Energy,
  cost and carbon are linear in the execution time, so their expectation is the mean's; the
  median would understate a right-skewed time and p90 overstates it (by ~17 % in total on
  ``gcos``). ``energy_stat="upper"`` is the behaviour before 2026-11-26 (the upper quantile for
  both).

- ``diptree``: :class:`~greenroute.policies.gcos.diptree.DiPTree` fitted on the training
  period's tasks, read at ``quantile`` (default p90). While ``diptree.py`` is not importable
  (it is written in parallel) a per-checkpoint empirical quantile stands in
  (``self.backend == "empirical"``).
- ``mean``: the per-checkpoint mean (the ablation without DiPTree: no uncertainty).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from greenroute.core.errors import UnknownNameError
from greenroute.policies.gcos.common import Backlog

PREDICTOR_KINDS = ("diptree", "mean")
ENERGY_STATS = ("mean", "upper")


class ExecPredictor:
    def __init__(self, kind: str = "diptree", quantile: float = 0.9,
                 energy_stat: str = "mean") -> None:  # fmt: skip
        if kind not in PREDICTOR_KINDS:
            raise UnknownNameError("execution-time predictor", kind, PREDICTOR_KINDS)
        if energy_stat not in ENERGY_STATS:
            raise UnknownNameError("energy estimate", energy_stat, ENERGY_STATS)
        self.kind, self.energy_stat = kind, energy_stat
        self.quantile = float(quantile)
        self.backend = kind
        self._tree = None
        self._per_model: dict[str, float] = {}
        self._per_model_mean: dict[str, float] = {}
        self._fallback = self._fallback_mean = 0.0

    def fit(self, rows: pd.DataFrame) -> ExecPredictor:
        """Fit on trace rows (with ``exec_time_seconds``)."""
        y = rows["exec_time_seconds"].to_numpy(dtype=np.float64)
        if self.kind == "diptree":
            try:
                from greenroute.policies.gcos.diptree import DiPTree, task_features
            except ImportError:  # diptree.py not there yet: empirical quantile per model
                self.backend = "empirical"
            else:
                self._features = task_features
                self._tree = DiPTree(quantiles=(0.5, self.quantile)).fit(task_features(rows), y)
                self.backend = "diptree"
                return self
        g = rows.assign(_y=y).groupby("checkpoint_model_version_id")["_y"]
        stat = g.quantile(self.quantile) if self.kind == "diptree" else g.mean()
        self._per_model = {str(k): float(v) for k, v in stat.items()}
        self._per_model_mean = {str(k): float(v) for k, v in g.mean().items()}
        upper = self.kind == "diptree"
        self._fallback = float(np.quantile(y, self.quantile) if upper else y.mean())
        self._fallback_mean = float(y.mean())
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        """Trace-part execution time (s) per row for waits: the upper quantile (``diptree``)
        or the mean (``mean``)."""
        if self._tree is not None:
            return self._tree.predict_quantiles(self._features(rows))[:, -1]
        ids = rows["checkpoint_model_version_id"].astype(str)
        return np.array([self._per_model.get(i, self._fallback) for i in ids], dtype=np.float64)

    def predict_energy(self, rows: pd.DataFrame) -> np.ndarray:
        """Trace-part execution time (s) per row for energy, cost and carbon: the predictive
        mean (``energy_stat="mean"``), or the same as :meth:`predict` (``"upper"``)."""
        if self.energy_stat == "upper" or self.kind == "mean":
            return self.predict(rows)
        if self._tree is not None:
            return self._tree.predict_mean(self._features(rows))
        ids = rows["checkpoint_model_version_id"].astype(str)
        m, fb = self._per_model_mean, self._fallback_mean
        return np.array([m.get(i, fb) for i in ids], dtype=np.float64)


def _data_s(sim) -> np.ndarray:
    return sim.cat.data_gb[sim.tasks.data] * sim.sc.process_s_per_gb


def task_exec_estimates(sim, predictor: ExecPredictor) -> np.ndarray:
    """Estimated execution time (s) of every task of ``sim`` for waits (trace part + data)."""
    return predictor.predict(sim.tasks.trace_rows) + _data_s(sim)


def task_energy_estimates(sim, predictor: ExecPredictor) -> np.ndarray:
    """Estimated execution time (s) of every task of ``sim`` for energy (trace part + data)."""
    return predictor.predict_energy(sim.tasks.trace_rows) + _data_s(sim)


def make_backlog(sim, predictor: ExecPredictor) -> Backlog:
    """The backlog every GCOS scheduler uses: waits from :func:`task_exec_estimates`, energy
    from :func:`task_energy_estimates`."""
    return Backlog(sim, task_exec_estimates(sim, predictor), task_energy_estimates(sim, predictor))


def fitted_predictor(sc, kind: str, data_dir=None, quantile: float = 0.9,
                     energy_stat: str = "mean") -> ExecPredictor:  # fmt: skip
    """A predictor fitted on the scenario's training-period tasks."""
    from greenroute.sim.gcos.engine import GcosSim

    train = GcosSim(sc, period="train", data_dir=data_dir)
    return ExecPredictor(kind, quantile, energy_stat).fit(train.tasks.trace_rows)
