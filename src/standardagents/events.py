"""The event protocol and the in-process bus that carries it to live clients.

Every event belongs to a thread. Subscribers get bounded queues: a slow client never
blocks the engine; when its queue overflows it loses events and is told with one
``lagged`` event carrying how many it missed.

Event ids: the bus that publishes an event first gives it its id, which then travels with it
(across workers on the relay, into the event log), so every worker shows the same id. An id
is a clock reading in microseconds since the epoch, raised when needed to stay above the last
id this process saw on any thread (its own events, those relayed from other workers, and the
frontiers they announce): one high-water mark keeps every thread's ids growing, without a
database round trip per event and without a table of threads to consult on each one, and a
reconnecting client names the last one it saw to be sent what followed
(:mod:`standardagents.eventlog`). Events made for one client only (``connected``,
``lagged``) have id 0 and are never logged.

A turn's ``done`` is written to the store before any stream sees it (:mod:`standardagents.engine.done`):
its id is taken with :meth:`EventBus.hold`, and the thread's events published meanwhile wait
behind it until :meth:`EventBus.release`, so ids still reach every stream in order.

Across workers, ids alone do not give one order: a worker's own event reaches its streams at
once, while a lower id published a moment earlier by another worker is still on its way over
the relay. So with a relay attached the bus puts a :class:`Sequencer` between publishing and
subscribers (listeners, the relay and the event log among them, still get every event at
once). Each worker announces on the relay its *frontier*: the id below which it will publish
nothing more (its id clock, raised to the present when announced, less any id it holds), sent
after the events it covers on the same ordered connection. The sequencer hands a thread's
events to subscribers in id order, and only up to the lowest frontier of the live peers, so no
event with a lower id can still arrive: every connection, to any worker, sees ids grow, and
what it saw is everything up to there (:meth:`EventBus.settled` tells the event log where
that is, so a replay and the live events meet without a gap). A worker announces its frontier
with every batch it sends, when a peer waits for it, and every ``beat`` seconds; a peer not
heard from for a few beats is taken as gone and no longer waited for. Token deltas pay no
database round trip for this: a relay round trip of latency at most while a peer is idle.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["END", "EVENT_TYPES", "Event", "EventBus", "Sequencer", "Subscription"]

#: the event types the engine emits (custom ``state.emit`` names pass through too)
EVENT_TYPES = (
    "thread_created",
    "message_created",
    "message_updated",
    "message_chunk",
    "reasoning_chunk",
    "tool_call_started",
    "tool_call_done",
    "usage",
    "error",
    "log",
    "execution_started",
    "message_queued",
    "stop_requested",
    "done",
    "lagged",
)

@dataclass(slots=True)
class Event:
    """One event: ``type`` and JSON-able ``data`` for one thread; ``id`` grows per thread
    (0 until a bus publishes it). ``local`` is false for events relayed from another process;
    ``logged`` is true for an event already in the store's event log (not to be written again)."""

    type: str
    thread_id: str
    data: dict[str, Any]
    id: int = 0
    ts: float = field(default_factory=time.time)
    local: bool = True
    logged: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "threadId": self.thread_id, "data": self.data, "ts": self.ts}


def _by_id(event: Event) -> int:
    return event.id


#: put in a subscription's queue when it is ended (:meth:`Subscription.end`); never published
END = Event("end", "", {})


class Subscription:
    """A live feed of one thread's events (or every thread's, with ``thread_id=None``)."""

    def __init__(self, bus: EventBus, thread_id: str | None, maxsize: int, reasoning: bool) -> None:
        self.bus = bus
        self.thread_id = thread_id
        self.reasoning = reasoning
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize)
        self.dropped = 0
        self.closed = False

    def offer(self, event: Event) -> None:
        if self.closed or (event.type == "reasoning_chunk" and not self.reasoning):
            return
        if self.dropped:
            if self.queue.full():
                self.dropped += 1
                return
            lag = Event("lagged", event.thread_id, {"missed": self.dropped})
            self.dropped = 0
            self.queue.put_nowait(lag)
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1

    async def get(self, timeout: float | None = None) -> Event:  # noqa: ASYNC109 - a convenience for callers
        if timeout is None:
            return await self.queue.get()
        return await asyncio.wait_for(self.queue.get(), timeout)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.bus._remove(self)

    def end(self) -> None:
        """Close, and wake its reader with :data:`END` (the oldest queued event makes room
        when the queue is full): a server shutting down ends its streams this way, so their
        clients reconnect to another worker."""
        self.close()
        if self.queue.full():
            self.queue.get_nowait()
        self.queue.put_nowait(END)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[Event]:
        while not self.closed:
            event = await self.queue.get()
            if event is END:
                return
            yield event

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: no bound: nothing is waited for
UNBOUNDED = 1 << 62


@dataclass(slots=True)
class _Peer:
    """What another worker last announced: its frontier, the ids it holds per thread, and
    when it was heard from (monotonic seconds)."""

    frontier: int
    holds: dict[str, int]
    heard: float
    #: the peer's database session (its relay connection's backend), to tell whether it is gone
    session: int = 0

    def bound(self, thread_id: str) -> int:
        held = self.holds.get(thread_id) if self.holds else None
        return self.frontier if held is None else min(self.frontier, held - 1)


class Sequencer:
    """Hands each thread's events to subscribers in id order, each once no live peer can
    still send a lower id for that thread (see the module's docstring). Installed by a
    cross-process relay; ``on_blocked`` is called when an event has to wait, so the relay can
    ask the peers for their frontiers."""

    def __init__(self, bus: EventBus, deliver: Callable[[Event], None]) -> None:
        self.bus = bus
        self._deliver = deliver
        self.peers: dict[str, _Peer] = {}
        #: thread -> its waiting events, a heap of (id, arrival, event)
        self._waiting: dict[str, list[tuple[int, int, Event]]] = {}
        self._arrivals = 0
        self.on_blocked: Callable[[], None] | None = None
        #: events that arrived with an id at or below what their thread already passed (a peer
        #: taken as gone that came back, a ``done`` sent again by a recovery); still delivered
        self.late = 0
        #: thread -> highest id delivered (only while the thread has peers to wait for)
        self._passed: dict[str, int] = {}

    @property
    def blocked(self) -> bool:
        return bool(self._waiting)

    def bound(self, thread_id: str) -> int:
        """The highest id of the thread that may be delivered now."""
        bound = UNBOUNDED
        for peer in self.peers.values():
            peer_bound = peer.bound(thread_id)
            if peer_bound < bound:
                bound = peer_bound
        held = self.bus._hold_floor.get(thread_id) if self.bus._hold_floor else None
        if held is not None and held - 1 < bound:
            bound = held - 1
        return bound

    def admit(self, event: Event) -> None:
        thread_id = event.thread_id
        waiting = self._waiting.get(thread_id)
        if waiting is None and (not self.peers or event.id <= self.bound(thread_id)):
            self._pass(event)
            return
        if waiting is None:
            waiting = self._waiting[thread_id] = []
        self._arrivals += 1
        heapq.heappush(waiting, (event.id, self._arrivals, event))
        if self.on_blocked is not None:
            self.on_blocked()

    def _pass(self, event: Event) -> None:
        if self.peers:
            passed = self._passed.get(event.thread_id, 0)
            if event.id <= passed:
                self.late += 1
            else:
                if len(self._passed) >= 10_000:  # a diagnostic only: bounded, not exact
                    self._passed.clear()
                self._passed[event.thread_id] = event.id
        self._deliver(event)

    def advance(self, thread_id: str | None = None) -> None:
        """Deliver what may go now (of one thread, or of all)."""
        threads = (thread_id,) if thread_id is not None else tuple(self._waiting)
        for thread in threads:
            waiting = self._waiting.get(thread)
            if not waiting:
                continue
            bound = self.bound(thread)
            while waiting and waiting[0][0] <= bound:
                self._pass(heapq.heappop(waiting)[2])
            if not waiting:
                del self._waiting[thread]
        if not self.peers:
            self._passed.clear()
        elif self._waiting and self.on_blocked is not None:
            self.on_blocked()

    def heard(self, origin: str, frontier: int, holds: dict[str, int], now: float, session: int = 0) -> None:
        """A peer announced its frontier: ids are raised above it, waiting events may go."""
        self.bus.observe(frontier)
        self.peers[origin] = _Peer(frontier, holds, now, session)
        self.advance()

    def silent(self, since: float) -> dict[str, int]:
        """The peers not heard from since ``since``, with their database sessions."""
        return {origin: peer.session for origin, peer in self.peers.items() if peer.heard < since}

    def forget(self, origins: list[str]) -> None:
        """Stop waiting for these peers (gone, or cut off)."""
        for origin in origins:
            self.peers.pop(origin, None)
        if origins:
            self.advance()

    def flush(self) -> None:
        """Deliver everything waiting (the relay is detaching)."""
        self.peers.clear()
        self.advance()


class EventBus:
    """Fan-out of events to subscribers; publishing never awaits."""

    def __init__(self, maxsize: int = 1000) -> None:
        self.maxsize = maxsize
        self._subs: dict[str | None, set[Subscription]] = {}
        self._listeners: list[Any] = []
        #: child thread -> parent thread: a child's events are also carried on its parent's stream
        self._relays: dict[str, str] = {}
        #: the highest id published or relayed here, over all threads
        self._last = 0
        #: thread -> its events waiting behind an event being made durable (see :meth:`hold`)
        self._held: dict[str, list[Event]] = {}
        #: thread -> how many of its events are held at once (a turn's end and a recovery may overlap)
        self._holds: dict[str, int] = {}
        #: thread -> the lowest id it holds (while it holds any)
        self._hold_floor: dict[str, int] = {}
        #: whether an event log writes this bus's events to the store (set by the log itself)
        self.logged = False
        #: orders events from several workers before subscribers see them (set by a relay)
        self.sequencer: Sequencer | None = None

    def next_id(self, stream: str) -> int:
        """A fresh id for an event of ``stream`` (a thread id, or a user's stream): the clock
        in microseconds, or one more than the highest id this bus has seen, whichever is larger."""
        new = time.time_ns() // 1000
        if new <= self._last:
            new = self._last + 1
        self._last = new
        return new

    def frontier(self) -> int:
        """The id below which this bus publishes nothing more, but for held ids (see
        :meth:`holds`): its high-water mark, raised to the present so an idle worker's frontier
        moves on."""
        now = time.time_ns() // 1000
        if now > self._last:
            self._last = now
        return self._last

    def holds(self) -> dict[str, int]:
        """The lowest id each thread holds for an event not yet published."""
        return dict(self._hold_floor)

    def observe(self, event_id: int) -> None:
        """Keep this bus's ids above ``event_id`` (an id announced by another worker)."""
        if event_id > self._last:
            self._last = event_id

    def settled(self, thread_id: str) -> int:
        """The highest id of the thread whose events (and every lower one) have reached this
        worker's subscribers or never will: a replay from the event log stops there, and the
        live events take over above it."""
        sequencer = self.sequencer
        return UNBOUNDED if sequencer is None else sequencer.bound(thread_id)

    def hold(self, thread_id: str) -> int:
        """An id for an event of the thread to be published later by :meth:`release`; until
        then the thread's other events wait, so none overtakes it with a higher id."""
        self._held.setdefault(thread_id, [])
        self._holds[thread_id] = self._holds.get(thread_id, 0) + 1
        held = self.next_id(thread_id)
        floor = self._hold_floor.get(thread_id)
        if floor is None or held < floor:
            self._hold_floor[thread_id] = held
        return held

    def release(self, thread_id: str, event: Event | None) -> None:
        """Publish the held event (``None``: it is not to be published after all), then the
        thread's events that waited behind it, in id order. While another event of the thread
        is still held, this one waits with them: publishing it now would let the events queued
        after the other hold overtake that one's lower id."""
        left = self._holds.pop(thread_id, 1) - 1
        if left > 0:
            self._holds[thread_id] = left
            if event is not None:
                self._held[thread_id].append(event)
            return
        waiting = self._held.pop(thread_id, [])
        self._hold_floor.pop(thread_id, None)
        if event is not None:
            waiting.append(event)
        waiting.sort(key=_by_id)
        for held in waiting:
            self.publish(held)
        if self.sequencer is not None:
            self.sequencer.advance(thread_id)  # other workers' events waited for the held id

    def subscribe(self, thread_id: str | None = None, *, reasoning: bool = True, maxsize: int | None = None) -> Subscription:
        sub = Subscription(self, thread_id, maxsize or self.maxsize, reasoning)
        self._subs.setdefault(thread_id, set()).add(sub)
        return sub

    def relay(self, child_thread_id: str, parent_thread_id: str) -> None:
        """Carry a subagent's events on its parent's stream, wrapped as ``subagent_event``
        tagged with the child's thread (nested subagents relay all the way up)."""
        self._relays[child_thread_id] = parent_thread_id

    def unrelay(self, child_thread_id: str) -> None:
        self._relays.pop(child_thread_id, None)

    def add_listener(self, fn: Any) -> None:
        """A synchronous callable receiving every event (used for cross-process relays)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Any) -> bool:
        """Stop calling a listener added with :meth:`add_listener`; False when it was not there."""
        try:
            self._listeners.remove(fn)
        except ValueError:
            return False
        return True

    def _remove(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.thread_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub.thread_id]

    def has_subscribers(self, thread_id: str) -> bool:
        return bool(self._subs.get(thread_id) or self._subs.get(None) or self._listeners or thread_id in self._relays)

    def publish(self, event: Event) -> None:
        if not event.id:
            event.id = self.next_id(event.thread_id)
        elif event.id > self._last:  # relayed: its id was given where it was first published
            self._last = event.id
        if self._held:
            waiting = self._held.get(event.thread_id)
            if waiting is not None:
                waiting.append(event)
                return
        parent = self._relays.get(event.thread_id) if self._relays else None
        if parent is not None:
            self.publish(Event("subagent_event", parent, {"threadId": event.thread_id,
                                                           "event": {"type": event.type, "data": event.data}}))
        for fn in self._listeners:
            fn(event)
        if self.sequencer is not None:
            self.sequencer.admit(event)
        elif self._subs:
            self._deliver(event)

    def _deliver(self, event: Event) -> None:
        """Hand an event to its thread's subscribers (and those of every thread)."""
        subs = self._subs
        for sub in tuple(subs.get(event.thread_id, ())):
            sub.offer(event)
        for sub in tuple(subs.get(None, ())):
            sub.offer(event)

    def emit(self, type_: str, thread_id: str, data: dict[str, Any]) -> None:
        """Build and publish an event, skipping the work when nobody listens."""
        if self._subs or self._listeners or self._relays:
            self.publish(Event(type_, thread_id, data))
