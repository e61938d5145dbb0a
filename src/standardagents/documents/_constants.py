"""The fixed vocabulary of the ``cubicecho.agent/1`` document format.

Kept apart from the parser so a host can read the constants (for a form, a CLI listing, a
schema) without pulling in the parsing or layering machinery.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

__all__ = [
    "AGENT_SPEC",
    "AGENT_SPEC_PREFIX",
    "AGENT_SPEC_VERSION",
    "AGENT_TASKS",
    "INJECT_EVENTS",
    "KNOWN_KEYS",
    "RESERVED_BODY",
    "RESOLVED_DEFAULTS",
    "SPEC_EVENTS",
    "VETO_EVENT",
]

AGENT_SPEC_PREFIX: Final = "cubicecho.agent/"
"""Everything of the token before the major version, used to tell "another major" from junk."""

AGENT_SPEC_VERSION: Final = 1
"""The major version this build reads; it only changes when a field changes meaning."""

AGENT_SPEC: Final = f"{AGENT_SPEC_PREFIX}{AGENT_SPEC_VERSION}"
"""The exact ``spec`` token a document must carry; any other value refuses the document."""

AGENT_TASKS: Final[tuple[str, ...]] = ("compaction", "toolSelect", "title", "followups")
"""Side tasks with a known meaning, in display order. Other task keys are legal and carried."""

SPEC_EVENTS: Final[tuple[str, ...]] = (
    "sessionStart",
    "beforeTurn",
    "afterTurn",
    "beforeCompact",
    "sessionEnd",
    "sessionDelete",
)
"""Every lifecycle event a document's hook may be bound to."""

INJECT_EVENTS: Final[frozenset[str]] = frozenset({"sessionStart", "beforeTurn"})
"""Events that fire before a model request, so the only ones where ``inject`` can matter."""

VETO_EVENT: Final = "beforeCompact"
"""The one event that announces something a hook may decline."""

RESERVED_BODY: Final[tuple[str, ...]] = ("model", "messages", "stream", "tools")
"""Request fields the loop always writes itself, so ``extraBody`` may not carry them."""

RESOLVED_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "temperature": 0.7,
        "maxTokens": 0,
        "contextLength": 0,
        "toolDiscovery": "eager",
        "maxToolIterations": 20,
        "maxRetries": 0,
    }
)
"""Values used when no layer says anything; fields missing here stay absent when resolved."""

KNOWN_KEYS: Final[frozenset[str]] = frozenset(
    {
        "spec",
        "$schema",
        "id",
        "name",
        "description",
        "endpoint",
        "model",
        "prompt",
        "tools",
        "retry",
        "tasks",
        "hooks",
        "bundle",
        "extensions",
        "requires",
    }
)
"""Top-level keys version 1 gives a meaning to; any other key is carried through unread."""
