"""Requests container, length models, workload generators and the embedded profiles."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.data.build_workload_profiles import (
    DEFAULT_OUT,
    build_profiles,
    main,
    render_profiles,
)
from greenroute.data.lengths import (
    LengthModel,
    fit_length_model,
    get_length_model,
    length_model_names,
    length_stats,
    load_workload_profiles,
)
from greenroute.data.requests import CLASS_DEFERRABLE, CLASS_INTERACTIVE, CLASS_NAMES, Requests
from greenroute.data.trace_replay import compress_to_window, requests_from_trace
from greenroute.data.traces import (
    AZURE_CODE_RELPATH,
    AZURE_CONV_RELPATH,
    VIDUR_ARXIV_RELPATH,
    load_azure_llm_trace,
    load_vidur_lengths,
)
from greenroute.data.workload import (
    AZURE_CODE_RATE_NOISE_SIGMA,
    AZURE_CONV_RATE_NOISE_SIGMA,
    DEFAULT_RATE_NOISE_SIGMA,
    WorkloadSpec,
    diurnal_profile,
    expected_rate_rps,
    generate_requests,
    sample_epoch_counts,
    sample_piece_counts,
)

MONDAY_UTC = pd.Timestamp("2024-03-04 00:00", tz="UTC")  # a Monday
TOKYO_MONDAY = pd.Timestamp("2024-03-04 00:00", tz="Asia/Tokyo")  # no DST in Tokyo


def _spec(**kw) -> WorkloadSpec:
    base = {
        "origins": ("US-CAL-CISO", "DE-LU", "SG"),
        "origin_timezones": (),
        "interactive_rps": (3.0, 2.0, 1.0),
        "deferrable_rps": (1.0, 0.5, 0.25),
    }
    base.update(kw)
    return WorkloadSpec(**base)


def _one_origin(tz: str = "UTC", rps: float = 1.0, defer: float = 0.0, **kw) -> WorkloadSpec:
    return WorkloadSpec(("site",), (tz,), (rps,), (defer,), **kw)


def _req(arrival, origin=None, cls=None, model=None) -> Requests:
    n = len(arrival)
    zeros = np.zeros(n, dtype=int)
    cls = zeros if cls is None else np.asarray(cls)
    return Requests(
        arrival_s=arrival,
        origin=zeros if origin is None else origin,
        cls=cls,
        model=zeros if model is None else model,
        prompt_tokens=np.arange(1, n + 1),
        output_tokens=np.full(n, 7),
        deadline_s=np.where(cls == CLASS_DEFERRABLE, np.asarray(arrival) + 10.0, np.inf),
    )


# ---------------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------------


def test_requests_container() -> None:
    r = _req([0.0, 1.0, 1.0, 5.0], origin=[0, 1, 0, 1], cls=[0, 1, 1, 0], model=[0, 0, 1, 1])
    assert len(r) == 4
    assert (r.arrival_s.dtype, r.origin.dtype, r.cls.dtype, r.model.dtype) == (
        np.float64,
        np.int32,
        np.int8,
        np.int16,
    )
    assert r.prompt_tokens.dtype == np.int32 and r.deadline_s.dtype == np.float64
    frame = r.to_frame()
    assert list(frame.columns) == [
        "arrival_s",
        "origin",
        "cls",
        "model",
        "prompt_tokens",
        "output_tokens",
        "deadline_s",
    ]
    assert frame["prompt_tokens"].tolist() == [1, 2, 3, 4]
    # take with unsorted indices re-sorts stably
    sub = r.take([3, 0, 2])
    assert sub.arrival_s.tolist() == [0.0, 1.0, 5.0]
    assert sub.prompt_tokens.tolist() == [1, 3, 4]
    assert len(r.take(r.cls == CLASS_DEFERRABLE)) == 2
    # concat keeps ties in part order
    both = Requests.concat([r.take([2]), r.take([1]), r.take([0])])
    assert both.arrival_s.tolist() == [0.0, 1.0, 1.0]
    assert both.prompt_tokens.tolist() == [1, 3, 2]
    assert len(Requests.concat([])) == 0
    with pytest.raises(ValueError, match="sorted"):
        _req([1.0, 0.0])
    with pytest.raises(ValueError, match="entries"):
        Requests([0.0], [0, 0], [0], [0], [1], [1], [np.inf])
    with pytest.raises(ValueError, match=">= 1"):
        Requests([0.0], [0], [0], [0], [0], [1], [np.inf])
    assert CLASS_NAMES[CLASS_INTERACTIVE] == "interactive"
    assert CLASS_NAMES[CLASS_DEFERRABLE] == "deferrable"


def test_counts_by_epoch_by_hand() -> None:
    arrival = [-5.0, 0.0, 59.999, 60.0, 60.0, 119.5, 120.0, 500.0]
    origin = [0, 0, 1, 1, 0, 1, 1, 0]
    cls = [0, 0, 1, 1, 0, 0, 0, 0]
    model = [0, 1, 0, 1, 0, 1, 0, 1]
    c = _req(arrival, origin, cls, model).counts_by_epoch(60.0, 2, 2, 2)
    assert c.dtype == np.int64 and c.shape == (2, 2, 2, 2)
    expected = np.zeros((2, 2, 2, 2), dtype=np.int64)
    expected[0, 0, 0, 1] = 1  # t=0
    expected[0, 1, 1, 0] = 1  # t=59.999
    expected[1, 1, 1, 1] = 1  # t=60
    expected[1, 0, 0, 0] = 1  # t=60
    expected[1, 1, 0, 1] = 1  # t=119.5; t=-5, 120 and 500 are outside the horizon
    np.testing.assert_array_equal(c, expected)


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.lists(st.floats(0.0, 1000.0, allow_nan=False), min_size=0, max_size=30),
        min_size=1,
        max_size=5,
    ),
    epoch_s=st.floats(1.0, 400.0),
    n_epochs=st.integers(0, 6),
)
def test_concat_and_counts_properties(parts, epoch_s, n_epochs) -> None:
    reqs = [_req(sorted(p), origin=np.arange(len(p)) % 3) for p in parts]
    merged = Requests.concat(reqs)
    assert len(merged) == sum(len(p) for p in parts)
    assert np.all(np.diff(merged.arrival_s) >= 0)
    counts = merged.counts_by_epoch(epoch_s, n_epochs, 3, 1)
    inside = np.sum(merged.arrival_s < n_epochs * epoch_s)
    assert counts.sum() == inside
    if len(merged):
        half = merged.take(np.arange(len(merged)) % 2 == 0)
        assert np.all(np.diff(half.arrival_s) >= 0)


# ---------------------------------------------------------------------------------------------
# Length models
# ---------------------------------------------------------------------------------------------


def test_length_model_closed_form() -> None:
    # cells: prompt 1..10 x output 5 (weight 3), prompt 11..20 x output 6..9 (weight 1)
    m = LengthModel(
        "toy",
        prompt_edges=np.array([1, 11, 21]),
        output_edges=np.array([5, 6, 10]),
        cell_prompt_bin=np.array([0, 1]),
        cell_output_bin=np.array([0, 1]),
        cell_weight=np.array([3.0, 1.0]),
    )
    assert m.mean_prompt_tokens == pytest.approx(0.75 * 5.5 + 0.25 * 15.5)
    assert m.mean_output_tokens == pytest.approx(0.75 * 5 + 0.25 * 7.5)
    # integers 1..10 carry 7.5 % each: the lower median is 7
    assert m.median_tokens("prompt") == 7
    assert m.median_tokens("output") == 5
    p, o = m.sample(200_000, np.random.default_rng(3))
    assert p.dtype == np.int32 and o.dtype == np.int32
    assert set(np.unique(p)) == set(range(1, 21))
    assert np.all((o == 5) == (p <= 10))
    assert p.mean() == pytest.approx(m.mean_prompt_tokens, rel=0.01)
    assert o.mean() == pytest.approx(m.mean_output_tokens, rel=0.01)
    lm = m.log_moments()
    lp, lo = np.log(p), np.log(o)
    assert lm["mean_log_prompt"] == pytest.approx(lp.mean(), abs=0.01)
    assert lm["log_corr"] == pytest.approx(np.corrcoef(lp, lo)[0, 1], abs=0.01)
    # a single cell has independent coordinates: correlation 0
    single = LengthModel("one", np.array([1, 5]), np.array([2, 4]), [0], [0], [1.0])
    assert single.log_moments()["log_corr"] == 0.0
    with pytest.raises(ConfigError):
        LengthModel("bad", np.array([0, 5]), np.array([2, 4]), [0], [0], [1.0])


@settings(max_examples=40, deadline=None)
@given(
    prompt=st.lists(st.integers(1, 20_000), min_size=1, max_size=300),
    seed=st.integers(0, 2**32 - 1),
)
def test_fit_length_model_properties(prompt, seed) -> None:
    p = np.asarray(prompt)
    o = (p * 7919) % 997 + 1  # some deterministic partner lengths
    model, counts = fit_length_model("fit", p, o)
    assert counts.sum() == p.size
    # deciles are bin edges, so the model's lower median is the data's lower median
    assert model.median_tokens("prompt") == np.quantile(p, 0.5, method="lower")
    assert model.median_tokens("output") == np.quantile(o, 0.5, method="lower")
    sp, so = model.sample(500, np.random.default_rng(seed))
    assert sp.min() >= 1 and so.min() >= 1
    assert sp.max() <= p.max() and so.max() <= o.max()


def test_embedded_length_models_consistent() -> None:
    assert length_model_names() == ("azure-code", "azure-conv", "vidur-arxiv")
    stored = load_workload_profiles()["length_models"]
    for name in length_model_names():
        model = get_length_model(name)
        exact = model.exact_stats()
        for key, value in stored[name]["model_stats"].items():
            assert exact[key] == pytest.approx(value, rel=1e-5, abs=1e-6), (name, key)
        trace = stored[name]["trace_stats"]
        for key in ("mean_prompt_tokens", "mean_output_tokens"):
            assert exact[key] == pytest.approx(trace[key], rel=0.03), (name, key)
        for key in ("median_prompt_tokens", "median_output_tokens"):
            assert exact[key] == trace[key], (name, key)
        assert exact["log_corr"] == pytest.approx(trace["log_corr"], abs=0.05)
    with pytest.raises(UnknownNameError, match="azure-code, azure-conv, vidur-arxiv"):
        get_length_model("sharegpt")


LENGTH_FILES = {
    "azure-code": (AZURE_CODE_RELPATH, load_azure_llm_trace),
    "azure-conv": (AZURE_CONV_RELPATH, load_azure_llm_trace),
    "vidur-arxiv": (VIDUR_ARXIV_RELPATH, load_vidur_lengths),
}


@pytest.mark.realdata
@pytest.mark.parametrize("name", sorted(LENGTH_FILES))
def test_length_models_reproduce_traces(data_dir: Path, name: str) -> None:
    relpath, loader = LENGTH_FILES[name]
    df = loader(data_dir / relpath)
    trace = length_stats(df["prompt_tokens"].to_numpy(), df["output_tokens"].to_numpy())
    model = get_length_model(name)
    # exact moments of the model
    assert model.mean_prompt_tokens == pytest.approx(trace["mean_prompt_tokens"], rel=0.03)
    assert model.mean_output_tokens == pytest.approx(trace["mean_output_tokens"], rel=0.03)
    # a large sample
    p, o = model.sample(200_000, np.random.default_rng(11))
    sample = length_stats(p, o)
    for key in ("mean_prompt_tokens", "median_prompt_tokens"):
        assert sample[key] == pytest.approx(trace[key], rel=0.03), key
    for key in ("mean_output_tokens", "median_output_tokens"):
        assert sample[key] == pytest.approx(trace[key], rel=0.03), key
    assert sample["log_corr"] == pytest.approx(trace["log_corr"], abs=0.05)
    assert p.max() <= df["prompt_tokens"].max() and o.max() <= df["output_tokens"].max()


# ---------------------------------------------------------------------------------------------
# Spec and embedded shapes
# ---------------------------------------------------------------------------------------------


def test_workload_spec_validation() -> None:
    spec = _spec()
    assert spec.origin_timezones == ("America/Los_Angeles", "Europe/Berlin", "Asia/Singapore")
    assert spec.rate_noise_sigma == DEFAULT_RATE_NOISE_SIGMA == AZURE_CONV_RATE_NOISE_SIGMA
    assert spec.base_rps().tolist() == [[3.0, 1.0], [2.0, 0.5], [1.0, 0.25]]
    lists = WorkloadSpec(["a"], ["UTC"], [1], [0])
    assert lists.origins == ("a",) and lists.interactive_rps == (1.0,)
    with pytest.raises(ConfigError, match="expected 3"):
        _spec(deferrable_rps=(1.0,))
    with pytest.raises(UnknownNameError, match="nowhere"):
        _spec(origins=("nowhere", "DE-LU", "SG"))
    with pytest.raises(ConfigError, match="time zone"):
        _spec(origin_timezones=("UTC", "Mars/Olympus", "UTC"))
    with pytest.raises(ConfigError, match="sum to 1"):
        _spec(models=("llama2-70b", "llama2-7b"), model_mix=(0.5, 0.6))
    with pytest.raises(UnknownNameError):
        _spec(models=("gpt-5",))
    with pytest.raises(UnknownNameError, match="alibaba-genai"):
        _spec(diurnal="weekly")
    with pytest.raises(UnknownNameError):
        _spec(interactive_lengths="nope")
    with pytest.raises(ConfigError):
        _spec(interactive_rps=(-1.0, 1.0, 1.0))
    with pytest.raises(ConfigError):
        _spec(deadline_slack_s=(5.0, 1.0))
    with pytest.raises(ConfigError):
        _spec(rate_noise_sigma=-0.1)
    with pytest.raises(ConfigError):
        _spec(diurnal_flat_share=1.5)


def test_embedded_diurnal_and_noise() -> None:
    profiles = load_workload_profiles()
    shape = diurnal_profile("alibaba-genai")
    assert shape.shape == (168,) and np.all(shape >= 0)
    assert shape.mean() == pytest.approx(1.0, abs=1e-6)
    assert np.array_equal(diurnal_profile("flat"), np.ones(168))
    info = profiles["diurnal"]["alibaba-genai"]["stats"]
    # the aligned shape peaks on Tuesday 16:00 local; weekdays carry ~3.6x the weekend load
    assert info["peak_hour_of_week"] == int(np.argmax(shape)) == 24 + 16
    # recomputed from the 168 shipped values (Monday first): mean weekday / mean weekend day
    days = shape.reshape(7, 24).mean(axis=1)
    ratio = days[:5].mean() / days[5:].mean()
    assert info["weekday_to_weekend"] == pytest.approx(ratio, rel=1e-5)  # stored to 6 digits
    assert ratio == pytest.approx(3.5768, rel=1e-4)
    assert days[:5].min() > days[5] > days[6]
    # the literal timestamps put the daily peak at 23:00 and the trough at noon
    raw = diurnal_profile("alibaba-genai-raw")
    assert np.argmax(raw) % 24 == 23 and np.argmin(raw) % 24 == 12
    # the aligned shape is the literal one moved by 17 hours (modulo the ramp-up trimming)
    moved = np.roll(raw, 17)
    assert np.corrcoef(moved, shape)[0, 1] > 0.95
    noise = profiles["rate_noise"]
    assert noise["default"] == "azure-conv"
    assert noise["azure-conv"]["sigma"] == AZURE_CONV_RATE_NOISE_SIGMA
    assert noise["azure-code"]["sigma"] == AZURE_CODE_RATE_NOISE_SIGMA
    # closed form: sigma^2 = ln(1 + (var - mean) / mean^2)
    conv = noise["azure-conv"]
    mean, var = conv["mean_per_minute"], conv["var_per_minute"]
    assert math.sqrt(math.log1p((var - mean) / mean**2)) == pytest.approx(conv["sigma"], abs=1e-4)


def test_expected_rate_closed_form() -> None:
    # flat shape: exactly the base rate in every epoch, even for epochs that cut minutes
    spec = _spec(diurnal="flat")
    rate = expected_rate_rps(spec, "2024-01-01", 450.5, 7)
    np.testing.assert_allclose(rate, np.broadcast_to(spec.base_rps(), (7, 3, 2)), rtol=1e-12)
    # hourly epochs from Monday 00:00 local reproduce the profile hour by hour
    shape = diurnal_profile("alibaba-genai")
    tokyo = _one_origin("Asia/Tokyo", rps=2.0, defer=1.0, diurnal_flat_share=0.25)
    got = expected_rate_rps(tokyo, TOKYO_MONDAY, 3600.0, 168)
    np.testing.assert_allclose(got[:, 0, 0], 2.0 * (0.25 + 0.75 * shape), rtol=1e-12)
    np.testing.assert_allclose(got[:, 0, 1], 0.5 * got[:, 0, 0], rtol=1e-12)
    # same UTC start in UTC: the Tokyo curve is this one 9 hours later
    utc = expected_rate_rps(_one_origin("UTC", rps=2.0), TOKYO_MONDAY, 3600.0, 168)
    np.testing.assert_allclose(utc[:, 0, 0], 2.0 * np.roll(shape, 9), rtol=1e-12)
    # daylight saving: 15:00 UTC is 16:00 in Berlin before 2024-03-31 and 17:00 after
    berlin = _one_origin("Europe/Berlin")
    for day, local_hour in (("2024-04-01", 17), ("2024-03-25", 16)):
        r = expected_rate_rps(berlin, f"{day} 15:00", 3600.0, 1)[0, 0, 0]
        assert r == pytest.approx(shape[local_hour])  # both days are Mondays


# ---------------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------------


def test_generate_requests_invariants() -> None:
    spec = _spec(models=("llama2-70b", "llama2-7b"), model_mix=(0.7, 0.3), rate_noise_sigma=0.0)
    duration = 6 * 3600.0
    r = generate_requests(spec, "2024-03-05 06:00", duration, seed=7)
    assert np.all(np.diff(r.arrival_s) >= 0)
    assert r.arrival_s.min() >= 0 and r.arrival_s.max() < duration
    assert r.prompt_tokens.min() >= 1 and r.output_tokens.min() >= 1
    inter = r.cls == CLASS_INTERACTIVE
    assert np.all(np.isinf(r.deadline_s[inter]))
    slack = r.deadline_s[~inter] - r.arrival_s[~inter]
    assert slack.min() >= 2 * 3600 and slack.max() <= 12 * 3600
    assert slack.mean() == pytest.approx(7 * 3600, rel=0.02)
    # counts per origin and class inside a 99.9 % Poisson interval of the expected count
    expected = expected_rate_rps(spec, "2024-03-05 06:00", duration, 1)[0] * duration
    got = r.counts_by_epoch(duration, 1, 3, 2)[0].sum(axis=-1)
    assert got.sum() == len(r)
    lo, hi = stats.poisson.interval(0.999, expected)
    assert np.all((lo <= got) & (got <= hi)), (got, expected)
    # model mix 70/30
    share_7b = np.mean(r.model == 1)
    sd = math.sqrt(0.3 * 0.7 / len(r))
    assert abs(share_7b - 0.3) < 4 * sd
    # lengths follow the class's model
    conv = get_length_model("azure-conv")
    assert r.output_tokens[inter].mean() == pytest.approx(conv.mean_output_tokens, rel=0.1)
    vidur = get_length_model("vidur-arxiv")
    assert r.prompt_tokens[~inter].mean() == pytest.approx(vidur.mean_prompt_tokens, rel=0.05)


def test_generate_requests_deterministic() -> None:
    spec = _spec()
    a = generate_requests(spec, MONDAY_UTC, 3600.0, seed=1)
    b = generate_requests(spec, MONDAY_UTC.to_pydatetime(), 3600.0, seed=1)
    c = generate_requests(spec, MONDAY_UTC, 3600.0, seed=2)
    assert len(a) > 1000
    for name in ("arrival_s", "origin", "cls", "model", "prompt_tokens", "output_tokens"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.deadline_s, b.deadline_s)
    assert len(a) != len(c) or not np.array_equal(a.arrival_s, c.arrival_s)
    assert not np.array_equal(a.prompt_tokens[:100], c.prompt_tokens[:100])
    assert len(generate_requests(spec, MONDAY_UTC, 0.0, seed=1)) == 0


def test_diurnal_peak_to_trough_over_a_week() -> None:
    shape = diurnal_profile("alibaba-genai")
    share = 0.2
    mult = share + (1 - share) * shape
    spec = _one_origin("Asia/Tokyo", rps=2.0, rate_noise_sigma=0.0, diurnal_flat_share=share)
    week = 7 * 86400.0
    r = generate_requests(spec, TOKYO_MONDAY, week, seed=5)
    counts = np.bincount((r.arrival_s // 3600).astype(int), minlength=168)
    expected = 2.0 * 3600 * mult
    assert counts.max() / counts.min() == pytest.approx(mult.max() / mult.min(), rel=0.1)
    assert np.argmax(counts) == np.argmax(mult)
    chi2 = np.sum((counts - expected) ** 2 / expected)
    assert chi2 < stats.chi2.ppf(0.999, df=168)
    # without a flat share the measured shape has idle hours: no arrivals at all there
    spec0 = _one_origin("Asia/Tokyo", rps=2.0, rate_noise_sigma=0.0)
    r0 = generate_requests(spec0, TOKYO_MONDAY, week, seed=5)
    c0 = np.bincount((r0.arrival_s // 3600).astype(int), minlength=168)
    assert np.all(c0[shape == 0] == 0) and np.sum(shape == 0) > 0


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    epoch_min=st.sampled_from([1, 2, 15]),
    n_epochs=st.integers(1, 8),
    sigma=st.sampled_from([0.0, 0.2126, 0.86]),
)
def test_fluid_counts_equal_discrete_counts(seed, epoch_min, n_epochs, sigma) -> None:
    spec = _spec(models=("llama2-70b", "llama2-7b"), model_mix=(0.5, 0.5), rate_noise_sigma=sigma)
    epoch_s = 60.0 * epoch_min
    start = "2024-06-03 14:30"
    fluid = sample_epoch_counts(spec, start, epoch_s, n_epochs, seed)
    discrete = generate_requests(spec, start, epoch_s * n_epochs, seed)
    np.testing.assert_array_equal(fluid, discrete.counts_by_epoch(epoch_s, n_epochs, 3, 2))
    assert fluid.sum() == len(discrete)


@pytest.mark.parametrize("epoch_s", [120.0, 100.0])
def test_piece_counts_are_the_requests_minute_by_minute(epoch_s: float) -> None:
    # the pieces tile the horizon at every minute and epoch boundary (100 s epochs: 0, 60, 100,
    # 120, 180, 200, ...) and the epochs sum them; with whole-minute epochs each piece's counts
    # are the generated requests that arrive in it (the requests' pieces are the minutes, so
    # 100 s epochs draw other pieces from the same streams)
    spec = _spec(models=("llama2-70b", "llama2-7b"), model_mix=(0.5, 0.5))
    start, n_epochs = "2024-06-03 14:30", 9
    pieces = sample_piece_counts(spec, start, epoch_s, n_epochs, seed=11)
    horizon = epoch_s * n_epochs
    edges = np.union1d(np.arange(0.0, horizon + 1, 60.0), np.arange(0.0, horizon + 1, epoch_s))
    edges = edges[edges <= horizon]
    np.testing.assert_array_equal(pieces.start_s, edges[:-1])
    np.testing.assert_array_equal(pieces.length_s, np.diff(edges))
    epoch = np.searchsorted(np.arange(n_epochs) * epoch_s, pieces.start_s, side="right") - 1
    per_epoch = np.zeros((n_epochs, 3, 2, 2), dtype=np.int64)
    np.add.at(per_epoch, epoch, pieces.counts)
    np.testing.assert_array_equal(
        per_epoch, sample_epoch_counts(spec, start, epoch_s, n_epochs, seed=11)
    )
    assert pieces.counts.sum() > 500  # there are arrivals to place
    if epoch_s % 60.0 == 0.0:
        req = generate_requests(spec, start, horizon, seed=11)
        piece = np.searchsorted(edges, req.arrival_s, side="right") - 1
        by_hand = np.zeros_like(pieces.counts)
        np.add.at(by_hand, (piece, req.origin, req.cls, req.model), 1)
        np.testing.assert_array_equal(pieces.counts, by_hand)
    assert sample_piece_counts(spec, start, epoch_s, 0, seed=11).counts.shape == (0, 3, 2, 2)


@pytest.mark.parametrize("epoch_s", [900.0, 450.5])
def test_sample_epoch_counts_mean(epoch_s: float) -> None:
    spec = _spec(models=("llama2-70b", "llama2-7b"), model_mix=(0.8, 0.2))
    n_epochs = round(3 * 86400 / epoch_s)
    counts = sample_epoch_counts(spec, MONDAY_UTC, epoch_s, n_epochs, seed=3)
    assert counts.shape == (n_epochs, 3, 2, 2) and counts.dtype == np.int64
    expected = expected_rate_rps(spec, MONDAY_UTC, epoch_s, n_epochs) * epoch_s
    # variance of a total: sum of per-minute lambda plus lambda^2 (exp(sigma^2) - 1)
    per_min = expected_rate_rps(spec, MONDAY_UTC, 60.0, int(n_epochs * epoch_s // 60)) * 60.0
    var = per_min.sum(0) + (per_min**2).sum(0) * math.expm1(spec.rate_noise_sigma**2)
    got = counts.sum(axis=(0, 3))
    z = (got - expected.sum(0)) / np.sqrt(var)
    assert np.all(np.abs(z) < 4.5), z
    # the model split follows the mix
    assert counts[..., 1].sum() / counts.sum() == pytest.approx(0.2, abs=0.005)


def test_rate_noise_reproduces_calibrated_dispersion() -> None:
    # flat rate: per-minute counts of the generator give back sigma by the same estimator
    spec = _one_origin(rps=100.0, diurnal="flat")
    n = sample_epoch_counts(spec, MONDAY_UTC, 60.0, 20_000, seed=9)[:, 0, 0, 0].astype(float)
    mean, var = n.mean(), n.var(ddof=1)
    sigma = math.sqrt(math.log1p((var - mean) / mean**2))
    assert sigma == pytest.approx(AZURE_CONV_RATE_NOISE_SIGMA, rel=0.05)
    assert mean == pytest.approx(6000.0, rel=0.01)


def test_generator_volume_and_fluid_month_counts() -> None:
    """A million requests and a 10-origin fluid month come out at the expected volume (their
    speed is measured by ``make bench``, not here)."""
    spec = _spec(
        interactive_rps=(150.0, 100.0, 50.0), deferrable_rps=(10.0, 5.0, 5.0), diurnal="flat"
    )
    r = generate_requests(spec, MONDAY_UTC, 3125.0, seed=0)
    # 320 req/s x 3125 s = 1,000,000 expected; Poisson + minute noise: well within 5 %
    assert 0.95e6 < len(r) < 1.05e6
    # fluid month: 31 days x 10 origins at 15-min epochs, thousands of req/s
    ten = WorkloadSpec(
        origins=tuple(f"o{i}" for i in range(10)),
        origin_timezones=("UTC", "Asia/Tokyo", "Europe/Berlin", "America/New_York") * 2
        + ("Asia/Kolkata", "Australia/Sydney"),
        interactive_rps=(3000.0,) * 10,
        deferrable_rps=(1000.0,) * 10,
        models=("llama2-70b", "llama2-7b"),
        model_mix=(0.6, 0.4),
    )
    month = sample_epoch_counts(ten, "2024-01-01", 900.0, 31 * 96, seed=1)
    assert month.shape == (2976, 10, 2, 2)
    # 31 days are not whole weeks: compare with the noise-free expectation, not the base rate
    expected = expected_rate_rps(ten, "2024-01-01", 900.0, 31 * 96) * 900.0
    assert month.sum() == pytest.approx(expected.sum(), rel=0.002)
    np.testing.assert_allclose(month.sum(axis=(0, 3)), expected.sum(axis=0), rtol=0.01)


# ---------------------------------------------------------------------------------------------
# Trace replay
# ---------------------------------------------------------------------------------------------


@pytest.mark.realdata
def test_compress_code_trace_to_window(data_dir: Path) -> None:
    df = load_azure_llm_trace(data_dir / AZURE_CODE_RELPATH)
    r = compress_to_window(df, 5000, 1000.0)  # seed 002 section VI.B
    assert len(r) == 5000
    assert r.arrival_s[0] == 0.0 and r.arrival_s[-1] == 1000.0
    np.testing.assert_array_equal(r.prompt_tokens, df["prompt_tokens"].to_numpy()[:5000])
    np.testing.assert_array_equal(r.output_tokens, df["output_tokens"].to_numpy()[:5000])
    assert np.all(np.isinf(r.deadline_s)) and np.all(r.cls == CLASS_INTERACTIVE)
    span = df["arrival_s"].iloc[4999]
    scaled = requests_from_trace(df, first_n=5000, time_scale=1000.0 / span, start_offset_s=50.0)
    assert scaled.arrival_s[0] == 50.0
    assert scaled.arrival_s[-1] == pytest.approx(1050.0, abs=1e-9)
    np.testing.assert_allclose(scaled.arrival_s - 50.0, r.arrival_s, atol=1e-9)
    full = requests_from_trace(df, origin=2, model=1)
    assert len(full) == 8819 and np.all(full.origin == 2) and np.all(full.model == 1)
    assert full.arrival_s[-1] == pytest.approx(3435.948056, abs=1e-6)
    defer = requests_from_trace(df, cls=CLASS_DEFERRABLE, deadline_slack_s=3600.0, first_n=10)
    np.testing.assert_allclose(defer.deadline_s - defer.arrival_s, 3600.0)
    with pytest.raises(ConfigError, match="deadline_slack_s"):
        requests_from_trace(df, cls=CLASS_DEFERRABLE)


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.floats(0.0, 100.0, allow_nan=False), min_size=1, max_size=50),
    window_s=st.floats(1e-3, 1e6, allow_nan=False),
)
def test_compress_to_window_spans_exactly(gaps, window_s) -> None:
    arrival = np.concatenate([[0.0], np.cumsum(gaps)])
    if arrival[-1] == 0.0:
        arrival[-1] = 1.0
    df = pd.DataFrame(
        {"arrival_s": arrival, "prompt_tokens": 1 + np.arange(arrival.size), "output_tokens": 1}
    )
    r = compress_to_window(df, arrival.size, window_s)
    assert r.arrival_s[0] == 0.0 and r.arrival_s[-1] == window_s
    assert np.all(np.diff(r.arrival_s) >= 0)


# ---------------------------------------------------------------------------------------------
# The embedded file regenerates from the real data
# ---------------------------------------------------------------------------------------------


@pytest.mark.realdata
def test_embedded_profiles_regenerate_identically(data_dir: Path, tmp_path: Path) -> None:
    text = render_profiles(build_profiles(data_dir))
    assert text == DEFAULT_OUT.read_text(encoding="utf-8")
    assert len(text.encode()) < 200_000
    out = tmp_path / "profiles.json"
    assert main(["--data-dir", str(data_dir), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == text
    assert main(["--data-dir", str(data_dir), "--out", str(out), "--check"]) == 0
    out.write_text("{}", encoding="utf-8")
    assert main(["--data-dir", str(data_dir), "--out", str(out), "--check"]) == 1
    parsed = json.loads(text)
    assert parsed["sources"]["llm_traces/azure_llm_2023_code.csv"]["rows"] == 8819
