"""A durable, bounded log of recent events, so a client that reconnects gets what it missed.

Every event a process publishes (and every user-stream event it sends) is appended to an
in-memory batch; one background task writes the batch to the store in a single statement
about every ``flush_interval`` seconds, one row per stream holding all of its events of the
batch, so the engine never waits for the database and token deltas cost no row each. Only the process that published an event writes it; events
relayed from other workers are not written again.

A reconnecting client names the last id it saw (SSE ``Last-Event-ID``, or ``after``); it is
sent the stream's logged events after that id, then live events, skipping ids it already
got. Events not yet written (published here, or relayed here from another worker within
the last ``recent_seconds``) are taken from memory, so replay has no gap while a batch is
on its way to the database. With several workers, the replay stops at the id up to which this
worker's subscribers have every event (:meth:`~standardagents.events.EventBus.settled`):
an event above it may still be waiting for a lower id from another worker, and comes live,
after the replay, in order; one read from the log above it would let a lower id still on its
way be skipped as already seen.

Retention: each stream keeps its newest ``keep`` events, and none older than ``max_age``
seconds. Trimming raises the stream's *floor* (the highest id dropped); a client asking for
events after an id below the floor has missed some for good and is sent one ``lagged`` event
(``{"reason": "expired"}``) telling it to re-read the thread's messages, then live events.

A turn's ``done`` is the exception to batching: the engine writes it in its own transaction,
together with a mark on the execution's record, before any stream sees it
(:mod:`standardagents.engine.done`), so a process killed before its next batch loses the
turn's deltas at worst, never its end. Such events arrive here marked ``logged``.

Settings (environment): ``STANDARDAGENTS_EVENT_LOG`` (``0`` turns the log off),
``STANDARDAGENTS_EVENT_LOG_KEEP`` (events per stream, default 10000),
``STANDARDAGENTS_EVENT_LOG_MAX_AGE`` (seconds, default 3600) and
``STANDARDAGENTS_EVENT_LOG_FLUSH`` (seconds between batches, default 0.05).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson

from .events import Event, EventBus

__all__ = [
    "DEFAULT_FLUSH",
    "DEFAULT_KEEP",
    "DEFAULT_MAX_AGE",
    "EventLog",
    "Replay",
    "batch_rows",
    "event_log_from_env",
    "user_stream_key",
]

log = logging.getLogger("standardagents.eventlog")

DEFAULT_KEEP = 10_000
DEFAULT_MAX_AGE = 3600.0
DEFAULT_FLUSH = 0.05
#: events waiting for the database beyond this many are dropped (the database is down)
MAX_PENDING = 200_000
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)
#: datetimes and dataclasses are left to ``default=str``, as the standard library's encoder does
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def _encode(value: Any) -> str:
    """A batch's JSON text: orjson, or the standard library for what orjson refuses (integers
    beyond 64 bits, keys that are not strings); read back, both give the same values (but for a
    NaN or infinite float: orjson writes null, the standard library a non-JSON NaN)."""
    try:
        return orjson.dumps(value, default=str, option=_ORJSON_OPTIONS).decode()
    except TypeError:
        return _ENCODER.encode(value)


def user_stream_key(user_id: str) -> str:
    """The log stream of a user's own events (threads are logged under their id)."""
    return f"user:{user_id}"


class Replay:
    """What a reconnecting client is sent before live events: ``lagged`` when events it
    asked for were trimmed away, else the ``events`` after its id, oldest first."""

    __slots__ = ("events", "lagged", "last_id")

    def __init__(self, events: list[Event], lagged: bool, last_id: int) -> None:
        self.events = events
        self.lagged = lagged
        #: the newest id the client has once the replay is sent (live events up to it are skipped)
        self.last_id = last_id

    def fresh(self, event: Event) -> bool:
        """Whether a live event is new to the client (events without an id always are)."""
        return not event.id or event.id > self.last_id


class EventLog:
    """Writes a bus's events to the store in batches and replays them to reconnecting clients."""

    def __init__(self, bus: EventBus, store: Any, *, keep: int = DEFAULT_KEEP, max_age: float = DEFAULT_MAX_AGE,
                 flush_interval: float = DEFAULT_FLUSH, recent_seconds: float = 30.0, recent_max: int = 50_000,
                 prune_interval: float = 60.0) -> None:
        if keep < 1:
            raise ValueError("the event log keeps at least one event per stream")
        if max_age <= 0:
            raise ValueError("the event log's max age must be positive")
        self.bus = bus
        self.store = store
        self.keep = keep
        self.max_age = max_age
        self.flush_interval = flush_interval
        self.recent_seconds = recent_seconds
        self.prune_interval = prune_interval
        #: events written so far, and events lost because the database was unreachable too long
        self.written = 0
        self.dropped = 0
        self._pending: list[tuple[str, Event]] = []
        self._recent: collections.deque[tuple[str, Event]] = collections.deque(maxlen=recent_max)
        self._since_prune: dict[str, int] = {}
        #: streams of forgotten threads: events still arriving for them are dropped, until
        #: the time (monotonic) each maps to
        self._forgotten: dict[str, float] = {}
        self._pruned_at = time.monotonic()
        self._prune_every = max(1, min(keep // 10, 1000))
        self._wake = asyncio.Event()
        self._flushing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._task is None:
            self.bus.add_listener(self._on_event)
            self.bus.logged = True
            self._task = asyncio.get_running_loop().create_task(self._run(), name="standardagents-event-log")

    async def aclose(self) -> None:
        """Stop listening and write what is still pending."""
        if self._task is None:
            return
        self.bus.remove_listener(self._on_event)
        self.bus.logged = False
        task, self._task = self._task, None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        try:
            await self.flush()
        except Exception:
            log.warning("could not write the last %d events to the event log", len(self._pending), exc_info=True)

    # ------------------------------------------------------------ recording

    def _on_event(self, event: Event) -> None:
        """Bus listener (never awaits): remember the event, queue it when published here (and
        not written already)."""
        if not event.id or not event.thread_id:
            return
        if self._forgotten and self._is_forgotten(event.thread_id):
            return
        item = (event.thread_id, event)
        self._recent.append(item)
        if event.local and not event.logged:
            self._queue(item)

    def record(self, stream: str, event: Event) -> Event:
        """Give an event sent outside the bus (a user-stream event) an id and log it."""
        if not event.id:
            event.id = self.bus.next_id(stream)
        item = (stream, event)
        self._recent.append(item)
        self._queue(item)
        return event

    def _is_forgotten(self, stream: str) -> bool:
        until = self._forgotten.get(stream)
        if until is None:
            return False
        if until > time.monotonic():
            return True
        del self._forgotten[stream]
        return False

    async def forget(self, threads: Sequence[str], others: Sequence[str] = (), *,
                     purge: Callable[[list[str]], Awaitable[object]] | None = None) -> int:
        """Drop every event of these streams kept here (in memory, and not yet written), so no
        replay on this process returns them; how many were dropped.

        ``threads`` are forgotten threads: their events still arriving (a stopped turn's last
        ones, relayed late) are dropped for ``recent_seconds``. ``others`` (a user's own
        stream, which lives on) are only emptied. ``purge`` runs while no batch is being
        written, so what a batch wrote just before is deleted from the store too."""
        streams = {*threads, *others}
        horizon = time.monotonic() + self.recent_seconds
        for stream in threads:
            self._forgotten[stream] = horizon
        async with self._flushing:
            before = len(self._recent) + len(self._pending)
            self._recent = collections.deque((i for i in self._recent if i[0] not in streams), maxlen=self._recent.maxlen)
            self._pending = [i for i in self._pending if i[0] not in streams]
            for stream in streams:
                self._since_prune.pop(stream, None)
            if purge is not None and streams:
                await purge(sorted(streams))
            return before - len(self._recent) - len(self._pending)

    def _queue(self, item: tuple[str, Event]) -> None:
        pending = self._pending
        if len(pending) >= MAX_PENDING:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 10_000 == 0:
                log.warning("event log: the database is not taking events; %d dropped so far", self.dropped)
            return
        pending.append(item)
        if len(pending) == 1:
            self._wake.set()

    # ------------------------------------------------------------ writing

    async def _run(self) -> None:
        pause = self.flush_interval
        while True:
            await self._wake.wait()
            await asyncio.sleep(pause)  # let a batch gather
            self._wake.clear()
            try:
                await self.flush()
                pause = self.flush_interval
            except Exception as exc:
                log.warning("event log: could not write %d events (%s); retrying", len(self._pending), exc)
                pause = min(max(pause * 2, 0.1), 5.0)
                self._wake.set()

    async def flush(self) -> None:
        """Write the pending events now, then trim what retention says is due."""
        async with self._flushing:
            batch, self._pending = self._pending, []
            if batch:
                rows = batch_rows(batch)
                try:
                    await self.store.append_events(rows)
                except BaseException:
                    self._pending[:0] = batch  # oldest first, written on the next try
                    raise
                self.written += len(batch)
                for stream, _e in batch:
                    self._since_prune[stream] = self._since_prune.get(stream, 0) + 1
            await self._prune_if_due()
            self._forget_old()

    async def _prune_if_due(self) -> None:
        now = time.monotonic()
        periodic = now - self._pruned_at >= self.prune_interval
        streams = [s for s, n in self._since_prune.items() if periodic or n >= self._prune_every]
        if not streams and not periodic:
            return
        await self.store.prune_events(streams, self.keep, time.time() - self.max_age if periodic else None)
        for stream in streams:
            self._since_prune.pop(stream, None)
        if periodic:
            self._pruned_at = now

    def _forget_old(self) -> None:
        recent = self._recent
        horizon = time.time() - self.recent_seconds
        while recent and recent[0][1].ts < horizon:
            recent.popleft()
        if self._forgotten:
            now = time.monotonic()
            self._forgotten = {s: until for s, until in self._forgotten.items() if until > now}

    # ------------------------------------------------------------ replay

    async def replay(self, stream: str, after: int, *, thread_id: str | None = None,
                     reasoning: bool = True) -> Replay:
        """What a client that last saw id ``after`` of ``stream`` missed (see :class:`Replay`).

        Call it after subscribing to live events, so nothing falls between the two."""
        with contextlib.suppress(Exception):  # a database hiccup must not refuse the stream
            await self.flush()  # so this process's own recent events and trims are in the store
        limit = self.keep * 2 + 1000
        floor, rows = await self.store.read_events(stream, after, limit=limit)
        if floor > after or len(rows) >= limit:
            return Replay([], True, after)
        settled = self.bus.settled(stream)
        found: dict[int, Event] = {}
        for event_id, type_, data, ts in rows:
            if event_id <= settled:
                found[event_id] = Event(type_, thread_id if thread_id is not None else stream, data, event_id, ts)
        for key, event in tuple(self._recent):
            if key == stream and after < event.id <= settled and event.id not in found:
                found[event.id] = event
        events = sorted(found.values(), key=lambda e: e.id)
        if not reasoning:
            events = [e for e in events if e.type != "reasoning_chunk"]
        last = max((e.id for e in found.values()), default=after)
        return Replay(events, False, last)


def batch_rows(batch: list[tuple[str, Event]]) -> list[tuple[str, int, int, int, str, float]]:
    """The store rows of ``(stream, event)`` pairs: one per stream, its events as one JSON
    list, oldest first."""
    by_stream: dict[str, list[Event]] = {}
    for stream, event in batch:
        by_stream.setdefault(stream, []).append(event)
    rows = []
    for stream, events in by_stream.items():  # in id order: a process's ids only grow
        text = _encode([[e.id, e.type, e.data, e.ts] for e in events])
        rows.append((stream, events[-1].id, events[0].id, len(events), text, events[-1].ts))
    return rows


def event_log_from_env(bus: EventBus, store: Any) -> EventLog | None:
    """The log configured by ``STANDARDAGENTS_EVENT_LOG*`` variables (``None`` when turned off)."""
    if os.environ.get("STANDARDAGENTS_EVENT_LOG", "1").strip().lower() in ("0", "false", "off", "no"):
        return None
    if not all(hasattr(store, name) for name in ("append_events", "read_events", "prune_events")):
        return None
    keep = int(os.environ.get("STANDARDAGENTS_EVENT_LOG_KEEP") or DEFAULT_KEEP)
    max_age = float(os.environ.get("STANDARDAGENTS_EVENT_LOG_MAX_AGE") or DEFAULT_MAX_AGE)
    flush = float(os.environ.get("STANDARDAGENTS_EVENT_LOG_FLUSH") or DEFAULT_FLUSH)
    return EventLog(bus, store, keep=keep, max_age=max_age, flush_interval=flush)
