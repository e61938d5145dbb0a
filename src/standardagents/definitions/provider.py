"""Provider definitions: a project's own model provider, declared as data plus a factory.

A :class:`ProviderDefinition` names a provider (``define_model(provider="acme", ...)`` then
uses it) and says how an instance is made: either ``extends`` a built-in provider
(``openai``, ``anthropic``, ``gemini``) with ``override`` headers, body fields and request or
response functions, or a ``factory`` that receives the resolved configuration and returns
a provider instance. Its ``config`` declares typed slots, each filled at run time from a
constant, an environment variable or a value the host program supplies; credentials are
never constants, so a definition (and any document or log made from it) never holds one.
``models`` lists what the provider serves, with each model's capabilities and prices.

This module is declarative: building instances, paging model lists and showing requests
live in :mod:`standardagents.providers.defined`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol, TypedDict, Unpack, runtime_checkable

from pydantic import Field, field_validator, model_validator

from ._base import Definition, build
from .model import ModelPrices
from .reasoning import REASONING_LEVELS, ReasoningConfig, ReasoningLevel, map_reasoning_level

__all__ = [
    "BUILTIN_PROVIDERS",
    "REASONING_LEVELS",
    "ModelCapabilities",
    "ModelCapabilitiesFields",
    "ProviderConfigSlot",
    "ProviderConfigValueSource",
    "ProviderDefinition",
    "ProviderFactory",
    "ProviderFactoryConfig",
    "ProviderFields",
    "ProviderInstance",
    "ProviderMethodOverrides",
    "ProviderModelFields",
    "ProviderModelInfo",
    "ProviderModelsPage",
    "ProviderModelsQuery",
    "ProviderOverride",
    "ProviderOverrideContext",
    "ProviderOverrideFields",
    "ProviderUsagePricing",
    "ReasoningConfig",
    "ReasoningLevel",
    "defineProvider",
    "define_provider",
    "is_secret_name",
    "mapReasoningLevel",
    "map_reasoning_level",
    "providerConst",
    "providerEnv",
    "providerValue",
    "provider_const",
    "provider_env",
    "provider_value",
]

#: provider names the runtime ships; a project's own provider takes another name
BUILTIN_PROVIDERS = ("openai", "anthropic", "gemini", "test")

ProviderConfigValueSource = Literal["const", "env", "value"]

_PROVIDER_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_SLOT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")
_SECRET_WORDS = ("key", "token", "secret", "password", "credential", "auth")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_secret_name(name: str) -> bool:
    """Whether a slot called ``name`` holds a credential unless it says otherwise."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


# -- configuration slots ------------------------------------------------------------------

class ProviderConfigSlot(Definition):
    """Where one configuration value comes from.

    ``const`` values are written in the definition (never credentials); ``env`` reads the
    first set variable of ``env``; ``value`` reads what the host program supplied under
    ``key`` (``set_provider_values``). ``secret`` (default: decided by the slot's name, e.g.
    ``api_key``) keeps the value out of requests shown by inspection, errors and ``repr``.
    """

    source: ProviderConfigValueSource
    value: Any = None
    env: list[str] = Field(default_factory=list)
    key: str | None = None
    secret: bool | None = None
    required: bool = True
    default: Any = None
    description: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> ProviderConfigSlot:
        if self.source == "env":
            if not self.env:
                raise ValueError("an env slot names at least one environment variable")
            bad = [n for n in self.env if not _ENV_NAME.match(n)]
            if bad:
                raise ValueError(f"not an environment variable name: {bad[0]!r}")
        if self.source == "value" and not self.key:
            raise ValueError("a value slot names the key the host program supplies it under")
        if self.source == "const" and self.secret:
            raise ValueError("definitions never carry credentials: read a secret with provider_env(...) or provider_value(...)")
        return self

    def is_secret(self, name: str) -> bool:
        return self.secret if self.secret is not None else is_secret_name(name)

    def where(self, provider: str, name: str) -> str:
        """Where this slot looked for its value, as a user reads it in an error."""
        if self.source == "env":
            names = " or ".join(self.env)
            plural = "s" if len(self.env) > 1 else ""
            return f"the environment variable{plural} {names} (not set)"
        if self.source == "value":
            return (f"the runtime value {self.key!r} (not supplied: call "
                    f"set_provider_values({provider!r}, {self.key}=...))")
        return "its constant (None)"


def provider_const(value: Any, *, description: str | None = None) -> ProviderConfigSlot:
    """A slot with a value written in the definition (a URL, a region, a version; never a key)."""
    return ProviderConfigSlot(source="const", value=value, secret=False, description=description)


def provider_env(name: str, *fallbacks: str, secret: bool | None = None, required: bool = True,
                 default: Any = None, description: str | None = None) -> ProviderConfigSlot:
    """A slot read from the environment at run time: ``name``, else each of ``fallbacks``."""
    return ProviderConfigSlot(source="env", env=[name, *fallbacks], secret=secret,
                              required=required and default is None, default=default,
                              description=description)


def provider_value(key: str, *, secret: bool | None = None, required: bool = True, default: Any = None,
                   description: str | None = None) -> ProviderConfigSlot:
    """A slot the host program fills at run time (``set_provider_values(provider, key=...)``)."""
    return ProviderConfigSlot(source="value", key=key, secret=secret, required=required and default is None,
                              default=default, description=description)


class ProviderFactoryConfig(Mapping[str, Any]):
    """A provider's resolved configuration, as its factory and overrides receive it.

    A read-only mapping of slot name to value (slots without a value are absent), plus what
    the model definition sets for the connection: ``timeout``, ``max_retries``, ``headers``
    and ``options``. Secret values never show in its ``repr``.
    """

    __slots__ = ("_secret", "_values", "headers", "max_retries", "options", "provider", "timeout")

    def __init__(self, provider: str, values: Mapping[str, Any], secret: frozenset[str] = frozenset(),
                 options: Mapping[str, Any] | None = None, *, timeout: float = 60.0, max_retries: int = 2,
                 headers: Mapping[str, str] | None = None) -> None:
        self.provider = provider
        self._values = dict(values)
        self._secret = secret
        self.options: dict[str, Any] = dict(options or {})
        self.timeout = timeout
        self.max_retries = max_retries
        self.headers: dict[str, str] = dict(headers or {})

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def secret_names(self) -> frozenset[str]:
        return self._secret

    def secret_values(self) -> list[str]:
        """The secret values as text (longest first), for scrubbing them out of anything shown."""
        found = {str(self._values[n]) for n in self._secret if self._values.get(n) not in (None, "")}
        return sorted(found, key=len, reverse=True)

    def __repr__(self) -> str:
        shown = {k: ("[redacted]" if k in self._secret else v) for k, v in self._values.items()}
        return f"ProviderFactoryConfig({self.provider!r}, {shown!r})"


# -- instances, factories and overrides ---------------------------------------------------

@runtime_checkable
class ProviderInstance(Protocol):
    """What a factory returns: a model provider (``standardagents.providers.ModelProvider``
    is the base to subclass). ``inspect_request`` is optional: with it, the instance can
    show the request it would send without sending it."""

    name: str

    async def request(self, request: Any) -> Any: ...

    def stream(self, request: Any) -> AsyncIterator[Any]: ...

    async def aclose(self) -> None: ...


#: makes an instance from the resolved configuration
ProviderFactory = Callable[[ProviderFactoryConfig], ProviderInstance]


class ProviderOverrideContext:
    """What a request or response override is told: the provider, the model id, whether
    the call streams, and the resolved configuration."""

    __slots__ = ("config", "model", "provider", "stream")

    def __init__(self, provider: str, model: str, config: ProviderFactoryConfig, stream: bool) -> None:
        self.provider = provider
        self.model = model
        self.config = config
        self.stream = stream

    def __repr__(self) -> str:
        return f"ProviderOverrideContext(provider={self.provider!r}, model={self.model!r}, stream={self.stream})"


#: ``(ModelRequest, context) -> ModelRequest | None`` (None: the request as changed in place), or async
RequestOverride = Callable[[Any, ProviderOverrideContext], Any]
#: ``(ModelResponse, context) -> ModelResponse | None``, or async
ResponseOverride = Callable[[Any, ProviderOverrideContext], Any]


class ProviderMethodOverrides(Definition):
    """Functions run around each call of the provider: ``request`` before it is sent (it
    may change any field of the ``ModelRequest``), ``response`` on the whole reply (for a
    stream, on the assembled reply at its end)."""

    request: Callable[..., Any] | None = None
    response: Callable[..., Any] | None = None


class ProviderOverride(ProviderMethodOverrides):
    """Changes to a built-in provider's requests: extra ``headers`` (values may name config
    slots as ``{slot}``, so a gateway key comes from the environment) and ``body`` fields
    merged under the model's own ``extra_body``."""

    headers: dict[str, str] = Field(default_factory=dict)
    body: dict[str, Any] = Field(default_factory=dict)


# -- models -------------------------------------------------------------------------------

ProviderUsagePricing = ModelPrices


class ModelCapabilities(Definition):
    """What a model can do, so a runtime or a person can pick one: tool calls, image input,
    the reasoning levels it accepts (none: it does not reason), structured output, its
    context window and output limit in tokens."""

    tools: bool = True
    vision: bool = False
    reasoning_levels: list[ReasoningLevel] = Field(default_factory=list)
    structured_output: bool = False
    streaming: bool = True
    context_window: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)

    @property
    def reasoning(self) -> bool:
        return any(level != "none" for level in self.reasoning_levels)


class ProviderModelInfo(Definition):
    """One model a provider serves: its id on the wire, a display name, capabilities and
    prices (USD per million tokens)."""

    id: str = Field(min_length=1)
    name: str | None = None
    description: str | None = None
    capabilities: ModelCapabilities = Field(default_factory=ModelCapabilities)
    prices: ModelPrices | None = None


class ProviderModelsQuery(Definition):
    """Which page of a provider's models to list: ``cursor`` from the previous page,
    ``limit`` models at most, ``search`` in ids and names, and capability filters."""

    cursor: str | None = None
    limit: int = Field(default=50, ge=1, le=1000)
    search: str | None = None
    tools: bool | None = None
    vision: bool | None = None
    reasoning: bool | None = None

    def matches(self, info: ProviderModelInfo) -> bool:
        if self.search:
            needle = self.search.lower()
            if needle not in info.id.lower() and needle not in (info.name or "").lower():
                return False
        caps = info.capabilities
        return ((self.tools is None or caps.tools == self.tools)
                and (self.vision is None or caps.vision == self.vision)
                and (self.reasoning is None or caps.reasoning == self.reasoning))


class ProviderModelsPage(Definition):
    """One page of a model list; ``next_cursor`` asks for the next (None: this is the last)."""

    models: list[ProviderModelInfo] = Field(default_factory=list)
    next_cursor: str | None = None


#: lists models: ``(query, config) -> ProviderModelsPage``, sync or async
ModelsLister = Callable[[ProviderModelsQuery, ProviderFactoryConfig], ProviderModelsPage | Awaitable[ProviderModelsPage]]


# -- the definition -----------------------------------------------------------------------

class ProviderDefinition(Definition):
    """A named model provider a project defines (the spec's ``ProviderDefinition``).

    Exactly one of ``extends`` (a built-in provider, changed by ``override``) and
    ``factory`` (your own instance from the resolved ``config``). ``reasoning`` maps a
    :class:`ReasoningConfig` to the body fields this provider's API takes (without it a
    provider that ``extends`` a built-in maps as the built-in does). ``models`` is a list,
    or a function returning one page of it.
    """

    name: str
    description: str | None = None
    extends: Literal["openai", "anthropic", "gemini"] | None = None
    factory: Callable[..., Any] | None = None
    config: dict[str, ProviderConfigSlot] = Field(default_factory=dict)
    override: ProviderOverride | None = None
    models: list[ProviderModelInfo] | Callable[..., Any] = Field(default_factory=list)
    reasoning: Callable[..., Any] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _PROVIDER_NAME.match(value):
            raise ValueError(f"{value!r} is not a provider name (lowercase letters, digits, '-' and '_', starting with a letter)")
        return value

    @field_validator("config")
    @classmethod
    def _slots(cls, value: dict[str, ProviderConfigSlot]) -> dict[str, ProviderConfigSlot]:
        for name, slot in value.items():
            if not _SLOT_NAME.match(name):
                raise ValueError(f"{name!r} is not a slot name (snake_case)")
            if slot.source == "const" and slot.secret is not False and is_secret_name(name) and slot.value is not None:
                raise ValueError(f"{name}: definitions never carry credentials: read it with "
                                 f"provider_env(...) or provider_value(...)")
        return value

    def model_info(self, model_id: str) -> ProviderModelInfo | None:
        """The listed model with this id (None: not listed, or the list is a function)."""
        if isinstance(self.models, list):
            for info in self.models:
                if info.id == model_id:
                    return info
        return None


class ModelCapabilitiesFields(TypedDict, total=False):
    """The keys of :class:`ModelCapabilities` in dict form."""

    tools: bool
    vision: bool
    reasoning_levels: Sequence[ReasoningLevel]
    structured_output: bool
    streaming: bool
    context_window: int | None
    max_output_tokens: int | None


class ProviderModelFields(TypedDict, total=False):
    """The keys of :class:`ProviderModelInfo` in dict form (``id`` is required)."""

    id: str
    name: str | None
    description: str | None
    capabilities: ModelCapabilities | ModelCapabilitiesFields
    prices: ModelPrices | Mapping[str, float] | None


class ProviderOverrideFields(TypedDict, total=False):
    """The keys of :class:`ProviderOverride` in dict form."""

    headers: Mapping[str, str]
    body: Mapping[str, Any]
    request: RequestOverride | None
    response: ResponseOverride | None


class ProviderFields(TypedDict, total=False):
    """The keyword arguments of :func:`define_provider`."""

    name: str
    description: str | None
    extends: Literal["openai", "anthropic", "gemini"] | None
    factory: ProviderFactory | Callable[[ProviderFactoryConfig], Any] | None
    config: Mapping[str, ProviderConfigSlot]
    override: ProviderOverride | ProviderOverrideFields | None
    models: Sequence[ProviderModelInfo | ProviderModelFields] | ModelsLister
    reasoning: Callable[[ReasoningConfig], Mapping[str, Any]] | None


def define_provider(definition: Mapping[str, Any] | None = None, /, **fields: Unpack[ProviderFields]) -> ProviderDefinition:
    """Validate a provider definition; every problem is reported at once.

    Keywords are typed; a whole definition may instead come as one dict (camelCase too).
    """
    data: dict[str, Any] = {**(definition or {}), **fields}
    problems: list[tuple[str, str]] = []
    has_factory = data.get("factory") is not None
    has_base = data.get("extends") is not None
    if has_factory == has_base:
        problems.append(("factory", "give exactly one of factory (your own instance) and extends "
                                    "(a built-in provider: openai, anthropic, gemini)"))
    override = data.get("override")
    if override is not None and has_factory and not has_base:
        headers = override.headers if isinstance(override, ProviderOverride) else (override or {}).get("headers")
        body = override.body if isinstance(override, ProviderOverride) else (override or {}).get("body")
        if headers or body:
            problems.append(("override", "headers and body overrides change a built-in provider's requests: "
                                         "use them with extends, or set them in your factory"))
    slots = data.get("config") or {}
    if isinstance(override, ProviderOverride | Mapping):
        headers = override.headers if isinstance(override, ProviderOverride) else (override.get("headers") or {})
        for header, value in dict(headers).items():
            for slot in _PLACEHOLDER.findall(str(value)):
                if slot not in slots:
                    problems.append((f"override.headers.{header}", f"{{{slot}}} names no config slot "
                                                                   f"(known: {', '.join(sorted(slots)) or 'none'})"))
    return build(ProviderDefinition, data, problems)


#: the spec's camelCase names
defineProvider = define_provider
providerConst = provider_const
providerEnv = provider_env
providerValue = provider_value
mapReasoningLevel = map_reasoning_level


def placeholders(text: str) -> list[str]:
    """The ``{slot}`` names a header value refers to."""
    return _PLACEHOLDER.findall(text)


def fill_placeholders(text: str, config: Mapping[str, Any]) -> str:
    """A header value with each ``{slot}`` replaced by the slot's resolved value."""
    return _PLACEHOLDER.sub(lambda m: str(config.get(m.group(1), "")), text)
