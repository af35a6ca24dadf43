"""A lean HTTP/1.1 client for the gateway's upstream requests: one keep-alive connection pool
per upstream, asyncio protocols and httptools' response parser (the C parser uvicorn uses).

Why not httpx: on this path httpx/httpcore cost about 0.7 ms of CPU per request (measured
with py-spy at 500 req/s: a scan of every pooled connection per request, ``is_socket_readable``
probes, anyio stream wrappers), a third of the gateway's whole budget. This client does only
what a proxy needs: POST a body, read the status and headers, hand the body over chunk by
chunk as it arrives (SSE streams pass straight through), keep the connection when the answer
was complete and the server allows keep-alive. A connection the server closes leaves the
idle list at once (``connection_lost``), so a dead upstream's pooled connections are not
reused; idle connections older than ``IDLE_MAX_S`` are closed rather than reused.

Errors: ``UpstreamConnectError`` (could not connect, or the connection failed before the
response's headers), ``UpstreamTimeoutError`` (connect or read timeout), ``UpstreamReadError``
(the connection failed or the response was malformed after the headers).
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import time
from urllib.parse import urlsplit

import httptools

# an idle connection is reused only if it has been idle for less than this: uvicorn (vLLM,
# llama.cpp's python server) closes idle keep-alive connections after 5 s, and a request
# written into a connection the server is closing gets no answer
IDLE_MAX_S = 3.0
MAX_BUFFER_BYTES = 1 << 20  # unread body bytes held before the socket stops being read


class UpstreamError(Exception):
    kind = "connect"


class UpstreamConnectError(UpstreamError):
    kind = "connect"


class UpstreamTimeoutError(UpstreamError):
    kind = "timeout"


class UpstreamReadError(UpstreamError):
    kind = "read"


class UpstreamResponse:
    """Status, headers (lower-case names, bytes) and the body, read with ``next_chunk``."""

    __slots__ = ("_buffered", "_chunks", "_conn", "complete", "error", "headers",
                 "headers_done", "length_known", "status_code")  # fmt: skip

    def __init__(self, conn: _Conn) -> None:
        self._conn = conn
        self.status_code = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self.complete = False  # the whole message was read
        self.error: UpstreamError | None = None
        self.headers_done = False
        self.length_known = False  # content-length or chunked (else the body ends at close)

    async def next_chunk(self) -> bytes:
        """The next piece of the body; ``b""`` at its end. Raises UpstreamError."""
        while not self._chunks:
            if self.complete:
                return b""
            if self.error is not None:
                raise self.error
            await self._conn.wait()
        chunk = self._chunks.popleft()
        self._buffered -= len(chunk)
        if self._buffered < MAX_BUFFER_BYTES // 2:
            self._conn.resume()
        return chunk

    async def read(self) -> bytes:
        parts = []
        while chunk := await self.next_chunk():
            parts.append(chunk)
        return b"".join(parts)

    def release(self) -> None:
        """Done with the response: its connection goes back to the pool when the message was
        read to its end and the server keeps it alive, else it is closed."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.done(self)


class _Conn(asyncio.Protocol):
    """One connection; at most one response in flight."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool
        self.loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.resp: UpstreamResponse | None = None
        self.waiter: asyncio.Future | None = None
        self.closed = False
        self.paused = False
        self.keep_alive = False
        self.idle_since = 0.0

    # -------------------------------------------------------------- asyncio protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.resp is None:  # bytes nobody asked for: the connection is unusable
            self.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as err:
            self._fail(UpstreamReadError(f"malformed response: {err}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._forget(self)
        resp = self.resp
        if resp is not None and not resp.complete:
            if resp.headers_done and not resp.length_known and exc is None:
                resp.complete = True  # a body delimited by the connection's end
                self._wake()
            else:
                what = "during the response" if resp.headers_done else "before the response"
                self._fail(UpstreamConnectError if not resp.headers_done else UpstreamReadError,
                           f"connection closed {what}" + (f": {exc!r}" if exc else ""))  # fmt: skip

    # -------------------------------------------------------------- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length" or (name == b"transfer-encoding" and b"chunked" in value):
            self.resp.length_known = True
        self.resp.headers.append((name, value))

    def on_headers_complete(self) -> None:
        resp = self.resp
        resp.status_code = self.parser.get_status_code()
        resp.headers_done = True
        self.keep_alive = self.parser.should_keep_alive()
        self._wake()

    def on_body(self, body: bytes) -> None:
        resp = self.resp
        resp._chunks.append(body)
        resp._buffered += len(body)
        if resp._buffered > MAX_BUFFER_BYTES and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self.resp.complete = True
        self._wake()

    # -------------------------------------------------------------- helpers
    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _fail(self, err: UpstreamError | type, detail: str = "") -> None:
        if isinstance(err, type):
            err = err(detail)
        resp = self.resp
        if resp is not None and resp.error is None:
            resp.error = err
        self._wake()

    def _timed_out(self, fut: asyncio.Future) -> None:
        if not fut.done():
            fut.set_exception(UpstreamTimeoutError(f"no answer in {self.pool.read_timeout_s:g} s"))
        self.close()

    async def wait(self) -> None:
        """Until the parser reports something (headers, body, end) or the read timeout."""
        fut = self.waiter = self.loop.create_future()
        handle = self.loop.call_later(self.pool.read_timeout_s, self._timed_out, fut)
        try:
            await fut
        except asyncio.CancelledError:
            self.close()  # the response is abandoned half-read
            raise
        finally:
            handle.cancel()
            self.waiter = None

    def resume(self) -> None:
        if self.paused and not self.closed:
            self.paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.pool._forget(self)
            if self.transport is not None:
                self.transport.close()

    def done(self, resp: UpstreamResponse) -> None:
        if resp is self.resp and resp.complete and resp.error is None and self.keep_alive \
                and not self.closed:  # fmt: skip
            self.resp = None
            self.pool._checkin(self)
        else:
            self.close()


class ConnectionPool:
    """Keep-alive connections to one upstream base URL (``http`` or ``https``)."""

    def __init__(self, url: str, max_idle: int, connect_timeout_s: float, read_timeout_s: float,
                 ssl_context: ssl.SSLContext | None = None) -> None:  # fmt: skip
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"upstream URL must be http(s)://host[:port][/path], got {url!r}")
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.ssl = (ssl_context or ssl.create_default_context()) if u.scheme == "https" else None
        self.base_path = u.path.rstrip("/")
        self.host_header = u.netloc.rpartition("@")[2].encode()
        self.max_idle = max_idle
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.idle: list[_Conn] = []  # most recently used last
        self.loop: asyncio.AbstractEventLoop | None = None
        self._heads: dict[str, bytes] = {}

    def _forget(self, conn: _Conn) -> None:
        if conn in self.idle:
            self.idle.remove(conn)

    def _checkin(self, conn: _Conn) -> None:
        if len(self.idle) >= self.max_idle:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self.idle.append(conn)

    def _checkout(self) -> _Conn | None:
        now = time.monotonic()
        while self.idle:
            conn = self.idle.pop()
            if (not conn.closed and not conn.transport.is_closing()
                    and now - conn.idle_since < IDLE_MAX_S):  # fmt: skip
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Conn:
        try:
            _, conn = await asyncio.wait_for(
                self.loop.create_connection(lambda: _Conn(self), self.host, self.port,
                                            ssl=self.ssl),
                self.connect_timeout_s,
            )  # fmt: skip
        except TimeoutError:
            raise UpstreamTimeoutError(f"connect timeout ({self.connect_timeout_s:g} s)") from None
        except OSError as err:
            raise UpstreamConnectError(f"cannot connect: {err!r}") from None
        return conn

    async def post(self, path: str, headers: bytes, body: bytes) -> UpstreamResponse:
        """POST ``body`` to base path + ``path`` with ``headers`` (``b"name: value\\r\\n"``
        lines, without host and content-length); returns once the headers are in."""
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        head = self._heads.get(path)
        if head is None:
            head = self._heads[path] = (f"POST {self.base_path}{path} HTTP/1.1\r\n".encode()
                                        + b"host: " + self.host_header + b"\r\n")  # fmt: skip
        data = b"".join((head, headers, b"content-length: %d\r\n\r\n" % len(body), body))
        conn = self._checkout()
        if conn is not None:
            try:
                conn.transport.write(data)
            except (RuntimeError, OSError):  # closed under us (uvloop raises): nothing was sent
                conn.close()
                conn = None
        if conn is None:  # a new connection
            conn = await self._connect()
            try:
                conn.transport.write(data)
            except (RuntimeError, OSError) as err:
                conn.close()
                raise UpstreamConnectError(f"connection closed before the request: {err!r}") \
                    from None  # fmt: skip
        resp = conn.resp = UpstreamResponse(conn)
        try:
            while not resp.headers_done:
                if resp.error is not None:
                    raise resp.error
                await conn.wait()
        except BaseException:
            conn.close()
            raise
        return resp

    async def aclose(self) -> None:
        for conn in list(self.idle):
            conn.close()
        self.idle.clear()
