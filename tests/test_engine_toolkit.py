"""The model-loop toolkit at work in the engine, over the OpenAI wire stub."""

from __future__ import annotations

import json
from typing import Any

from engine_helpers import stub_model
from standardagents import define_agent, define_prompt, define_tool
from standardagents.testing.openai_stub import StubReply

AGENT = define_agent(name="helper", side_a={"prompt": "main"})


@define_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def _tools(rt, thread_id):
    return [m for m in await rt.store.list_messages(thread_id) if m.role == "tool"]


async def test_broken_arguments_are_repaired_coerced_and_reported(stub, make_runtime):
    stub.queue(StubReply(tool_calls=[("add", "{'a': '2', 'b': 3,}")]), "5")
    rt = await make_runtime(AGENT, define_prompt(name="main", prompt="x", tools=["add"]), add, stub_model(stub))
    sub = rt.subscribe()
    result = await rt.run("helper", "add")
    (tool,) = await _tools(rt, result.thread_id)
    assert (tool.tool_status, tool.content) == ("success", "5")
    assert tool.metadata["repaired"] is True
    (done,) = [e.data for e in _drain(sub) if e.type == "tool_call_done"]
    assert (done["name"], done["status"], done["repaired"], done["result"]) == ("add", "success", True, "5")
    assert done["arguments"] == "{'a': '2', 'b': 3,}"


async def test_truncated_arguments_are_refused_and_the_budget_ends_the_turn(stub, make_runtime):
    cut = StubReply(tool_calls=[("add", '{"a": 2, "b": ')], finish_reason="length")
    stub.queue(cut, cut, cut)
    rt = await make_runtime(AGENT, define_prompt(name="main", prompt="x", tools=["add"], max_tool_retries=1), add,
                            stub_model(stub))
    result = await rt.run("helper", "add")
    tools = await _tools(rt, result.thread_id)
    assert "cut off" in tools[0].content
    assert result.stop_reason == "error"
    assert "unusable arguments for tool 'add' 2 times" in (result.error or "")
    assert len(stub.requests) == 2


async def test_a_call_typed_as_text_is_recovered_and_run(stub, make_runtime):
    stub.queue('Let me add.\n<tool_call>{"name": "add", "arguments": {"a": 20, "b": 22}}</tool_call>', "42 it is.")
    rt = await make_runtime(AGENT, define_prompt(name="main", prompt="x", tools=["add"]), add, stub_model(stub))
    result = await rt.run("helper", "add")
    messages = await rt.store.list_messages(result.thread_id)
    assert messages[1].content == "Let me add."
    assert messages[1].tool_calls[0].name == "add"
    assert messages[2].content == "42"
    assert result.text == "42 it is."


async def test_a_refused_schema_is_retried_relaxed_and_never_sent_refused_again(stub, make_runtime, tmp_path):
    bodies: list[dict[str, Any]] = []

    def responder(body: dict[str, Any]) -> Any:
        bodies.append(body)
        params = body["tools"][0]["function"]["parameters"] if body.get("tools") else {}
        if "additionalProperties" in json.dumps(params) or "$defs" in json.dumps(params):
            return StubReply(error_status=400, error_body={"error": {"message": "Invalid schema for function 'add': grammar not supported"}})
        return StubReply(text="ok")

    stub.responder = responder
    rt = await make_runtime(AGENT, define_prompt(name="main", prompt="x", tools=["add"]), add, stub_model(stub))
    assert (await rt.run("helper", "one")).stop_reason == "complete"
    refused_first = len(bodies)
    assert refused_first >= 2
    assert (await rt.run("helper", "two")).stop_reason == "complete"
    assert len(bodies) == refused_first + 1
    blob = rt.capabilities.export_capabilities()
    rt2 = await make_runtime(AGENT, define_prompt(name="main", prompt="x", tools=["add"]), add, stub_model(stub))
    rt2.capabilities.import_capabilities(blob)
    assert (await rt2.run("helper", "three")).stop_reason == "complete"
    assert len(bodies) == refused_first + 2


async def test_a_history_over_the_threshold_is_compacted_into_a_summary(stub, make_runtime):
    long = "word " * 400
    summaries = 0

    def responder(body: dict[str, Any]) -> Any:
        nonlocal summaries
        if body["messages"][0]["content"].startswith("You compress conversations"):
            summaries += 1
            return StubReply(text="The user talked about words a lot.")
        return StubReply(text=f"reply {long}")

    stub.responder = responder
    model = stub_model(stub, context_window=4000)
    rt = await make_runtime(AGENT, define_prompt(name="main", prompt="x", compaction_threshold=0.5), model)
    thread = await rt.create_thread("helper")
    for i in range(4):
        await rt.send(thread.id, f"message {i} {long}")
    assert summaries >= 1
    stored = await rt.store.list_messages(thread.id)
    hidden = [m for m in stored if m.hidden]
    summary = [m for m in stored if m.metadata.get("summary")]
    assert hidden and summary
    last = stub.requests[-1]["messages"]
    assert any("The user talked about words" in (m.get("content") or "") for m in last)
    assert "message 0" not in json.dumps(last)
    assert len(await rt.store.list_messages(thread.id, include_hidden=False)) < len(stored)
    # the execution that compacted names it among its steps' records
    from standardagents.engine.steps import load_execution

    first = summary[0]
    record = await rt.store.get_execution(first.metadata["executionId"])
    assert record is not None
    (compaction, *_) = (await load_execution(rt.store, record))["compactions"]
    assert compaction["messageId"] == first.id and compaction["folded"] == len(first.metadata["folded"]) > 0


async def test_an_on_demand_prompt_with_40_tools_loads_3(stub, make_runtime):
    tools = []
    for i in range(40):
        def make(i: int = i) -> Any:
            def fn(x: int) -> str:
                return f"tool {i} got {x}"
            return define_tool(name=f"tool_{i:02d}", description=f"Tool number {i}.", parameters={
                "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}, execute=lambda state, args, fn=fn: fn(**args))
        tools.append(make())
    stub.queue(StubReply(tool_calls=[("load_tools", json.dumps({"names": ["tool_03", "tool_1*"]}))]),
               StubReply(tool_calls=[("tool_03", '{"x": 7}')]), "done")
    prompt = define_prompt(name="main", prompt="x", tools=[t.name for t in tools], tool_discovery="ondemand")
    rt = await make_runtime(AGENT, prompt, *tools, stub_model(stub))
    result = await rt.run("helper", "go")
    first = [t["function"]["name"] for t in stub.requests[0]["tools"]]
    assert first == ["load_tools"]
    assert "tool_39" in stub.requests[0]["messages"][0]["content"]
    second = [t["function"]["name"] for t in stub.requests[1]["tools"]]
    assert second[0] == "load_tools" and len(second) == 1 + 11 and "tool_03" in second and "tool_19" in second
    tool_msgs = await _tools(rt, result.thread_id)
    assert "Loaded: tool_03" in tool_msgs[0].content
    assert tool_msgs[1].content == "tool 3 got 7"
    stub.queue("again")
    await rt.send(result.thread_id, "next turn")
    carried = [t["function"]["name"] for t in stub.requests[-1]["tools"]]
    assert carried == ["load_tools", "tool_03"]


async def test_a_think_stream_split_across_chunks_goes_to_reasoning(stub, make_runtime):
    stub.queue(StubReply(text="<think>The user wants a greeting.</think>Hello!", chunk_size=3))
    rt = await make_runtime(AGENT, define_prompt(name="main", prompt="x"), stub_model(stub))
    sub = rt.subscribe(reasoning=True)
    result = await rt.run("helper", "hi")
    events = _drain(sub)
    text = "".join(e.data["delta"] for e in events if e.type == "message_chunk")
    thought = "".join(e.data["delta"] for e in events if e.type == "reasoning_chunk")
    assert text == "Hello!"
    assert thought == "The user wants a greeting."
    messages = await rt.store.list_messages(result.thread_id)
    assert messages[-1].content == "Hello!"
    assert messages[-1].reasoning == "The user wants a greeting."


def _drain(sub) -> list[Any]:
    out = []
    while not sub.queue.empty():
        out.append(sub.queue.get_nowait())
    return out


async def test_an_untitled_thread_is_named_by_a_side_task_after_its_first_turn(stub, make_runtime):
    def responder(body: dict[str, Any]) -> Any:
        if body["messages"][0]["content"].startswith("Write a title"):
            return StubReply(text='"Planning a trip to Kyoto"')
        return StubReply(text="Kyoto is lovely in autumn.")

    stub.responder = responder
    rt = await make_runtime(AGENT, define_prompt(name="main", prompt="x"), stub_model(stub), auto_titles=True)
    thread = await rt.create_thread("helper")
    sub = rt.subscribe(thread.id)
    await rt.send(thread.id, "Help me plan a trip to Kyoto")
    event = await sub.get(timeout=10)
    while event.type != "thread_updated":
        event = await sub.get(timeout=10)
    assert event.data["thread"]["title"] == "Planning a trip to Kyoto"
    assert (await rt.store.get_thread(thread.id)).title == "Planning a trip to Kyoto"
    await rt.send(thread.id, "And in spring?")
    assert sum(1 for b in stub.requests if b["messages"][0]["content"].startswith("Write a title")) == 1
