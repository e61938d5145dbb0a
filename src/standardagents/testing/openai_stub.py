"""A real HTTP server speaking the OpenAI chat-completions wire protocol, for tests and benchmarks.

Tests drive providers through the real ``openai`` SDK against this server on 127.0.0.1, so
what is exercised is the actual wire format (SSE chunks, split tool-call arguments, usage
chunks, error bodies, dropped connections) rather than a mock of our own code.

Use it as ``with OpenAIStub() as stub:`` (or ``async with``); it listens on a free port and
serves from a background thread. Run it standalone with ``python -m
standardagents.testing.openai_stub --port P`` for the HTTP fan-out benchmark workload.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ._server import ScriptedServer, read_json

__all__ = ["OpenAIStub", "StubReply", "main"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass
class StubReply:
    """One scripted reply of the stub.

    ``tool_calls`` are ``(name, arguments_json)`` pairs. ``error_status`` answers with that
    HTTP status and an OpenAI-shaped error body (or ``error_body``). ``drop_connection``
    closes the connection after the response headers and before any token;
    ``drop_after_chunks`` closes it mid-stream after that many SSE chunks.
    """

    text: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    reasoning: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    delay: float = 0.0
    error_status: int | None = None
    error_body: Any = None
    #: with ``error_status``: the ``Retry-After`` header (seconds) the error carries
    retry_after: int | None = None
    chunk_size: int = 4
    drop_connection: bool = False
    drop_after_chunks: int | None = None
    #: streamed replies pause this long after ``stall_after_chunks`` chunks (a slow model mid-reply)
    stall_after_chunks: int | None = None
    stall_seconds: float = 30.0
    reasoning_field: str = "reasoning_content"
    #: answer only once this event is set (a test holds replies until the requests it expects arrived)
    hold: threading.Event | None = None


ReplyLike = StubReply | str
Responder = Callable[[dict[str, Any]], ReplyLike]


class _DropConnection(Exception):
    """Raised inside the ASGI app to make uvicorn abort the connection."""


def _as_reply(item: ReplyLike) -> StubReply:
    return StubReply(text=item) if isinstance(item, str) else item


def _estimate_usage(body: dict[str, Any], reply: StubReply) -> dict[str, int]:
    prompt = len(json.dumps(body.get("messages", []), separators=(",", ":"))) // 4
    produced = len(reply.text or "") + len(reply.reasoning or "")
    produced += sum(len(name) + len(args) for name, args in reply.tool_calls)
    completion = max(1, produced // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _pieces(text: str, size: int) -> Iterator[str]:
    size = max(1, size)
    for start in range(0, len(text), size):
        yield text[start:start + size]


def _argument_pieces(args: str, size: int) -> list[str]:
    """Split arguments into several chunks even when ``size`` would fit them in one."""
    if len(args) <= 1:
        return [args]
    size = max(1, min(size, math.ceil(len(args) / 3)))
    return list(_pieces(args, size))


class _Completion:
    """Builds the wire objects of one reply (one id, one creation time)."""

    __slots__ = ("body", "created", "id", "model", "reply", "serial")

    def __init__(self, body: dict[str, Any], reply: StubReply, serial: int) -> None:
        self.body = body
        self.reply = reply
        self.serial = serial
        self.id = f"chatcmpl-stub{serial}"
        self.created = int(time.time())
        self.model = str(body.get("model") or "stub-model")

    def finish_reason(self) -> str:
        if self.reply.finish_reason:
            return self.reply.finish_reason
        return "tool_calls" if self.reply.tool_calls else "stop"

    def usage(self) -> dict[str, Any]:
        return self.reply.usage if self.reply.usage is not None else _estimate_usage(self.body, self.reply)

    def call_id(self, index: int) -> str:
        return f"call_{self.serial}_{index}"

    def completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.text,
                                   "refusal": None}
        if self.reply.reasoning is not None:
            message[self.reply.reasoning_field] = self.reply.reasoning
        if self.reply.tool_calls:
            message["tool_calls"] = [
                {"id": self.call_id(i), "type": "function",
                 "function": {"name": name, "arguments": args}}
                for i, (name, args) in enumerate(self.reply.tool_calls)
            ]
        return {
            "id": self.id, "object": "chat.completion", "created": self.created,
            "model": self.model, "system_fingerprint": "fp_stub",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": self.finish_reason()}],
            "usage": self.usage(),
        }

    def _chunk(self, delta: dict[str, Any], finish: str | None = None,
               with_usage_field: bool = False) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model, "system_fingerprint": "fp_stub",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if with_usage_field:
            chunk["usage"] = None
        return chunk

    def chunks(self) -> Iterator[dict[str, Any]]:
        """The SSE payloads in the order OpenAI sends them."""
        opts = self.body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage"))
        reply = self.reply
        size = reply.chunk_size
        yield self._chunk({"role": "assistant", "content": "", "refusal": None},
                          with_usage_field=include_usage)
        if reply.reasoning:
            for piece in _pieces(reply.reasoning, size):
                yield self._chunk({reply.reasoning_field: piece}, with_usage_field=include_usage)
        if reply.text:
            for piece in _pieces(reply.text, size):
                yield self._chunk({"content": piece}, with_usage_field=include_usage)
        for index, (name, args) in enumerate(reply.tool_calls):
            head = {"index": index, "id": self.call_id(index), "type": "function",
                    "function": {"name": name, "arguments": ""}}
            yield self._chunk({"tool_calls": [head]}, with_usage_field=include_usage)
            for piece in _argument_pieces(args, size):
                yield self._chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]},
                                  with_usage_field=include_usage)
        yield self._chunk({}, self.finish_reason(), with_usage_field=include_usage)
        if include_usage:
            yield {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                   "model": self.model, "system_fingerprint": "fp_stub", "choices": [],
                   "usage": self.usage()}


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


_JSON_HEADERS = [(b"content-type", b"application/json")]
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class OpenAIStub(ScriptedServer[StubReply]):
    """A chat-completions server on 127.0.0.1 answering from a queue, a responder or ``"ok"``.

    Every received JSON body is appended to :attr:`requests` before the reply is chosen, so a
    test can assert exactly what the client sent.
    """

    label = "OpenAI stub"

    def __init__(self, responder: Responder | None = None, *, port: int = 0,
                 host: str = "127.0.0.1", models: list[str] | None = None) -> None:
        super().__init__(responder, host=host, port=port)
        self.models = models or ["stub-model"]
        self.max_in_flight = 0
        self._in_flight = 0
        #: streamed replies the client closed while the stub was stalled mid-reply
        self.abandoned = 0
        #: the headers of each chat request, in arrival order (lower-case names)
        self.request_headers: list[dict[str, str]] = []
        #: the bodies of ``/v1/embeddings`` requests; set ``embeddings_down`` to answer them 503
        self.embedding_requests: list[dict[str, Any]] = []
        self.embeddings_down = False

    # -- scripting -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The ``.../v1`` URL to give an OpenAI client."""
        return f"http://{self.host}:{self.port}/v1"

    def _coerce(self, item: Any) -> StubReply:
        return _as_reply(item)

    def _default_reply(self) -> StubReply:
        return StubReply(text="ok")

    def reset(self) -> None:
        """Forget received requests, queued replies and the in-flight high-water mark."""
        super().reset()
        self.max_in_flight = self._in_flight
        self.abandoned = 0

    # -- ASGI ------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        method = scope["method"]
        if method == "GET" and path.rstrip("/").endswith("/models"):
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "stub"} for m in self.models]
            await self._send_json(send, 200, {"object": "list", "data": data})
            return
        if method == "POST" and path.rstrip("/").endswith("/embeddings"):
            await self._embeddings(receive, send)
            return
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            await self._send_json(send, 404, {"error": {"message": f"no route {method} {path}",
                                                        "type": "invalid_request_error"}})
            return
        body = await read_json(receive)
        if body is None:
            await self._send_json(send, 400, {"error": {"message": "body is not JSON",
                                                        "type": "invalid_request_error"}})
            return
        self.request_headers.append({k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]})
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            await self._reply(body, send, receive)
        finally:
            self._in_flight -= 1

    async def _embeddings(self, receive: Receive, send: Send) -> None:
        """``POST /v1/embeddings``: a deterministic vector per input (the offline embedder's),
        so a client gets the shape OpenAI answers; every body lands in :attr:`embedding_requests`.
        ``embeddings_down`` makes it answer 503, as an embedding endpoint that is down."""
        body = await read_json(receive)
        if not isinstance(body, dict) or not isinstance(body.get("input"), str | list):
            await self._send_json(send, 400, {"error": {"message": "'input' must be a string or a list of strings",
                                                        "type": "invalid_request_error"}})
            return
        self.embedding_requests.append(body)
        if self.embeddings_down:
            await self._send_json(send, 503, {"error": {"message": "the embedding model is unavailable",
                                                        "type": "server_error"}})
            return
        from ..memory.embedders import OfflineEmbedder

        texts = [body["input"]] if isinstance(body["input"], str) else [str(t) for t in body["input"]]
        asked = body.get("dimensions")
        dims = asked if isinstance(asked, int) else 64
        embedder = OfflineEmbedder(dims=dims)
        data = [{"object": "embedding", "index": i, "embedding": embedder.embed_one(t)} for i, t in enumerate(texts)]
        tokens = sum(len(t.split()) for t in texts)
        await self._send_json(send, 200, {"object": "list", "data": data, "model": body.get("model", "stub-embedding"),
                                          "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    @staticmethod
    async def _send_json(send: Send, status: int, payload: Any,
                         extra: list[tuple[bytes, bytes]] | None = None) -> None:
        data = _dumps(payload)
        await send({"type": "http.response.start", "status": status,
                    "headers": [*_JSON_HEADERS, (b"content-length", str(len(data)).encode()), *(extra or [])]})
        await send({"type": "http.response.body", "body": data})

    async def _stall(self, seconds: float, receive: Receive) -> bool:
        """Pause mid-stream; True when the client closed the connection meanwhile (the
        body was read in full, so the next message is the disconnect)."""
        gone = asyncio.ensure_future(receive())
        pause = asyncio.ensure_future(self._pause(seconds))
        await asyncio.wait({gone, pause}, return_when=asyncio.FIRST_COMPLETED)
        pause.cancel()
        if gone.done() and gone.result().get("type") == "http.disconnect":
            with self._cond:
                self.abandoned += 1
                self._cond.notify_all()
            return True
        gone.cancel()
        return False

    def wait_abandoned(self, n: int, timeout: float = 5.0) -> bool:
        """Whether ``n`` stalled streams were closed by the client within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self.abandoned >= n, timeout)

    async def wait_abandoned_async(self, n: int, timeout: float = 5.0) -> bool:  # noqa: ASYNC109
        """Like :meth:`wait_abandoned`, without blocking the calling event loop."""
        return await asyncio.to_thread(self.wait_abandoned, n, timeout)

    async def _reply(self, body: dict[str, Any], send: Send, receive: Receive) -> None:
        serial = self._record(body)
        reply = self._next_reply(body)
        await self._pause(reply.delay)
        if reply.hold is not None:
            await self._hold(reply.hold)
        if reply.error_status is not None:
            payload = reply.error_body if reply.error_body is not None else {
                "error": {"message": f"stub error {reply.error_status}", "type": "stub_error",
                          "param": None, "code": str(reply.error_status)}}
            extra = [(b"retry-after", str(reply.retry_after).encode())] if reply.retry_after is not None else None
            await self._send_json(send, reply.error_status, payload, extra)
            return
        completion = _Completion(body, reply, serial)
        if not body.get("stream"):
            if reply.drop_connection:
                await send({"type": "http.response.start", "status": 200,
                            "headers": [*_JSON_HEADERS, (b"content-length", b"1000")]})
                raise _DropConnection("dropped on purpose")
            await self._send_json(send, 200, completion.completion())
            return
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        if reply.drop_connection:
            raise _DropConnection("dropped on purpose")
        sent = 0
        for chunk in completion.chunks():
            if reply.drop_after_chunks is not None and sent >= reply.drop_after_chunks:
                raise _DropConnection("dropped on purpose")
            if reply.stall_after_chunks is not None and sent == reply.stall_after_chunks:
                if await self._stall(reply.stall_seconds, receive):
                    return
            await send({"type": "http.response.body", "body": b"data: " + _dumps(chunk) + b"\n\n",
                        "more_body": True})
            sent += 1
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


# -- standalone benchmark workload --------------------------------------------------------

def _tool_rounds_responder(rounds: int) -> Responder:
    """Call the first offered tool until ``rounds`` tool results are in the transcript."""
    from ..providers.testmodel import arguments_for_schema

    def respond(body: dict[str, Any]) -> StubReply:
        messages = body.get("messages") or []
        seen = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
        tools = body.get("tools") or []
        if tools and seen < rounds:
            fn = tools[0].get("function") or {}
            args = arguments_for_schema(fn.get("parameters") or {})
            return StubReply(tool_calls=[(str(fn.get("name", "tool")), json.dumps(args))],
                             chunk_size=64)
        return StubReply(text=f"Done after {seen} tool results.", chunk_size=64)

    return respond


def main(argv: list[str] | None = None) -> None:
    """Serve the benchmark workload in this process until ``--max-seconds`` pass."""
    import uvicorn

    parser = argparse.ArgumentParser(description="OpenAI chat-completions stub server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--tool-rounds", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    args = parser.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        parser.error("the stub serves on loopback only")

    base = _tool_rounds_responder(args.tool_rounds)
    delay = args.delay_ms / 1000.0

    def respond(body: dict[str, Any]) -> StubReply:
        reply = _as_reply(base(body))
        reply.delay = delay
        return reply

    stub = OpenAIStub(respond, host=args.host, port=args.port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((stub.host, stub.port))
    stub.port = sock.getsockname()[1]
    config = uvicorn.Config(stub, lifespan="on", log_level="warning", access_log=False,
                            backlog=4096, timeout_keep_alive=60)
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():  # noqa: ASYNC110 - uvicorn has no started event
            await asyncio.sleep(0.01)
        print(f"READY {stub.base_url}", flush=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), args.max_seconds)
        server.should_exit = True
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
