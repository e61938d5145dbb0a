"""Cancelling one execution by its id (Runtime.cancel): a queued turn leaves its thread's
inbox with one ``done`` and its message is never stored, while the turn ahead of it runs on;
a running turn is stopped only when it is the one named; in another process sharing the
store, through the bus. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import pytest

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_prompt, define_tool
from standardagents.eventlog import EventLog
from standardagents.project import build_registry
from standardagents.relay import PostgresRelay
from standardagents.testing.openai_stub import OpenAIStub, StubReply
from store_fixtures import Backend
from test_engine_busy import Busy, _contents, _first_turn
from test_engine_busy import busy as busy  # the fixture


def _dones(events: list[Any], execution_id: str) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == "done" and e.data.get("executionId") == execution_id]


async def _drain(sub: Any) -> list[Any]:
    return [sub.queue.get_nowait() for _ in range(sub.queue.qsize())]


async def test_a_queued_turn_cancelled_by_its_id_ends_with_one_done_and_leaves_the_running_one_alone(
        busy: Busy, stub: OpenAIStub) -> None:
    thread_id, first = await _first_turn(busy, stub)
    sub = busy.rt.subscribe(thread_id)
    second = await busy.rt.start(thread_id, "never mind this one", execution_id="exe_queued_then_cancelled")
    assert await busy.rt.store.list_scope("inbox") != []
    assert await busy.rt.cancel("exe_queued_then_cancelled") is True
    with pytest.raises(asyncio.CancelledError):
        await second
    stub.queue("first answer")
    busy.gate.set()
    assert (await first).text == "first answer"
    assert await _contents(busy.rt, thread_id) == [("user", "first question"), ("assistant", None),
                                                   ("tool", "blocked work done"), ("assistant", "first answer")]
    assert [d["stopReason"] for d in _dones(await _drain(sub), "exe_queued_then_cancelled")] == ["cancelled"]
    record = await busy.rt.store.get_execution("exe_queued_then_cancelled")
    assert record is not None and (record.status, record.stop_reason) == ("cancelled", "cancelled")
    assert await busy.rt.store.list_scope("inbox") == []
    assert await busy.rt.cancel("exe_queued_then_cancelled") is False  # already over


async def test_cancelling_the_running_turn_by_its_id_stops_it_and_the_queued_one_runs(
        busy: Busy, stub: OpenAIStub) -> None:
    thread_id, first = await _first_turn(busy, stub)
    stub.queue("second answer")
    second = await busy.rt.start(thread_id, "second question")
    assert await busy.rt.cancel(await _running_id(busy.rt, thread_id)) is True
    assert (await first).stop_reason == "cancelled"
    assert (await second).text == "second answer"


async def _running_id(rt: Runtime, thread_id: str) -> str:
    running = await rt.store.list_executions(thread_id=thread_id, status="running")
    assert len(running) == 1
    return running[0].id


async def test_an_unknown_execution_is_not_cancelled(busy: Busy) -> None:
    assert await busy.rt.cancel("exe_nothing_like_it") is False


async def test_a_queued_turn_of_another_process_is_cancelled_there_and_the_running_turn_goes_on(
        backend: Backend, stub: OpenAIStub) -> None:
    if backend.name != "postgres":
        pytest.skip("processes share a bus through PostgreSQL")
    started, gate = asyncio.Event(), asyncio.Event()

    @define_tool
    async def block() -> str:
        """Work that takes until it is let go."""
        started.set()
        await gate.wait()
        return "blocked work done"

    def registry() -> Any:
        return build_registry(define_agent(name="worker", side_a={"prompt": "p", "stop_on_response": True}),
                              define_prompt(name="p", prompt="x", tools=["block"]), block, stub_model(stub))

    runtimes = [await Runtime.open(registry(), store=backend.new_store()) for _ in range(2)]
    channel = f"sa_cancel_{uuid.uuid4().hex[:8]}"
    relays = [PostgresRelay(rt.bus, backend.url, channel=channel) for rt in runtimes]
    logs = [EventLog(rt.bus, rt.store) for rt in runtimes]
    try:
        for rt, relay, log in zip(runtimes, relays, logs, strict=True):
            await relay.start()
            log.start()
            rt.bus.add_listener(rt.on_bus_event)
        here, there = runtimes
        stub.queue(StubReply(tool_calls=[("block", "{}")]))
        thread = await here.create_thread("worker")
        first = await here.start(thread.id, "first question")
        await started.wait()
        sub = here.subscribe(thread.id)
        second = await there.start(thread.id, "never mind", execution_id="exe_queued_elsewhere")
        assert await here.cancel("exe_queued_elsewhere") is True
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(second, 10)
        stub.queue("first answer")
        gate.set()
        assert (await first).text == "first answer"
        assert [m.content for m in await here.store.list_messages(thread.id) if m.role == "user"] == ["first question"]
        assert [d["stopReason"] for d in _dones(await _drain(sub), "exe_queued_elsewhere")] == ["cancelled"]
    finally:
        gate.set()
        for relay, log in zip(relays, logs, strict=True):
            with contextlib.suppress(Exception):
                await log.aclose()
            with contextlib.suppress(Exception):
                await relay.aclose()
        for rt in runtimes:
            await rt.aclose()


async def test_a_submitted_turn_is_a_handle_on_its_execution(busy: Busy, stub: OpenAIStub) -> None:
    thread_id, first = await _first_turn(busy, stub)
    running = await _running_id(busy.rt, thread_id)
    queued = await busy.rt.submit(thread_id, "later, please")
    assert queued.id.startswith("exe_") and queued.thread_id == thread_id
    assert await queued.status() == "queued"
    assert await queued.cancel() is True
    assert await queued.status() == "cancelled"
    assert queued.done()
    stub.queue("first answer", "third answer")
    last = await busy.rt.submit(thread_id, "and this")
    busy.gate.set()
    assert (await first).text == "first answer"
    result = await last
    assert (result.execution_id, result.text) == (last.id, "third answer")
    assert await last.status() == "complete"
    assert await busy.rt.store.get_execution(running) is not None
