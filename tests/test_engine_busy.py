"""A second message to a thread that runs a turn: enqueue (wait its turn), reject (refused,
409 over HTTP, nothing stored), interrupt (the running turn stops keeping its work, then the
new message runs) and rollback (the running turn stops and what it wrote is removed), chosen
per agent or per request, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_prompt, define_tool
from standardagents.exceptions import DefinitionError, ThreadBusyError
from standardagents.project import build_registry
from standardagents.server import create_app
from standardagents.testing.openai_stub import OpenAIStub, StubReply
from store_fixtures import Backend


@dataclass
class Busy:
    """A runtime whose agent's first turn blocks in a tool until the test lets it go."""

    rt: Runtime
    started: asyncio.Event
    gate: asyncio.Event


@pytest.fixture
async def busy(backend: Backend, stub: OpenAIStub) -> AsyncIterator[Busy]:
    started, gate = asyncio.Event(), asyncio.Event()

    @define_tool
    async def block() -> str:
        """Work that takes until it is let go."""
        started.set()
        await gate.wait()
        return "blocked work done"

    def agent(name: str, **extra: Any) -> Any:
        return define_agent(name=name, side_a={"prompt": "p", "stop_on_response": True}, **extra)

    registry = build_registry(agent("worker"), agent("strict", busy="reject"), agent("eager", busy="rollback"),
                              define_prompt(name="p", prompt="x", tools=["block"]), block, stub_model(stub))
    rt = await Runtime.open(registry, store=backend.new_store())
    try:
        yield Busy(rt, started, gate)
    finally:
        gate.set()
        await rt.aclose()


async def _first_turn(b: Busy, stub: OpenAIStub, agent: str = "worker") -> tuple[str, asyncio.Task[Any]]:
    stub.queue(StubReply(tool_calls=[("block", "{}")]))
    thread = await b.rt.create_thread(agent)
    first = await b.rt.start(thread.id, "first question")
    await b.started.wait()
    return thread.id, first


async def _contents(rt: Runtime, thread_id: str) -> list[tuple[str, str | None]]:
    return [(m.role, m.content) for m in await rt.store.list_messages(thread_id)]


async def test_enqueue_runs_the_second_message_after_the_first_turn(busy: Busy, stub: OpenAIStub) -> None:
    thread_id, first = await _first_turn(busy, stub)
    stub.queue("first answer", "second answer")
    second = await busy.rt.start(thread_id, "second question")
    busy.gate.set()
    assert (await first).text == "first answer"
    assert (await second).text == "second answer"
    roles = [r for r, _ in await _contents(busy.rt, thread_id)]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]


async def test_reject_refuses_the_message_and_stores_nothing(busy: Busy, stub: OpenAIStub) -> None:
    thread_id, first = await _first_turn(busy, stub)
    before = await _contents(busy.rt, thread_id)
    with pytest.raises(ThreadBusyError, match="busy policy 'reject'"):
        await busy.rt.start(thread_id, "second question", busy="reject")
    assert await busy.rt.store.list_scope("inbox") == []
    stub.queue("first answer")
    busy.gate.set()
    assert (await first).stop_reason == "complete"
    after = await _contents(busy.rt, thread_id)
    assert after[:len(before)] == before and ("user", "second question") not in after


async def test_an_agents_busy_is_its_default_and_a_request_overrides_it(busy: Busy, stub: OpenAIStub) -> None:
    thread_id, first = await _first_turn(busy, stub, agent="strict")
    with pytest.raises(ThreadBusyError):
        await busy.rt.start(thread_id, "second question")
    stub.queue("second answer")
    second = await busy.rt.start(thread_id, "second question", busy="interrupt")
    assert (await first).stop_reason == "cancelled"
    assert (await second).text == "second answer"


async def test_interrupt_stops_the_turn_keeping_its_work_then_runs_the_message(busy: Busy, stub: OpenAIStub) -> None:
    thread_id, first = await _first_turn(busy, stub)
    stub.queue("second answer")
    second = await busy.rt.start(thread_id, "second question", busy="interrupt")
    stopped = await first
    assert stopped.stop_reason == "cancelled"
    assert (await second).text == "second answer"
    messages = await busy.rt.store.list_messages(thread_id)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert messages[0].content == "first question"
    assert messages[2].tool_status == "error"  # the call the stop cut short is answered
    assert (messages[3].content, messages[4].content) == ("second question", "second answer")
    # the model saw the interrupted turn's work when it answered the new message
    sent = [m.get("content") for m in stub.requests[-1]["messages"]]
    assert "first question" in sent and "second question" in sent


async def test_rollback_removes_what_the_stopped_turn_wrote(busy: Busy, stub: OpenAIStub) -> None:
    stub.queue("earlier answer")
    thread = await busy.rt.create_thread("worker")
    assert (await busy.rt.send(thread.id, "earlier question")).text == "earlier answer"
    busy.started.clear()
    stub.queue(StubReply(tool_calls=[("block", "{}")]))
    first = await busy.rt.start(thread.id, "first question")
    await busy.started.wait()
    with busy.rt.subscribe(thread.id) as events:
        stub.queue("second answer")
        second = await busy.rt.start(thread.id, "second question", busy="rollback")
        assert (await first).stop_reason == "cancelled"
        assert (await second).text == "second answer"
        seen = [events.queue.get_nowait() for _ in range(events.queue.qsize())]
    assert await _contents(busy.rt, thread.id) == [
        ("user", "earlier question"), ("assistant", "earlier answer"),
        ("user", "second question"), ("assistant", "second answer")]
    assert await busy.rt.store.list_tool_results(thread.id) == []
    removed = [e for e in seen if e.type == "messages_removed"]
    assert len(removed) == 1 and removed[0].data["executionId"] == first.result().execution_id
    assert len(removed[0].data["messageIds"]) == 3  # the question, the call, its cut-short result
    sent = [m.get("content") for m in stub.requests[-1]["messages"]]
    assert "first question" not in sent and "earlier question" in sent


async def test_an_unknown_policy_is_a_definition_error(busy: Busy, stub: OpenAIStub) -> None:
    thread = await busy.rt.create_thread("worker")
    with pytest.raises(DefinitionError, match="busy must be one of enqueue, reject, interrupt, rollback"):
        await busy.rt.start(thread.id, "hi", busy="sometimes")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="busy"):
        define_agent(name="x", side_a={"prompt": "p"}, busy="sometimes")  # type: ignore[typeddict-item]


async def test_busy_policies_over_http(busy: Busy, stub: OpenAIStub) -> None:
    app = create_app(busy.rt, dev=True, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        thread_id = (await http.post("/api/threads", json={"agent": "eager"})).json()["id"]
        stub.queue(StubReply(tool_calls=[("block", "{}")]))
        accepted = await http.post(f"/api/threads/{thread_id}/messages", json={"content": "first question"})
        assert accepted.status_code == 202
        await busy.started.wait()
        refused = await http.post(f"/api/threads/{thread_id}/messages",
                                  json={"content": "second question", "busy": "reject"})
        bad = await http.post(f"/api/threads/{thread_id}/messages", json={"content": "x", "busy": "later"})
        stub.queue("second answer")
        # the agent's own policy (rollback) applies when the request names none
        done = await http.post(f"/api/threads/{thread_id}/messages?wait=true", json={"content": "second question"})
        listed = (await http.get(f"/api/threads/{thread_id}/messages")).json()["messages"]
        doc = (await http.get("/api/openapi.json")).json()
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "thread_busy"
    assert bad.status_code == 422 and "'busy'" in bad.json()["error"]["message"]
    assert done.status_code == 200 and done.json()["text"] == "second answer"
    assert [(m["role"], m["content"]) for m in listed] == [("user", "second question"), ("assistant", "second answer")]
    send = doc["paths"]["/api/threads/{thread_id}/messages"]["post"]
    assert "409" in send["responses"]
    assert send["requestBody"]["content"]["application/json"]["schema"]["properties"]["busy"]["enum"] == [
        "enqueue", "reject", "interrupt", "rollback"]


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
async def test_rollback_reaches_a_turn_running_on_another_worker(backend: Backend, stub: OpenAIStub) -> None:
    from standardagents.relay import relay_for_store

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
    relays = []
    try:
        for rt in runtimes:  # as `serve` does on PostgreSQL: stops travel between the workers
            relay = relay_for_store(rt.bus, rt.store)
            assert relay is not None
            await relay.start()
            relays.append(relay)
            rt.bus.add_listener(rt.on_bus_event)
        running_here, other_worker = runtimes
        thread = await running_here.create_thread("worker")
        stub.queue(StubReply(tool_calls=[("block", "{}")]))
        first = await running_here.start(thread.id, "first question")
        await started.wait()
        stub.queue("second answer")
        second = await other_worker.start(thread.id, "second question", busy="rollback")
        assert (await first).stop_reason == "cancelled"
        assert (await second).text == "second answer"
        assert await _contents(other_worker, thread.id) == [("user", "second question"), ("assistant", "second answer")]
    finally:
        gate.set()
        for rt, relay in zip(runtimes, relays, strict=False):
            rt.bus.remove_listener(rt.on_bus_event)
            await relay.aclose()
        for rt in runtimes:
            await rt.aclose()
