"""``standardagents mcp PROJECT``: the project's agents as an MCP server over stdio."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["mcp_command"]


def mcp_command(
    project: Annotated[Path, typer.Argument(help="The project folder (the one holding agents/).")],
    database_url: Annotated[str | None, typer.Option(
        "--database-url", envvar="STANDARDAGENTS_DATABASE_URL",
        help="SQLAlchemy URL; default: SQLite under .standardagents/.")] = None,
    token: Annotated[str | None, typer.Option(
        "--token", envvar="STANDARDAGENTS_TOKEN",
        help="Act as this API token's user (default: the local admin, as 'serve --dev').")] = None,
) -> None:
    """Serve the project's agents as MCP tools over stdin/stdout (for desktop apps and IDEs).

    Nothing but MCP messages is written to stdout; errors go to stderr."""
    from ...engine.runtime import Runtime
    from ...exceptions import StandardAgentsError
    from .common import DoorError
    from .mcp_server import serve_stdio

    if not (project / "agents").is_dir():
        sys.stderr.write(f"error: {project} is not an agents project (there is no agents/ folder)\n")
        raise typer.Exit(1)

    async def main() -> None:
        rt = await Runtime.open(project, database_url=database_url)
        try:
            await serve_stdio(rt, token)
        finally:
            await rt.aclose()

    try:
        asyncio.run(main())
    except (DoorError, StandardAgentsError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
