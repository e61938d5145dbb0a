"""Plugin tools, toolset merging and resolving prompt ``tools`` entries without MCP."""

from __future__ import annotations

from typing import Any

import pytest

from standardagents.definitions import ToolDefinition, define_tool
from standardagents.exceptions import DefinitionError, NotFoundError
from standardagents.registry import Registry
from standardagents.toolsets import (
    PluginRegistry,
    merge_toolsets,
    plugin_tool,
    plugins,
    resolve_tool_name,
    resolve_toolset,
)


def search(query: str) -> str:
    """Search for something."""
    return f"found {query}"


def code_search() -> ToolDefinition:
    tool: ToolDefinition = define_tool(search)
    return tool.model_copy(update={"source_file": "agents/tools/search.py"})


def mcp_tool(name: str, server: str) -> ToolDefinition:
    async def execute(args: dict[str, Any]) -> str:
        return "remote"

    return ToolDefinition(name=name, execute=execute, call_style="args", origin="mcp", origin_detail=server)


# plugins ----------------------------------------------------------------------------------------

async def test_registered_function_becomes_a_plugin_tool() -> None:
    registry = PluginRegistry()
    tool = registry.register(search, source="acme-tools")
    assert (tool.name, tool.origin, tool.origin_detail) == ("search", "plugin", "acme-tools")
    assert registry.tools() == [tool]
    assert await tool.invoke(None, {"query": "cats"}) == "found cats"


def test_registered_definition_can_be_renamed() -> None:
    registry = PluginRegistry()
    tool = registry.register(code_search(), name="web_search", source="acme-tools")
    assert [t.name for t in registry.tools()] == ["web_search"]
    assert tool.origin == "plugin"


def test_same_name_from_another_source_is_refused() -> None:
    registry = PluginRegistry()
    registry.register(search, source="acme-tools")
    with pytest.raises(DefinitionError, match="already registered by 'acme-tools'"):
        registry.register(search, source="other-tools")


def test_same_source_registering_again_replaces_the_tool() -> None:
    registry = PluginRegistry()
    registry.register(search, source="acme-tools")
    newer = registry.register(search, source="acme-tools", name="search")
    assert registry.tools() == [newer]


def test_unregister_removes_and_unknown_names_are_reported() -> None:
    registry = PluginRegistry()
    registry.register(search, source="acme-tools")
    assert registry.unregister("search").name == "search"
    assert registry.tools() == []
    with pytest.raises(NotFoundError, match="no plugin tools are registered"):
        registry.unregister("search")


def test_plugin_tool_decorator_registers_into_the_default_registry() -> None:
    @plugin_tool(name="shout_text")
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    try:
        assert plugins.get("shout_text") is shout
        assert shout.origin_detail == __name__
    finally:
        plugins.unregister("shout_text")


def test_plugin_tool_decorator_takes_a_registry() -> None:
    registry = PluginRegistry()

    @plugin_tool(registry=registry)
    def whisper(text: str) -> str:
        """Lower-case the text."""
        return text.lower()

    assert registry.tools() == [whisper]
    assert "whisper" not in plugins


# merging ----------------------------------------------------------------------------------------

def test_merge_keeps_order_and_drops_the_same_tool_reached_twice() -> None:
    local = code_search()
    remote = mcp_tool("fetch", "web")
    merged = merge_toolsets([local, remote], [remote], [local])
    assert merged == [local, remote]


def test_merge_drops_an_equal_tool_from_the_same_origin() -> None:
    first, second = mcp_tool("fetch", "web"), mcp_tool("fetch", "web")
    assert merge_toolsets([first], [second]) == [first]


def test_merge_clash_names_both_origins() -> None:
    with pytest.raises(DefinitionError) as caught:
        merge_toolsets([code_search()], [mcp_tool("search", "web")])
    assert str(caught.value) == "tool 'search' is defined twice: code (agents/tools/search.py) and mcp server 'web'"


def test_merge_clash_between_two_servers_is_an_error() -> None:
    with pytest.raises(DefinitionError, match="mcp server 'web' and mcp server 'docs'"):
        merge_toolsets([mcp_tool("search", "web")], [mcp_tool("search", "docs")])


def test_merge_clash_between_plugin_and_code() -> None:
    registry = PluginRegistry()
    plugin = registry.register(search, source="acme-tools")
    with pytest.raises(DefinitionError, match="plugin 'acme-tools' and code"):
        merge_toolsets([plugin], [code_search()])


# resolving --------------------------------------------------------------------------------------

async def test_resolve_prefers_the_code_tool() -> None:
    registry = Registry()
    local = code_search()
    registry.add("tools", "search", local)
    found = await resolve_tool_name("search", registry=registry, plugins=PluginRegistry())
    assert found == [local]


async def test_resolve_finds_a_plugin_tool() -> None:
    registry = PluginRegistry()
    plugin = registry.register(search, source="acme-tools")
    assert await resolve_tool_name("search", registry=Registry(), plugins=registry) == [plugin]


async def test_resolve_unknown_name_says_what_it_is_not() -> None:
    with pytest.raises(NotFoundError, match="not a code tool, a plugin tool or an MCP server"):
        await resolve_tool_name("nothing", registry=Registry(), plugins=PluginRegistry())


async def test_resolve_unknown_mcp_server_lists_known_servers() -> None:
    with pytest.raises(NotFoundError, match=r"unknown MCP server 'web'.*none are defined"):
        await resolve_tool_name("mcp:web", registry=Registry(), plugins=PluginRegistry())


async def test_resolve_toolset_merges_every_entry() -> None:
    registry = Registry()
    local = code_search()
    registry.add("tools", "search", local)
    plugin_registry = PluginRegistry()
    plugin = plugin_registry.register(define_tool(name="ping", parameters={"type": "object"},
                                                  execute=lambda args: "pong"), source="acme-tools")
    toolset = await resolve_toolset(["search", "ping", "search"], registry=registry, plugins=plugin_registry)
    assert toolset == [local, plugin]
