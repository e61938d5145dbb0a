"""Starting and executing turns: a message claims its thread (or waits in the thread's
inbox), one execution at a time runs per thread under an in-process lock, and every
execution ends with exactly one ``done`` (also when it fails before its loop runs).
Stopping a running turn, here or in another process, lives here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from .. import observability as observe
from ..definitions import AgentDefinition
from ..exceptions import NotFoundError, ShuttingDownError, StandardAgentsError
from ..records import ExecutionRecord, Fence, Message, ThreadRecord, new_id, now_ms
from . import approvals, claims, recovery, threadops
from . import busy as busy_policy
from . import client_tools as client_tools_mod
from . import resume as resuming
from .digest import DIGEST_KEY
from .done import publish_done
from .handover import HANDED_OVER
from .history import turn_history
from .loop import Execution, ExecutionResult
from .options import STATE_KEY as OPTIONS_KEY
from .options import TurnOptions, TurnRequest
from .state import ExecutionState, ThreadState
from .tools import unanswered_calls

if TYPE_CHECKING:
    from .hosts import TurnsHost

__all__ = ["BUS_EVENT_TYPES", "cancel", "ended", "execute", "execute_locked", "failed_before_run", "on_bus_event", "start", "stop", "thread_of"]

log = logging.getLogger("standardagents.runtime")


async def start(rt: TurnsHost, thread: ThreadRecord, request: TurnRequest) -> asyncio.Task[ExecutionResult]:
    """Start (or queue behind the running one) the execution ``request`` asks for in
    ``thread``; returns its task (the fields are documented on :meth:`Runtime.start`, the
    public door to this)."""
    if rt.draining:
        raise ShuttingDownError()
    options = request.turn_options()
    start_side, execution_id, model = request.start_side, request.execution_id, request.model
    if model is not None and not rt.registry.has("models", model, thread.package):
        raise NotFoundError("model", model)
    agent = await rt.agent(thread.agent, thread.package)
    if request.client_tools is not None:
        await rt.check_client_tools(agent, thread.package, request.client_tools)
    message = None
    if request.has_message:
        message = Message(thread_id=thread.id, role=request.role, content=request.content,  # type: ignore[arg-type]
                          parts=request.parts, attachments=list(request.attachments or []), side=request.side,
                          metadata=dict(request.metadata or {}), silent=request.silent)
    claimed = queued = False
    policy = busy_policy.check_policy(request.busy or agent.busy)
    if message is not None:
        # Claim the thread now when it is free; when it is busy (here or in another
        # process) the message is stored in the inbox before anything waits, so a crash
        # or a shutdown meanwhile loses nothing and the caller need not wait for the turn.
        if rt.inflight.pending.get(thread.id, 0) > 0:
            queued = True
        else:
            claimed = await claims.try_claim(rt, thread.id)
            queued = not claimed
        if queued and policy == "reject":
            busy_policy.refuse(thread.id)
        if queued:
            execution_id = execution_id or new_id("exe_")
            entry = {"owner": rt.owner, "queuedAt": now_ms(), "startSide": start_side,
                     "executionId": execution_id, "message": message.to_dict()}
            if options is not None:
                entry[OPTIONS_KEY] = options.state  # the turn keeps them if another process runs it
            await rt.store.set_env("inbox", thread.id, message.id, entry)
            rt.bus.emit("message_queued", thread.id, {"executionId": execution_id, "messageId": message.id})
            if policy in ("interrupt", "rollback"):
                await busy_policy.preempt(rt, thread.id, rollback=policy == "rollback")
    task = rt.inflight.track(execute(rt, thread, agent, message, start_side, execution_id, queued=queued,
                                     claimed=claimed, options=options), thread.id)
    if queued and execution_id is not None:
        rt.inflight.queue(execution_id, task)  # cancellable by its id while it waits (see cancel)
    return task


async def execute(rt: TurnsHost, thread: ThreadRecord, agent: AgentDefinition, message: Message | None,
                   start_side: Literal["a", "b"], execution_id: str | None = None,
                   resume: ExecutionRecord | None = None, queued: bool = False,
                   claimed: bool = False, options: TurnOptions | None = None) -> ExecutionResult:
    async with rt.inflight.lock(thread.id):
        if not claimed:
            await claims.claim_thread(rt, thread.id)
        try:
            if message is not None:
                # a turn of this thread cut short by a crash goes on before this message's turn
                while (ahead := await _run_interrupted_turns(rt, thread, agent)) is not None:
                    await claims.release_thread(rt, thread.id)
                    await _until_over(rt, thread.id, ahead)
                    await claims.claim_thread(rt, thread.id)
            if queued:
                # the thread may have changed while the message waited: deleted, or handed
                # to another agent (the new agent answers)
                current = await rt.store.get_thread(thread.id)
                if current is None:
                    return await _drop_queued(rt, thread, message, execution_id)
                entry = await rt.store.get_env("inbox", thread.id, message.id) if message is not None else {}
                if not isinstance(entry, dict) or entry.get("owner", rt.owner) != rt.owner:
                    # another process took the message over (it thought this one gone)
                    # and delivers it: that delivery is the message's turn
                    return ExecutionResult(thread.id, execution_id or "", "cancelled", "delivered_elsewhere")
                if (current.agent, current.package) != (thread.agent, thread.package):
                    agent = await rt.agent(current.agent, current.package)
                thread = current
            return await execute_locked(rt, thread, agent, message, start_side, execution_id, resume, queued,
                                              options)
        finally:
            await claims.release_thread(rt, thread.id)


async def _run_interrupted_turns(rt: TurnsHost, thread: ThreadRecord, agent: AgentDefinition) -> str | None:
    """Run on (here, now) each turn of the thread that a gone process left running, so a
    message queued behind it is answered after it. Returns the id of one that is another live
    runtime's to run (it waits for the thread's claim this caller holds): the caller lets the
    claim go and claims it again once that turn is over; None when none is left."""
    stale_before = now_ms() - int(rt.execution_lease * 1000)
    for _round in range(100):
        here = rt.inflight.execution_ids()
        interrupted = [r for r in await rt.store.list_executions(thread_id=thread.id, status="running")
                       if r.id not in here]
        if not interrupted:
            return None
        record = interrupted[0]
        epoch = rt.inflight.resuming.get(record.id)
        if epoch is None:  # another process's: taken over here if it is gone
            claimed = await resuming.claim_orphan(rt, record, stale_before)
            if claimed is None:
                if record.id in rt.inflight.resuming:
                    # this runtime's own look for gone processes took it first: its resume
                    # waits for the thread's lock this caller holds, so the turn goes on here
                    continue
                return record.id
            record = claimed
        elif epoch != record.epoch:
            return record.id
        log.warning("resuming execution %s of thread %s before the message queued behind it", record.id, thread.id)
        await resuming.resume_claimed(rt, thread, agent, record)
    return None


async def _until_over(rt: TurnsHost, thread_id: str, execution_id: str) -> None:
    """Wait (the claim let go) until the execution is no longer running, or until this
    runtime's own look for gone processes took it over: that resume waits for the thread's
    lock the caller holds, so the caller runs the turn instead."""
    await _wait_on_thread(rt, thread_id, lambda: _over_or_mine(rt, execution_id), None)


async def _over_or_mine(rt: TurnsHost, execution_id: str) -> bool:
    return execution_id in rt.inflight.resuming or await _over(rt, execution_id)


async def _over(rt: TurnsHost, execution_id: str) -> bool:
    record = await rt.store.get_execution(execution_id)
    return record is None or record.status != "running"


async def _drop_queued(rt: TurnsHost, thread: ThreadRecord, message: Message | None,
                       execution_id: str | None) -> ExecutionResult:
    """A queued message whose thread was deleted while it waited: nothing is written."""
    execution_id = execution_id or new_id("exe_")
    if message is not None:
        await rt.store.delete_env("inbox", thread.id, message.id)
    error = "the thread was deleted before this message's turn"
    rt.bus.emit("done", thread.id, {"stopReason": "cancelled", "executionId": execution_id,
                                      "outcome": "thread_deleted", "error": error})
    return ExecutionResult(thread.id, execution_id, "cancelled", "thread_deleted", error=error)


async def execute_locked(rt: TurnsHost, thread: ThreadRecord, agent: AgentDefinition, message: Message | None,
                          start_side: Literal["a", "b"], execution_id: str | None,
                          resume: ExecutionRecord | None, queued: bool,
                          options: TurnOptions | None = None, epoch: int = 0,
                          carried: dict[str, Any] | None = None) -> ExecutionResult:
    """Run an execution under the thread's lock and claim. ``epoch``: the one this process
    claimed a resumed execution with (every write of the turn is fenced by it); ``carried``:
    what a resumed turn's record keeps of its start (the digest of its definitions, or how
    they changed since)."""
    if resume is not None:
        try:
            return await approvals.resume(rt, thread, agent, resume, options)
        except Exception as exc:
            return await failed_before_run(rt, thread, resume, message, queued, exc)
    record = ExecutionRecord(thread_id=thread.id, side=start_side, state={"owner": rt.owner}, epoch=epoch)
    if carried:
        record.state.update(carried)
    if options is not None:
        record.state[OPTIONS_KEY] = options.state  # kept for a resume after a crash
    if execution_id:
        record.id = execution_id
    ex = ExecutionState(id=record.id, side=start_side, queued_tools=rt.inflight.queued_first.pop(record.id, []))
    state = ThreadState(rt, thread, agent, thread.package, ex)
    execution = Execution(rt, state, agent, record)
    if options is not None:
        execution.take_options(options)
    task = asyncio.current_task()
    assert task is not None
    rt.inflight.begin(thread.id, task, execution)
    recovery.beat(rt)
    execution.owned_at = asyncio.get_running_loop().time()  # proved by the turn's first write below
    try:
        if not carried:  # what the turn runs on, to tell later (a wait, a crash) whether a deploy changed it
            record.state[DIGEST_KEY] = await rt.setups.definitions_digest(agent, thread.package)
        ex.message_history = await turn_history(execution)
        if message is not None and ex.message_history and ex.message_history[-1].role == "tool":
            # a turn left waiting for client tool results, answered through the history
            # with a new message: the conversation moved on, the wait lapses
            await _lapse_waits(rt, thread.id, client_only=True)
        if unanswered_calls(ex.message_history):
            # a new message moves the conversation on: pending approvals lapse
            await _lapse_waits(rt, thread.id, client_only=False)
            await threadops.repair_transcript(rt, state, reason="the call was not approved before the conversation moved on"
                                         if message is not None else "no result was recorded for this call")
        if message is not None:
            setup = await rt.setups.side_setup(agent, start_side, thread.package)
            state._hooks = setup.hooks
            stored = await threadops.create_messages(rt, state, [message], execution=record, hooks=setup.hooks)
            execution.user_message = stored[0]
            state._hooks = None
            if queued:
                await rt.store.delete_env("inbox", thread.id, message.id)
        else:
            await rt.store.save_execution(record)
        # stored now: from here on each write of the turn is fenced by its epoch
        ex.fence = Fence(record.id, record.epoch)
        rt.bus.emit("execution_started", thread.id, {"executionId": record.id, "side": start_side})
    except asyncio.CancelledError:
        rt.inflight.end(thread.id)
        raise
    except Exception as exc:  # any failure before the loop (a definition, a lazy import, the store)
        rt.inflight.end(thread.id)
        return await failed_before_run(rt, thread, record, message, queued, exc)
    try:
        result = await observe.run_execution(execution)
    finally:
        rt.inflight.end(thread.id)
    if record.id in rt.inflight.roll_back:
        rt.inflight.roll_back.discard(record.id)
        if result.stop_reason == "cancelled":  # still holding the thread: nothing runs meanwhile
            await asyncio.shield(busy_policy.roll_back(rt, state))
    if ex.queued_tools and result.stop_reason == "complete":
        # queued after the turn's last step: they start the next execution, not vanish
        follow_up = new_id("exe_")
        rt.inflight.queued_first[follow_up], ex.queued_tools = ex.queued_tools, []
        await start(rt, await rt.get_thread(thread.id), TurnRequest(execution_id=follow_up))
    if rt.auto_titles and thread.title is None and result.stop_reason == "complete" and message is not None:
        rt.inflight.spawn(_title(rt, thread, agent, message, result.text))
    return result


async def failed_before_run(rt: TurnsHost, thread: ThreadRecord, record: ExecutionRecord, message: Message | None,
                             queued: bool, exc: Exception) -> ExecutionResult:
    """End an execution that failed before its loop ran: the record settled as an error
    and exactly one ``done``, so no client or heartbeat thinks it still runs."""
    error = str(exc) if isinstance(exc, StandardAgentsError) else f"{type(exc).__name__}: {exc}"
    if not isinstance(exc, StandardAgentsError):
        log.exception("execution %s of thread %s failed before it started", record.id, thread.id)
    rt.inflight.end(thread.id)
    record.status = record.stop_reason = "error"
    record.error = error
    record.updated_at = now_ms()
    try:
        await asyncio.shield(rt.store.save_execution(record))
        if queued and message is not None:
            # it would fail the same way after a restart: the error is its answer
            await asyncio.shield(rt.store.delete_env("inbox", thread.id, message.id))
    except Exception:
        log.exception("could not settle execution %s", record.id)
    rt.bus.emit("error", thread.id, {"message": error, "code": "error"})
    await publish_done(rt, record, {"stopReason": "error", "executionId": record.id, "outcome": "error", "error": error})
    return ExecutionResult(thread.id, record.id, "error", "error", error=error)


async def _title(rt: TurnsHost, thread: ThreadRecord, agent: AgentDefinition, message: Message, reply: str | None) -> None:
    """Give an untitled thread a short title written by its agent's model (a side task)."""
    from ..toolcalls import ask

    try:
        setup = await rt.setups.side_setup(agent, "a", thread.package)
        prompt = f"User: {(message.content or '')[:2000]}\nAssistant: {(reply or '')[:2000]}"
        text = await ask(rt.setups.provider_for(setup.model), setup.model.model, prompt, max_tokens=24,
                         system="Write a title of at most six words for this conversation. Reply with the title only.")
        title = " ".join(text.strip().strip('"\'').split())[:80]
        if not title:
            return
        fresh = await rt.store.get_thread(thread.id)
        if fresh is None or fresh.title:
            return
        updated = await rt.store.update_thread(thread.id, title=title)
        thread.title = title
        rt.bus.emit("thread_updated", thread.id, {"thread": updated.to_dict()})
    except Exception:
        log.warning("could not title thread %s", thread.id, exc_info=True)


async def stop(rt: TurnsHost, thread_id: str, *, timeout: float = 10.0,  # noqa: ASYNC109 - a bounded wait
               rollback: bool = False) -> bool:
    """Cancel the running execution of a thread, here or in another process sharing the
    store; True when one was running and has ended.

    Another process is asked through the event bus (carried between workers by the
    PostgreSQL relay) and this waits up to ``timeout`` seconds for its ``done``."""
    task = rt.inflight.running.get(thread_id)
    if task is not None:
        task.cancel()
        # asyncio.wait, not await: a cancellation of the caller stays the caller's
        await ended({task})
        return True
    holder = await rt.store.get_env("lock", "", thread_id)
    owner = holder.get("owner") if isinstance(holder, dict) else None
    if owner is None or owner == rt.owner:
        return False

    return await _wait_on_thread(rt, thread_id, lambda: _claim_left(rt, thread_id, owner), timeout,
                                 ("stop_requested", {"owner": owner, "rollback": rollback}))


async def _claim_left(rt: TurnsHost, thread_id: str, owner: Any) -> bool:
    """Whether the process ``owner`` no longer holds the thread's claim (it goes right after
    the ``done`` of its execution)."""
    holder = await rt.store.get_env("lock", "", thread_id)
    return not (isinstance(holder, dict) and holder.get("owner") == owner)


async def _wait_on_thread(rt: TurnsHost, thread_id: str, settled: Callable[[], Awaitable[bool]],
                          timeout: float | None, ask: tuple[str, dict[str, Any]] | None = None) -> bool:  # noqa: ASYNC109 - a bounded wait that reports
    """Wait (up to ``timeout`` seconds; None: for ever) until ``settled()`` says what another
    process does to the thread has happened, after emitting ``ask`` (an event type and its
    data) on the bus. The thread's events wake this up; a slow poll covers their absence."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    with rt.bus.subscribe(thread_id) as sub:
        if ask is not None:
            rt.bus.emit(ask[0], thread_id, ask[1])
        while deadline is None or (left := deadline - loop.time()) > 0:
            if await settled():
                return True
            with contextlib.suppress(TimeoutError):
                await sub.get(timeout=0.5 if deadline is None else min(left, 0.25))
    return False


#: the event types :func:`on_bus_event` acts on (the listener sees every event of the bus)
BUS_EVENT_TYPES = frozenset((HANDED_OVER, "stop_requested"))


def on_bus_event(rt: TurnsHost, event: Any) -> None:
    """A bus listener (attached with a cross-process relay): a ``stop_requested`` for a
    thread this process runs cancels that execution; turns another process handed over
    while shutting down are looked for (and resumed here) at once."""
    if event.type == HANDED_OVER and not event.local and not rt.draining and not rt.closed:
        rt.inflight.spawn(_recover_soon(rt))
        return
    if event.type == "stop_requested" and event.data.get("owner") == rt.owner:
        wanted = event.data.get("executionId")
        if wanted is not None:  # one execution, not whatever the thread runs
            running = rt.inflight.running_task(wanted)
            queued = rt.inflight.queued_tasks.get(wanted)
            for task in (running, queued):
                if task is not None:
                    task.cancel()
            return
        if event.data.get("rollback"):
            busy_policy.mark_rollback(rt, event.thread_id)
        task = rt.inflight.running.get(event.thread_id)
        if task is not None:
            task.cancel()


async def thread_of(rt: TurnsHost, execution_id: str) -> str | None:
    """The thread of an execution: stored, or still queued in a thread's inbox (None: unknown)."""
    record = await rt.store.get_execution(execution_id)
    if record is not None:
        return record.thread_id
    queued = await _queued_entry(rt, execution_id)
    return queued[0] if queued is not None else None


async def _queued_entry(rt: TurnsHost, execution_id: str) -> tuple[str, str, dict[str, Any]] | None:
    """``(thread id, message id, entry)`` of the inbox entry of a queued execution."""
    for thread_id, message_id, entry in await rt.store.list_scope("inbox"):
        if isinstance(entry, dict) and entry.get("executionId") == execution_id:
            return thread_id, message_id, entry
    return None


async def cancel(rt: TurnsHost, execution_id: str, *, timeout: float = 10.0) -> bool:  # noqa: ASYNC109 - a bounded wait
    """Cancel one execution by its id, wherever it is; True when it was cancelled.

    A queued one (its message waits in the thread's inbox, here or in another process) is
    removed from the inbox and ends with one ``done`` (``cancelled``), its message never
    stored; a running one is stopped only if it is that execution (another turn of the same
    thread is left alone), here or through the bus in the process running it (this waits up
    to ``timeout`` seconds for it to end); one waiting for an approval or client results is
    marked cancelled. False when it is over or unknown."""
    running = rt.inflight.running_task(execution_id)
    if running is not None:
        running.cancel()
        await ended({running})
        return True
    waiting_here = rt.inflight.queued_tasks.get(execution_id)
    if waiting_here is not None:
        # not running (checked above, with no await since): it ends before writing anything
        waiting_here.cancel()
        await ended({waiting_here})
    queued = await _queued_entry(rt, execution_id)
    # deleting its entry is the claim: a queued turn (or another canceller) that took it first wins
    if queued is not None and await rt.store.delete_env("inbox", queued[0], queued[1]):
        thread_id, _message_id, entry = queued
        if entry.get("owner") not in (None, rt.owner):  # its sender's process stops waiting for it
            rt.bus.emit("stop_requested", thread_id, {"owner": entry["owner"], "executionId": execution_id})
        ended_record = ExecutionRecord(thread_id=thread_id, id=execution_id, status="cancelled",
                                       stop_reason="cancelled", state={"outcome": "cancelled"})
        await rt.store.save_execution(ended_record)
        await publish_done(rt, ended_record, {"stopReason": "cancelled", "executionId": execution_id,
                                              "outcome": "cancelled", "error": None, "stoppedBy": None})
        return True
    record = await rt.store.get_execution(execution_id)
    if record is None:
        return False
    if record.status == "waiting":
        if await _cancel_waiting(rt, record):
            return True
        return await cancel(rt, execution_id, timeout=timeout)  # resumed meanwhile
    if record.status != "running":
        return False
    owner = record.state.get("owner")

    async def let_go() -> bool:
        # over, and the thread's claim gone with it (or already taken by the thread's next turn)
        if not await _over(rt, execution_id):
            return False
        if await _claim_left(rt, record.thread_id, owner):
            return True
        return any(r.id != execution_id for r in await rt.store.list_executions(thread_id=record.thread_id, status="running"))

    return await _wait_on_thread(rt, record.thread_id, let_go, timeout,
                                 ("stop_requested", {"owner": owner, "executionId": execution_id}))


async def _recover_soon(rt: TurnsHost) -> None:
    try:
        await rt.recover()
    except Exception:
        log.warning("could not take over the turns another worker handed over", exc_info=True)


async def ended(tasks: set[asyncio.Task[Any]]) -> None:
    """Wait until tasks have ended without passing the caller's cancellation on to them, and
    consume their outcomes."""
    if tasks:
        await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled():
            task.exception()


async def _lapse_waits(rt: TurnsHost, thread_id: str, *, client_only: bool) -> None:
    """Cancel the thread's waiting executions (only those waiting for client tool results, or
    all), dropping the call-id index rows of client waits with them."""
    for waiting in await rt.store.list_executions(thread_id=thread_id, status="waiting"):
        if client_only and waiting.state.get("waitingFor") != client_tools_mod.WAITING_FOR:
            continue
        await _cancel_waiting(rt, waiting)


async def _cancel_waiting(rt: TurnsHost, record: ExecutionRecord) -> bool:
    """Mark a waiting execution cancelled by compare-and-set (a decision or results that
    resumed it meanwhile win: False), dropping the call-id index rows of a client wait."""
    seen = record.updated_at
    record.status = record.stop_reason = "cancelled"
    record.updated_at = max(now_ms(), seen + 1)
    if not await rt.store.replace_execution(record, expected_status="waiting", expected_updated_at=seen):
        return False
    if record.state.get("waitingFor") == client_tools_mod.WAITING_FOR:
        await client_tools_mod.forget_calls(rt, record)
    return True


