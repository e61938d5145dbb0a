"""Model definitions: which provider and model a prompt talks to, with its limits and fallbacks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack

from pydantic import Field, field_validator

from ._base import Definition, build
from .reasoning import ReasoningConfig, ReasoningLevel

__all__ = ["ModelDefinition", "ModelFields", "ModelPrices", "define_model"]


class ModelPrices(Definition):
    """USD per million tokens, for models the price data does not know (private
    deployments, fine-tunes). Cached input and cache writes default to the input price."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


class _ModelBody(dict[str, Any]):
    """A model's ``extra_body`` that also carries the model's reasoning setting: every
    request built from the model gets the body (``ModelRequest(extra_body=model.extra_body)``),
    and with it the setting (:class:`~standardagents.providers.base.ModelRequest` reads it),
    while the body's own contents, and so what is sent or exported, stay as written."""

    __slots__ = ("reasoning",)

    def __init__(self, body: Mapping[str, Any], reasoning: ReasoningConfig) -> None:
        super().__init__(body)
        self.reasoning = reasoning


class ModelDefinition(Definition):
    """A named model.

    ``provider`` picks the transport (``openai`` for any OpenAI-compatible endpoint,
    ``anthropic``, ``gemini``, ``test`` for the offline model, or a provider the project
    defines with ``define_provider``). Keys are read from the environment
    variable ``api_key_env`` at run time, so a definition never carries a credential.
    ``fallbacks`` name other models tried in order on retriable errors. A new field goes
    here and in :class:`ModelFields`; a test keeps the two in step.
    """

    name: str
    provider: str = "openai"
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    fallbacks: list[str] = Field(default_factory=list)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    timeout: float | None = Field(default=None, gt=0)
    max_retries: int = Field(default=2, ge=0)
    context_window: int | None = Field(default=None, ge=1)
    stream: bool = True
    headers: dict[str, str] = Field(default_factory=dict)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    #: this model's own prices (per 1M tokens); without them the maintained price data is used
    prices: ModelPrices | None = None
    #: how hard the model should think: a level (``"high"``) or a ReasoningConfig; the
    #: provider maps it to its own parameter (OpenAI reasoning_effort, Anthropic and Gemini
    #: thinking budgets)
    reasoning: ReasoningConfig | None = None

    @field_validator("reasoning", mode="before")
    @classmethod
    def _reasoning_level(cls, value: Any) -> Any:
        return {"level": value} if isinstance(value, str) else value

    def model_post_init(self, context: Any, /) -> None:
        if self.reasoning is not None and not isinstance(self.extra_body, _ModelBody):
            object.__setattr__(self, "extra_body", _ModelBody(self.extra_body, self.reasoning))


class ModelFields(TypedDict, total=False):
    """The keyword arguments of :func:`define_model`, one per field of :class:`ModelDefinition`.

    ``provider`` stays a plain string: providers are chosen by name from configuration.
    """

    name: str
    provider: str
    model: str
    base_url: str | None
    api_key_env: str | None
    fallbacks: Sequence[str]
    max_tokens: int | None
    temperature: float | None
    top_p: float | None
    timeout: float | None
    max_retries: int
    context_window: int | None
    stream: bool
    headers: Mapping[str, str]
    extra_body: Mapping[str, Any]
    options: Mapping[str, Any]
    prices: ModelPrices | Mapping[str, float] | None
    reasoning: ReasoningLevel | ReasoningConfig | Mapping[str, Any] | None


def define_model(definition: Mapping[str, Any] | None = None, /, **fields: Unpack[ModelFields]) -> ModelDefinition:
    """Validate a model definition; every problem is reported at once.

    Keywords are typed; a whole definition may instead come as one dict (the spec's shape).
    """
    data: dict[str, Any] = {**(definition or {}), **fields}
    problems: list[tuple[str, str]] = []
    if "api_key" in data or "apiKey" in data:
        problems.append(("api_key", "definitions never carry credentials: set api_key_env to the name of an environment variable"))
        data.pop("api_key", None)
        data.pop("apiKey", None)
    return build(ModelDefinition, data, problems)
