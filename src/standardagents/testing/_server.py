"""The part every wire stub shares: serving an ASGI app on 127.0.0.1 from a background thread,
its lifespan, pauses that end early at shutdown, and ``with`` / ``async with`` use."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import socket
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from starlette.types import Receive, Scope, Send

__all__ = ["LoopbackServer", "ScriptedServer", "read_body", "read_json"]

R = TypeVar("R")

#: what :func:`read_json` answers for a body that is not JSON
NOT_JSON: Any = None


async def read_body(receive: Receive) -> bytes:
    """A request's whole body, however many ASGI messages it came in."""
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if not message.get("more_body"):
            return raw


async def read_json(receive: Receive) -> Any:
    """A request's body as JSON (an empty body reads as ``{}``); None when it is not JSON."""
    try:
        return json.loads(await read_body(receive) or b"{}")
    except ValueError:
        return NOT_JSON


class LoopbackServer:
    """Base of the stubs: subclasses implement the ASGI ``__call__`` for ``http`` scopes and
    hand ``lifespan`` scopes to :meth:`_lifespan`."""

    #: used in the server thread's name and in start-up errors
    label = "stub"
    backlog = 2048

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._closing: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The stub's ASGI app (each stub answers its own protocol)."""
        raise NotImplementedError

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._closing = asyncio.Event()
                self._loop = asyncio.get_running_loop()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._closing is not None:
                    self._closing.set()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or less when the server shuts down meanwhile."""
        if seconds <= 0:
            return
        if self._closing is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)

    async def _hold(self, event: threading.Event) -> None:
        """Wait until ``event`` is set (from any thread), or the server shuts down.

        Polled: the setter runs on another thread and has no handle on this loop, and a
        blocking wait in an executor thread per held request would exhaust the pool."""
        while not event.is_set() and not (self._closing is not None and self._closing.is_set()):  # noqa: ASYNC110
            await asyncio.sleep(0.005)

    def start(self) -> Self:
        """Start serving in a background thread; returns once the port accepts connections."""
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self, lifespan="on", log_level="critical", log_config=None,
                                access_log=False, timeout_graceful_shutdown=2,
                                backlog=self.backlog, timeout_keep_alive=30)
        self._server = uvicorn.Server(config)

        def serve() -> None:
            try:
                asyncio.run(self._server.serve(sockets=[sock]))
            except BaseException as exc:  # handed to the starting thread
                self._startup_error = exc
            finally:
                sock.close()
                self._ready.set()

        self._thread = threading.Thread(target=serve, name=self.label, daemon=True)
        self._thread.start()
        while not self._ready.is_set() and not self._server.started:
            self._ready.wait(0.005)
        if self._startup_error is not None:
            raise RuntimeError(f"{self.label} failed to start: {self._startup_error}")
        return self

    def stop(self) -> None:
        """Stop the server (cutting scripted delays short) and wait for its thread."""
        if self._loop is not None and self._closing is not None:
            with contextlib.suppress(RuntimeError):  # the loop may already be closed
                self._loop.call_soon_threadsafe(self._closing.set)
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.to_thread(self.stop)


class ScriptedServer(LoopbackServer, Generic[R]):
    """A loopback server whose replies come from a queue, then a responder, then a default.

    Every received body (and its headers) is recorded before the reply is chosen, so a test
    can assert exactly what the client sent. Subclasses say how an item becomes a reply
    (:meth:`_coerce`) and what answers when nothing is scripted (:meth:`_default_reply`).
    """

    def __init__(self, responder: Callable[[dict[str, Any]], Any] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._queue: collections.deque[R] = collections.deque()
        self._cond = threading.Condition()
        self._serial = 0

    def _coerce(self, item: Any) -> R:
        raise NotImplementedError

    def _default_reply(self) -> R:
        raise NotImplementedError

    def queue(self, *replies: Any) -> None:
        """Answer the next requests with these replies, in order (before any responder)."""
        with self._cond:
            self._queue.extend(self._coerce(r) for r in replies)

    def reset(self) -> None:
        """Forget received requests and queued replies."""
        with self._cond:
            self.requests.clear()
            self.headers.clear()
            self._queue.clear()

    def wait_requests(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Block until ``n`` requests arrived (from a thread other than the server's)."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= n, timeout):
                raise TimeoutError(f"stub received {len(self.requests)} requests, expected {n}")
            return list(self.requests)

    async def wait_requests_async(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:  # noqa: ASYNC109
        """Like :meth:`wait_requests`, without blocking the calling event loop."""
        return await asyncio.to_thread(self.wait_requests, n, timeout)

    def _record(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> int:
        """Record a request; returns its serial number (1, 2, ...)."""
        with self._cond:
            self.requests.append(body)
            self.headers.append(headers or {})
            self._serial += 1
            self._cond.notify_all()
            return self._serial

    def _next_reply(self, body: dict[str, Any]) -> R:
        with self._cond:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self._coerce(self.responder(body))
        return self._default_reply()
