"""Toolsets: the three tool origins (project code, MCP servers, plugins) resolved and merged.

A prompt's ``tools`` entry may name a code tool, a plugin tool, a whole MCP server, or one
tool of a server; :func:`resolve_tool_name` turns each entry into tool definitions and
:func:`merge_toolsets` joins them, dropping repeats and refusing two different tools that
share a name, because the model could not tell them apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .definitions import ToolDefinition, define_tool
from .exceptions import DefinitionError, NotFoundError

if TYPE_CHECKING:
    from .mcp import MCPPool, MCPServerDefinition
    from .registry import Registry

__all__ = [
    "MCP_PREFIX",
    "PluginRegistry",
    "describe_origin",
    "merge_toolsets",
    "plugin_tool",
    "plugins",
    "resolve_tool_name",
    "resolve_toolset",
]

#: a prompt names a server's tools as ``mcp:<server>`` or ``mcp:<server>/<tool>``
MCP_PREFIX = "mcp:"


class PluginRegistry:
    """Tools registered at run time by installed code (origin ``"plugin"``).

    ``source`` names who registered a tool (a distribution or module); registering the same
    name again from the same source replaces it, from another source is an error.
    """

    def __init__(self) -> None:
        self._tools: dict[str, ToolDefinition] = {}

    def register(self, tool: ToolDefinition | Callable[..., Any], *, name: str | None = None,
                 source: str = "plugin") -> ToolDefinition:
        """Register a tool definition or a typed function; returns the registered definition."""
        definition = tool if isinstance(tool, ToolDefinition) else define_tool(tool, name=name)
        update: dict[str, Any] = {"origin": "plugin", "origin_detail": source}
        if name is not None:
            update["name"] = name
        definition = definition.model_copy(update=update)
        current = self._tools.get(definition.name)
        if current is not None and current.origin_detail != source:
            raise DefinitionError(
                f"plugin tool {definition.name!r} is already registered by {current.origin_detail!r}; "
                f"unregister it first or register under another name", source=source)
        self._tools[definition.name] = definition
        return definition

    def unregister(self, name: str) -> ToolDefinition:
        """Remove a tool and return it; ``NotFoundError`` when no plugin registered ``name``."""
        try:
            return self._tools.pop(name)
        except KeyError:
            raise NotFoundError("plugin tool", name, self._hint()) from None

    def get(self, name: str) -> ToolDefinition | None:
        return self._tools.get(name)

    def tools(self) -> list[ToolDefinition]:
        """Every registered tool, in registration order."""
        return list(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def _hint(self) -> str:
        return "known: " + ", ".join(self._tools) if self._tools else "no plugin tools are registered"


#: the process-wide plugin registry that :func:`plugin_tool` registers into
plugins = PluginRegistry()
_default_plugins = plugins


def plugin_tool(func: Callable[..., Any] | None = None, /, *, name: str | None = None,
                source: str | None = None, registry: PluginRegistry | None = None) -> Any:
    """Register a typed function as a plugin tool: ``@plugin_tool`` or ``@plugin_tool(name=...)``.

    The source defaults to the function's module; the decorated name becomes the definition.
    """
    target = registry if registry is not None else plugins

    def register(f: Callable[..., Any]) -> ToolDefinition:
        return target.register(f, name=name, source=source or getattr(f, "__module__", None) or "plugin")

    return register(func) if func is not None else register


def describe_origin(tool: ToolDefinition) -> str:
    """Where a tool comes from, in words a user recognises."""
    if tool.origin == "mcp":
        return f"mcp server {tool.origin_detail!r}"
    if tool.origin == "plugin":
        return f"plugin {tool.origin_detail!r}" if tool.origin_detail else "plugin"
    if tool.origin == "agent":
        return f"agent {tool.origin_detail!r}" if tool.origin_detail else "agent"
    where = tool.origin_detail or tool.source_file
    return f"{tool.origin} ({where})" if where else tool.origin


def _identity(tool: ToolDefinition) -> tuple[str, str, str | None]:
    return tool.name, tool.origin, tool.origin_detail or tool.source_file


def merge_toolsets(*toolsets: Iterable[ToolDefinition]) -> list[ToolDefinition]:
    """One toolset from several, first occurrence first.

    A tool reached twice (the same object, or the same name from the same origin) appears
    once; two different tools with one name raise ``DefinitionError`` naming both origins.
    """
    merged: dict[str, ToolDefinition] = {}
    for toolset in toolsets:
        for tool in toolset:
            seen = merged.get(tool.name)
            if seen is None:
                merged[tool.name] = tool
            elif seen is not tool and _identity(seen) != _identity(tool):
                raise DefinitionError(
                    f"tool {tool.name!r} is defined twice: {describe_origin(seen)} and {describe_origin(tool)}")
    return list(merged.values())


def _servers_by_name(servers: Mapping[str, MCPServerDefinition] | Iterable[MCPServerDefinition] | None) -> dict[str, MCPServerDefinition]:
    if servers is None:
        return {}
    if isinstance(servers, Mapping):
        return dict(servers)
    return {s.name: s for s in servers}


async def resolve_tool_name(
    name: str,
    *,
    registry: Registry | None,
    namespace: str | None = None,
    pool: MCPPool | None = None,
    plugins: PluginRegistry | None = None,
    servers: Mapping[str, MCPServerDefinition] | Iterable[MCPServerDefinition] | None = None,
) -> list[ToolDefinition]:
    """The tools one prompt ``tools`` entry names.

    Looked up in order: a code tool in ``registry``, a plugin tool, ``mcp:<server>`` (all of a
    server's tools), ``mcp:<server>/<tool>`` (one, by the server's own tool name), then the
    bare name of an MCP server. Unknown names raise ``NotFoundError`` listing what exists.
    """
    if registry is not None and registry.has("tools", name, namespace):
        return [await registry.aget("tools", name, namespace)]
    plugin_registry = plugins if plugins is not None else _default_plugins
    found = plugin_registry.get(name)
    if found is not None:
        return [found]
    by_name = _servers_by_name(servers if servers is not None else (pool.servers if pool is not None else None))
    server_name, remote = name, None
    explicit = name.startswith(MCP_PREFIX)
    if explicit:
        server_name, _, remote_part = name[len(MCP_PREFIX):].partition("/")
        remote = remote_part or None
    server = by_name.get(server_name)
    if server is None:
        if explicit:
            known = ", ".join(sorted(by_name)) or "none are defined"
            raise NotFoundError("MCP server", server_name, f"named by tools entry {name!r}; known: {known}")
        hint = "not a code tool, a plugin tool or an MCP server"
        if by_name:
            hint += f" (MCP servers: {', '.join(sorted(by_name))}; name one server's tool as 'mcp:<server>/<tool>')"
        raise NotFoundError("tool", name, hint)
    if pool is None:
        raise NotFoundError("tool", name, f"MCP server {server_name!r} is defined but no MCP pool was given")
    tools = await pool.list_tools(server)
    if remote is None:
        return tools
    wanted = server.tool_name(remote)
    picked = [t for t in tools if t.name in (wanted, remote)]
    if not picked:
        offered = ", ".join(t.name for t in tools) or "none"
        raise NotFoundError("tool", remote, f"MCP server {server_name!r} offers: {offered}")
    return picked[:1]


async def resolve_toolset(
    names: Iterable[str],
    *,
    registry: Registry | None,
    namespace: str | None = None,
    pool: MCPPool | None = None,
    plugins: PluginRegistry | None = None,
    servers: Mapping[str, MCPServerDefinition] | Iterable[MCPServerDefinition] | None = None,
) -> list[ToolDefinition]:
    """Every entry of a prompt's ``tools`` resolved and merged into one toolset."""
    sets = [await resolve_tool_name(n, registry=registry, namespace=namespace, pool=pool, plugins=plugins, servers=servers)
            for n in names]
    return merge_toolsets(*sets)
