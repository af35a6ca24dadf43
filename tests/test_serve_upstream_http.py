"""The gateway's lean upstream HTTP/1.1 client (``serve/upstream_http.py``) against scripted
loopback servers: keep-alive reuse, chunked and close-delimited bodies, and each failure
before and after the headers."""

from __future__ import annotations

import asyncio
import socket

import pytest

pytest.importorskip("httptools")

from greenroute.serve.upstream_http import (
    ConnectionPool,
    UpstreamConnectError,
    UpstreamReadError,
    UpstreamTimeoutError,
)

OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"


async def _serve(handler):
    """A server on an ephemeral port; ``handler(reader, writer, conn_no)`` per connection."""
    count = [0]

    async def on_conn(reader, writer):
        count[0] += 1
        try:
            await handler(reader, writer, count[0])
        finally:
            writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}", count


async def _request(reader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return head, await reader.readexactly(length)


def test_keep_alive_reuses_one_connection_and_sends_headers_and_body():
    async def echo(reader, writer, n):
        while True:
            try:
                head, body = await _request(reader)
            except asyncio.IncompleteReadError:
                return
            out = head.split(b"\r\n")[0] + b" " + body
            writer.write(OK % (len(out), out))

    async def main():
        server, url, count = await _serve(echo)
        pool = ConnectionPool(url + "/base/", 4, 10.0, 10.0)
        got = []
        for i in range(3):
            resp = await pool.post("/v1/x", b"x-a: 1\r\n", b"body%d" % i)
            got.append((resp.status_code, dict(resp.headers)[b"content-type"],
                        await resp.read()))  # fmt: skip
            resp.release()
        await pool.aclose()
        server.close()
        return got, count[0]

    got, conns = asyncio.run(main())
    assert got == [(200, b"application/json", b"POST /base/v1/x HTTP/1.1 body%d" % i)
                   for i in range(3)]  # fmt: skip
    assert conns == 1


def test_chunks_arrive_as_sent_and_a_close_delimited_body_ends_at_close():
    step = None

    async def chunked(reader, writer, n):
        await _request(reader)
        if n == 1:
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\none\r\n")
            await step.wait()  # the client must see "one" before "two" is sent
            writer.write(b"3\r\ntwo\r\n0\r\n\r\n")
            await reader.read()  # keep-alive: the client closes it
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end")

    async def main():
        nonlocal step
        step = asyncio.Event()
        server, url, count = await _serve(chunked)
        pool = ConnectionPool(url, 4, 10.0, 10.0)
        resp = await pool.post("/s", b"", b"{}")
        first = await resp.next_chunk()
        step.set()
        rest = [await resp.next_chunk(), await resp.next_chunk()]
        resp.release()
        pool.idle[0].close()  # force a second connection for the close-delimited answer
        resp = await pool.post("/c", b"", b"{}")
        body = await resp.read()
        resp.release()
        server.close()
        return first, rest, body, count[0], len(pool.idle)

    first, rest, body, conns, idle = asyncio.run(main())
    assert (first, rest) == (b"one", [b"two", b""])
    assert (body, conns, idle) == (b"until the end", 2, 0)  # a closed connection is not kept


def test_failures_before_and_after_the_headers_and_timeouts():
    async def bad(reader, writer, n):
        await _request(reader)
        if n == 1:
            return  # closed before any response byte
        if n == 2:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial")
            await writer.drain()
            return  # closed mid-body
        await asyncio.sleep(5)  # never answers

    async def main():
        server, url, _ = await _serve(bad)
        pool = ConnectionPool(url, 4, 10.0, 10.0)
        out = []
        with pytest.raises(UpstreamConnectError):
            await pool.post("/x", b"", b"{}")
        resp = await pool.post("/x", b"", b"{}")
        out.append(await resp.next_chunk())
        with pytest.raises(UpstreamReadError):
            await resp.read()
        resp.release()
        impatient = ConnectionPool(url, 4, 10.0, 0.2)  # the server never answers it
        with pytest.raises(UpstreamTimeoutError):
            await impatient.post("/x", b"", b"{}")
        server.close()
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            dead = ConnectionPool(f"http://127.0.0.1:{s.getsockname()[1]}", 4, 10.0, 10.0)
        with pytest.raises(UpstreamConnectError):
            await dead.post("/x", b"", b"{}")
        return out, len(pool.idle)

    out, idle = asyncio.run(main())
    assert out == [b"partial"] and idle == 0


def test_a_pooled_connection_closed_under_the_pool_is_not_used():
    async def echo(reader, writer, n):
        while True:
            try:
                _, body = await _request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(OK % (len(body), body))

    class Dead:  # a transport uvloop closed before the pool heard of it: write raises
        def is_closing(self) -> bool:
            return False

        def write(self, data: bytes) -> None:
            raise RuntimeError("unable to perform operation on <TCPTransport closed=True>")

        def close(self) -> None:
            pass

    async def main():
        server, url, count = await _serve(echo)
        pool = ConnectionPool(url, 4, 10.0, 10.0)
        bodies = []
        for i in range(3):
            resp = await pool.post("/x", b"", b"%d" % i)
            bodies.append(await resp.read())
            resp.release()
            if i == 0:  # closing, but connection_lost has not run yet
                pool.idle[-1].transport.close()
            if i == 1:
                pool.idle[-1].transport = Dead()
        server.close()
        return bodies, count[0]

    bodies, conns = asyncio.run(main())
    assert bodies == [b"0", b"1", b"2"] and conns == 3  # each time a fresh connection
