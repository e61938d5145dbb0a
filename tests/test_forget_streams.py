"""What forgetting a user does to the events a worker keeps: its event log drops a forgotten
stream's events (in memory and not yet written, and the rows a batch wrote), a forgotten
thread's late events are not kept again, and the relay asks the other workers to do the same
and waits for their answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import test_relay
from standardagents.eventlog import EventLog
from standardagents.events import Event, EventBus
from standardagents.forget import FORGET_STREAMS, listen_for_forgets, purge_streams
from standardagents.store import SQLStore
from test_relay import Pair

pair = test_relay.pair
pg_url = test_relay.pg_url

THREAD, OTHER, USER_STREAM = "th_forgotten", "th_kept", "user:u1"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLStore]:
    opened = SQLStore(f"sqlite:///{tmp_path / 'log.db'}")
    await opened.open()
    yield opened
    await opened.close()


def _log(bus: EventBus, store: SQLStore) -> EventLog:
    # batches are written when flushed here, never by the background task meanwhile
    return EventLog(bus, store, flush_interval=3600)


def _publish(bus: EventBus, thread: str, n: int) -> None:
    bus.publish(Event("log", thread, {"n": n}, bus.next_id(thread)))


async def test_a_forgotten_streams_events_are_not_replayed_from_memory_or_the_log(store: SQLStore) -> None:
    bus = EventBus()
    log = _log(bus, store)
    log.start()
    try:
        _publish(bus, THREAD, 1)
        _publish(bus, OTHER, 1)
        log.record(USER_STREAM, Event("user_value_changed", "", {"key": "secret"}))
        await log.flush()  # written, and still in memory
        _publish(bus, THREAD, 2)  # in memory, not written yet
        dropped = await log.forget([THREAD], [USER_STREAM], purge=lambda streams: purge_streams(store, streams))
        assert dropped == 4  # three in memory, one pending
        assert ((await log.replay(THREAD, 0)).events, (await log.replay(USER_STREAM, 0)).events) == ([], [])
        assert [e.data for e in (await log.replay(OTHER, 0)).events] == [{"n": 1}]
    finally:
        await log.aclose()


async def test_a_forgotten_threads_late_events_are_not_kept_but_the_users_new_ones_are(store: SQLStore) -> None:
    bus = EventBus()
    log = _log(bus, store)
    log.start()
    try:
        await log.forget([THREAD], [USER_STREAM])
        _publish(bus, THREAD, 3)  # a stopped turn's last event, arriving after the forget
        log.record(USER_STREAM, Event("user_value_changed", "", {"key": "new"}))
        await log.flush()
        assert (await log.replay(THREAD, 0)).events == []
        assert [e.data for e in (await log.replay(USER_STREAM, 0)).events] == [{"key": "new"}]
    finally:
        await log.aclose()


async def test_a_worker_asked_to_forget_streams_drops_them_before_it_answers(pair: Pair, store: SQLStore) -> None:
    log_b = _log(pair.bus_b, store)
    log_b.start()
    try:
        listen_for_forgets(pair.relay_b, log_b, store)
        log_b.record(USER_STREAM, Event("user_value_changed", "", {"key": "secret"}))
        _publish(pair.bus_b, THREAD, 1)
        await log_b.flush()
        asked, confirmed = await pair.relay_a.broadcast(FORGET_STREAMS, [{"threads": [THREAD], "others": [USER_STREAM]}])
        assert (asked, confirmed) == (1, 1)
        assert ((await log_b.replay(THREAD, 0)).events, (await log_b.replay(USER_STREAM, 0)).events) == ([], [])
    finally:
        await log_b.aclose()


async def test_a_peer_without_a_handler_for_the_kind_answers_at_once(pair: Pair) -> None:
    assert await pair.relay_a.broadcast("something-new", [{"x": 1}, {"x": 2}]) == (1, 1)


async def test_a_peer_whose_handler_fails_is_reported_as_not_confirming(pair: Pair) -> None:
    seen: list[Any] = []

    async def fail(body: dict[str, Any]) -> None:
        seen.append(body)
        raise RuntimeError("broken")

    pair.relay_b.controls["breaks"] = fail
    assert await pair.relay_a.broadcast("breaks", [{"x": 1}], timeout=0.5) == (1, 0)
    assert seen == [{"x": 1}]


async def test_a_control_message_is_not_published_as_an_event_on_the_other_bus(pair: Pair) -> None:
    with pair.bus_b.subscribe(THREAD) as sub:
        await pair.relay_a.broadcast(FORGET_STREAMS, [{"threads": [THREAD], "others": []}])
        pair.bus_a.emit("log", THREAD, {"n": "after"})
        got = await sub.get(10)
    assert (got.type, got.data) == ("log", {"n": "after"})
