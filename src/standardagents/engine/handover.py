"""Graceful shutdown: a runtime asked to stop lets its running turns finish for a while, then
hands the rest over instead of failing them.

Draining first refuses new turns (:class:`~standardagents.exceptions.ShuttingDownError`) and
waits up to the grace period for the running ones. Handing over then cancels what still runs
*without settling it*: the execution stays ``running`` in the store, as after a crash, and
what it committed is kept. Its record, and the inbox messages this runtime had queued, are
marked *released* (no heartbeat will come), the thread claims are let go, and one
``turns_handed_over`` event tells the other workers (over the PostgreSQL relay) to look for
them now: one of them claims each turn and resumes it from its last committed step through
the crash-resume path (:mod:`.resume`), re-asking the model whose reply was cut short. With no
live worker (SQLite, or the last one stopping), the next runtime to open the store resumes them.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from ..records import now_ms
from . import claims
from .owners import RELEASED

if TYPE_CHECKING:
    from .hosts import HandoverHost

__all__ = ["HANDED_OVER", "RELEASED", "drain", "hand_over"]

log = logging.getLogger("standardagents.handover")

#: the event telling other processes that turns were handed over (data: ``executionIds``)
HANDED_OVER = "turns_handed_over"


async def drain(rt: HandoverHost, timeout: float) -> list[str]:  # noqa: ASYNC109 - the grace period is the point
    rt.draining = True
    running = rt.inflight.live_tasks()
    if running and timeout > 0:
        log.info("waiting up to %.0fs for %d running turn(s) to finish", timeout, len(running))
        await asyncio.wait(running, timeout=timeout)
    return await hand_over(rt)


async def hand_over(rt: HandoverHost) -> list[str]:
    rt.draining = True
    if rt.inflight.heartbeat is not None:  # it would resume the turns released here
        rt.inflight.heartbeat.cancel()
        rt.inflight.heartbeat = None
    executions = rt.inflight.execution_ids()
    tasks = rt.inflight.live_tasks()
    if not tasks:
        return []
    rt.inflight.handing_over = True
    try:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
    finally:
        rt.inflight.handing_over = False
    released: list[str] = []
    for execution_id in executions:
        record = await rt.store.get_execution(execution_id)
        if record is None or record.status != "running" or record.state.get("owner") != rt.owner:
            continue
        let_go = replace(record, state={**record.state, "owner": RELEASED + rt.owner}, updated_at=now_ms())
        if await rt.store.replace_execution(let_go, expected_status="running", expected_updated_at=record.updated_at):
            released.append(execution_id)
    for thread_id, message_id, entry in await rt.store.list_scope("inbox"):
        if isinstance(entry, dict) and entry.get("owner") == rt.owner:
            await rt.store.set_env("inbox", thread_id, message_id, {**entry, "owner": RELEASED + rt.owner})
    for thread_id in list(rt.inflight.claimed):
        await claims.release_thread(rt, thread_id)
    if released:
        log.warning("handed over %d running turn(s) for another worker to resume: %s",
                    len(released), ", ".join(released))
    rt.bus.emit(HANDED_OVER, "", {"executionIds": released, "owner": rt.owner})
    return released
