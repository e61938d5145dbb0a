"""parse_tool_arguments and coerce_to_schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from standardagents.toolcalls import coerce_to_schema, parse_tool_arguments

CORPUS = json.loads((Path(__file__).parent / "data" / "broken_arguments.json").read_text("utf-8"))


def test_corpus_holds_at_least_thirty_cases() -> None:
    assert len(CORPUS) >= 30
    assert sum(1 for c in CORPUS if c.get("truncated")) >= 5


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_corpus_case(case: dict[str, Any]) -> None:
    result = parse_tool_arguments(case["text"])
    if case.get("truncated"):
        assert result.truncated
        assert result.value is None
        assert result.error and "cut off" in result.error
    else:
        assert result.error is None
        assert not result.truncated
        assert result.value == case["expected"]


def test_strict_json_takes_the_fast_path_unrepaired() -> None:
    result = parse_tool_arguments('{"a": [1, {"b": null}]}')
    assert result.value == {"a": [1, {"b": None}]}
    assert not result.repaired
    assert result.notes == []


def test_repair_is_reported_with_notes() -> None:
    result = parse_tool_arguments("```json\n{'a': 1,}\n```")
    assert result.repaired
    assert "removed a code fence" in result.notes


def test_none_reads_as_empty_object() -> None:
    assert parse_tool_arguments(None).value == {}


@pytest.mark.parametrize("text", ["[1, 2]", "42", '"just text"', "null", "true"])
def test_non_object_top_level_is_an_error(text: str) -> None:
    result = parse_tool_arguments(text)
    assert result.value is None
    assert result.error is not None and "JSON object" in result.error
    assert not result.truncated


def test_text_without_json_is_an_error() -> None:
    result = parse_tool_arguments("I cannot do that.")
    assert result.value is None
    assert result.error is not None


def test_brace_inside_string_does_not_count_as_truncation() -> None:
    result = parse_tool_arguments("{'code': 'if x { y', }")
    assert result.value == {"code": "if x { y"}


def test_url_value_is_not_read_as_a_comment() -> None:
    result = parse_tool_arguments("{url: 'http://example.com/a', n: 1,}")
    assert result.value == {"url": "http://example.com/a", "n": 1}


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "force": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "options": {"type": "object", "properties": {"depth": {"type": "integer"}}},
        "ids": {"type": "array", "items": {"type": "integer"}},
        "name": {"type": "string"},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "ref": {"$ref": "#/$defs/Point"},
    },
    "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
}


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ({"count": "5"}, {"count": 5}),
        ({"count": " -3 "}, {"count": -3}),
        ({"count": 4.0}, {"count": 4}),
        ({"ratio": "2.5"}, {"ratio": 2.5}),
        ({"ratio": "1e3"}, {"ratio": 1000.0}),
        ({"force": "true"}, {"force": True}),
        ({"force": "False"}, {"force": False}),
        ({"tags": "urgent"}, {"tags": ["urgent"]}),
        ({"tags": '["a", "b"]'}, {"tags": ["a", "b"]}),
        ({"ids": "7"}, {"ids": [7]}),
        ({"ids": ["1", 2]}, {"ids": [1, 2]}),
        ({"options": '{"depth": "2"}'}, {"options": {"depth": 2}}),
        ({"name": 12}, {"name": "12"}),
        ({"maybe": "9"}, {"maybe": 9}),
        ({"ref": {"x": "1.5"}}, {"ref": {"x": 1.5}}),
    ],
)
def test_schema_coercion(sent: dict[str, Any], expected: dict[str, Any]) -> None:
    result = parse_tool_arguments(json.dumps(sent), SCHEMA)
    assert result.value == expected
    assert result.repaired
    assert result.notes


@pytest.mark.parametrize(
    "sent",
    [{"count": "five"}, {"force": "yes"}, {"ratio": "NaN"}, {"maybe": None}, {"name": True}],
)
def test_unclear_values_are_left_for_validation(sent: dict[str, Any]) -> None:
    result = parse_tool_arguments(json.dumps(sent), SCHEMA)
    assert result.value == sent
    assert not result.repaired


def test_values_already_right_are_not_noted() -> None:
    sent = {"count": 1, "tags": ["a"], "options": {"depth": 3}}
    value, notes = coerce_to_schema(sent, SCHEMA)
    assert value == sent
    assert notes == []


def test_coercion_notes_name_the_path() -> None:
    _, notes = coerce_to_schema({"options": {"depth": "4"}}, SCHEMA)
    assert len(notes) == 1
    assert notes[0].startswith("$.options.depth")


def test_coercion_does_not_modify_its_input() -> None:
    sent = {"ids": ["1"], "options": {"depth": "2"}}
    before = json.dumps(sent)
    coerce_to_schema(sent, SCHEMA)
    assert json.dumps(sent) == before


def test_self_referencing_schema_terminates() -> None:
    schema = {
        "$ref": "#/$defs/Node",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/Node"}},
            }
        },
    }
    value, _ = coerce_to_schema({"v": "1", "next": {"v": "2", "next": {"v": "3"}}}, schema)
    assert value == {"v": 1, "next": {"v": 2, "next": {"v": 3}}}
