"""Resuming the turns of processes that died: a turn left ``running`` by a process that is
gone (killed, out of memory, its host lost) goes on in a live runtime, under the same
execution id, from its last committed step.

What was committed is kept: the messages, the tool results. A tool call that has no committed
result may have run, or half-run, before the crash: it is run again only when its tool is
declared ``idempotent=True``; any other gets an error result the model can act on
(:data:`NOT_RUN_AGAIN`). Then the turn takes its next model step, which re-asks the model
whose reply was never committed. Several runtimes may find the same dead turn at once: the
execution record is claimed by compare-and-set, so exactly one of them resumes it.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from ..records import ExecutionRecord, Message, ThreadRecord, ToolResult, now_ms
from . import claims
from .digest import CHANGED_KEY, DIGEST_KEY
from .done import publish_done
from .hooks import HookSet
from .options import STATE_KEY as OPTIONS_KEY
from .options import TurnOptions
from .owners import gone
from .results import ExecutionResult
from .state import ThreadState
from .tools import Toolbox, ToolOutcome, run_tool_call, unanswered_calls

if TYPE_CHECKING:
    from ..definitions import AgentDefinition
    from .hosts import ResumeHost

#: what a record keeps of a takeover: the owner it was taken from, and when (epoch ms)
TAKEN_KEYS = ("resumedFrom", "resumedAt")

__all__ = ["NOT_RUN_AGAIN", "TAKEN_KEYS", "claim_orphan", "definitions_moved", "end_turn", "resume_claimed", "resume_orphans"]

log = logging.getLogger("standardagents.resume")

#: the result of a call cut short by a crash whose tool is not idempotent
NOT_RUN_AGAIN = "interrupted by a restart; not run again"


async def resume_orphans(rt: ResumeHost) -> list[str]:
    """Claim and resume every execution a gone process left running; returns their ids.

    A process of this PID namespace is gone when its pid is (or it had this runtime's pid
    before); any other when its heartbeat is older than ``execution_lease`` seconds."""
    if rt.draining:  # shutting down: it hands turns over, it takes none
        return []
    stale_before = now_ms() - int(rt.execution_lease * 1000)
    mine = rt.inflight.execution_ids() | set(rt.inflight.resuming)
    resumed: list[str] = []
    for record in await rt.store.list_executions(status="running"):
        if record.id in mine:
            continue
        claimed = await claim_orphan(rt, record, stale_before)
        rt.inflight.abandoned.discard(record.id)
        if claimed is None:
            continue  # its process lives, or another runtime claimed it first
        owner = str(record.state.get("owner", ""))
        thread = await rt.store.get_thread(record.thread_id)
        if thread is None or not rt.registry.has("agents", thread.agent, thread.package):
            await end_turn(rt, claimed, thread, "the process running this execution stopped and its agent is no "
                           "longer defined", "interrupted")
            rt.inflight.resuming.pop(record.id, None)
            continue
        agent = await rt.agent(thread.agent, thread.package)
        log.warning("resuming execution %s of thread %s (its process %s is gone)", record.id, record.thread_id, owner)
        rt.inflight.track(_resume(rt, thread, agent, claimed), thread.id)
        resumed.append(record.id)
    return resumed


async def claim_orphan(rt: ResumeHost, record: ExecutionRecord, stale_before: int) -> ExecutionRecord | None:
    """Take over the running execution ``record`` when its process is gone: the stored record
    is claimed by compare-and-set with a new epoch (the process it is taken from can write
    nothing more into it), and noted as being resumed here. None when its process lives or
    another runtime claimed it first."""
    owner = str(record.state.get("owner", ""))
    # one this runtime stopped when the database could not be reached is its own to take up
    abandoned = record.id in rt.inflight.abandoned and owner == rt.owner
    if not abandoned and not gone(rt, owner, fresh=record.updated_at >= stale_before):
        return None
    taken = {"resumedFrom": owner, "resumedAt": now_ms()}
    claimed = replace(record, state={**record.state, "owner": rt.owner, **taken},
                      updated_at=max(now_ms(), record.updated_at + 1), epoch=record.epoch + 1)
    if not await rt.store.replace_execution(claimed, expected_status="running", expected_updated_at=record.updated_at):
        return None
    rt.inflight.resuming[record.id] = claimed.epoch
    return claimed


async def _resume(rt: ResumeHost, thread: ThreadRecord, agent: AgentDefinition,
                  record: ExecutionRecord) -> ExecutionResult:
    """Under the thread's lock and claim: the turn goes on (:func:`resume_claimed`)."""
    async with rt.inflight.lock(thread.id):
        await claims.claim_thread(rt, thread.id)
        try:
            current = await rt.store.get_execution(record.id)
            if current is None or current.status != "running" or current.epoch != record.epoch:
                # run on meanwhile by a message queued behind it (see turns.execute), or taken on
                rt.inflight.resuming.pop(record.id, None)
                return ExecutionResult(thread.id, record.id, "cancelled", "delivered_elsewhere")
            return await resume_claimed(rt, thread, agent, record)
        finally:
            await claims.release_thread(rt, thread.id)


async def resume_claimed(rt: ResumeHost, thread: ThreadRecord, agent: AgentDefinition,
                         record: ExecutionRecord) -> ExecutionResult:
    """Run on a claimed execution (the caller holds the thread's lock and claim): answer the
    calls cut short, then take the turn's next step."""
    try:
        changed = await definitions_moved(rt, agent, thread.package, record)
        if changed is not None and changed["policy"] == "end":
            return await end_turn(rt, record, thread, changed_reason(changed), "definitions_changed", changed)
        try:
            await _answer_cut_short_calls(rt, thread, agent)
        except Exception:
            log.exception("could not answer the interrupted calls of execution %s", record.id)
        side: Literal["a", "b"] = "b" if record.side == "b" else "a"
        rt.inflight.resuming.pop(record.id, None)
        # the call's own output type and limits, as the record kept them
        options = TurnOptions.from_state(record.state.get(OPTIONS_KEY))
        # kept on the record: what the turn started with, and who it was taken from and when
        carried = {key: record.state[key] for key in TAKEN_KEYS if key in record.state}
        carried.update({DIGEST_KEY: record.state.get(DIGEST_KEY)} if changed is None else {CHANGED_KEY: changed})
        return await rt.execute_locked(thread, agent, None, side, record.id, None, False, options, record.epoch,
                                        carried)
    finally:
        rt.inflight.resuming.pop(record.id, None)


async def definitions_moved(rt: ResumeHost, agent: AgentDefinition, namespace: str | None,
                            record: ExecutionRecord) -> dict[str, Any] | None:
    """How the definitions a turn would go on with differ from those it started with
    (``{"from", "to", "policy"}``), or None when they are the same (or it started before
    digests were kept)."""
    started = record.state.get(DIGEST_KEY)
    if not isinstance(started, str):
        return None
    now = await rt.setups.definitions_digest(agent, namespace)
    if now == started:
        return None
    log.warning("execution %s goes on after its agent %s changed (definitions %s, now %s): policy %s",
                record.id, agent.name, started, now, agent.on_definition_change)
    return {"from": started, "to": now, "policy": agent.on_definition_change}


def changed_reason(changed: dict[str, Any]) -> str:
    return (f"the agent's definitions changed since this turn started (a deploy: {changed['from']} -> "
            f"{changed['to']}), and its on_definition_change policy ends the turn")


async def _answer_cut_short_calls(rt: ResumeHost, thread: ThreadRecord, agent: AgentDefinition) -> None:
    """Give each tool call without a committed result one: the idempotent tools run again,
    the others are answered with :data:`NOT_RUN_AGAIN`; stored in one transaction."""
    state = ThreadState(rt, thread, agent, thread.package)
    state._hooks = HookSet()
    cut: list[tuple[Message, ToolOutcome]] = []
    for m, call in unanswered_calls(await rt.store.list_messages(thread.id)):
        try:
            tool = await rt.setups.resolve_tool(call.name, thread.package, agent)
        except Exception:
            tool = None
        if tool is not None and tool.idempotent:
            outcome = await run_tool_call(state, call, Toolbox({call.name: tool}), HookSet(),
                                          default_timeout=rt.tool_timeout)
        else:
            outcome = ToolOutcome(call, ToolResult("error", error=NOT_RUN_AGAIN), None)
        cut.append((m, outcome))
    if cut:
        await rt.store_tool_outcomes(state, [o for _m, o in cut], None, HookSet(),
                                     sides=[m.side for m, _o in cut])


async def end_turn(rt: ResumeHost, record: ExecutionRecord, thread: ThreadRecord | None, error: str, outcome: str,
                   changed: dict[str, Any] | None = None) -> ExecutionResult:
    """End a claimed turn that does not go on (its thread or agent is gone, or its definitions
    changed and its agent's policy ends it): interrupted with ``error``, its open calls
    answered, one ``done``, so the thread takes new messages."""
    record.status = record.stop_reason = "interrupted"
    record.error = error
    record.state = {**record.state, "outcome": outcome}
    if changed is not None:
        record.state[CHANGED_KEY] = changed
    record.updated_at = max(now_ms(), record.updated_at + 1)
    await rt.store.save_execution(record)
    if thread is not None:
        state = ThreadState(rt, thread, None, thread.package)
        state._hooks = HookSet()
        await rt.repair_transcript(state, reason=error)
    await publish_done(rt, record, {"stopReason": "interrupted", "executionId": record.id,
                                    "outcome": outcome, "error": error})
    return ExecutionResult(record.thread_id, record.id, "interrupted", outcome, error=error)
