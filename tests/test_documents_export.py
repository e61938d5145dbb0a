"""export_spec: bundled servers lose their secrets, and the result is still a valid document."""

from __future__ import annotations

import copy
from typing import Any

from standardagents.documents import AGENT_SPEC, export_spec, parse_spec, resolve_agent_spec

SERVER = {
    "slug": "fs",
    "command": "npx",
    "args": ["-y", "server-filesystem"],
    "env": {"TOKEN": "secret"},
    "headers": {"Authorization": "Bearer secret"},
    "callTimeoutMs": 90000,
}


def bundled() -> dict[str, Any]:
    parsed = parse_spec(
        {
            "spec": AGENT_SPEC,
            "id": "a",
            "tools": {"servers": ["fs"]},
            "bundle": {"mcpServers": [copy.deepcopy(SERVER), {"id": "git", "env": {"K": "v"}}]},
        },
        bundle=True,
    )
    assert parsed.spec is not None
    return parsed.spec


def test_export_strips_env_and_headers_from_bundled_servers() -> None:
    servers = export_spec(bundled())["bundle"]["mcpServers"]
    assert servers == [
        {
            "slug": "fs",
            "command": "npx",
            "args": ["-y", "server-filesystem"],
            "callTimeoutMs": 90000,
        },
        {"id": "git"},
    ]


def test_export_keeps_secrets_when_asked() -> None:
    spec = bundled()
    assert export_spec(spec, secrets=True) == spec


def test_an_exported_document_parses_again_without_errors_or_warnings() -> None:
    parsed = parse_spec(export_spec(bundled()), bundle=True)
    assert parsed.errors == [] and parsed.warnings == []


def test_an_exported_document_resolves_to_the_same_agent_without_secrets() -> None:
    original = resolve_agent_spec([bundled()]).to_dict()
    exported = parse_spec(export_spec(bundled()), bundle=True).spec
    assert exported is not None
    again = resolve_agent_spec([exported]).to_dict()
    for server in original["mcpServers"]:
        server.pop("env", None)
        server.pop("headers", None)
    assert again == original


def test_export_leaves_a_document_without_a_bundle_unchanged() -> None:
    spec = parse_spec({"spec": AGENT_SPEC, "id": "a", "model": {"model": "m"}}).spec
    assert spec is not None
    assert export_spec(spec) == spec


def test_export_does_not_alter_the_given_document() -> None:
    spec = bundled()
    before = copy.deepcopy(spec)
    export_spec(spec)
    assert spec == before
