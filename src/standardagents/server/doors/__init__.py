"""Protocol doors: the project's agents reachable from protocols other clients already speak
(MCP as a server, AG-UI, A2A). Each door is a thin adapter onto the runtime: it starts turns
with ``Runtime.start``, follows them on the event bus, stops them with ``Runtime.stop`` and
checks callers exactly as the REST API does.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from ..state import ServerState

__all__ = ["door_routes", "doors_running"]


def door_routes() -> list[BaseRoute]:
    """The routes of every door (mounted by the server app before the project's own)."""
    from .a2a_door import a2a_routes
    from .agui import agui_routes
    from .mcp_door import mcp_routes

    routes: list[BaseRoute] = [*mcp_routes(), *agui_routes(), *a2a_routes()]
    return routes


@contextlib.asynccontextmanager
async def doors_running(server: ServerState) -> AsyncIterator[None]:
    """What the doors keep running while the app serves (the MCP session manager, from
    the door's first request on)."""
    from .mcp_door import mcp_running

    async with mcp_running(server):
        yield
