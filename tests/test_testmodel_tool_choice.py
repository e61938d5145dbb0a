"""The offline test model obeys ``tool_choice``: ``none`` makes no tool call, ``required`` at
least one, a named tool only that tool. Through the Python API (the provider, and a turn of a
runtime) and through the OpenAI door with the ``openai`` SDK, the agent's model being offline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from server_fixtures import LiveServer, serve_app, write_project
from standardagents import ModelDefinition, define_agent, define_model, define_prompt, define_tool
from standardagents.exceptions import ProviderError
from standardagents.providers import ModelRequest, TestModelProvider
from standardagents.records import ToolCall

WEATHER: Any = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
ADD: Any = {"type": "function", "function": {
    "name": "add", "description": "Add two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}
_ASK: Any = [{"role": "user", "content": "Weather in Paris?"}]


def _ask(tool_choice: Any, messages: list[dict[str, Any]] | None = None, system: str | None = None) -> ModelRequest:
    head = [{"role": "system", "content": system}] if system else []
    return ModelRequest(model="t", messages=[*head, *(messages or _ASK)], tools=[ADD, WEATHER], tool_choice=tool_choice)


def _after_results() -> list[dict[str, Any]]:
    """The question, the model's call of both tools, and both results."""
    calls = [ToolCall("c1", "add", '{"a": 1, "b": 2}').to_dict(), ToolCall("c2", "get_weather", '{"city": "x"}').to_dict()]
    return [*_ASK, {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": "c1", "content": "3"},
            {"role": "tool", "tool_call_id": "c2", "content": "sunny"}]


# the provider ---------------------------------------------------------------------------------
async def test_tool_choice_none_makes_no_tool_call() -> None:
    reply = await TestModelProvider().request(_ask("none"))
    assert (reply.tool_calls, reply.text, reply.finish_reason) == ([], "Test reply to: Weather in Paris?", "stop")


async def test_tool_choice_required_calls_the_tools_even_after_their_results() -> None:
    reply = await TestModelProvider().request(_ask("required", _after_results()))
    assert ([c.name for c in reply.tool_calls], reply.finish_reason) == (["add", "get_weather"], "tool_calls")


async def test_tool_choice_required_calls_a_tool_the_prompt_keeps_for_later() -> None:
    def ask(choice: Any) -> ModelRequest:
        return ModelRequest(model="t", messages=[{"role": "system", "content": "Call `add` at the end."}, *_ASK],
                            tools=[ADD], tool_choice=choice)

    # left to itself, the model keeps a tool named in backticks until it has replied once
    assert (await TestModelProvider().request(ask(None))).tool_calls == []
    reply = await TestModelProvider().request(ask("required"))
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("add", '{"a": 1, "b": 1}')]


async def test_tool_choice_naming_a_tool_calls_only_that_tool() -> None:
    reply = await TestModelProvider().request(_ask({"type": "function", "function": {"name": "get_weather"}}))
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("get_weather", '{"city": "Weather in Paris?"}')]
    flat = await TestModelProvider().request(_ask({"type": "function", "name": "add"}, _after_results()))
    assert [(c.name, c.arguments) for c in flat.tool_calls] == [("add", '{"a": 1, "b": 1}')]


async def test_tool_choice_naming_a_tool_not_offered_is_refused() -> None:
    with pytest.raises(ProviderError, match="'wipe', which the request does not offer") as caught:
        await TestModelProvider().request(_ask({"type": "function", "function": {"name": "wipe"}}))
    assert (caught.value.status, caught.value.retriable) == (400, False)


@define_tool
def add(a: int = 1, b: int = 2) -> str:
    """Add two integers."""
    return str(a + b)


def _offline() -> ModelDefinition:
    return define_model(name="default", provider="test", model="offline")


async def test_a_prompt_with_tool_choice_none_answers_without_calling_its_tool(make_runtime: Any) -> None:
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                            define_prompt(name="main", prompt="You add.", tools=["add"], tool_choice="none"),
                            add, _offline())
    result = await rt.run("helper", "add 1 and 2")
    assert result.text == "Test reply to: add 1 and 2 (as instructed: You add.)"
    assert [m.role for m in await rt.store.list_messages(result.thread_id)] == ["user", "assistant"]


# the OpenAI door ------------------------------------------------------------------------------
@pytest.fixture
def door(tmp_path: Path) -> Iterator[LiveServer]:
    """The server fixtures' project: agent ``helper`` with tool ``add`` on the offline model."""
    yield from serve_app(write_project(tmp_path / "project"), f"sqlite+aiosqlite:///{tmp_path / 'door.db'}")


def _client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key=server.token, max_retries=0)


def _messages(server: LiveServer, thread_id: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=server.base_url, headers=server.headers) as c:
        return list(c.get(f"/api/threads/{thread_id}/messages").json()["messages"])


def test_the_door_with_tool_choice_none_answers_without_a_tool_call(door: LiveServer) -> None:
    with _client(door) as client:
        raw = client.chat.completions.with_raw_response.create(model="helper", messages=_ASK, tools=[WEATHER],
                                                               tool_choice="none")
    reply = raw.parse().choices[0]
    assert (reply.finish_reason, reply.message.tool_calls) == ("stop", None)
    assert reply.message.content == "Test reply to: Weather in Paris? (as instructed: You add numbers.)"
    assert [m["role"] for m in _messages(door, raw.headers["x-thread-id"])] == ["user", "assistant"]


def test_the_door_with_tool_choice_naming_the_agents_tool_calls_only_that_tool(door: LiveServer) -> None:
    named: Any = {"type": "function", "function": {"name": "add"}}
    with _client(door) as client:
        raw = client.chat.completions.with_raw_response.create(model="helper", messages=_ASK, tools=[WEATHER],
                                                               tool_choice=named)
    reply = raw.parse().choices[0]
    # the client's get_weather was offered but not called: the turn ran add, then answered
    assert (reply.finish_reason, reply.message.tool_calls) == ("stop", None)
    assert reply.message.content == "Tool results: add -> 3"
    calls = [[c["function"]["name"] for c in m.get("tool_calls") or []]
             for m in _messages(door, raw.headers["x-thread-id"]) if m["role"] == "assistant"]
    assert calls == [["add"], []]


def test_the_door_with_tool_choice_required_calls_again_after_the_clients_result(door: LiveServer) -> None:
    with _client(door) as client:
        first = client.chat.completions.create(model="helper", messages=_ASK, tools=[WEATHER])
        (call,) = first.choices[0].message.tool_calls or []
        assert call.function.name == "get_weather"
        again = client.chat.completions.create(model="helper", tools=[WEATHER], tool_choice="required", messages=[
            *_ASK, first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"}])
    reply = again.choices[0]
    assert reply.finish_reason == "tool_calls"
    assert [c.function.name for c in reply.message.tool_calls or []] == ["get_weather"]
