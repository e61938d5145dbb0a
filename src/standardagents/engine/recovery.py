"""Crash recovery and cross-process claims: what keeps threads consistent when several
processes share a database, or when one of them dies mid-turn.

A running execution's process refreshes a heartbeat; a thread is claimed in the store while
one of its executions runs; a process that opens the store settles what dead ones left
behind (executions still marked running, claims, and messages waiting for a busy thread).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import TYPE_CHECKING

from ..exceptions import NotFoundError
from ..records import Message, now_ms
from .hooks import HookSet
from .state import ThreadState

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["beat", "claim_thread", "heartbeat", "recover", "release_thread"]

log = logging.getLogger("standardagents.recovery")


async def claim_thread(rt: Runtime, thread_id: str) -> None:
    """Hold the thread across processes (another worker, a CLI on the same database): wait
    while a live process runs one of its executions; a claim not refreshed within the
    lease belonged to a process that is gone and is taken over."""
    delay = 0.01
    value = {"owner": rt.owner}
    while True:
        now = now_ms()
        if await rt.store.claim_env("lock", "", thread_id, value, now,
                                      stale_before=now - int(rt.execution_lease * 1000)):
            rt._claimed.add(thread_id)
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)


async def release_thread(rt: Runtime, thread_id: str) -> None:
    rt._claimed.discard(thread_id)
    try:
        await asyncio.shield(rt.store.release_env("lock", "", thread_id))
    except Exception:
        log.warning("could not release thread %s", thread_id, exc_info=True)


async def heartbeat(rt: Runtime) -> None:
    """Keep the running executions' records fresh, so other hosts can tell them from
    executions whose process died (see :func:`recover`)."""
    while True:
        await asyncio.sleep(rt.execution_lease / 3)
        ids = [e.record.id for e in rt._executions.values()]
        try:
            if ids:
                await rt.store.touch_executions(ids, now_ms())
            if rt._claimed:
                await rt.store.touch_env("lock", "", list(rt._claimed), now_ms())
        except Exception:
            log.warning("could not refresh the running executions", exc_info=True)


def beat(rt: Runtime) -> None:
    if rt._heartbeat_task is None and not rt._closed:
        rt._heartbeat_task = asyncio.get_running_loop().create_task(heartbeat(rt))


async def recover(rt: Runtime) -> list[str]:
    """Settle executions left ``running`` by a process that is gone: they are marked
    interrupted and their unanswered tool calls get error results, so the thread takes its
    next message normally. A process of this host is gone when its pid is; one of another
    host when its heartbeat is older than ``execution_lease`` seconds. Returns the ids."""
    host = socket.gethostname()
    stale_before = now_ms() - int(rt.execution_lease * 1000)
    mine = {e.record.id for e in rt._executions.values()}
    settled: list[str] = []
    for record in await rt.store.list_executions(status="running"):
        owner = str(record.state.get("owner", ""))
        owner_host, _, pid = owner.rpartition(":")
        if owner == rt.owner or record.id in mine:
            continue
        if owner_host == host and pid.isdigit():
            if _alive(int(pid)):
                continue
        elif record.updated_at >= stale_before:
            continue
        record.status = "interrupted"
        record.stop_reason = "interrupted"
        record.error = "the process running this execution stopped"
        record.updated_at = now_ms()
        await rt.store.save_execution(record)
        thread = await rt.store.get_thread(record.thread_id)
        if thread is not None:
            agent = None
            if rt.registry.has("agents", thread.agent, thread.package):
                agent = await rt.agent(thread.agent, thread.package)
            state = ThreadState(rt, thread, agent, thread.package)
            state._hooks = HookSet()
            await rt.repair_transcript(state, reason="the process running this call stopped before it finished")
        settled.append(record.id)
        log.warning("recovered execution %s of thread %s (its process %s is gone)", record.id, record.thread_id, owner)
    for _scope_id, locked_thread, entry in await rt.store.list_scope("lock"):
        owner = str(entry.get("owner", "")) if isinstance(entry, dict) else ""
        owner_host, _, pid = owner.rpartition(":")
        if owner != rt.owner and owner_host == host and pid.isdigit() and not _alive(int(pid)):
            await rt.store.delete_env("lock", "", locked_thread)
    await _recover_inbox(rt, host, stale_before)
    return settled


async def _recover_inbox(rt: Runtime, host: str, stale_before: int) -> None:
    """Send again the messages a gone process had queued for busy threads."""
    for thread_id, message_id, entry in await rt.store.list_scope("inbox"):
        if not isinstance(entry, dict):
            continue
        owner = str(entry.get("owner", ""))
        owner_host, _, pid = owner.rpartition(":")
        if owner == rt.owner:
            continue
        if owner_host == host and pid.isdigit():
            if _alive(int(pid)):
                continue
        elif int(entry.get("queuedAt", 0)) >= stale_before:
            continue
        try:
            await rt.store.get_message(message_id)
            already_stored = True
        except NotFoundError:
            already_stored = False
        thread = await rt.store.get_thread(thread_id)
        if already_stored or thread is None or not rt.registry.has("agents", thread.agent, thread.package):
            await rt.store.delete_env("inbox", thread_id, message_id)
            continue
        message = Message.from_dict(entry["message"])
        agent = await rt.agent(thread.agent, thread.package)
        await rt.store.set_env("inbox", thread_id, message_id, {**entry, "owner": rt.owner})
        log.warning("sending message %s of thread %s again (it was queued by %s, which is gone)",
                    message_id, thread_id, owner)
        rt._track(rt._execute(thread, agent, message, entry.get("startSide", "a"), queued=True), thread_id)


def _alive(pid: int) -> bool:
    """Whether a process of this host still runs."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
