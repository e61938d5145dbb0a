"""Client tools through the OpenAI door, with the official ``openai`` SDK: tools the request
declares are offered to the agent's model beside its own; a call of one ends the response
with ``tool_calls`` while the turn waits durably (across a restart); the client's results
continue the same turn."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from server_fixtures import LiveServer, serve_app, write_project
from standardagents.testing import OpenAIStub, StubReply

WEATHER: Any = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
_ASK: Any = [{"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as s:
        yield s


def _project(tmp_path: Path, stub: OpenAIStub) -> Path:
    return write_project(tmp_path / "project", {"agents/models/default.py": f"""
        from standardagents import define_model
        default = define_model(name="default", provider="openai", model="stub-model",
                               base_url="{stub.base_url}", max_retries=0)
    """})


@pytest.fixture
def door(stub: OpenAIStub, tmp_path: Path) -> Iterator[LiveServer]:
    yield from serve_app(_project(tmp_path, stub), f"sqlite+aiosqlite:///{tmp_path / 'door.db'}")


def _sync(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key=server.token, max_retries=0)


def _async(server: LiveServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key=server.token, max_retries=0)


def _api(server: LiveServer, path: str) -> Any:
    with httpx.Client(base_url=server.base_url, headers=server.headers) as c:
        return c.get(path).json()


def _offered(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def _answer(call: Any, result: str) -> list[Any]:
    """The conversation a client sends back: the question, the call, its result."""
    return [*_ASK, {"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": call.function.name,
                                                         "arguments": call.function.arguments}}]},
            {"role": "tool", "tool_call_id": call.id, "content": result}]


def test_a_client_tool_call_ends_the_response_and_its_result_continues_the_same_turn(
        door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city":"Paris"}')]), "Sunny in Paris.")
    with _sync(door) as client:
        first = client.chat.completions.with_raw_response.create(model="helper", messages=_ASK, tools=[WEATHER])
        reply = first.parse()
        assert reply.choices[0].finish_reason == "tool_calls"
        (call,) = reply.choices[0].message.tool_calls or []
        assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
        assert _offered(stub.requests[0]) == ["add", "get_weather"]
        # no thread named: the pending call's id finds the turn (the conversation as the docs build it)
        second = client.chat.completions.with_raw_response.create(model="helper", tools=[WEATHER], messages=[
            *_ASK, reply.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"}])
    assert second.parse().choices[0].message.content == "Sunny in Paris."
    assert second.parse().choices[0].finish_reason == "stop"
    thread_id = first.headers["x-thread-id"]
    assert second.headers["x-thread-id"] == thread_id
    assert stub.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": call.id, "content": "sunny"}
    executions = _api(door, f"/api/threads/{thread_id}/executions")["executions"]
    assert [(e["status"], e["stopReason"]) for e in executions] == [("complete", "complete")]
    roles = [m["role"] for m in _api(door, f"/api/threads/{thread_id}/messages")["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_streamed_tool_calls_come_as_deltas_and_the_resumed_turn_streams(door: LiveServer,
                                                                               stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city":"Paris"}')]), StubReply(text="Sunny in Paris."))
    async with _async(door) as client:
        stream = await client.chat.completions.create(model="helper", messages=_ASK, tools=[WEATHER], stream=True)
        chunks = [c async for c in stream]
        deltas = [d for c in chunks for d in c.choices[0].delta.tool_calls or []]
        assert deltas[0].index == 0 and deltas[0].id and deltas[0].type == "function"
        assert deltas[0].function is not None and deltas[0].function.name == "get_weather"
        assert "".join(d.function.arguments or "" for d in deltas if d.function) == '{"city":"Paris"}'
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
        call = type("Call", (), {"id": deltas[0].id, "function": type("F", (), {
            "name": "get_weather", "arguments": '{"city":"Paris"}'})})
        again = await client.chat.completions.create(model="helper", messages=_answer(call, "sunny"),
                                                     tools=[WEATHER], stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in again if c.choices])
    assert text == "Sunny in Paris."


def test_the_agents_own_calls_in_the_same_reply_run_on_the_server(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("add", '{"a":2,"b":3}'), ("get_weather", '{"city":"Oslo"}')]), "Done.")
    with _sync(door) as client:
        reply = client.chat.completions.create(model="helper", messages=_ASK, tools=[WEATHER])
        (call,) = reply.choices[0].message.tool_calls or []
        assert call.function.name == "get_weather"
        done = client.chat.completions.create(model="helper", messages=_answer(call, "cold"), tools=[WEATHER])
    assert done.choices[0].message.content == "Done."
    tools = {m["tool_call_id"]: m["content"] for m in stub.requests[1]["messages"] if m["role"] == "tool"}
    assert tools == {call.id: "cold", next(k for k in tools if k != call.id): "5"}


@pytest.mark.parametrize("choice", ["required", "none", {"type": "function", "function": {"name": "get_weather"}}])
async def test_tool_choice_reaches_the_first_model_request(door: LiveServer, stub: OpenAIStub, choice: Any) -> None:
    stub.queue("ok")
    async with _async(door) as client:
        await client.chat.completions.create(model="helper", messages=_ASK, tools=[WEATHER], tool_choice=choice,
                                             parallel_tool_calls=False)
    assert stub.requests[0]["tool_choice"] == choice
    assert stub.requests[0]["parallel_tool_calls"] is False


def test_a_client_tool_named_like_an_agent_tool_is_a_400(door: LiveServer, stub: OpenAIStub) -> None:
    clash: Any = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    with _sync(door) as client, pytest.raises(openai.BadRequestError, match="add") as caught:
        client.chat.completions.create(model="helper", messages=_ASK, tools=[clash])
    assert caught.value.param == "tools"
    assert stub.requests == []
    assert _api(door, "/api/threads")["threads"] == []


def test_results_missing_a_pending_call_are_a_400(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city":"A"}'), ("get_weather", '{"city":"B"}')]))
    with _sync(door) as client:
        first, _second = client.chat.completions.create(model="helper", messages=_ASK, tools=[WEATHER]) \
            .choices[0].message.tool_calls or []
        with pytest.raises(openai.BadRequestError, match="missing"):
            client.chat.completions.create(model="helper", messages=_answer(first, "warm"), tools=[WEATHER])


def test_a_new_user_message_instead_of_the_results_lets_the_wait_lapse(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city":"Paris"}')]), "Fine, Rome then.")
    with _sync(door) as client:
        first = client.chat.completions.with_raw_response.create(model="helper", messages=_ASK, tools=[WEATHER])
        thread_id = first.headers["x-thread-id"]
        (call,) = first.parse().choices[0].message.tool_calls or []
        reply = client.chat.completions.create(model="helper", extra_headers={"X-Thread-Id": thread_id}, messages=[
            *_answer(call, "unknown"), {"role": "user", "content": "Never mind: Rome?"}])
    assert reply.choices[0].message.content == "Fine, Rome then."
    executions = _api(door, f"/api/threads/{thread_id}/executions")["executions"]
    assert sorted(e["status"] for e in executions) == ["cancelled", "complete"]


def _indexed_calls(tmp_path: Path) -> list[str]:
    """The call ids the store's client-call index holds (read from the server's database)."""
    with sqlite3.connect(tmp_path / "door.db") as db:
        rows = db.execute("SELECT key FROM env_values WHERE scope = 'system' AND scope_id = 'client_tool_calls'")
        return [key for (key,) in rows]


def test_deleting_a_thread_waiting_for_client_results_drops_its_call_index(door: LiveServer, stub: OpenAIStub,
                                                                          tmp_path: Path) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city":"Paris"}')]))
    with _sync(door) as client:
        first = client.chat.completions.with_raw_response.create(model="helper", messages=_ASK, tools=[WEATHER])
        thread_id = first.headers["x-thread-id"]
        (call,) = first.parse().choices[0].message.tool_calls or []
    assert _indexed_calls(tmp_path) == [call.id]
    with httpx.Client(base_url=door.base_url, headers=door.headers) as c:
        assert c.delete(f"/api/threads/{thread_id}").status_code == 204
    assert _indexed_calls(tmp_path) == []
    # the answer to a call of the deleted thread finds no turn: a new conversation starts
    stub.queue("No idea.")
    with _sync(door) as client:
        reply = client.chat.completions.create(model="helper", messages=_answer(call, "sunny"))
    assert reply.choices[0].message.content == "No idea."


@pytest.mark.parametrize("door_kind", ["chat", "responses"])
def test_the_wait_survives_a_restart(stub: OpenAIStub, tmp_path: Path, door_kind: str) -> None:
    project = _project(tmp_path, stub)
    url = f"sqlite+aiosqlite:///{tmp_path / 'door.db'}"
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city":"Paris"}')]), "Sunny after a restart.")
    before = serve_app(project, url)
    server = next(before)
    with _sync(server) as client:
        if door_kind == "chat":
            call = (client.chat.completions.create(model="helper", messages=_ASK, tools=[WEATHER])
                    .choices[0].message.tool_calls or [])[0]
        else:
            first = client.responses.create(model="helper", input="Weather in Paris?", tools=[RESPONSES_WEATHER])
            (item,) = [i for i in first.output if i.type == "function_call"]
    before.close()
    after = serve_app(project, url)
    restarted = next(after)
    try:
        # the first server's token: the caller is the same user, its thread still its own
        same_user = LiveServer(restarted.base_url, server.token, server.user_id)
        with _sync(same_user) as client:
            if door_kind == "chat":
                text = client.chat.completions.create(model="helper", messages=_answer(call, "sunny"),
                                                      tools=[WEATHER]).choices[0].message.content
            else:
                text = client.responses.create(model="helper", previous_response_id=first.id, input=[
                    {"type": "function_call_output", "call_id": item.call_id, "output": "sunny"}]).output_text
        assert text == "Sunny after a restart."
    finally:
        after.close()


# the Responses API -------------------------------------------------------------------------

RESPONSES_WEATHER: Any = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
                          "parameters": WEATHER["function"]["parameters"], "strict": False}


def test_a_response_carries_function_calls_and_their_outputs_continue_the_turn(door: LiveServer,
                                                                               stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city":"Paris"}')]), "Sunny in Paris.")
    with _sync(door) as client:
        first = client.responses.create(model="helper", input="Weather in Paris?", tools=[RESPONSES_WEATHER])
        assert first.status == "completed"
        (call,) = [item for item in first.output if item.type == "function_call"]
        assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
        assert _offered(stub.requests[0]) == ["add", "get_weather"]
        second = client.responses.create(model="helper", previous_response_id=first.id, tools=[RESPONSES_WEATHER],
                                         input=[{"type": "function_call_output", "call_id": call.call_id,
                                                 "output": "sunny"}])
    assert second.output_text == "Sunny in Paris."
    assert stub.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": call.call_id, "content": "sunny"}
    assert getattr(second, "thread", None) == getattr(first, "thread", None)
    thread_id = getattr(first, "thread", None)
    executions = _api(door, f"/api/threads/{thread_id}/executions")["executions"]
    assert [e["status"] for e in executions] == ["complete"]


async def test_streamed_function_calls_send_their_events(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city":"Oslo"}')]), StubReply(text="Cold in Oslo."))
    async with _async(door) as client:
        stream = await client.responses.create(model="helper", input="Weather in Oslo?", tools=[RESPONSES_WEATHER],
                                               stream=True)
        events = [e async for e in stream]
        types = [e.type for e in events]
        assert types[:2] == ["response.created", "response.in_progress"]
        assert types[2:7] == ["response.output_item.added", "response.function_call_arguments.delta",
                              "response.function_call_arguments.done", "response.output_item.done",
                              "response.completed"]
        final = events[-1].response  # type: ignore[union-attr]
        assert final.status == "completed"
        (call,) = final.output
        assert call.type == "function_call" and call.arguments == '{"city":"Oslo"}'
        # no previous_response_id: the pending call's id finds the turn
        again = await client.responses.create(model="helper", tools=[RESPONSES_WEATHER], stream=True, input=[
            {"role": "user", "content": "Weather in Oslo?"},
            {"type": "function_call", "call_id": call.call_id, "name": "get_weather", "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "cold"}])
        text = "".join([e.delta async for e in again if e.type == "response.output_text.delta"])  # type: ignore[union-attr]
    assert text == "Cold in Oslo."


@pytest.mark.parametrize(("choice", "sent"), [
    ("required", "required"), ("none", "none"),
    ({"type": "function", "name": "get_weather"}, {"type": "function", "function": {"name": "get_weather"}})])
def test_a_responses_tool_choice_reaches_the_model(door: LiveServer, stub: OpenAIStub, choice: Any,
                                                   sent: Any) -> None:
    stub.queue("ok")
    with _sync(door) as client:
        client.responses.create(model="helper", input="hi", tools=[RESPONSES_WEATHER], tool_choice=choice)
    assert stub.requests[0]["tool_choice"] == sent


def test_a_responses_client_tool_named_like_an_agent_tool_is_a_400(door: LiveServer, stub: OpenAIStub) -> None:
    with _sync(door) as client, pytest.raises(openai.BadRequestError, match="add") as caught:
        client.responses.create(model="helper", input="hi", tools=[{**RESPONSES_WEATHER, "name": "add"}])
    assert caught.value.param == "tools"
    assert stub.requests == []


@pytest.mark.parametrize("stream", [False, True])
async def test_text_format_asks_for_a_typed_answer(door: LiveServer, stub: OpenAIStub, stream: bool) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
              "required": ["city", "celsius"], "additionalProperties": False}
    stub.queue('{"city": "Paris", "celsius": 21}')
    fmt: Any = {"format": {"type": "json_schema", "name": "weather", "schema": schema, "strict": True}}
    async with _async(door) as client:
        if stream:
            events = [e async for e in await client.responses.create(model="helper", input="hi", text=fmt,
                                                                      stream=True)]
            response = events[-1].response  # type: ignore[union-attr]
        else:
            response = await client.responses.create(model="helper", input="hi", text=fmt)
    assert json.loads(response.output_text) == {"city": "Paris", "celsius": 21}
    assert stub.requests[0]["response_format"]["json_schema"]["schema"]["required"] == ["city", "celsius"]


def test_text_format_json_object_asks_for_an_object(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue('{"ok": true}')
    with _sync(door) as client:
        response = client.responses.create(model="helper", input="hi", text={"format": {"type": "json_object"}})
    assert json.loads(response.output_text) == {"ok": True}
    assert stub.requests[0].get("response_format") is not None


def test_another_user_cannot_continue_a_waiting_turn(door: LiveServer, stub: OpenAIStub, tmp_path: Path) -> None:
    from standardagents.store import open_store

    async def plain_user() -> str:
        store = open_store(f"sqlite+aiosqlite:///{tmp_path / 'door.db'}")
        await store.open()
        try:
            user = await store.create_user("mallory")
            return (await store.create_api_token(user.id, "tests"))[1]
        finally:
            await store.close()

    stub.queue(StubReply(tool_calls=[("get_weather", '{"city":"Paris"}')]), "Sunny in Paris.")
    with _sync(door) as client:
        (call,) = client.chat.completions.create(model="helper", messages=_ASK, tools=[WEATHER]) \
            .choices[0].message.tool_calls or []
    with _sync(LiveServer(door.base_url, asyncio.run(plain_user()), "")) as mallory, \
            pytest.raises((openai.PermissionDeniedError, openai.NotFoundError)):
        mallory.chat.completions.create(model="helper", messages=_answer(call, "stolen"), tools=[WEATHER])
    assert len(stub.requests) == 1
    with _sync(door) as client:
        reply = client.chat.completions.create(model="helper", messages=_answer(call, "sunny"), tools=[WEATHER])
    assert reply.choices[0].message.content == "Sunny in Paris."
