"""Routing overhead of the gateway, measured on loopback:

    python -m greenroute.serve.overhead --requests 3000 --concurrency 16

Three fake upstream regions run as their own processes (``greenroute.serve.fake_upstream``),
the gateway in uvicorn in this process, and a load client in another process sends
non-streaming chat completions through the gateway, then the same number straight to one
upstream. Reported (JSON): the gateway's own time per request (from the handler's entry to
the upstream request being sent: auth, JSON parsing, rules, plan shares, local pick; not the
wait for the body's bytes) p50/p99 in microseconds, as wall time and as the gateway thread's
CPU time over the same span (which the OS running other work does not inflate); the
client-side latency p50/p99 through the gateway and direct; the gateway process's CPU time
per request (all of it: HTTP parsing both ways, routing, logging, metrics). The numbers
depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time

import numpy as np

from greenroute.serve.app import create_app
from greenroute.serve.config import parse_config
from greenroute.serve.fake_upstream import ServerThread
from greenroute.serve.metrics import Samples

REGIONS = ("DE-LU", "GB", "US-CAL-CISO")
CI_G_PER_KWH = (100.0, 200.0, 300.0)  # static signals of the benchmark (arbitrary)


def bench_config(urls: dict[str, str]) -> dict:
    return {
        "epoch_s": 60,
        "policy": {"geo": "lowest-carbon", "options": {"target_utilisation": 0.6},
                   "local": "least-connections"},
        "regions": {r: {"upstreams": [{"name": f"{r}-0", "url": u, "models": ["tiny"],
                                       "capacity": 64}]} for r, u in urls.items()},
        "origins": {"eu": {"region": "DE-LU"}, "uk": {"region": "GB"}},
        "constraints": {"residency": {"eu": ["DE-LU", "GB"]}},
        "signals": {"providers": [{"type": "static", "values": {
            r: {"carbon_intensity_g_per_kwh": c} for r, c in zip(REGIONS, CI_G_PER_KWH,
                                                                 strict=True)}}]},
    }  # fmt: skip


async def _drive(url: str, n: int, concurrency: int, headers: dict) -> np.ndarray:
    import httpx

    body = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}]}
    lat = np.zeros(n)
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30, trust_env=False) as client:

        async def one(i: int) -> None:
            async with sem:
                t = time.perf_counter()
                r = await client.post(url, json=body, headers=headers)
                lat[i] = time.perf_counter() - t
                if r.status_code != 200:
                    raise RuntimeError(f"request {i}: HTTP {r.status_code} {r.text[:200]}")

        await asyncio.gather(*(one(i) for i in range(n)))
    return lat


def _client(url: str, n: int, concurrency: int, origin: str | None) -> np.ndarray:
    """Latencies (s) of ``n`` requests sent from a separate process."""
    cmd = [sys.executable, "-m", "greenroute.serve.overhead", "--client", url,
           "--requests", str(n), "--concurrency", str(concurrency)]  # fmt: skip
    if origin:
        cmd += ["--origin", origin]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return np.array(json.loads(out))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_up(url: str, timeout_s: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/v1/models", trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


def run(n: int, concurrency: int) -> dict:
    ports = [_free_port() for _ in REGIONS]
    procs = [subprocess.Popen([sys.executable, "-m", "greenroute.serve.fake_upstream",
                               "--port", str(p), "--name", r])
             for p, r in zip(ports, REGIONS, strict=True)]  # fmt: skip
    urls = {r: f"http://127.0.0.1:{p}" for r, p in zip(REGIONS, ports, strict=True)}
    gsrv = None
    try:
        for u in urls.values():
            _wait_up(u)
        cfg = parse_config(bench_config(urls), source="<bench>")
        app = create_app(cfg)
        gw = app.state.gateway
        gw.metrics.overhead_samples = Samples(n)
        gw.metrics.overhead_cpu_samples = Samples(n)
        gsrv = ServerThread(app).start()
        _client(gsrv.url + "/v1/chat/completions", 200, concurrency, "eu")  # warm-up
        gw.metrics.overhead_samples.clear()
        gw.metrics.overhead_cpu_samples.clear()
        t, cpu = time.perf_counter(), time.process_time()
        via = _client(gsrv.url + "/v1/chat/completions", n, concurrency, "uk")
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        over = np.array(gw.metrics.overhead_samples) * 1e6
        over_cpu = np.array(gw.metrics.overhead_cpu_samples) * 1e6
        direct = _client(urls["DE-LU"] + "/v1/chat/completions", n, concurrency, None)
        shares = gw.router.state.plan.route[0, 1].round(3).tolist()
    finally:
        if gsrv is not None:
            gsrv.stop()
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
    return {
        "requests": n, "concurrency": concurrency, "overhead_samples": int(over.size),
        "overhead_us_p50": round(float(np.percentile(over, 50)), 1),
        "overhead_us_p99": round(float(np.percentile(over, 99)), 1),
        "overhead_cpu_us_p50": round(float(np.percentile(over_cpu, 50)), 1),
        "overhead_cpu_us_p99": round(float(np.percentile(over_cpu, 99)), 1),
        "via_gateway_ms_p50": round(float(np.percentile(via, 50)) * 1e3, 3),
        "via_gateway_ms_p99": round(float(np.percentile(via, 99)) * 1e3, 3),
        "direct_ms_p50": round(float(np.percentile(direct, 50)) * 1e3, 3),
        "direct_ms_p99": round(float(np.percentile(direct, 99)) * 1e3, 3),
        "gateway_rps": round(n / wall, 1),
        "gateway_cpu_ms_per_request": round(cpu / n * 1e3, 3),
        "uk_interactive_shares": shares,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="routing overhead of the gateway on loopback")
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--client", help=argparse.SUPPRESS)  # internal: be the load client
    ap.add_argument("--origin", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.client:
        headers = {"x-greenroute-origin": args.origin} if args.origin else {}
        lat = asyncio.run(_drive(args.client, args.requests, args.concurrency, headers))
        print(json.dumps(lat.tolist()))
        return
    print(json.dumps(run(args.requests, args.concurrency), indent=2))


if __name__ == "__main__":  # pragma: no cover
    main()
