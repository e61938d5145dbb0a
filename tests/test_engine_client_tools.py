"""Client tools on the engine surface, with no protocol in between: a turn offered tools the
caller runs pauses durably on their calls, and the caller's results continue the same
execution exactly once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_prompt, define_tool
from standardagents.engine.client_tools import ClientToolError, client_tools
from standardagents.project import build_registry
from standardagents.store import open_store
from standardagents.testing.openai_stub import StubReply

WEATHER = client_tools([{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])


@define_tool(needs_approval=True)
def wipe() -> str:
    """Wipe everything (needs a person's approval)."""
    return "wiped"


@define_tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"facts about {topic}"


async def _open(stub: Any, tmp_path: Path) -> Runtime:
    registry = build_registry(define_agent(name="clerk", side_a={"prompt": "main"}),
                              define_prompt(name="main", prompt="You help.", tools=["wipe", "lookup"]),
                              wipe, lookup, stub_model(stub))
    return await Runtime.open(registry, store=open_store(f"sqlite:///{tmp_path / 'client.db'}"))


async def test_a_client_call_pauses_the_turn_and_its_result_continues_the_same_execution(stub, tmp_path: Path) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city": "Paris"}')]), "Sunny in Paris.")
    rt = await _open(stub, tmp_path)
    try:
        thread = await rt.create_thread("clerk")
        paused = await (await rt.start(thread.id, "Weather in Paris?", client_tools=WEATHER))
        assert (paused.stop_reason, paused.outcome) == ("interrupted", "client_tool_calls")
        (call,) = paused.payload["toolCalls"]
        # the stub numbers its calls (call_0_0): a client call gets an id unique enough to find its turn by
        assert call["name"] == "get_weather" and call["id"] != "call_0_0" and len(call["id"]) > 16
        record = await rt.waiting_for_tool_results([call["id"]])
        assert record is not None and record.id == paused.execution_id and record.status == "waiting"
        done = await (await rt.submit_tool_results(record.id, {call["id"]: "sunny"}))
        assert (done.execution_id, done.outcome, done.text) == (paused.execution_id, "response", "Sunny in Paris.")
        assert stub.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}
        assert (await rt.store.get_execution(record.id)).status == "complete"  # type: ignore[union-attr]
    finally:
        await rt.aclose()


async def test_a_client_wait_that_lapses_leaves_no_call_index_behind(stub, tmp_path: Path) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city": "Paris"}')]), "Never mind then.")
    rt = await _open(stub, tmp_path)
    try:
        thread = await rt.create_thread("clerk")
        paused = await (await rt.start(thread.id, "Weather in Paris?", client_tools=WEATHER))
        call_id = paused.payload["toolCalls"][0]["id"]
        record = await rt.store.get_execution(paused.execution_id)
        assert record is not None
        # the client tools are kept once, with the turn's options
        assert "clientTools" not in record.state and record.state["options"]["clientTools"]["schemas"]
        assert await rt.store.get_env("system", "client_tool_calls", call_id) is not None
        # the conversation moves on without the result: the wait lapses, and its index with it
        await (await rt.start(thread.id, "Forget it."))
        assert (await rt.store.get_execution(paused.execution_id)).status == "cancelled"  # type: ignore[union-attr]
        assert await rt.store.get_env("system", "client_tool_calls", call_id) is None
        assert await rt.waiting_for_tool_results([call_id]) is None
    finally:
        await rt.aclose()


async def test_concurrent_results_continue_the_turn_once(stub, tmp_path: Path) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", "{}")]), "Done.")
    rt = await _open(stub, tmp_path)
    try:
        paused = await (await rt.start((await rt.create_thread("clerk")).id, "hi", client_tools=WEATHER))
        call_id = paused.payload["toolCalls"][0]["id"]
        tries = await asyncio.gather(*(rt.submit_tool_results(paused.execution_id, {call_id: str(i)})
                                       for i in range(4)), return_exceptions=True)
        tasks = [t for t in tries if isinstance(t, asyncio.Task)]
        assert len(tasks) == 1 and all(isinstance(t, ClientToolError) for t in tries if t not in tasks)
        assert (await tasks[0]).outcome == "response"
        assert len(stub.requests) == 2
    finally:
        await rt.aclose()


async def test_results_missing_a_call_leave_the_turn_waiting(stub, tmp_path: Path) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city": "A"}'), ("get_weather", '{"city": "B"}')]))
    rt = await _open(stub, tmp_path)
    try:
        paused = await (await rt.start((await rt.create_thread("clerk")).id, "hi", client_tools=WEATHER))
        first = paused.payload["toolCalls"][0]["id"]
        with pytest.raises(ClientToolError, match="missing"):
            await rt.submit_tool_results(paused.execution_id, {first: "warm"})
        assert (await rt.store.get_execution(paused.execution_id)).status == "waiting"  # type: ignore[union-attr]
    finally:
        await rt.aclose()


async def test_a_client_tool_named_like_an_agent_tool_is_refused_before_anything_is_stored(stub, tmp_path) -> None:
    rt = await _open(stub, tmp_path)
    try:
        thread = await rt.create_thread("clerk")
        clash = client_tools([{"type": "function", "function": {"name": "lookup"}}])
        with pytest.raises(ClientToolError, match="lookup"):
            await rt.start(thread.id, "hi", client_tools=clash)
        assert await rt.store.list_messages(thread.id) == []
        assert stub.requests == []
    finally:
        await rt.aclose()


async def test_client_calls_beside_a_call_waiting_for_approval_go_to_the_client_after_the_decision(
        stub, tmp_path: Path) -> None:
    stub.queue(StubReply(tool_calls=[("wipe", "{}"), ("get_weather", '{"city": "Oslo"}')]), "Wiped; cold in Oslo.")
    rt = await _open(stub, tmp_path)
    try:
        paused = await (await rt.start((await rt.create_thread("clerk")).id, "wipe, and the weather?",
                                       client_tools=WEATHER))
        assert paused.outcome == "approval_required"
        task = await rt.decide(paused.payload["approvals"][0]["token"], True)
        assert task is not None
        waiting = await task
        assert (waiting.outcome, waiting.execution_id) == ("client_tool_calls", paused.execution_id)
        (call,) = waiting.payload["toolCalls"]
        done = await (await rt.submit_tool_results(waiting.execution_id, {call["id"]: "cold"}))
        assert done.text == "Wiped; cold in Oslo."
        tool_results = {m["content"] for m in stub.requests[1]["messages"] if m["role"] == "tool"}
        assert tool_results == {"wiped", "cold"}
    finally:
        await rt.aclose()
