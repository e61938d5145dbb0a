"""``/mcp`` mounted without importing the MCP SDK until a client calls it.

The SDK and the types it validates with are about 24 MiB of every worker's memory, and most
deployments never receive an MCP request. The route is mounted from the start; the first
request imports :mod:`.mcp_server`, starts its session manager (kept running until the server
stops) and hands every request to its endpoint, which checks the origin and the caller exactly
as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import error_response

if TYPE_CHECKING:
    from ..state import ServerState

__all__ = ["MCP_PATH", "mcp_routes", "mcp_running"]

#: where ``standardagents serve`` answers MCP's streamable HTTP transport
MCP_PATH = "/mcp"
_DOOR_KEY = "mcp_door"


class _Door:
    """The MCP door of one server: started by its first request, stopped with the server."""

    def __init__(self, server: ServerState) -> None:
        self.server = server
        self._lock = asyncio.Lock()
        self._endpoint: ASGIApp | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def endpoint(self) -> ASGIApp:
        if self._endpoint is not None:
            return self._endpoint
        async with self._lock:
            if self._endpoint is None:
                from .mcp_server import McpEndpoint, mcp_running

                started: asyncio.Future[None] = asyncio.get_running_loop().create_future()

                async def keep_running() -> None:
                    async with mcp_running(self.server):
                        started.set_result(None)
                        await self._stop.wait()

                task = self._task = asyncio.get_running_loop().create_task(keep_running())
                await asyncio.wait({started, task}, return_when=asyncio.FIRST_COMPLETED)
                if not started.done():
                    task.result()  # it failed to start: the request fails with its error
                self._endpoint = McpEndpoint()
        return self._endpoint

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            self._stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class _LazyEndpoint:
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        door: _Door | None = scope["app"].state.server.extra.get(_DOOR_KEY)
        if door is None:
            await error_response(503, "the MCP door is not running")(scope, receive, send)
            return
        await (await door.endpoint())(scope, receive, send)


def mcp_routes() -> list[BaseRoute]:
    return [Route(MCP_PATH, _LazyEndpoint(), methods=["GET", "POST", "DELETE"])]


@contextlib.asynccontextmanager
async def mcp_running(server: ServerState) -> AsyncIterator[None]:
    """Keep the door for the server's lifetime (its session manager runs once it was used)."""
    door = server.extra[_DOOR_KEY] = _Door(server)
    try:
        yield
    finally:
        server.extra.pop(_DOOR_KEY, None)
        await door.aclose()
