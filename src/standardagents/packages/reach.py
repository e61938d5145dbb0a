"""What an agent reaches: the definitions a packed package must carry for it to run alone.

Walks prompts (and their includes), tools, models (and fallbacks, and the providers the
project defines for them), hooks (the agent's, the
prompts', and parent hooks of child agents), child agents named as tools, and the effects
whose names the reached source files mention.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..registry import Entry, Registry

__all__ = ["Reach", "collect"]

_BUILT_IN = "(built-in)"


@dataclass
class Reach:
    """The reached entries, keyed by ``(kind, name)``, and the packages referenced from outside."""

    entries: dict[tuple[str, str], Entry] = field(default_factory=dict)
    external_packages: set[str] = field(default_factory=set)
    missing: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Entry]:
        return [e for (k, _), e in sorted(self.entries.items()) if k == kind]


def _agent_refs(registry: Registry, agent: Any) -> list[tuple[str, str]]:
    refs: list[tuple[str, str]] = []
    for side in (agent.side_a, agent.side_b):
        if side is None:
            continue
        refs.append(("prompts", side.prompt))
        names = [side.stop_tool] if side.stop_tool else []
        for kind in ("stop", "fail", "status"):
            binding = side.session_tool(kind)
            if binding is not None:
                names.append(binding.name)
        refs += [("tools", n) for n in names if registry.has("tools", n)]
    refs += [("hooks", h) for h in agent.hooks]
    refs += [("hooks", r.hook) for r in agent.parent_hooks]
    refs += [("tools", g) for g in (*agent.input_guardrails, *agent.output_guardrails)]
    return refs


def _prompt_refs(registry: Registry, prompt: Any) -> list[tuple[str, str]]:
    refs: list[tuple[str, str]] = [("models", prompt.model or "default")]
    for name in prompt.tool_names():
        if registry.has("tools", name):
            refs.append(("tools", name))
        elif registry.has("agents", name):
            refs.append(("agents", name))
    refs += [("hooks", h) for h in prompt.hooks or []]
    refs += [("prompts", p) for p in prompt.includes()]
    refs += [("tools", g) for g in (*prompt.input_guardrails, *prompt.output_guardrails)]
    return refs


def _strings_in(path: Path) -> set[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return set()
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def collect(registry: Registry, agent: str, root: Path) -> Reach:
    """Everything ``agent`` reaches in ``registry`` (loaded from the project at ``root``)."""
    reach = Reach()
    todo: list[tuple[str, str]] = [("agents", agent)]
    while todo:
        key = todo.pop()
        if key in reach.entries:
            continue
        kind, name = key
        entry = registry.find(kind, name)
        if entry is None:
            if not (kind == "models" and name == "default"):
                reach.missing.append(f"{kind[:-1]} {name!r}")
            continue
        if entry.package is not None:
            reach.external_packages.add(entry.package)
            continue
        if entry.source in (None, _BUILT_IN):
            continue
        reach.entries[key] = entry
        value = entry.value
        if kind == "agents":
            todo += _agent_refs(registry, value)
        elif kind == "prompts":
            todo += _prompt_refs(registry, value)
        elif kind == "models":
            todo += [("models", fb) for fb in value.fallbacks]
            if registry.has("providers", value.provider):  # one the project defines (not a built-in)
                todo.append(("providers", value.provider))
    # effects are named by string from tool and hook code: follow the names the sources mention
    effect_names = {e.name for e in registry.entries("effects") if e.package is None}
    scanned: set[str] = set()
    while True:
        files = {e.source for e in reach.entries.values() if e.source} - scanned
        if not files:
            break
        for rel in files:
            scanned.add(rel)
            for text in _strings_in(root / rel) & effect_names:
                entry = registry.find("effects", text)
                if entry is not None:
                    reach.entries[("effects", text)] = entry
    return reach
