"""Providers a project defines: config slots, overrides, model lists, reasoning, inspection.

The provider under test is a gateway in front of an OpenAI-compatible endpoint (the OpenAI
wire stub on 127.0.0.1), defined in a project's ``agents/providers/`` the way a user writes
it, and reached through ``define_model(provider="gateway")``.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mypy_run import run_mypy
from standardagents import Runtime, define_model, define_provider, provider_env, provider_value
from standardagents.definitions import ProviderModelsQuery, map_reasoning_level
from standardagents.exceptions import DefinitionError, ProjectError, ProviderError
from standardagents.project import load_project, validate_project
from standardagents.providers import ModelRequest
from standardagents.providers.defined import (
    build_defined,
    clear_provider_values,
    list_models,
    registered_definitions,
    set_provider_values,
    unregister_definition,
)
from standardagents.providers.factory import ProviderSpec, build_provider
from standardagents.providers.inspect import inspect_request
from standardagents.providers.openai import OpenAIProvider
from standardagents.testing.openai_stub import OpenAIStub, StubReply

DOCS = Path(__file__).resolve().parents[1] / "docs" / "providers.md"


def docs_block(first_line: str) -> str:
    """The python block of docs/providers.md that starts with ``first_line``."""
    found = re.search(r"```python\n(" + re.escape(first_line) + r"\n.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert found, f"docs/providers.md shows {first_line}"
    return found[1]


GATEWAY = docs_block("# agents/providers/gateway.py")

FILES = {
    "agents/agents/assistant.py": 'from standardagents import define_agent\n'
                                  'assistant = define_agent(name="assistant", side_a={"prompt": "main", "stop_on_response": True})\n',
    "agents/prompts/main.py": 'from standardagents import define_prompt\n'
                              'main = define_prompt(name="main", prompt="You help.", model="fast")\n',
    "agents/models/fast.py": docs_block("# agents/models/fast.py"),
    "agents/providers/gateway.py": GATEWAY,
}

SECRET = "sk-gw-0123456789"


def write_project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(autouse=True)
def forget_providers() -> Iterator[None]:
    yield
    clear_provider_values()
    for name in list(registered_definitions()):
        unregister_definition(name)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "proj", FILES)


@pytest.fixture
def configured(stub: OpenAIStub, project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GATEWAY_API_KEY", SECRET)
    set_provider_values("gateway", base_url=stub.base_url, tenant="acme")
    return project


@pytest.fixture
async def runtime(configured: Path, tmp_path: Path) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(load_project(configured), database_url=f"sqlite+aiosqlite:///{tmp_path / 'rt.db'}")
    yield rt
    await rt.aclose()


def ask(model: str = "fast-1", **fields: Any) -> ModelRequest:
    return ModelRequest(model=model, messages=[{"role": "user", "content": "hi"}], **fields)


# -- a turn through the defined provider ---------------------------------------------------

async def test_a_turn_on_a_project_provider_reaches_its_endpoint(stub: OpenAIStub, runtime: Runtime) -> None:
    stub.queue(StubReply(text="Hello from the gateway."))
    result = await runtime.run("assistant", "hi")
    assert (result.stop_reason, result.text) == ("complete", "Hello from the gateway.")
    assert stub.requests[0]["model"] == "fast-1"


async def test_the_override_header_carries_a_slot_value_and_the_key_comes_from_the_environment(
        stub: OpenAIStub, runtime: Runtime) -> None:
    await runtime.run("assistant", "hi")
    headers = stub.request_headers[0]
    assert (headers["x-tenant"], headers["authorization"]) == ("acme", f"Bearer {SECRET}")


async def test_the_override_body_field_is_sent_with_the_request(stub: OpenAIStub, runtime: Runtime) -> None:
    await runtime.run("assistant", "hi")
    assert stub.requests[0]["gateway_route"] == "fast"


async def test_the_models_own_extra_body_wins_over_the_override_body(stub: OpenAIStub, configured: Path) -> None:
    model = define_model(name="m", provider="gateway", model="fast-1", extra_body={"gateway_route": "slow"})
    load_project(configured)
    provider = build_provider(ProviderSpec(provider="gateway"))
    try:
        await provider.request(ask(extra_body=dict(model.extra_body)))
    finally:
        await provider.aclose()
    assert stub.requests[0]["gateway_route"] == "slow"


# -- configuration slots ------------------------------------------------------------------

async def test_a_missing_slot_says_where_it_looked(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GATEWAY_API_KEY", raising=False)
    load_project(project)
    set_provider_values("gateway", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ProviderError) as caught:
        build_provider(ProviderSpec(provider="gateway"))
    assert str(caught.value) == (
        "provider 'gateway' is missing configuration: api_key (looked in the environment variable GATEWAY_API_KEY "
        "(not set)); tenant (looked in the runtime value 'tenant' (not supplied: call "
        "set_provider_values('gateway', tenant=...)))")
    assert caught.value.code == "missing_config"


async def test_a_turn_whose_provider_lacks_a_slot_fails_with_that_message(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_API_KEY", SECRET)
    set_provider_values("gateway", base_url="http://127.0.0.1:9/v1")
    rt = await Runtime.open(load_project(project), database_url=f"sqlite+aiosqlite:///{tmp_path / 'rt.db'}")
    try:
        result = await rt.run("assistant", "hi")
    finally:
        await rt.aclose()
    assert result.stop_reason == "error"
    assert result.error == ("provider 'gateway' is missing configuration: tenant (looked in the runtime value "
                            "'tenant' (not supplied: call set_provider_values('gateway', tenant=...)))")


async def test_an_environment_slot_takes_the_first_variable_that_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FIRST_KEY", raising=False)
    monkeypatch.setenv("SECOND_KEY", "from-second")
    seen: list[Any] = []
    definition = define_provider(name="pair", config={"api_key": provider_env("FIRST_KEY", "SECOND_KEY")},
                                 factory=lambda config: seen.append(config["api_key"]) or OpenAIProvider(
                                     "http://127.0.0.1:9/v1", config["api_key"]))
    await build_defined(definition).aclose()
    assert seen == ["from-second"]


async def test_values_given_for_one_build_take_the_place_of_supplied_ones() -> None:
    seen: list[str] = []
    definition = define_provider(name="region", config={"region": provider_value("region")},
                                 factory=lambda config: seen.append(config["region"]) or OpenAIProvider(
                                     "http://127.0.0.1:9/v1", "k"))
    set_provider_values("region", region="eu")
    await build_defined(definition, values={"region": "us"}).aclose()
    assert seen == ["us"]


async def test_a_config_repr_never_shows_a_secret(configured: Path) -> None:
    from standardagents.providers.defined import resolve_config

    load_project(configured)
    config = resolve_config(registered_definitions()["gateway"])
    assert SECRET not in repr(config)
    assert "'api_key': '[redacted]'" in repr(config)


async def test_an_error_echoing_the_key_reaches_the_caller_redacted(stub: OpenAIStub, configured: Path) -> None:
    stub.queue(StubReply(error_status=401, error_body={"error": {"message": f"key {SECRET} is revoked"}}))
    load_project(configured)
    provider = build_provider(ProviderSpec(provider="gateway", max_retries=0))
    try:
        with pytest.raises(ProviderError) as caught:
            await provider.request(ask())
    finally:
        await provider.aclose()
    assert str(caught.value) == "model endpoint answered HTTP 401 (check the API key): key [redacted] is revoked"
    assert caught.value.status == 401
    assert caught.value.body == {"message": "key [redacted] is revoked"}


async def test_a_streamed_error_echoing_the_key_reaches_the_caller_redacted(stub: OpenAIStub, configured: Path) -> None:
    stub.queue(StubReply(error_status=400, error_body={"error": {"message": f"bad key {SECRET}"}}))
    load_project(configured)
    provider = build_provider(ProviderSpec(provider="gateway", max_retries=0))
    try:
        with pytest.raises(ProviderError) as caught:
            async for _ in provider.stream(ask()):
                pass
    finally:
        await provider.aclose()
    assert str(caught.value) == "model endpoint answered HTTP 400: bad key [redacted]"


# -- request and response functions --------------------------------------------------------

async def test_a_request_function_changes_what_is_sent(stub: OpenAIStub) -> None:
    def tag(request: ModelRequest, context: Any) -> ModelRequest:
        request.messages = [{"role": "system", "content": f"for {context.model}"}, *request.messages]
        return request

    definition = define_provider(name="tagger", extends="openai", config={"base_url": provider_value("base_url")},
                                 override={"request": tag})
    provider = build_defined(definition, values={"base_url": stub.base_url})
    try:
        await provider.request(ask())
    finally:
        await provider.aclose()
    assert stub.requests[0]["messages"] == [{"role": "system", "content": "for fast-1"},
                                            {"role": "user", "content": "hi"}]


async def test_a_response_function_sees_the_assembled_stream(stub: OpenAIStub) -> None:
    async def shout(response: Any, context: Any) -> Any:
        response.text = response.text.upper()
        return response

    stub.queue(StubReply(text="quiet words", chunk_size=3))
    definition = define_provider(name="shouter", extends="openai", config={"base_url": provider_value("base_url")},
                                 override={"response": shout})
    provider = build_defined(definition, values={"base_url": stub.base_url})
    try:
        deltas = [d async for d in provider.stream(ask())]
    finally:
        await provider.aclose()
    assert deltas[-1].response.text == "QUIET WORDS"  # type: ignore[union-attr]


async def test_a_factory_receives_the_resolved_config_and_the_models_connection_settings(stub: OpenAIStub) -> None:
    seen: dict[str, Any] = {}

    def make(config: Any) -> OpenAIProvider:
        seen.update(config=dict(config), timeout=config.timeout, headers=config.headers)
        return OpenAIProvider(config["base_url"], "k")

    definition = define_provider(name="own", config={"base_url": provider_value("base_url", secret=False)},
                                 factory=make)
    provider = build_defined(definition, ProviderSpec(provider="own", timeout=12.0, headers={"x-a": "1"}),
                             values={"base_url": stub.base_url})
    await provider.aclose()
    assert seen == {"config": {"base_url": stub.base_url}, "timeout": 12.0, "headers": {"x-a": "1"}}


async def test_a_factory_returning_something_else_is_a_clear_error() -> None:
    definition = define_provider(name="broken", factory=lambda config: "not a provider")
    with pytest.raises(ProviderError) as caught:
        build_defined(definition)
    assert str(caught.value) == ("the factory of provider 'broken' returned str, not a model provider "
                                 "(a subclass of standardagents.providers.ModelProvider)")


async def test_the_docs_factory_example_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ECHO_PREFIX", raising=False)
    namespace: dict[str, Any] = {}
    exec(docs_block("from standardagents import define_provider, provider_env"), namespace)
    provider = build_defined(namespace["echo"])
    assert (await provider.request(ask())).text == "> hi"


# -- model lists --------------------------------------------------------------------------

async def test_models_are_listed_in_pages(project: Path) -> None:
    load_project(project)
    first = await list_models("gateway", {"limit": 2})
    second = await list_models("gateway", {"limit": 2, "cursor": first.next_cursor})
    assert ([m.id for m in first.models], first.next_cursor) == (["fast-1", "think-1"], "2")
    assert ([m.id for m in second.models], second.next_cursor) == (["fast-2"], None)


async def test_models_carry_their_capabilities_and_prices(project: Path) -> None:
    load_project(project)
    page = await list_models("gateway")
    fast, think = page.models[0], page.models[1]
    assert (fast.capabilities.context_window, fast.prices.input if fast.prices else None) == (128000, 0.1)
    assert (think.name, think.capabilities.reasoning_levels, think.capabilities.vision) == ("Thinker", ["low", "high"], True)


async def test_a_model_list_is_filtered_by_capability(project: Path) -> None:
    load_project(project)
    assert [m.id for m in (await list_models("gateway", {"reasoning": True})).models] == ["think-1"]
    assert [m.id for m in (await list_models("gateway", ProviderModelsQuery(tools=False))).models] == ["fast-2"]


async def test_a_model_list_function_pages_itself_with_the_resolved_config() -> None:
    def pages(query: ProviderModelsQuery, config: Any) -> dict[str, Any]:
        return {"models": [{"id": f"{config['region']}-{query.cursor or 'start'}"}], "next_cursor": None}

    definition = define_provider(name="lister", factory=lambda config: None, models=pages,
                                 config={"region": provider_value("region")})
    page = await list_models(definition, {"cursor": "p2"}, values={"region": "eu"})
    assert ([m.id for m in page.models], page.next_cursor) == (["eu-p2"], None)


async def test_a_cursor_from_elsewhere_is_refused(project: Path) -> None:
    load_project(project)
    with pytest.raises(ProviderError) as caught:
        await list_models("gateway", {"cursor": "abc"})
    assert str(caught.value) == "cursor 'abc' does not come from a page of provider 'gateway'"


# -- reasoning ----------------------------------------------------------------------------

def test_a_level_the_table_lacks_takes_its_nearest_neighbour() -> None:
    table = {"none": 0, "low": 1, "high": 3}
    assert [map_reasoning_level(level, table) for level in ("none", "minimal", "low", "medium", "high")] == [0, 1, 1, 3, 3]


async def test_openai_reasoning_is_sent_as_reasoning_effort() -> None:
    model = define_model(name="m", provider="openai", model="o4", base_url="http://127.0.0.1:9/v1", reasoning="medium")
    shown = await inspect_request(model, [{"role": "user", "content": "hi"}])
    assert shown.body["reasoning_effort"] == "medium"


async def test_anthropic_reasoning_is_sent_as_a_thinking_budget_above_max_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    model = define_model(name="m", provider="anthropic", model="claude", base_url="http://127.0.0.1:9", reasoning="high")
    shown = await inspect_request(model, [{"role": "user", "content": "hi"}])
    assert (shown.body["thinking"], shown.body["max_tokens"]) == ({"type": "enabled", "budget_tokens": 24576}, 28672)


async def test_gemini_reasoning_is_sent_as_a_thinking_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "g-key")
    model = define_model(name="m", provider="gemini", model="gemini-2.5-flash", base_url="http://127.0.0.1:9",
                         reasoning="low")
    shown = await inspect_request(model, [{"role": "user", "content": "hi"}])
    assert shown.body["generationConfig"]["thinkingConfig"] == {"include_thoughts": True, "thinking_budget": 1024}


async def test_a_defined_provider_maps_reasoning_with_its_own_function(configured: Path) -> None:
    load_project(configured)
    model = define_model(name="m", provider="gateway", model="think-1", reasoning="medium")
    shown = await inspect_request(model, [{"role": "user", "content": "hi"}])
    assert (shown.body["reasoning"], "reasoning_effort" in shown.body) == ({"effort": "high"}, False)


async def test_a_models_reasoning_level_reaches_the_endpoint_in_a_turn(stub: OpenAIStub, make_runtime: Any) -> None:
    from standardagents import define_agent, define_prompt

    rt = await make_runtime(define_agent(name="a", side_a={"prompt": "p", "stop_on_response": True}),
                            define_prompt(name="p", prompt="Think.", model="thinker"),
                            define_model(name="thinker", model="o4", base_url=stub.base_url, reasoning="high"))
    await rt.run("a", "hi")
    assert stub.requests[0]["reasoning_effort"] == "high"


async def test_a_defined_providers_reasoning_mapping_applies_in_a_turn(stub: OpenAIStub, configured: Path,
                                                                        tmp_path: Path) -> None:
    root = write_project(configured, {"agents/models/fast.py": 'from standardagents import define_model\n'
                                      'fast = define_model(name="fast", provider="gateway", model="think-1", reasoning="low")\n'})
    rt = await Runtime.open(load_project(root), database_url=f"sqlite+aiosqlite:///{tmp_path / 'rt.db'}")
    try:
        await rt.run("assistant", "hi")
    finally:
        await rt.aclose()
    assert (stub.requests[0]["reasoning"], "reasoning_effort" in stub.requests[0]) == ({"effort": "low"}, False)


# -- inspection ---------------------------------------------------------------------------

async def test_inspection_shows_the_url_headers_and_body_without_sending(stub: OpenAIStub, configured: Path) -> None:
    load_project(configured)
    model = define_model(name="m", provider="gateway", model="fast-1", stream=False)
    shown = await inspect_request(model, [{"role": "user", "content": "hi"}])
    assert (shown.method, shown.url, shown.stream) == ("POST", f"{stub.base_url}/chat/completions", False)
    assert (shown.headers["authorization"], shown.headers["x-tenant"]) == ("[redacted]", "acme")
    assert shown.body == {"model": "fast-1", "messages": [{"role": "user", "content": "hi"}], "gateway_route": "fast"}
    assert stub.requests == []


async def test_inspection_never_shows_a_secret_anywhere(stub: OpenAIStub, configured: Path) -> None:
    load_project(configured)
    model = define_model(name="m", provider="gateway", model="fast-1", headers={"x-echo": f"k={SECRET}"})
    shown = await inspect_request(model, [{"role": "user", "content": SECRET}])
    assert SECRET not in json.dumps(shown.to_dict())
    assert shown.headers["x-echo"] == "k=[redacted]"


async def test_a_streamed_call_is_inspected_with_its_stream_fields(stub: OpenAIStub, configured: Path) -> None:
    load_project(configured)
    shown = await inspect_request(define_model(name="m", provider="gateway", model="fast-1"),
                                  [{"role": "user", "content": "hi"}])
    assert (shown.stream, shown.body["stream"], shown.body["stream_options"]) == (True, True, {"include_usage": True})


async def test_a_provider_of_your_own_without_inspection_says_so() -> None:
    from standardagents.definitions.provider import ProviderDefinition
    from standardagents.providers.defined import register_definition

    own: ProviderDefinition = define_provider(name="opaque", factory=lambda config: OpenAIProvider("http://127.0.0.1:9/v1", "k"))
    register_definition(own)
    with pytest.raises(ProviderError) as caught:
        await inspect_request(define_model(name="m", provider="opaque", model="x"), [{"role": "user", "content": "hi"}])
    assert str(caught.value) == ("provider 'opaque' cannot show its requests: its instance (OpenAIProvider) "
                                 "has no inspect_request method")


async def test_the_docs_openai_compatible_configurations_send_where_they_say(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    namespace: dict[str, Any] = {}
    exec(docs_block("# agents/models/local.py"), namespace)
    llama = await inspect_request(namespace["llama"], [{"role": "user", "content": "hi"}])
    router = await inspect_request(namespace["router"], [{"role": "user", "content": "hi"}])
    assert (llama.url, llama.body["model"]) == ("http://127.0.0.1:11434/v1/chat/completions", "llama3.2")
    assert (router.url, router.headers["authorization"], router.headers["x-title"]) == (
        "https://openrouter.ai/api/v1/chat/completions", "[redacted]", "My agents")


# -- definitions and loading --------------------------------------------------------------

@pytest.mark.parametrize(("fields", "problem"), [
    ({"name": "p"}, "factory: give exactly one of factory (your own instance) and extends (a built-in provider: "
                    "openai, anthropic, gemini)"),
    ({"name": "p", "extends": "openai", "override": {"headers": {"X-Key": "{gateway_key}"}}},
     "override.headers.X-Key: {gateway_key} names no config slot (known: none)"),
    ({"name": "p", "extends": "openai", "config": {"api_key": {"source": "const", "value": "sk-1"}}},
     "config: api_key: definitions never carry credentials: read it with provider_env(...) or provider_value(...)"),
    ({"name": "My Provider", "extends": "openai"},
     "name: 'My Provider' is not a provider name (lowercase letters, digits, '-' and '_', starting with a letter)"),
    ({"name": "p", "extends": "bedrock"}, "extends: Input should be 'openai', 'anthropic' or 'gemini'"),
])
def test_a_bad_definition_is_one_clear_error(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        define_provider(fields)
    assert str(caught.value).split(": ", 1)[1] == problem


def test_camel_case_fields_load_as_the_spec_writes_them() -> None:
    definition = define_provider({"name": "p", "extends": "openai",
                                  "models": [{"id": "m", "capabilities": {"reasoningLevels": ["high"], "contextWindow": 8}}]})
    assert definition.models[0].capabilities.reasoning_levels == ["high"]  # type: ignore[index]


def test_a_project_provider_may_not_take_a_built_in_name(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {**FILES, "agents/providers/gateway.py": GATEWAY.replace('name="gateway"', 'name="openai"')})
    with pytest.raises(ProjectError) as caught:
        load_project(root)
    assert ("agents/providers/gateway.py", "name: 'openai' is a built-in provider; give yours another name "
            "(extends='openai' builds on it)") in caught.value.problems


def test_a_broken_provider_file_is_reported_with_its_file_and_field(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {**FILES, "agents/providers/gateway.py": GATEWAY.replace('extends="openai",', '')})
    problems = [str(p) for p in validate_project(root) if not p.warning]
    assert problems == ["agents/providers/gateway.py: factory: give exactly one of factory (your own instance) and "
                        "extends (a built-in provider: openai, anthropic, gemini)"]


def test_a_model_naming_no_known_provider_is_a_warning(tmp_path: Path) -> None:
    files = {k: v for k, v in FILES.items() if k != "agents/providers/gateway.py"}
    problems = validate_project(write_project(tmp_path / "p", files))
    (warning,) = [p for p in problems if "provider" in p.message]
    assert (warning.file, warning.warning) == ("agents/models/fast.py", True)
    assert warning.message.startswith("provider: no provider 'gateway' is built in or defined in agents/providers/")


def test_a_misspelt_field_is_flagged_by_the_type_checker(tmp_path: Path) -> None:
    source = tmp_path / "check.py"
    source.write_text(textwrap.dedent('''
        from standardagents import define_provider, provider_env

        ok = define_provider(name="a", extends="openai", config={"api_key": provider_env("K")},
                             override={"headers": {"X-A": "1"}}, models=[{"id": "m", "capabilities": {"vision": True}}])
        bad1 = define_provider(name="a", extend="openai")
        bad2 = define_provider(name="a", extends="bedrock")
        bad3 = define_provider(name="a", extends="openai", override={"header": {}})
        bad4 = define_provider(name="a", extends="openai", models=[{"id": "m", "capabilities": {"visoin": True}}])
    '''))
    out, _status = run_mypy(tmp_path, source.name)
    flagged = sorted({int(line.split(":")[1]) for line in out.splitlines()
                      if line.startswith(f"{source.name}:") and ": error:" in line})
    assert flagged == [6, 7, 8, 9], out
