"""Crash recovery: what keeps threads consistent when several processes share a database,
or when one of them dies mid-turn (the claims on threads themselves: :mod:`.claims`).

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
from ..records import Message, now_ms
from .done import recover_done
from .options import STATE_KEY as OPTIONS_KEY
from .options import TurnOptions
from .owners import LIVE_OWNERS, gone

if TYPE_CHECKING:
    from .execution_core import ExecutionCore
    from .hosts import RecoveryHost

__all__ = ["LIVE_OWNERS", "beat", "confirm_owned", "heartbeat", "recover"]

log = logging.getLogger("standardagents.recovery")



async def heartbeat(rt: RecoveryHost) -> None:
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
            if rt.closed:
                return
            if looking is None or looking.done():
                looking = asyncio.get_running_loop().create_task(_look(rt))
    finally:
        if looking is not None:
            looking.cancel()


async def _beat_once(rt: RecoveryHost) -> None:
    """One heartbeat: refresh the executions this runtime holds (at their epochs) and its
    thread claims; an execution another process took over meanwhile (this one stalled past
    the lease) is stopped here without a write."""
    held = rt.inflight.held()
    started = asyncio.get_running_loop().time()
    try:
        lost = await rt.store.touch_executions(held, now_ms()) if held else []
        if rt.inflight.claimed:
            await rt.store.touch_env("lock", "", list(rt.inflight.claimed), now_ms(), rt.owner)
    except Exception:
        log.warning("could not refresh the running executions", exc_info=True)
        return
    for execution_id in lost:
        rt.inflight.drop_lost(execution_id)
    if not lost:
        rt.inflight.owned_at = started


async def confirm_owned(rt: RecoveryHost, execution: ExecutionCore) -> None:
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


async def _look(rt: RecoveryHost) -> None:
    try:
        await recover(rt)
    except Exception:
        log.warning("could not look for the executions of gone processes", exc_info=True)


def beat(rt: RecoveryHost) -> None:
    if rt.inflight.heartbeat is None and not rt.closed:
        rt.inflight.heartbeat = asyncio.get_running_loop().create_task(heartbeat(rt))


async def recover(rt: RecoveryHost) -> list[str]:
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


async def _recover_inbox(rt: RecoveryHost, stale_before: int) -> None:
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
        rt.inflight.track(rt.execute(thread, agent, message, entry.get("startSide", "a"), entry.get("executionId"),
                              queued=True, options=TurnOptions.from_state(entry.get(OPTIONS_KEY))), thread_id)
