"""Control of a turn: guardrails, human approval, cancellation."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_hook, define_prompt, define_tool
from standardagents.engine.approvals import ApprovalError
from standardagents.project import build_registry
from standardagents.store import open_store
from standardagents.testing.openai_stub import StubReply


@define_tool(guardrail=True)
def no_secrets(text: str) -> dict:
    """Trip on anything that looks like a secret."""
    found = "password" in text.lower() or "forbidden" in text.lower()
    return {"tripwire": found, "info": {"reason": "secret-looking text"} if found else None}


@define_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs a person's approval)."""
    return f"deleted {path}"


def _events(sub) -> list[Any]:
    out = []
    while not sub.queue.empty():
        out.append(sub.queue.get_nowait())
    return out


# guardrails ----------------------------------------------------------------------------------

async def test_an_input_guardrail_trip_ends_the_turn_before_the_model_sees_the_message(stub, make_runtime):
    agent = define_agent(name="helper", side_a={"prompt": "main"}, input_guardrails=["no_secrets"])
    rt = await make_runtime(agent, define_prompt(name="main", prompt="x"), no_secrets, stub_model(stub))
    sub = rt.subscribe()
    result = await rt.run("helper", "my password is hunter2")
    assert (result.stop_reason, result.outcome) == ("interrupted", "guardrail")
    assert stub.requests == []
    events = _events(sub)
    trip = next(e for e in events if e.type == "guardrail")
    assert trip.data == {"kind": "input", "guardrail": "no_secrets", "info": {"reason": "secret-looking text"}}
    assert events[-1].type == "done" and events[-1].data["stopReason"] == "interrupted"
    (message,) = await rt.store.list_messages(result.thread_id)
    assert message.hidden and message.metadata["guardrail"]["guardrail"] == "no_secrets"


async def test_an_output_guardrail_trips_mid_stream_and_clients_never_get_the_rest(stub, make_runtime):
    clean = "This is a perfectly fine sentence. " * 6
    stub.queue(StubReply(text=clean + "FORBIDDEN detail follows here and more text after it.", chunk_size=5))
    prompt = define_prompt(name="main", prompt="x", output_guardrails=["no_secrets"], guardrail_chunk_size=40)
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}), prompt, no_secrets, stub_model(stub))
    sub = rt.subscribe()
    result = await rt.run("helper", "tell me")
    events = _events(sub)
    seen = "".join(e.data["delta"] for e in events if e.type == "message_chunk")
    assert "FORBIDDEN" not in seen
    assert seen and clean.startswith(seen)
    assert (result.stop_reason, result.outcome) == ("interrupted", "guardrail")
    reply = (await rt.store.list_messages(result.thread_id))[-1]
    assert reply.status == "guardrail" and reply.content == seen
    assert any(e.type == "guardrail" and e.data["kind"] == "output" for e in events)


async def test_an_output_guardrail_trip_closes_the_model_stream_at_once(stub, make_runtime):
    # The stub stalls mid-reply (a model still generating). When the tripped reply is stored
    # the engine must already have closed that stream itself: the hook checks without giving
    # the event loop a turn, so a close left to the stream's garbage collection (which runs
    # on a later turn of the loop) does not count.
    clean = "This is a perfectly fine sentence. " * 6
    tail = " and the model keeps writing" * 20
    stub.queue(StubReply(text=clean + "FORBIDDEN detail" + tail, chunk_size=5, stall_after_chunks=80,
                         stall_seconds=30))
    closed_before_store: list[bool] = []

    async def on_created(state, message, context):
        if message.status == "guardrail":
            closed_before_store.append(stub.wait_abandoned(1, timeout=5))

    hook = define_hook(hook="after_create_message", id="watch_reply", execute=on_created)
    prompt = define_prompt(name="main", prompt="x", output_guardrails=["no_secrets"], guardrail_chunk_size=40)
    agent = define_agent(name="helper", side_a={"prompt": "main"}, hooks=["watch_reply"])
    rt = await make_runtime(agent, prompt, no_secrets, hook, stub_model(stub))
    result = await rt.run("helper", "tell me")
    assert (result.stop_reason, result.outcome) == ("interrupted", "guardrail")
    assert closed_before_store == [True]
    assert stub.abandoned == 1


async def test_a_guardrail_tool_is_not_offered_to_the_model(stub, make_runtime):
    stub.queue("fine")
    agent = define_agent(name="helper", side_a={"prompt": "main"}, output_guardrails=["no_secrets"])
    rt = await make_runtime(agent, define_prompt(name="main", prompt="x"), no_secrets, stub_model(stub))
    result = await rt.run("helper", "hello")
    assert result.stop_reason == "complete"
    assert "tools" not in stub.requests[0] or stub.requests[0]["tools"] == []


# approvals -----------------------------------------------------------------------------------

def _approval_project(stub) -> tuple[Any, ...]:
    return (define_agent(name="helper", side_a={"prompt": "main"}),
            define_prompt(name="main", prompt="x", tools=["delete_file"]), delete_file, stub_model(stub))


async def test_an_approved_call_runs_and_the_same_turn_continues(stub, make_runtime):
    stub.queue(StubReply(tool_calls=[("delete_file", '{"path": "a.txt"}')]), "Deleted a.txt.")
    rt = await make_runtime(*_approval_project(stub))
    sub = rt.subscribe()
    paused = await rt.run("helper", "delete a.txt")
    assert (paused.stop_reason, paused.outcome) == ("interrupted", "approval_required")
    (request,) = paused.payload["approvals"]
    assert (request["tool"], request["arguments"]) == ("delete_file", {"path": "a.txt"})
    announced = [e.data for e in _events(sub) if e.type == "approval.request"]
    assert announced[0]["token"] == request["token"]
    assert (await rt.store.get_execution(paused.execution_id)).status == "waiting"
    assert len(stub.requests) == 1
    task = await rt.decide(request["token"], True)
    result = await task
    assert (result.stop_reason, result.text, result.execution_id) == ("complete", "Deleted a.txt.", paused.execution_id)
    tool = next(m for m in await rt.store.list_messages(paused.thread_id) if m.role == "tool")
    assert tool.content == "deleted a.txt"
    with pytest.raises(ApprovalError, match="stale"):
        await rt.decide(request["token"], True)


async def test_a_denied_call_becomes_a_result_the_model_reads(stub, make_runtime):
    stub.queue(StubReply(tool_calls=[("delete_file", '{"path": "b.txt"}')]), "Understood, not deleting.")
    rt = await make_runtime(*_approval_project(stub))
    paused = await rt.run("helper", "delete b.txt")
    result = await (await rt.decide(paused.payload["approvals"][0]["token"], False, reason="keep it"))
    assert result.text == "Understood, not deleting."
    assert stub.requests[1]["messages"][-1]["content"] == "Error: The user denied this call. Reason: keep it"


async def test_a_pending_approval_survives_a_restart(stub, tmp_path: Path):
    db = f"sqlite:///{tmp_path / 'approvals.db'}"
    stub.queue(StubReply(tool_calls=[("delete_file", '{"path": "c.txt"}')]), "Done after restart.")
    rt = await Runtime.open(build_registry(*_approval_project(stub)), store=open_store(db))
    paused = await rt.run("helper", "delete c.txt")
    token = paused.payload["approvals"][0]["token"]
    await rt.aclose()
    rt2 = await Runtime.open(build_registry(*_approval_project(stub)), store=open_store(db))
    try:
        assert [p["id"] for p in await rt2.pending_approvals(paused.thread_id)] == [paused.payload["approvals"][0]["id"]]
        result = await (await rt2.decide(token, True))
        assert (result.stop_reason, result.text) == ("complete", "Done after restart.")
    finally:
        await rt2.aclose()


async def test_a_forged_token_is_refused(stub, make_runtime):
    stub.queue(StubReply(tool_calls=[("delete_file", '{"path": "d.txt"}')]))
    rt = await make_runtime(*_approval_project(stub))
    paused = await rt.run("helper", "delete d.txt")
    token = paused.payload["approvals"][0]["token"]
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    with pytest.raises(ApprovalError, match="not valid"):
        await rt.decide(forged, True)
    with pytest.raises(ApprovalError):
        await rt.decide("not-a-token", True)
    assert (await rt.store.get_execution(paused.execution_id)).status == "waiting"


# cancellation --------------------------------------------------------------------------------

async def test_cancel_during_a_long_tool_then_a_normal_next_turn(stub, make_runtime):
    started = asyncio.Event()

    @define_tool
    async def slow_job() -> str:
        """Takes forever."""
        started.set()
        await asyncio.sleep(3600)
        return "never"

    stub.queue(StubReply(tool_calls=[("slow_job", "{}")]))
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                            define_prompt(name="main", prompt="x", tools=["slow_job"]), slow_job, stub_model(stub))
    thread = await rt.create_thread("helper")
    sub = rt.subscribe(thread.id)
    task = await rt.start(thread.id, "run the job")
    await asyncio.wait_for(started.wait(), 10)
    assert await rt.stop(thread.id) is True
    result = await task
    assert result.stop_reason == "cancelled"
    assert _events(sub)[-1].data["stopReason"] == "cancelled"
    messages = await rt.store.list_messages(thread.id)
    tool = next(m for m in messages if m.role == "tool")
    assert tool.tool_status == "error" and "cancelled" in tool.content
    stub.queue("Back to normal.")
    nxt = await rt.send(thread.id, "hello again")
    assert (nxt.stop_reason, nxt.text) == ("complete", "Back to normal.")
    roles = [m["role"] for m in stub.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]


async def test_cancel_during_a_streamed_reply_keeps_the_partial_text(stub, make_runtime):
    stub.queue(StubReply(text="Once upon a time there was a very long story", chunk_size=5, stall_after_chunks=4))
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                            define_prompt(name="main", prompt="x"), stub_model(stub))
    thread = await rt.create_thread("helper")
    sub = rt.subscribe(thread.id)
    task = await rt.start(thread.id, "tell a story")
    chunks = []
    while len(chunks) < 2:
        event = await sub.get(timeout=10)
        if event.type == "message_chunk":
            chunks.append(event.data["delta"])
    await rt.stop(thread.id)
    result = await task
    assert result.stop_reason == "cancelled"
    partial = (await rt.store.list_messages(thread.id))[-1]
    assert partial.role == "assistant" and partial.status == "cancelled"
    assert partial.content and "Once upon a time there was a very long story".startswith(partial.content)
    stub.queue("A new answer.")
    nxt = await rt.send(thread.id, "never mind")
    assert nxt.text == "A new answer."
    assert json.dumps(stub.requests[-1]["messages"]).count("Once upon") == 1


# turn events ---------------------------------------------------------------------------------

async def test_tool_events_carry_arguments_and_results_cut_to_the_limit(stub, make_runtime):
    @define_tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    long = "x" * 500
    stub.queue(StubReply(tool_calls=[("echo", json.dumps({"text": long}))]), "ok")
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                            define_prompt(name="main", prompt="x", tools=["echo"]), echo, stub_model(stub))
    rt.event_detail_limit = 100
    sub = rt.subscribe()
    await rt.run("helper", "echo")
    events = _events(sub)
    started = next(e.data for e in events if e.type == "tool_call_started")
    done = next(e.data for e in events if e.type == "tool_call_done")
    assert isinstance(started["arguments"], str)  # may still be a fragment: the call is streaming
    assert done["arguments"].startswith('{"text": "xxx') and done["arguments"].endswith("more characters)")
    assert done["result"] == "x" * 100 + "… (400 more characters)"
    usage = [e.data for e in events if e.type == "usage"]
    assert len(usage) == 2 and all(u["usage"]["total_tokens"] > 0 for u in usage)


async def test_a_subagents_events_are_carried_on_the_parents_stream(stub, make_runtime):
    child = define_agent(name="worker", type="dual_ai", expose_as_tool=True, tool_description="Does work.",
                         max_session_turns=2, side_a={"prompt": "worker_a", "sessionStop": {"name": "finish", "messageProperty": "summary"}},
                         side_b={"prompt": "worker_b"})

    def responder(body: dict[str, Any]) -> Any:
        system = body["messages"][0]["content"]
        if system == "parent":
            if any(m["role"] == "tool" for m in body["messages"]):
                return StubReply(text="Parent done.")
            return StubReply(tool_calls=[("worker", '{"message": "do it"}')])
        return StubReply(tool_calls=[("finish", '{"summary": "work finished"}')])

    stub.responder = responder
    rt = await make_runtime(define_agent(name="boss", side_a={"prompt": "boss_prompt"}), child,
                            define_prompt(name="boss_prompt", prompt="parent", tools=["worker"]),
                            define_prompt(name="worker_a", prompt="child a", tools=["finish"]),
                            define_prompt(name="worker_b", prompt="child b"), stub_model(stub))
    thread = await rt.create_thread("boss")
    sub = rt.subscribe(thread.id)
    result = await rt.send(thread.id, "delegate")
    assert result.text == "Parent done."
    events = _events(sub)
    nested = [e.data for e in events if e.type == "subagent_event"]
    assert nested and all(n["threadId"] != thread.id for n in nested)
    assert {n["event"]["type"] for n in nested} >= {"tool_call_started", "tool_call_done", "done"}
    assert all(e.thread_id == thread.id for e in events)
