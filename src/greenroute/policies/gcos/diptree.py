"""DiPTree: a light distributional execution-time predictor (GCOS, seed 003).

Seed 003's abstract names "a lightweight execution time predictor, DiPTree, to address the
high variability in task execution times"; its body is not available. Our reading: a single
regression tree (CART) whose leaves keep the *empirical distribution* of the execution times
that fall in them, so that a scheduler can read an upper quantile (e.g. p90) instead of a
point estimate. Choices, each a parameter:

* splits minimise the squared error of ``log(y)`` (``log_target=True``; execution times are
  right-skewed, a log fit splits on relative, not absolute, differences) or of ``y``;
* a split is a threshold ``x[f] <= t`` with ``t`` the midpoint of two consecutive distinct
  values; ties between equally good splits go to the lowest feature index, then the lowest
  threshold (so a fit is deterministic);
* growth stops at ``max_depth``, when a child would hold fewer than ``min_leaf`` samples, or
  when the best split lowers the node's squared error by no more than ``min_gain``;
* a leaf stores ``numpy.quantile(y_leaf, quantiles, method=quantile_method)`` and the mean of
  ``y`` (in seconds, never in log space).

Prediction walks the flattened tree in a compiled (numba) loop: a few microseconds per call.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np
import pandas as pd
from numba import njit

from greenroute.core.errors import ConfigError, DataFormatError

QUANTILE_METHODS = ("linear", "inverted_cdf", "nearest", "lower", "higher", "midpoint")

# task_features: one column per feature, in this order
FEATURE_NAMES = (
    "model_code",  # checkpoint_model_version_id "M0042" -> 42 (other ids: crc32 code >= 1e6)
    "num_lora",
    "num_inference_steps",
    "num_images_per_prompt",
    "image_steps",  # images x steps: the denoising work of the request
    "predict_type_code",  # TXT_2_IMG 0, IMG_2_IMG 1, INPAINTING 2
    "prompt_length",
    "negative_prompt_length",
)
REQUIRED_COLUMNS = ("checkpoint_model_version_id", "num_lora")
# defaults for optional columns that are absent or empty: the trace's most common values
# (num_inference_steps 30 in 91 % of rows, one image in 58 %, TXT_2_IMG in 91 %)
DEFAULTS = {
    "num_inference_steps": 30.0,
    "num_images_per_prompt": 1.0,
    "predict_type": "TXT_2_IMG",
    "prompt_length": 0.0,
    "negative_prompt_length": 0.0,
}
PREDICT_TYPES = {"TXT_2_IMG": 0, "IMG_2_IMG": 1, "INPAINTING": 2}
_MODEL_ID = re.compile(r"^M(\d+)$")
_OTHER_ID_BASE = 1_000_000  # codes of ids that are not "M<digits>" start here


def _model_code(ids: pd.Series) -> np.ndarray:
    out = np.empty(len(ids))
    for i, v in enumerate(ids.to_numpy()):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            out[i] = -1.0
            continue
        m = _MODEL_ID.match(str(v))
        out[i] = float(m.group(1)) if m else float(_OTHER_ID_BASE + zlib.crc32(str(v).encode()))
    return out


def task_features(frame: pd.DataFrame) -> np.ndarray:
    """Features [n, len(FEATURE_NAMES)] of Alibaba GenAI trace rows (or tasks with the same
    columns). ``checkpoint_model_version_id`` and ``num_lora`` are required; the other columns
    take :data:`DEFAULTS` when absent or empty. A missing model id becomes code -1."""
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise DataFormatError(
            "task frame", f"missing column(s) {', '.join(missing)}; need {REQUIRED_COLUMNS}"
        )

    def num(col: str) -> np.ndarray:
        if col not in frame.columns:
            return np.full(len(frame), DEFAULTS[col])
        v = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=np.float64)
        return np.where(np.isnan(v), DEFAULTS[col], v)

    steps = num("num_inference_steps")
    images = num("num_images_per_prompt")
    if "predict_type" in frame.columns:
        kinds = frame["predict_type"].fillna(DEFAULTS["predict_type"]).astype(str)
        bad = sorted(set(kinds) - set(PREDICT_TYPES))
        if bad:
            raise DataFormatError(
                "task frame", f"unknown predict_type {bad[0]!r}; valid: {', '.join(PREDICT_TYPES)}"
            )
        kind = kinds.map(PREDICT_TYPES).to_numpy(dtype=np.float64)
    else:
        kind = np.full(len(frame), float(PREDICT_TYPES[DEFAULTS["predict_type"]]))
    lora = pd.to_numeric(frame["num_lora"], errors="coerce").fillna(0).to_numpy(np.float64)
    cols = [
        _model_code(frame["checkpoint_model_version_id"]),
        lora,
        steps,
        images,
        steps * images,
        kind,
        num("prompt_length"),
        num("negative_prompt_length"),
    ]
    return np.column_stack(cols) if len(frame) else np.zeros((0, len(FEATURE_NAMES)))


def trace_training_set(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(X, y_s) from the raw trace: rows with status SUCCEED and ``exec_time_seconds > 0``
    (the trace records whole seconds; 0 s rows are dropped since MAPE is undefined there)."""
    ok = (frame["predict_status"] == "SUCCEED") & (frame["exec_time_seconds"] > 0)
    sub = frame.loc[ok]
    return task_features(sub), sub["exec_time_seconds"].to_numpy(dtype=np.float64)


@njit(cache=True)
def _leaf_of(x, feature, threshold, left, right):  # pragma: no cover - compiled
    n = x.shape[0]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        node = 0
        while left[node] >= 0:
            node = left[node] if x[i, feature[node]] <= threshold[node] else right[node]
        out[i] = node
    return out


def _best_split(x: np.ndarray, t: np.ndarray, min_leaf: int) -> tuple[float, int, float]:
    """(gain in squared error, feature, threshold) of the best split of one node; gain -1
    when no split leaves ``min_leaf`` samples on both sides."""
    n, d = x.shape
    tc = t - t.mean()
    total = float(np.dot(tc, tc))
    best = (-1.0, -1, 0.0)
    if n < 2 * min_leaf:
        return best
    k = np.arange(1, n)  # left size for a cut after position k-1
    for f in range(d):
        order = np.argsort(x[:, f], kind="stable")
        xs = x[order, f]
        ys = tc[order]
        s1 = np.cumsum(ys)[:-1]
        s2 = np.cumsum(ys * ys)[:-1]
        sse_l = s2 - s1 * s1 / k
        r1 = (s1[-1] + ys[-1]) - s1  # sum of the right side
        sse_r = (total - s2) - r1 * r1 / (n - k)
        gain = total - sse_l - sse_r
        valid = (xs[1:] > xs[:-1]) & (k >= min_leaf) & (n - k >= min_leaf)
        if not valid.any():
            continue
        gain = np.where(valid, gain, -np.inf)
        j = int(np.argmax(gain))
        if gain[j] > best[0]:
            lo, hi = float(xs[j]), float(xs[j + 1])
            mid = 0.5 * (lo + hi)
            best = (float(gain[j]), f, mid if lo <= mid < hi else lo)
    return best


class DiPTree:
    """A CART regression tree whose leaves hold execution-time quantiles (see module doc).

    ``quantiles`` strictly increasing in (0, 1); predictions are then non-decreasing along a
    row of :meth:`predict_quantiles`."""

    def __init__(
        self,
        quantiles: Sequence[float] = (0.5, 0.9),
        max_depth: int = 8,
        min_leaf: int = 20,
        min_gain: float = 0.0,
        log_target: bool = True,
        quantile_method: str = "linear",
    ) -> None:
        q = np.asarray(quantiles, dtype=np.float64)
        if q.ndim != 1 or q.size == 0 or np.any((q <= 0) | (q >= 1)) or np.any(np.diff(q) <= 0):
            raise ConfigError(
                f"quantiles must be strictly increasing values in (0, 1), got {list(quantiles)}"
            )
        if max_depth < 0 or min_leaf < 1 or min_gain < 0:
            raise ConfigError(
                "need max_depth >= 0, min_leaf >= 1, min_gain >= 0; got "
                f"{max_depth}, {min_leaf}, {min_gain}"
            )
        if quantile_method not in QUANTILE_METHODS:
            raise ConfigError(
                f"unknown quantile_method {quantile_method!r}; valid: {', '.join(QUANTILE_METHODS)}"
            )
        self.quantiles = tuple(float(v) for v in q)
        self.max_depth = int(max_depth)
        self.min_leaf = int(min_leaf)
        self.min_gain = float(min_gain)
        self.log_target = bool(log_target)
        self.quantile_method = quantile_method
        self.n_features_: int | None = None

    # --- fitting -------------------------------------------------------------------------
    def fit(self, X: np.ndarray, y_s: np.ndarray) -> DiPTree:
        """Grow the tree on features ``X`` [n, d] and execution times ``y_s`` [n] (seconds)."""
        x = np.asarray(X, dtype=np.float64)
        y = np.asarray(y_s, dtype=np.float64)
        if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0] or x.shape[0] == 0:
            raise ConfigError(
                f"fit needs X [n, d] and y_s [n] with n >= 1; got {x.shape} and {y.shape}"
            )
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            raise ConfigError("fit needs finite X and y_s (no NaN or inf)")
        if self.log_target and np.any(y <= 0):
            raise ConfigError("log_target=True needs y_s > 0; drop zero times or log_target=False")
        t = np.log(y) if self.log_target else y
        feature, threshold, left, right, leaf_rows = [], [], [], [], {}
        stack = [(np.arange(x.shape[0]), 0, -1, False)]  # rows, depth, parent, is_right
        while stack:
            rows, depth, parent, is_right = stack.pop()
            node = len(feature)
            if parent >= 0:
                (right if is_right else left)[parent] = node
            feature.append(-1)
            threshold.append(0.0)
            left.append(-1)
            right.append(-1)
            gain, f, thr = (-1.0, -1, 0.0)
            if depth < self.max_depth:
                gain, f, thr = _best_split(x[rows], t[rows], self.min_leaf)
            tc = t[rows] - t[rows].mean()
            tol = 1e-12 * (1.0 + float(np.dot(tc, tc)))
            if f < 0 or gain <= max(self.min_gain, tol):
                leaf_rows[node] = rows
                continue
            feature[node], threshold[node] = f, thr
            go_left = x[rows, f] <= thr
            # right pushed first: the left child gets the next node id (depth-first, left first)
            stack.append((rows[~go_left], depth + 1, node, True))
            stack.append((rows[go_left], depth + 1, node, False))
        n_nodes = len(feature)
        self.feature_ = np.asarray(feature, dtype=np.int64)
        self.threshold_ = np.asarray(threshold, dtype=np.float64)
        self.left_ = np.asarray(left, dtype=np.int64)
        self.right_ = np.asarray(right, dtype=np.int64)
        self.leaf_quantiles_ = np.full((n_nodes, len(self.quantiles)), np.nan)
        self.leaf_mean_ = np.full(n_nodes, np.nan)
        self.leaf_count_ = np.zeros(n_nodes, dtype=np.int64)
        for node, rows in leaf_rows.items():
            yl = y[rows]
            qs = np.quantile(yl, self.quantiles, method=self.quantile_method)
            self.leaf_quantiles_[node] = qs
            self.leaf_mean_[node] = yl.mean()
            self.leaf_count_[node] = rows.size
        self.n_features_ = x.shape[1]
        return self

    # --- prediction ----------------------------------------------------------------------
    @property
    def n_leaves(self) -> int:
        self._check_fitted()
        return int(np.sum(self.left_ < 0))

    @property
    def depth(self) -> int:
        """Depth of the deepest leaf (0 for a single leaf)."""
        self._check_fitted()
        d = np.zeros(self.left_.size, dtype=np.int64)
        for node in range(self.left_.size):  # children always have larger ids
            if self.left_[node] >= 0:
                d[self.left_[node]] = d[self.right_[node]] = d[node] + 1
        return int(d.max())

    def _check_fitted(self) -> None:
        if self.n_features_ is None:
            raise ConfigError("DiPTree is not fitted: call fit(X, y_s) first")

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Leaf node id of each row of ``X`` ([n, d], or one row [d])."""
        self._check_fitted()
        x = np.asarray(X, dtype=np.float64)
        if x.ndim == 1:
            x = x.reshape(1, -1)
        if x.ndim != 2 or x.shape[1] != self.n_features_:
            raise ConfigError(f"X must have {self.n_features_} feature columns, got {x.shape}")
        return _leaf_of(x, self.feature_, self.threshold_, self.left_, self.right_)

    def predict_quantiles(self, X: np.ndarray) -> np.ndarray:
        """[n, len(quantiles)] execution-time quantiles (seconds), one row per row of ``X``."""
        leaf = self.apply(X)
        return self.leaf_quantiles_[leaf]

    def predict_mean(self, X: np.ndarray) -> np.ndarray:
        """[n] mean execution time (seconds) of each row's leaf."""
        leaf = self.apply(X)
        return self.leaf_mean_[leaf]


def pinball_loss(y: np.ndarray, q_pred: np.ndarray, quantiles: Sequence[float]) -> np.ndarray:
    """Mean pinball (quantile) loss per quantile: ``mean(max(q (y - p), (q - 1)(y - p)))``,
    in the units of ``y``; ``q_pred`` is [n, len(quantiles)]."""
    y = np.asarray(y, dtype=np.float64).reshape(-1, 1)
    q = np.asarray(quantiles, dtype=np.float64).reshape(1, -1)
    diff = y - np.asarray(q_pred, dtype=np.float64)
    return np.maximum(q * diff, (q - 1.0) * diff).mean(axis=0)


def mape_pct(y: np.ndarray, pred: np.ndarray) -> float:
    """Mean absolute percentage error (%) of ``pred`` against ``y`` (all ``y`` must be > 0)."""
    y = np.asarray(y, dtype=np.float64)
    if np.any(y <= 0):
        raise ConfigError("MAPE needs y > 0")
    return float(np.mean(np.abs(np.asarray(pred, dtype=np.float64) - y) / y) * 100.0)
