"""Live event streams: a thread's events over SSE or WebSocket, and a user's own stream.

Each client gets a bounded subscription, so a slow reader is told it ``lagged`` while the
engine never waits. Reasoning chunks are sent only to clients asking for them with the
``includeReasoning`` query parameter (the spec's ``THREAD_STREAM_REASONING_PARAM``).

A client that reconnects names the last event id it saw (the SSE ``Last-Event-ID`` header,
or the ``after`` query parameter on any stream): it is first sent what it missed from the
event log (:mod:`standardagents.eventlog`), then live events, with no duplicate and no gap;
when what it missed is older than the log keeps, it gets one ``lagged`` event
(``reason: "expired"``) telling it to re-read the thread's messages instead.

On every connection ids only grow. The bus hands this worker's subscribers a thread's
events in id order, those of other workers included (:class:`~standardagents.events.Sequencer`),
so in normal operation nothing is out of order; a connection still never sends an id at or
below one it sent, so an event that comes again (a ``done`` a recovery publishes once more,
under its id) or too late (from a worker that was taken as gone) is not sent twice or
backwards: a client that reconnects gets it from the log if it is new to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response, StreamingResponse
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from ..eventlog import Replay, user_stream_key
from ..events import END, Event, Subscription
from ..store.checks import INT64_MAX
from .auth import authenticate, require_thread
from .errors import ApiError
from .state import server_of

__all__ = [
    "KEEPALIVE_SECONDS",
    "THREAD_STREAM_REASONING_PARAM",
    "resume_after",
    "sse_encode",
    "sse_response",
    "thread_stream",
    "thread_ws",
    "turn_events",
    "user_stream",
    "user_ws",
    "wants_reasoning",
]

#: the query parameter a client sets to receive reasoning chunks
THREAD_STREAM_REASONING_PARAM = "includeReasoning"
_REASONING_ALIASES = (THREAD_STREAM_REASONING_PARAM, "include_reasoning", "reasoning")
KEEPALIVE_SECONDS = 15.0
_TRUE = {"1", "true", "yes", "on", ""}


def wants_reasoning(conn: HTTPConnection) -> bool:
    for name in _REASONING_ALIASES:
        if name in conn.query_params:
            return conn.query_params[name].strip().lower() in _TRUE
    return False


def sse_encode(event: Event) -> bytes:
    """One event as an SSE frame: ``id``, ``event`` (its type) and the JSON wire shape.

    Events made for one client (``connected``, ``lagged``) carry no ``id:`` line, so a
    browser's ``Last-Event-ID`` stays the id of the last real event."""
    payload = json.dumps(event.to_dict(), separators=(",", ":"), default=str)
    if not event.id:
        return f"event: {event.type}\ndata: {payload}\n\n".encode()
    return f"id: {event.id}\nevent: {event.type}\ndata: {payload}\n\n".encode()


def resume_after(conn: HTTPConnection) -> int | None:
    """The last event id a reconnecting client saw: the ``after`` query parameter, else the
    SSE ``Last-Event-ID`` header; ``None`` for a fresh connection."""
    raw = conn.query_params.get("after")
    name = "the 'after' query parameter"
    if raw is None:
        raw = conn.headers.get("last-event-id")
        name = "the Last-Event-ID header"
    if raw is None or not raw.strip():
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if not 0 <= value <= INT64_MAX:
        raise ApiError(400, f"{name} must be an event id (a whole number from 0 to {INT64_MAX}), got {raw[:40]!r}",
                       "invalid_request")
    return value


async def _replay(server: Any, stream: str, after: int | None, thread_id: str, reasoning: bool) -> Replay | None:
    """What a reconnecting client missed (``None`` for a fresh connection or without a log)."""
    if after is None or server.event_log is None:
        return None
    replay: Replay = await server.event_log.replay(stream, after, thread_id=thread_id, reasoning=reasoning)
    return replay


def _expired(thread_id: str, after: int) -> Event:
    return Event("lagged", thread_id, {"reason": "expired", "after": after, "missed": None})


async def _resumed(replay: Replay | None, thread_id: str,
                   live: AsyncIterator[Event | None]) -> AsyncIterator[Event | None]:
    """The replayed events (or ``lagged``), then the live ones the client has not seen, each
    id above the one sent before (an event published again keeps its id, and is not sent
    twice)."""
    last = 0
    try:
        if replay is not None:
            if replay.lagged:
                yield _expired(thread_id, replay.last_id)
            for missed in replay.events:
                last = max(last, missed.id)
                yield missed
            last = max(last, replay.last_id)
        async for event in live:
            if event is not None and event.id:
                if event.id <= last:
                    continue
                last = event.id
            yield event
    finally:
        with contextlib.suppress(BaseException):
            await live.aclose()  # type: ignore[attr-defined]


class _ClosingStream(StreamingResponse):
    """A streaming response that runs ``on_close`` however it ends, also when the client is
    gone before the body started (the body's own ``finally`` never runs then)."""

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[], None] | None, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._on_close = on_close

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self._on_close is not None:
                self._on_close()
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(BaseException):
                    await aclose()


def sse_response(frames: AsyncIterator[bytes], headers: dict[str, str] | None = None,
                 on_close: Callable[[], None] | None = None) -> Response:
    """An SSE response; ``on_close`` runs when it ends, whatever the client did (close a
    subscription there, so a client leaving early leaks nothing)."""
    base = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    base.update(headers or {})
    return _ClosingStream(frames, on_close, media_type="text/event-stream", headers=base)


async def _events(sub: Subscription, *, keepalive: float = KEEPALIVE_SECONDS) -> AsyncIterator[Event | None]:
    """Events of a subscription; ``None`` when nothing happened for ``keepalive`` seconds."""
    try:
        while True:
            try:
                event = await asyncio.wait_for(sub.queue.get(), keepalive)
            except TimeoutError:
                yield None
                continue
            if event is END:  # the server is shutting down: the client reconnects elsewhere
                return
            yield event
    finally:
        sub.close()


async def _sse_frames(sub: Subscription, first: bytes | None = None,
                      replay: Replay | None = None) -> AsyncIterator[bytes]:
    if first is not None:
        yield first
    async for event in _resumed(replay, sub.thread_id or "", _events(sub)):
        yield b": keepalive\n\n" if event is None else sse_encode(event)


async def _open_thread_feed(conn: HTTPConnection, thread_id: str, reasoning: bool) -> tuple[Subscription, Replay | None]:
    """Subscribe first, then read what a reconnecting client missed: nothing falls between."""
    after = resume_after(conn)
    server = server_of(conn)
    sub = server.runtime.subscribe(thread_id, reasoning=reasoning, maxsize=server.stream_buffer)
    server.streams.add(sub)
    try:
        return sub, await _replay(server, thread_id, after, thread_id, reasoning)
    except BaseException:
        sub.close()
        raise


def _hello(thread_id: str, reasoning: bool) -> Event:
    return Event("connected", thread_id, {"threadId": thread_id, "reasoning": reasoning})


async def thread_stream(request: Request) -> Response:
    """``GET {prefix}/threads/{id}/stream``: every event of the thread from now on, as SSE
    (after what it missed, for a client sending ``Last-Event-ID`` or ``after``)."""
    caller = await authenticate(request, allow_query=True)
    thread_id = request.path_params["thread_id"]
    await require_thread(request, thread_id, caller)
    reasoning = wants_reasoning(request)
    sub, replay = await _open_thread_feed(request, thread_id, reasoning)
    return sse_response(_sse_frames(sub, sse_encode(_hello(thread_id, reasoning)), replay), on_close=sub.close)


async def _ws_pump(websocket: WebSocket, source: AsyncIterator[Event | None]) -> None:
    """Send events until the client goes away; the client's messages are read and ignored
    (except ``{"type": "ping"}``, answered with a pong)."""

    async def reader() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text and '"ping"' in text:
                await websocket.send_json({"type": "pong"})

    read_task = asyncio.create_task(reader())
    try:
        while True:
            next_event = asyncio.ensure_future(anext(source))
            done, _ = await asyncio.wait({next_event, read_task}, return_when=asyncio.FIRST_COMPLETED)
            if next_event not in done:
                next_event.cancel()
                with contextlib.suppress(BaseException):
                    await next_event
                break
            try:
                event = next_event.result()
            except StopAsyncIteration:  # the stream ended (the server is shutting down)
                break
            if event is None:
                continue
            try:
                await websocket.send_text(json.dumps(event.to_dict(), separators=(",", ":"), default=str))
            except (WebSocketDisconnect, RuntimeError):
                break
    finally:
        read_task.cancel()
        with contextlib.suppress(BaseException):
            await read_task
        with contextlib.suppress(BaseException):
            await source.aclose()  # type: ignore[attr-defined]
        if websocket.application_state == WebSocketState.CONNECTED:
            with contextlib.suppress(BaseException):
                await websocket.close()


async def _ws_refuse(websocket: WebSocket, exc: ApiError) -> None:
    # Accept, then close with 4000 + the HTTP status: a browser client can read why it was refused.
    await websocket.accept()
    await websocket.close(code=4000 + exc.status_code, reason=exc.message[:120])


async def thread_ws(websocket: WebSocket) -> None:
    """``{prefix}/threads/{id}/ws``: the same events as the SSE stream, one JSON text frame each."""
    thread_id = websocket.path_params["thread_id"]
    reasoning = wants_reasoning(websocket)
    try:
        caller = await authenticate(websocket, allow_query=True)
        await require_thread(websocket, thread_id, caller)
        sub, replay = await _open_thread_feed(websocket, thread_id, reasoning)
    except ApiError as exc:
        await _ws_refuse(websocket, exc)
        return
    try:
        await websocket.accept()
        await websocket.send_text(json.dumps(_hello(thread_id, reasoning).to_dict()))
    except BaseException:
        sub.close()
        raise
    await _ws_pump(websocket, _resumed(replay, thread_id, _events(sub)))


async def turn_events(sub: Subscription, task: asyncio.Task[Any], runtime: Any, thread_id: str,
                      execution_id: str | None = None) -> AsyncIterator[Event]:
    """The events of one execution (the one ``task`` runs), ending after its ``done``.

    The subscription must have been opened before the execution started so nothing is missed.
    Events of an execution queued ahead of it pass through too: a client sees the thread as is.
    """
    mine: str | None = execution_id
    try:
        while True:
            getter = asyncio.ensure_future(sub.queue.get())
            done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                with contextlib.suppress(BaseException):
                    await getter
                while not sub.queue.empty():
                    event = sub.queue.get_nowait()
                    if event is END:
                        return
                    yield event
                    if event.type == "done" and (mine is None or event.data.get("executionId") == mine):
                        return
                return
            event = getter.result()
            if event is END:
                return
            yield event
            if event.type == "done" and mine is not None and event.data.get("executionId") == mine:
                return
    finally:
        sub.close()


async def _user_frames(websocket_or_request: HTTPConnection, transport: str) -> tuple[Any, Any, Any, Replay | None]:
    server = server_of(websocket_or_request)
    caller = await authenticate(websocket_or_request, allow_query=True)
    after = resume_after(websocket_or_request)
    client = await server.hub.attach(caller, transport, websocket_or_request.headers.get("user-agent"))
    try:
        replay = await _replay(server, user_stream_key(caller.id), after, "", True)
    except BaseException:
        await server.hub.detach(caller, client)
        raise
    return server, caller, client, replay


async def _client_events(client: Any) -> AsyncIterator[Event | None]:
    while True:
        try:
            event = await asyncio.wait_for(client.queue.get(), KEEPALIVE_SECONDS)
        except TimeoutError:
            yield None
            continue
        if event is END:
            return
        yield event


async def user_stream(request: Request) -> Response:
    """``GET {prefix}/users/me/stream``: the caller's own events (value changes, custom
    events), as SSE; attaching and detaching run the user hooks."""
    server, caller, client, replay = await _user_frames(request, "sse")

    async def frames() -> AsyncIterator[bytes]:
        try:
            yield sse_encode(Event("connected", "", {"client": client.to_dict()}))
            async for event in _resumed(replay, "", _client_events(client)):
                yield b": keepalive\n\n" if event is None else sse_encode(event)
        finally:
            await server.hub.detach(caller, client)

    return sse_response(frames())


async def user_ws(websocket: WebSocket) -> None:
    """``{prefix}/users/me/ws``: the user stream over a WebSocket."""
    try:
        server, caller, client, replay = await _user_frames(websocket, "websocket")
    except ApiError as exc:
        await _ws_refuse(websocket, exc)
        return
    try:
        await websocket.accept()
        await websocket.send_text(json.dumps(Event("connected", "", {"client": client.to_dict()}).to_dict()))
        await _ws_pump(websocket, _resumed(replay, "", _client_events(client)))
    finally:
        await server.hub.detach(caller, client)
