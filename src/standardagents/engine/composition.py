"""Agents used as tools: a dual_ai agent runs as a subagent in a child thread; an
ai_human agent named as a tool is a handoff (the thread continues under that agent).
"""

from __future__ import annotations

import contextvars
import json
from typing import TYPE_CHECKING, Any

from ..definitions import AgentDefinition, ToolDefinition, define_tool
from ..exceptions import StandardAgentsError
from ..records import ToolResult
from ..store.records import SubagentRecord

if TYPE_CHECKING:
    from .runtime import Runtime
    from .state import ThreadState

__all__ = ["MAX_DEPTH", "agent_tool", "record_status"]

MAX_DEPTH = 5

#: the chain of agents running subagents in the current task, for cycle and depth checks
_chain: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("standardagents_subagent_chain", default=())


def agent_tool(runtime: Runtime, child: AgentDefinition, namespace: str | None) -> ToolDefinition:
    """A tool that runs ``child``: a subagent for dual_ai, a handoff for ai_human."""
    description = child.tool_description or child.description or f"Run the {child.name} agent."
    schema = {"type": "object", "properties": {"message": {"type": "string", "description": "What to ask the agent."}},
              "required": ["message"]}

    async def run_subagent(state: ThreadState, args: dict[str, Any]) -> ToolResult:
        chain = _chain.get() or (state.agent_id,)
        if child.name in chain:
            return ToolResult("error", error=f"refused: calling {child.name!r} again would make a cycle ({' -> '.join((*chain, child.name))})")
        limit = getattr(runtime, "max_subagent_depth", MAX_DEPTH)
        if len(chain) > limit:
            return ToolResult("error", error=f"refused: subagent depth limit of {limit} reached ({' -> '.join(chain)})")
        token = _chain.set((*chain, child.name))
        try:
            return await _run_child(runtime, state, child, namespace, str(args.get("message", "")))
        finally:
            _chain.reset(token)

    async def handoff(state: ThreadState, args: dict[str, Any]) -> ToolResult:
        await runtime.store.update_thread(state.thread_id, agent=child.name)
        state.thread.agent = child.name
        if state.execution is not None:
            state.execution.outcome = "handoff"
        return ToolResult("success", f"The conversation is handed to {child.name}.")

    handler = run_subagent if child.type == "dual_ai" else handoff
    tool: ToolDefinition = define_tool(name=child.name, description=description, parameters=schema, execute=handler)
    return tool.model_copy(update={"origin": "agent", "origin_detail": child.name})


async def _run_child(runtime: Runtime, parent: ThreadState, child: AgentDefinition, namespace: str | None, message: str) -> ToolResult:
    from .state import ThreadState as _ThreadState

    thread = await runtime.create_thread(child.name, user_id=parent.user_id, parent_id=parent.thread_id, namespace=namespace)
    link = await runtime.store.add_subagent(SubagentRecord(parent_thread_id=parent.thread_id, child_thread_id=thread.id,
                                                           agent=child.name, relationship=child.name))
    child_state = _ThreadState(runtime, thread, child, thread.package)
    parent_hooks = await runtime._hooks_of(parent)
    await parent_hooks.notify("after_subagent_created", parent, child_state)
    runtime.bus.emit("subagent_created", parent.thread_id, {"id": link.id, "childThreadId": thread.id, "agent": child.name})
    try:
        result = await runtime.send(thread.id, message)
    except StandardAgentsError as exc:
        await runtime.store.update_subagent(link.id, status="failed", result={"error": str(exc)})
        return ToolResult("error", error=f"subagent {child.name} failed: {exc}")
    payload = result.payload or {}
    body = {"message": payload.get("message") if payload else result.text, "attachments": payload.get("attachments", []),
            "threadId": thread.id, "outcome": result.outcome}
    attachments = [{"path": p, "threadId": thread.id} for p in payload.get("attachments", [])]
    if result.outcome == "session_stop":
        await runtime.store.update_subagent(link.id, status="complete", result=body)
        return ToolResult("success", json.dumps(body), attachments=attachments)
    if result.outcome == "session_fail":
        await runtime.store.update_subagent(link.id, status="failed", result=body)
        return ToolResult("error", error=body["message"] or f"subagent {child.name} failed", attachments=attachments)
    if result.stop_reason in ("error", "cancelled"):
        await runtime.store.update_subagent(link.id, status="failed", result={**body, "error": result.error})
        return ToolResult("error", error=f"subagent {child.name} ended with {result.stop_reason}: {result.error or ''}".strip())
    await runtime.store.update_subagent(link.id, status="complete", result=body)
    return ToolResult("success", json.dumps(body), attachments=attachments)


def record_status(runtime: Runtime, state: ThreadState, payload: dict[str, Any]) -> None:
    """Record a child's status update on its parent's subagent entry (fire and forget)."""
    import asyncio

    if state.parent_id is None:
        return

    async def update() -> None:
        for link in await runtime.store.list_subagents(state.parent_id or ""):
            if link.child_thread_id == state.thread_id:
                await runtime.store.update_subagent(link.id, status=str(payload.get("message") or "running"))
                runtime.bus.emit("subagent_status", state.parent_id or "", {"id": link.id, "status": payload.get("message")})

    asyncio.get_running_loop().create_task(update())
