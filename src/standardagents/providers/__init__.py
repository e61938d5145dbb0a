"""Model providers: the seam (:mod:`.base`), the OpenAI-compatible and Anthropic clients,
the offline test model and the factory that picks one from configuration.

``AnthropicProvider`` is importable without the ``anthropic`` package; building one needs it.
"""

from __future__ import annotations

from .anthropic import AnthropicProvider
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
from .factory import ProviderSpec, aclose_all, create_provider, register_provider
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
    "create_provider",
    "register_provider",
]
