"""On-demand tools: a catalogue in the prompt, a ``load_tools`` tool, and what to carry.

A large toolset costs context and confuses small models, so only a catalogue of names is sent
and the model loads what it needs. Across turns the loaded set is carried in declaration
order, because reordering the tool array invalidates an endpoint's prompt cache from the first
moved definition onward.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "LOAD_TOOLS_NAME",
    "MAX_CARRIED",
    "MAX_PER_LOAD",
    "ExpandedNames",
    "carry_over",
    "catalogue_text",
    "expand_names",
    "load_tools_tool",
]

MAX_PER_LOAD = 12
"""The most tools one ``load_tools`` call may load."""

MAX_CARRIED = 16
"""The most loaded tools a conversation carries from one turn to the next."""

LOAD_TOOLS_NAME = "load_tools"


class ExpandedNames(list[str]):
    """Names resolved from a request, in catalogue order; ``unknown`` lists what matched nothing."""

    unknown: list[str]

    def __init__(self, names: Iterable[str] = (), unknown: Iterable[str] = ()) -> None:
        super().__init__(names)
        self.unknown = list(unknown)


def expand_names(requested: Iterable[str], catalogue: Iterable[str]) -> ExpandedNames:
    """Resolve requested names against the catalogue, expanding a trailing ``*`` as a prefix.

    The result follows the catalogue's order with no duplicates; requested names (or patterns)
    that match nothing are in ``.unknown``, in the order asked, for the reply to the model.
    """
    names = list(dict.fromkeys(catalogue))
    chosen: set[str] = set()
    unknown: list[str] = []
    for raw in requested:
        item = raw.strip()
        if not item:
            continue
        if item.endswith("*"):
            prefix = item[:-1]
            matched = [n for n in names if n.startswith(prefix)]
        else:
            matched = [item] if item in names else []
        if matched:
            chosen.update(matched)
        elif item not in unknown:
            unknown.append(item)
    return ExpandedNames((n for n in names if n in chosen), unknown)


def carry_over(previous: Sequence[str], used: Iterable[str], max: int = MAX_CARRIED) -> list[str]:
    """The tools to start the next turn with: last turn's in place, then what this turn used.

    Nothing already carried moves; names used this turn and not yet carried are appended in
    the order given (pass them in load order). Past ``max``, the earliest names not used this
    turn are dropped first, then the earliest of all. A ``max`` below one is read as one.
    """
    used_list = list(dict.fromkeys(used))
    used_set = set(used_list)
    present = set(previous)
    result = [*previous, *(n for n in used_list if n not in present)]
    cap = max if max >= 1 else 1
    excess = len(result) - cap
    if excess <= 0:
        return result
    drop: set[int] = set()
    for i, name in enumerate(result):
        if len(drop) == excess:
            break
        if name not in used_set:
            drop.add(i)
    survivors = [n for i, n in enumerate(result) if i not in drop]
    return survivors[len(survivors) - cap :] if len(survivors) > cap else survivors


def _tool_name(tool: Mapping[str, Any]) -> str | None:
    fn = tool.get("function")
    source = fn if isinstance(fn, Mapping) else tool
    name = source.get("name")
    return name if isinstance(name, str) else None


def _summary(tool: Mapping[str, Any]) -> str:
    fn = tool.get("function")
    source = fn if isinstance(fn, Mapping) else tool
    description = source.get("description")
    if not isinstance(description, str):
        return ""
    first = description.strip().split("\n", 1)[0].strip()
    return first if len(first) <= 120 else first[:117].rstrip() + "..."


def catalogue_text(tools: Iterable[Mapping[str, Any]], loaded: Iterable[str] = ()) -> str:
    """The catalogue block for the system prompt: one line per tool, loaded ones marked."""
    loaded_set = set(loaded)
    lines = [
        f"Tools available on demand. Call `{LOAD_TOOLS_NAME}` with their names (at most "
        f"{MAX_PER_LOAD} per call; `prefix*` loads every tool starting with prefix) before "
        "using them:"
    ]
    for tool in tools:
        name = _tool_name(tool)
        if name is None:
            continue
        mark = " (loaded)" if name in loaded_set else ""
        summary = _summary(tool)
        lines.append(f"- {name}{mark}" + (f": {summary}" if summary else ""))
    return "\n".join(lines)


def load_tools_tool() -> dict[str, Any]:
    """The OpenAI-shaped definition of the ``load_tools`` tool."""
    return {
        "type": "function",
        "function": {
            "name": LOAD_TOOLS_NAME,
            "description": (
                "Load tools from the catalogue so you can call them on your next step. "
                f"Give up to {MAX_PER_LOAD} names; a name ending in * loads every tool with "
                "that prefix."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "names": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": 'Tool names from the catalogue, e.g. ["search", "fs_*"].',
                    }
                },
                "required": ["names"],
            },
        },
    }
