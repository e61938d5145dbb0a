"""Providers built from configuration and shared per identical spec."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from standardagents.exceptions import DefinitionError, ProviderError
from standardagents.providers import (
    ModelProvider,
    ModelRequest,
    ModelResponse,
    OpenAIProvider,
    ProviderSpec,
    TestModelProvider,
    aclose_all,
    create_provider,
    register_provider,
)
from standardagents.testing import OpenAIStub


@pytest.fixture(autouse=True)
async def closed_afterwards() -> AsyncIterator[None]:
    yield
    await aclose_all()


async def test_identical_specs_share_one_provider() -> None:
    spec = ProviderSpec(provider="openai", base_url="http://127.0.0.1:9/v1", headers={"x-a": "1"})
    again = ProviderSpec(provider="openai", base_url="http://127.0.0.1:9/v1", headers={"x-a": "1"})
    assert create_provider(spec) is create_provider(again)


async def test_different_specs_get_different_providers() -> None:
    first = create_provider(ProviderSpec(provider="openai", base_url="http://127.0.0.1:9/v1"))
    second = create_provider(ProviderSpec(provider="openai", base_url="http://127.0.0.1:10/v1"))
    assert first is not second


async def test_aclose_all_forgets_cached_providers() -> None:
    spec = ProviderSpec(provider="test")
    first = create_provider(spec)
    await aclose_all()
    assert create_provider(spec) is not first


async def test_test_provider_is_built_by_name() -> None:
    assert isinstance(create_provider(ProviderSpec(provider="test")), TestModelProvider)


async def test_openai_spec_reaches_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TEST_KEY", "sk-env")
    async with OpenAIStub() as stub:
        provider = create_provider(ProviderSpec(provider="openai", base_url=stub.base_url,
                                                api_key_env="MY_TEST_KEY"))
        assert isinstance(provider, OpenAIProvider)
        response = await provider.request(ModelRequest(model="m", messages=[{"role": "user", "content": "x"}]))
        await aclose_all()
    assert response.text == "ok"


def test_missing_key_environment_variable_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MISSING_KEY_VAR", raising=False)
    with pytest.raises(ProviderError, match="MISSING_KEY_VAR"):
        create_provider(ProviderSpec(provider="openai", api_key_env="MISSING_KEY_VAR"))


def test_unknown_provider_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError, match="nope"):
        create_provider(ProviderSpec(provider="nope"))


async def test_registered_factory_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from standardagents.providers import factory

    # the registration (and the provider it builds) stay within this test
    monkeypatch.setattr(factory, "_FACTORIES", dict(factory._FACTORIES))
    monkeypatch.setattr(factory, "_CACHE", {})

    class Fixed(ModelProvider):
        def __init__(self, text: str) -> None:
            self.text = text

        async def request(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(text=self.text)

    register_provider("fixed", lambda spec: Fixed(str(spec.options["text"])))
    provider = create_provider(ProviderSpec(provider="fixed", options={"text": "hello"}))
    reply = await provider.request(ModelRequest(model="m", messages=[]))
    assert reply.text == "hello"
    assert "fixed" in factory.registered_providers()
