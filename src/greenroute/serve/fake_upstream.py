"""A fake OpenAI-compatible upstream and a uvicorn-in-a-thread runner (loopback), for the
gateway's tests, demos and its overhead benchmark (``python -m greenroute.serve.overhead``).

``python -m greenroute.serve.fake_upstream --port 9001 --name de-1`` serves one, as a lean
asyncio protocol with httptools' parser (``LeanFakeServer``: the same answers as
``FakeUpstream`` in its ``ok`` mode, at a fraction of uvicorn + Starlette's CPU, so that the
load test's fake upstreams leave the machine's cores to the gateway); ``--starlette`` serves
``FakeUpstream`` under uvicorn instead."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class FakeUpstream:
    """An upstream that answers every completion with its own name in ``system_fingerprint``.

    ``mode``: ``ok``; ``fail`` (HTTP 500); ``die-mid-stream`` (streams two chunks then drops
    the connection); ``empty`` (200 with an empty body)."""

    name: str
    mode: str = "ok"
    chunks: int = 3
    delay_s: float = 0.0  # before answering
    chunk_delay_s: float = 0.0  # between streamed chunks
    served: int = 0
    bodies: list = field(default_factory=list)
    healthy: bool = True

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
        ])  # fmt: skip

    async def models(self, request: Request) -> Response:
        if not self.healthy:
            return JSONResponse({"error": "down"}, status_code=503)
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": "tiny", "object": "model", "created": 0, "owned_by": "fake"}],
            }
        )

    async def chat(self, request: Request) -> Response:
        return await self._answer(request, "chat")

    async def completions(self, request: Request) -> Response:
        return await self._answer(request, "text")

    async def _answer(self, request: Request, kind: str) -> Response:
        body = await request.body()
        self.bodies.append(body)
        if self.mode == "fail":
            return JSONResponse({"error": {"message": "boom"}}, status_code=500)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        self.served += 1
        payload = json.loads(body)
        if self.mode == "empty":
            return Response(b"", status_code=200, media_type="text/event-stream")
        if payload.get("stream"):
            usage = (payload.get("stream_options") or {}).get("include_usage") is True
            return StreamingResponse(self._events(kind, payload["model"], usage),
                                     media_type="text/event-stream")  # fmt: skip
        if kind == "chat":
            out = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": payload["model"],
                "system_fingerprint": self.name,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": f"hello from {self.name}"},
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
            }
        else:
            out = {
                "id": "cmpl-1",
                "object": "text_completion",
                "created": 1,
                "model": payload["model"],
                "system_fingerprint": self.name,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "logprobs": None,
                        "text": f"hello from {self.name}",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
            }
        return JSONResponse(out, headers={"x-fake-upstream": self.name})

    async def _events(self, kind: str, model: str, usage: bool = False):
        for i in range(self.chunks):
            if self.mode == "die-mid-stream" and i == 2:
                raise RuntimeError("upstream died mid-stream")  # uvicorn drops the connection
            if kind == "chat":
                ev = {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": model,
                    "system_fingerprint": self.name,
                    "choices": [
                        {"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}
                    ],
                }
            else:
                ev = {
                    "id": "cmpl-1",
                    "object": "text_completion",
                    "created": 1,
                    "model": model,
                    "system_fingerprint": self.name,
                    "choices": [
                        {"index": 0, "text": f"t{i} ", "finish_reason": None, "logprobs": None}
                    ],
                }
            yield f"data: {json.dumps(ev)}\n\n".encode()
            await asyncio.sleep(self.chunk_delay_s)
        if usage:  # OpenAI's stream_options.include_usage: a last chunk with no choices
            ev = {"id": "cmpl-1", "object": "chat.completion.chunk", "created": 1,
                  "model": model, "choices": [], "usage": _USAGE}  # fmt: skip
            yield f"data: {json.dumps(ev)}\n\n".encode()
        yield b"data: [DONE]\n\n"


class ServerThread:
    """``uvicorn`` serving ``app`` on 127.0.0.1 and an ephemeral port, in a thread."""

    def __init__(self, app, port: int = 0) -> None:
        self.config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error",
                                     access_log=False, lifespan="auto",
                                     timeout_graceful_shutdown=1)  # fmt: skip
        self.server = uvicorn.Server(self.config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.port = 0

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, force: bool = False) -> None:
        """Shut down (``force``: without waiting for open connections, as a crash would)."""
        self.server.should_exit = True
        self.server.force_exit = force
        self.thread.join(timeout=10)


def answer(name: str, kind: str, model: str) -> dict:
    """``FakeUpstream``'s non-streaming answer (``kind``: chat or text)."""
    if kind == "chat":
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
                "system_fingerprint": name,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": f"hello from {name}"}}],
                "usage": _USAGE}  # fmt: skip
    return {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": model,
            "system_fingerprint": name,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "text": f"hello from {name}"}],
            "usage": _USAGE}  # fmt: skip


_USAGE = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
_KINDS = {b"/v1/chat/completions": "chat", b"/v1/completions": "text"}


class _LeanConn(asyncio.Protocol):
    """One HTTP/1.1 keep-alive connection of ``LeanFakeServer`` (requests in order)."""

    def __init__(self, server: LeanFakeServer) -> None:
        import httptools

        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport = None
        self.url = b""
        self.body: list[bytes] = []

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        import httptools

        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        url, body = self.url, b"".join(self.body)
        self.url, self.body = b"", []
        method = self.parser.get_method()
        keep = self.parser.should_keep_alive()
        kind = _KINDS.get(url)
        name = self.server.name
        if method == b"GET" and url == b"/v1/models":
            self._send(200, json.dumps({"object": "list", "data": [
                {"id": "tiny", "object": "model", "created": 0, "owned_by": "fake"}]}).encode(),
                keep)  # fmt: skip
            return
        if method != b"POST" or kind is None:
            self._send(404, b'{"error": "not found"}', keep)
            return
        try:
            payload = json.loads(body)
            model = payload["model"]
        except (ValueError, KeyError, TypeError):
            self._send(400, b'{"error": "bad request"}', keep)
            return
        self.server.served += 1
        if payload.get("stream"):  # every event in one chunked answer
            events = b"".join(
                b"data: " + json.dumps(ev).encode() + b"\n\n"
                for ev in _stream_events(name, kind, model, FakeUpstream.chunks)
            ) + b"data: [DONE]\n\n"  # fmt: skip
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                                 b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
                                 % (len(events), events))  # fmt: skip
        else:
            self._send(200, json.dumps(answer(name, kind, model)).encode(), keep,
                       b"x-fake-upstream: " + name.encode() + b"\r\n")  # fmt: skip
        if not keep:
            self.transport.close()

    def _send(self, status: int, body: bytes, keep: bool, extra: bytes = b"") -> None:
        reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}[status]
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n%s%s\r\n%s"
                             % (status, reason, len(body), extra,
                                b"" if keep else b"connection: close\r\n", body))  # fmt: skip


def _stream_events(name: str, kind: str, model: str, n: int) -> list[dict]:
    if kind == "chat":
        return [{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                 "model": model, "system_fingerprint": name,
                 "choices": [{"index": 0, "delta": {"content": f"t{i} "},
                              "finish_reason": None}]} for i in range(n)]  # fmt: skip
    return [{"id": "cmpl-1", "object": "text_completion", "created": 1, "model": model,
             "system_fingerprint": name,
             "choices": [{"index": 0, "text": f"t{i} ", "finish_reason": None,
                          "logprobs": None}]} for i in range(n)]  # fmt: skip


@dataclass
class LeanFakeServer:
    """``FakeUpstream``'s ``ok`` mode as a bare asyncio server (chat and text completions,
    streamed or not, and ``GET /v1/models``), for load tests."""

    name: str
    served: int = 0

    async def serve(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _LeanConn(self), host, port, backlog=1024)
        async with server:
            await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=9001)
    ap.add_argument("--name", default="fake")
    ap.add_argument("--starlette", action="store_true", help="uvicorn + Starlette instead")
    args = ap.parse_args(argv)
    if args.starlette:
        uvicorn.run(FakeUpstream(args.name).app(), host="127.0.0.1", port=args.port,
                    log_level="warning")  # fmt: skip
        return
    try:
        import uvloop

        uvloop.run(LeanFakeServer(args.name).serve("127.0.0.1", args.port))
    except ImportError:
        asyncio.run(LeanFakeServer(args.name).serve("127.0.0.1", args.port))


if __name__ == "__main__":  # pragma: no cover
    main()
