"""On-demand tools: a prompt with many tools starts with a catalogue and ``load_tools``.

Loaded tools join the request from the next step; the names used in a turn are carried into
the thread's next turn (at most ``MAX_CARRIED``), as the loop toolkit's ``carry_over`` rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..definitions import ToolDefinition, define_tool
from ..toolcalls import LOAD_TOOLS_NAME, MAX_PER_LOAD, carry_over, expand_names, load_tools_tool

if TYPE_CHECKING:
    from .state import ThreadState

__all__ = ["CARRIED_KEY", "load_tools_definition", "save_carried"]

#: thread env key holding the tool names carried into the next turn
CARRIED_KEY = "_carried_tools"


def load_tools_definition(catalogue: list[str]) -> ToolDefinition:
    """The ``load_tools`` tool for one prompt's catalogue."""
    spec = load_tools_tool()["function"]

    async def load(state: ThreadState, args: dict[str, Any]) -> str:
        ex = state.execution
        if ex is None:
            return "load_tools only works during a turn"
        requested = args.get("names") or []
        if isinstance(requested, str):
            requested = [requested]
        expanded = expand_names([str(n) for n in requested], catalogue)
        fresh = [n for n in expanded if n not in ex.loaded_tools][:MAX_PER_LOAD]
        skipped = [n for n in expanded if n not in ex.loaded_tools][MAX_PER_LOAD:]
        ex.loaded_tools.extend(fresh)
        parts = [f"Loaded: {', '.join(fresh)}." if fresh else "No new tools loaded."]
        if expanded.unknown:
            parts.append(f"Unknown: {', '.join(expanded.unknown)}.")
        if skipped:
            parts.append(f"Not loaded (at most {MAX_PER_LOAD} per call): {', '.join(skipped)}.")
        return " ".join(parts)

    tool: ToolDefinition = define_tool(name=LOAD_TOOLS_NAME, description=spec.get("description", "Load tools by name."),
                                       parameters=spec["parameters"], execute=load)
    return tool


async def save_carried(state: ThreadState, previous: list[str], used: list[str]) -> list[str]:
    """Store the names carried into the thread's next turn."""
    carried = carry_over(previous, [u for u in used if u != LOAD_TOOLS_NAME])
    await state.set_env(CARRIED_KEY, carried)
    return carried
