"""The public surface of standardagents.documents and its constants."""

from __future__ import annotations

import pytest

import standardagents.documents as documents


def test_the_public_names_are_exactly_these() -> None:
    assert sorted(documents.__all__) == sorted(
        [
            "AGENT_SPEC",
            "AGENT_SPEC_VERSION",
            "AGENT_TASKS",
            "RESOLVED_DEFAULTS",
            "SPEC_EVENTS",
            "DocumentSource",
            "ParsedSpec",
            "ResolvedAgent",
            "ResolvedEndpoint",
            "ResolvedTask",
            "document_schema",
            "export_spec",
            "load_document",
            "parse_spec",
            "resolve_agent_spec",
        ]
    )
    for name in documents.__all__:
        assert hasattr(documents, name)


def test_the_token_carries_the_major_version() -> None:
    assert documents.AGENT_SPEC == f"cubicecho.agent/{documents.AGENT_SPEC_VERSION}"


def test_resolved_defaults_are_read_only() -> None:
    with pytest.raises(TypeError):
        documents.RESOLVED_DEFAULTS["temperature"] = 1  # type: ignore[index]
