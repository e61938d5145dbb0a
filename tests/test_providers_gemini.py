"""The Gemini provider over real HTTP: the google-genai SDK against the Gemini API stub."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from standardagents import Runtime, define_agent, define_model, define_prompt, define_tool
from standardagents.definitions import ReasoningConfig
from standardagents.exceptions import ProviderError
from standardagents.project import build_registry
from standardagents.providers import (
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
)
from standardagents.providers.base import PROVIDER_RESULTS_KEY
from standardagents.providers.defined import list_models
from standardagents.providers.factory import ProviderSpec, build_provider
from standardagents.providers.gemini import GeminiProvider, to_gemini_contents
from standardagents.providers.inspect import inspect_request
from standardagents.testing.gemini_stub import GeminiReply, GeminiStub

ADD = {"type": "function", "function": {"name": "add", "description": "Add two integers.",
                                        "parameters": {"type": "object", "required": ["a", "b"],
                                                       "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}
KEY = "g-test-key-42"


@pytest.fixture
def gemini_stub() -> Iterator[GeminiStub]:
    with GeminiStub(api_key=KEY) as server:
        yield server


@pytest.fixture
async def provider(gemini_stub: GeminiStub) -> AsyncIterator[GeminiProvider]:
    made = GeminiProvider(KEY, gemini_stub.base_url, max_retries=0)
    yield made
    await made.aclose()


def signature_bytes(value: str) -> bytes:
    text = value.replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4))


def ask(text: str = "hi", **fields: Any) -> ModelRequest:
    return ModelRequest(model="gemini-2.5-flash", messages=[{"role": "user", "content": text}], **fields)


async def collect(provider: GeminiProvider, request: ModelRequest) -> tuple[list[Any], ModelResponse]:
    deltas = [d async for d in provider.stream(request)]
    end = deltas.pop()
    assert isinstance(end, StreamEnd)
    return deltas, end.response


# -- text ---------------------------------------------------------------------------------

async def test_text_without_streaming_comes_back_whole(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    gemini_stub.queue("A single reply.")
    response = await provider.request(ask())
    assert (response.text, response.finish_reason, response.model) == ("A single reply.", "stop", "gemini-2.5-flash")
    assert gemini_stub.paths == ["/v1beta/models/gemini-2.5-flash:generateContent"]


async def test_streamed_text_arrives_in_pieces_and_assembles(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    gemini_stub.queue(GeminiReply(text="Hello from the stream.", chunk_size=5))
    deltas, response = await collect(provider, ask())
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["Hello", " from", " the ", "strea", "m."]
    assert (response.text, response.finish_reason) == ("Hello from the stream.", "stop")
    assert gemini_stub.paths == ["/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"]


async def test_the_system_prompt_becomes_the_system_instruction(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    await provider.request(ModelRequest(model="gemini-2.5-flash", messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "again"}]))
    sent = gemini_stub.requests[0]
    assert sent["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert sent["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "Hello."}]},
                                {"role": "user", "parts": [{"text": "again"}]}]


async def test_sampling_settings_go_in_the_generation_config(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    await provider.request(ask(max_tokens=50, temperature=0.3, top_p=0.9, stop=["END"]))
    assert gemini_stub.requests[0]["generationConfig"] == {"maxOutputTokens": 50, "temperature": 0.3, "topP": 0.9,
                                                           "stopSequences": ["END"]}


async def test_the_key_travels_in_its_header(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    await provider.request(ask())
    assert gemini_stub.headers[0]["x-goog-api-key"] == KEY


# -- tools --------------------------------------------------------------------------------

async def test_tools_are_declared_with_their_json_schema(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    await provider.request(ask(tools=[ADD]))
    assert gemini_stub.requests[0]["tools"] == [{"functionDeclarations": [
        {"name": "add", "description": "Add two integers.", "parametersJsonSchema": ADD["function"]["parameters"]}]}]


@pytest.mark.parametrize(("choice", "config"), [
    ("required", {"mode": "ANY"}),
    ("none", {"mode": "NONE"}),
    ({"type": "function", "function": {"name": "add"}}, {"mode": "ANY", "allowedFunctionNames": ["add"]}),
])
async def test_tool_choice_becomes_a_function_calling_mode(provider: GeminiProvider, gemini_stub: GeminiStub,
                                                           choice: Any, config: dict[str, Any]) -> None:
    await provider.request(ask(tools=[ADD], tool_choice=choice))
    assert gemini_stub.requests[0]["toolConfig"] == {"functionCallingConfig": config}


async def test_a_function_call_comes_back_as_a_tool_call(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    gemini_stub.queue(GeminiReply(tool_calls=[("add", '{"a": 2, "b": 3}')]))
    deltas, response = await collect(provider, ask(tools=[ADD]))
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [("gcall_1_0", "add", {"a": 2, "b": 3})]
    assert response.finish_reason == "tool_calls"
    assert [(d.index, d.id, d.name) for d in deltas if isinstance(d, ToolCallDelta)] == [(0, "gcall_1_0", "add")]


async def test_a_call_without_an_id_gets_one(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    gemini_stub.queue(GeminiReply(tool_calls=[("add", "{}"), ("add", '{"a": 1}')], call_ids=False))
    response = await provider.request(ask(tools=[ADD]))
    ids = [c.id for c in response.tool_calls]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)


async def test_a_tool_result_goes_back_as_a_function_response_with_the_calls_signature(
        provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    gemini_stub.queue(GeminiReply(tool_calls=[("add", '{"a": 2, "b": 3}')]), "Five.")
    first = await provider.request(ask(tools=[ADD]))
    call = first.tool_calls[0]
    follow = ask(tools=[ADD])
    follow.messages += [{"role": "assistant", "content": None, "tool_calls": [call.to_dict()],
                         "thinking_blocks": first.thinking_blocks},
                        {"role": "tool", "tool_call_id": call.id, "content": "5"}]
    second = await provider.request(follow)
    assert second.text == "Five."
    model_turn, answer = gemini_stub.requests[1]["contents"][1:]
    assert signature_bytes(model_turn["parts"][0]["thoughtSignature"]) == signature_bytes(first.thinking_blocks[0]["signature"])
    assert answer == {"role": "user", "parts": [{"functionResponse": {"id": call.id, "name": "add",
                                                                      "response": {"result": "5"}}}]}


async def test_a_call_sent_back_without_its_signature_is_refused(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    gemini_stub.queue(GeminiReply(tool_calls=[("add", '{"a": 2, "b": 3}')]))
    call = (await provider.request(ask(tools=[ADD]))).tool_calls[0]
    follow = ask(tools=[ADD])
    follow.messages += [{"role": "assistant", "content": None, "tool_calls": [call.to_dict()]},
                        {"role": "tool", "tool_call_id": call.id, "content": "5"}]
    with pytest.raises(ProviderError) as caught:
        await provider.request(follow)
    assert (caught.value.status, caught.value.code) == (400, "http_400")
    assert "Function call is missing a thought_signature" in str(caught.value)


def test_a_failed_tool_result_is_sent_as_an_error_response() -> None:
    _, contents = to_gemini_contents([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "add", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: boom", "tool_status": "error"}])
    assert contents[-1]["parts"] == [{"function_response": {"id": "c1", "name": "add", "response": {"error": "Error: boom"}}}]


# -- usage and reasoning -----------------------------------------------------------------

async def test_usage_counts_thoughts_as_completion_and_reasoning(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    gemini_stub.queue(GeminiReply(text="ok", usage={"promptTokenCount": 11, "candidatesTokenCount": 4,
                                                    "thoughtsTokenCount": 6, "cachedContentTokenCount": 3,
                                                    "totalTokenCount": 21}))
    _, response = await collect(provider, ask())
    usage = response.usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.reasoning_tokens, usage.cached_tokens,
            usage.total_tokens) == (11, 10, 6, 3, 21)


async def test_a_reasoning_level_asks_for_a_budget_and_thoughts_stream_as_reasoning(
        provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    gemini_stub.queue(GeminiReply(text="42", thought="Six times seven.", chunk_size=8))
    deltas, response = await collect(provider, ask(reasoning=ReasoningConfig(level="medium")))
    assert gemini_stub.requests[0]["generationConfig"]["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 8192}
    assert [d.text for d in deltas if isinstance(d, ReasoningDelta)] == ["Six time", "s seven."]
    assert (response.reasoning, response.text) == ("Six times seven.", "42")


async def test_level_none_turns_thinking_off(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    await provider.request(ask(reasoning=ReasoningConfig(level="none")))
    assert gemini_stub.requests[0]["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}


# -- provider-executed results -----------------------------------------------------------

async def test_images_code_runs_and_searched_pages_are_kept_as_provider_results(
        provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    gemini_stub.queue(GeminiReply(text="Done.", parts=[
        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
        {"executableCode": {"language": "PYTHON", "code": "print(6*7)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "42\n"}}],
        grounding={"groundingChunks": [{"web": {"uri": "https://example.org/a", "title": "Example"}}]}))
    response = await provider.request(ask())
    assert response.metadata[PROVIDER_RESULTS_KEY] == [
        {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo=", "url": None},
        {"type": "tool_result", "id": None, "name": "code_execution", "input": "print(6*7)", "output": "42\n",
         "status": "success"},
        {"type": "web_search", "url": "https://example.org/a", "title": "Example", "snippet": None}]


# -- errors -------------------------------------------------------------------------------

async def test_an_http_error_keeps_its_status_and_message(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    gemini_stub.queue(GeminiReply(error_status=404, error_message="models/nope is not found"))
    with pytest.raises(ProviderError) as caught:
        await provider.request(ask())
    error = caught.value
    assert str(error) == "Gemini answered HTTP 404 NOT_FOUND (check the model name): models/nope is not found"
    assert (error.status, error.code, error.retriable) == (404, "http_404", False)


async def test_a_rate_limit_is_retriable(provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    gemini_stub.queue(GeminiReply(error_status=429))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())
    assert (caught.value.status, caught.value.retriable, caught.value.before_first_token) == (429, True, True)


async def test_a_wrong_key_is_reported_as_the_api_says(gemini_stub: GeminiStub) -> None:
    wrong = GeminiProvider("not-the-key", gemini_stub.base_url, max_retries=0)
    try:
        with pytest.raises(ProviderError) as caught:
            await wrong.request(ask())
    finally:
        await wrong.aclose()
    assert str(caught.value) == "Gemini answered HTTP 400 INVALID_ARGUMENT: API key not valid. Please pass a valid API key."


async def test_an_error_in_the_middle_of_a_stream_comes_after_the_text_so_far(
        provider: GeminiProvider, gemini_stub: GeminiStub) -> None:
    gemini_stub.queue(GeminiReply(text="abcdefghijkl", chunk_size=4, stream_error_after=2, error_message="overloaded"))
    received: list[str] = []
    with pytest.raises(ProviderError) as caught:
        async for delta in provider.stream(ask()):
            if isinstance(delta, TextDelta):
                received.append(delta.text)
    assert received == ["abcd", "efgh"]
    error = caught.value
    assert (str(error), error.status, error.code, error.before_first_token) == (
        "Gemini stream failed with 503 UNAVAILABLE: overloaded", 503, "stream_error", False)


async def test_without_a_key_the_error_names_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ProviderError) as caught:
        build_provider(ProviderSpec(provider="gemini"))
    assert str(caught.value) == ("provider 'gemini' is missing configuration: api_key (looked in the environment "
                                 "variables GEMINI_API_KEY or GOOGLE_API_KEY (not set))")


# -- as a definition -----------------------------------------------------------------------

async def test_the_gemini_definition_lists_its_models_with_capabilities() -> None:
    page = await list_models("gemini", {"reasoning": True, "limit": 2})
    assert [m.id for m in page.models] == ["gemini-2.5-pro", "gemini-2.5-flash"]
    assert page.models[0].capabilities.reasoning_levels == ["low", "medium", "high"]


async def test_inspection_shows_the_generate_content_request_with_the_key_redacted(
        gemini_stub: GeminiStub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    model = define_model(name="g", provider="gemini", model="gemini-2.5-flash", base_url=gemini_stub.base_url, stream=False)
    shown = await inspect_request(model, [{"role": "user", "content": "hi"}])
    assert (shown.method, shown.url) == ("POST", f"{gemini_stub.base_url}/v1beta/models/gemini-2.5-flash:generateContent")
    assert shown.headers["x-goog-api-key"] == "[redacted]"
    assert shown.body == {"contents": [{"parts": [{"text": "hi"}], "role": "user"}]}
    assert gemini_stub.requests == []


@define_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_a_turn_calls_a_tool_and_answers_through_gemini(
        gemini_stub: GeminiStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    gemini_stub.queue(GeminiReply(tool_calls=[("add", '{"a": 20, "b": 22}')]), GeminiReply(text="It is 42.", chunk_size=3))
    registry = build_registry(
        define_agent(name="calc", side_a={"prompt": "calc", "stop_on_response": True}),
        define_prompt(name="calc", prompt="Use add.", tools=["add"], model="flash"), add,
        define_model(name="flash", provider="gemini", model="gemini-2.5-flash", base_url=gemini_stub.base_url, max_retries=0))
    rt = await Runtime.open(registry, database_url=f"sqlite+aiosqlite:///{tmp_path / 'rt.db'}")
    try:
        result = await rt.run("calc", "What is 20 + 22?")
    finally:
        await rt.aclose()
    assert (result.stop_reason, result.text) == ("complete", "It is 42.")
    answer = gemini_stub.requests[1]["contents"][-1]["parts"][0]["functionResponse"]
    assert (answer["name"], answer["response"]) == ("add", {"result": "42"})


async def test_the_results_the_provider_ran_itself_are_kept_on_the_stored_reply(
        gemini_stub: GeminiStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    gemini_stub.queue(GeminiReply(text="Found it.", grounding={"groundingChunks": [
        {"web": {"uri": "https://example.org/a", "title": "Example"}}]}))
    registry = build_registry(
        define_agent(name="finder", side_a={"prompt": "finder", "stop_on_response": True}),
        define_prompt(name="finder", prompt="Search.", model="flash"),
        define_model(name="flash", provider="gemini", model="gemini-2.5-flash", base_url=gemini_stub.base_url, max_retries=0))
    rt = await Runtime.open(registry, database_url=f"sqlite+aiosqlite:///{tmp_path / 'rt.db'}")
    try:
        result = await rt.run("finder", "Find the example page.")
        (reply,) = [m for m in await rt.store.list_messages(result.thread_id) if m.role == "assistant"]
    finally:
        await rt.aclose()
    assert reply.metadata[PROVIDER_RESULTS_KEY] == [
        {"type": "web_search", "url": "https://example.org/a", "title": "Example", "snippet": None}]
