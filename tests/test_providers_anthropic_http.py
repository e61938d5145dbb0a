"""The Anthropic provider over real HTTP: the official SDK against the Messages API stub."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from standardagents import define_agent, define_model, define_prompt, define_tool
from standardagents.exceptions import ProviderError
from standardagents.providers import (
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
)
from standardagents.providers.anthropic import DEFAULT_MAX_TOKENS, AnthropicProvider
from standardagents.testing.anthropic_stub import AnthropicReply, AnthropicStub

ADD_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "required": ["a", "b"]}
ADD_TOOL = {"type": "function", "function": {"name": "add", "description": "Add two integers.",
                                             "parameters": ADD_SCHEMA}}


@pytest.fixture
def anthropic_stub() -> Iterator[AnthropicStub]:
    with AnthropicStub() as server:
        yield server


@pytest.fixture
async def provider(anthropic_stub: AnthropicStub) -> AsyncIterator[AnthropicProvider]:
    made = AnthropicProvider(anthropic_stub.base_url, "sk-test", max_retries=0)
    yield made
    await made.aclose()


def ask(text: str = "hi", **fields: Any) -> ModelRequest:
    return ModelRequest(model="claude-stub", messages=[{"role": "user", "content": text}], **fields)


async def collect(provider: AnthropicProvider, request: ModelRequest) -> tuple[list[Any], ModelResponse]:
    deltas = [d async for d in provider.stream(request)]
    end = deltas.pop()
    assert isinstance(end, StreamEnd)
    return deltas, end.response


async def reply_of(provider: AnthropicProvider, request: ModelRequest, streamed: bool) -> ModelResponse:
    if streamed:
        return (await collect(provider, request))[1]
    return await provider.request(request)


# -- replies ------------------------------------------------------------------------------

async def test_streamed_text_arrives_in_pieces_and_assembles(provider: AnthropicProvider, anthropic_stub: AnthropicStub) -> None:
    anthropic_stub.queue(AnthropicReply(text="Hello from the stream.", chunk_size=5))
    deltas, response = await collect(provider, ask())
    pieces = [d.text for d in deltas if isinstance(d, TextDelta)]
    assert len(pieces) > 1 and "".join(pieces) == "Hello from the stream."
    assert (response.text, response.finish_reason, response.tool_calls) == (
        "Hello from the stream.", "stop", [])
    assert anthropic_stub.requests[0]["stream"] is True


async def test_text_without_streaming_comes_back_whole(provider: AnthropicProvider, anthropic_stub: AnthropicStub) -> None:
    anthropic_stub.queue("A single message.")
    response = await provider.request(ask())
    assert (response.text, response.finish_reason, response.model) == (
        "A single message.", "stop", "claude-stub")
    assert "stream" not in anthropic_stub.requests[0]


async def test_tool_input_split_across_deltas_assembles_into_one_call(provider: AnthropicProvider, anthropic_stub: AnthropicStub) -> None:
    arguments = json.dumps({"a": 12, "b": 30})
    anthropic_stub.queue(AnthropicReply(tool_calls=[("add", arguments)], chunk_size=3))
    deltas, response = await collect(provider, ask("add", tools=[ADD_TOOL]))
    parts = [d.arguments for d in deltas if isinstance(d, ToolCallDelta) and d.arguments]
    assert len(parts) >= 3 and "".join(parts) == arguments
    (call,) = response.tool_calls
    assert call.name == "add" and json.loads(call.arguments) == {"a": 12, "b": 30}
    assert call.id.startswith("toolu_") and response.finish_reason == "tool_calls"


@pytest.mark.parametrize("streamed", [True, False])
async def test_two_tool_calls_in_one_reply_keep_order_and_ids(provider: AnthropicProvider, anthropic_stub: AnthropicStub, streamed: bool) -> None:
    anthropic_stub.queue(AnthropicReply(text="Both.", tool_calls=[
        ("add", '{"a": 1, "b": 2}'), ("add", '{"a": 3, "b": 4}')]))
    response = await reply_of(provider, ask("two sums", tools=[ADD_TOOL]), streamed)
    assert [json.loads(c.arguments) for c in response.tool_calls] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    assert len({c.id for c in response.tool_calls}) == 2 and response.text == "Both."


async def test_streamed_tool_call_deltas_are_numbered_per_call(provider: AnthropicProvider, anthropic_stub: AnthropicStub) -> None:
    anthropic_stub.queue(AnthropicReply(thinking="plan", text="Both.", tool_calls=[
        ("add", '{"a": 1, "b": 2}'), ("add", '{"a": 3, "b": 4}')]))
    deltas, _ = await collect(provider, ask("two sums", tools=[ADD_TOOL]))
    heads = [(d.index, d.name) for d in deltas if isinstance(d, ToolCallDelta) and d.id]
    assert heads == [(0, "add"), (1, "add")]


@pytest.mark.parametrize("streamed", [True, False])
async def test_thinking_becomes_reasoning(provider: AnthropicProvider, anthropic_stub: AnthropicStub, streamed: bool) -> None:
    anthropic_stub.queue(AnthropicReply(thinking="First add, then answer.", text="5"))
    response = await reply_of(provider, ask(), streamed)
    assert (response.reasoning, response.text) == ("First add, then answer.", "5")


async def test_streamed_thinking_arrives_as_reasoning_deltas_before_text(provider: AnthropicProvider, anthropic_stub: AnthropicStub) -> None:
    anthropic_stub.queue(AnthropicReply(thinking="Think it over.", text="Done", chunk_size=4))
    deltas, _ = await collect(provider, ask())
    kinds = [type(d) for d in deltas]
    assert "".join(d.text for d in deltas if isinstance(d, ReasoningDelta)) == "Think it over."
    assert kinds.index(TextDelta) > max(i for i, k in enumerate(kinds) if k is ReasoningDelta)


@pytest.mark.parametrize("streamed", [True, False])
async def test_usage_counts_cache_tokens_as_prompt_tokens(provider: AnthropicProvider, anthropic_stub: AnthropicStub, streamed: bool) -> None:
    usage = {"input_tokens": 40, "output_tokens": 7, "cache_read_input_tokens": 100,
             "cache_creation_input_tokens": 20}
    anthropic_stub.queue(AnthropicReply(text="ok", usage=usage))
    got = (await reply_of(provider, ask(), streamed)).usage
    assert got is not None
    assert (got.prompt_tokens, got.completion_tokens, got.total_tokens, got.cached_tokens) == (
        160, 7, 167, 100)


async def test_stop_reason_max_tokens_is_length(provider: AnthropicProvider, anthropic_stub: AnthropicStub) -> None:
    anthropic_stub.queue(AnthropicReply(text="cut", stop_reason="max_tokens"))
    assert (await collect(provider, ask()))[1].finish_reason == "length"


# -- what goes over the wire --------------------------------------------------------------

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You add numbers."},
    {"role": "user", "content": "What are 1+2 and 3+4?"},
    {"role": "assistant", "content": "Adding.", "tool_calls": [
        {"id": "toolu_a", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
        {"id": "toolu_b", "type": "function", "function": {"name": "add", "arguments": '{"a": 3, "b": 4}'}}]},
    {"role": "tool", "tool_call_id": "toolu_a", "content": "3"},
    {"role": "tool", "tool_call_id": "toolu_b", "content": "7"},
]


async def test_request_has_the_messages_api_shape(provider: AnthropicProvider, anthropic_stub: AnthropicStub) -> None:
    await provider.request(ModelRequest(model="claude-stub", messages=CONVERSATION, tools=[ADD_TOOL],
                                        tool_choice="required"))
    (sent,) = anthropic_stub.requests
    assert sent["system"] == "You add numbers."
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][1]["content"] == [
        {"type": "text", "text": "Adding."},
        {"type": "tool_use", "id": "toolu_a", "name": "add", "input": {"a": 1, "b": 2}},
        {"type": "tool_use", "id": "toolu_b", "name": "add", "input": {"a": 3, "b": 4}}]
    assert sent["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "3"},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "7"}]
    assert sent["tools"] == [{"name": "add", "description": "Add two integers.", "input_schema": ADD_SCHEMA}]
    assert sent["tool_choice"] == {"type": "any"}


@pytest.mark.parametrize(("asked", "sent"), [(None, DEFAULT_MAX_TOKENS), (321, 321)])
async def test_max_tokens_is_always_sent(provider: AnthropicProvider, anthropic_stub: AnthropicStub, asked: int | None, sent: int) -> None:
    await provider.request(ask(max_tokens=asked))
    assert anthropic_stub.requests[0]["max_tokens"] == sent


async def test_sampling_options_and_stop_sequences_are_sent(provider: AnthropicProvider, anthropic_stub: AnthropicStub) -> None:
    await collect(provider, ask(temperature=0.2, top_p=0.9, stop=["END"]))
    sent = anthropic_stub.requests[0]
    assert (sent["temperature"], sent["top_p"], sent["stop_sequences"]) == (0.2, 0.9, ["END"])


async def test_stub_refuses_what_the_real_api_refuses(anthropic_stub: AnthropicStub) -> None:
    import anthropic

    client = anthropic.AsyncAnthropic(base_url=anthropic_stub.base_url, api_key="sk-test", max_retries=0)
    try:
        with pytest.raises(anthropic.BadRequestError, match="system"):
            await client.messages.create(model="claude-stub", max_tokens=10, messages=[
                {"role": "system", "content": "no"}, {"role": "user", "content": "hi"}])
    finally:
        await client.close()


# -- errors -------------------------------------------------------------------------------

@pytest.mark.parametrize("streamed", [True, False])
async def test_400_is_not_retriable_and_says_what_was_wrong(anthropic_stub: AnthropicStub, streamed: bool) -> None:
    made = AnthropicProvider(anthropic_stub.base_url, "sk-test", max_retries=2)
    anthropic_stub.queue(AnthropicReply(error_status=400, error_message="messages.0: bad block"))
    try:
        with pytest.raises(ProviderError) as caught:
            await reply_of(made, ask(), streamed)
    finally:
        await made.aclose()
    error = caught.value
    assert (error.status, error.retriable, error.code) == (400, False, "http_400")
    assert "messages.0: bad block" in str(error) and "invalid_request_error" in str(error)
    assert len(anthropic_stub.requests) == 1


@pytest.mark.parametrize("status", [429, 500, 529])
@pytest.mark.parametrize("streamed", [True, False])
async def test_rate_limits_and_overload_are_retriable(provider: AnthropicProvider, anthropic_stub: AnthropicStub, status: int, streamed: bool) -> None:
    anthropic_stub.queue(AnthropicReply(error_status=status))
    with pytest.raises(ProviderError) as caught:
        await reply_of(provider, ask(), streamed)
    assert (caught.value.status, caught.value.retriable, caught.value.before_first_token) == (
        status, True, True)


async def test_the_sdk_retries_an_overload_after_the_announced_wait(anthropic_stub: AnthropicStub) -> None:
    made = AnthropicProvider(anthropic_stub.base_url, "sk-test", max_retries=1)
    anthropic_stub.queue(AnthropicReply(error_status=529, retry_after_ms=1), "Recovered.")
    try:
        response = await made.request(ask())
    finally:
        await made.aclose()
    assert response.text == "Recovered." and len(anthropic_stub.requests) == 2


async def test_an_overload_mid_stream_is_retriable_after_the_first_token(provider: AnthropicProvider, anthropic_stub: AnthropicStub) -> None:
    anthropic_stub.queue(AnthropicReply(text="partial answer", chunk_size=4, stream_error_after=5))
    seen: list[Any] = []
    with pytest.raises(ProviderError) as caught:
        async for delta in provider.stream(ask()):
            seen.append(delta)
    error = caught.value
    assert any(isinstance(d, TextDelta) for d in seen)
    assert (error.status, error.retriable, error.before_first_token) == (529, True, False)
    assert "overloaded_error" in str(error)


async def test_a_dropped_stream_is_a_retriable_connection_error(provider: AnthropicProvider, anthropic_stub: AnthropicStub) -> None:
    anthropic_stub.queue(AnthropicReply(text="never finished", drop_after_events=4))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())
    assert caught.value.retriable is True and caught.value.before_first_token is False


# -- a whole run through the engine -------------------------------------------------------

@define_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _sum_or_call(body: dict[str, Any]) -> AnthropicReply:
    """Call ``add`` first; once its result is in the transcript, answer with it."""
    results = [block for message in body["messages"] if message["role"] == "user"
               for block in message["content"] if block.get("type") == "tool_result"]
    if results:
        return AnthropicReply(text=f"The sum is {results[-1]['content']}.")
    return AnthropicReply(tool_calls=[("add", json.dumps({"a": 19, "b": 23}))], chunk_size=2)


@pytest.mark.parametrize("stream", [True, False])
async def test_an_agent_on_anthropic_calls_its_tool_and_answers(make_runtime: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, stream: bool) -> None:
    monkeypatch.setenv("STANDARDAGENTS_TEST_ANTHROPIC_KEY", "sk-from-env")
    async with AnthropicStub(_sum_or_call) as server:
        model = define_model(name="default", provider="anthropic", model="claude-stub",
                             base_url=server.base_url, api_key_env="STANDARDAGENTS_TEST_ANTHROPIC_KEY",
                             max_retries=0, stream=stream)
        rt = await make_runtime(
            define_agent(name="adder", side_a={"prompt": "main"}),
            define_prompt(name="main", prompt="You add numbers with the add tool.", tools=["add"]),
            add, model)
        result = await rt.run("adder", "What is 19 + 23?")
        await rt.aclose()
    assert (result.stop_reason, result.text) == ("complete", "The sum is 42.")
    first, second = server.requests
    assert "You add numbers with the add tool." in first["system"]
    assert all(m["role"] in ("user", "assistant") for m in first["messages"])
    assert [t["name"] for t in first["tools"]] == ["add"] and "input_schema" in first["tools"][0]
    (use,) = [b for b in second["messages"][-2]["content"] if b["type"] == "tool_use"]
    assert (use["name"], use["input"]) == ("add", {"a": 19, "b": 23})
    assert second["messages"][-1]["content"][-1] == {
        "type": "tool_result", "tool_use_id": use["id"], "content": "42"}
    assert any("sk-from-env" in value for value in server.headers[0].values())


async def test_an_unanswered_tool_call_is_refused_naming_its_id(
        provider: AnthropicProvider, anthropic_stub: AnthropicStub) -> None:
    unanswered = [*CONVERSATION[:3], {"role": "tool", "tool_call_id": "toolu_a", "content": "3"},
                  {"role": "user", "content": "and?"}]
    with pytest.raises(ProviderError) as caught:
        await provider.request(ModelRequest(model="claude-stub", messages=unanswered, tools=[ADD_TOOL]))
    assert caught.value.status == 400 and "toolu_b" in str(caught.value)
