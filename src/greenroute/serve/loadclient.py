"""The load test's open-loop client (``greenroute.serve.loadtest``'s client process).

Sends request ``i`` at ``t0 + i / rate`` (open loop: it does not wait for answers), at most
``max_conns`` in flight, each on its own keep-alive connection; a request due while all are
busy waits (first come, first served) and its lateness counts. A request not answered
``timeout_s`` after its scheduled time is lost (``timeout``). Written on asyncio protocols
with httptools' response parser (and uvloop when installed) so that the client, which shares
the machine with the gateway and the fake upstreams, costs little CPU per request.
"""

from __future__ import annotations

import asyncio
import collections
import time

import httptools
import numpy as np


class _Conn(asyncio.Protocol):
    def __init__(self, drv: _Driver) -> None:
        self.drv = drv
        self.transport = None
        self.parser = httptools.HttpResponseParser(self)
        self.i = -1  # the request in flight on this connection
        self.region = -1
        self.used = 0.0
        self.closed = False

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._error("HttpParserError")
            self.close()

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"x-greenroute-region":
            self.region = self.drv.ridx.get(value.strip(), -2)

    def on_message_complete(self) -> None:
        i, self.i = self.i, -1
        if i >= 0:
            self.drv.answered(self, i, self.parser.get_status_code(), self.region)
        self.region = -1

    def connection_lost(self, exc) -> None:
        self.closed = True
        self._error(type(exc).__name__ if exc else "IncompleteReadError")

    def _error(self, kind: str) -> None:
        i, self.i = self.i, -1
        if i >= 0:
            self.drv.failed(i, kind)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class _Driver:
    def __init__(self, host: str, port: int, reqs: list[bytes], origin: np.ndarray,
                 rate: float, t0: float, max_conns: int, timeout_s: float, idle_reuse_s: float,
                 regions: tuple[str, ...]) -> None:  # fmt: skip
        self.loop = asyncio.get_running_loop()
        self.host, self.port, self.reqs, self.origin = host, port, reqs, origin
        self.rate, self.t0, self.max_conns = rate, t0, max_conns
        self.timeout_s, self.idle_reuse_s = timeout_s, idle_reuse_s
        self.ridx = {r.encode(): i for i, r in enumerate(regions)}
        n = origin.size
        self.status = np.zeros(n, dtype=np.int16)  # 0: no answer
        self.region = np.full(n, -1, dtype=np.int8)
        self.lat_s, self.late_s = np.full(n, np.nan), np.full(n, np.nan)
        self.started_at = np.zeros(n)  # when it got a connection slot
        self.holding = np.zeros(n, dtype=bool)  # holds a connection slot now
        self.errors: dict[str, int] = {}
        self.idle: list[_Conn] = []  # most recently used last
        self.busy = 0  # connections in use (requests in flight or connecting)
        self.waiting: collections.deque[int] = collections.deque()
        self.timers: dict[int, asyncio.TimerHandle] = {}
        self.conn_of: dict[int, _Conn] = {}
        self.left = n
        self.all_done = self.loop.create_future()

    # ------------------------------------------------------------------ bookkeeping
    def _end(self, i: int) -> None:
        """Request ``i`` has its outcome: release its timer and its connection slot."""
        h = self.timers.pop(i, None)
        if h is not None:
            h.cancel()
        self.conn_of.pop(i, None)
        if self.holding[i]:
            self.holding[i] = False
            self.busy -= 1
        self.left -= 1
        if self.left == 0 and not self.all_done.done():
            self.all_done.set_result(None)
        while self.waiting and self.busy < self.max_conns:
            j = self.waiting.popleft()
            if j in self.timers:  # not expired meanwhile
                self._start(j)

    def answered(self, conn: _Conn, i: int, status: int, region: int) -> None:
        done = time.perf_counter()
        self.status[i], self.region[i] = status, region
        self.lat_s[i] = done - self.started_at[i]
        conn.used = done
        self.idle.append(conn)
        self._end(i)

    def failed(self, i: int, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1
        self._end(i)

    def _expire(self, i: int) -> None:
        """Not answered ``timeout_s`` after its scheduled time: lost."""
        self.timers.pop(i, None)
        self.errors["timeout"] = self.errors.get("timeout", 0) + 1
        if np.isnan(self.late_s[i]):  # never got a connection
            self.late_s[i] = self.timeout_s
        conn = self.conn_of.get(i)
        if conn is not None:  # in flight: the connection is in a bad state
            conn.i = -1
            conn.close()
        self._end(i)

    # ------------------------------------------------------------------ sending
    def submit(self, i: int) -> None:
        """Request ``i`` is due now."""
        due = self.t0 + i / self.rate
        self.timers[i] = self.loop.call_at(self.loop.time() + due + self.timeout_s
                                           - time.perf_counter(), self._expire, i)  # fmt: skip
        if self.busy < self.max_conns:
            self._start(i)
        else:
            self.waiting.append(i)

    def _start(self, i: int) -> None:
        self.busy += 1
        self.holding[i] = True
        t = self.started_at[i] = time.perf_counter()
        self.late_s[i] = t - (self.t0 + i / self.rate)
        while self.idle:  # the most recently used connection not near the server's keep-alive
            conn = self.idle.pop()
            if not conn.closed and t - conn.used < self.idle_reuse_s:
                self._send(conn, i)
                return
            conn.close()
        self.loop.create_task(self._connect_and_send(i))

    async def _connect_and_send(self, i: int) -> None:
        try:
            _, conn = await self.loop.create_connection(lambda: _Conn(self), self.host,
                                                        self.port)  # fmt: skip
        except OSError as err:
            if i in self.timers:
                self.failed(i, type(err).__name__)
            return
        if i not in self.timers:  # expired while connecting
            conn.close()
            return
        self._send(conn, i)

    def _send(self, conn: _Conn, i: int) -> None:
        conn.i = i
        self.conn_of[i] = conn
        conn.transport.write(self.reqs[self.origin[i]])


async def drive(host: str, port: int, reqs: list[bytes], origin: np.ndarray, rate: float,
                t0: float, max_conns: int, timeout_s: float, idle_reuse_s: float,
                regions: tuple[str, ...]) -> dict:  # fmt: skip
    """Send every request on schedule (``t0`` on the ``perf_counter`` clock); the results."""
    d = _Driver(host, port, reqs, origin, rate, t0, max_conns, timeout_s, idle_reuse_s,
                regions)  # fmt: skip
    n = origin.size
    await asyncio.sleep(max(t0 - time.perf_counter(), 0.0))
    cpu0 = time.process_time()
    for i in range(n):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0.0005:
            await asyncio.sleep(delay)
        d.submit(i)
    sent_s = time.perf_counter() - t0
    if n:
        await d.all_done
    for conn in d.idle:
        conn.close()
    return {"origin": origin.tolist(), "status": d.status.tolist(), "region": d.region.tolist(),
            "latency_s": np.nan_to_num(d.lat_s, nan=-1.0).tolist(),
            "late_s": np.nan_to_num(d.late_s, nan=-1.0).tolist(), "send_s": sent_s,
            "done_s": time.perf_counter() - t0, "client_errors": d.errors,
            "client_cpu_s": time.process_time() - cpu0}  # fmt: skip
