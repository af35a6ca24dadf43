"""DiPTree (GCOS execution-time predictor): exact splits and leaf quantiles on hand-built
data, quantile monotonicity (hypothesis), determinism, metrics and trace features."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greenroute.core.errors import ConfigError, DataFormatError
from greenroute.policies.gcos.diptree import (
    FEATURE_NAMES,
    DiPTree,
    mape_pct,
    pinball_loss,
    task_features,
    trace_training_set,
)

# feature 0 separates {1,2,3,4} from {10,20,30,40}; feature 1 alternates and splits worse
X2 = np.array([[0, 0], [0, 1], [0, 0], [0, 1], [1, 0], [1, 1], [1, 0], [1, 1]], dtype=float)
Y2 = np.array([1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0])


def test_one_split_and_leaf_quantiles_by_hand():
    t = DiPTree(quantiles=(0.5, 0.9), max_depth=1, min_leaf=2).fit(X2, Y2)
    assert t.feature_[0] == 0 and t.threshold_[0] == 0.5  # midpoint of 0 and 1
    assert t.n_leaves == 2 and t.depth == 1
    q = t.predict_quantiles(np.array([[0.0, 1.0], [1.0, 0.0]]))
    # linear quantiles of {1,2,3,4}: p50 = 2.5, p90 at position 2.7 -> 3.7; of {10..40}: 25, 37
    np.testing.assert_allclose(q, [[2.5, 3.7], [25.0, 37.0]], rtol=0, atol=1e-12)
    np.testing.assert_allclose(t.predict_mean(np.array([[0.0, 0.0], [1.0, 1.0]])), [2.5, 25.0])
    # one row as a 1-D vector gives one row of quantiles
    assert t.predict_quantiles(np.array([1.0, 1.0])).shape == (1, 2)


def test_threshold_is_the_midpoint_and_ties_go_left():
    x = np.array([[0.0], [0.0], [2.0], [2.0]])
    t = DiPTree(quantiles=(0.5,), max_depth=1, min_leaf=1).fit(x, np.array([1.0, 1.0, 5.0, 5.0]))
    assert t.threshold_[0] == 1.0
    np.testing.assert_array_equal(t.predict_quantiles(np.array([[1.0], [1.0 + 1e-9]]))[:, 0],
                                  [1.0, 5.0])  # fmt: skip


def test_depth_two_tree_by_hand():
    # four groups of two on one feature; log-target SSE picks 1.5 (10x gap) first, then 0.5, 2.5
    x = np.array([0, 0, 1, 1, 2, 2, 3, 3], dtype=float).reshape(-1, 1)
    y = np.array([1.0, 1.0, 2.0, 2.0, 20.0, 20.0, 40.0, 40.0])
    t = DiPTree(quantiles=(0.5,), max_depth=2, min_leaf=2).fit(x, y)
    assert t.threshold_[0] == 1.5 and t.n_leaves == 4 and t.depth == 2
    inner = sorted(float(t.threshold_[n]) for n in (t.left_[0], t.right_[0]))
    assert inner == [0.5, 2.5]
    got = t.predict_quantiles(np.array([[0.0], [1.0], [2.0], [3.0]]))[:, 0]
    np.testing.assert_array_equal(got, [1.0, 2.0, 20.0, 40.0])


def test_min_leaf_and_max_depth_stop_growth():
    # min_leaf 5 of 8 samples: no split; the root's quantiles are the whole sample's
    t = DiPTree(quantiles=(0.5,), max_depth=4, min_leaf=5).fit(X2, Y2)
    assert t.n_leaves == 1 and t.depth == 0
    assert t.predict_quantiles(X2[:1])[0, 0] == pytest.approx(np.median(Y2))  # 7.0
    assert DiPTree(max_depth=0, min_leaf=1).fit(X2, Y2).n_leaves == 1
    # a constant target has nothing to gain: one leaf
    assert DiPTree(min_leaf=1).fit(X2, np.full(8, 3.0)).n_leaves == 1


def test_raw_target_can_pick_another_split_than_log():
    # y = 1, 10, 11, 100 on x = 0..3. Squared error of log(y) after each cut (x <= 0.5, 1.5,
    # 2.5): 3.393, 5.086, 3.687 -> 0.5 (the tenfold jump 1 -> 10); of y: 5340, 4001, 60.7 -> 2.5
    x = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([1.0, 10.0, 11.0, 100.0])
    assert DiPTree(max_depth=1, min_leaf=1, log_target=True).fit(x, y).threshold_[0] == 0.5
    assert DiPTree(max_depth=1, min_leaf=1, log_target=False).fit(x, y).threshold_[0] == 2.5


def test_fit_is_deterministic():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, size=(400, 3)).astype(float)
    y = np.exp(rng.normal(size=400)) * (1 + x[:, 0])
    a = DiPTree(max_depth=5, min_leaf=5).fit(x, y)
    b = DiPTree(max_depth=5, min_leaf=5).fit(x.copy(), y.copy())
    for name in ("feature_", "threshold_", "left_", "right_", "leaf_count_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.predict_quantiles(x), b.predict_quantiles(x))
    assert a.leaf_count_.sum() == 400 and a.leaf_count_[a.left_ < 0].min() >= 5


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 60),
    d=st.integers(1, 3),
    qs=st.lists(st.floats(0.01, 0.99), min_size=1, max_size=4, unique=True),
    seed=st.integers(0, 2**31 - 1),
    min_leaf=st.integers(1, 6),
)
def test_quantiles_are_monotone_and_inside_the_leaf(n, d, qs, seed, min_leaf):
    qs = sorted(qs)
    if np.any(np.diff(qs) <= 0):
        return
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, size=(n, d)).astype(float)
    y = np.exp(rng.normal(size=n) * 2)
    t = DiPTree(quantiles=qs, max_depth=4, min_leaf=min_leaf).fit(x, y)
    pred = t.predict_quantiles(x)
    assert pred.shape == (n, len(qs))
    assert np.all(np.diff(pred, axis=1) >= 0)
    leaf = t.apply(x)
    for node in np.unique(leaf):
        yl = y[leaf == node]
        assert yl.size >= min(min_leaf, n)
        assert yl.min() <= pred[leaf == node].min() and pred[leaf == node].max() <= yl.max()


def test_bad_parameters_and_inputs_raise_config_errors():
    with pytest.raises(ConfigError, match="strictly increasing"):
        DiPTree(quantiles=(0.9, 0.5))
    with pytest.raises(ConfigError, match="strictly increasing"):
        DiPTree(quantiles=(0.5, 1.0))
    with pytest.raises(ConfigError, match="valid: linear"):
        DiPTree(quantile_method="bogus")
    with pytest.raises(ConfigError, match="y_s > 0"):
        DiPTree().fit(X2, np.zeros(8))
    with pytest.raises(ConfigError, match="not fitted"):
        DiPTree().predict_mean(X2)
    with pytest.raises(ConfigError, match="2 feature columns"):
        DiPTree(min_leaf=1).fit(X2, Y2).predict_mean(np.zeros((1, 3)))


def test_pinball_and_mape_by_hand():
    # y = 10, predictions 8 (p50) and 12 (p90): 0.5 * 2 = 1.0 and (0.9 - 1) * (-2) = 0.2
    np.testing.assert_allclose(pinball_loss([10.0], [[8.0, 12.0]], (0.5, 0.9)), [1.0, 0.2])
    assert mape_pct([10.0, 20.0], [11.0, 18.0]) == pytest.approx(10.0)
    with pytest.raises(ConfigError):
        mape_pct([0.0], [1.0])


def test_task_features_from_trace_columns():
    frame = pd.DataFrame({
        "predict_type": ["TXT_2_IMG", "IMG_2_IMG", "INPAINTING"],
        "predict_status": ["SUCCEED", "FAILED", "SUCCEED"],
        "exec_time_seconds": [32.0, 40.0, 0.0],
        "prompt_length": [63.0, np.nan, 5.0],
        "negative_prompt_length": [26.0, np.nan, np.nan],
        "num_images_per_prompt": [1.0, 8.0, np.nan],
        "num_inference_steps": [30.0, 40.0, np.nan],
        "checkpoint_model_version_id": ["M0042", "ckpt-x", None],
        "num_lora": [0, 2, 1],
    })  # fmt: skip
    x = task_features(frame)
    assert x.shape == (3, len(FEATURE_NAMES))
    np.testing.assert_array_equal(x[0], [42, 0, 30, 1, 30, 0, 63, 26])
    assert x[1, 0] >= 1_000_000 and list(x[1, 1:]) == [2, 40, 8, 320, 1, 0, 0]
    np.testing.assert_array_equal(x[2], [-1, 1, 30, 1, 30, 2, 5, 0])  # defaults filled in
    xs, ys = trace_training_set(frame)  # FAILED and 0 s rows dropped
    np.testing.assert_array_equal(ys, [32.0])
    assert xs.shape == (1, len(FEATURE_NAMES))
    minimal = task_features(pd.DataFrame({"checkpoint_model_version_id": ["M7"], "num_lora": [1]}))
    np.testing.assert_array_equal(minimal[0], [7, 1, 30, 1, 30, 0, 0, 0])
    with pytest.raises(DataFormatError, match="num_lora"):
        task_features(pd.DataFrame({"checkpoint_model_version_id": ["M1"]}))
    with pytest.raises(DataFormatError, match="valid: TXT_2_IMG"):
        task_features(frame.assign(predict_type=["VIDEO", "TXT_2_IMG", "TXT_2_IMG"]))


def test_bench_sim_service_tiny_run():
    from greenroute.bench.diptree import evaluate, sim_service_split

    split = sim_service_split(600, seed=1)
    assert split[0].shape == (480, 4) and np.all(split[1] > 0)
    rows = evaluate(split, (0.5, 0.9), max_depth=4, min_leaf=10)
    by = {r["predictor"]: r for r in rows}
    # the tree sees prompt, batch and hardware; the mean predictor sees nothing
    assert by["diptree"]["pinball_s"][0] < by["mean"]["pinball_s"][0]
    assert set(by) == {"mean", "diptree", "lightgbm"}
