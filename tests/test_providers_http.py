"""The providers' own HTTP client against the wire stubs: a finished Anthropic stream gives its
connection back (a real TCP proxy counts them), a request's own timeout holds, a stream left
early leaves the provider usable, a call under a span carries its traceparent, and both
providers send their requests through the proxy the environment names."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, cast

import pytest
from opentelemetry.sdk.trace import TracerProvider

from standardagents import observability
from standardagents.exceptions import ProviderError
from standardagents.providers import ModelRequest, StreamEnd, TextDelta
from standardagents.providers.anthropic import AnthropicProvider
from standardagents.testing.anthropic_stub import AnthropicReply, AnthropicStub
from test_providers_anthropic_http import anthropic_stub as anthropic_stub  # the fixtures
from test_providers_anthropic_http import ask
from test_providers_anthropic_http import provider as provider
from test_providers_openai_pool import CountingProxy


async def streamed_text(provider: AnthropicProvider, request: ModelRequest) -> str:
    async for delta in provider.stream(request):
        if isinstance(delta, StreamEnd):
            return delta.response.text
    raise AssertionError("the stream ended without its StreamEnd")


async def test_three_streamed_calls_in_a_row_use_one_connection() -> None:
    replies = [AnthropicReply(text=f"answer {n}", chunk_size=3) for n in range(3)]
    async with AnthropicStub(lambda body: replies.pop(0)) as stub:
        proxy = CountingProxy((stub.host, stub.port))
        await proxy.start()
        provider = AnthropicProvider(f"http://127.0.0.1:{proxy.port}", "sk-test", timeout=5.0, max_retries=0)
        try:
            texts = [await streamed_text(provider, ask()) for _ in range(3)]
        finally:
            await provider.aclose()
            await proxy.aclose()
    assert texts == ["answer 0", "answer 1", "answer 2"]
    assert proxy.accepted == 1


@pytest.mark.parametrize("streamed", [True, False])
async def test_a_request_timeout_is_a_retriable_timeout(provider: AnthropicProvider, anthropic_stub: AnthropicStub,
                                                         streamed: bool) -> None:
    anthropic_stub.queue(AnthropicReply(text="too late", delay=5.0))
    with pytest.raises(ProviderError) as caught:
        if streamed:
            await streamed_text(provider, ask(timeout=0.3))
        else:
            await provider.request(ask(timeout=0.3))
    assert (caught.value.code, caught.value.retriable, caught.value.before_first_token) == ("timeout", True, True)


async def test_a_stream_left_after_its_first_delta_leaves_the_provider_usable(
        provider: AnthropicProvider, anthropic_stub: AnthropicStub) -> None:
    anthropic_stub.queue(AnthropicReply(text="a long answer left early", chunk_size=2), "next")
    stream = cast(AsyncGenerator[Any, None], provider.stream(ask()))
    first = await anext(stream)
    await stream.aclose()
    assert isinstance(first, TextDelta) and first.text == "a "
    assert await streamed_text(provider, ask()) == "next"
    assert len(anthropic_stub.requests) == 2


@pytest.mark.parametrize("streamed", [True, False])
async def test_a_call_under_a_span_carries_its_traceparent(provider: AnthropicProvider, anthropic_stub: AnthropicStub,
                                                           streamed: bool) -> None:
    tracers = TracerProvider()
    observability.set_tracer_provider(tracers)
    try:
        with tracers.get_tracer("test").start_as_current_span("turn") as span:
            if streamed:
                await streamed_text(provider, ask())
            else:
                await provider.request(ask())
            trace_id = f"{span.get_span_context().trace_id:032x}"
    finally:
        observability.set_tracer_provider(None)
    assert anthropic_stub.headers[0]["traceparent"].split("-")[1] == trace_id


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_requests_go_through_the_proxy_the_environment_names(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    from standardagents.providers import OpenAIProvider
    from standardagents.testing import OpenAIStub

    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    stub: AnthropicStub | OpenAIStub = AnthropicStub() if kind == "anthropic" else OpenAIStub()
    async with stub:
        proxy = CountingProxy((stub.host, stub.port))
        await proxy.start()
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        # a host that does not resolve: only a request sent to the proxy can reach the stub
        made: AnthropicProvider | OpenAIProvider = (
            AnthropicProvider("http://model.invalid", "sk-test", max_retries=0) if kind == "anthropic"
            else OpenAIProvider("http://model.invalid/v1", "sk-test", max_retries=0))
        try:
            response = await made.request(ask())
        finally:
            await made.aclose()
            await proxy.aclose()
    assert response.text == "ok"
    assert (proxy.accepted, len(stub.requests)) == (1, 1)


async def test_a_request_timeout_holds_for_that_request_only(provider: AnthropicProvider,
                                                             anthropic_stub: AnthropicStub) -> None:
    anthropic_stub.queue(AnthropicReply(text="too late", delay=5.0), AnthropicReply(text="in time", delay=0.6))
    with pytest.raises(ProviderError):
        await provider.request(ask(timeout=0.3))
    assert (await provider.request(ask())).text == "in time"
