"""Trace loaders: real files (values from shared/data/PROVENANCE.md §1) and broken files."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenroute.core.errors import DataFormatError
from greenroute.data.traces import (
    ALIBABA_GENAI_RELPATH,
    AZURE_CODE_RELPATH,
    AZURE_CONV_RELPATH,
    VIDUR_ARXIV_RELPATH,
    load_alibaba_genai_trace,
    load_azure_llm_trace,
    load_vidur_lengths,
)

# ---------------------------------------------------------------------------------------------
# Real files
# ---------------------------------------------------------------------------------------------


@pytest.mark.realdata
def test_azure_code_trace(data_dir: Path) -> None:
    df = load_azure_llm_trace(data_dir / AZURE_CODE_RELPATH)
    assert list(df.columns) == ["timestamp", "arrival_s", "prompt_tokens", "output_tokens"]
    assert len(df) == 8819
    assert df["timestamp"].dtype == np.dtype("datetime64[ns]")
    assert df["arrival_s"].dtype == np.float64
    assert df["prompt_tokens"].dtype == np.int32 and df["output_tokens"].dtype == np.int32
    # first and last rows of the file (the last line has no trailing newline)
    assert df["timestamp"].iloc[0] == pd.Timestamp("2023-11-16 18:17:03.9799600")
    assert df["timestamp"].iloc[-1] == pd.Timestamp("2023-11-16 19:14:19.9280160")
    assert (df["prompt_tokens"].iloc[0], df["output_tokens"].iloc[0]) == (4808, 10)
    assert (df["prompt_tokens"].iloc[-1], df["output_tokens"].iloc[-1]) == (549, 173)
    assert df["arrival_s"].iloc[0] == 0.0
    assert df["arrival_s"].iloc[-1] == pytest.approx(3435.948056, abs=1e-6)  # 57 min 15.9 s
    assert np.all(np.diff(df["arrival_s"].to_numpy()) >= 0)
    # PROVENANCE: context median 1,469, mean 2,048, max 7,437; generated median 13, mean 28
    assert df["prompt_tokens"].median() == 1469
    assert df["prompt_tokens"].mean() == pytest.approx(2047.85, abs=0.01)
    assert df["prompt_tokens"].max() == 7437
    assert df["output_tokens"].median() == 13
    assert df["output_tokens"].mean() == pytest.approx(27.88, abs=0.01)
    assert df["output_tokens"].max() == 1899


@pytest.mark.realdata
def test_azure_conv_trace(data_dir: Path) -> None:
    df = load_azure_llm_trace(data_dir / AZURE_CONV_RELPATH)
    assert len(df) == 19366
    assert df["timestamp"].iloc[0] == pd.Timestamp("2023-11-16 18:15:46.6805900")
    assert df["timestamp"].iloc[-1] == pd.Timestamp("2023-11-16 19:14:08.4025270")
    assert (df["prompt_tokens"].iloc[0], df["output_tokens"].iloc[0]) == (374, 44)
    assert df["arrival_s"].iloc[1] == pytest.approx(4.314579, abs=1e-6)
    assert df["arrival_s"].iloc[0] == 0.0
    assert np.all(np.diff(df["arrival_s"].to_numpy()) >= 0)
    # PROVENANCE: context median 1,020, mean 1,155, max 14,050; generated 129 / 211 / 1,000
    assert df["prompt_tokens"].median() == 1020
    assert df["prompt_tokens"].mean() == pytest.approx(1154.70, abs=0.01)
    assert df["prompt_tokens"].max() == 14050
    assert df["output_tokens"].median() == 129
    assert df["output_tokens"].mean() == pytest.approx(211.13, abs=0.01)
    assert df["output_tokens"].max() == 1000
    # about 5.5 req/s (PROVENANCE)
    assert len(df) / df["arrival_s"].iloc[-1] == pytest.approx(5.53, abs=0.01)


@pytest.mark.realdata
def test_vidur_lengths(data_dir: Path) -> None:
    df = load_vidur_lengths(data_dir / VIDUR_ARXIV_RELPATH)
    assert list(df.columns) == ["prompt_tokens", "output_tokens"]
    assert len(df) == 28257
    assert df["prompt_tokens"].median() == 2730
    assert df["prompt_tokens"].max() == 4054
    assert df["output_tokens"].median() == 167
    assert (df["prompt_tokens"].iloc[0], df["output_tokens"].iloc[0]) == (3772, 54)
    assert (df["prompt_tokens"].iloc[-1], df["output_tokens"].iloc[-1]) == (3178, 313)
    # vidur filtered its trace to prompt + decode <= 4,096 tokens
    assert (df["prompt_tokens"] + df["output_tokens"]).max() == 4096


@pytest.mark.realdata
def test_alibaba_genai_trace(data_dir: Path) -> None:
    df = load_alibaba_genai_trace(data_dir / ALIBABA_GENAI_RELPATH)
    assert len(df) == 26823
    assert {"timestamp", "status"} <= set(df.columns)
    assert df["timestamp"].iloc[0] == pd.Timestamp("2024-11-15 16:57:50")
    assert df["timestamp"].iloc[-1] == pd.Timestamp("2024-12-08 17:33:57")
    assert df["timestamp"].is_monotonic_increasing
    counts = df["status"].value_counts().to_dict()
    assert counts == {"SUCCEED": 26392, "FAILED": 398, "PENDING": 30, "PROCESSING": 3}
    assert df["exec_time_s"].iloc[0] == 32.0
    assert df["predict_type"].iloc[0] == "TXT_2_IMG"


# ---------------------------------------------------------------------------------------------
# Broken files
# ---------------------------------------------------------------------------------------------

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
ROWS = [
    "2023-11-16 18:17:03.9799600,4808,10",  # line 2
    "2023-11-16 18:17:04.0319600,3180,8",  # line 3
    "2023-11-16 18:17:05.1000000,100,20",  # line 4
    "2023-11-16 18:17:06.2000000,200,30",  # line 5
]


def _write(tmp_path: Path, lines: list[str], name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines), encoding="utf-8")  # no trailing newline, like the files
    return path


def _with(row: int, text: str) -> list[str]:
    rows = list(ROWS)
    rows[row] = text
    return [HEADER, *rows]


def _expect_error(path: Path, line: int | None, fragment: str, loader=load_azure_llm_trace):
    with pytest.raises(DataFormatError) as info:
        loader(path)
    err = info.value
    assert err.line == line
    assert err.path == str(path)
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert str(err).startswith(where), str(err)
    assert fragment in str(err)
    # no pandas/numpy exception chained into the message or traceback
    assert err.__cause__ is None
    assert err.__context__ is None or err.__suppress_context__
    return err


def test_valid_small_file_without_trailing_newline(tmp_path: Path) -> None:
    df = load_azure_llm_trace(_write(tmp_path, [HEADER, *ROWS]))
    assert len(df) == 4
    assert df["arrival_s"].tolist() == pytest.approx([0.0, 0.052, 1.12004, 2.22004])
    assert df["output_tokens"].tolist() == [10, 8, 20, 30]


@pytest.mark.parametrize(
    ("lines", "line", "fragment"),
    [
        pytest.param(
            _with(2, "2023-11-16 18:17:05.1000000,100"), 4, "missing value", id="truncated"
        ),
        pytest.param([HEADER, *ROWS[:3], "2023-11-16 18:1"], 5, "timestamp", id="cut-last-line"),
        pytest.param(_with(1, "2023-11-16 18:17:04.0319600,-5,8"), 3, "negative", id="negative"),
        pytest.param(_with(1, "2023-11-31 18:17:04.0319600,5,8"), 3, "unparseable", id="bad-ts"),
        pytest.param(_with(2, "2023-11-16 18:17:04.0000000,5,8"), 4, "not sorted", id="unsorted"),
        pytest.param(_with(3, "2023-11-16 18:17:06.2000000,200,NaN"), 5, "integer", id="nan"),
        pytest.param(_with(0, "2023-11-16 18:17:03.9799600,12.5,1"), 2, "integer", id="float"),
        pytest.param(_with(1, "2023-11-16 18:17:04.0319600,1,2,3"), 3, "malformed", id="extra"),
        pytest.param(_with(0, "2023-11-16 18:17:03.9799600,1,2,3"), 2, "malformed", id="extra-1"),
        pytest.param(_with(2, ""), 4, "missing value", id="blank-line"),
        pytest.param(
            _with(1, "2023-11-16 18:17:04.0319600,9999999999,8"), 3, "too large", id="big"
        ),
        pytest.param([HEADER], 2, "no data rows", id="header-only"),
        pytest.param(
            ["TIMESTAMP,ContextTokens", *(r.rsplit(",", 1)[0] for r in ROWS)],
            1,
            "missing column(s) GeneratedTokens; found: TIMESTAMP, ContextTokens",
            id="missing-column",
        ),
    ],
)
def test_azure_bad_files(tmp_path: Path, lines: list[str], line: int, fragment: str) -> None:
    _expect_error(_write(tmp_path, lines), line, fragment)


def test_first_offending_row_wins(tmp_path: Path) -> None:
    rows = list(ROWS)
    rows[3] = "garbage,1,1"  # line 5
    rows[1] = "2023-11-16 18:17:04.0319600,1,-1"  # line 3
    _expect_error(_write(tmp_path, [HEADER, *rows]), 3, "negative")
    # a defect above a row the CSV parser rejects (too many fields) is still the one reported
    rows = [*ROWS[:2], "2023-11-16 18:17:05.1000000,1,x", "2023-11-16 18:17:06.2000000,1,2,3"]
    _expect_error(_write(tmp_path, [HEADER, *rows], "b.csv"), 4, "not an integer")
    rows[2] = ROWS[2]
    _expect_error(_write(tmp_path, [HEADER, *rows], "c.csv"), 5, "Expected 3 fields in line 5")


def test_unreadable_files(tmp_path: Path) -> None:
    _expect_error(_write(tmp_path, [""], "empty.csv"), None, "empty file")
    _expect_error(tmp_path / "absent.csv", None, "file not found")
    blob = gzip.compress(("\n".join([HEADER, *ROWS]) + "\n").encode())
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(blob[: len(blob) // 2])
    _expect_error(cut, None, "cannot read file")


def test_vidur_and_alibaba_bad_files(tmp_path: Path) -> None:
    vidur = _write(tmp_path, ["num_prefill_tokens,num_total_tokens", "10,20"], "v.csv")
    _expect_error(vidur, 1, "missing column(s) num_decode_tokens", load_vidur_lengths)
    vidur = _write(tmp_path, ["num_prefill_tokens,num_decode_tokens", "10,20", "5,x"], "v2.csv")
    _expect_error(vidur, 3, "not an integer", load_vidur_lengths)
    header = "gmt_create,predict_type,predict_status,exec_time_seconds"
    rows = [header, "2024-11-15 16:57:50,TXT_2_IMG,SUCCEED,32.0", "2024-11-15 16:57:49,A,B,1.0"]
    _expect_error(_write(tmp_path, rows, "a.csv"), 3, "not sorted", load_alibaba_genai_trace)
    rows[2] = "2024-11-15 16:58,A,B,1.0"
    _expect_error(_write(tmp_path, rows, "b.csv"), 3, "unparseable", load_alibaba_genai_trace)
    rows[2] = "2024-11-15 16:58:00,A,B,-1"
    _expect_error(_write(tmp_path, rows, "c.csv"), 3, "duration", load_alibaba_genai_trace)


# ---------------------------------------------------------------------------------------------
# Properties: round trip and the line number of an injected defect
# ---------------------------------------------------------------------------------------------


@st.composite
def _traces(draw):
    n = draw(st.integers(1, 40))
    steps_100ns = draw(st.lists(st.integers(0, 10**8), min_size=n, max_size=n))
    prompt = draw(st.lists(st.integers(0, 50_000), min_size=n, max_size=n))
    output = draw(st.lists(st.integers(0, 5_000), min_size=n, max_size=n))
    return np.cumsum(steps_100ns), prompt, output


def _azure_lines(ticks, prompt, output) -> list[str]:
    base = pd.Timestamp("2023-11-16 18:00:00")
    lines = [HEADER]
    for t, p, o in zip(ticks, prompt, output, strict=True):
        ts = base + pd.Timedelta(int(t) * 100, unit="ns")
        lines.append(f"{ts:%Y-%m-%d %H:%M:%S}.{ts.microsecond:06d}{ts.nanosecond // 100},{p},{o}")
    return lines


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=_traces(), data=st.data())
def test_roundtrip_and_defect_line(tmp_path_factory, trace, data) -> None:
    ticks, prompt, output = trace
    folder = tmp_path_factory.mktemp("rt")
    lines = _azure_lines(ticks, prompt, output)
    df = load_azure_llm_trace(_write(folder, lines))
    assert df["prompt_tokens"].tolist() == prompt
    assert df["output_tokens"].tolist() == output
    assert df["arrival_s"].to_numpy() == pytest.approx((ticks - ticks[0]) * 1e-7, abs=1e-9)

    row = data.draw(st.integers(0, len(prompt) - 1))
    ts_text, p, o = lines[row + 1].split(",")
    defect = data.draw(st.sampled_from([f"{ts_text},{p}", f"{ts_text},-{int(p) + 1},{o}"]))
    lines[row + 1] = defect
    with pytest.raises(DataFormatError) as info:
        load_azure_llm_trace(_write(folder, lines, "bad.csv"))
    assert info.value.line == row + 2
