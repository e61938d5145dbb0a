"""Property: parse_spec never raises, and what it keeps parses again to itself without errors."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from standardagents.documents import (
    AGENT_SPEC,
    SPEC_EVENTS,
    document_schema,
    export_spec,
    parse_spec,
    resolve_agent_spec,
)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from([10**400, -(10**400)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "${HOME}", "eager", "ondemand", "file", "url", *SPEC_EVENTS]),
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=12,
)


def _same(value: Any) -> Any:
    return value


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the well-shaped value, sometimes any JSON value at all, so every branch is reached."""
    # one_of would give each branch an equal share; this weights the shaped value 4 to 1.
    return st.sampled_from([strategy, strategy, strategy, strategy, JSON]).flatmap(_same)


NUMBER = maybe(st.one_of(st.integers(-3, 200), st.floats(-1, 3)))
TEXT = maybe(st.sampled_from(["a", "fs", "${X}", " spaced ", ""]))
ENDPOINT = maybe(
    st.fixed_dictionaries(
        {},
        optional={
            "baseUrl": TEXT,
            "requestTimeoutSeconds": NUMBER,
            "firstTokenSeconds": NUMBER,
            "apiKey": TEXT,
        },
    )
)
PART = maybe(
    st.fixed_dictionaries(
        {"id": TEXT},
        optional={
            "text": TEXT,
            "ref": maybe(st.fixed_dictionaries({"type": TEXT, "value": TEXT})),
            "extra": JSON,
        },
    )
)
HOOK = maybe(
    st.fixed_dictionaries(
        {
            "id": TEXT,
            "on": maybe(st.sampled_from(SPEC_EVENTS)),
            "server": TEXT,
            "tool": TEXT,
        },
        optional={
            "args": JSON,
            "inject": maybe(st.booleans()),
            "veto": maybe(st.booleans()),
            "maxTokens": NUMBER,
            "timeoutMs": NUMBER,
            "enabled": maybe(st.booleans()),
        },
    )
)
TASK = maybe(
    st.fixed_dictionaries(
        {},
        optional={
            "model": TEXT,
            "endpoint": ENDPOINT,
            "maxTokens": NUMBER,
            "temperature": NUMBER,
            "reasoningEffort": TEXT,
        },
    )
)
SERVER = maybe(
    st.fixed_dictionaries(
        {}, optional={"id": TEXT, "slug": TEXT, "env": JSON, "headers": JSON, "command": JSON}
    )
)
DOCUMENT = st.fixed_dictionaries(
    {"spec": st.sampled_from([AGENT_SPEC, AGENT_SPEC, AGENT_SPEC, "cubicecho.agent/2", None])},
    optional={
        "$schema": TEXT,
        "id": TEXT,
        "name": TEXT,
        "description": TEXT,
        "endpoint": ENDPOINT,
        "model": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "model": TEXT,
                    "maxTokens": NUMBER,
                    "temperature": NUMBER,
                    "reasoningEffort": TEXT,
                    "contextLength": NUMBER,
                    "extraBody": maybe(st.dictionaries(st.sampled_from(["stream", "k"]), JSON)),
                },
            )
        ),
        "prompt": maybe(st.lists(PART, min_size=1, max_size=3)),
        "tools": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "discovery": TEXT,
                    "maxIterations": NUMBER,
                    "servers": maybe(st.lists(TEXT, max_size=3)),
                },
            )
        ),
        "retry": maybe(
            st.fixed_dictionaries(
                {}, optional={"maxRetries": NUMBER, "loadingTimeoutSeconds": NUMBER}
            )
        ),
        "tasks": maybe(
            st.dictionaries(st.sampled_from(["title", "toolSelect", "x"]), TASK, min_size=1)
        ),
        "hooks": maybe(st.lists(HOOK, min_size=1, max_size=3)),
        "bundle": maybe(
            st.fixed_dictionaries({"mcpServers": maybe(st.lists(SERVER, min_size=1, max_size=3))})
        ),
        "extensions": JSON,
        "requires": maybe(st.lists(TEXT, max_size=2)),
        "later": JSON,
    },
)
VALIDATOR = jsonschema.Draft202012Validator(document_schema())
ANYTHING = st.one_of(JSON, DOCUMENT)
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(document=ANYTHING, bundle=st.booleans())
def test_a_parsed_document_parses_again_to_itself_without_errors(
    document: Any, bundle: bool
) -> None:
    parsed = parse_spec(document, bundle=bundle)
    if parsed.spec is None:
        assert parsed.errors
        return
    assert parsed.errors == []
    again = parse_spec(parsed.spec, bundle=bundle)
    assert again.errors == []
    assert again.spec == parsed.spec
    assert [w for w in again.warnings if w.endswith("was dropped")] == []


@settings(FAST, max_examples=150)
@given(document=DOCUMENT)
def test_what_the_parser_keeps_satisfies_the_schema(document: Any) -> None:
    parsed = parse_spec(document, bundle=True)
    if parsed.spec is not None:
        assert list(VALIDATOR.iter_errors(parsed.spec)) == []


@settings(FAST, max_examples=150)
@given(document=DOCUMENT)
def test_every_accepted_document_resolves_and_exports_cleanly(document: Any) -> None:
    parsed = parse_spec(document, bundle=True)
    if parsed.spec is None:
        return
    agent = resolve_agent_spec([parsed.spec, parsed.spec])
    assert agent.api_key == ""
    assert agent == resolve_agent_spec([parsed.spec])
    exported = parse_spec(export_spec(parsed.spec), bundle=True)
    assert exported.errors == []
    for server in (
        exported.spec["bundle"]["mcpServers"] if exported.spec and "bundle" in exported.spec else []
    ):
        assert "env" not in server and "headers" not in server
