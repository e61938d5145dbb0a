"""Hooks fire at their places with their arguments and provenance; ThreadState's surface."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine_helpers import stub_model
from standardagents import (
    InjectionRejected,
    Message,
    NotFoundError,
    ToolCall,
    ToolResult,
    define_agent,
    define_hook,
    define_prompt,
    define_tool,
)
from standardagents.engine import HookExecutionContext
from standardagents.testing.openai_stub import StubReply


@define_tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


def recorder(calls: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    """One hook per spec hook name, each recording its arguments."""

    def make(name: str, returns: Any = None) -> Any:
        async def execute(*args: Any) -> Any:
            calls.append((name, args))
            return returns(args) if callable(returns) else None

        return define_hook(hook=name, id=f"rec_{name}", execute=execute)

    return [
        make("after_thread_created"),
        make("after_system_message", lambda a: a[1] + " (edited)"),
        make("filter_messages", lambda a: a[1]),
        make("prefilter_llm_history", lambda a: a[1]),
        make("before_create_message", lambda a: a[1]),
        make("after_create_message"),
        make("before_store_tool_result", lambda a: a[2]),
        make("after_tool_call_success"),
        make("after_tool_call_failure"),
        make("tool_call_started"),
        make("tool_call_done"),
        make("before_update_message", lambda a: a[2]),
        make("after_update_message"),
    ]


async def test_every_thread_hook_fires_with_its_arguments_and_prompt_provenance(stub, make_runtime):
    calls: list[tuple[str, tuple[Any, ...]]] = []
    hooks = recorder(calls)
    ids = [h.id for h in hooks]
    stub.queue(StubReply(tool_calls=[("lookup", '{"topic": "owls"}')]), "Owls are birds.")
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                            define_prompt(name="main", prompt="Be brief.", tools=["lookup"], hooks=ids),
                            lookup, stub_model(stub), *hooks)
    thread = await rt.create_thread("helper")
    result = await rt.send(thread.id, "tell me about owls")
    names = [n for n, _ in calls]
    assert names[0] == "after_thread_created"
    for expected in ("after_system_message", "filter_messages", "prefilter_llm_history", "before_create_message",
                     "after_create_message", "tool_call_started", "after_tool_call_success", "before_store_tool_result",
                     "tool_call_done"):
        assert expected in names, expected
    assert "after_tool_call_failure" not in names
    # filter_messages: once per context assembly (two model requests)
    assert names.count("filter_messages") == 2 and names.count("after_system_message") == 2
    # every hook's last argument is the execution context naming the prompt
    for _, args in calls:
        ctx = args[-1]
        assert isinstance(ctx, HookExecutionContext)
        assert ctx.source == {"kind": "prompt", "promptName": "main"}
    started = next(a for n, a in calls if n == "tool_call_started")
    assert isinstance(started[1], ToolCall) and started[1].function.name == "lookup" and started[2] is None
    done = next(a for n, a in calls if n == "tool_call_done")
    assert isinstance(done[2], ToolResult) and done[2].result == "facts about owls"
    filtered = next(a for n, a in calls if n == "filter_messages")
    assert all(isinstance(m, Message) for m in filtered[1])
    # after_system_message's replacement reached the model
    assert stub.requests[0]["messages"][0]["content"] == "Be brief. (edited)"
    state = await rt.state(thread.id)
    msg = (await state.get_messages())[-1]
    await state.update_message(msg.id, {"content": "Owls are nocturnal birds."})
    assert [n for n, _ in calls][-2:] == ["before_update_message", "after_update_message"]
    assert result.stop_reason == "complete"


async def test_a_prompt_hook_list_replaces_the_agents_fallback_list(stub, make_runtime):
    seen: list[dict[str, Any]] = []

    async def note(state, message, context):
        seen.append(context.source)

    agent_hook = define_hook(hook="after_create_message", id="agent_level", execute=note)
    stub.queue("a", "b")
    agent = define_agent(name="helper", side_a={"prompt": "main"}, hooks=["agent_level"])
    rt = await make_runtime(agent, define_prompt(name="main", prompt="x"), stub_model(stub), agent_hook)
    await rt.run("helper", "hi")
    assert seen and all(s == {"kind": "agent", "agentName": "helper"} for s in seen)
    seen.clear()
    rt2 = await make_runtime(agent, define_prompt(name="main", prompt="x", hooks=[]), stub_model(stub), agent_hook)
    await rt2.run("helper", "hi")
    assert seen == []


async def test_after_system_message_returning_none_keeps_the_original(stub, make_runtime):
    keep = define_hook(hook="after_system_message", id="keep", execute=lambda state, text, ctx: None)
    stub.queue("ok")
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                            define_prompt(name="main", prompt="Original system.", hooks=["keep"]), stub_model(stub), keep)
    await rt.run("helper", "hi")
    assert stub.requests[0]["messages"][0] == {"role": "system", "content": "Original system."}


async def test_inject_message_rejected_by_a_hook_raises_and_stores_nothing(stub, make_runtime):
    def veto(state, message, ctx):
        if message.content and "forbidden" in message.content:
            raise ValueError("not allowed here")
        return message

    hook = define_hook(hook="before_create_message", id="veto", execute=veto)
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}, hooks=["veto"]),
                            define_prompt(name="main", prompt="x"), stub_model(stub), hook)
    thread = await rt.create_thread("helper")
    state = await rt.state(thread.id)
    with pytest.raises(InjectionRejected, match="not allowed here"):
        await state.inject_message("something forbidden")
    assert await state.get_messages() == []
    kept = await state.inject_message("fine", silent=True)
    assert [m.id for m in await state.get_messages()] == [kept.id]
    assert await rt.store.list_messages(thread.id, include_silent=False) == []


async def test_a_failing_before_create_message_at_runtime_keeps_the_last_good_message(stub, make_runtime):
    def tag(state, message, ctx):
        return message.copy(metadata={**message.metadata, "tagged": True})

    def broken(state, message, ctx):
        raise RuntimeError("hook bug")

    hooks = [define_hook(hook="before_create_message", id="tag", execute=tag),
             define_hook(hook="before_create_message", id="broken", execute=broken)]
    stub.queue("reply")
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}, hooks=["tag", "broken"]),
                            define_prompt(name="main", prompt="x"), stub_model(stub), *hooks)
    result = await rt.run("helper", "hi")
    assert result.stop_reason == "complete"
    messages = await rt.store.list_messages(result.thread_id)
    assert [m.content for m in messages] == ["hi", "reply"]
    assert all(m.metadata.get("tagged") for m in messages)


async def test_messages_injected_during_filter_messages_count_from_the_next_assembly(stub, make_runtime):
    seen_counts: list[int] = []

    async def inject_once(state, messages, ctx):
        seen_counts.append(len(messages))
        if len(seen_counts) == 1:
            await state.inject_message("note from a hook", role="user")
        return messages

    hook = define_hook(hook="filter_messages", id="inject_once", execute=inject_once)
    stub.queue(StubReply(tool_calls=[("lookup", '{"topic": "x"}')]), "done")
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                            define_prompt(name="main", prompt="x", tools=["lookup"], hooks=["inject_once"]),
                            lookup, stub_model(stub), hook)
    await rt.run("helper", "hi")
    first = [m["content"] for m in stub.requests[0]["messages"]]
    second = [m.get("content") for m in stub.requests[1]["messages"]]
    assert "note from a hook" not in first
    assert "note from a hook" in second
    assert seen_counts[0] == 1 and seen_counts[1] == 4


async def test_thread_state_files_env_logs_and_events(make_runtime, stub):
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}, env={"greeting": "hello"}),
                            define_prompt(name="main", prompt="x"), stub_model(stub))
    thread = await rt.create_thread("helper", user_id="u1")
    state = await rt.state(thread.id)
    await state.write_file("notes/a.txt", "alpha")
    assert await state.read_file("notes/a.txt") == b"alpha"
    assert [f.path for f in await state.list_files("notes/")] == ["/notes/a.txt"]
    assert await state.get_env("greeting") == "hello"
    await rt.store.set_env("user", "u1", "greeting", "hi from user")
    assert await state.get_env("greeting") == "hi from user"
    await state.set_env("greeting", "thread value")
    assert await state.get_env("greeting") == "thread value"
    sub = rt.subscribe(thread.id)
    await state.emit("progress", {"pct": 50})
    await state.log("halfway", data={"pct": 50})
    events = [sub.queue.get_nowait(), sub.queue.get_nowait()]
    assert (events[0].type, events[0].data) == ("progress", {"pct": 50})
    assert events[1].type == "log" and events[1].data["message"] == "halfway"
    assert [entry.message for entry in await state.get_logs()] == ["halfway"]


async def test_invoke_tool_runs_now_and_stores_nothing(make_runtime, stub):
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                            define_prompt(name="main", prompt="x", tools=["lookup"]), lookup, stub_model(stub))
    thread = await rt.create_thread("helper")
    state = await rt.state(thread.id)
    result = await state.invoke_tool("lookup", {"topic": "bees"})
    assert (result.status, result.result) == ("success", "facts about bees")
    assert await state.get_messages() == []
    assert not stub.requests


async def test_queue_tool_on_an_idle_thread_runs_the_tool_then_the_turn_goes_on(make_runtime, stub):
    stub.queue(StubReply(text="Ants are social insects."))
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                            define_prompt(name="main", prompt="x", tools=["lookup"]), lookup, stub_model(stub))
    thread = await rt.create_thread("helper")
    state = await rt.state(thread.id)
    sub = rt.subscribe(thread.id)
    task = await state.queue_tool("lookup", {"topic": "ants"})
    assert task is not None
    result = await task
    assert (result.stop_reason, result.text) == ("complete", "Ants are social insects.")
    messages = await state.get_messages()
    assert [(m.role, m.content) for m in messages] == [
        ("assistant", None), ("tool", "facts about ants"), ("assistant", "Ants are social insects.")]
    call = messages[0].tool_calls[0]
    assert (call.name, json.loads(call.arguments)) == ("lookup", {"topic": "ants"})
    (request,) = stub.requests
    assert request["messages"][-1] == {"role": "tool", "tool_call_id": call.id, "content": "facts about ants"}
    events = []
    while not sub.queue.empty():
        events.append(sub.queue.get_nowait())
    assert [e.type for e in events].count("done") == 1
    assert [e.type for e in events if e.type in ("execution_started", "tool_call_done", "done")] == [
        "execution_started", "tool_call_done", "done"]


async def test_a_tool_queued_after_the_turns_last_step_starts_the_next_turn(make_runtime, stub):
    @define_hook("after_create_message", id="look_up_after_answer")
    async def look_up_after_answer(state: Any, message: Any) -> None:
        if message.role == "assistant" and message.content == "First answer.":
            await state.queue_tool("lookup", {"topic": "wasps"})

    stub.queue(StubReply(text="First answer."), StubReply(text="Wasps noted."))
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}, hooks=["look_up_after_answer"]),
                            define_prompt(name="main", prompt="x", tools=["lookup"]), lookup, look_up_after_answer,
                            stub_model(stub))
    result = await rt.run("helper", "hi")
    assert result.text == "First answer."
    await rt.drain()
    messages = await rt.store.list_messages(result.thread_id)
    assert [(m.role, m.content) for m in messages] == [
        ("user", "hi"), ("assistant", "First answer."), ("assistant", None), ("tool", "facts about wasps"),
        ("assistant", "Wasps noted.")]
    assert len(await rt.store.list_executions(thread_id=result.thread_id)) == 2


async def test_queue_tool_naming_an_unknown_tool_is_refused_and_starts_nothing(make_runtime, stub):
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                            define_prompt(name="main", prompt="x", tools=["lookup"]), lookup, stub_model(stub))
    thread = await rt.create_thread("helper")
    state = await rt.state(thread.id)
    with pytest.raises(NotFoundError, match="no_such_tool"):
        await state.queue_tool("no_such_tool", {})
    await rt.drain()
    assert await state.get_messages() == []
    assert not stub.requests
    assert await rt.store.list_executions(thread_id=thread.id) == []
