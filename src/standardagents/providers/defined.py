"""Providers a project defines (``define_provider``): configuration, instances, model lists.

:func:`register_definition` makes ``ProviderSpec(provider=name)`` build a definition's
provider, which is how ``define_model(provider="acme")`` reaches it with no change to the
engine; loading a project registers the definitions under ``agents/providers/``.

An instance is built from the definition and the model's spec: every config slot is resolved
(a constant, the first set environment variable of its list, or the value the host program
supplied with :func:`set_provider_values`), then either the built-in provider named by
``extends`` is made with the override's headers, or the definition's ``factory`` is called.
The result is wrapped by :class:`DefinedProvider` only when there is something to do around
each call (body fields, request or response functions, a reasoning mapping, secrets to keep
out of errors); a stream passes through with no extra work per delta unless a response
function must see its end.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..definitions.provider import (
    BUILTIN_PROVIDERS,
    ProviderDefinition,
    ProviderFactoryConfig,
    ProviderModelsPage,
    ProviderModelsQuery,
    ProviderOverrideContext,
    fill_placeholders,
)
from ..exceptions import DefinitionError, ProviderError
from .base import ModelProvider, ModelRequest, ModelResponse, StreamDelta, StreamEnd
from .factory import ProviderSpec, build_provider, register_provider, unregister_provider

__all__ = [
    "DefinedProvider",
    "build_defined",
    "clear_provider_values",
    "definition_for",
    "list_models",
    "register_definition",
    "registered_definitions",
    "resolve_config",
    "scrub",
    "set_provider_values",
    "unregister_definition",
]

_VALUES: dict[str, dict[str, Any]] = {}
_DEFINITIONS: dict[str, ProviderDefinition] = {}
_REDACTED = "[redacted]"


# -- runtime values -----------------------------------------------------------------------

def set_provider_values(provider: str, /, **values: Any) -> None:
    """Supply the ``provider_value`` slots of ``provider`` for this process (merged with
    what was supplied before). Values given here are never written anywhere."""
    _VALUES.setdefault(provider, {}).update(values)


def clear_provider_values(provider: str | None = None) -> None:
    """Forget the runtime values of ``provider`` (of every provider when None)."""
    if provider is None:
        _VALUES.clear()
    else:
        _VALUES.pop(provider, None)


# -- registration -------------------------------------------------------------------------

def register_definition(definition: ProviderDefinition) -> None:
    """Make ``ProviderSpec(provider=definition.name)`` build this definition's provider
    (replacing an earlier definition of that name). Built-in names are refused."""
    if definition.name in BUILTIN_PROVIDERS:
        raise DefinitionError([("name", f"{definition.name!r} is a built-in provider; give yours another name "
                                        f"(extends={definition.name!r} builds on it)")],
                              source=definition.source_file or f"provider {definition.name!r}")
    _DEFINITIONS[definition.name] = definition
    register_provider(definition.name, functools.partial(build_defined, definition))


def unregister_definition(name: str) -> None:
    """Forget the definition registered under ``name``."""
    if _DEFINITIONS.pop(name, None) is not None:
        unregister_provider(name)


def registered_definitions() -> dict[str, ProviderDefinition]:
    """The provider definitions registered in this process, by name."""
    return dict(_DEFINITIONS)


def definition_for(name: str) -> ProviderDefinition | None:
    """The definition of provider ``name``: a registered one, or the built-in ``gemini``."""
    found = _DEFINITIONS.get(name)
    if found is None and name == "gemini":
        from .gemini import gemini

        found = gemini
    return found


# -- configuration ------------------------------------------------------------------------

def resolve_config(definition: ProviderDefinition, *, values: Mapping[str, Any] | None = None,
                   spec: ProviderSpec | None = None) -> ProviderFactoryConfig:
    """Every slot's value, or one :class:`ProviderError` (code ``missing_config``) naming each
    required slot left empty and where it looked. A model's ``base_url`` and key (its
    ``api_key_env``) fill the ``base_url`` and ``api_key`` slots ahead of their sources."""
    import os

    supplied = {**_VALUES.get(definition.name, {}), **(values or {})}
    found: dict[str, Any] = {}
    secret: set[str] = set()
    missing: list[str] = []
    from_model = {"base_url": spec.base_url if spec else None, "api_key": spec.api_key if spec else None}
    for name, slot in definition.config.items():
        if slot.is_secret(name):
            secret.add(name)
        value: Any = from_model.get(name)
        if value is None:
            if slot.source == "const":
                value = slot.value
            elif slot.source == "env":
                value = next((os.environ[n] for n in slot.env if os.environ.get(n)), None)
            else:
                value = supplied.get(slot.key or name)
        if value is None:
            value = slot.default
        if value is None:
            if slot.required:
                missing.append(f"{name} (looked in {slot.where(definition.name, name)})")
            continue
        found[name] = value
    if missing:
        raise ProviderError(f"provider {definition.name!r} is missing configuration: " + "; ".join(missing),
                            code="missing_config", retriable=False)
    if spec is None:
        return ProviderFactoryConfig(definition.name, found, frozenset(secret))
    return ProviderFactoryConfig(definition.name, found, frozenset(secret), spec.options, timeout=spec.timeout,
                                 max_retries=spec.max_retries, headers=spec.headers)


# -- secrets ------------------------------------------------------------------------------

def _scrub_value(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for item in secrets:
            if item in value:
                value = value.replace(item, _REDACTED)
        return value
    if isinstance(value, Mapping):
        return {k: _scrub_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub_value(v, secrets) for v in value]
    return value


def _mentions(value: Any, secrets: list[str]) -> bool:
    if isinstance(value, str):
        return any(item in value for item in secrets)
    if isinstance(value, Mapping):
        return any(_mentions(v, secrets) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_mentions(v, secrets) for v in value)
    return False


def scrub(exc: BaseException, secrets: list[str]) -> BaseException | None:
    """A copy of ``exc`` with every secret replaced, when it mentions one (else None)."""
    if not secrets:
        return None
    text = str(exc)
    body = getattr(exc, "body", None)
    if not _mentions(text, secrets) and not _mentions(body, secrets):
        return None
    if isinstance(exc, ProviderError):
        return ProviderError(_scrub_value(text, secrets), status=exc.status, body=_scrub_value(body, secrets),
                             retriable=exc.retriable, code=exc.code, before_first_token=exc.before_first_token,
                             retry_after=exc.retry_after)
    return ProviderError(f"{type(exc).__name__}: {_scrub_value(text, secrets)}", code="provider_failed")


# -- instances ----------------------------------------------------------------------------

async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class DefinedProvider(ModelProvider):
    """A defined provider around its instance: adds the override's body fields and the
    definition's reasoning mapping to each request, runs the request and response
    functions, and keeps secret values out of the errors it raises."""

    def __init__(self, definition: ProviderDefinition, inner: ModelProvider, config: ProviderFactoryConfig) -> None:
        self.name = definition.name
        self.definition = definition
        self.inner = inner
        self.config = config
        override = definition.override
        self._body = dict(override.body) if override is not None else {}
        self._on_request = override.request if override is not None else None
        self._on_response = override.response if override is not None else None
        self._reasoning = definition.reasoning
        self._secrets = config.secret_values()

    @staticmethod
    def needed(definition: ProviderDefinition, config: ProviderFactoryConfig) -> bool:
        """Whether an instance needs wrapping at all (else the bare instance serves)."""
        override = definition.override
        return bool(definition.reasoning is not None or config.secret_names
                    or (override is not None and (override.body or override.request or override.response)))

    def _fields(self, request: ModelRequest) -> ModelRequest:
        body = self._body
        reasoning = request.reasoning
        if reasoning is not None and self._reasoning is not None:
            body = {**body, **dict(self._reasoning(reasoning))}
            reasoning = None
        if not body and reasoning is request.reasoning:
            return request
        return dataclasses.replace(request, reasoning=reasoning, extra_body={**body, **request.extra_body})

    async def _prepare(self, request: ModelRequest, stream: bool) -> ModelRequest:
        request = self._fields(request)
        if self._on_request is not None:
            # the function may change the request and its lists in place: it gets copies
            request = dataclasses.replace(request, messages=list(request.messages), tools=list(request.tools),
                                          extra_body=dict(request.extra_body), metadata=dict(request.metadata))
            changed = await _maybe_await(self._on_request(request, self._context(request, stream)))
            if changed is not None:
                request = changed
        return request

    def _context(self, request: ModelRequest, stream: bool) -> ProviderOverrideContext:
        return ProviderOverrideContext(self.name, request.model, self.config, stream)

    async def _finish(self, response: ModelResponse, request: ModelRequest, stream: bool) -> ModelResponse:
        if self._on_response is None:
            return response
        changed = await _maybe_await(self._on_response(response, self._context(request, stream)))
        return changed if changed is not None else response

    def _clean(self, exc: BaseException) -> BaseException | None:
        return scrub(exc, self._secrets)

    async def request(self, request: ModelRequest) -> ModelResponse:
        try:
            prepared = await self._prepare(request, False)
            return await self._finish(await self.inner.request(prepared), prepared, False)
        except Exception as exc:
            clean = self._clean(exc)
            if clean is None:
                raise
            raise clean from None

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta]:
        if self._on_request is None and self._on_response is None and not self._secrets:
            return self.inner.stream(self._fields(request))
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta]:
        try:
            prepared = await self._prepare(request, True)
            deltas = self.inner.stream(prepared)
            try:
                async for delta in deltas:
                    if isinstance(delta, StreamEnd) and self._on_response is not None:
                        delta = StreamEnd(await self._finish(delta.response, prepared, True))
                    yield delta
            finally:
                close = getattr(deltas, "aclose", None)
                if close is not None:
                    await close()
        except Exception as exc:
            clean = self._clean(exc)
            if clean is None:
                raise
            raise clean from None

    async def prepared(self, request: ModelRequest, stream: bool) -> ModelRequest:
        """``request`` as this provider hands it to its instance (for inspection)."""
        return await self._prepare(request, stream)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _headers(definition: ProviderDefinition, config: ProviderFactoryConfig) -> dict[str, str]:
    headers: dict[str, str] = {}
    if definition.override is not None:
        headers.update({k: fill_placeholders(v, config) for k, v in definition.override.headers.items()})
    headers.update(config.headers)
    return headers


def build_defined(definition: ProviderDefinition, spec: ProviderSpec | None = None, *,
                  values: Mapping[str, Any] | None = None, http_client: Any = None) -> ModelProvider:
    """A new instance of ``definition``'s provider, owned by the caller (who closes it).

    ``spec`` carries what the model definition sets (timeout, retries, headers, options,
    and a ``base_url`` or key that take the place of those slots); ``http_client`` (a
    built-in's connection pool) reaches only providers that ``extends`` a built-in.
    """
    options = dict(spec.options) if spec is not None else {}
    http_client = options.pop("http_client", http_client)
    if spec is not None:
        spec = dataclasses.replace(spec, options=options)
    config = resolve_config(definition, values=values, spec=spec)
    secrets = config.secret_values()
    try:
        inner = _instance(definition, config, http_client)
    except ProviderError:
        raise
    except Exception as exc:
        clean = scrub(exc, secrets)
        if clean is None:
            raise
        raise clean from None
    if not DefinedProvider.needed(definition, config):
        return inner
    return DefinedProvider(definition, inner, config)


def _instance(definition: ProviderDefinition, config: ProviderFactoryConfig, http_client: Any) -> ModelProvider:
    if definition.extends is not None:
        base_options = {**config.options}
        if http_client is not None:
            base_options["http_client"] = http_client
        base = ProviderSpec(provider=definition.extends, base_url=config.get("base_url"), api_key=config.get("api_key"),
                            timeout=config.timeout, max_retries=config.max_retries,
                            headers=_headers(definition, config) or None, options=base_options)
        return build_provider(base)
    assert definition.factory is not None
    made = definition.factory(config)
    if not isinstance(made, ModelProvider):
        raise ProviderError(f"the factory of provider {definition.name!r} returned {type(made).__name__}, not a "
                            f"model provider (a subclass of standardagents.providers.ModelProvider)",
                            code="invalid_provider")
    return made


# -- model lists --------------------------------------------------------------------------

async def list_models(provider: str | ProviderDefinition, query: ProviderModelsQuery | Mapping[str, Any] | None = None, *,
                      values: Mapping[str, Any] | None = None) -> ProviderModelsPage:
    """One page of the models ``provider`` serves, filtered by ``query``.

    A listed definition is paged here (the cursor is opaque); a function lists its own pages
    and receives the resolved configuration (so it may call the provider's API).
    """
    definition = provider if isinstance(provider, ProviderDefinition) else definition_for(provider)
    if definition is None:
        raise ProviderError(f"provider {provider!r} has no definition to list models from", code="unknown_provider")
    asked = query if isinstance(query, ProviderModelsQuery) else ProviderModelsQuery.model_validate(dict(query or {}))
    if callable(definition.models):
        config = resolve_config(definition, values=values)
        page = await _maybe_await(definition.models(asked, config))
        return page if isinstance(page, ProviderModelsPage) else ProviderModelsPage.model_validate(page)
    try:
        start = int(asked.cursor) if asked.cursor else 0
    except ValueError:
        start = -1
    if start < 0:
        raise ProviderError(f"cursor {asked.cursor!r} does not come from a page of provider {definition.name!r}",
                            code="invalid_cursor")
    chosen = [m for m in definition.models if asked.matches(m)]
    end = start + asked.limit
    return ProviderModelsPage(models=chosen[start:end], next_cursor=str(end) if end < len(chosen) else None)
