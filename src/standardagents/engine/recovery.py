"""Crash recovery and cross-process claims: what keeps threads consistent when several
processes share a database, or when one of them dies mid-turn.

A running execution's process refreshes a heartbeat; a thread is claimed in the store while
one of its executions runs; a process that opens the store settles what dead ones left
behind (executions still marked running, claims, the ``done`` of a turn that ended as its
process died, and messages waiting for a busy thread).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ..exceptions import ExecutionTakenOver, NotFoundError
from ..records import Fence, Message, now_ms
from .done import recover_done
from .options import STATE_KEY as OPTIONS_KEY
from .options import TurnOptions
from .owners import LIVE_OWNERS, gone, still_running

if TYPE_CHECKING:
    from .loop import Execution
    from .runtime import Runtime

__all__ = ["LIVE_OWNERS", "beat", "claim_thread", "confirm_owned", "heartbeat", "recover", "release_thread", "try_claim"]

log = logging.getLogger("standardagents.recovery")



async def try_claim(rt: Runtime, thread_id: str) -> bool:
    """Claim the thread if no live process holds it (no waiting); True when claimed.

    A claim not refreshed within the lease is taken over, unless its holder is a process of
    this PID namespace that certainly still runs (late with its heartbeat, not gone)."""
    now = now_ms()
    if await rt.store.claim_env("lock", "", thread_id, {"owner": rt.owner}, now):
        rt._claimed.add(thread_id)
        return True
    holder = await rt.store.get_env("lock", "", thread_id)
    owner = str(holder.get("owner", "")) if isinstance(holder, dict) else ""
    if owner == rt.owner and thread_id not in rt._claimed:
        # left by a turn of this runtime that could not release it (the database was away)
        if await rt.store.touch_env("lock", "", [thread_id], now, rt.owner):
            rt._claimed.add(thread_id)
            return True
    if owner != rt.owner and still_running(owner):
        return False
    if await rt.store.claim_env("lock", "", thread_id, {"owner": rt.owner}, now,
                                stale_before=now - int(rt.execution_lease * 1000)):
        rt._claimed.add(thread_id)
        return True
    return False


async def claim_thread(rt: Runtime, thread_id: str) -> None:
    """Hold the thread across processes (another worker, a CLI on the same database): wait
    while a live process runs one of its executions; a claim not refreshed within the
    lease belonged to a process that is gone and is taken over."""
    delay = 0.01
    while True:
        if await try_claim(rt, thread_id):
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)


async def release_thread(rt: Runtime, thread_id: str) -> None:
    rt._claimed.discard(thread_id)
    try:  # only while this runtime holds it: a claim taken over stays with its taker
        await asyncio.shield(rt.store.release_env("lock", "", thread_id, rt.owner))
    except Exception:
        log.warning("could not release thread %s", thread_id, exc_info=True)


async def heartbeat(rt: Runtime) -> None:
    """Keep the running executions' records fresh, so other hosts can tell them from
    executions whose process died, and look for such executions on every beat: a turn whose
    process died is resumed within about a lease, not only when a runtime opens. The look runs
    beside the beat, never in its way: taking over many turns takes a while, and a beat held up
    past the lease would make this process's own turns look dead to the others."""
    looking: asyncio.Task[None] | None = None
    try:
        while True:
            await asyncio.sleep(rt.execution_lease / 3)
            await _beat_once(rt)
            if rt._closed:
                return
            if looking is None or looking.done():
                looking = asyncio.get_running_loop().create_task(_look(rt))
    finally:
        if looking is not None:
            looking.cancel()


async def _beat_once(rt: Runtime) -> None:
    """One heartbeat: refresh the executions this runtime holds (at their epochs) and its
    thread claims; an execution another process took over meanwhile (this one stalled past
    the lease) is stopped here without a write."""
    held = [Fence(e.record.id, e.record.epoch) for e in rt._executions.values()]
    held += [Fence(i, epoch) for i, epoch in rt._resuming.items()]
    started = asyncio.get_running_loop().time()
    try:
        lost = await rt.store.touch_executions(held, now_ms()) if held else []
        if rt._claimed:
            await rt.store.touch_env("lock", "", list(rt._claimed), now_ms(), rt.owner)
    except Exception:
        log.warning("could not refresh the running executions", exc_info=True)
        return
    for execution_id in lost:
        _drop_lost(rt, execution_id)
    if not lost:
        rt._owned_at = started


def _drop_lost(rt: Runtime, execution_id: str) -> None:
    """Stop the local run of an execution another process took over, unsettled."""
    for thread_id, execution in list(rt._executions.items()):
        if execution.record.id == execution_id:
            execution.taken_over = True
            task = rt._running.get(thread_id)
            if task is not None:
                task.cancel()
    rt._resuming.pop(execution_id, None)


async def confirm_owned(rt: Runtime, execution: Execution) -> None:
    """Raise :class:`ExecutionTakenOver` when ``execution`` may no longer be this runtime's:
    when the last heartbeat that confirmed it is older than half a lease (the process stalled:
    a long pause, a stopped process, a slow database), the store is asked."""
    if execution.taken_over:
        raise ExecutionTakenOver(execution.record.id, execution.record.epoch)
    if rt.owned_recently(execution):
        return
    stored = await rt.store.get_execution(execution.record.id)
    if stored is not None and stored.epoch != execution.record.epoch:
        execution.taken_over = True
        raise ExecutionTakenOver(execution.record.id, execution.record.epoch)


async def _look(rt: Runtime) -> None:
    try:
        await recover(rt)
    except Exception:
        log.warning("could not look for the executions of gone processes", exc_info=True)


def beat(rt: Runtime) -> None:
    if rt._heartbeat_task is None and not rt._closed:
        rt._heartbeat_task = asyncio.get_running_loop().create_task(heartbeat(rt))


async def recover(rt: Runtime) -> list[str]:
    """Take over what processes that are gone left behind: their running executions are
    resumed here (:mod:`.resume`, each claimed by exactly one runtime), their claims removed and
    the messages they had queued sent again. A process of this PID namespace is gone when its
    pid is; any other when its heartbeat is older than ``execution_lease`` seconds. Returns
    the ids of the resumed executions."""
    from .resume import resume_orphans

    stale_before = now_ms() - int(rt.execution_lease * 1000)
    for _scope_id, locked_thread, entry in await rt.store.list_scope("lock"):
        owner = str(entry.get("owner", "")) if isinstance(entry, dict) else ""
        # a claim is refreshed while its process lives; a stale one is taken over by the next
        # claim anyway, so only claims of certainly gone processes are removed here
        if gone(rt, owner, fresh=True):
            try:  # it may have ended a turn and died before the turn's done was written
                await recover_done(rt, locked_thread)
            except Exception:
                log.warning("could not send the done of thread %s's last turn", locked_thread, exc_info=True)
            await rt.store.delete_env("lock", "", locked_thread)
    resumed = await resume_orphans(rt)
    await _recover_inbox(rt, stale_before)
    return resumed


async def _recover_inbox(rt: Runtime, stale_before: int) -> None:
    """Send again the messages a gone process had queued for busy threads."""
    for thread_id, message_id, entry in await rt.store.list_scope("inbox"):
        if not isinstance(entry, dict):
            continue
        owner = str(entry.get("owner", ""))
        if not gone(rt, owner, fresh=int(entry.get("queuedAt", 0)) >= stale_before):
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
        # the same execution id its sender was given when the message was accepted
        rt._track(rt._execute(thread, agent, message, entry.get("startSide", "a"), entry.get("executionId"),
                              queued=True, options=TurnOptions.from_state(entry.get(OPTIONS_KEY))), thread_id)
