"""OpenAIProvider against the real OpenAI wire stub over HTTP."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from standardagents.exceptions import ProviderError
from standardagents.providers import (
    ModelRequest,
    OpenAIProvider,
    ReasoningDelta,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
)
from standardagents.providers.base import StreamDelta
from standardagents.testing import OpenAIStub, StubReply


@pytest.fixture(scope="module")
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


@pytest.fixture
async def provider(stub: OpenAIStub) -> AsyncIterator[OpenAIProvider]:
    stub.reset()
    stub.responder = None
    client = OpenAIProvider(stub.base_url, timeout=5.0, max_retries=2)
    yield client
    await client.aclose()


def ask(text: str = "hi", **kwargs: object) -> ModelRequest:
    return ModelRequest(model="stub-model", messages=[{"role": "user", "content": text}], **kwargs)  # type: ignore[arg-type]


async def collect(provider: OpenAIProvider, request: ModelRequest) -> list[StreamDelta]:
    return [delta async for delta in provider.stream(request)]


TWO_CALLS = [("add", json.dumps({"a": 1, "b": 2})), ("lookup", json.dumps({"query": "weather in Paris"}))]


async def test_request_returns_text(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    stub.queue(StubReply(text="Hello there"))
    response = await provider.request(ask())
    assert response.text == "Hello there"
    assert response.finish_reason == "stop"
    assert stub.requests[-1]["messages"] == [{"role": "user", "content": "hi"}]
    assert "stream" not in stub.requests[-1]


async def test_stream_delivers_text_in_several_deltas(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    stub.queue(StubReply(text="streamed reply text", chunk_size=3))
    deltas = await collect(provider, ask())
    pieces = [d.text for d in deltas if isinstance(d, TextDelta)]
    assert len(pieces) == 7
    assert "".join(pieces) == "streamed reply text"
    assert isinstance(deltas[-1], StreamEnd)
    assert deltas[-1].response.text == "streamed reply text"


async def test_stream_assembles_two_parallel_tool_calls_split_across_chunks(
        stub: OpenAIStub, provider: OpenAIProvider) -> None:
    stub.queue(StubReply(tool_calls=TWO_CALLS, chunk_size=5))
    deltas = await collect(provider, ask())
    argument_pieces = [d for d in deltas if isinstance(d, ToolCallDelta) and d.arguments]
    assert len(argument_pieces) > 4
    end = deltas[-1]
    assert isinstance(end, StreamEnd)
    calls = end.response.tool_calls
    assert [(c.name, c.arguments) for c in calls] == TWO_CALLS
    assert len({c.id for c in calls}) == 2
    assert end.response.finish_reason == "tool_calls"


async def test_stream_reports_tool_call_id_and_name_once(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    stub.queue(StubReply(tool_calls=TWO_CALLS, chunk_size=2))
    deltas = [d for d in await collect(provider, ask()) if isinstance(d, ToolCallDelta)]
    for index in (0, 1):
        mine = [d for d in deltas if d.index == index]
        assert len([d for d in mine if d.id]) == 1
        assert len([d for d in mine if d.name]) == 1


async def test_request_returns_parallel_tool_calls(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    stub.queue(StubReply(tool_calls=TWO_CALLS))
    response = await provider.request(ask())
    assert [(c.name, c.arguments) for c in response.tool_calls] == TWO_CALLS


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_stream_yields_reasoning_deltas(stub: OpenAIStub, provider: OpenAIProvider, field: str) -> None:
    stub.queue(StubReply(text="answer", reasoning="let me think about it", reasoning_field=field))
    deltas = await collect(provider, ask())
    reasoning = "".join(d.text for d in deltas if isinstance(d, ReasoningDelta))
    assert reasoning == "let me think about it"
    end = deltas[-1]
    assert isinstance(end, StreamEnd)
    assert end.response.reasoning == "let me think about it"
    assert end.response.text == "answer"


async def test_request_reads_reasoning(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    stub.queue(StubReply(text="answer", reasoning="because"))
    assert (await provider.request(ask())).reasoning == "because"


async def test_stream_asks_for_and_records_usage(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
             "completion_tokens_details": {"reasoning_tokens": 3},
             "prompt_tokens_details": {"cached_tokens": 5}}
    stub.queue(StubReply(text="counted", usage=usage))
    end = (await collect(provider, ask()))[-1]
    assert stub.requests[-1]["stream_options"] == {"include_usage": True}
    assert isinstance(end, StreamEnd)
    assert end.response.usage is not None
    assert (end.response.usage.prompt_tokens, end.response.usage.completion_tokens,
            end.response.usage.total_tokens, end.response.usage.reasoning_tokens,
            end.response.usage.cached_tokens) == (11, 7, 18, 3, 5)


async def test_request_records_usage(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    stub.queue(StubReply(text="x", usage={"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}))
    usage = (await provider.request(ask())).usage
    assert usage is not None and (usage.prompt_tokens, usage.total_tokens) == (4, 6)


async def test_stream_retries_without_stream_options_when_rejected(
        stub: OpenAIStub, provider: OpenAIProvider) -> None:
    rejected = {"error": {"message": "Unrecognized request argument: stream_options"}}
    stub.queue(StubReply(error_status=400, error_body=rejected), StubReply(text="fine"))
    end = (await collect(provider, ask()))[-1]
    assert isinstance(end, StreamEnd) and end.response.text == "fine"
    assert "stream_options" in stub.requests[0]
    assert "stream_options" not in stub.requests[1]


async def test_bad_request_is_not_retried(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    stub.queue(StubReply(error_status=400, error_body={"error": {"message": "bad model"}}))
    with pytest.raises(ProviderError) as caught:
        await provider.request(ask())
    assert caught.value.status == 400
    assert caught.value.retriable is False
    assert "bad model" in str(caught.value)
    assert len(stub.requests) == 1


@pytest.mark.parametrize("status", [500, 429])
async def test_retriable_status_is_retried_before_first_token(
        stub: OpenAIStub, provider: OpenAIProvider, status: int) -> None:
    stub.queue(StubReply(error_status=status), StubReply(text="recovered"))
    response = await provider.request(ask())
    assert response.text == "recovered"
    assert len(stub.requests) == 2


@pytest.mark.parametrize("status", [500, 429])
async def test_retriable_status_becomes_provider_error_when_retries_run_out(
        stub: OpenAIStub, provider: OpenAIProvider, status: int) -> None:
    stub.queue(*[StubReply(error_status=status)] * 3)
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())
    assert caught.value.status == status
    assert caught.value.retriable is True
    assert caught.value.before_first_token is True
    assert len(stub.requests) == 3


async def test_dropped_stream_before_first_token_is_retried(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    stub.queue(StubReply(drop_connection=True), StubReply(text="second try"))
    end = (await collect(provider, ask()))[-1]
    assert isinstance(end, StreamEnd) and end.response.text == "second try"
    assert len(stub.requests) == 2


async def test_dropped_response_before_body_is_retried(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    stub.queue(StubReply(drop_connection=True), StubReply(text="second try"))
    assert (await provider.request(ask())).text == "second try"
    assert len(stub.requests) == 2


async def test_stream_dropped_after_tokens_is_not_retried(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    stub.queue(StubReply(text="partial answer here", chunk_size=2, drop_after_chunks=4),
               StubReply(text="must not be used"))
    seen: list[str] = []
    with pytest.raises(ProviderError) as caught:
        async for delta in provider.stream(ask()):
            if isinstance(delta, TextDelta):
                seen.append(delta.text)
    assert seen
    assert caught.value.before_first_token is False
    assert len(stub.requests) == 1


async def test_slow_endpoint_times_out_as_retriable_error(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    stub.reset()
    stub.queue(StubReply(text="late", delay=3.0))
    client = OpenAIProvider(stub.base_url, timeout=0.2, max_retries=0)
    try:
        with pytest.raises(ProviderError) as caught:
            await client.request(ask())
    finally:
        await client.aclose()
    assert caught.value.code == "timeout"
    assert caught.value.retriable is True


async def test_request_sends_tools_and_options(stub: OpenAIStub, provider: OpenAIProvider) -> None:
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    await provider.request(ask(tools=tools, tool_choice="auto", max_tokens=9, temperature=0.5,
                               extra_body={"seed": 3}))
    body = stub.requests[-1]
    assert (body["tools"], body["tool_choice"], body["max_tokens"], body["temperature"], body["seed"]) == (
        tools, "auto", 9, 0.5, 3)


async def test_all_concurrent_requests_are_in_flight_at_once() -> None:
    count = 200
    release = threading.Event()
    async with OpenAIStub(lambda body: StubReply(text="ok", hold=release)) as own_stub:
        client = OpenAIProvider(own_stub.base_url)
        try:
            pending = [asyncio.ensure_future(client.request(ask())) for _ in range(count)]
            # no reply is sent before every request has reached the endpoint: all of them are
            # in flight at once only if none waits for a connection another one holds
            await own_stub.wait_requests_async(count, timeout=60)
            assert own_stub.max_in_flight == count
            release.set()
            results = await asyncio.gather(*pending)
        finally:
            release.set()
            await client.aclose()
        assert [r.text for r in results] == ["ok"] * count


def test_remote_endpoint_without_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="OPENAI_API_KEY"):
        OpenAIProvider("https://api.example.com/v1")


async def test_local_endpoint_needs_no_key(monkeypatch: pytest.MonkeyPatch, stub: OpenAIStub) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = OpenAIProvider(stub.base_url)
    try:
        assert (await client.request(ask())).text == "ok"
    finally:
        await client.aclose()


async def test_base_url_is_read_from_environment(monkeypatch: pytest.MonkeyPatch, stub: OpenAIStub) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    client = OpenAIProvider()
    try:
        assert client.base_url == stub.base_url
        assert (await client.request(ask())).text == "ok"
    finally:
        await client.aclose()


async def test_caller_supplied_http_client_is_used_and_left_open(stub: OpenAIStub) -> None:
    import httpx2

    async with httpx2.AsyncClient() as http:
        client = OpenAIProvider(stub.base_url, http_client=http)
        assert (await client.request(ask())).text == "ok"
        await client.aclose()
        assert not http.is_closed
