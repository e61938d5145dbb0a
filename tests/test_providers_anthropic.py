"""Conversions between chat-completions shapes and Anthropic's Messages API (offline)."""

from __future__ import annotations

import json

import pytest

from standardagents.exceptions import ProviderError
from standardagents.providers import ModelRequest, TextDelta, ToolCallDelta
from standardagents.providers.anthropic import (
    AnthropicProvider,
    AnthropicStreamAssembler,
    from_anthropic_message,
    to_anthropic_messages,
    to_anthropic_tool_choice,
    to_anthropic_tools,
)


def test_system_messages_become_system_text() -> None:
    system, turns = to_anthropic_messages([
        {"role": "system", "content": "be brief"}, {"role": "system", "content": "be kind"},
        {"role": "user", "content": "hi"}])
    assert system == "be brief\n\nbe kind"
    assert turns == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_tool_calls_and_results_become_tool_use_and_tool_result_blocks() -> None:
    _, turns = to_anthropic_messages([
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": "sure", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "tool", "tool_call_id": "c2", "content": "2"},
    ])
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"][1] == {"type": "tool_use", "id": "c1", "name": "add", "input": {"a": 1}}
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "1"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "2"}]


def test_data_url_image_becomes_base64_source() -> None:
    _, turns = to_anthropic_messages([{"role": "user", "content": [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}]}])
    assert turns[0]["content"][1] == {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "QUJD"}}


def test_tools_and_tool_choice_convert() -> None:
    params = {"type": "object", "properties": {"a": {"type": "integer"}}}
    tools = to_anthropic_tools([{"type": "function", "function": {
        "name": "add", "description": "adds", "parameters": params}}])
    assert tools == [{"name": "add", "description": "adds", "input_schema": params}]
    assert to_anthropic_tool_choice("required") == {"type": "any"}
    assert to_anthropic_tool_choice({"type": "function", "function": {"name": "add"}}) == {
        "type": "tool", "name": "add"}


def test_message_converts_back_to_response() -> None:
    response = from_anthropic_message({
        "model": "claude", "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 4, "cache_read_input_tokens": 2},
        "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "ok"},
                    {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 1}}]})
    assert (response.text, response.reasoning, response.finish_reason) == ("ok", "hmm", "tool_calls")
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [("t1", "add", {"a": 1})]
    assert response.usage is not None
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.cached_tokens) == (12, 4, 2)


def test_stream_events_assemble_text_and_tool_calls() -> None:
    events = [
        {"type": "message_start", "message": {"model": "claude", "usage": {"input_tokens": 7, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "add", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"a"'}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ": 1}"}},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    assembler = AnthropicStreamAssembler()
    deltas = [d for e in events for d in assembler.feed(e)]
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == "Hello"
    calls = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert (calls[0].index, calls[0].id, calls[0].name) == (0, "t1", "add")
    response = assembler.response()
    assert response.tool_calls[0].arguments == '{"a": 1}'
    assert response.finish_reason == "tool_calls"
    assert response.usage is not None and (response.usage.prompt_tokens, response.usage.completion_tokens) == (7, 9)


def test_stream_error_event_raises_provider_error() -> None:
    with pytest.raises(ProviderError, match="overloaded"):
        AnthropicStreamAssembler().feed({"type": "error", "error": {"type": "overloaded_error", "message": "overloaded"}})


def test_provider_without_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider()


async def test_provider_builds_messages_api_params() -> None:
    provider = AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9")
    try:
        params = provider._params(ModelRequest(model="claude", messages=[
            {"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}], stop=["END"]))
    finally:
        await provider.aclose()
    assert (params["system"], params["max_tokens"], params["stop_sequences"]) == ("sys", 4096, ["END"])

