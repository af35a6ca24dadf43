"""Load test of the gateway on loopback (``make loadtest``):

    python -m greenroute.serve.loadtest --rate 500 --duration 60

Three regions (DE-LU, GB, US-CAL-CISO), each one fake OpenAI upstream in its own process
(``greenroute.serve.fake_upstream``); the gateway in uvicorn in this process; an open-loop
client in another process sends non-streaming chat completions at ``--rate`` per second for
``--duration`` seconds from three origins (eu 40 %, uk 30 %, us 30 %). At 1/3 of the run the
cleanest region, DE-LU (where lowest-carbon sends everything), is killed (SIGKILL: its
connections reset), at 2/3 it is started again on the same port. The rules: eu's residency is
DE-LU + GB, and US-CAL-CISO is excluded for everyone from 5/12 to 7/12 of the run.

Reported (JSON, then a summary): requests sent / answered 200 / lost (any other outcome),
rule violations (a region outside the origin's residency, seen by the client in
``x-greenroute-region``; a region under an active exclusion at the routing time, from the
decision log), the rate the client achieved and how late it sent (an open-loop client falls
behind when the machine cannot keep up), the gateway's routing overhead p50/p99 (wall and
its thread's CPU), client latency p50/p99 per phase, the gateway process's RSS at start,
middle and end, and where requests went per phase. Bounded: ``rate x duration`` requests and
a hard timeout. The numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

REGIONS = ("DE-LU", "GB", "US-CAL-CISO")
CI_G_PER_KWH = (100.0, 200.0, 300.0)  # static signals (arbitrary): DE-LU the cleanest
ORIGINS = ("eu", "uk", "us")
ORIGIN_MIX = (0.4, 0.3, 0.3)
RESIDENCY = {"eu": ("DE-LU", "GB")}
KILLED = "DE-LU"
EXCLUDED = "US-CAL-CISO"
PHASES = ("before", "killed", "restored")
WARMUP_REQUESTS = 60
WARMUP_MARGIN_S = 8.0  # gateway start-up + warm-up before the planned start (loaded machine)
CLIENT_TIMEOUT_S = 30.0  # a request not answered this long after its scheduled time is lost
DRAIN_TIMEOUT_S = CLIENT_TIMEOUT_S + 60.0  # the client process ends this long after the run
# the client reuses a connection idle for less than this: uvicorn closes idle keep-alive
# connections after 5 s (its timeout_keep_alive default), and a request written into a
# connection the server is closing gets no answer
IDLE_REUSE_S = 2.0


def loadtest_config(urls: dict[str, str], t0_s: float, duration_s: float,
                    decision_log: Path | None) -> dict:  # fmt: skip
    def iso(t: float) -> str:
        return datetime.fromtimestamp(t, tz=UTC).isoformat()

    cfg = {
        "epoch_s": 5,
        "policy": {"geo": "lowest-carbon", "options": {"target_utilisation": 0.6},
                   "local": "least-connections"},
        "regions": {r: {"upstreams": [{"name": f"{r}-0", "url": u, "models": ["tiny"],
                                       "capacity": 256}]} for r, u in urls.items()},
        "origins": {"eu": {"region": "DE-LU"}, "uk": {"region": "GB"},
                    "us": {"region": "US-CAL-CISO"}},
        "constraints": {
            "residency": {o: list(r) for o, r in RESIDENCY.items()},
            "exclusions": [{"region": EXCLUDED, "start": iso(t0_s + duration_s * 5 / 12),
                            "end": iso(t0_s + duration_s * 7 / 12), "reason": "load test"}],
        },
        "signals": {"providers": [{"type": "static", "values": {
            r: {"carbon_intensity_g_per_kwh": c} for r, c in zip(REGIONS, CI_G_PER_KWH,
                                                                 strict=True)}}]},
        "upstream": {"max_attempts": 3, "backoff_s": 0.005, "failures_to_eject": 2,
                     "cooldown_s": 2.0, "health_interval_s": 1.0, "connect_timeout_s": 1.0,
                     "read_timeout_s": 10.0, "queue_timeout_s": 10.0},
    }  # fmt: skip
    if decision_log is not None:
        cfg["decision_log"] = {"path": str(decision_log)}
    return cfg


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux ``/proc``; nan elsewhere)."""
    import os

    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


# ---------------------------------------------------------------------- the client process
async def _drive(url: str, rate: float, duration_s: float, start_at: float | None,
                 max_conns: int, seed: int) -> dict:  # fmt: skip
    from urllib.parse import urlsplit

    if start_at is None:  # handshake: say we are ready (imports done), then read the start
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        start_at = float(sys.stdin.readline())
    from greenroute.serve.loadclient import drive

    u = urlsplit(url)
    host, port = u.hostname, u.port
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hello"}]})
    reqs = [(f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}:{port}\r\n"
             f"content-type: application/json\r\nx-greenroute-origin: {o}\r\n"
             f"content-length: {len(body)}\r\n\r\n{body}").encode() for o in ORIGINS]  # fmt: skip
    n = round(rate * duration_s)
    origin = np.random.default_rng(seed).choice(len(ORIGINS), size=n, p=ORIGIN_MIX)
    t0 = time.perf_counter() + (start_at - time.time())
    return await drive(host, port, reqs, origin, rate, t0, max_conns, CLIENT_TIMEOUT_S,
                       IDLE_REUSE_S, REGIONS)  # fmt: skip


# ---------------------------------------------------------------------- the orchestrator
def _start_upstream(port: int, name: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "greenroute.serve.fake_upstream",
                             "--port", str(port), "--name", name])  # fmt: skip


def _pct(x: np.ndarray, q: float) -> float:
    return round(float(np.percentile(x, q)), 3) if x.size else float("nan")


def _exclusion_violations(log: Path, t0_s: float, duration_s: float) -> tuple[int, int]:
    """(records, records routed to the excluded region inside its window or outside their
    origin's residency), checked from the decision log independently of the router."""
    from greenroute.serve.decision_log import read_decisions

    lo, hi = t0_s + duration_s * 5 / 12, t0_s + duration_s * 7 / 12
    recs = read_decisions(log)
    bad = 0
    for r in recs:
        reg = r.get("region")
        if reg is None:
            continue
        in_window = lo <= r["routed_s"] < hi
        if (reg == EXCLUDED and in_window) or reg not in RESIDENCY.get(r["origin"], REGIONS):
            bad += 1
    return len(recs), bad


def run(rate: float, duration_s: float, max_conns: int = 512, decision_log: bool = True,
        seed: int = 0, keep_dir: bool = False) -> dict:  # fmt: skip
    """One load test; its working folder (the decision log, ~30 MB at 500 req/s, and the
    client's results) is removed afterwards unless ``keep_dir``."""
    tmp = Path(tempfile.mkdtemp(prefix="greenroute-loadtest-"))
    try:
        return _run(tmp, rate, duration_s, max_conns, decision_log, seed)
    finally:
        if keep_dir:
            print(f"note: the decision log and the client's results are kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def _run(tmp: Path, rate: float, duration_s: float, max_conns: int, decision_log: bool,
         seed: int) -> dict:  # fmt: skip
    from greenroute.serve.app import create_app
    from greenroute.serve.config import parse_config
    from greenroute.serve.fake_upstream import ServerThread
    from greenroute.serve.metrics import Samples
    from greenroute.serve.overhead import _free_port, _wait_up

    ports = {r: _free_port() for r in REGIONS}
    procs = {r: _start_upstream(p, r) for r, p in ports.items()}
    urls = {r: f"http://127.0.0.1:{p}" for r, p in ports.items()}
    gport = _free_port()
    client_out = tmp / "client.json"  # the client's results (MBs: a file, not its stdout)
    client = subprocess.Popen(
        [*_client_cmd(f"http://127.0.0.1:{gport}", rate, duration_s, None, max_conns, seed),
         "--out", str(client_out)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    log = tmp / "decisions.jsonl" if decision_log else None
    gsrv = None
    try:
        for u in urls.values():
            _wait_up(u)
        if client.stdout.readline().strip() != "ready":
            raise RuntimeError("the load client did not start")
        # the start, planned for after the gateway's start-up and warm-up (the exclusion
        # window of the config is set from it)
        start_at = time.time() + WARMUP_MARGIN_S
        cfg = parse_config(loadtest_config(urls, start_at, duration_s, log), source="<loadtest>")
        app = create_app(cfg)
        gw = app.state.gateway
        n = round(rate * duration_s)
        gw.metrics.overhead_samples = Samples(n + 1000)
        gw.metrics.overhead_cpu_samples = Samples(n + 1000)
        gsrv = ServerThread(app, port=gport).start()
        _warm_up(gsrv.url, WARMUP_REQUESTS)
        late_start_s = max(time.time() + 0.2 - start_at, 0.0)
        start_at += late_start_s  # the phases move; the exclusion window stays as configured
        client.stdin.write(f"{start_at!r}\n")
        client.stdin.flush()
        time.sleep(max(start_at - time.time(), 0.0))
        gw.metrics.overhead_samples.clear()
        gw.metrics.overhead_cpu_samples.clear()
        cpu0 = time.process_time()
        up_cpu0 = {r: _proc_cpu_s(p.pid) for r, p in procs.items()}
        up_cpu_s = 0.0  # the upstream processes' CPU over the run (the killed one's until then)
        rss = {"start": _rss_mb()}
        rss_series = []
        events = [(duration_s / 3, "kill"), (duration_s / 2, "middle"),
                  (2 * duration_s / 3, "restore"), (duration_s, "end")]  # fmt: skip
        next_sample = 1.0
        down = [np.inf, np.inf]  # when the region was killed and when its restart began
        while events:
            t = time.time() - start_at
            if t >= next_sample:
                rss_series.append(round(_rss_mb(), 1))
                next_sample += 1.0
            if t >= events[0][0]:
                _, what = events.pop(0)
                if what == "kill":
                    up_cpu_s += _proc_cpu_s(procs[KILLED].pid) - up_cpu0[KILLED]
                    up_cpu0[KILLED] = 0.0  # its restart's CPU counts from its start
                    procs[KILLED].send_signal(signal.SIGKILL)
                    procs[KILLED].wait()
                    down[0] = time.time() - start_at
                elif what == "restore":
                    down[1] = time.time() - start_at
                    procs[KILLED] = _start_upstream(ports[KILLED], KILLED)
                else:
                    rss[what] = _rss_mb()
            time.sleep(0.02)
        client.communicate(timeout=duration_s + DRAIN_TIMEOUT_S)
        if client.returncode != 0:
            raise RuntimeError(f"the load client failed (exit status {client.returncode})")
        cpu_s = time.process_time() - cpu0
        up_cpu_s += sum(_proc_cpu_s(p.pid) - up_cpu0[r] for r, p in procs.items())
        rss["after_drain"] = _rss_mb()
        res = json.loads(client_out.read_text(encoding="utf-8"))
        over = np.array(gw.metrics.overhead_samples) * 1e3
        over_cpu = np.array(gw.metrics.overhead_cpu_samples) * 1e3
        ejections = {k: v for k, v in _fallbacks(gw).items() if v}
    finally:
        if client.poll() is None:
            client.kill()
        if gsrv is not None:
            gsrv.stop()
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)
    res["late_start_s"], res["down_s"] = late_start_s, down
    res["upstreams_cpu_s"] = up_cpu_s
    return _report(res, rate, duration_s, over, over_cpu, rss, rss_series, cpu_s, ejections,
                   log, start_at - late_start_s)  # fmt: skip


def _fallbacks(gw) -> dict[str, float]:
    """Fallback counts by kind and upstream errors by region, upstream and kind."""
    out = {}
    for metric in gw.metrics.fallbacks.collect():
        for s in metric.samples:
            if s.name.endswith("_total"):
                out[s.labels["kind"]] = s.value
    for metric in gw.metrics.errors.collect():
        for s in metric.samples:
            if s.name.endswith("_total"):
                out[f"error {s.labels['upstream']} {s.labels['kind']}"] = s.value
    return out


def _client_cmd(url: str, rate: float, duration_s: float, start_at: float | None,
                max_conns: int, seed: int) -> list[str]:  # fmt: skip
    cmd = [sys.executable, "-m", "greenroute.serve.loadtest", "--client", url, "--rate",
           str(rate), "--duration", str(duration_s), "--max-conns", str(max_conns), "--seed",
           str(seed)]  # fmt: skip
    return cmd if start_at is None else [*cmd, "--start-at", repr(start_at)]


def _warm_up(url: str, n: int) -> None:
    """``n`` requests through the gateway (imports, first plan, connections) before the run."""
    import httpx

    body = {"model": "tiny", "messages": [{"role": "user", "content": "warm-up"}]}
    with httpx.Client(trust_env=False, timeout=30) as c:
        for i in range(n):
            origin = ORIGINS[i % len(ORIGINS)]
            r = c.post(url + "/v1/chat/completions", json=body,
                       headers={"x-greenroute-origin": origin})  # fmt: skip
            r.raise_for_status()


def _report(res: dict, rate: float, duration_s: float, over: np.ndarray, over_cpu: np.ndarray,
            rss: dict, rss_series: list, cpu_s: float, fallbacks: dict, log: Path | None,
            start_at: float) -> dict:  # fmt: skip
    status = np.array(res["status"])
    region = np.array(res["region"])
    origin = np.array(res["origin"])
    lat = np.array(res["latency_s"]) * 1e3
    late = np.array(res["late_s"])
    n = status.size
    ok = status == 200
    sched = np.arange(n) / rate
    phase = np.digitize(sched, [duration_s / 3, 2 * duration_s / 3])
    sent = sched + late  # when each request was sent, from the client's start
    answered = sent + lat / 1e3
    lo, hi = res.get("down_s", (np.inf, np.inf))
    # sent after the kill and answered before the restart began: the dead process cannot have
    # served it (a request queued in the gateway past the restart may rightly go there)
    answered_by_dead = int(np.sum(ok & (region == REGIONS.index(KILLED)) & (sent >= lo)
                                  & (answered < hi)))  # fmt: skip
    violations = 0
    for o, name in enumerate(ORIGINS):
        allowed = [REGIONS.index(r) for r in RESIDENCY.get(name, REGIONS)]
        violations += int(np.sum(ok & (origin == o) & ~np.isin(region, allowed)))
    out = {
        "rate_target_per_s": rate, "duration_s": duration_s, "requests": int(n),
        "answered_200": int(ok.sum()), "lost": int(n - ok.sum()),
        "lost_by_status": {str(s): int(c) for s, c in zip(*np.unique(status[~ok],
                                                                     return_counts=True),
                                                           strict=True)},
        "client_connection_errors": res.get("client_errors", {}),
        "residency_violations_client": violations,
        "killed_region_down_s": [round(float(x), 3) for x in (lo, hi)],
        "answered_by_killed_region_while_down": answered_by_dead,
        "start_late_s": round(res.get("late_start_s", 0.0), 2),
        "client_send_s": round(res["send_s"], 2), "client_done_s": round(res["done_s"], 2),
        "rate_sent_per_s": round(n / res["send_s"], 1),
        "rate_answered_per_s": round(int(ok.sum()) / res["done_s"], 1),
        "client_late_ms_p50": round(float(np.percentile(late, 50)) * 1e3, 2),
        "client_late_ms_p99": round(float(np.percentile(late, 99)) * 1e3, 2),
        "overhead_samples": int(over.size),
        "overhead_ms_p50": _pct(over, 50), "overhead_ms_p99": _pct(over, 99),
        "overhead_cpu_ms_p50": _pct(over_cpu, 50), "overhead_cpu_ms_p99": _pct(over_cpu, 99),
        "gateway_cpu_ms_per_request": round(cpu_s / max(n, 1) * 1e3, 3),
        # the machine's other CPU per request: the load client's and the fake upstreams'
        "client_cpu_ms_per_request": round(res.get("client_cpu_s", float("nan"))
                                           / max(n, 1) * 1e3, 3),
        "upstreams_cpu_ms_per_request": round(res.get("upstreams_cpu_s", float("nan"))
                                              / max(n, 1) * 1e3, 3),
        "rss_mb": {k: round(v, 1) for k, v in rss.items()},
        "rss_mb_per_second": rss_series,
        "fallbacks": fallbacks,
        "phases": {},
    }  # fmt: skip
    for p, name in enumerate(PHASES):
        m = phase == p
        lp = lat[m & ok]
        out["phases"][name] = {
            "requests": int(m.sum()), "lost": int((m & ~ok).sum()),
            "latency_ms_p50": _pct(lp, 50), "latency_ms_p99": _pct(lp, 99),
            "regions": {r: int((m & ok & (region == i)).sum()) for i, r in enumerate(REGIONS)},
        }  # fmt: skip
    if log is not None:
        recs, bad = _exclusion_violations(log, start_at, duration_s)
        out["decision_log_records"], out["rule_violations_log"] = recs, bad
    return out


def summary(r: dict) -> str:
    lines = [
        f"{r['requests']} requests at {r['rate_target_per_s']:g}/s target for "
        f"{r['duration_s']:g} s: sent at {r['rate_sent_per_s']:g}/s (client lateness p99 "
        f"{r['client_late_ms_p99']:g} ms), answered {r['answered_200']} "
        f"({r['rate_answered_per_s']:g}/s), lost {r['lost']} {r['lost_by_status'] or ''}",
        f"rule violations: {r['residency_violations_client']} (client, residency), "
        f"{r.get('rule_violations_log', 'n/a')} (decision log, residency + exclusion window)",
        f"routing overhead: p50 {r['overhead_ms_p50']} ms, p99 {r['overhead_ms_p99']} ms wall; "
        f"p50 {r['overhead_cpu_ms_p50']} ms, p99 {r['overhead_cpu_ms_p99']} ms gateway-thread "
        f"CPU; gateway process CPU {r['gateway_cpu_ms_per_request']} ms/request (client "
        f"{r.get('client_cpu_ms_per_request')}, fake upstreams "
        f"{r.get('upstreams_cpu_ms_per_request')} ms/request)",
        f"gateway RSS (MB): {r['rss_mb']}",
    ]
    for name, ph in r["phases"].items():
        lines.append(f"  {name:9s} {ph['requests']:6d} requests, lost {ph['lost']}, latency p50 "
                     f"{ph['latency_ms_p50']} ms p99 {ph['latency_ms_p99']} ms, regions "
                     f"{ph['regions']}")  # fmt: skip
    lines.append(f"fallbacks: {r['fallbacks']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="gateway load test on loopback")
    ap.add_argument("--rate", type=float, default=500.0, help="requests per second")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds")
    ap.add_argument("--max-conns", type=int, default=512, help="client connections at most")
    ap.add_argument("--no-decision-log", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--keep-dir",
        action="store_true",
        help="keep the decision log and the client's results (removed by default)",
    )
    ap.add_argument("--json", action="store_true", help="print only the JSON report")
    ap.add_argument("--client", help=argparse.SUPPRESS)  # internal: be the load client
    ap.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)  # internal: the client's results file
    args = ap.parse_args(argv)
    if not (0 < args.rate <= 5000 and 0 < args.duration <= 600):
        ap.error("--rate must be in (0, 5000] and --duration in (0, 600] (a bounded test)")
    if args.client:
        coro = _drive(args.client, args.rate, args.duration, args.start_at, args.max_conns,
                      args.seed)  # fmt: skip
        try:  # the client's CPU is taken from the gateway's: the leaner loop when there is one
            import uvloop

            res = uvloop.run(coro)
        except ImportError:
            res = asyncio.run(coro)
        if args.out:
            Path(args.out).write_text(json.dumps(res), encoding="utf-8")
        else:
            sys.stdout.write(json.dumps(res))
        return
    res = run(args.rate, args.duration, args.max_conns, not args.no_decision_log, args.seed,
              keep_dir=args.keep_dir)  # fmt: skip
    print(json.dumps({k: v for k, v in res.items() if k != "rss_mb_per_second"} if not args.json
                     else res, indent=2))  # fmt: skip
    if not args.json:
        print(summary(res), file=sys.stderr)
    sys.stdout.flush()


if __name__ == "__main__":  # pragma: no cover
    main()
