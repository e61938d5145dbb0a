"""Test doubles shipped with the package, so users test their agents the way we test ours:
a real HTTP stub of the OpenAI wire protocol and the offline test model.
"""

from __future__ import annotations

from ..providers.testmodel import TestModelProvider
from .openai_stub import OpenAIStub, StubReply

__all__ = ["OpenAIStub", "StubReply", "TestModelProvider"]
