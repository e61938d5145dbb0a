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
import re
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, NoReturn

import orjson
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
    "event_json",
    "resume_after",
    "sse_encode",
    "sse_response",
    "thread_stream",
    "thread_ws",
    "turn_batches",
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


#: orjson's output differs from ``json.dumps`` (the wire format clients have always had) only
#: in non-ASCII and DEL characters (``json`` escapes them) and in floats below 1e-4 or with
#: an exponent (``json`` writes ``repr``): a payload showing any of them is encoded again by
#: ``json``, so the bytes never change (a string that merely looks like one costs a re-encode)
_DIFFERS = re.compile(rb"[\x7f-\xff]|[:,\[]-?(?:0\.0000|\d+(?:\.\d+)?e)")
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
#: frames of recently encoded events, so every subscriber of a thread shares one encoding
_FRAMES: OrderedDict[int, tuple[Event, bytes]] = OrderedDict()
_FRAMES_KEPT = 256


def _not_native(value: object) -> NoReturn:
    raise TypeError(type(value).__name__)


def event_json(data: Any) -> bytes:
    """``data`` as compact JSON, byte for byte what ``json.dumps(data, separators=(",", ":"),
    default=str)`` gives (orjson first, ``json`` for what orjson would write differently:
    values orjson does not take, datetimes, dataclasses, see :data:`_DIFFERS`). The one
    exception is a NaN or infinite float, which ``json`` writes as the non-JSON ``NaN`` and
    this as ``null``."""
    try:
        payload = orjson.dumps(data, default=_not_native, option=_ORJSON_OPTIONS)
    except TypeError:
        return json.dumps(data, separators=(",", ":"), default=str).encode()
    if _DIFFERS.search(payload) is None:
        return payload
    return json.dumps(data, separators=(",", ":"), default=str).encode()


def sse_encode(event: Event) -> bytes:
    """One event as an SSE frame: ``id``, ``event`` (its type) and the JSON wire shape.

    Events made for one client (``connected``, ``lagged``) carry no ``id:`` line, so a
    browser's ``Last-Event-ID`` stays the id of the last real event. A published event is
    encoded once however many clients stream it (the recent frames are kept by identity)."""
    if not event.id:
        return b"event: " + event.type.encode() + b"\ndata: " + event_json(event.to_dict()) + b"\n\n"
    key = id(event)
    hit = _FRAMES.get(key)
    if hit is not None and hit[0] is event:
        return hit[1]
    frame = (b"id: " + str(event.id).encode() + b"\nevent: " + event.type.encode() + b"\ndata: "
             + event_json(event.to_dict()) + b"\n\n")
    _FRAMES[key] = (event, frame)  # the event is held, so its id() names no other object meanwhile
    if len(_FRAMES) > _FRAMES_KEPT:
        _FRAMES.popitem(last=False)
    return frame


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
            if scope["type"] == "http":
                await self._stream_until_gone(receive, send)
            else:
                await super().__call__(scope, receive, send)
        finally:
            if self._on_close is not None:
                self._on_close()
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(BaseException):
                    await aclose()

    async def _stream_until_gone(self, receive: Any, send: Any) -> None:
        """Send the body while one plain task reads the request's messages: the client leaving
        ends the body, as Starlette's task group would, at a fraction of its cost per response
        (no cancel scopes). A cancellation from elsewhere still propagates."""
        streaming = asyncio.current_task()
        assert streaming is not None
        gone = False

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            streaming.cancel()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            await self.stream_response(send)
        except asyncio.CancelledError:
            if not gone or streaming.uncancel() > 0:
                raise
        finally:
            watcher.cancel()
            with contextlib.suppress(BaseException):
                await watcher


def sse_response(frames: AsyncIterator[bytes], headers: dict[str, str] | None = None,
                 on_close: Callable[[], None] | None = None) -> Response:
    """An SSE response; ``on_close`` runs when it ends, whatever the client did (close a
    subscription there, so a client leaving early leaks nothing)."""
    base = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    base.update(headers or {})
    return _ClosingStream(frames, on_close, media_type="text/event-stream", headers=base)


async def _events(sub: Subscription, *, keepalive: float = KEEPALIVE_SECONDS) -> AsyncIterator[Event | None]:
    """Events of a subscription; ``None`` when nothing happened for ``keepalive`` seconds."""
    queue = sub.queue
    try:
        while True:
            if not queue.empty():  # no timer to arm when the event is already there
                event = queue.get_nowait()
            else:
                try:
                    event = await asyncio.wait_for(queue.get(), keepalive)
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


async def turn_batches(sub: Subscription, task: asyncio.Task[Any], runtime: Any, thread_id: str,
                       execution_id: str | None = None) -> AsyncGenerator[list[Event], None]:
    """The events of one execution (the one ``task`` runs), ending after its ``done``, in
    batches: each one every event already waiting, so a stream sends them in one write.

    The subscription must have been opened before the execution started so nothing is missed.
    Events of an execution queued ahead of it pass through too: a client sees the thread as is.
    """
    mine: str | None = execution_id
    queue = sub.queue

    def ends(event: Event) -> bool:
        return event.type == "done" and mine is not None and event.data.get("executionId") == mine

    try:
        while True:
            if queue.empty():  # wait for an event or for the execution's end, whichever is first
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    with contextlib.suppress(BaseException):
                        await getter
                    rest: list[Event] = []
                    if getter.done() and not getter.cancelled() and getter.exception() is None:
                        rest.append(getter.result())  # taken just as the execution ended
                    while not queue.empty():
                        rest.append(queue.get_nowait())
                    last: list[Event] = []
                    for event in rest:
                        if event is END:
                            break
                        last.append(event)
                        if event.type == "done" and (mine is None or event.data.get("executionId") == mine):
                            break
                    if last:
                        yield last
                    return
                first = getter.result()
            else:
                first = queue.get_nowait()
            if first is END:
                return
            batch = [first]
            finished = ends(first)
            while not finished and not queue.empty():
                event = queue.get_nowait()
                if event is END:
                    yield batch
                    return
                batch.append(event)
                finished = ends(event)
            yield batch
            if finished:
                return
    finally:
        sub.close()


async def turn_events(sub: Subscription, task: asyncio.Task[Any], runtime: Any, thread_id: str,
                      execution_id: str | None = None) -> AsyncIterator[Event]:
    """The events of one execution (the one ``task`` runs), ending after its ``done``, one by
    one (:func:`turn_batches`)."""
    batches = turn_batches(sub, task, runtime, thread_id, execution_id)
    try:
        async for batch in batches:
            for event in batch:
                yield event
    finally:
        await batches.aclose()


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
