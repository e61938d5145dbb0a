"""A side's setup: everything one side of an agent needs per step (its prompt, model and
fallbacks, tools, hooks, static system prompt, guardrails and typed output), resolved once
by :class:`.setup.Setups` and cached; and the same setup changed by a turn's own override.

It lives under the step loop and its parts, which all read it, apart from the resolution
that makes it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from ..definitions import AgentDefinition, ModelDefinition, PromptDefinition, ToolDefinition
from ..registry import Registry
from ..toolcalls import prepare_tools
from .hooks import HookSet
from .output import OutputSpec
from .overrides import SideOverride
from .tools import Toolbox

__all__ = ["SideSetup", "with_override"]


@dataclass
class SideSetup:
    """Everything one side needs per step, resolved once and cached."""

    agent: AgentDefinition
    side: Literal["a", "b"]
    prompt: PromptDefinition
    model: ModelDefinition
    fallbacks: list[ModelDefinition]
    toolbox: Toolbox
    hooks: HookSet
    namespace: str | None
    static_system: str | None
    #: on-demand discovery: the catalogue text appended to the system prompt
    catalogue: str | None = None
    input_guardrails: list[ToolDefinition] = field(default_factory=list)
    output_guardrails: list[ToolDefinition] = field(default_factory=list)
    #: the MCP pool's generation the tools were listed at (None: no MCP tools)
    mcp_generation: int | None = None
    #: the prompt's typed output (None: the side answers in free text)
    output: OutputSpec | None = None
    _by_level: dict[str | None, list[dict[str, Any]]] = field(default_factory=dict)
    _index: dict[str | None, dict[str, dict[str, Any]]] = field(default_factory=dict)

    @property
    def ondemand(self) -> bool:
        return self.catalogue is not None

    def tools_at(self, level: str | None, names: list[str] | None = None) -> list[dict[str, Any]]:
        """The offered tools adapted to a compatibility level (computed once per level),
        or just ``names`` of them (on-demand prompts)."""
        tools = self._by_level.get(level)
        if tools is None:
            tools = self.toolbox.offered if level is None else prepare_tools(self.toolbox.offered, level)  # type: ignore[arg-type]
            self._by_level[level] = tools
            self._index[level] = {t["function"]["name"]: t for t in tools if "function" in t}
        if names is None:
            return tools
        index = self._index[level]
        return [index[n] for n in names if n in index]


async def with_override(base: SideSetup, override: SideOverride, registry: Registry) -> SideSetup:
    """``base`` with ``override``'s model (with that model's own fallbacks) and system
    prompt; the on-demand tool catalogue is still appended, since the tools need it."""
    changes: dict[str, Any] = {}
    if override.model is not None:
        model = await registry.aget("models", override.model, base.namespace)
        changes["model"] = model
        changes["fallbacks"] = [await registry.aget("models", fb, base.namespace) for fb in model.fallbacks]
    if override.system is not None:
        system, catalogue = override.system, base.catalogue
        changes["static_system"] = f"{system}\n\n{catalogue}" if system and catalogue else (system or catalogue or "")
    return dataclasses.replace(base, **changes) if changes else base
