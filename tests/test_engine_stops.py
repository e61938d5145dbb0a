"""The turn loop's stop conditions, over a real OpenAI wire stub."""

from __future__ import annotations

import json

import pytest

from engine_helpers import stub_model
from standardagents import define_agent, define_prompt, define_tool
from standardagents.testing.openai_stub import StubReply


@define_tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"facts about {topic}"


@define_tool
def finish(answer: str, confidence: float) -> dict:
    """Report the final answer."""
    return {"answer": answer, "confidence": confidence}


def prompt(**kw):
    return define_prompt(name="main", prompt="You help.", **kw)


@pytest.mark.parametrize("stream", [True, False])
async def test_text_reply_ends_the_turn_when_stop_on_response(stub, make_runtime, stream):
    stub.queue("Hello there, how can I help?")
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}), prompt(), stub_model(stub, stream=stream))
    result = await rt.run("helper", "hi")
    assert result.stop_reason == "complete"
    assert result.outcome == "response"
    assert result.text == "Hello there, how can I help?"
    messages = await rt.store.list_messages(result.thread_id)
    assert [(m.role, m.content) for m in messages] == [("user", "hi"), ("assistant", "Hello there, how can I help?")]
    assert messages[1].usage is not None and messages[1].usage.total_tokens > 0
    assert stub.requests[0]["messages"][0] == {"role": "system", "content": "You help."}
    assert stub.requests[0].get("stream", False) is stream


@pytest.mark.parametrize("stream", [True, False])
async def test_tool_call_runs_and_the_model_reads_its_result(stub, make_runtime, stream):
    stub.queue(StubReply(tool_calls=[("lookup", json.dumps({"topic": "tides"}))], chunk_size=3), "Tides follow the moon.")
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}), prompt(tools=["lookup"]), lookup,
                            stub_model(stub, stream=stream))
    result = await rt.run("helper", "tell me about tides")
    assert result.text == "Tides follow the moon."
    messages = await rt.store.list_messages(result.thread_id)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    call = messages[1].tool_calls[0]
    assert (call.name, json.loads(call.arguments)) == ("lookup", {"topic": "tides"})
    assert messages[2].content == "facts about tides" and messages[2].tool_call_id == call.id
    second = stub.requests[1]["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": call.id, "content": "facts about tides"}
    assert stub.requests[0]["tools"][0]["function"]["name"] == "lookup"
    rows = await rt.store.list_tool_results(result.thread_id)
    assert [(r["tool_name"], r["status"], r["result"]) for r in rows] == [("lookup", "success", "facts about tides")]


async def test_without_stop_on_response_the_side_keeps_going_until_max_steps(stub, make_runtime):
    stub.queue("one", "two", "three")
    agent = define_agent(name="helper", side_a={"prompt": "main", "stop_on_response": False, "max_steps": 3})
    rt = await make_runtime(agent, prompt(), stub_model(stub))
    result = await rt.run("helper", "go")
    assert result.stop_reason == "interrupted"
    assert result.outcome == "max_steps"
    assert len(stub.requests) == 3


async def test_stop_tool_ends_the_turn_and_extracts_the_property(stub, make_runtime):
    stub.queue(StubReply(tool_calls=[("finish", json.dumps({"answer": "42", "confidence": 0.9}))]))
    agent = define_agent(name="helper", side_a={"prompt": "main", "stopTool": "finish", "stopToolResponseProperty": "answer"})
    rt = await make_runtime(agent, prompt(tools=["finish"]), finish, stub_model(stub))
    result = await rt.run("helper", "what is the answer?")
    assert result.outcome == "stop_tool"
    assert result.value == "42"
    assert len(stub.requests) == 1


async def test_session_stop_maps_message_and_attachments(stub, make_runtime):
    stub.queue(StubReply(tool_calls=[("wrap_up", json.dumps({"summary": "all done", "files": ["report.md"]}))]))
    agent = define_agent(name="helper", side_a={"prompt": "main", "sessionStop": {
        "name": "wrap_up", "messageProperty": "summary", "attachmentsProperty": "files"}})
    rt = await make_runtime(agent, prompt(tools=["wrap_up"]), stub_model(stub))
    result = await rt.run("helper", "finish up")
    assert result.outcome == "session_stop"
    assert result.stopped_by == "a"
    assert result.payload["message"] == "all done"
    assert result.payload["attachments"] == ["report.md"]
    offered = stub.requests[0]["tools"][0]["function"]
    assert offered["name"] == "wrap_up" and set(offered["parameters"]["properties"]) == {"summary", "files"}


async def test_session_fail_as_a_plain_name_ends_the_session_failed(stub, make_runtime):
    stub.queue(StubReply(tool_calls=[("give_up", "{}")]))
    agent = define_agent(name="helper", side_a={"prompt": "main", "sessionFail": "give_up"})
    rt = await make_runtime(agent, prompt(tools=["give_up"]), stub_model(stub))
    result = await rt.run("helper", "impossible task")
    assert result.outcome == "session_fail"
    assert result.stop_reason == "complete"


async def test_max_steps_interrupts_a_tool_loop(stub, make_runtime):
    stub.queue(*[StubReply(tool_calls=[("lookup", '{"topic": "x"}')]) for _ in range(5)])
    agent = define_agent(name="helper", side_a={"prompt": "main", "max_steps": 2})
    rt = await make_runtime(agent, prompt(tools=["lookup"]), lookup, stub_model(stub))
    result = await rt.run("helper", "loop")
    assert (result.stop_reason, result.outcome) == ("interrupted", "max_steps")
    assert len(stub.requests) == 2
    messages = await rt.store.list_messages(result.thread_id)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
