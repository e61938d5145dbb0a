"""Agent frameworks as clients of the OpenAI door: the OpenAI Agents SDK (through its
Chat Completions model) and ``langchain-openai`` hold a multi-turn conversation with an agent
whose model is the OpenAI stub, and raise when the agent's model is down. With client tools:
the Agents SDK runs its ``@function_tool`` while the agent's turn waits and gets a typed
``output_type`` answer (Chat Completions and Responses models); langchain's ``bind_tools``
gets the call back (streamed too) and ``with_structured_output`` a typed value."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pydantic
import pytest

from server_fixtures import LiveServer, serve_app, write_project
from standardagents.testing import OpenAIStub, StubReply

agents = pytest.importorskip("agents")
langchain_openai = pytest.importorskip("langchain_openai")
lc_messages = pytest.importorskip("langchain_core.messages")


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as s:
        yield s


@pytest.fixture
def door(stub: OpenAIStub, tmp_path: Path) -> Iterator[LiveServer]:
    project = write_project(tmp_path / "project", {
        "agents/models/default.py": f"""
            from standardagents import define_model
            default = define_model(name="default", provider="openai", model="stub-model",
                                   base_url="{stub.base_url}", max_retries=0)
        """,
        "agents/models/down.py": """
            from standardagents import define_model
            down = define_model(name="down", provider="openai", model="m", base_url="http://127.0.0.1:9/v1",
                                max_retries=0)
        """,
        "agents/agents/offline.py": """
            from standardagents import define_agent
            offline = define_agent(name="offline", type="ai_human",
                                   side_a={"prompt": "down_prompt", "stop_on_response": True})
        """,
        "agents/prompts/down_prompt.py": """
            from standardagents import define_prompt
            down_prompt = define_prompt(name="down_prompt", prompt="x", model="down")
        """,
    })
    yield from serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'door.db'}")


def _user_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user" and isinstance(m["content"], str)]


def _agents_sdk_agent(client: openai.AsyncOpenAI, model: str) -> Any:
    agents.set_tracing_disabled(True)
    return agents.Agent(name="client", instructions="Be brief.",
                        model=agents.OpenAIChatCompletionsModel(model=model, openai_client=client))


def _client(server: LiveServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key=server.token, max_retries=0)


async def test_the_agents_sdk_holds_a_multi_turn_conversation(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue("Hello Ada.", "You are Ada.")
    async with _client(door) as client:
        agent = _agents_sdk_agent(client, "helper")
        first = await agents.Runner.run(agent, "My name is Ada.")
        assert first.final_output == "Hello Ada."
        second = await agents.Runner.run(agent, [*first.to_input_list(), {"role": "user", "content": "What is my name?"}])
    assert second.final_output == "You are Ada."
    assert _user_texts(stub.requests[-1]) == ["My name is Ada.", "What is my name?"]
    assert any(m["role"] == "system" and m["content"] == "Be brief." for m in stub.requests[-1]["messages"])


async def test_the_agents_sdk_raises_when_the_agents_model_is_down(door: LiveServer) -> None:
    async with _client(door) as client:
        with pytest.raises(openai.InternalServerError, match="connection"):
            await agents.Runner.run(_agents_sdk_agent(client, "offline"), "hi")


def _chat(server: LiveServer, model: str) -> Any:
    return langchain_openai.ChatOpenAI(model=model, base_url=f"{server.base_url}/v1", api_key=server.token,
                                       max_retries=0)


def test_langchain_holds_a_multi_turn_conversation_streamed_or_not(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue("Hello Ada.", "You are Ada, as you said.")
    chat = _chat(door, "helper")
    history: list[tuple[str, str]] = [("system", "Be brief."), ("human", "My name is Ada.")]
    reply = chat.invoke(history)
    assert reply.content == "Hello Ada."
    history += [("ai", str(reply.content)), ("human", "What is my name?")]
    pieces = [str(chunk.content) for chunk in chat.stream(history)]
    assert "".join(pieces) == "You are Ada, as you said."
    assert len([p for p in pieces if p]) > 1
    assert _user_texts(stub.requests[-1]) == ["My name is Ada.", "What is my name?"]


def test_langchain_raises_when_the_agents_model_is_down(door: LiveServer) -> None:
    chat = _chat(door, "offline")
    with pytest.raises(openai.InternalServerError, match="connection"):
        chat.invoke("hi")
    with pytest.raises(openai.InternalServerError, match="connection"):
        list(chat.stream("hi"))


async def test_the_agents_sdk_default_responses_model_holds_a_conversation(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue("Hello Ada.", "You are Ada.")
    async with _client(door) as client:
        agents.set_tracing_disabled(True)
        agent = agents.Agent(name="client", instructions="Be brief.",
                             model=agents.OpenAIResponsesModel(model="helper", openai_client=client))
        first = await agents.Runner.run(agent, "My name is Ada.")
        assert first.final_output == "Hello Ada."
        second = await agents.Runner.run(agent, [*first.to_input_list(), {"role": "user", "content": "What is my name?"}])
        assert second.final_output == "You are Ada."
        with pytest.raises(openai.InternalServerError, match="connection"):
            await agents.Runner.run(agents.Agent(name="down", model=agents.OpenAIResponsesModel(
                model="offline", openai_client=client)), "hi")
    assert _user_texts(stub.requests[-1]) == ["My name is Ada.", "What is my name?"]


# client tools: the framework runs its own tools, the agent's turn waits for their results -------

class Weather(pydantic.BaseModel):
    city: str
    celsius: int


_WEATHER_JSON = '{"city": "Paris", "celsius": 21}'
_weather_calls: list[str] = []


@agents.function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    _weather_calls.append(city)
    return f"21C and sunny in {city}"


def _client_tool_agent(model: Any) -> Any:
    agents.set_tracing_disabled(True)
    return agents.Agent(name="client", instructions="Be brief.", tools=[get_weather], output_type=Weather, model=model)


@pytest.mark.parametrize("kind", ["chat", "responses"])
async def test_the_agents_sdk_runs_its_function_tool_and_gets_a_typed_answer(door: LiveServer, stub: OpenAIStub,
                                                                             kind: str) -> None:
    _weather_calls.clear()
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city":"Paris"}')]), _WEATHER_JSON)
    async with _client(door) as client:
        model = agents.OpenAIChatCompletionsModel(model="helper", openai_client=client) if kind == "chat" \
            else agents.OpenAIResponsesModel(model="helper", openai_client=client)
        result = await agents.Runner.run(_client_tool_agent(model), "Weather in Paris?")
    assert result.final_output == Weather(city="Paris", celsius=21)
    assert _weather_calls == ["Paris"]
    first, second = stub.requests
    assert "get_weather" in [t["function"]["name"] for t in first["tools"]]
    assert first["response_format"]["type"] == "json_schema"
    tool_results = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_results] == ["21C and sunny in Paris"]


_WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def test_langchain_bind_tools_gets_the_tool_call_back_and_answers_with_its_result(door: LiveServer,
                                                                                   stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city":"Paris"}')]), "Sunny in Paris.")
    chat = _chat(door, "helper").bind_tools([_WEATHER_TOOL])
    question = lc_messages.HumanMessage("Weather in Paris?")
    reply = chat.invoke([question])
    (call,) = reply.tool_calls
    assert (call["name"], call["args"]) == ("get_weather", {"city": "Paris"})
    result = lc_messages.ToolMessage("sunny", tool_call_id=call["id"])
    answer = chat.invoke([question, reply, result])
    assert answer.content == "Sunny in Paris."


def test_langchain_streams_a_tool_call(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("get_weather", '{"city":"Oslo"}')]))
    chat = _chat(door, "helper").bind_tools([_WEATHER_TOOL])
    chunks = list(chat.stream("Weather in Oslo?"))
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [("get_weather", {"city": "Oslo"})]


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_langchain_with_structured_output(door: LiveServer, stub: OpenAIStub, method: str) -> None:
    if method == "json_schema":
        stub.queue(_WEATHER_JSON)
    else:
        stub.queue(StubReply(tool_calls=[("Weather", _WEATHER_JSON)]))
    structured = _chat(door, "helper").with_structured_output(Weather, method=method)  # type: ignore[arg-type]
    assert structured.invoke("Weather in Paris?") == Weather(city="Paris", celsius=21)
