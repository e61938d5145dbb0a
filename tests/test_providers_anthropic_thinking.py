"""Extended thinking with tools on Anthropic, over real HTTP (the official SDK against the
Messages API stub): the thinking blocks of a reply that calls tools, with their signatures,
and redacted thinking go back exactly in the follow-up request, also after a restart; the
stub refuses a follow-up that drops or alters them, as the real API does."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from standardagents import Runtime, define_agent, define_model, define_prompt, define_tool
from standardagents.exceptions import ProviderError
from standardagents.project import build_registry
from standardagents.providers import ModelRequest, ModelResponse, StreamEnd
from standardagents.providers.anthropic import AnthropicProvider
from standardagents.store import open_store
from standardagents.testing.anthropic_stub import AnthropicReply, AnthropicStub

THINKING = {"type": "enabled", "budget_tokens": 1024}
ADD_TOOL = {"type": "function", "function": {"name": "add", "description": "Add two integers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}
QUESTION = {"role": "user", "content": "What is 1 + 2?"}


@pytest.fixture
def anthropic_stub() -> Iterator[AnthropicStub]:
    with AnthropicStub() as server:
        yield server


@pytest.fixture
async def provider(anthropic_stub: AnthropicStub) -> AsyncIterator[AnthropicProvider]:
    made = AnthropicProvider(anthropic_stub.base_url, "sk-test", max_retries=0)
    yield made
    await made.aclose()


async def reply_of(provider: AnthropicProvider, request: ModelRequest, streamed: bool) -> ModelResponse:
    if not streamed:
        return await provider.request(request)
    deltas = [d async for d in provider.stream(request)]
    assert isinstance(deltas[-1], StreamEnd)
    return deltas[-1].response


def thinking_request(messages: list[dict[str, Any]]) -> ModelRequest:
    return ModelRequest(model="claude-stub", messages=messages, tools=[ADD_TOOL], extra_body={"thinking": THINKING})


async def first_step(provider: AnthropicProvider, stub: AnthropicStub, streamed: bool) -> ModelResponse:
    stub.queue(AnthropicReply(thinking="Add 1 and 2 with the tool.", redacted_thinking=["b3BhcXVlIHJlYXNvbmluZw=="],
                              tool_calls=[("add", '{"a": 1, "b": 2}')], chunk_size=3))
    return await reply_of(provider, thinking_request([QUESTION]), streamed)


def follow_up(response: ModelResponse, blocks: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    (call,) = response.tool_calls
    assistant: dict[str, Any] = {"role": "assistant", "content": response.text or None, "tool_calls": [call.to_dict()]}
    if blocks is not None:
        assistant["thinking_blocks"] = blocks
    return [QUESTION, assistant, {"role": "tool", "tool_call_id": call.id, "content": "3"}]


@pytest.mark.parametrize("streamed", [True, False])
async def test_a_reply_keeps_its_thinking_blocks_with_signature_and_redacted_thinking(
        provider: AnthropicProvider, anthropic_stub: AnthropicStub, streamed: bool) -> None:
    response = await first_step(provider, anthropic_stub, streamed)
    assert response.reasoning == "Add 1 and 2 with the tool."
    assert response.thinking_blocks == [
        {"type": "thinking", "thinking": "Add 1 and 2 with the tool.",
         "signature": anthropic_stub.signature_for("Add 1 and 2 with the tool.")},
        {"type": "redacted_thinking", "data": "b3BhcXVlIHJlYXNvbmluZw=="}]


@pytest.mark.parametrize("streamed", [True, False])
async def test_the_follow_up_carries_the_blocks_first_and_exactly(
        provider: AnthropicProvider, anthropic_stub: AnthropicStub, streamed: bool) -> None:
    response = await first_step(provider, anthropic_stub, streamed)
    anthropic_stub.queue(AnthropicReply(thinking="It is 3.", text="1 + 2 = 3."))
    answer = await reply_of(provider, thinking_request(follow_up(response, response.thinking_blocks)), streamed)
    assert answer.text == "1 + 2 = 3."
    sent = anthropic_stub.requests[1]["messages"][1]["content"]
    assert sent[:2] == response.thinking_blocks
    assert [b["type"] for b in sent[2:]] == ["tool_use"]


def _dropped(blocks: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    return None


def _thinking_edited(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**blocks[0], "thinking": blocks[0]["thinking"] + " Or subtract."}, blocks[1]]


def _signature_edited(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**blocks[0], "signature": blocks[0]["signature"][:-4] + "AAAA"}, blocks[1]]


def _signature_missing(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "thinking", "thinking": blocks[0]["thinking"]}, blocks[1]]


def _redacted_edited(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [blocks[0], {"type": "redacted_thinking", "data": "dGFtcGVyZWQ="}]


@pytest.mark.parametrize(("change", "refusal"), [
    (_dropped, "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`."),
    (_thinking_edited, "messages.1.content.0: Invalid `signature` in `thinking` block"),
    (_signature_edited, "messages.1.content.0: Invalid `signature` in `thinking` block"),
    (_signature_missing, "messages.1.content.0: Invalid `signature` in `thinking` block"),
    (_redacted_edited, "messages.1.content.1: Invalid `data` in `redacted_thinking` block"),
])
async def test_the_stub_refuses_a_follow_up_that_drops_or_alters_the_thinking(
        provider: AnthropicProvider, anthropic_stub: AnthropicStub,
        change: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None], refusal: str) -> None:
    response = await first_step(provider, anthropic_stub, streamed=False)
    with pytest.raises(ProviderError) as caught:
        await provider.request(thinking_request(follow_up(response, change(response.thinking_blocks))))
    assert caught.value.status == 400
    assert refusal in str(caught.value)
    assert len(anthropic_stub.requests) == 2


# -- through the engine ---------------------------------------------------------------------

@define_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@define_tool(needs_approval=True)
def transfer(amount: int) -> str:
    """Move money (a person approves each call).

    Args:
        amount: How much to move.
    """
    return f"moved {amount}"


def think_then_call(tool: str, args: dict[str, Any]) -> Callable[[dict[str, Any]], AnthropicReply]:
    """Think and call ``tool`` first; once its result is in the transcript, think and answer."""

    def respond(body: dict[str, Any]) -> AnthropicReply:
        results = [block for message in body["messages"] if message["role"] == "user"
                   and isinstance(message["content"], list)
                   for block in message["content"] if block.get("type") == "tool_result"]
        if results:
            return AnthropicReply(thinking="The tool answered.", text=f"Result: {results[-1]['content']}.")
        return AnthropicReply(thinking=f"I will call {tool}.", redacted_thinking=["c2VhbGVkIHRob3VnaHQ="],
                              tool_calls=[(tool, json.dumps(args))], chunk_size=3)

    return respond


def project(server: AnthropicStub, tool: Any, *, stream: bool) -> tuple[Any, ...]:
    model = define_model(name="default", provider="anthropic", model="claude-stub", base_url=server.base_url,
                         api_key_env="STANDARDAGENTS_TEST_ANTHROPIC_KEY", max_retries=0, stream=stream, extra_body={"thinking": THINKING})
    return (define_agent(name="thinker", side_a={"prompt": "main"}),
            define_prompt(name="main", prompt="Use your tool, then answer.", tools=[tool.name]), tool, model)


@pytest.mark.parametrize("stream", [True, False])
async def test_an_agent_with_extended_thinking_runs_its_tool_loop(make_runtime: Callable[..., Any], stream: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STANDARDAGENTS_TEST_ANTHROPIC_KEY", "sk-test")
    async with AnthropicStub(think_then_call("add", {"a": 19, "b": 23})) as server:
        rt = await make_runtime(*project(server, add, stream=stream))
        result = await rt.run("thinker", "What is 19 + 23?")
        messages = await rt.store.list_messages(result.thread_id)
        await rt.aclose()
    assert (result.stop_reason, result.error, result.text) == ("complete", None, "Result: 42.")
    first, second = server.requests
    assert first["thinking"] == THINKING
    blocks = [{"type": "thinking", "thinking": "I will call add.", "signature": server.signature_for("I will call add.")},
              {"type": "redacted_thinking", "data": "c2VhbGVkIHRob3VnaHQ="}]
    assert second["messages"][1]["content"][:2] == blocks
    caller = next(m for m in messages if m.role == "assistant" and m.tool_calls)
    assert caller.metadata["thinkingBlocks"] == blocks
    assert caller.reasoning == "I will call add."


async def test_thinking_blocks_come_back_from_the_store_after_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STANDARDAGENTS_TEST_ANTHROPIC_KEY", "sk-test")
    db = f"sqlite:///{tmp_path / 'thinking.db'}"
    async with AnthropicStub(think_then_call("transfer", {"amount": 5})) as server:
        rt = await Runtime.open(build_registry(*project(server, transfer, stream=True)), store=open_store(db))
        paused = await rt.run("thinker", "Move 5.")
        await rt.aclose()
        assert paused.outcome == "approval_required"
        rt2 = await Runtime.open(build_registry(*project(server, transfer, stream=True)), store=open_store(db))
        try:
            token = paused.payload["approvals"][0]["token"]
            result = await (await rt2.decide(token, True))
        finally:
            await rt2.aclose()
    assert (result.stop_reason, result.error, result.text) == ("complete", None, "Result: moved 5.")
    _, second = server.requests
    assert second["messages"][1]["content"][:2] == [
        {"type": "thinking", "thinking": "I will call transfer.", "signature": server.signature_for("I will call transfer.")},
        {"type": "redacted_thinking", "data": "c2VhbGVkIHRob3VnaHQ="}]


async def test_chat_completions_endpoints_never_receive_thinking_blocks(stub: Any) -> None:
    from standardagents.providers.openai import OpenAIProvider

    provider = OpenAIProvider(stub.base_url, "sk-test", max_retries=0)
    try:
        await provider.request(ModelRequest(model="stub-model", messages=[
            QUESTION, {"role": "assistant", "content": "3", "thinking_blocks": [{"type": "redacted_thinking", "data": "x"}]},
            {"role": "user", "content": "Sure?"}]))
    finally:
        await provider.aclose()
    assert [sorted(m) for m in stub.requests[0]["messages"]] == [["content", "role"]] * 3
