"""What tools declare they touch, as lines an operator reads (``validate``, ``packages``).

One place formats a tool's declarations (``ToolDefinition.declarations()``, or the copy a
packed package keeps in its ``__meta``) so every listing says the same thing the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .registry import Registry

__all__ = ["declaration_lines", "describe_declaration"]


def describe_declaration(name: str, declared: Mapping[str, Any]) -> str:
    """One line: ``tool lookup: uses network; variables api_base (url, default ...), token
    (secret, required); network api.example.com (grant github -> api.example.com)``."""
    parts: list[str] = []
    uses = declared.get("uses")
    if uses is not None:
        parts.append("uses " + (", ".join(uses) or "nothing"))
    variables = declared.get("variables") or {}
    if variables:
        shown = []
        for var, info in variables.items():
            detail = [str(info.get("type", "string"))]
            if info.get("required"):
                detail.append("required")
            elif "default" in info:
                detail.append(f"default {info['default']!r}")
            else:
                detail.append("optional")
            if info.get("envKey"):
                detail.append(f"env {info['envKey']}")
            shown.append(f"{var} ({', '.join(detail)})")
        parts.append("variables " + ", ".join(shown))
    if declared.get("tenvs"):
        parts.append("tenvs " + ", ".join(declared["tenvs"]))
    network = declared.get("network")
    if network:
        text = "network " + ", ".join(network.get("allow", []))
        grants = network.get("credentials") or {}
        if grants:
            text += " (" + ", ".join(f"grant {g} -> {h}" for h, g in grants.items()) + ")"
        parts.append(text)
    return f"tool {name}: " + "; ".join(parts)


def declaration_lines(registry: Registry) -> list[str]:
    """A line per project tool that declares anything, by name."""
    lines = []
    for entry in sorted(registry.entries("tools"), key=lambda e: e.name):
        tool = entry.value
        declared = tool.declarations() if tool is not None and hasattr(tool, "declarations") else {}
        if declared:
            lines.append(describe_declaration(entry.name, declared))
    return lines
