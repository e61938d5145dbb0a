"""The PostgreSQL event relay: events cross between buses (processes) on one real database.

PostgreSQL comes from ``$STANDARDAGENTS_TEST_POSTGRES_URL``; the tests skip when it cannot be
reached, unless ``$CI`` is set, where they fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from server_fixtures import write_project
from standardagents import Runtime
from standardagents.events import Event, EventBus, Subscription
from standardagents.exceptions import StoreError
from standardagents.relay import (
    MAX_PAYLOAD,
    PostgresRelay,
    asyncpg_dsn,
    channel_for_schema,
    relay_for_store,
)
from standardagents.server import create_app
from standardagents.store import SQLStore
from store_fixtures import postgres_url

WAIT = 10.0


async def _reachable_url() -> str:
    url = postgres_url()
    try:
        conn = await asyncpg.connect(asyncpg_dsn(url), timeout=3)
        await conn.close()
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        reason = f"PostgreSQL not reachable at {url} ({type(exc).__name__}: {exc})"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return url


@pytest.fixture
async def pg_url() -> str:
    return await _reachable_url()


@dataclass
class Pair:
    """Two buses joined by two relays on one channel, as two worker processes would be."""

    bus_a: EventBus
    relay_a: PostgresRelay
    bus_b: EventBus
    relay_b: PostgresRelay


@pytest.fixture
async def pair(pg_url: str) -> AsyncIterator[Pair]:
    channel = f"sa_test_{uuid.uuid4().hex[:12]}"
    bus_a, bus_b = EventBus(), EventBus()
    relay_a = PostgresRelay(bus_a, pg_url, channel=channel)
    relay_b = PostgresRelay(bus_b, pg_url, channel=channel)
    await relay_a.start()
    await relay_b.start()
    try:
        yield Pair(bus_a, relay_a, bus_b, relay_b)
    finally:
        await relay_a.aclose()
        await relay_b.aclose()


@pytest.fixture
async def schema(pg_url: str) -> AsyncIterator[str]:
    name = f"sa_test_{uuid.uuid4().hex[:12]}"
    yield name
    conn = await asyncpg.connect(asyncpg_dsn(pg_url))
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        await conn.close()


async def _kill(relay: PostgresRelay, url: str) -> None:
    """Terminate the relay's server session from another connection."""
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        assert relay._conn is not None
        killed = await conn.fetchval("SELECT pg_terminate_backend($1)", relay._conn.get_server_pid())
    finally:
        await conn.close()
    assert killed


def _drain(sub: Subscription) -> list[Event]:
    out = []
    while not sub.queue.empty():
        out.append(sub.queue.get_nowait())
    return out


async def test_event_emitted_on_one_bus_reaches_a_subscriber_on_the_other(pair: Pair) -> None:
    with pair.bus_b.subscribe("t1") as sub:
        pair.bus_a.emit("message_chunk", "t1", {"delta": "héllo", "n": [1, 2]})
        got = await sub.get(WAIT)
    assert (got.type, got.thread_id, got.data) == ("message_chunk", "t1", {"delta": "héllo", "n": [1, 2]})


async def test_sender_sees_its_own_event_once_and_receiver_does_not_send_it_back(pair: Pair) -> None:
    with pair.bus_a.subscribe("t1") as on_a, pair.bus_b.subscribe("t1") as on_b:
        pair.bus_a.emit("log", "t1", {"n": 1})
        assert (await on_b.get(WAIT)).data == {"n": 1}
        # notifications reach every listener in commit order: once the marker from B is
        # back on A, any echo of the first event would already be queued before it
        pair.bus_b.emit("log", "t1", {"n": 2})
        assert (await on_b.get(WAIT)).data == {"n": 2}
        seen_on_a = [await on_a.get(WAIT), await on_a.get(WAIT)]
        assert [e.data for e in seen_on_a] == [{"n": 1}, {"n": 2}]
        assert _drain(on_a) == [] and _drain(on_b) == []
    assert pair.relay_a.received == 1 and pair.relay_b.received == 1


async def test_a_threads_events_from_both_workers_reach_every_subscriber_in_id_order(pair: Pair) -> None:
    with pair.bus_a.subscribe("t1") as on_a, pair.bus_b.subscribe("t1") as on_b:
        for n in range(40):  # interleaved within microseconds: each bus's own reach its subscribers first
            pair.bus_a.emit("message_chunk", "t1", {"from": "a", "n": n})
            pair.bus_b.emit("message_chunk", "t1", {"from": "b", "n": n})
        got_a = [await on_a.get(WAIT) for _ in range(80)]
        got_b = [await on_b.get(WAIT) for _ in range(80)]
    ids = [e.id for e in got_a]
    assert ids == sorted(set(ids))
    assert [e.id for e in got_b] == ids
    assert sorted((e.data["from"], e.data["n"]) for e in got_a) == sorted((w, n) for w in "ab" for n in range(40))


async def test_events_left_for_a_later_batch_are_not_overtaken_by_the_peers_own(pg_url: str) -> None:
    # ten events gather on A while it sends three per statement; B publishes one right after
    # them (a higher id). A's first announcement must not cover the seven still unsent, or B
    # would hand its own event to its streams before they arrive.
    channel = f"sa_test_{uuid.uuid4().hex[:12]}"
    bus_a, bus_b = EventBus(), EventBus()
    relay_a = PostgresRelay(bus_a, pg_url, channel=channel, batch=3)
    relay_b = PostgresRelay(bus_b, pg_url, channel=channel)
    await relay_a.start()
    await relay_b.start()
    try:
        with bus_b.subscribe("t1") as on_b:
            for n in range(10):
                bus_a.emit("message_chunk", "t1", {"from": "a", "n": n})
            bus_b.emit("message_chunk", "t1", {"from": "b", "n": 0})
            got = [await on_b.get(WAIT) for _ in range(11)]
    finally:
        await relay_a.aclose()
        await relay_b.aclose()
    assert [(e.data["from"], e.data["n"]) for e in got] == [("a", n) for n in range(10)] + [("b", 0)]
    assert [e.id for e in got] == sorted(e.id for e in got)
    assert relay_b.sequencer.late == 0


async def test_event_larger_than_a_notification_arrives_whole(pair: Pair) -> None:
    big = {"text": "é∑" * 40_000 + "x" * 123_457, "items": list(range(5000))}
    with pair.bus_b.subscribe("t1") as sub:
        pair.bus_a.emit("message_updated", "t1", big)
        pair.bus_a.emit("done", "t1", {"after": True})
        first = await sub.get(WAIT)
        second = await sub.get(WAIT)
    assert first.data == big and len(str(big).encode()) > 20 * MAX_PAYLOAD
    assert second.data == {"after": True}


async def test_each_relayed_event_is_timed_in_the_relay_lag_histogram(pair: Pair) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from prometheus_client.parser import text_string_to_metric_families

    from standardagents import observability
    from standardagents.observability import metrics

    meter = metrics.enable()
    assert meter is not None

    def prometheus_count() -> float:
        for family in text_string_to_metric_families(meter.exposition()[0].decode()):
            for sample in family.samples:
                if sample.name == "standardagents_relay_lag_seconds_count":
                    return sample.value
        return 0.0

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    observability.set_meter_provider(provider)
    before = prometheus_count()
    try:
        with pair.bus_b.subscribe("t1") as sub:
            for n in range(5):
                pair.bus_a.emit("log", "t1", {"n": n})
            got = [await sub.get(WAIT) for _ in range(5)]
        data = reader.get_metrics_data()
    finally:
        observability.set_meter_provider(None)
        provider.shutdown()
    assert [e.data["n"] for e in got] == [0, 1, 2, 3, 4]
    assert prometheus_count() - before == 5  # received by B only: A skips its own notifications
    assert data is not None
    (lag,) = [m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
              if m.name == "standardagents.relay.lag"]
    (point,) = lag.data.data_points
    assert point.count == 5 and point.min >= 0 and point.explicit_bounds == metrics.RELAY_SECONDS


async def test_events_flow_again_after_the_listening_connection_is_killed(pair: Pair, pg_url: str) -> None:
    await _kill(pair.relay_b, pg_url)
    await pair.relay_b.wait_connected(2, WAIT)
    with pair.bus_b.subscribe("t1") as sub:
        pair.bus_a.emit("log", "t1", {"after": "reconnect"})
        got = await sub.get(WAIT)
    assert got.data == {"after": "reconnect"}
    assert pair.relay_b.connections == 2


async def test_events_published_while_the_sending_connection_is_down_are_sent_after_reconnecting(
        pair: Pair, pg_url: str) -> None:
    with pair.bus_b.subscribe("t1") as sub:
        await _kill(pair.relay_a, pg_url)
        pair.bus_a.emit("log", "t1", {"n": 1})
        pair.bus_a.emit("log", "t1", {"n": 2})
        got = [await sub.get(WAIT), await sub.get(WAIT)]
    assert [e.data for e in got] == [{"n": 1}, {"n": 2}]
    assert pair.relay_a.connections == 2


async def test_full_send_queue_drops_and_counts_the_overflow(pg_url: str) -> None:
    channel = f"sa_test_{uuid.uuid4().hex[:12]}"
    bus_a, bus_b = EventBus(), EventBus()
    async with PostgresRelay(bus_a, pg_url, channel=channel, maxsize=3) as relay_a, \
            PostgresRelay(bus_b, pg_url, channel=channel):
        with bus_b.subscribe("t1") as sub:
            for n in range(10):  # no await in between: the sending task cannot run
                bus_a.emit("log", "t1", {"n": n})
            got = [await sub.get(WAIT) for _ in range(3)]
            bus_a.emit("log", "t1", {"n": "last"})
            last = await sub.get(WAIT)
    assert [e.data["n"] for e in got] == [0, 1, 2]
    assert last.data == {"n": "last"}
    assert relay_a.dropped == 7 and relay_a.sent == 4


async def test_start_names_the_unreachable_database(tmp_path: Path) -> None:
    relay = PostgresRelay(EventBus(), "postgresql://postgres@127.0.0.1:1/none")
    with pytest.raises(StoreError, match="event relay cannot connect to PostgreSQL"):
        await relay.start()
    with pytest.raises(StoreError, match="needs a PostgreSQL URL"):
        PostgresRelay(EventBus(), f"sqlite:///{tmp_path / 'x.db'}")


async def test_relay_for_store_only_for_postgresql_and_per_schema(pg_url: str, tmp_path: Path) -> None:
    bus = EventBus()
    assert relay_for_store(bus, SQLStore(f"sqlite:///{tmp_path / 'x.db'}")) is None
    relay = relay_for_store(bus, SQLStore(pg_url, schema="Tenant-1"))
    assert relay is not None
    assert relay.channel == channel_for_schema("Tenant-1") == "standardagents_events_tenant_1"
    assert channel_for_schema(None) == "standardagents_events"


async def test_thread_run_on_one_runtime_is_watched_live_through_another(
        pg_url: str, schema: str, tmp_path: Path) -> None:
    project = write_project(tmp_path / "project")
    rt_a = await Runtime.open(project, store=SQLStore(pg_url, schema=schema))
    rt_b = await Runtime.open(project, store=SQLStore(pg_url, schema=schema))
    relay_a, relay_b = relay_for_store(rt_a.bus, rt_a.store), relay_for_store(rt_b.bus, rt_b.store)
    assert relay_a is not None and relay_b is not None
    try:
        await relay_a.start()
        await relay_b.start()
        with rt_a.subscribe() as local, rt_b.subscribe() as remote:
            thread = await rt_a.create_thread("helper")
            result = await rt_a.send(thread.id, "add 2 and 3")
            seen_remote: list[Event] = []
            while not seen_remote or seen_remote[-1].type != "done":
                seen_remote.append(await remote.get(WAIT))
            seen_local = _drain(local)
    finally:
        await relay_a.aclose()
        await relay_b.aclose()
        await rt_a.aclose()
        await rt_b.aclose()
    assert [(e.type, e.data) for e in seen_remote] == [(e.type, e.data) for e in seen_local]
    assert seen_remote[-1].data["executionId"] == result.execution_id
    assert {"thread_created", "execution_started", "message_created", "done"} <= {e.type for e in seen_remote}
    assert {e.thread_id for e in seen_remote} == {thread.id}


async def test_server_app_on_postgresql_relays_events_from_other_workers(
        pg_url: str, schema: str, tmp_path: Path) -> None:
    project = write_project(tmp_path / "project")
    runtime = await Runtime.open(project, store=SQLStore(pg_url, schema=schema))
    app = create_app(runtime)
    other = EventBus()
    async with app.router.lifespan_context(app), \
            PostgresRelay(other, pg_url, channel=channel_for_schema(schema)):
        relay = app.state.server.extra["relay"]
        assert isinstance(relay, PostgresRelay) and relay.connected
        with runtime.subscribe("t9") as sub:
            other.emit("log", "t9", {"from": "another worker"})
            got = await sub.get(WAIT)
    assert got.data == {"from": "another worker"}
    assert not relay.connected
