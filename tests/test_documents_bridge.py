"""An agent document as runtime definitions, run for real, and a project agent as a document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from standardagents import Runtime, define_agent, define_model, define_prompt
from standardagents.documents import load_document, parse_spec, resolve_agent_spec
from standardagents.documents.bridge import (
    API_KEY_ENV,
    agent_name_for,
    definitions_from_document,
    document_from_definitions,
    registry_from_document,
    translate_document,
)
from standardagents.engine.context import render_prompt
from standardagents.exceptions import DefinitionError
from standardagents.project import build_registry
from standardagents.store import open_store
from standardagents.testing.openai_stub import OpenAIStub


def full_document(base_url: str = "http://127.0.0.1:9/v1") -> dict[str, Any]:
    return {
        "spec": "cubicecho.agent/1",
        "id": "code-reviewer",
        "name": "Code Reviewer",
        "description": "Reviews diffs",
        "endpoint": {"baseUrl": base_url},
        "model": {
            "model": "qwen2.5-coder",
            "maxTokens": 2048,
            "temperature": 0.2,
            "contextLength": 32768,
            "extraBody": {"top_k": 20},
        },
        "prompt": [
            {"id": "persona", "text": "You review code.  "},
            {"id": "rules", "text": "Be brief.\nCite lines."},
        ],
        "retry": {"maxRetries": 3},
    }


def resolved_of(document: dict[str, Any]) -> Any:
    parsed = parse_spec(document)
    assert parsed.spec is not None, parsed.errors
    return resolve_agent_spec([parsed.spec])


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.fixture
def no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "STANDARDAGENTS_MODEL"):
        monkeypatch.delenv(name, raising=False)


def test_document_becomes_an_ai_human_agent_with_its_prompt_and_model() -> None:
    agent, prompt, model = definitions_from_document(resolved_of(full_document()))
    assert (agent.name, agent.type, agent.title) == ("code_reviewer", "ai_human", "Code Reviewer")
    assert agent.side_a.prompt == prompt.name
    assert prompt.model == model.name


def test_model_definition_carries_the_document_model_fields() -> None:
    document = full_document()
    model = definitions_from_document(resolved_of(document))[2]
    assert model.provider == "openai"
    assert model.model == document["model"]["model"]
    assert model.base_url == document["endpoint"]["baseUrl"]
    assert model.max_tokens == document["model"]["maxTokens"]
    assert model.temperature == document["model"]["temperature"]
    assert model.context_window == document["model"]["contextLength"]
    assert model.max_retries == document["retry"]["maxRetries"]
    assert model.extra_body == document["model"]["extraBody"]


def test_model_key_comes_from_the_host_environment_never_the_document() -> None:
    document = full_document()
    document["endpoint"]["apiKey"] = "sk-from-the-document"
    model = definitions_from_document(resolved_of(document))[2]
    assert model.api_key_env == API_KEY_ENV
    assert "sk-from-the-document" not in model.model_dump_json()


async def test_prompt_renders_the_document_system_prompt() -> None:
    resolved = resolved_of(full_document())
    definitions = definitions_from_document(resolved)
    registry = build_registry(*definitions)
    assert await render_prompt(definitions[1], None, registry, None) == resolved.system_prompt


def test_name_argument_overrides_the_document_id() -> None:
    agent = definitions_from_document(resolved_of(full_document()), name="reviewer")[0]
    assert agent.name == "reviewer"
    assert agent.side_a.prompt == "reviewer_prompt"


def test_invalid_name_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError) as caught:
        definitions_from_document(resolved_of(full_document()), name="Not A Name")
    assert any(where == "name" for where, _ in caught.value.problems)


@pytest.mark.parametrize(
    ("fields", "fallback", "expected"),
    [({"id": "My-Agent 2"}, "x", "my_agent_2"), ({"name": "9 Lives"}, "x", "lives"),
     ({}, "from_file", "from_file")],
)
def test_agent_name_is_snake_case_from_id_name_or_fallback(
    fields: dict[str, str], fallback: str, expected: str
) -> None:
    resolved = resolved_of({"spec": "cubicecho.agent/1", **fields})
    assert agent_name_for(resolved, fallback) == expected


def test_document_without_model_uses_the_default_model(no_openai_env: None) -> None:
    document = full_document()
    del document["model"]["model"]
    translation = translate_document(resolved_of(document))
    registry = build_registry(*translation.definitions)
    assert translation.model is None
    assert translation.prompt.model is None
    assert registry.get("models", "default").provider == "test"
    assert translation.prompt.max_tokens == document["model"]["maxTokens"]
    assert any(note.startswith("model.model") for note in translation.notes)


def test_document_without_base_url_uses_the_default_model(no_openai_env: None) -> None:
    document = full_document()
    del document["endpoint"]
    translation = translate_document(resolved_of(document))
    assert translation.model is None
    assert translation.extras["model"]["model"] == document["model"]["model"]


def test_what_the_runtime_cannot_run_is_noted_and_kept() -> None:
    document = full_document()
    document["tasks"] = {"title": {"model": "small"}}
    document["hooks"] = [{"id": "memo", "on": "afterTurn", "server": "mem", "tool": "save"}]
    document["tools"] = {"servers": []}
    translation = translate_document(resolved_of(document))
    assert translation.extras["tasks"] == document["tasks"]
    assert translation.extras["hooks"] == document["hooks"]
    assert translation.extras["tools"] == document["tools"]
    for marker in ("tasks.title", "'memo'", "tools.servers"):
        assert any(marker in note for note in translation.notes), marker


def test_prompt_ref_part_is_noted_and_left_out_of_the_prompt() -> None:
    document = full_document()
    document["prompt"].append({"id": "style", "ref": {"type": "file", "value": "style.md"}})
    translation = translate_document(resolved_of(document))
    assert any("style.md" in note for note in translation.notes)
    assert {"id": "style", "ref": {"type": "file", "value": "style.md"}} in translation.extras["prompt"]
    assert all("style" not in str(part) for part in translation.prompt.prompt)


def test_registry_from_document_names_the_agent_and_prefixes_warnings(tmp_path: Path) -> None:
    document = full_document()
    document["model"]["temperature"] = 9
    path = write(tmp_path / "reviewer.json", document)
    registry, name, notes = registry_from_document(path)
    assert name == "code_reviewer"
    assert registry.has("agents", name)
    assert f"{path}: model.temperature: must be between 0 and 2, and was dropped" in notes


def test_registry_from_document_layers_weakest_first(tmp_path: Path) -> None:
    base = write(tmp_path / "base.json", {"spec": "cubicecho.agent/1", "model": {"temperature": 1.5, "maxTokens": 99}})
    document = full_document()
    del document["model"]["temperature"]
    path = write(tmp_path / "doc.json", document)
    registry, name, _ = registry_from_document(path, layers=[base])
    model = registry.get("models", f"{name}_model")
    assert (model.temperature, model.max_tokens) == (1.5, document["model"]["maxTokens"])


def test_registry_from_document_raises_every_problem_with_its_file(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.json", {"spec": "cubicecho.agent/2", "prompt": {}, "hooks": 3})
    with pytest.raises(DefinitionError) as caught:
        registry_from_document(path)
    wheres = [where for where, _ in caught.value.problems]
    assert wheres == [f"{path}: spec", f"{path}: prompt", f"{path}: hooks"]


def test_agent_name_falls_back_to_the_file_stem(tmp_path: Path) -> None:
    path = write(tmp_path / "night-owl.json", {"spec": "cubicecho.agent/1"})
    _, name, _ = registry_from_document(path)
    assert name == "night_owl"


async def test_document_agent_sends_its_settings_to_the_endpoint(
    tmp_path: Path, stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(API_KEY_ENV, "sk-host")
    document = full_document(stub.base_url)
    path = write(tmp_path / "doc.json", document)
    registry, name, _ = registry_from_document(path)
    stub.queue("Looks fine.")
    store = open_store(f"sqlite:///{tmp_path / 'rt.db'}")
    async with await Runtime.open(registry, store=store) as rt:
        thread = await rt.create_thread(name)
        result = await rt.send(thread.id, "review this")
    body = stub.requests[0]
    assert result.text == "Looks fine."
    assert body["model"] == document["model"]["model"]
    assert body["max_tokens"] == document["model"]["maxTokens"]
    assert body["temperature"] == document["model"]["temperature"]
    assert body["top_k"] == document["model"]["extraBody"]["top_k"]
    expected_system = load_document(document)[0].system_prompt
    assert body["messages"][0] == {"role": "system", "content": expected_system}


# Export ------------------------------------------------------------------------------------


def test_export_renders_includes_and_env_defaults_into_parts() -> None:
    shared = define_prompt(name="shared", prompt="Be kind.")
    prompt = define_prompt(
        name="main_prompt",
        prompt=["Hello", {"type": "include", "prompt": "shared"},
                {"type": "env", "key": "team", "default": "core"}],
    )
    agent = define_agent(name="main", side_a={"prompt": "main_prompt"})
    registry = build_registry(agent, prompt, shared)
    document, notes = document_from_definitions(agent, prompt, None, registry=registry)
    resolved = load_document(document)[0]
    assert resolved.system_prompt == "HelloBe kind.core"
    assert any("'team'" in note for note in notes)


def test_export_keeps_paragraph_parts_apart() -> None:
    prompt = define_prompt(name="p", prompt=["One.", "\n\nTwo."])
    agent = define_agent(name="a", side_a={"prompt": "p"})
    document, _ = document_from_definitions(agent, prompt, None)
    assert [part["text"] for part in document["prompt"]] == ["One.", "Two."]


def test_export_writes_model_fields_and_no_key() -> None:
    model = define_model(name="m", model="gpt-x", base_url="http://h/v1", api_key_env="SECRET_VAR",
                         max_tokens=10, temperature=0.5, context_window=100, max_retries=1,
                         extra_body={"seed": 1})
    prompt = define_prompt(name="p", prompt="Hi.", model="m")
    agent = define_agent(name="a", side_a={"prompt": "p"})
    document, _ = document_from_definitions(agent, prompt, model)
    assert document["endpoint"] == {"baseUrl": "http://h/v1"}
    assert document["model"] == {"model": "gpt-x", "maxTokens": 10, "temperature": 0.5,
                                 "contextLength": 100, "extraBody": {"seed": 1}}
    assert document["retry"] == {"maxRetries": 1}
    assert "SECRET_VAR" not in json.dumps(document)


def test_export_of_a_dual_ai_agent_is_refused() -> None:
    prompt = define_prompt(name="p", prompt="Hi.")
    agent = define_agent(name="a", type="dual_ai", side_a={"prompt": "p"}, side_b={"prompt": "p"})
    with pytest.raises(DefinitionError) as caught:
        document_from_definitions(agent, prompt, None)
    assert caught.value.problems[0][0] == "type"
