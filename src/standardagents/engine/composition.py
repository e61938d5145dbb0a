"""Agents used as tools: a dual_ai agent runs as a subagent in a child thread; an
ai_human agent named as a tool is a handoff (the thread continues under that agent).

A subagent's run is recorded in its parent's subagent registry (``SubagentRecord``): the
lifecycle ``status`` (running, complete, failed), its ``sessionStatus`` updates in order,
and its result. Files a child attaches to its ``sessionStop`` are copied into the parent's
files so the parent can read them through the returned attachment references.
"""

from __future__ import annotations

import asyncio
import json
import posixpath
from typing import TYPE_CHECKING, Any

from ..definitions import AgentDefinition, ToolDefinition, define_tool
from ..exceptions import StandardAgentsError
from ..records import ToolResult, now_ms
from ..store.records import SubagentRecord
from .output import to_jsonable

if TYPE_CHECKING:
    from .hosts import CompositionHost
    from .state import ThreadState

__all__ = ["MAX_DEPTH", "agent_chain", "agent_tool", "flush_status", "record_status"]

#: how deep subagents may nest by default (a parent's direct child is at depth 1)
MAX_DEPTH = 5

#: the last pending status write per child thread: each write waits for the previous one
_status_writes: dict[str, asyncio.Task[None]] = {}


def agent_tool(runtime: CompositionHost, child: AgentDefinition, namespace: str | None) -> ToolDefinition:
    """A tool that runs ``child``: a subagent for dual_ai, a handoff for ai_human."""
    description = child.tool_description or child.description or f"Run the {child.name} agent."
    schema = {"type": "object", "properties": {"message": {"type": "string", "description": "What to ask the agent."}},
              "required": ["message"]}

    async def run_subagent(state: ThreadState, args: dict[str, Any]) -> ToolResult:
        chain = await agent_chain(runtime, state)
        if child.name in chain:
            path = " -> ".join((*chain, child.name))
            return ToolResult("error", error=f"refused: calling {child.name!r} here would make a cycle ({path}); "
                                             "answer without this tool")
        limit = int(getattr(runtime, "max_subagent_depth", MAX_DEPTH))
        if len(chain) > limit:
            return ToolResult("error", error=f"refused: the subagent depth limit of {limit} is reached "
                                             f"({' -> '.join(chain)}); answer without this tool")
        return await _run_child(runtime, state, child, namespace, str(args.get("message", "")))

    async def handoff(state: ThreadState, args: dict[str, Any]) -> ToolResult:
        await runtime.store.update_thread(state.thread_id, agent=child.name)
        state.thread.agent = child.name
        if state.execution is not None:
            state.execution.outcome = "handoff"
            state.execution.stopped = True
        runtime.bus.emit("handoff", state.thread_id, {"agent": child.name})
        return ToolResult("success", f"The conversation is handed to {child.name}.")

    handler = run_subagent if child.type == "dual_ai" else handoff
    tool: ToolDefinition = define_tool(name=child.name, description=description, parameters=schema, execute=handler)
    return tool.model_copy(update={"origin": "agent", "origin_detail": child.name})


async def agent_chain(runtime: CompositionHost, state: ThreadState) -> tuple[str, ...]:
    """The agents of a thread's ancestors and of the thread itself, root first (read from
    the stored parent links, so it holds across tasks and processes)."""
    names = [state.agent_id]
    parent_id = state.parent_id
    seen = {state.thread_id}
    while parent_id is not None and parent_id not in seen:
        seen.add(parent_id)
        parent = await runtime.store.get_thread(parent_id)
        if parent is None:
            break
        names.append(parent.agent)
        parent_id = parent.parent_id
    return tuple(reversed(names))


async def _run_child(runtime: CompositionHost, parent: ThreadState, child: AgentDefinition, namespace: str | None,
                     message: str) -> ToolResult:
    from .state import ThreadState as _ThreadState

    store = runtime.store
    thread = await runtime.create_thread(child.name, user_id=parent.user_id, parent_id=parent.thread_id, namespace=namespace)
    link = await store.add_subagent(SubagentRecord(parent_thread_id=parent.thread_id, child_thread_id=thread.id,
                                                   agent=child.name, relationship=child.name,
                                                   result={"statusUpdates": []}))
    child_state = _ThreadState(runtime, thread, child, thread.package)
    parent_hooks = await runtime.hooks_of(parent)
    await parent_hooks.notify("after_subagent_created", parent, child_state)
    runtime.bus.emit("subagent_created", parent.thread_id, {"id": link.id, "childThreadId": thread.id, "agent": child.name})
    runtime.bus.relay(thread.id, parent.thread_id)
    try:
        result = await runtime.send(thread.id, message)
    except StandardAgentsError as exc:
        await flush_status(thread.id)
        await _finish(runtime, link, "failed", {"error": str(exc), "threadId": thread.id, "outcome": "error"})
        return ToolResult("error", error=f"subagent {child.name} failed: {exc}")
    finally:
        runtime.bus.unrelay(thread.id)
        await flush_status(thread.id)
    running = runtime.inflight.executions.get(parent.thread_id)
    if running is not None:
        running.add_subagent(result)
    payload = result.payload or {}
    text = payload.get("message") if result.payload is not None else result.text
    attachments = await _copy_attachments(runtime, parent, thread.id, child.name, payload.get("attachments") or [])
    body: dict[str, Any] = {"message": text, "attachments": attachments, "threadId": thread.id, "outcome": result.outcome}
    if result.value is not None:
        # a typed answer reaches the parent as JSON, beside the message
        body["value"] = to_jsonable(result.value)
    if result.outcome == "session_fail":
        await _finish(runtime, link, "failed", body)
        return ToolResult("error", error=f"subagent {child.name} failed: {text or 'no reason given'}", attachments=attachments)
    if result.stop_reason in ("error", "cancelled"):
        body["error"] = result.error
        await _finish(runtime, link, "failed", body)
        return ToolResult("error", error=f"subagent {child.name} ended with {result.stop_reason}: {result.error or ''}".strip())
    await _finish(runtime, link, "complete", body)
    return ToolResult("success", json.dumps(body), attachments=attachments)


async def _finish(runtime: CompositionHost, link: SubagentRecord, status: str, body: dict[str, Any]) -> None:
    current = await runtime.store.get_subagent(link.id)
    updates = (current.result or {}).get("statusUpdates", []) if current is not None and isinstance(current.result, dict) else []
    await runtime.store.update_subagent(link.id, status=status, result={**body, "statusUpdates": updates})
    runtime.bus.emit("subagent_done", link.parent_thread_id, {"id": link.id, "childThreadId": link.child_thread_id,
                                                              "status": status})


async def _copy_attachments(runtime: CompositionHost, parent: ThreadState, child_thread_id: str, child_name: str,
                            paths: list[str]) -> list[dict[str, Any]]:
    """Copy the child's attached files into the parent's files; references to the copies."""
    refs: list[dict[str, Any]] = []
    store = runtime.store
    for path in paths:
        source = str(path).lstrip("/")
        data = await store.read_file(child_thread_id, source)
        if data is None:
            refs.append({"path": source, "threadId": child_thread_id, "missing": True})
            continue
        info = await store.stat_file(child_thread_id, source)
        mime = info.mime_type if info is not None else None
        target = posixpath.join("subagents", child_name, child_thread_id, source)
        await store.write_file(parent.thread_id, target, data, mime_type=mime)
        refs.append({"path": target, "name": posixpath.basename(source), "mimeType": mime, "size": len(data),
                     "sourceThreadId": child_thread_id, "sourcePath": source})
    return refs


def record_status(runtime: CompositionHost, state: ThreadState, payload: dict[str, Any]) -> None:
    """Record a child's ``sessionStatus`` update on its parent's subagent entry.

    Writes for one child run one after another in call order; the parent's tool waits for
    all of them (:func:`flush_status`) before it reads the child's result.
    """
    if state.parent_id is None:
        return
    parent_id = state.parent_id
    child_id = state.thread_id
    previous = _status_writes.get(child_id)
    message = payload.get("message")

    async def write() -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        for link in await runtime.store.list_subagents(parent_id):
            if link.child_thread_id != child_id:
                continue
            result = dict(link.result) if isinstance(link.result, dict) else {}
            updates = [*result.get("statusUpdates", []), {"message": message, "at": now_ms()}]
            await runtime.store.update_subagent(link.id, result={**result, "statusUpdates": updates})
            runtime.bus.emit("subagent_status", parent_id, {"id": link.id, "childThreadId": child_id, "status": message})

    task = asyncio.get_running_loop().create_task(write())
    _status_writes[child_id] = task
    task.add_done_callback(lambda t: _status_writes.pop(child_id, None) if _status_writes.get(child_id) is t else None)


async def flush_status(child_thread_id: str) -> None:
    """Wait until every status update recorded so far for a child is stored."""
    while (task := _status_writes.get(child_thread_id)) is not None:
        await asyncio.gather(task, return_exceptions=True)
        if _status_writes.get(child_thread_id) is task:
            _status_writes.pop(child_thread_id, None)
