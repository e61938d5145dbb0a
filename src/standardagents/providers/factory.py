"""Providers chosen by configuration: a :class:`ProviderSpec` names one, the factory builds it.

Identical specs share one provider instance, and so one connection pool per endpoint, which
is what lets many concurrent threads reuse keep-alive connections. New provider kinds are
added with :func:`register_provider`, without touching the engine; a project's
``define_provider`` definitions are registered this way when the project loads
(:mod:`.defined`), and the built-in ``gemini`` provider is one such definition.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import DefinitionError, ProviderError
from .base import ModelProvider

__all__ = [
    "ProviderFactory",
    "ProviderSpec",
    "aclose_all",
    "build_provider",
    "create_provider",
    "register_provider",
    "registered_providers",
    "unregister_provider",
]


@dataclass(frozen=True)
class ProviderSpec:
    """Where and how to reach a model endpoint.

    ``api_key_env`` names an environment variable read when ``api_key`` is not given.
    ``headers`` and ``options`` are mappings (stored as given; compared by value for caching).
    """

    provider: str = "openai"
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    timeout: float = 60.0
    max_retries: int = 2
    headers: Mapping[str, str] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def resolved_api_key(self) -> str | None:
        """The explicit key, else the one in ``api_key_env`` (``None`` lets the provider decide)."""
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if not value:
                raise ProviderError(
                    f"environment variable {self.api_key_env} is not set; it should hold the "
                    f"API key for the {self.provider!r} provider", code="missing_api_key")
            return value
        return None

    def cache_key(self) -> tuple[Any, ...]:
        def freeze(value: Any) -> Any:
            if isinstance(value, Mapping):
                return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
            if isinstance(value, list | tuple | set):
                return tuple(freeze(v) for v in value)
            return value

        return (self.provider, self.base_url, self.resolved_api_key(), self.timeout,
                self.max_retries, freeze(self.headers or {}), freeze(self.options))


ProviderFactory = Callable[[ProviderSpec], ModelProvider]


def _openai(spec: ProviderSpec) -> ModelProvider:
    from .openai import OpenAIProvider
    from .reasoning import with_reasoning

    return with_reasoning(OpenAIProvider, "openai")(spec.base_url, spec.resolved_api_key(), timeout=spec.timeout,
                          max_retries=spec.max_retries, headers=spec.headers, **dict(spec.options))


def _anthropic(spec: ProviderSpec) -> ModelProvider:
    from .anthropic import AnthropicProvider
    from .reasoning import with_reasoning

    return with_reasoning(AnthropicProvider, "anthropic")(spec.base_url, spec.resolved_api_key(), timeout=spec.timeout,
                             max_retries=spec.max_retries, headers=spec.headers, **dict(spec.options))


def _test(spec: ProviderSpec) -> ModelProvider:
    from .testmodel import TestModelProvider

    return TestModelProvider(**dict(spec.options))


def _gemini(spec: ProviderSpec) -> ModelProvider:
    from .defined import build_defined
    from .gemini import gemini

    return build_defined(gemini, spec)


_FACTORIES: dict[str, ProviderFactory] = {"openai": _openai, "anthropic": _anthropic, "gemini": _gemini, "test": _test}
_BUILTIN = frozenset(_FACTORIES)
_CACHE: dict[tuple[Any, ...], ModelProvider] = {}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``ProviderSpec(provider=name)`` build providers with ``factory``."""
    if not name:
        raise DefinitionError("a provider needs a non-empty name")
    _FACTORIES[name] = factory


def unregister_provider(name: str) -> None:
    """Forget a provider kind added with :func:`register_provider` (built-ins stay)."""
    if name not in _BUILTIN:
        _FACTORIES.pop(name, None)


def registered_providers() -> list[str]:
    """The provider names :func:`create_provider` accepts."""
    return sorted(_FACTORIES)


def build_provider(spec: ProviderSpec) -> ModelProvider:
    """A new provider for ``spec``, owned by the caller (who closes it)."""
    factory = _FACTORIES.get(spec.provider)
    if factory is None:
        raise DefinitionError([("provider", f"unknown provider {spec.provider!r}; known: "
                                            + ", ".join(registered_providers()))])
    return factory(spec)


def create_provider(spec: ProviderSpec) -> ModelProvider:
    """The shared provider for ``spec`` (built on first use, closed by :func:`aclose_all`)."""
    key = spec.cache_key()
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    provider = build_provider(spec)
    _CACHE[key] = provider
    return provider


async def aclose_all() -> None:
    """Close every cached provider and forget them (the next use builds fresh ones)."""
    providers = list(_CACHE.values())
    _CACHE.clear()
    await asyncio.gather(*(p.aclose() for p in providers), return_exceptions=True)
