"""A small MCP server over stdio whose one tool returns the ``traceparent`` its request's
``_meta`` carried (empty when none), for the tracing tests."""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("traced", log_level="ERROR")


@server.tool()
def seen_traceparent(ctx: Context) -> str:
    """The traceparent this call arrived with."""
    meta = ctx.request_context.meta or {}
    return str(meta.get("traceparent", "")) if isinstance(meta, dict) else str(getattr(meta, "traceparent", ""))


if __name__ == "__main__":
    server.run()
