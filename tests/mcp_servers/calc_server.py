"""A small MCP server for the pool tests: ``add``, ``echo``, a failing tool and a tool with a
broken input schema, served over stdio (default) or streamable HTTP (``--http``).

Over HTTP it binds a free 127.0.0.1 port itself and prints ``PORT <n>`` once it listens, so a
test can connect without guessing a port or polling for it.
"""

from __future__ import annotations

import asyncio
import socket
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("calc", log_level="ERROR")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def fail(reason: str) -> str:
    """Always fail, with the given reason."""
    raise ToolError(reason)


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a ``shout`` tool and tell the client the tool list changed."""

    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    server.add_tool(shout)
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
def broken(x: int) -> int:
    """Advertised with an input schema that is not valid JSON Schema."""
    return x


_broken = server._tool_manager.get_tool("broken")
assert _broken is not None
_broken.parameters = {"type": "object", "properties": {"x": {"type": 12}}}


async def _serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await uv.serve(sockets=[sock])


if __name__ == "__main__":
    if "--http" in sys.argv:
        asyncio.run(_serve_http())
    else:
        server.run()
