"""load_document: files and dicts, every layer's problems reported together."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from standardagents.documents import AGENT_SPEC, load_document
from standardagents.exceptions import DefinitionError


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_a_document_file_loads_and_resolves(tmp_path: Path) -> None:
    path = write(tmp_path / "agent.json", {"spec": AGENT_SPEC, "id": "a", "model": {"model": "m"}})
    agent, warnings, sources = load_document(path)
    assert (agent.id, agent.model) == ("a", "m")
    assert warnings == []
    assert sources == [str(path)]


def test_layers_resolve_beneath_the_document(tmp_path: Path) -> None:
    settings = write(
        tmp_path / "settings.json",
        {"spec": AGENT_SPEC, "endpoint": {"baseUrl": "http://a/v1"}, "model": {"model": "base"}},
    )
    agent, _, sources = load_document(
        {"spec": AGENT_SPEC, "model": {"model": "top"}}, layers=[settings]
    )
    assert (agent.base_url, agent.model) == ("http://a/v1", "top")
    assert sources == [str(settings), "document"]


def test_warnings_are_prefixed_with_their_source(tmp_path: Path) -> None:
    path = write(tmp_path / "agent.json", {"spec": AGENT_SPEC, "model": {"temperature": 5}})
    _, warnings, _ = load_document(path)
    assert warnings == [f"{path}: model.temperature: must be between 0 and 2, and was dropped"]


def test_errors_from_every_layer_are_raised_together(tmp_path: Path) -> None:
    bad_layer = write(tmp_path / "settings.json", {"spec": "cubicecho.agent/2"})
    bad_json = tmp_path / "broken.json"
    bad_json.write_text("{not json", encoding="utf-8")
    missing = tmp_path / "missing.json"
    with pytest.raises(DefinitionError) as caught:
        load_document({"prompt": {}}, layers=[bad_layer, bad_json, missing])
    wheres = [where for where, _ in caught.value.problems]
    assert wheres == [
        f"{bad_layer}: spec",
        str(bad_json),
        str(missing),
        "document: spec",
        "document: prompt",
    ]
    message = str(caught.value)
    assert "is version 2" in message and "not valid JSON" in message and "cannot be read" in message


def test_the_bundle_opt_in_reaches_every_layer(tmp_path: Path) -> None:
    document = {"spec": AGENT_SPEC, "bundle": {"mcpServers": [{"slug": "fs"}]}}
    without, warnings, _ = load_document(document)
    with_bundle, _, _ = load_document(document, bundle=True)
    assert without.mcp_servers == () and warnings[0].startswith("document: bundle: ")
    assert with_bundle.mcp_servers == ({"slug": "fs"},)


def test_understands_refuses_an_unknown_requirement(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match="not understood"):
        load_document({"spec": AGENT_SPEC, "requires": ["x.y"]}, understands=())
