"""The offline test model: deterministic default behaviour and scripted replies."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from standardagents.exceptions import ProviderError
from standardagents.providers import (
    ModelRequest,
    ModelResponse,
    StreamEnd,
    TestModelProvider,
    TextDelta,
    ToolCallDelta,
)
from standardagents.providers.testmodel import arguments_for_schema
from standardagents.records import ToolCall

SCHEMAS: dict[str, dict[str, Any]] = {
    "add": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 5},
                                             "b": {"type": "number", "maximum": 0.5}},
            "required": ["a", "b"]},
    "search": {"type": "object", "additionalProperties": False, "properties": {
        "query": {"type": "string", "minLength": 12, "maxLength": 20},
        "mode": {"type": "string", "enum": ["fast", "deep"]},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "strict": {"type": "boolean"},
        "filter": {"type": "object", "properties": {"year": {"type": "integer", "exclusiveMinimum": 2000},
                                                    "when": {"type": "string", "format": "date"}},
                   "required": ["year", "when"]},
        "optional": {"type": "string"}},
        "required": ["query", "mode", "tags", "strict", "filter"]},
    "pick": {"type": "object", "properties": {"choice": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/Choice"}]}},
             "required": ["choice"], "$defs": {"Choice": {"type": "string", "enum": ["x", "y"]}}},
}


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": f"the {name} tool",
                                             "parameters": SCHEMAS[name]}}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_generated_arguments_validate_against_schema(name: str) -> None:
    jsonschema.validate(arguments_for_schema(SCHEMAS[name]), SCHEMAS[name])


async def test_default_calls_each_offered_tool_once_with_valid_arguments() -> None:
    model = TestModelProvider()
    response = await model.request(ModelRequest(model="t", messages=[user("go")],
                                                tools=[tool(n) for n in sorted(SCHEMAS)]))
    assert [c.name for c in response.tool_calls] == sorted(SCHEMAS)
    assert [c.id for c in response.tool_calls] == ["call_1", "call_2", "call_3"]
    for call in response.tool_calls:
        jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
    assert response.finish_reason == "tool_calls"


async def test_default_summarises_tool_results_after_they_arrive() -> None:
    model = TestModelProvider()
    call = ToolCall(id="call_1", name="add", arguments='{"a": 5, "b": 0}')
    messages = [user("go"), {"role": "assistant", "content": None, "tool_calls": [call.to_dict()]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sum is 5"}]
    response = await model.request(ModelRequest(model="t", messages=messages, tools=[tool("add")]))
    assert response.tool_calls == []
    assert "add" in response.text and "sum is 5" in response.text


async def test_default_truncates_long_tool_results_in_summary() -> None:
    model = TestModelProvider()
    call = ToolCall(id="c", name="add").to_dict()
    long_result = "z" * 500
    messages = [user("go"), {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c", "content": long_result}]
    response = await model.request(ModelRequest(model="t", messages=messages, tools=[tool("add")]))
    assert "z" * 50 in response.text and long_result not in response.text


async def test_default_without_tools_echoes_last_user_message() -> None:
    model = TestModelProvider()
    messages = [user("first"), {"role": "assistant", "content": "x"}, user("what is up")]
    first = await model.request(ModelRequest(model="t", messages=messages))
    second = await model.request(ModelRequest(model="t", messages=messages))
    assert "what is up" in first.text
    assert first.text == second.text


async def test_new_user_message_after_tool_results_calls_tools_again() -> None:
    model = TestModelProvider()
    messages = [user("go"), {"role": "assistant", "tool_calls": [ToolCall("c", "add").to_dict()]},
                {"role": "tool", "tool_call_id": "c", "content": "5"}, user("again")]
    response = await model.request(ModelRequest(model="t", messages=messages, tools=[tool("add")]))
    assert [c.name for c in response.tool_calls] == ["add"]


async def test_stream_sends_text_in_several_small_deltas() -> None:
    model = TestModelProvider()
    request = ModelRequest(model="t", messages=[user("tell me a fairly long story please")])
    deltas = [d async for d in model.stream(request)]
    texts = [d.text for d in deltas if isinstance(d, TextDelta)]
    assert len(texts) > 2
    end = deltas[-1]
    assert isinstance(end, StreamEnd) and "".join(texts) == end.response.text


async def test_stream_splits_tool_call_arguments() -> None:
    model = TestModelProvider()
    deltas = [d async for d in model.stream(ModelRequest(model="t", messages=[user("go")], tools=[tool("add")]))]
    pieces = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert pieces[0].name == "add" and len(pieces) >= 3
    end = deltas[-1]
    assert isinstance(end, StreamEnd)
    assert "".join(p.arguments for p in pieces) == end.response.tool_calls[0].arguments


async def test_usage_is_estimated_from_characters() -> None:
    model = TestModelProvider(script=["x" * 40])
    response = await model.request(ModelRequest(model="t", messages=[user("y" * 80)]))
    assert response.usage is not None
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (20, 10)
    assert response.usage.total_tokens == 30


async def test_script_items_of_every_kind_play_in_order() -> None:
    script = [
        "plain text",
        {"tool_calls": [{"name": "add", "arguments": {"a": 1}}], "text": "calling"},
        ModelResponse(text="as a response"),
        ProviderError("scripted failure", retriable=True),
    ]
    model = TestModelProvider(script=script)
    request = ModelRequest(model="t", messages=[user("go")])
    first = await model.request(request)
    second = await model.request(request)
    third = await model.request(request)
    with pytest.raises(ProviderError, match="scripted failure"):
        await model.request(request)
    assert first.text == "plain text"
    assert (second.text, second.tool_calls[0].name, json.loads(second.tool_calls[0].arguments)) == (
        "calling", "add", {"a": 1})
    assert third.text == "as a response"
    assert len(model.requests) == 4


async def test_exhausted_script_raises_provider_error() -> None:
    model = TestModelProvider(script=["only one"])
    request = ModelRequest(model="t", messages=[user("go")])
    await model.request(request)
    with pytest.raises(ProviderError, match="exhausted"):
        await model.request(request)


async def test_callable_script_sees_the_request() -> None:
    model = TestModelProvider(script=lambda req: f"{len(req.messages)} messages")
    response = await model.request(ModelRequest(model="t", messages=[user("a"), user("b")]))
    assert response.text == "2 messages"
    assert model.requests[0].messages[1]["content"] == "b"
