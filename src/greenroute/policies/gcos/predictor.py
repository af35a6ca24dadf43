"""Execution-time estimates for GCOS schedulers: DiPTree's upper quantile, or a point mean.

A task's execution time is the trace part (predicted from the trace columns) plus the data
processing part ``data_gb * process_s_per_gb``, which a scheduler knows from the object size.

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

PREDICTOR_KINDS = ("diptree", "mean")


class ExecPredictor:
    def __init__(self, kind: str = "diptree", quantile: float = 0.9) -> None:
        if kind not in PREDICTOR_KINDS:
            raise UnknownNameError("execution-time predictor", kind, PREDICTOR_KINDS)
        self.kind = kind
        self.quantile = float(quantile)
        self.backend = kind
        self._tree = None
        self._per_model: dict[str, float] = {}
        self._fallback = 0.0

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
        upper = self.kind == "diptree"
        self._fallback = float(np.quantile(y, self.quantile) if upper else y.mean())
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        """Trace-part execution time (s) per row."""
        if self._tree is not None:
            return self._tree.predict_quantiles(self._features(rows))[:, -1]
        ids = rows["checkpoint_model_version_id"].astype(str)
        return np.array([self._per_model.get(i, self._fallback) for i in ids], dtype=np.float64)


def task_exec_estimates(sim, predictor: ExecPredictor) -> np.ndarray:
    """Estimated execution time (s) of every task of ``sim`` (trace part + data part)."""
    trace_part = predictor.predict(sim.tasks.trace_rows)
    return trace_part + sim.cat.data_gb[sim.tasks.data] * sim.sc.process_s_per_gb


def fitted_predictor(sc, kind: str, data_dir=None, quantile: float = 0.9) -> ExecPredictor:
    """A predictor fitted on the scenario's training-period tasks."""
    from greenroute.sim.gcos.engine import GcosSim

    train = GcosSim(sc, period="train", data_dir=data_dir)
    return ExecPredictor(kind, quantile).fit(train.tasks.trace_rows)
