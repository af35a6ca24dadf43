"""Reference latencies from splitwise-sim for the iteration-level engine (issue 8).

splitwise-sim (github.com/Mutinifni/splitwise-sim, MIT; commit 8f99e7dc, 2024-04-25) is run
in its OWN virtual environment as a subprocess; it is never imported into greenroute's process
and is not a dependency of greenroute. Setup, done once outside the repository::

    fetch github:Mutinifni/splitwise-sim  ->  git --git-dir=<mirror> archive HEAD |
        tar -x -C /work/splitwise-sim
    python3.11 -m venv /work/splitwise-sim/.venv
    /work/splitwise-sim/.venv/bin/pip install hydra-core==1.3.2 omegaconf==2.3.0 \\
        numpy==1.25.2 pandas==2.0.3 networkx==3.1 scipy==1.11.3 scikit_learn==1.3.1

(the pins of its requirements.txt; Ray and the plotting packages are not needed). Then::

    .venv/bin/python -m greenroute.bench.splitwise_reference \\
        --splitwise-dir /work/splitwise-sim --output src/greenroute/bench/splitwise_reference.json

What the script does for every case (``CASES``):

1. writes the trace as splitwise-sim's CSV (``request_id, request_type=2, application_id=0,
   arrival_timestamp, batch_size=1, prompt_size, token_size``) to
   ``<splitwise-dir>/traces/gr_<case>.csv``. Arrivals are shifted by ``ARRIVAL_OFFSET_S``
   because splitwise-sim runs an event with delay 0 immediately (simulator.py:49-51), so a
   request at t = 0 would arrive before the cluster has instances ("No instances available").
2. writes ``<splitwise-dir>/gr_configs/gr_config.yaml``: ``configs/config.yaml`` without the
   Ray launcher (``override hydra/launcher: ray`` needs hydra-ray-launcher; nothing else
   changes);
3. runs, in ``<splitwise-dir>``::

       .venv/bin/python run.py --config-dir gr_configs --config-name gr_config \\
           applications.0.scheduler=round_robin \\
           applications.0.model_architecture=llama2-70b applications.0.model_size=llama2-70b-fp16 \\
           cluster=dgx-a100 cluster.servers.0.count=<N> start_state=baseline \\
           performance_model=db performance_model.db_path=<perf csv> \\
           trace.dir=traces trace.filename=gr_<case> seed=0 hydra.run.dir=<tmp dir>

   ``start_state=baseline`` = SplitwiseInstance, TP8, max_batch_size 512,
   max_batch_tokens 2048, max_preemptions 4 (configs/start_state/baseline.yaml);
   ``performance_model=db`` = the Splitwise profile, here ``PERF_CSV_RELPATH`` (byte-identical
   to splitwise-sim's data/perf_model.csv; checked and recorded as ``perf_csv_sha256``).
4. reads ``detailed/0.csv`` (one row per completed request: ``ttft_times``, ``response_times``
   = end-to-end) and ``run.log`` (simulation-loop time), and records percentiles with
   ``numpy.percentile`` (linear), as splitwise-sim's own utils.get_statistics does.

The constructed traces (``long_prompt_*``, ``mixed_*``) are generated here from fixed seeds
(:func:`case_requests`), so greenroute can replay exactly the same requests.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from greenroute.core.errors import UnknownNameError

# Repository layout: src/greenroute/bench/ -> repo root is parents[3]; data is ../shared/data.
_REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_DATA_DIR = _REPO_ROOT.parent / "shared" / "data"
AZURE_CONV_RELPATH = Path("llm_traces/azure_llm_2023_conv.csv")
PERF_CSV_RELPATH = Path("perf/splitwise_perf_model.csv")
DEFAULT_OUTPUT = Path(__file__).resolve().with_name("splitwise_reference.json")

# splitwise-sim commit the reference numbers were produced with (fetched 2026-11-26).
SPLITWISE_COMMIT = "8f99e7dc9b407f4ce2488d03dd44c0b8b946dab0"
# Added to every arrival: splitwise-sim executes a zero-delay event at once (simulator.py:49-51),
# so an arrival at t = 0 would precede the start state. 1 ms changes no latency.
ARRIVAL_OFFSET_S = 1e-3
# Azure trace timestamps (shared/data/PROVENANCE.md §1): "2023-11-16 18:15:46.6805900".
_AZURE_TS_FORMAT = "%Y-%m-%d %H:%M:%S.%f"

_GR_CONFIG_YAML = """\
# Written by greenroute.bench.splitwise_reference: configs/config.yaml without the Ray
# launcher (hydra-ray-launcher is not installed); every other default is unchanged.
defaults:
  - cluster: dgx-a100
  - router: noop
  - arbiter: noop
  - hardware_repo: default
  - model_repo: default
  - orchestrator_repo: default
  - performance_model: constant
  - power_model: constant
  - applications: solo
  - trace: test_trace
  - start_state: orca
  - _self_

end_time: 86400
debug: False
seed: 0

choices: ${hydra:runtime.choices}
output_dir: results/${seed}/${start_state.state_type}/${trace.filename}

hydra:
  run:
    dir: ${output_dir}
  job:
    chdir: True
"""


@dataclass(frozen=True)
class Case:
    """One reference run: a trace and the number of DGX-A100 servers (one TP8 instance each)."""

    name: str
    dgx_a100_count: int
    description: str


CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Case(
            "micro_1dgx",
            1,
            "4 hand-checkable requests on one instance (see micro_requests); per-request "
            "values recorded.",
        ),
        Case("azure_conv_1x", 40, "Azure conversation trace 2023, real arrival times."),
        Case("azure_conv_10x", 40, "Azure conversation trace, arrival times divided by 10."),
        Case(
            "long_prompt_2dgx_moderate",
            2,
            "Poisson 0.8 req/s, prompts U[4096, 8192], outputs U[16, 64], 1500 requests.",
        ),
        Case(
            "long_prompt_2dgx_high",
            2,
            "Poisson 1.2 req/s, prompts U[4096, 8192], outputs U[16, 64], 1500 requests.",
        ),
        Case(
            "mixed_4dgx_moderate",
            4,
            "Poisson 4 req/s; 80 % chat (prompt U[128, 1536], output U[32, 384]), "
            "20 % long (prompt U[6144, 8192], output U[8, 32]); 4000 requests.",
        ),
        Case(
            "mixed_4dgx_high",
            4,
            "As mixed_4dgx_moderate at Poisson 6 req/s; 4000 requests.",
        ),
    )
}


@dataclass(frozen=True)
class Requests:
    """A trace: arrival time (s, from 0), prompt and output tokens per request."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray


def azure_conv_requests(data_dir: Path, rate_scale: float) -> Requests:
    """The Azure conversation trace with arrival times (from the first request) / rate_scale."""
    path = data_dir / AZURE_CONV_RELPATH
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    stamps = [datetime.strptime(r["TIMESTAMP"][:26], _AZURE_TS_FORMAT) for r in rows]
    t0 = stamps[0]
    arrival_s = np.array([(t - t0).total_seconds() for t in stamps]) / rate_scale
    prompt = np.array([int(r["ContextTokens"]) for r in rows], dtype=np.int64)
    output = np.array([int(r["GeneratedTokens"]) for r in rows], dtype=np.int64)
    return Requests(arrival_s, prompt, output)


def _poisson_arrivals(rng: np.random.Generator, rate_per_s: float, n: int) -> np.ndarray:
    return np.cumsum(rng.exponential(1.0 / rate_per_s, size=n))


def long_prompt_requests(rate_per_s: float, n: int = 1500, seed: int = 8) -> Requests:
    """Long prompts, short outputs: prefill dominates and a prompt > 2048 runs alone."""
    rng = np.random.default_rng(seed)
    arrival_s = _poisson_arrivals(rng, rate_per_s, n)
    prompt = rng.integers(4096, 8192, size=n, endpoint=True)
    output = rng.integers(16, 64, size=n, endpoint=True)
    return Requests(arrival_s, prompt, output)


def mixed_requests(rate_per_s: float, n: int = 4000, seed: int = 9) -> Requests:
    """Chat traffic with 20 % long prompts whose prefills stall the chat decodes."""
    rng = np.random.default_rng(seed)
    arrival_s = _poisson_arrivals(rng, rate_per_s, n)
    is_long = rng.random(n) < 0.2
    prompt = np.where(
        is_long,
        rng.integers(6144, 8192, size=n, endpoint=True),
        rng.integers(128, 1536, size=n, endpoint=True),
    )
    output = np.where(
        is_long,
        rng.integers(8, 32, size=n, endpoint=True),
        rng.integers(32, 384, size=n, endpoint=True),
    )
    return Requests(arrival_s, prompt, output)


def micro_requests() -> Requests:
    """Four requests whose iteration timeline can be computed on paper from the profile.

    splitwise-sim's timeline (instance debug log): [0, 0.1577] prefill r0 (1000 tok) alone;
    [0.1577, 0.6382] prefill r1 (3000 > 2048 tok) alone, r0's decode waits; [0.6382, 0.8384]
    mixed: prefills r2 + r3 (1200 tok) + first decodes of r0, r1, costed 1.1 x prompt(1202);
    then decode-only iterations of 4, 3 and 3 (twice) requests at token(n) ~ 42.6 ms.
    """
    return Requests(
        arrival_s=np.array([0.0, 0.049, 0.099, 0.119]),
        prompt_tokens=np.array([1000, 3000, 500, 700]),
        output_tokens=np.array([5, 3, 4, 6]),
    )


def case_requests(name: str, data_dir: Path = DEFAULT_DATA_DIR) -> Requests:
    """The requests of one case in ``CASES`` (seeded; identical on every call)."""
    builders = {
        "micro_1dgx": micro_requests,
        "azure_conv_1x": lambda: azure_conv_requests(data_dir, 1.0),
        "azure_conv_10x": lambda: azure_conv_requests(data_dir, 10.0),
        "long_prompt_2dgx_moderate": lambda: long_prompt_requests(0.8),
        "long_prompt_2dgx_high": lambda: long_prompt_requests(1.2),
        "mixed_4dgx_moderate": lambda: mixed_requests(4.0),
        "mixed_4dgx_high": lambda: mixed_requests(6.0),
    }
    if name not in builders:
        raise UnknownNameError("splitwise reference case", name, CASES)
    return builders[name]()


def write_splitwise_trace(requests: Requests, path: Path) -> None:
    """Write requests in splitwise-sim's trace CSV format (README 'Request Traces')."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "request_id",
                "request_type",
                "application_id",
                "arrival_timestamp",
                "batch_size",
                "prompt_size",
                "token_size",
            ]
        )
        for i, (a, p, o) in enumerate(
            zip(requests.arrival_s, requests.prompt_tokens, requests.output_tokens, strict=True)
        ):
            w.writerow([i, 2, 0, repr(float(a) + ARRIVAL_OFFSET_S), 1, int(p), int(o)])


def splitwise_command(splitwise_dir: Path, case: Case, perf_csv: Path, run_dir: Path) -> list[str]:
    """The exact splitwise-sim command line for a case (run with cwd = splitwise_dir)."""
    return [
        str(splitwise_dir / ".venv" / "bin" / "python"),
        "run.py",
        "--config-dir",
        "gr_configs",
        "--config-name",
        "gr_config",
        "applications.0.scheduler=round_robin",
        "applications.0.model_architecture=llama2-70b",
        "applications.0.model_size=llama2-70b-fp16",
        "cluster=dgx-a100",
        f"cluster.servers.0.count={case.dgx_a100_count}",
        "start_state=baseline",
        "performance_model=db",
        f"performance_model.db_path={perf_csv}",
        "trace.dir=traces",
        f"trace.filename=gr_{case.name}",
        "seed=0",
        f"hydra.run.dir={run_dir}",
    ]


_LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def _sim_loop_seconds(run_log: Path) -> float:
    """Seconds between 'TraceSimulator initialized' and 'TraceSimulator completed' in run.log."""
    marks: dict[str, datetime] = {}
    for line in run_log.read_text().splitlines():
        m = _LOG_TIME.match(line)
        if m is None:
            continue
        for key in ("TraceSimulator initialized", "TraceSimulator completed"):
            if key in line:
                marks[key] = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
    return (marks["TraceSimulator completed"] - marks["TraceSimulator initialized"]).total_seconds()


def _stats(values: np.ndarray) -> dict[str, float]:
    return {
        "mean": float(np.mean(values)),
        "p50": float(np.percentile(values, 50)),
        "p90": float(np.percentile(values, 90)),
        "p95": float(np.percentile(values, 95)),
        "p99": float(np.percentile(values, 99)),
    }


def run_case(splitwise_dir: Path, case: Case, data_dir: Path) -> dict[str, object]:
    """Run splitwise-sim on one case in a subprocess and summarise its per-request output."""
    requests = case_requests(case.name, data_dir)
    write_splitwise_trace(requests, splitwise_dir / "traces" / f"gr_{case.name}.csv")
    perf_csv = (data_dir / PERF_CSV_RELPATH).resolve()
    with tempfile.TemporaryDirectory(prefix=f"sw_{case.name}_") as tmp:
        run_dir = Path(tmp)
        cmd = splitwise_command(splitwise_dir, case, perf_csv, run_dir)
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=splitwise_dir, capture_output=True, text=True)
        wall_s = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_s = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        if proc.returncode != 0:
            raise RuntimeError(f"splitwise-sim failed on {case.name}:\n{proc.stderr[-4000:]}")
        detailed = np.genfromtxt(run_dir / "detailed" / "0.csv", delimiter=",", names=True)
        loop_s = _sim_loop_seconds(run_dir / "run.log")
    detailed = np.sort(np.atleast_1d(detailed), order="request_ids")  # completion -> id order
    ttft = detailed["ttft_times"]
    e2e = detailed["response_times"]
    n_done = int(ttft.size)
    return {
        "description": case.description,
        "dgx_a100_count": case.dgx_a100_count,
        "requests": int(requests.arrival_s.size),
        "completed": n_done,
        "arrival_span_s": float(requests.arrival_s[-1] - requests.arrival_s[0]),
        "mean_prompt_tokens": float(np.mean(requests.prompt_tokens)),
        "mean_output_tokens": float(np.mean(requests.output_tokens)),
        "ttft_s": _stats(ttft),
        "e2e_s": _stats(e2e),
        # splitwise's per-request TBT = (E2E - TTFT) / token_size (scheduler.py:171-172)
        "tbt_s": _stats(detailed["tbt_times"]),
        "wall_s": round(wall_s, 2),
        "cpu_s": round(cpu_s, 2),
        "sim_loop_s": round(loop_s, 2),
        "requests_per_s_simulated": round(n_done / loop_s, 1) if loop_s > 0 else None,
        # whole subprocess CPU (startup + trace load + loop): robust when the machine is shared
        "requests_per_cpu_s": round(n_done / cpu_s, 1) if cpu_s > 0 else None,
        "loadavg_1min_after": round(os.getloadavg()[0], 2),
        **(
            {
                "per_request": {
                    "request_id": [int(x) for x in detailed["request_ids"]],
                    "ttft_s": [float(x) for x in ttft],
                    "e2e_s": [float(x) for x in e2e],
                }
            }
            if n_done <= 20
            else {}
        ),
        "command": " ".join(cmd[1:]).replace(str(run_dir), "<run_dir>"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--splitwise-dir", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    args = parser.parse_args(argv)
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {', '.join(CASES)}")
    sw_dir = args.splitwise_dir.resolve()
    if not (sw_dir / ".venv" / "bin" / "python").exists() or not (sw_dir / "run.py").exists():
        parser.error(f"{sw_dir} has no run.py or .venv/bin/python (see this module's docstring)")
    (sw_dir / "gr_configs").mkdir(exist_ok=True)
    (sw_dir / "gr_configs" / "gr_config.yaml").write_text(_GR_CONFIG_YAML)
    perf_csv = args.data_dir / PERF_CSV_RELPATH
    shipped = sw_dir / "data" / "perf_model.csv"
    result: dict[str, object] = {
        "splitwise_sim_commit": SPLITWISE_COMMIT,
        "perf_csv_sha256": hashlib.sha256(perf_csv.read_bytes()).hexdigest(),
        "perf_csv_identical_to_shipped": shipped.exists()
        and perf_csv.read_bytes() == shipped.read_bytes(),
        "config": {
            "model": "llama2-70b fp16, TP8 on one DGX-A100 (8x A100-80GB) per instance",
            "start_state": "baseline (SplitwiseInstance: max_batch_size 512, "
            "max_batch_tokens 2048, max_preemptions 4)",
            "scheduler": "round_robin",
            "performance_model": "db (Splitwise profile, linear interp by batch tokens)",
            "overheads": "all zero (shipped defaults)",
            "arrival_offset_s": ARRIVAL_OFFSET_S,
        },
        "cases": {},
    }
    if args.output.exists():  # keep earlier cases when only some are rerun
        old = json.loads(args.output.read_text())
        result["cases"] = {k: v for k, v in old.get("cases", {}).items() if k not in names}
    for name in names:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        res = run_case(sw_dir, CASES[name], args.data_dir)
        result["cases"][name] = res  # type: ignore[index]
        print(
            f"  {name}: ttft p50/p99 {res['ttft_s']['p50']:.3f}/{res['ttft_s']['p99']:.3f} s, "
            f"e2e p50/p99/mean {res['e2e_s']['p50']:.2f}/{res['e2e_s']['p99']:.2f}/"
            f"{res['e2e_s']['mean']:.2f} s, {res['requests_per_s_simulated']} req/s",
            file=sys.stderr,
            flush=True,
        )
        args.output.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
