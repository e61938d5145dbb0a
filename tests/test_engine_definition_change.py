"""A turn that waits across a deploy (an approval pending while the project's definitions
change) follows its agent's ``on_definition_change`` policy when it goes on: ``continue`` runs
on the new definitions and notes the change on the execution record; ``end`` ends the turn
interrupted with a reason that says so, its waiting call answered. Two runtimes on one SQLite
file stand for the process before the deploy and the one after."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_prompt, define_tool
from standardagents.engine.digest import CHANGED_KEY, DIGEST_KEY
from standardagents.engine.steps import load_execution
from standardagents.project import build_registry
from standardagents.store import open_store
from standardagents.testing.openai_stub import OpenAIStub, StubReply


def _registry(stub: OpenAIStub, version: int, policy: Literal["continue", "end"]) -> Any:
    if version == 1:
        @define_tool(needs_approval=True)
        def wipe(target: str) -> str:
            """Wipe a target."""
            return f"wiped {target}"
    else:
        @define_tool(needs_approval=True)
        def wipe(target: str) -> str:
            """Wipe a target."""
            return f"wiped {target} (v2)"

    return build_registry(define_agent(name="janitor", side_a={"prompt": "p", "stop_on_response": True},
                                       on_definition_change=policy),
                          define_prompt(name="p", prompt="You wipe.", tools=["wipe"]), wipe, stub_model(stub))


def _answer(body: dict[str, Any]) -> StubReply:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return StubReply(text=f"done: {last['content']}")
    return StubReply(tool_calls=[("wipe", '{"target": "disk"}')])


async def _paused_then_deployed(tmp_path: Path, stub: OpenAIStub,
                                policy: Literal["continue", "end"]) -> tuple[Runtime, str, str, str]:
    """A turn paused for approval under version 1, then a runtime of version 2 on the same
    database: returns it, the thread, the execution and the digest the turn started with."""
    url = f"sqlite:///{tmp_path / 'deploy.db'}"
    before = await Runtime.open(_registry(stub, 1, policy), store=open_store(url))
    thread = await before.create_thread("janitor")
    paused = await before.send(thread.id, "wipe the disk")
    assert paused.outcome == "approval_required"
    record = await before.store.get_execution(paused.execution_id)
    assert record is not None and isinstance(record.state.get(DIGEST_KEY), str)
    started_with = record.state[DIGEST_KEY]
    await before.aclose()
    after = await Runtime.open(_registry(stub, 2, policy), store=open_store(url))
    return after, thread.id, paused.execution_id, started_with


async def test_a_turn_resumed_after_a_deploy_goes_on_with_the_new_definitions_and_says_so(tmp_path: Path) -> None:
    with OpenAIStub(_answer) as stub:
        rt, thread_id, execution_id, started_with = await _paused_then_deployed(tmp_path, stub, "continue")
        try:
            (pending,) = await rt.pending_approvals(thread_id)
            resumed = await rt.decide(pending["token"], True)
            assert resumed is not None
            result = await resumed
            assert result.text == "done: wiped disk (v2)"
            record = await rt.store.get_execution(execution_id)
            assert record is not None and record.status == "complete"
            changed = record.state[CHANGED_KEY]
            assert changed["from"] == started_with and changed["to"] != started_with
            assert changed["policy"] == "continue"
            detail = await load_execution(rt.store, record)  # what the inspector shows
            assert (detail["definitions"], detail["definitionsChanged"]) == (started_with, changed)
        finally:
            await rt.aclose()


async def test_a_turn_resumed_after_a_deploy_ends_when_its_agent_says_so(tmp_path: Path) -> None:
    with OpenAIStub(_answer) as stub:
        rt, thread_id, execution_id, started_with = await _paused_then_deployed(tmp_path, stub, "end")
        try:
            requests_before = len(stub.requests)
            (pending,) = await rt.pending_approvals(thread_id)
            resumed = await rt.decide(pending["token"], True)
            assert resumed is not None
            result = await resumed
            assert (result.stop_reason, result.outcome) == ("interrupted", "definitions_changed")
            assert "definitions changed since this turn started" in (result.error or "")
            record = await rt.store.get_execution(execution_id)
            assert record is not None and (record.status, record.state["outcome"]) == ("interrupted",
                                                                                        "definitions_changed")
            assert record.state[CHANGED_KEY]["from"] == started_with
            tools = [m for m in await rt.store.list_messages(thread_id) if m.role == "tool"]
            assert [t.tool_status for t in tools] == ["error"]  # the wipe never ran, under either version
            assert len(stub.requests) == requests_before
        finally:
            await rt.aclose()


async def test_the_same_definitions_in_a_new_process_are_not_a_change(tmp_path: Path) -> None:
    with OpenAIStub(_answer) as stub:
        url = f"sqlite:///{tmp_path / 'same.db'}"
        first = await Runtime.open(_registry(stub, 1, "end"), store=open_store(url))
        thread = await first.create_thread("janitor")
        paused = await first.send(thread.id, "wipe the disk")
        await first.aclose()
        second = await Runtime.open(_registry(stub, 1, "end"), store=open_store(url))
        try:
            (pending,) = await second.pending_approvals(thread.id)
            resumed = await second.decide(pending["token"], True)
            assert resumed is not None
            assert (await resumed).text == "done: wiped disk"
            record = await second.store.get_execution(paused.execution_id)
            assert record is not None and CHANGED_KEY not in record.state
        finally:
            await second.aclose()
