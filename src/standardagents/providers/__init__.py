"""Model providers: the seam (:mod:`.base`), the OpenAI-compatible and Anthropic clients,
the offline test model and the factory that picks one from configuration.

The clients are imported on first use, so a runtime on the offline model never loads the
``openai`` or ``anthropic`` SDKs. ``AnthropicProvider`` is importable without the
``anthropic`` package; building one needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import (
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StreamDelta,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
)
from .factory import ProviderSpec, aclose_all, build_provider, create_provider, register_provider

if TYPE_CHECKING:
    from .anthropic import AnthropicProvider
    from .openai import OpenAIProvider
    from .testmodel import TestModelProvider

__all__ = [
    "AnthropicProvider",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "OpenAIProvider",
    "ProviderSpec",
    "ReasoningDelta",
    "StreamDelta",
    "StreamEnd",
    "TestModelProvider",
    "TextDelta",
    "ToolCallDelta",
    "aclose_all",
    "build_provider",
    "create_provider",
    "register_provider",
]

_HOMES = {"AnthropicProvider": ".anthropic", "OpenAIProvider": ".openai", "TestModelProvider": ".testmodel"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)
