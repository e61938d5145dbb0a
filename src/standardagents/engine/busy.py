"""What a message does when it reaches a thread that is running a turn.

The policy comes from the request (``busy=``) or else from the agent (``define_agent(busy=...)``):
``enqueue`` stores the message in the thread's inbox and runs it after the turn (the default);
``reject`` refuses it with :class:`~standardagents.exceptions.ThreadBusyError` and stores
nothing; ``interrupt`` queues it and stops the running turn, which keeps what it wrote (its
partial reply marked, its unanswered calls answered with errors); ``rollback`` queues it and
stops the running turn, which then deletes every message it stored before it lets the thread
go, so the new message runs on the conversation as it was before that turn. Stopping reaches
the turn on whichever process runs it (the stop travels over the event relay).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, get_args

from ..definitions.agent import BusyPolicy
from ..exceptions import DefinitionError, ThreadBusyError

if TYPE_CHECKING:
    from .hosts import BusyHost
    from .state import ThreadState

__all__ = ["BUSY_POLICIES", "check_policy", "mark_rollback", "preempt", "refuse", "roll_back"]

log = logging.getLogger("standardagents.busy")

BUSY_POLICIES: tuple[str, ...] = get_args(BusyPolicy)


def check_policy(value: Any) -> BusyPolicy:
    """A requested policy, or a clear error naming the allowed ones."""
    if value not in BUSY_POLICIES:
        raise DefinitionError(f"busy must be one of {', '.join(BUSY_POLICIES)}, not {value!r}")
    policy: BusyPolicy = value
    return policy


def refuse(thread_id: str) -> None:
    raise ThreadBusyError(thread_id)


async def preempt(rt: BusyHost, thread_id: str, *, rollback: bool) -> None:
    """Stop the turn running on the thread (here or on another worker), marked to remove what
    it wrote when ``rollback``; returns once it has ended (or the stop's wait ran out)."""
    if rollback:
        mark_rollback(rt, thread_id)
    await rt.stop(thread_id, rollback=rollback)


def mark_rollback(rt: BusyHost, thread_id: str) -> None:
    """Mark the execution running here on the thread to be rolled back when it ends."""
    rt.inflight.mark_rollback(thread_id)


async def roll_back(rt: BusyHost, state: ThreadState) -> list[str]:
    """Delete the messages (and their tool results) a stopped execution stored, while it still
    holds the thread; clients are told with ``messages_removed``."""
    ex = state.execution
    if ex is None or not ex.written:
        return []
    ids = list(dict.fromkeys(ex.written))
    await rt.store.delete_messages(state.thread_id, ids)
    ex.written.clear()
    rt.bus.emit("messages_removed", state.thread_id, {"executionId": ex.id, "messageIds": ids})
    log.info("rolled back execution %s of thread %s (%d messages)", ex.id, state.thread_id, len(ids))
    return ids
