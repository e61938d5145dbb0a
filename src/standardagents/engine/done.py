"""A turn's one ``done``, made durable with the turn's end.

The event log writes events in batches (:mod:`standardagents.eventlog`): a process killed
right after a turn ended could take the turn's ``done`` down with its unwritten batch, while
the store says the turn is over; no stream would ever get it, and a client reconnecting with
``Last-Event-ID`` would wait for it forever. So when an event log runs, the ``done`` of an
ended execution is written on its own, in one transaction with a mark on the execution's
record (:data:`DONE_KEY`, its event id), *before* any stream sees it: once one stream has it,
the log has it. That is one database round trip per turn end, none per step.

A process that dies between the turn's end and that write leaves a record without the mark.
A runtime cleaning up after it (:func:`.recovery.recover`, which finds the thread claim the
dead process held: a process of its own host whose pid is gone, as claims of other hosts are
left to expire) writes the ``done`` then, from the record, and publishes it; a record that
has the mark gets its logged ``done`` published again, since the dead process may not have
sent it to the other workers. The mark is a compare-and-set, so of the process ending the
turn and any runtimes recovering it (several may start together) exactly one writes a
``done``; one published again keeps its id, and a stream drops an id it already sent.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..eventlog import DEFAULT_MAX_AGE, batch_rows
from ..events import Event
from ..records import ExecutionRecord, now_ms

if TYPE_CHECKING:
    from .ports import DoneHost

__all__ = ["DONE_KEY", "done_data", "publish_done", "recover_done", "turn_ended"]

log = logging.getLogger("standardagents.done")

#: the execution record's mark: the id of its logged ``done``
DONE_KEY = "doneEventId"
#: statuses after which an execution sends no more events (a waiting one goes on later)
OPEN_STATUSES = ("running", "waiting")
#: outcomes whose ``done`` carries the turn's payload
PAYLOAD_OUTCOMES = ("output_invalid", "model_error", "guardrail")


def done_data(record: ExecutionRecord) -> dict[str, Any]:
    """The ``done`` of an ended execution, as its record tells it."""
    state = record.state
    stop_reason = record.stop_reason or record.status
    outcome = state.get("outcome") or stop_reason
    data: dict[str, Any] = {"stopReason": stop_reason, "executionId": record.id, "outcome": outcome,
                            "error": record.error, "stoppedBy": record.stopped_by}
    if state.get("value") is not None:
        data["value"] = state["value"]
    if outcome in PAYLOAD_OUTCOMES:
        data["payload"] = state.get("payload")
    return data


async def publish_done(rt: DoneHost, record: ExecutionRecord, data: dict[str, Any]) -> None:
    """Send the ``done`` of the ended execution ``record`` (as stored): first written with the
    record's mark when an event log runs, as it was sent without one."""
    if not rt.bus.logged or record.status in OPEN_STATUSES:
        rt.bus.emit("done", record.thread_id, data)
    else:
        await _write_and_publish(rt, record, Event("done", record.thread_id, data))
    if record.status not in OPEN_STATUSES:
        await turn_ended(rt, record, data)


async def turn_ended(rt: DoneHost, record: ExecutionRecord, data: dict[str, Any]) -> None:
    """Run the runtime's turn-end hooks (a webhook outbox): a failing hook is logged, never
    the turn's failure. A turn recovered from a gone process runs them again; the hooks
    must therefore be idempotent per execution."""
    for hook in rt.turn_end_hooks:
        try:
            await hook(record, data)
        except Exception:
            log.warning("a turn-end hook failed for execution %s", record.id, exc_info=True)


async def _write_and_publish(rt: DoneHost, record: ExecutionRecord, event: Event, *, floor: int = 0,
                             recovering: bool = False) -> bool:
    """Write ``event`` with the record's mark, then publish it; False when the stored record
    changed first: then nothing is published when another runtime marked it (and sends its
    own done) or, for a runtime ``recovering`` the turn, when it changed at all. The thread's
    other events wait meanwhile."""
    bus = rt.bus
    thread_id = record.thread_id
    event.id = max(bus.hold(thread_id), floor + 1)
    published: Event | None = event
    marked = replace(record, state={**record.state, DONE_KEY: event.id},
                     updated_at=max(now_ms(), record.updated_at + 1))
    write = asyncio.ensure_future(rt.store.log_ending(marked, record.updated_at, batch_rows([(thread_id, event)])))
    cancelled = False
    try:
        while not write.done():
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                cancelled = True  # the turn is over: finish the write, then let the cancel through
        won = write.result()
        if won:
            record.state, record.updated_at = marked.state, marked.updated_at
            event.logged = True
        elif recovering or await _marked(rt, record.id):
            published = None
    except Exception:
        log.warning("could not write the done of execution %s; it goes with the next batch of events",
                    record.id, exc_info=True)
        won = True
    finally:
        bus.release(thread_id, published)
    if cancelled:
        raise asyncio.CancelledError
    return bool(won)


async def _marked(rt: DoneHost, execution_id: str) -> bool:
    current = await rt.store.get_execution(execution_id)
    return current is not None and DONE_KEY in current.state


async def recover_done(rt: DoneHost, thread_id: str) -> None:
    """Send the ``done`` of the thread's last execution when a gone process ended it without
    (see the module's docstring); a no-op when it still runs or has no event log."""
    if not rt.bus.logged:
        return
    executions = await rt.store.list_executions(thread_id=thread_id)
    if not executions:
        return
    record = max(executions, key=lambda r: (r.created_at, r.updated_at))
    if record.status in OPEN_STATUSES or record.updated_at < now_ms() - int(DEFAULT_MAX_AGE * 1000):
        return
    marked = record.state.get(DONE_KEY)
    # the thread's recent tail of the log: ids only grow, and the done may be there already
    _floor, tail = await rt.store.read_events(thread_id, (record.updated_at - 60_000) * 1000)
    done = next((e for e in tail if e[1] == "done" and isinstance(e[2], dict)
                 and e[2].get("executionId") == record.id), None)
    if done is not None:
        if marked is not None and marked != done[0]:
            log.warning("execution %s has done %s logged but is marked with %s", record.id, done[0], marked)
        event_id, type_, data, ts = done
        rt.bus.publish(Event(type_, thread_id, data, int(event_id), ts, logged=True))
        await turn_ended(rt, record, data)
        return
    if marked is not None:  # marked but not logged: the log was trimmed; nothing to send again
        return
    top = max((e[0] for e in tail), default=0)
    if await _write_and_publish(rt, record, Event("done", thread_id, recovered := done_data(record)), floor=top,
                                recovering=True):
        await turn_ended(rt, record, recovered)
        log.warning("execution %s of thread %s ended as its process stopped: its done is sent now",
                    record.id, thread_id)
