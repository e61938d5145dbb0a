"""Helpers for engine tests (imported by test modules)."""

from __future__ import annotations

from typing import Any

from standardagents import define_model
from standardagents.testing.openai_stub import OpenAIStub


def stub_model(stub: OpenAIStub, *, name: str = "default", stream: bool = True, **extra: Any) -> Any:
    """A model definition pointing at the stub through the OpenAI provider."""
    return define_model(name=name, provider="openai", model="stub-model", base_url=stub.base_url,
                        stream=stream, max_retries=extra.pop("max_retries", 0), **extra)
