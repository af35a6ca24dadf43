"""Loaders for shared/data/perf: Splitwise perf_model.csv and vidur *_mlp.csv.gz."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest

from greenroute.core.errors import DataFormatError
from greenroute.data import build_perf_knots as bpk
from greenroute.data import perf

HEADER = (
    "model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,"
    "prompt_time,token_time,e2e_time,tensor_parallel"
)
GOOD = "llama2-70b,a100-80gb,512,1,128,1.0,0.7,196.2,54.8,7168.9,2"


def _write(tmp_path: Path, *lines: str, name: str = "perf.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_splitwise_good_file(tmp_path: Path) -> None:
    df = perf.load_splitwise_perf(_write(tmp_path, HEADER, GOOD, GOOD))
    assert len(df) == 2
    assert df["prompt_size"].dtype.kind == "i"
    assert df["prompt_time"].iloc[0] == 196.2


def test_splitwise_bad_value_names_file_and_line(tmp_path: Path) -> None:
    bad = GOOD.replace("196.2", "fast")
    path = _write(tmp_path, HEADER, GOOD, GOOD, bad)
    with pytest.raises(DataFormatError) as err:
        perf.load_splitwise_perf(path)
    assert err.value.line == 4  # header is line 1
    assert str(path) in str(err.value) and "prompt_time" in str(err.value)


def test_splitwise_non_positive_and_non_integer(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError) as err:
        perf.load_splitwise_perf(_write(tmp_path, HEADER, GOOD.replace(",54.8,", ",-1,")))
    assert err.value.line == 2
    with pytest.raises(DataFormatError) as err:
        perf.load_splitwise_perf(_write(tmp_path, HEADER, GOOD, GOOD.replace(",512,", ",51.2,")))
    assert err.value.line == 3


def test_splitwise_missing_column(tmp_path: Path) -> None:
    header = HEADER.replace(",token_time", "")
    row = GOOD.replace(",54.8", "")
    with pytest.raises(DataFormatError, match="token_time") as err:
        perf.load_splitwise_perf(_write(tmp_path, header, row))
    assert err.value.line == 1


def test_splitwise_ragged_and_blank_rows(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError) as err:
        perf.load_splitwise_perf(_write(tmp_path, HEADER, GOOD, GOOD + ",extra"))
    assert err.value.line == 3
    with pytest.raises(DataFormatError) as err:
        perf.load_splitwise_perf(_write(tmp_path, HEADER, GOOD, "", GOOD))
    assert err.value.line == 3


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="not found"):
        perf.load_splitwise_perf(tmp_path / "nope.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataFormatError):
        perf.load_splitwise_perf(tmp_path / "empty.csv")
    with pytest.raises(DataFormatError, match="no data rows"):
        perf.load_splitwise_perf(_write(tmp_path, HEADER))


def _vidur_header() -> list[str]:
    cols = [perf.vidur_mean_column(op) for op in perf.VIDUR_ONCE_OPS + perf.VIDUR_LAYER_OPS]
    return [*cols, "num_tokens", "num_tensor_parallel_workers"]


def test_vidur_linear_time_by_hand(tmp_path: Path) -> None:
    cols = _vidur_header()
    n_ops = len(perf.VIDUR_LAYER_OPS)
    # two duplicate rows at (1 token, TP 1): emb 0.4 and 0.6, every layer op 0.1 and 0.3
    rows = [
        ",".join(["0.4"] + ["0.1"] * n_ops + ["1", "1"]),
        ",".join(["0.6"] + ["0.3"] * n_ops + ["1", "1"]),
        ",".join(["1.0"] + ["0.5"] * n_ops + ["8", "2"]),
    ]
    path = tmp_path / "x_mlp.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(",".join(cols) + "\n" + "\n".join(rows) + "\n")
    df = perf.load_vidur_mlp(path)
    t = perf.vidur_linear_time_ms(df, n_layers=10)
    # mean emb 0.5 once + 9 ops x mean 0.2 x 10 layers = 0.5 + 18.0
    assert t.loc[(1, 1)] == pytest.approx(0.5 + n_ops * 0.2 * 10)
    assert t.loc[(8, 2)] == pytest.approx(1.0 + n_ops * 0.5 * 10)


def test_vidur_bad_rows(tmp_path: Path) -> None:
    cols = _vidur_header()
    n_ops = len(perf.VIDUR_LAYER_OPS)
    good = ",".join(["0.4"] + ["0.1"] * n_ops + ["1", "1"])
    neg = ",".join(["0.4"] + ["-0.1"] * n_ops + ["2", "1"])
    path = tmp_path / "bad_mlp.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(",".join(cols) + "\n" + good + "\n" + neg + "\n")
    with pytest.raises(DataFormatError) as err:
        perf.load_vidur_mlp(path)
    assert err.value.line == 3
    with pytest.raises(DataFormatError, match="num_tokens"):
        perf.load_vidur_mlp(_write(tmp_path, ",".join(cols[:-2]), good.rsplit(",", 2)[0]))


def test_vidur_path() -> None:
    p = perf.vidur_mlp_path("/d", "h100-80gb", "Llama-2-7b-hf")
    assert p.as_posix() == "/d/perf/vidur/h100_Llama-2-7b-hf_mlp.csv.gz"
    with pytest.raises(KeyError):
        perf.vidur_mlp_path("/d", "tpu", "Llama-2-7b-hf")


@pytest.mark.realdata
def test_real_files_load(data_dir: Path) -> None:
    sw = perf.load_splitwise_perf(perf.splitwise_path(data_dir))
    assert len(sw) == 1260
    assert set(sw["hardware"]) == {"a100-80gb", "h100-80gb", "h100-80gb-pcap"}
    raw = pd.read_csv(perf.splitwise_path(data_dir))
    assert (sw["token_time"].to_numpy() == raw["token_time"].to_numpy()).all()
    for gpu in ("a100-80gb", "h100-80gb"):
        v = perf.load_vidur_mlp(perf.vidur_mlp_path(data_dir, gpu, "Llama-2-70b-hf"))
        assert len(v) == 1044


@pytest.mark.realdata
def test_cli_writes_table(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "knots.json"
    assert bpk.main(["--data-dir", str(data_dir), "--out", str(out)]) == 0
    assert out.read_text() == bpk.dumps(bpk.build_perf_knots(data_dir))


def test_cli_reports_bad_data_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bpk.main(["--data-dir", str(tmp_path), "--out", str(tmp_path / "o.json")]) == 2
    assert "not found" in capsys.readouterr().err
