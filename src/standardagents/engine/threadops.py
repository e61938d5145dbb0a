"""Thread operations the engine performs on a runtime's behalf: creating threads, storing
messages and tool results (with their hooks and events, in one transaction each), queued and
directly invoked tool calls, and repairing a transcript left with unanswered calls.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Literal

from ..definitions import AgentDefinition, PromptDefinition
from ..exceptions import InjectionRejected, NotFoundError
from ..records import ExecutionRecord, Message, ThreadRecord, ToolCall, ToolResult, new_id, now_ms
from .context import clip
from .hooks import HookSet
from .state import ThreadState
from .tools import Toolbox, ToolOutcome, run_tool_call, unanswered_calls

if TYPE_CHECKING:
    from .hosts import ThreadOpsHost
    from .results import ExecutionResult
    from .side import SideSetup

__all__ = [
    "create_messages",
    "create_thread",
    "engine_create_message",
    "engine_invoke_tool",
    "engine_run_queued_tool",
    "engine_update_message",
    "hooks_of",
    "prompt_for",
    "repair_transcript",
    "run_queued_call",
    "store_tool_outcomes",
    "thread_state",
]


async def create_thread(rt: ThreadOpsHost, agent: str, *, user_id: str | None = None, title: str | None = None,
                        metadata: dict[str, Any] | None = None, parent_id: str | None = None,
                        namespace: str | None = None, thread_id: str | None = None) -> ThreadRecord:
    """Create a thread and run ``after_thread_created`` (``thread_id``: an id the client chose)."""
    definition = await rt.agent(agent, namespace)
    package = rt.registry.namespace_of("agents", agent, namespace)
    thread = ThreadRecord(agent=definition.name, user_id=user_id, title=title, metadata=dict(metadata or {}),
                          parent_id=parent_id, package=package)
    if thread_id:
        thread.id = thread_id
    thread = await rt.store.create_thread(thread)
    rt.bus.emit("thread_created", thread.id, {"thread": thread.to_dict()})
    state = ThreadState(rt, thread, definition, package)
    hooks = (await rt.setups.side_setup(definition, "a", package)).hooks
    state._hooks = hooks
    if hooks.has("after_thread_created"):
        await hooks.notify("after_thread_created", state)
        # the hook may have changed the thread (title, metadata): return it as stored
        thread = await rt.store.get_thread(thread.id) or thread
    return thread


async def prompt_for(rt: ThreadOpsHost, agent: AgentDefinition, side: Literal["a", "b"], namespace: str | None) -> PromptDefinition | None:
    """The prompt of an agent's side, or None when it names none this registry holds."""
    cfg = agent.side(side)
    if cfg is None or not rt.registry.has("prompts", cfg.prompt, namespace):
        return None
    return await rt.registry.aget("prompts", cfg.prompt, namespace)


async def thread_state(rt: ThreadOpsHost, thread_id: str) -> ThreadState:
    """A ThreadState for a thread (with the running execution, if any)."""
    thread = await rt.get_thread(thread_id)
    agent = await rt.agent(thread.agent, thread.package) if rt.registry.has("agents", thread.agent, thread.package) else None
    running = rt.inflight.executions.get(thread_id)
    st = ThreadState(rt, thread, agent, thread.package, running.ex if running else None)
    if agent is not None:
        st._hooks = await rt.setups.hook_set(agent, await prompt_for(rt, agent, "a", thread.package), thread.package)
    return st


async def hooks_of(rt: ThreadOpsHost, state: ThreadState) -> HookSet:
    """The hooks active for a thread state, resolved once and kept on it."""
    if state._hooks is None:
        if state.agent is None:
            state._hooks = HookSet()
        else:
            side = state.execution.side if state.execution else "a"
            setup = await rt.setups.side_setup(state.agent, side, state.namespace)
            state._hooks = setup.hooks
    return state._hooks


async def _before_create(rt: ThreadOpsHost, state: ThreadState, hooks: HookSet, msg: Message, strict: bool) -> Message:
    if not hooks.has("before_create_message"):
        return msg
    result = await hooks.transform("before_create_message", state, msg, strict=strict)
    if isinstance(result, dict):
        result = Message.from_dict({**msg.to_dict(), **result})
    if not isinstance(result, Message):
        return msg
    result.thread_id = state.thread_id
    return result


async def create_messages(rt: ThreadOpsHost, state: ThreadState, messages: list[Message], *, execution: ExecutionRecord | None = None,
                          tool_results: list[dict[str, Any]] | None = None, hooks: HookSet | None = None) -> list[Message]:
    """Store messages from the engine in one transaction: hooks before and after, the
    live history, events. A failing ``before_create_message`` keeps the last good message."""
    hooks = hooks or await hooks_of(rt, state)
    prepared = [await _before_create(rt, state, hooks, m, False) for m in messages]
    if execution is not None:
        execution.updated_at = now_ms()
        execution.step_count = state.execution.step_count if state.execution else execution.step_count
    ex = state.execution
    # the running turn's writes are fenced: nothing lands once another process took it over
    fence = ex.fence if ex is not None and execution is None else None
    stored = await rt.store.commit_step(messages=prepared, tool_results=tool_results or [], execution=execution,
                                        fence=fence)
    bus = rt.bus
    listening = bus.has_subscribers(state.thread_id)
    for m in stored:
        if ex is not None:
            ex.message_history.append(m)
            ex.written.append(m.id)
        if listening and not m.silent:
            bus.emit("message_created", state.thread_id, {"message": m.to_dict()})
    if hooks.has("after_create_message"):
        for m in stored:
            await hooks.notify("after_create_message", state, m)
    return stored


async def engine_create_message(rt: ThreadOpsHost, state: ThreadState, msg: Message, *, injected: bool) -> Message:
    hooks = await hooks_of(rt, state)
    try:
        prepared = await _before_create(rt, state, hooks, msg, injected)
    except Exception as exc:
        raise InjectionRejected(f"before_create_message rejected the message: {exc}") from exc
    stored = await create_messages(rt, state, [prepared], hooks=_without(hooks, "before_create_message"))
    return stored[0]


async def engine_update_message(rt: ThreadOpsHost, state: ThreadState, message_id: str, updates: dict[str, Any]) -> Message:
    hooks = await hooks_of(rt, state)
    if hooks.has("before_update_message"):
        updates = await hooks.transform("before_update_message", state, dict(updates), message_id)
    message = await rt.store.update_message(message_id, dict(updates))
    ex = state.execution
    if ex is not None:
        for i, m in enumerate(ex.message_history):
            if m.id == message_id:
                ex.message_history[i] = message
                ex.history_version += 1
                break
    if not message.silent:
        rt.bus.emit("message_updated", state.thread_id, {"message": message.to_dict()})
    await hooks.notify("after_update_message", state, message)
    return message

# tool results --------------------------------------------------------------------------

async def store_tool_outcomes(rt: ThreadOpsHost, state: ThreadState, outcomes: list[ToolOutcome], side: Literal["a", "b"] | None,
                              hooks: HookSet, *, execution: ExecutionRecord | None = None,
                              sides: list[Literal["a", "b"] | None] | None = None) -> list[Message]:
    """Tool messages and result rows for a step, in call order, in one transaction
    (``sides``: each outcome's own side, when they differ)."""
    messages: list[Message] = []
    rows: list[dict[str, Any]] = []
    tid = state.thread_id
    for i, out in enumerate(outcomes):
        res = out.result
        meta: dict[str, Any] = {"durationMs": round(out.duration_ms, 3)}
        if out.repaired:
            meta["repaired"] = True
            meta["repairNotes"] = out.notes
        if out.approval is not None:
            meta["approval"] = out.approval
        msg = Message(thread_id=tid, role="tool", content=res.content, tool_call_id=out.call.id, name=out.call.name,
                      side=side if sides is None else sides[i], tool_status=res.status,
                      attachments=list(res.attachments), metadata=meta)
        messages.append(msg)
        rows.append({"id": new_id("tr_"), "thread_id": tid, "message_id": msg.id, "tool_call_id": out.call.id,
                     "tool_name": out.call.name, "arguments": out.call.arguments, "status": res.status,
                     "result": res.result, "error": res.error, "stack": res.stack, "attachments": list(res.attachments),
                     "metadata": meta, "created_at": now_ms()})
    stored = await create_messages(rt, state, messages, execution=execution, tool_results=rows, hooks=hooks)
    listening = rt.bus.has_subscribers(tid)
    for out in outcomes:
        if not listening:
            if hooks.has("tool_call_done"):
                await hooks.notify("tool_call_done", state, out.call, out.result)
            continue
        limit = rt.event_detail_limit
        data: dict[str, Any] = {"id": out.call.id, "name": out.call.name, "status": out.result.status,
                                "arguments": clip(out.call.arguments, limit), "result": clip(out.result.result, limit),
                                "durationMs": round(out.duration_ms, 3)}
        if out.repaired:
            data["repaired"] = True
        if out.result.status == "error":
            data["error"] = out.result.error
        rt.bus.emit("tool_call_done", tid, data)
        if hooks.has("tool_call_done"):
            await hooks.notify("tool_call_done", state, out.call, out.result)
    return stored


async def run_queued_call(rt: ThreadOpsHost, state: ThreadState, name: str, args: dict[str, Any], setup: SideSetup | None,
                          side: Literal["a", "b"] | None, *, execution: ExecutionRecord | None = None) -> ToolResult:
    """Store a synthetic assistant call, run it, store its result."""
    call = ToolCall(new_id("call_"), name, json.dumps(args))
    hooks = setup.hooks if setup else await hooks_of(rt, state)
    toolbox = setup.toolbox if setup else Toolbox()
    if name not in toolbox.tools:
        toolbox = Toolbox(dict(toolbox.tools), toolbox.offered, toolbox.session)
        if state.agent is not None:
            toolbox.tools[name] = await rt.setups.resolve_tool(name, state.namespace, state.agent)
    await create_messages(rt, state, [Message(thread_id=state.thread_id, role="assistant", tool_calls=[call], side=side,
                                               metadata={"queued": True})], execution=execution, hooks=hooks)
    rt.bus.emit("tool_call_started", state.thread_id, {"id": call.id, "name": name, "progress": None,
                                                         "arguments": clip(call.arguments, rt.event_detail_limit)})
    await hooks.notify("tool_call_started", state, call, None)
    outcome = await run_tool_call(state, call, toolbox, hooks, default_timeout=rt.tool_timeout)
    await store_tool_outcomes(rt, state, [outcome], side, hooks, execution=execution)
    return outcome.result


async def engine_run_queued_tool(rt: ThreadOpsHost, state: ThreadState, name: str, args: dict[str, Any]) -> asyncio.Task[ExecutionResult]:
    """A tool queued from outside a turn starts an execution (behind a running one): the
    tool runs first, stored as a call and its result, then the agent's turn goes on."""
    if state.agent is None:
        raise NotFoundError("agent", state.agent_id)
    await rt.setups.resolve_tool(name, state.namespace, state.agent)  # an unknown name fails here, not mid-turn
    execution_id = new_id("exe_")
    rt.inflight.queued_first[execution_id] = [(name, args)]
    try:
        return await rt.start(state.thread_id, execution_id=execution_id)
    except BaseException:
        rt.inflight.queued_first.pop(execution_id, None)
        raise


async def engine_invoke_tool(rt: ThreadOpsHost, state: ThreadState, name: str, args: dict[str, Any]) -> ToolResult:
    if state.agent is None:
        raise NotFoundError("agent", state.agent_id)
    tool = await rt.setups.resolve_tool(name, state.namespace, state.agent)
    call = ToolCall(new_id("call_"), name, json.dumps(args))
    outcome = await run_tool_call(state, call, Toolbox({name: tool}), HookSet(), default_timeout=rt.tool_timeout)
    return outcome.result


async def repair_transcript(rt: ThreadOpsHost, state: ThreadState, *, reason: str = "no result was recorded for this call") -> int:
    """Give every tool call without a result an error result, so requests stay valid."""
    history = state.execution.message_history if state.execution else await state.get_messages()
    outcomes = [(m.side, ToolOutcome(call, ToolResult("error", error=f"Error: {reason}"), None))
                for m, call in unanswered_calls(history)]
    if outcomes:  # one transaction for all of them: the transcript is whole or untouched
        await store_tool_outcomes(rt, state, [out for _side, out in outcomes], None, HookSet(),
                                       sides=[side for side, _out in outcomes])
    return len(outcomes)


def _without(hooks: HookSet, name: str) -> HookSet:
    clone = HookSet(dict(hooks.by_name))
    clone.by_name.pop(name, None)
    return clone
