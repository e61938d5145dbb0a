"""dual_ai conversations: sides take turns, each sees its own perspective, and the session
ends by its turn limit or a side's sessionStop, without a person in the loop."""

from __future__ import annotations

import json
from typing import Any

from engine_helpers import stub_model
from standardagents import define_agent, define_hook, define_prompt, define_tool
from standardagents.testing.openai_stub import StubReply

PRO = "You argue FOR the motion."
CON = "You argue AGAINST the motion."


def side_of(body: dict[str, Any]) -> str:
    """Which side a request came from, read from its system prompt."""
    system = body["messages"][0]["content"]
    return "a" if system == PRO else "b"


def turn_of(body: dict[str, Any]) -> int:
    """How many spoken replies this side already gave (its own assistant text messages)."""
    return sum(1 for m in body["messages"] if m["role"] == "assistant" and m.get("content"))


def prompts(a_tools: list[str] | None = None, b_tools: list[str] | None = None) -> list[Any]:
    return [define_prompt(name="pro", prompt=PRO, tools=a_tools or []),
            define_prompt(name="con", prompt=CON, tools=b_tools or [])]


def debate(**kw: Any) -> Any:
    sides = {"side_a": {"label": "Pro", "prompt": "pro"}, "side_b": {"label": "Con", "prompt": "con"}}
    sides.update(kw.pop("sides", {}))
    return define_agent(name="debate", type="dual_ai", **sides, **kw)


@define_tool
def conclude(verdict: str) -> str:
    """End the debate with a verdict.

    Args:
        verdict: The final verdict.
    """
    return "concluded"


@define_tool
def cite(source: str) -> str:
    """Cite a source.

    Args:
        source: The source to cite.
    """
    return f"cited {source}"


@define_tool
def keep_floor(state: Any) -> str:
    """Speak again on the next turn."""
    state.execution.force_side("a")
    return "you keep the floor"


def talker(body: dict[str, Any]) -> StubReply:
    side = side_of(body)
    return StubReply(text=f"{side}{turn_of(body) + 1}")


async def test_debate_ends_after_max_session_turns(stub, make_runtime):
    stub.responder = talker
    rt = await make_runtime(debate(max_session_turns=4), *prompts(), stub_model(stub))
    result = await rt.run("debate", "Tabs or spaces?")
    assert result.stop_reason == "complete"
    assert result.outcome == "max_session_turns"
    assert [side_of(b) for b in stub.requests] == ["a", "b", "a", "b"]
    messages = await rt.store.list_messages(result.thread_id)
    assert [(m.role, m.side, m.content) for m in messages[1:]] == [
        ("assistant", "a", "a1"), ("assistant", "b", "b1"), ("assistant", "a", "a2"), ("assistant", "b", "b2")]


async def test_a_sides_session_stop_ends_the_debate_and_names_that_side(stub, make_runtime):
    def respond(body: dict[str, Any]) -> StubReply:
        if side_of(body) == "b" and turn_of(body) == 1:
            return StubReply(tool_calls=[("conclude", json.dumps({"verdict": "spaces win"}))])
        return talker(body)

    stub.responder = respond
    agent = debate(max_session_turns=10,
                   sides={"side_b": {"prompt": "con", "session_stop": {"name": "conclude", "message_property": "verdict"}}})
    rt = await make_runtime(agent, *prompts(b_tools=["conclude"]), conclude, stub_model(stub))
    result = await rt.run("debate", "Tabs or spaces?")
    assert result.outcome == "session_stop"
    assert result.stopped_by == "b"
    assert result.payload is not None and result.payload["message"] == "spaces win"
    assert [side_of(b) for b in stub.requests] == ["a", "b", "a", "b"]
    record = await rt.store.get_execution(result.execution_id)
    assert record is not None and record.stopped_by == "b"


async def test_each_side_sees_its_own_replies_as_assistant_and_the_others_as_user(stub, make_runtime):
    stub.responder = talker
    rt = await make_runtime(debate(max_session_turns=3), *prompts(a_tools=["cite"]), cite, stub_model(stub))
    await rt.run("debate", "Tabs or spaces?")
    first_b, second_a = stub.requests[1], stub.requests[2]
    assert first_b["messages"] == [{"role": "system", "content": CON},
                                   {"role": "user", "content": "Tabs or spaces?"}, {"role": "user", "content": "a1"}]
    assert second_a["messages"] == [{"role": "system", "content": PRO}, {"role": "user", "content": "Tabs or spaces?"},
                                    {"role": "assistant", "content": "a1"}, {"role": "user", "content": "b1"}]


async def test_each_side_is_offered_only_its_own_tools(stub, make_runtime):
    stub.responder = talker
    rt = await make_runtime(debate(max_session_turns=2), *prompts(a_tools=["cite"], b_tools=["conclude"]), cite, conclude,
                            stub_model(stub))
    await rt.run("debate", "Tabs or spaces?")
    offered = [[t["function"]["name"] for t in b.get("tools", [])] for b in stub.requests]
    assert offered == [["cite"], ["conclude"]]


async def test_the_other_sides_tool_traffic_is_hidden(stub, make_runtime):
    def respond(body: dict[str, Any]) -> StubReply:
        if side_of(body) == "a" and not any(m["role"] == "tool" for m in body["messages"]):
            return StubReply(tool_calls=[("cite", json.dumps({"source": "PEP 8"}))])
        return talker(body)

    stub.responder = respond
    rt = await make_runtime(debate(max_session_turns=2), *prompts(a_tools=["cite"]), cite, stub_model(stub))
    await rt.run("debate", "Tabs or spaces?")
    a_second, b_first = stub.requests[1], stub.requests[2]
    assert [m["role"] for m in a_second["messages"]] == ["system", "user", "assistant", "tool"]
    assert b_first["messages"][1:] == [{"role": "user", "content": "Tabs or spaces?"}, {"role": "user", "content": "a1"}]


async def test_force_side_from_a_tool_chooses_the_next_side(stub, make_runtime):
    def respond(body: dict[str, Any]) -> StubReply:
        if side_of(body) == "a" and not any(m["role"] == "tool" for m in body["messages"]):
            return StubReply(tool_calls=[("keep_floor", "{}")])
        return talker(body)

    stub.responder = respond
    rt = await make_runtime(debate(max_session_turns=3), *prompts(a_tools=["keep_floor"]), keep_floor, stub_model(stub))
    result = await rt.run("debate", "Tabs or spaces?")
    turns = [m.side for m in await rt.store.list_messages(result.thread_id) if m.role == "assistant" and m.content]
    assert turns == ["a", "a", "b"]


async def test_force_side_from_a_hook_chooses_the_next_side(stub, make_runtime):
    @define_hook("after_create_message", id="b_answers_twice")
    async def b_answers_twice(state: Any, message: Any) -> None:
        if message.role == "assistant" and message.side == "b" and message.content == "b1":
            state.execution.force_side("b")

    stub.responder = talker
    rt = await make_runtime(debate(max_session_turns=4, hooks=["b_answers_twice"]), *prompts(), b_answers_twice,
                            stub_model(stub))
    result = await rt.run("debate", "Tabs or spaces?")
    turns = [m.content for m in await rt.store.list_messages(result.thread_id) if m.role == "assistant"]
    assert turns == ["a1", "b1", "b2", "a2"]


async def test_a_debate_started_with_an_opening_message_needs_no_person(stub, make_runtime):
    stub.responder = talker
    rt = await make_runtime(debate(max_session_turns=6), *prompts(), stub_model(stub))
    result = await rt.run("debate", "Tabs or spaces?")
    messages = await rt.store.list_messages(result.thread_id)
    assert [m.role for m in messages].count("user") == 1
    assert len(stub.requests) == 6
    assert not rt.is_running(result.thread_id)


@define_tool
def yield_floor(summary: str) -> str:
    """Hand the floor to the other side.

    Args:
        summary: What this side concluded.
    """
    return json.dumps({"summary": summary})


async def test_a_side_without_stop_on_response_keeps_the_floor_until_its_stop_tool(stub, make_runtime):
    def respond(body: dict[str, Any]) -> StubReply:
        if side_of(body) == "a" and turn_of(body) == 2:
            return StubReply(tool_calls=[("yield_floor", json.dumps({"summary": "two points made"}))])
        return talker(body)

    stub.responder = respond
    agent = debate(max_session_turns=2, sides={"side_a": {
        "prompt": "pro", "stop_on_response": False, "stop_tool": "yield_floor",
        "stop_tool_response_property": "summary", "max_steps": 5}})
    rt = await make_runtime(agent, *prompts(a_tools=["yield_floor"]), yield_floor, stub_model(stub))
    result = await rt.run("debate", "Tabs or spaces?")
    assert result.stop_reason == "complete"
    assert result.outcome == "max_session_turns"
    assert result.value == "two points made"
    assert [side_of(b) for b in stub.requests] == ["a", "a", "a", "b"]
    spoken = [(m.side, m.content) for m in await rt.store.list_messages(result.thread_id)
              if m.role == "assistant" and m.content]
    assert spoken == [("a", "a1"), ("a", "a2"), ("b", "b1")]


async def test_a_side_without_stop_on_response_or_stop_tool_is_bounded_by_max_steps(stub, make_runtime):
    stub.responder = talker
    agent = debate(max_session_turns=4, sides={"side_a": {"prompt": "pro", "stop_on_response": False, "max_steps": 3}})
    rt = await make_runtime(agent, *prompts(), stub_model(stub))
    result = await rt.run("debate", "Tabs or spaces?")
    assert result.outcome == "max_steps"
    assert result.stopped_by == "a"
    assert [side_of(b) for b in stub.requests] == ["a", "a", "a"]


async def test_a_session_tool_ends_a_side_that_keeps_the_floor(stub, make_runtime):
    def respond(body: dict[str, Any]) -> StubReply:
        if side_of(body) == "a" and turn_of(body) == 1:
            return StubReply(tool_calls=[("conclude", json.dumps({"verdict": "tabs"}))])
        return talker(body)

    stub.responder = respond
    agent = debate(max_session_turns=4, sides={"side_a": {
        "prompt": "pro", "stop_on_response": False, "session_stop": {"name": "conclude", "message_property": "verdict"}}})
    rt = await make_runtime(agent, *prompts(a_tools=["conclude"]), conclude, stub_model(stub))
    result = await rt.run("debate", "Tabs or spaces?")
    assert (result.outcome, result.stopped_by) == ("session_stop", "a")
    assert result.payload is not None and result.payload["message"] == "tabs"
    assert [side_of(b) for b in stub.requests] == ["a", "a"]
