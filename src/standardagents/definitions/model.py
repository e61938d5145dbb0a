"""Model definitions: which provider and model a prompt talks to, with its limits and fallbacks."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ._base import Definition, build

__all__ = ["ModelDefinition", "define_model"]


class ModelDefinition(Definition):
    """A named model.

    ``provider`` picks the transport (``openai`` for any OpenAI-compatible endpoint,
    ``anthropic``, ``test`` for the offline model). Keys are read from the environment
    variable ``api_key_env`` at run time, so a definition never carries a credential.
    ``fallbacks`` name other models tried in order on retriable errors.
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


def define_model(definition: dict[str, Any] | None = None, /, **fields: Any) -> ModelDefinition:
    """Validate a model definition; every problem is reported at once."""
    data = {**(definition or {}), **fields}
    problems: list[tuple[str, str]] = []
    if "api_key" in data or "apiKey" in data:
        problems.append(("api_key", "definitions never carry credentials: set api_key_env to the name of an environment variable"))
        data.pop("api_key", None)
        data.pop("apiKey", None)
    return build(ModelDefinition, data, problems)
