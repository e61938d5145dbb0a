"""Opening and closing a runtime: the project and store it opens with, the capability
latches kept beside the project between runs, and a close that ends every running turn,
releases the threads this process claimed and closes what the runtime opened.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..project import load_project
from ..registry import Registry
from ..store.base import Store
from . import claims, recovery
from .turns import ended

if TYPE_CHECKING:
    from .hosts import LifecycleHost

__all__ = ["close", "load_capabilities", "open_parts"]

log = logging.getLogger("standardagents.runtime")


async def open_parts(project: str | Path | Registry | None, database_url: str | None,
                     store: Store | None) -> tuple[Registry, Store]:
    """The registry (a folder loaded, a ready Registry, or an empty one) and its opened store."""
    from ..store import open_store

    if isinstance(project, Registry):
        registry = project
    elif project is not None:
        registry = load_project(project)
    else:
        registry = Registry()
    if store is None:
        root = registry.root if registry.root is not None else Path.cwd()
        store = open_store(database_url, project_dir=Path(root))
    await store.open()
    return registry, store


def load_capabilities(rt: LifecycleHost) -> None:
    """Read the latches an earlier run saved beside the project (a folder project only)."""
    if rt.registry.root is not None:
        rt.capabilities_file = Path(rt.registry.root) / ".standardagents" / "capabilities.json"
        if rt.capabilities_file.is_file():
            rt.capabilities.import_capabilities(rt.capabilities_file.read_text())


async def close(rt: LifecycleHost) -> None:
    """Cancel running executions, release claims, save the latches, close MCP sessions, the
    sandbox, providers and the store; a cancellation of the caller is raised at the end."""
    recovery.LIVE_OWNERS.discard(rt.owner)
    if rt.inflight.heartbeat is not None:
        rt.inflight.heartbeat.cancel()
    tasks: set[asyncio.Task[Any]] = {*rt.inflight.running.values(), *rt.inflight.tasks, *rt.inflight.background}
    for task in tasks:
        task.cancel()
    interrupted = False
    try:
        # asyncio.wait, not await: a cancellation of the caller stays the caller's
        await ended(tasks)
    except asyncio.CancelledError:
        interrupted = True
    for thread_id in list(rt.inflight.claimed):
        await claims.release_thread(rt, thread_id)
    if rt.capabilities_file is not None:
        try:
            rt.capabilities_file.parent.mkdir(parents=True, exist_ok=True)
            rt.capabilities_file.write_text(rt.capabilities.export_capabilities())
        except OSError:
            log.warning("could not save the capability latches to %s", rt.capabilities_file)
    if rt.mcp_pool is not None:
        try:
            await rt.mcp_pool.aclose()
        except Exception:
            log.exception("closing MCP sessions failed")
    if rt.sandbox_pool is not None:
        try:
            await rt.sandbox_pool.close()
        except Exception:
            log.exception("closing the code sandbox failed")
    await rt.setups.aclose()
    await rt.store.close()
    if interrupted:
        raise asyncio.CancelledError
