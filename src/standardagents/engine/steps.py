"""What happened inside a turn: one record per model call, read back as an execution's steps.

Each model call's figures (provider, model, the stored messages it was sent, tools offered,
finish reason, latency, time to first token, failed attempts and fallbacks, trace id) go in
the ``call`` entry of the reply message's metadata, written in the same commit as the reply:
no extra write per step, and storage stays linear in the conversation because the messages
sent are named by reference (first and last stored message id and a count), never copied.
Tool calls are already stored as result rows (arguments, repairs, status, duration); the
reader below joins them to the model call that asked for them.
"""

from __future__ import annotations

import json
import time
from bisect import bisect_left
from typing import Any

from ..records import ExecutionRecord, Message
from ..skills import LOAD_SKILL_TOOL
from ..store.records import SubagentRecord
from .digest import CHANGED_KEY, DIGEST_KEY
from .state import ExecutionState

__all__ = ["StepProbe", "execution_detail", "execution_summary", "load_execution"]


class StepProbe:
    """Times one model step and notes its failed attempts; ``finish`` writes its record."""

    __slots__ = ("attempts", "call", "started", "trace_id", "ttft")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.ttft: float | None = None
        self.attempts: list[dict[str, Any]] | None = None
        self.trace_id: str | None = None
        self.call: Any = None

    def first_token(self) -> None:
        if self.ttft is None:
            self.ttft = time.perf_counter() - self.started
            if self.call is not None:
                self.call.first_token()

    def failed(self, model: Any, error: BaseException) -> None:
        """A call that failed before the one that answered (a fallback followed)."""
        if self.attempts is None:
            self.attempts = []
        self.attempts.append({"model": model.name, "provider": model.provider, "error": str(error)[:500]})

    def traced(self, call: Any) -> None:
        """Follow the observed call (its first token is this step's), and keep the trace id
        of its span, when tracing made one (``call.trace_id``: None when not traced)."""
        self.call = call
        if self.trace_id is None:
            self.trace_id = call.trace_id

    def finish(self, reply: Message, response: Any, request: Any, history: list[Message], model: Any,
               ex: ExecutionState) -> None:
        elapsed = time.perf_counter() - self.started
        tools = request.tools
        call: dict[str, Any] = {
            "provider": model.provider if model is not None else None,
            "model": model.name if model is not None else request.model,
            "finishReason": response.finish_reason,
            "latencyMs": round(elapsed * 1000, 3),
            "sent": {"first": history[0].id if history else None, "last": history[-1].id if history else None,
                     "count": len(request.messages)},
        }
        if tools:
            call["tools"] = [_tool_name(t) for t in tools]
        _note_content(call, request, reply.side or "a", ex)
        if self.ttft is not None:
            call["ttftMs"] = round(self.ttft * 1000, 3)
        if self.attempts:
            call["attempts"] = self.attempts
        if self.trace_id is not None:
            call["traceId"] = self.trace_id
        checks = ex.take_checks()
        if checks is not None:
            call.update(checks)
        reply.metadata["call"] = call

    def cut_short(self, reply: Message, model: Any, ex: ExecutionState) -> None:
        """The record of a step an output guardrail stopped: what is known of its call, and
        the hooks and guardrails that ran (the tripped one among them)."""
        call = reply.metadata.get("call")
        if call is None:
            call = reply.metadata["call"] = {
                "provider": model.provider if model is not None else None,
                "model": model.name if model is not None else None, "finishReason": "guardrail",
                "latencyMs": round((time.perf_counter() - self.started) * 1000, 3)}
            if self.trace_id is not None:
                call["traceId"] = self.trace_id
        for key, entries in (ex.take_checks() or {}).items():
            call.setdefault(key, []).extend(entries)


def _note_content(call: dict[str, Any], request: Any, side: str, ex: ExecutionState) -> None:
    """Keep the rendered system prompt and the tool schemas a step sent, in its record, when
    they differ from the previous step's of the same side (an identity check first: the
    toolbox hands the same list every step): with the messages named by reference, this is
    enough to rebuild exactly what the model was sent, at the cost of one copy per turn."""
    first = request.messages[0] if request.messages else None
    system = first.get("content") if isinstance(first, dict) and first.get("role") == "system" else None
    tools = request.tools or None
    last = ex.sent_content.get(side)
    if last is not None and (last[0] is system or last[0] == system):
        if last[1] is tools or last[1] == tools:
            return
        call["toolSchemas"] = tools or []
    elif last is not None and (last[1] is tools or last[1] == tools):
        call["system"] = system
    else:
        call["system"] = system
        call["toolSchemas"] = tools or []
    ex.sent_content[side] = (system, tools)


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        fn = tool.get("function")
        if isinstance(fn, dict) and fn.get("name"):
            return str(fn["name"])
        return str(tool.get("name", "?"))
    return str(getattr(tool, "name", tool))


def execution_summary(record: ExecutionRecord) -> dict[str, Any]:
    """The execution's own row: outcome, usage, cost and timing."""
    state = record.state or {}
    return {"id": record.id, "threadId": record.thread_id, "status": record.status, "stopReason": record.stop_reason,
            "outcome": state.get("outcome"), "error": record.error, "stepCount": record.step_count,
            "value": state.get("value"), "usage": state.get("usage") or {}, "cost": state.get("cost"),
            "subagentUsage": state.get("subagentUsage") or {}, "subagentCost": state.get("subagentCost"),
            "createdAt": record.created_at, "updatedAt": record.updated_at,
            "durationMs": max(0, record.updated_at - record.created_at)}


def execution_detail(record: ExecutionRecord, messages: list[Message], tool_rows: list[dict[str, Any]],
                     subagents: list[SubagentRecord] | None = None) -> dict[str, Any]:
    """An execution with its steps: each model call and the tool calls it asked for (with the
    person's decision when a call waited for approval, and the child thread when the tool ran a
    subagent), the skills its ``load_skill`` calls loaded, guardrails that tripped, compactions
    and errors; the calls still waiting for a decision. ``messages``, ``tool_rows`` and
    ``subagents`` are the thread's; those of other executions are left out."""
    by_call: dict[str, dict[str, Any]] = {}
    for tr in tool_rows:
        if tr.get("tool_call_id"):
            by_call[tr["tool_call_id"]] = tr
    children = {link.child_thread_id: link for link in subagents or ()}
    steps: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    compactions: list[dict[str, Any]] = []
    started: list[dict[str, Any]] = []
    checks: list[tuple[str, dict[str, Any]]] = []
    trace_id: str | None = None
    for m in messages:
        meta = m.metadata or {}
        if meta.get("executionId") != record.id:
            continue
        if meta.get("summary"):
            compactions.append({"messageId": m.id, "step": meta.get("step"), "folded": len(meta.get("folded") or ()),
                                "createdAt": m.created_at})
            continue
        if m.role != "assistant":
            continue
        if meta.get("error"):
            errors.append({"messageId": m.id, "code": meta["error"], "message": m.content, "createdAt": m.created_at})
            continue
        call = meta.get("call") or {}
        trace_id = trace_id or call.get("traceId")
        tool_calls = []
        skills: list[dict[str, Any]] = []
        for tc in m.tool_calls or ():
            found = by_call.get(tc.id)
            row: dict[str, Any] = found or {}
            rmeta = row.get("metadata") or {}
            entry: dict[str, Any] = {
                "id": tc.id, "name": tc.name, "arguments": tc.arguments,
                "status": row.get("status"), "result": row.get("result"), "error": row.get("error"),
                "durationMs": rmeta.get("durationMs"), "repaired": bool(rmeta.get("repaired")),
                "repairNotes": rmeta.get("repairNotes") or [],
                "resultMessageId": row.get("message_id"), "approval": rmeta.get("approval"),
            }
            link = children.get(_child_thread(row.get("result")) or "")
            if link is not None:
                entry["subagent"] = {"threadId": link.child_thread_id, "agent": link.agent, "status": link.status}
                started.append(entry["subagent"])
            tool_calls.append(entry)
            if tc.name == LOAD_SKILL_TOOL:
                skills.append(_skill_loaded(tc.id, tc.arguments, entry["status"]))
        checks.extend(("hooks", e) for e in call.get("hooks") or ())
        checks.extend(("guardrails", e) for e in call.get("guardrails") or ())
        steps.append({
            "index": len(steps), "step": meta.get("step"), "kind": "model", "messageId": m.id, "side": m.side,
            "status": m.status, "provider": call.get("provider"), "model": call.get("model"),
            "responseModel": meta.get("model"), "finishReason": call.get("finishReason"),
            "sent": call.get("sent"), "tools": call.get("tools") or [],
            "usage": m.usage.to_dict() if m.usage is not None else None, "cost": m.cost,
            "latencyMs": call.get("latencyMs"), "ttftMs": call.get("ttftMs"),
            "attempts": call.get("attempts") or [], "toolCalls": tool_calls, "createdAt": m.created_at,
            "guardrail": meta.get("guardrail"), "hooks": [], "guardrails": [], "skills": skills,
            "memory": meta.get("memory"),
        })
    state = record.state or {}
    leftover = state.get("checks") or {}
    for key in ("hooks", "guardrails"):
        checks.extend((key, e) for e in leftover.get(key) or ())
    detail = execution_summary(record)
    detail["checks"] = _place_checks(steps, checks)
    detail["traceId"] = trace_id
    detail["steps"] = steps
    detail["errors"] = errors
    detail["compactions"] = compactions
    detail["subagents"] = started
    options = state.get("options")
    detail["override"] = options.get("override") if isinstance(options, dict) else None
    # what the turn started with, and how a deploy changed it before it went on
    detail["definitions"] = state.get(DIGEST_KEY)
    detail["definitionsChanged"] = state.get(CHANGED_KEY)
    decided = state.get("decisions") or {}
    detail["waitingForApproval"] = [
        {"id": p.get("id"), "name": p.get("name"), "arguments": p.get("arguments")}
        for p in state.get("pending") or () if isinstance(p, dict) and p.get("id") not in decided
    ] if record.status == "waiting" else []
    return detail


def _place_checks(steps: list[dict[str, Any]], checks: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Give each noted hook and guardrail to the step it ran in. A step's record holds what ran
    since the previous record was written, so the hooks of a step's tool calls arrive with the
    next step's record; each entry names its step, which puts it back. What ran before the
    first step goes to it; what no step can take (a turn that tripped before any model call)
    is returned, for the turn itself."""
    by_number = {s["step"]: s for s in steps if isinstance(s.get("step"), int)}
    numbered = sorted(by_number)
    rest: dict[str, list[dict[str, Any]]] = {"hooks": [], "guardrails": []}
    for key, entry in checks:
        number = entry.get("step")
        target = by_number.get(number) if isinstance(number, int) else None
        if target is None and steps:
            # the first step at or after the entry's own (a long turn has thousands of entries)
            at = bisect_left(numbered, number) if isinstance(number, int) else len(numbered)
            target = by_number[numbered[at]] if at < len(numbered) else steps[-1]
        (target[key] if target is not None else rest[key]).append(entry)
    return rest


def _skill_loaded(call_id: str, arguments: Any, status: Any) -> dict[str, Any]:
    """What a ``load_skill`` call of a step loaded: the skill (and the file, when it read
    one), and whether it succeeded; read from the call as stored, so nothing more is written."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        args = None
    args = args if isinstance(args, dict) else {}
    name, path = args.get("name"), args.get("path")
    return {"name": name if isinstance(name, str) else None, "path": path if isinstance(path, str) and path else None,
            "toolCallId": call_id, "status": status}


def _child_thread(result: Any) -> str | None:
    """The child thread a subagent tool's result names (its JSON body's ``threadId``)."""
    if not isinstance(result, str) or '"threadId"' not in result:
        return None
    try:
        body = json.loads(result)
    except ValueError:
        return None
    child = body.get("threadId") if isinstance(body, dict) else None
    return child if isinstance(child, str) else None


async def load_execution(store: Any, record: ExecutionRecord) -> dict[str, Any]:
    """``execution_detail`` read from the store (the thread's messages and tool results)."""
    messages = await store.list_messages(record.thread_id)
    rows = await store.list_tool_results(record.thread_id)
    return execution_detail(record, messages, rows, await store.list_subagents(record.thread_id))
