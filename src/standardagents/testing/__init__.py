"""Test doubles shipped with the package, so users test their agents the way we test ours:
real HTTP stubs of the OpenAI and Anthropic wire protocols and the offline test model.

Names are loaded on first use, so ``python -m standardagents.testing.openai_stub`` runs the
stub module fresh rather than a copy this package already imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..providers.testmodel import TestModelProvider
    from .anthropic_stub import AnthropicReply, AnthropicStub
    from .oidc import OidcProvider
    from .openai_stub import OpenAIStub, StubReply

__all__ = ["AnthropicReply", "AnthropicStub", "OidcProvider", "OpenAIStub", "StubReply", "TestModelProvider"]

_HOMES = {"OpenAIStub": ".openai_stub", "StubReply": ".openai_stub",
          "AnthropicStub": ".anthropic_stub", "AnthropicReply": ".anthropic_stub",
          "TestModelProvider": "..providers.testmodel", "OidcProvider": ".oidc"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)
