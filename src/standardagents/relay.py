"""Live events across worker processes through PostgreSQL ``LISTEN/NOTIFY``.

With several server workers on one PostgreSQL database, a client's stream may be served by
a worker other than the one running the thread. A :class:`PostgresRelay` joins the
processes' :class:`~standardagents.events.EventBus` es: every event published locally is
sent as a notification, and every notification from another process is published on the
local bus.

Wire format: one notification is ``<origin>:<seq>:<part>:<parts>:<chunk>``. ``origin``
names the sending process (a process skips its own, so nothing echoes), ``seq`` numbers
its messages, and the event's JSON (ASCII-only, so characters are bytes) is split into
chunks that fit PostgreSQL's 8000-byte payload limit. A sender's notifications arrive in
order, so a receiver only joins consecutive parts; a message missing a part (the listener
reconnected in between) is dropped. Splitting needs no table, no cleanup and no second
round trip on the receiving side.

Frontiers (``<origin>:h:<json>``): with every batch of events, after them in the same
statement, a process announces its frontier (the id below which it publishes nothing more,
and the ids it holds per thread; :meth:`~standardagents.events.EventBus.frontier`). A
sender's notifications arrive in the order it sent them, so when a frontier arrives every
event it covers has arrived before it. The receiving bus's
:class:`~standardagents.events.Sequencer` hands a thread's events to subscribers in id order
up to the lowest frontier of the peers, which is why every stream on every worker sees ids
only grow (the reasoning is in :mod:`standardagents.events`). An announcement flagged
``w`` asks the others to announce theirs at once: a worker sends one when its own events
wait for a peer that has been quiet, so an idle peer costs one round trip through
PostgreSQL, not a timer. Every ``beat`` seconds each worker announces itself anyway. A peer
silent for ``peer_timeout`` seconds whose database session is gone (the process was killed
or cut off: PostgreSQL ends its session) is no longer waited for; one whose session is still
there (a process stopped, or too busy to answer) is waited for up to ``gone_timeout``
seconds. A slow peer is not taken for a dead one: its events would then arrive below ids
the others already passed.

Joining: a starting relay announces itself (asking for frontiers), waits for its own
announcement to come back through PostgreSQL and for the others' answers to stop coming
(a short quiet period, bounded), and raises its ids above every frontier heard before it
publishes anything: the others may already have passed ids up to their frontier to their
streams without waiting for it.

Sending never happens on the publisher's path: the bus listener appends to a bounded queue
and one task sends what has gathered in a single statement. When the queue is full, events
are dropped, counted in :attr:`PostgresRelay.dropped` and logged. Events published while the
connection is down wait in the queue; notifications sent by others meanwhile are lost
(clients catch up from the store). A batch whose send fails is sent again after
reconnecting, so in the rare case the server took it just before the connection broke,
other processes see those events twice.

Each event received is timed: the delay from its publication on the sending worker (its
``ts``) to its delivery here is the ``standardagents_relay_lag_seconds`` histogram of
``/metrics`` (and ``standardagents.relay.lag`` through OpenTelemetry when configured).

Every event is relayed, whether or not another process watches its thread: simple, and the
cost is small (about a microsecond on the publisher's path; encoding, sending and other
processes' decoding happen off it). While a relay is attached the bus reports listeners for
every thread, so the engine always builds its events.

Control messages (``<origin>:c:<json>``, ``{"k": kind, "n": token, "b": body}``): a worker
asks the others to do something now, e.g. drop a forgotten user's events from their memory
(:meth:`PostgresRelay.broadcast`); each runs its handler for the kind (none: nothing to do)
and answers ``<origin>:a:<json>`` (``{"n": token}``), and the sender waits for the answers of
the peers it knows, bounded in time. A relay of an older version logs such a message as
unreadable and ignores it (its part counter is not a number), and is not waited for beyond
the bound.

SQLite has no relay: it is a single-host database, and several workers on SQLite each see
only the live events of the executions they run themselves.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy.engine import make_url

from . import observability
from .events import Event, EventBus, Sequencer
from .exceptions import StoreError

__all__ = ["DEFAULT_CHANNEL", "MAX_PAYLOAD", "PostgresRelay", "asyncpg_dsn", "channel_for_schema", "relay_for_store"]


def _asyncpg() -> Any:
    """asyncpg, imported when a relay is first used (it ships with the ``postgres`` extra)."""
    try:
        import asyncpg
    except ImportError as exc:  # pragma: no cover - the extra is installed with PostgreSQL support
        raise StoreError("the PostgreSQL event relay needs asyncpg: pip install 'standardagents[postgres]'") from exc
    return asyncpg

log = logging.getLogger(__name__)

DEFAULT_CHANNEL = "standardagents_events"
#: bytes of one notification payload (PostgreSQL refuses 8000 and more)
MAX_PAYLOAD = 7900
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)
_SEND_SQL = "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p"


def asyncpg_dsn(url: str) -> str:
    """A database URL as asyncpg expects it (``postgresql://``, no SQLAlchemy driver suffix)."""
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise StoreError(f"invalid database URL {url!r}: {exc}") from exc
    if parsed.get_backend_name() not in ("postgresql", "postgres"):
        raise StoreError(f"the event relay needs a PostgreSQL URL, got {url!r}")
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def channel_for_schema(schema: str | None) -> str:
    """The channel of a store: notifications are database-wide, so each schema gets its own."""
    if not schema:
        return DEFAULT_CHANNEL
    safe = re.sub(r"[^a-z0-9_]", "_", schema.lower())
    return f"{DEFAULT_CHANNEL}_{safe}"[:63]


class PostgresRelay:
    """Carries a bus's events to, and receives them from, other processes on one database.

    ``maxsize`` bounds the send queue; ``batch`` caps the notifications per statement;
    ``keepalive`` bounds a send, so a silently dead network is noticed; ``retry`` is the first
    pause before reconnecting (doubling up to 5 s); ``beat`` is the pause between two
    announcements of an idle worker; a silent peer is waited for ``peer_timeout`` seconds when
    its database session is gone, ``gone_timeout`` seconds when it is not.
    """

    def __init__(self, bus: EventBus, url: str, *, channel: str = DEFAULT_CHANNEL, maxsize: int = 10_000,
                 batch: int = 500, keepalive: float = 15.0, retry: float = 0.05, beat: float = 0.5,
                 peer_timeout: float = 2.0, gone_timeout: float = 30.0) -> None:
        self.bus = bus
        self.dsn = asyncpg_dsn(url)
        self.channel = channel
        self.maxsize = maxsize
        self.batch = batch
        self.keepalive = keepalive
        self.retry = retry
        self.beat = beat
        self.peer_timeout = peer_timeout
        self.gone_timeout = gone_timeout
        #: this process's name on the wire
        self.origin = uuid.uuid4().hex
        #: events dropped because the send queue was full
        self.dropped = 0
        #: events sent / received and published locally
        self.sent = 0
        self.received = 0
        #: successful connections so far (1 after start, more after each reconnect)
        self.connections = 0
        self._queue: collections.deque[Event] = collections.deque()
        self._seq = 0
        self._partial: dict[str, tuple[int, int, list[str]]] = {}
        self._inbound = False
        self._conn: Any = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread_id: int | None = None
        self._wake = asyncio.Event()
        self._lost = asyncio.Event()
        self._changed = asyncio.Condition()
        self._closing = False
        self.sequencer = Sequencer(bus, bus._deliver)
        self.sequencer.on_blocked = self._on_blocked
        #: an announcement asking for the peers' frontiers is due / was sent and not answered
        self._ask = False
        self._asked = False
        #: a peer asked for this worker's frontier
        self._reply = False
        self._echoed = asyncio.Event()
        self._heard = asyncio.Event()
        self._watch: asyncio.Task[None] | None = None
        #: one statement at a time on the connection (sends and the look at the peers' sessions)
        self._using = asyncio.Lock()
        #: what this worker does when another asks (control messages), by kind
        self.controls: dict[str, Callable[[dict[str, Any]], Awaitable[object]]] = {}
        #: control messages sent and waiting for answers: token -> peers that answered
        self._answers: dict[str, set[str]] = {}
        self._answered = asyncio.Condition()
        self._handling: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ lifecycle

    @property
    def connected(self) -> bool:
        conn = self._conn
        return conn is not None and not conn.is_closed()

    async def start(self) -> None:
        """Connect, listen and begin relaying; raises :class:`StoreError` when the first
        connection fails (later losses are retried in the background)."""
        if self._task is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._thread_id = threading.get_ident()
        self._closing = False
        await self._connect()
        self.bus.sequencer = self.sequencer
        await self._join()
        self.bus.add_listener(self._on_local)
        self._task = asyncio.create_task(self._supervise(), name="standardagents-relay")
        self._watch = asyncio.create_task(self._watch_peers(), name="standardagents-relay-peers")

    async def aclose(self) -> None:
        """Stop relaying and close the connection (events still queued are sent first when
        the connection is up)."""
        if self._task is None:
            return
        self.bus.remove_listener(self._on_local)
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        self._closing = True
        self._wake.set()
        task, self._task = self._task, None
        try:
            await asyncio.wait_for(asyncio.shield(task), 5.0)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._disconnect()
        if self.bus.sequencer is self.sequencer:
            self.bus.sequencer = None
        self.sequencer.flush()  # nothing is waited for any more

    async def wait_connected(self, count: int = 1, timeout: float = 10.0) -> None:  # noqa: ASYNC109 - a bounded wait for callers
        """Wait until the relay has connected ``count`` times and is connected now."""
        async def ready() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: self.connections >= count and self.connected)

        await asyncio.wait_for(ready(), timeout)

    async def __aenter__(self) -> PostgresRelay:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------ local side

    def _on_local(self, event: Event) -> None:
        """Bus listener: queue the event (never awaits, never raises)."""
        if self._inbound:
            return
        if len(self._queue) >= self.maxsize:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("event relay queue full (%d events): %d events not sent to other workers so far",
                            self.maxsize, self.dropped)
            return
        self._queue.append(event)
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == self._thread_id:
            self._wake.set()
        else:
            loop.call_soon_threadsafe(self._wake.set)

    def _on_blocked(self) -> None:
        """Sequencer callback: events wait for a peer; ask the peers for their frontiers
        (once per answer, so a busy pair exchanges one announcement per round trip)."""
        if self._ask or self._asked:
            return
        self._ask = True
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == self._thread_id:
            self._wake.set()
        else:
            loop.call_soon_threadsafe(self._wake.set)

    def _announcement(self, want: bool | None = None) -> str:
        """This worker's frontier, as a notification sent after every event it covers; ``want``
        asks the others for theirs (by default: when events here wait for them).

        Events still in the send queue (more than one batch had gathered) go out after this
        announcement, so the frontier stays below the lowest of them: a peer passing ids up to
        it would otherwise hand its own later events to its streams before these arrive."""
        if want is None:
            want = self.sequencer.blocked
        frontier = self.bus.frontier()
        if self._queue:
            frontier = min(frontier, min(event.id for event in self._queue) - 1)
        holds = self.bus.holds()
        if len(holds) > 50:  # keep it one small notification: the lowest hold bounds everything
            frontier = min(frontier, min(holds.values()) - 1)
            holds = {}
        self._ask = self._reply = False
        if want:
            self._asked = True
        return f"{self.origin}:h:" + _ENCODER.encode({"f": frontier, "h": holds, "w": int(want)})

    async def _join(self) -> None:
        """Announce this worker and take in the others' frontiers before publishing (see the
        module's docstring): wait for the own announcement to come back, then until no
        answer came for a short while (bounded)."""
        conn = self._conn
        assert conn is not None
        self._echoed.clear()
        await conn.execute(_SEND_SQL, self.channel, [self._announcement(want=True)])
        self._asked = False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._echoed.wait(), 2.0)
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            self._heard.clear()
            try:
                await asyncio.wait_for(self._heard.wait(), 0.05)
            except TimeoutError:
                break

    async def _watch_peers(self) -> None:
        """Stop waiting for peers that went silent and whose session is gone (or that stayed
        silent for ``gone_timeout``)."""
        while True:
            await asyncio.sleep(self.beat / 2)
            now = time.monotonic()
            silent = self.sequencer.silent(now - self.peer_timeout)
            if not silent:
                continue
            long_silent = self.sequencer.silent(now - self.gone_timeout)
            live = await self._sessions([s for o, s in silent.items() if o not in long_silent])
            gone = [origin for origin, session in silent.items() if origin in long_silent or session not in live]
            self.sequencer.forget(gone)
            if gone:
                log.warning("event relay: %d silent worker(s) whose database session is gone are no longer "
                            "waited for", len(gone))

    async def _sessions(self, pids: list[int]) -> set[int]:
        """Which of these database sessions still exist (all of them, when that cannot be told)."""
        conn = self._conn
        if not pids:
            return set()
        if conn is None or conn.is_closed():
            return set(pids)
        try:
            async with self._using:
                rows = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE pid = ANY($1::int[])", pids,
                                        timeout=self.keepalive)
        except Exception:  # the connection is in trouble: the supervisor reconnects; decide later
            return set(pids)
        return {int(row["pid"]) for row in rows}

    def _encode(self, event: Event) -> list[str]:
        """The notification payloads of one event (several when it is large)."""
        self._seq += 1
        body = _ENCODER.encode({"t": event.type, "th": event.thread_id, "d": event.data, "ts": event.ts, "i": event.id})
        head_room = MAX_PAYLOAD - 64
        parts = [body[i:i + head_room] for i in range(0, len(body), head_room)] or [""]
        total = len(parts)
        return [f"{self.origin}:{self._seq}:{i}:{total}:{chunk}" for i, chunk in enumerate(parts)]

    # ------------------------------------------------------------ connection

    async def _connect(self) -> None:
        pg = _asyncpg()
        try:
            conn = await pg.connect(self.dsn, timeout=10)
        except (OSError, TimeoutError, pg.PostgresError) as exc:
            raise StoreError(f"event relay cannot connect to PostgreSQL: {exc}") from exc
        try:
            await conn.add_listener(self.channel, self._on_notify)
        except BaseException:
            await conn.close()
            raise
        conn.add_termination_listener(self._on_terminated)
        self._partial.clear()
        self._lost.clear()
        self._conn = conn
        async with self._changed:
            self.connections += 1
            self._changed.notify_all()

    def _on_terminated(self, _conn: Any) -> None:
        self._lost.set()
        self._wake.set()

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)

    async def _supervise(self) -> None:
        """Send until the connection is lost, then reconnect with backoff; repeat."""
        pause = self.retry
        while not self._closing:
            if self._conn is None:
                try:
                    await self._connect()
                    pause = self.retry
                    log.info("event relay reconnected to PostgreSQL")
                except (StoreError, _asyncpg().PostgresError, OSError) as exc:
                    log.warning("event relay: %s; retrying in %.2fs", exc, pause)
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 5.0)
                    continue
            await self._send_until_lost()
            await self._disconnect()

    async def _send_until_lost(self) -> None:
        conn = self._conn
        assert conn is not None
        while True:
            if not self._queue and not self._ask and not self._reply:
                if self._closing or self._lost.is_set():
                    return
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), self.beat)
                except TimeoutError:
                    self._reply = True  # a beat: the others know this worker is alive
                continue
            if self._lost.is_set():
                return
            batch: list[Event] = []
            while self._queue and len(batch) < self.batch:
                batch.append(self._queue.popleft())
            payloads = [p for event in batch for p in self._encode(event)]
            payloads.append(self._announcement())
            try:
                async with self._using:
                    await conn.execute(_SEND_SQL, self.channel, payloads, timeout=self.keepalive)
            except Exception as exc:  # a dropped connection surfaces as several asyncpg error types
                # put the batch back (oldest first) so it goes out after reconnecting
                self._queue.extendleft(reversed(batch))
                while len(self._queue) > self.maxsize:
                    self._queue.pop()
                    self.dropped += 1
                log.warning("event relay lost its connection while sending: %s", exc)
                self._lost.set()
                return
            self.sent += len(batch)

    # ------------------------------------------------------------ control messages

    async def broadcast(self, kind: str, bodies: Sequence[dict[str, Any]], *,
                        timeout: float = 5.0) -> tuple[int, int]:  # noqa: ASYNC109 - a bounded wait for callers
        """Ask every other worker to run its ``kind`` handler on each body, and wait (at most
        ``timeout`` seconds) until each peer known now has answered every one: ``(peers,
        peers that answered all)``. A body must fit one notification."""
        peers = set(self.sequencer.peers)
        tokens = [uuid.uuid4().hex for _ in bodies]
        payloads = []
        for token, body in zip(tokens, bodies, strict=True):
            payload = f"{self.origin}:c:" + _ENCODER.encode({"k": kind, "n": token, "b": body})
            if len(payload) > MAX_PAYLOAD:
                raise ValueError(f"a control message of {len(payload)} bytes does not fit one notification")
            payloads.append(payload)
            self._answers[token] = set()
        if not payloads:
            return len(peers), len(peers)

        def answered() -> set[str]:
            return {p for p in peers if all(p in self._answers[t] for t in tokens)}

        try:
            await self._send_now(payloads)
            if peers:
                async with self._answered:
                    with contextlib.suppress(TimeoutError):
                        # a peer found gone meanwhile is not waited for
                        await asyncio.wait_for(self._answered.wait_for(
                            lambda: answered() >= (peers & set(self.sequencer.peers))), timeout)
            done = answered()
        finally:
            for token in tokens:
                self._answers.pop(token, None)
        if len(done) < len(peers):
            log.warning("event relay: %d of %d other worker(s) did not confirm %r within %.1fs",
                        len(peers) - len(done), len(peers), kind, timeout)
        return len(peers), len(done)

    async def _send_now(self, payloads: list[str]) -> None:
        conn = self._conn
        if conn is None or conn.is_closed():
            raise StoreError("the event relay is not connected to PostgreSQL")
        async with self._using:
            await conn.execute(_SEND_SQL, self.channel, payloads, timeout=self.keepalive)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._handling.add(task)
        task.add_done_callback(self._handling.discard)

    def _on_control(self, origin: str, body: str) -> None:
        try:
            raw = json.loads(body)
            kind, token, data = str(raw["k"]), str(raw["n"]), raw.get("b") or {}
        except (ValueError, KeyError, TypeError):
            log.warning("event relay ignored a control message it cannot read from %s", origin)
            return
        self._spawn(self._handle(kind, token, data))

    async def _handle(self, kind: str, token: str, data: dict[str, Any]) -> None:
        handler = self.controls.get(kind)
        try:
            if handler is not None:
                await handler(data)
        except Exception:
            log.exception("event relay: the %r asked by another worker failed", kind)
            return  # unanswered: the sender says it was not confirmed
        try:
            await self._send_now([f"{self.origin}:a:" + _ENCODER.encode({"n": token})])
        except Exception as exc:
            log.warning("event relay: could not confirm %r to the other worker: %s", kind, exc)

    async def _on_answer(self, origin: str, body: str) -> None:
        try:
            token = str(json.loads(body)["n"])
        except (ValueError, KeyError, TypeError):
            return
        answers = self._answers.get(token)
        if answers is None:
            return  # another worker's, or given up
        async with self._answered:
            answers.add(origin)
            self._answered.notify_all()

    # ------------------------------------------------------------ remote side

    def _on_announcement(self, origin: str, body: str, session: int) -> None:
        if origin == self.origin:
            self._echoed.set()
            return
        try:
            raw = json.loads(body)
            frontier = int(raw["f"])
            holds = {str(k): int(v) for k, v in (raw.get("h") or {}).items()}
            want = bool(raw.get("w"))
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("event relay ignored a frontier it cannot read from %s", origin)
            return
        self._asked = False
        self._heard.set()
        if want:
            self._reply = True
            self._wake.set()
        self.sequencer.heard(origin, frontier, holds, time.monotonic(), session)

    def _on_notify(self, _conn: Any, pid: int, _channel: str, payload: str) -> None:
        try:
            origin, seq, rest = payload.split(":", 2)
            if seq == "h":
                self._on_announcement(origin, rest, pid)
                return
            if origin == self.origin:
                return
            if seq == "c":
                self._on_control(origin, rest)
                return
            if seq == "a":
                if self._answers:
                    self._spawn(self._on_answer(origin, rest))
                return
            part, total, chunk = rest.split(":", 2)
            index, count = int(part), int(total)
        except ValueError:
            log.warning("event relay ignored a notification it cannot read (%d bytes)", len(payload))
            return
        if count == 1:
            body = chunk
        else:
            key = origin
            seen = self._partial.get(key)
            if index == 0:
                self._partial[key] = (int(seq), count, [chunk])
                return
            if seen is None or seen[0] != int(seq) or len(seen[2]) != index:
                self._partial.pop(key, None)  # a part went missing: drop the whole message
                return
            seen[2].append(chunk)
            if index + 1 < count:
                return
            del self._partial[key]
            body = "".join(seen[2])
        try:
            raw = json.loads(body)
            event = Event(raw["t"], raw["th"], raw["d"], int(raw.get("i") or 0), raw["ts"], local=False)
        except (ValueError, KeyError, TypeError):
            log.warning("event relay ignored a malformed event from %s", origin)
            return
        self.received += 1
        # the event's time stamp is its publication on the sending worker
        observability.relay_lag(max(0.0, time.time() - event.ts))
        self._inbound = True
        try:
            self.bus.publish(event)
        finally:
            self._inbound = False


def relay_for_store(bus: EventBus, store: Any) -> PostgresRelay | None:
    """A relay for a runtime's store when it is PostgreSQL (on the store's schema channel),
    else ``None``."""
    if getattr(store, "dialect", None) != "postgresql":
        return None
    return PostgresRelay(bus, store.url, channel=channel_for_schema(getattr(store, "schema", None)))
