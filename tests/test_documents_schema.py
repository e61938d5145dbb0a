"""The shipped JSON Schema: valid draft 2020-12, accepting good documents, rejecting bad ones."""

from __future__ import annotations

from importlib import resources
from typing import Any

import jsonschema
import pytest

from standardagents.documents import AGENT_SPEC, SPEC_EVENTS, document_schema, parse_spec

EXAMPLES: list[dict[str, Any]] = [
    {"spec": AGENT_SPEC},
    {
        "spec": AGENT_SPEC,
        "$schema": "https://example.org/agent.schema.json",
        "id": "reviewer",
        "name": "Reviewer",
        "description": "Reviews pull requests",
        "endpoint": {"baseUrl": "http://127.0.0.1:11434/v1", "requestTimeoutSeconds": 0},
        "model": {
            "model": "qwen3:8b",
            "maxTokens": 0,
            "temperature": 0,
            "reasoningEffort": "off",
            "contextLength": 32768,
            "extraBody": {"top_k": 20},
        },
        "prompt": [
            {"id": "project", "text": "You work on the project."},
            {"id": "role", "ref": {"type": "file", "value": "prompts/reviewer.md"}},
            {"id": "lane", "text": ""},
        ],
        "tools": {"discovery": "ondemand", "maxIterations": 8, "servers": []},
        "retry": {"maxRetries": 2, "loadingTimeoutSeconds": 120},
        "tasks": {
            "toolSelect": {"model": "qwen3:0.6b"},
            "title": {"model": "", "endpoint": {"baseUrl": "http://side/v1"}},
            "translate": {"model": "m", "temperature": 1.5},
        },
        "hooks": [
            {"id": "recall", "on": "beforeTurn", "server": "mem", "tool": "recall", "inject": True},
            {"id": "keep", "on": "beforeCompact", "server": "mem", "tool": "save", "veto": True},
            {"id": "log", "on": "afterTurn", "server": "log", "tool": "write", "args": {"a": 1}},
        ],
        "bundle": {"mcpServers": [{"slug": "mem", "command": "mem-server", "env": {}}]},
        "extensions": {"com.example.ui": {"color": "teal"}},
        "requires": ["com.example.ui"],
        "laterField": {"kept": True},
    },
    {"spec": AGENT_SPEC, "model": {"temperature": None}, "tools": None, "prompt": []},
]

#: documents the schema rejects, each with what the parser makes of it: the errors that refuse
#: it, or the warnings of what it trimmed
INVALID: list[tuple[dict[str, Any], list[str], list[str]]] = [
    ({}, ['spec: must be "cubicecho.agent/1"'], []),
    ({"spec": "cubicecho.agent/2"}, ["spec: is version 2, and this build reads version 1"], []),
    ({"spec": AGENT_SPEC, "endpoint": {"apiKey": "sk-1"}}, [],
     ["endpoint.apiKey: is not part of this format, since a document carries no credentials, and was dropped"]),
    ({"spec": AGENT_SPEC, "model": {"temperature": 2.5}}, [],
     ["model.temperature: must be between 0 and 2, and was dropped"]),
    ({"spec": AGENT_SPEC, "model": {"maxTokens": True}}, [],
     ["model.maxTokens: must be a finite number, and was dropped"]),
    ({"spec": AGENT_SPEC, "model": {"extraBody": {"stream": True}}}, [],
     ["model.extraBody.stream: is always set by the loop itself, and was dropped"]),
    ({"spec": AGENT_SPEC, "prompt": [{"id": "a"}]}, [], ["prompt[0]: has neither text nor a ref, and was dropped"]),
    ({"spec": AGENT_SPEC, "prompt": {"id": "a", "text": "t"}}, ["prompt: must be an array"], []),
    ({"spec": AGENT_SPEC, "tools": {"maxIterations": 0}}, [],
     ["tools.maxIterations: must be at least 1, and was dropped"]),
    ({"spec": AGENT_SPEC, "tools": {"servers": [""]}}, [], ["tools.servers[0]: is empty, and was dropped"]),
    ({"spec": AGENT_SPEC, "hooks": [{"id": "h", "on": "afterTurn", "server": "s", "tool": "t", "inject": True}]}, [],
     ['hooks[0].inject: "afterTurn" fires after the model has answered, and was dropped']),
    ({"spec": AGENT_SPEC, "hooks": [{"id": "h", "on": "beforeTurn", "server": "s", "tool": "t", "veto": True}]}, [],
     ['hooks[0].veto: "beforeTurn" announces nothing a hook could decline, and was dropped']),
    ({"spec": AGENT_SPEC, "hooks": [{"id": "h", "on": "later", "server": "s", "tool": "t"}]}, [],
     ['hooks[0].on: "later" is not a hook event, and was dropped']),
    ({"spec": AGENT_SPEC, "bundle": {"mcpServers": [{"command": "x"}]}}, [],
     ["bundle.mcpServers[0]: needs a non-empty id or slug, and was dropped"]),
    ({"spec": AGENT_SPEC, "requires": [1]}, ["requires[0]: must be a string"], []),
]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = document_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = document_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_the_schema_ships_as_a_file_in_the_package() -> None:
    assert (
        resources.files("standardagents.documents").joinpath("agent-document.schema.json").is_file()
    )


def test_document_schema_returns_a_fresh_copy() -> None:
    first = document_schema()
    first["title"] = "changed"
    assert document_schema()["title"] != "changed"


@pytest.mark.parametrize("example", EXAMPLES)
def test_valid_documents_validate_against_the_schema(
    validator: jsonschema.Draft202012Validator, example: dict[str, Any]
) -> None:
    assert list(validator.iter_errors(example)) == []


@pytest.mark.parametrize("example", EXAMPLES)
def test_schema_valid_examples_parse_without_errors(example: dict[str, Any]) -> None:
    parsed = parse_spec(example, bundle=True)
    assert parsed.errors == []


@pytest.mark.parametrize(("example", "errors", "warnings"), INVALID)
def test_documents_the_parser_would_refuse_or_trim_fail_the_schema(
    validator: jsonschema.Draft202012Validator, example: dict[str, Any], errors: list[str], warnings: list[str]
) -> None:
    assert list(validator.iter_errors(example)) != []
    parsed = parse_spec(example, bundle=True)
    assert (parsed.errors, parsed.warnings) == (errors, warnings)


def test_the_schema_lists_the_same_hook_events_as_the_parser() -> None:
    schema = document_schema()
    assert tuple(schema["$defs"]["hook"]["properties"]["on"]["enum"]) == SPEC_EVENTS
