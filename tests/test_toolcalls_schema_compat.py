"""sanitize_tools, relax_tools, prepare_tools, is_grammar_error and capability latches."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from standardagents.exceptions import ProviderError, StandardAgentsError
from standardagents.toolcalls import (
    CAPABILITY_SNAPSHOT_VERSION,
    CapabilityLatches,
    default_latches,
    export_capabilities,
    import_capabilities,
    is_grammar_error,
    prepare_tools,
    relax_tools,
    sanitize_tools,
)


def tool(parameters: Any, name: str = "t") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": "d", "parameters": parameters},
    }


def params(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return tools[0]["function"]["parameters"]


def keys_anywhere(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            found.add(k)
            found |= keys_anywhere(v)
    elif isinstance(value, list):
        for v in value:
            found |= keys_anywhere(v)
    return found


COMPLEX = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "when": {"type": "string", "format": "date-time"},
        "site": {"type": "string", "format": "uri", "examples": ["https://x"]},
        "owner": {"anyOf": [{"$ref": "#/$defs/User"}, {"type": "null"}], "description": "who"},
        "tags": {"type": ["array", "null"], "items": {"type": "string"}, "default": "bad"},
        "mode": {"const": "fast"},
        "extra": {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        "cond": {"type": "string", "if": {"minLength": 1}, "then": {}, "else": {}},
        "level": {"type": "integer", "default": 3, "minimum": 1},
    },
    "required": ["when", "ghost"],
    "$defs": {
        "User": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    },
}


def test_sanitize_inlines_refs_and_drops_defs() -> None:
    out = params(sanitize_tools([tool(COMPLEX)]))
    assert out["properties"]["owner"]["properties"]["id"] == {"type": "integer"}
    assert "$ref" not in keys_anywhere(out) and "$defs" not in keys_anywhere(out)


def test_sanitize_turns_nullable_union_into_the_member() -> None:
    out = params(sanitize_tools([tool(COMPLEX)]))
    owner = out["properties"]["owner"]
    assert owner["type"] == "object" and owner["description"] == "who"
    assert "anyOf" not in owner
    assert out["properties"]["tags"]["type"] == "array"


def test_sanitize_drops_refused_keywords() -> None:
    found = keys_anywhere(params(sanitize_tools([tool(COMPLEX)])))
    assert not found & {"$schema", "examples", "patternProperties", "if", "then", "else"}


def test_sanitize_keeps_common_formats_and_drops_others() -> None:
    out = params(sanitize_tools([tool(COMPLEX)]))
    assert out["properties"]["when"]["format"] == "date-time"
    assert "format" not in out["properties"]["site"]


def test_sanitize_drops_only_invalid_defaults() -> None:
    out = params(sanitize_tools([tool(COMPLEX)]))
    assert "default" not in out["properties"]["tags"]
    assert out["properties"]["level"]["default"] == 3


def test_sanitize_turns_const_into_enum() -> None:
    assert params(sanitize_tools([tool(COMPLEX)]))["properties"]["mode"] == {"enum": ["fast"]}


def test_sanitize_keeps_only_required_names_that_exist() -> None:
    assert params(sanitize_tools([tool(COMPLEX)]))["required"] == ["when"]


@pytest.mark.parametrize(
    "parameters", [None, {}, {"type": "object"}, {"properties": {"a": {"type": "string"}}}]
)
def test_sanitize_makes_the_top_an_object_with_properties(parameters: Any) -> None:
    out = params(sanitize_tools([tool(parameters)]))
    assert out["type"] == "object"
    assert isinstance(out["properties"], dict)


def test_sanitize_guards_recursive_refs() -> None:
    schema = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            }
        },
    }
    out = params(sanitize_tools([tool(schema)]))
    root = out["properties"]["root"]
    assert root["properties"]["children"]["items"]["type"] == "object"
    assert "$ref" not in json.dumps(out)


def test_sanitize_keeps_real_unions_without_null() -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}},
    }
    v = params(sanitize_tools([tool(schema)]))["properties"]["v"]
    assert v == {"anyOf": [{"type": "string"}, {"type": "integer"}]}


def test_sanitize_merges_a_single_all_of() -> None:
    schema = {
        "type": "object",
        "properties": {"p": {"allOf": [{"$ref": "#/$defs/P"}], "description": "x"}},
        "$defs": {"P": {"type": "object", "properties": {"a": {"type": "string"}}}},
    }
    p = params(sanitize_tools([tool(schema)]))["properties"]["p"]
    assert p["properties"] == {"a": {"type": "string"}} and p["description"] == "x"


def test_sanitize_does_not_modify_its_input() -> None:
    tools = [tool(copy.deepcopy(COMPLEX))]
    before = json.dumps(tools, sort_keys=True)
    sanitize_tools(tools)
    relax_tools(tools)
    assert json.dumps(tools, sort_keys=True) == before


def test_relax_drops_constraints_and_required() -> None:
    out = params(relax_tools([tool(COMPLEX)]))
    found = keys_anywhere(out)
    assert not found & {"required", "minimum", "format", "default", "additionalProperties"}
    assert out["properties"]["level"] == {"type": "integer"}


def test_relax_collapses_unions_to_their_first_member() -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
    }
    assert params(relax_tools([tool(schema)]))["properties"]["v"] == {"type": "string"}


def test_relax_keeps_string_enums_and_drops_others() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "enum": ["x", "y"]},
            "b": {"type": "integer", "enum": [1, 2]},
        },
    }
    props = params(relax_tools([tool(schema)]))["properties"]
    assert props["a"]["enum"] == ["x", "y"]
    assert "enum" not in props["b"]


def test_relax_keeps_descriptions() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "description": "keep", "pattern": "^x"}},
    }
    assert params(relax_tools([tool(schema)]))["properties"]["a"] == {
        "type": "string",
        "description": "keep",
    }


def test_prepare_tools_per_level() -> None:
    tools = [tool(COMPLEX)]
    assert prepare_tools(tools, None) == tools
    assert prepare_tools(tools, "sanitized") == sanitize_tools(tools)
    assert prepare_tools(tools, "relaxed") == relax_tools(tools)
    assert prepare_tools(tools, "no_tools") == []


def test_prepare_tools_rejects_an_unknown_level() -> None:
    with pytest.raises(StandardAgentsError, match="compatibility level"):
        prepare_tools([], "loose")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "error",
    [
        "Invalid schema for function 'get': 'format' is not permitted",
        "registry.ollama.ai/library/gemma:2b does not support tools",
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        "tools param requires --jinja flag",
        "Failed to parse grammar",
        "JSON schema conversion failed: unsupported ref",
        "Unsupported JSON schema: $ref",
        "tools is not supported for this model",
        ProviderError(
            "bad request",
            status=400,
            body={"error": {"message": "xgrammar failed to compile the schema"}},
        ),
        ProviderError("Error code: 400 - {'code': 'invalid_function_parameters'}", status=400),
        {"error": {"message": "function calling is not supported"}},
    ],
)
def test_is_grammar_error_recognises_refusals(error: Any) -> None:
    assert is_grammar_error(error)


@pytest.mark.parametrize(
    "error",
    [
        "Rate limit reached for requests",
        ProviderError("upstream timeout", status=504),
        ProviderError("Invalid schema for function 'x'", status=429),
        "The model `gpt-x` does not exist",
        ConnectionError("connection reset by peer"),
        "maximum context length is 8192 tokens",
    ],
)
def test_is_grammar_error_ignores_other_failures(error: Any) -> None:
    assert not is_grammar_error(error)


def test_is_grammar_error_reads_the_cause_chain() -> None:
    try:
        try:
            raise RuntimeError("does not support tools")
        except RuntimeError as inner:
            raise ProviderError("request failed", status=400) from inner
    except ProviderError as outer:
        assert is_grammar_error(outer)


def test_latch_only_tightens() -> None:
    latches = CapabilityLatches()
    assert latches.level_for("e", "m") is None
    latches.latch("e", "m", "relaxed")
    assert latches.latch("e", "m", "sanitized") == "relaxed"
    assert latches.level_for("e", "m") == "relaxed"
    assert latches.level_for("e", "other") is None


def test_escalate_walks_the_levels_then_stops() -> None:
    latches = CapabilityLatches()
    steps = [latches.escalate("e", "m") for _ in range(4)]
    assert steps == ["sanitized", "relaxed", "no_tools", None]


def test_latch_rejects_an_unknown_level() -> None:
    with pytest.raises(StandardAgentsError):
        CapabilityLatches().latch("e", "m", "open")  # type: ignore[arg-type]


def test_export_import_round_trip() -> None:
    first = CapabilityLatches()
    first.latch("http://a/v1", "m1", "relaxed")
    first.latch("http://b/v1", "m2", "no_tools")
    blob = first.export_capabilities()
    assert json.loads(blob)["version"] == CAPABILITY_SNAPSHOT_VERSION
    second = CapabilityLatches()
    assert second.import_capabilities(blob) == 2
    assert second.level_for("http://a/v1", "m1") == "relaxed"
    assert second.level_for("http://b/v1", "m2") == "no_tools"


def test_import_does_not_loosen_what_is_known() -> None:
    latches = CapabilityLatches()
    latches.latch("e", "m", "no_tools")
    other = CapabilityLatches()
    other.latch("e", "m", "sanitized")
    latches.import_capabilities(other.export_capabilities())
    assert latches.level_for("e", "m") == "no_tools"


@pytest.mark.parametrize(
    "blob",
    [
        "not json",
        "[]",
        json.dumps({"version": 999, "endpoints": {"e": {"m": "relaxed"}}}),
        json.dumps({"version": CAPABILITY_SNAPSHOT_VERSION, "endpoints": []}),
        json.dumps(
            {
                "version": CAPABILITY_SNAPSHOT_VERSION,
                "kind": "other",
                "endpoints": {"e": {"m": "relaxed"}},
            }
        ),
        None,
    ],
)
def test_foreign_or_malformed_snapshot_is_ignored(blob: Any) -> None:
    latches = CapabilityLatches()
    assert latches.import_capabilities(blob) == 0
    assert latches.level_for("e", "m") is None


def test_malformed_entries_are_skipped_and_good_ones_kept() -> None:
    blob = {
        "version": CAPABILITY_SNAPSHOT_VERSION,
        "endpoints": {"e": {"m": "relaxed", "bad": "whatever"}, "f": "oops"},
    }
    latches = CapabilityLatches()
    assert latches.import_capabilities(blob) == 1
    assert latches.level_for("e", "m") == "relaxed"


def test_module_level_snapshot_uses_the_default_latches() -> None:
    default_latches.reset()
    try:
        default_latches.latch("e", "m", "relaxed")
        blob = export_capabilities()
        default_latches.reset()
        assert import_capabilities(blob) == 1
        assert default_latches.level_for("e", "m") == "relaxed"
    finally:
        default_latches.reset()
