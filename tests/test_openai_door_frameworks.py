"""Agent frameworks as clients of the OpenAI door: the OpenAI Agents SDK (through its
Chat Completions model) and ``langchain-openai`` hold a multi-turn conversation with an agent
whose model is the OpenAI stub, and raise when the agent's model is down."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from server_fixtures import LiveServer, serve_app, write_project
from standardagents.testing import OpenAIStub

agents = pytest.importorskip("agents")
langchain_openai = pytest.importorskip("langchain_openai")


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
