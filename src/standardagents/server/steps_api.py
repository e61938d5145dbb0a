"""``GET /api/executions/{id}/steps/{n}``: what one model step of a turn saw and said.

A step's record names the messages it sent by reference (the first and last stored message of
the history, and how many went out) and carries the rendered system prompt and tool schemas
only when they changed within the turn (:mod:`..engine.steps`). This reader rebuilds the
request from those, converting the stored messages as the engine did, so the answer is the
model's view without the store holding a copy per step. ``exact`` says whether the rebuilt
list has as many messages as went out (a hook that filtered the history, or messages hidden
after the step, make it differ).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..engine.compaction import place_summaries
from ..engine.context import LLMCache
from ..engine.steps import execution_detail
from ..records import ExecutionRecord, Message
from ..store.checks import check_text
from .auth import authenticate, require_thread
from .errors import ApiError, JSONResponse
from .state import server_of

__all__ = ["get_step", "step_content", "step_routes"]


def _sent_content(messages: list[Message], record: ExecutionRecord, upto: str, side: str) -> tuple[Any, Any]:
    """The system prompt and tool schemas in force at the step whose reply is ``upto``: the
    latest ones the turn's records of that side carried, up to and including that step."""
    system: Any = None
    tools: Any = None
    for m in messages:
        meta = m.metadata or {}
        if m.role != "assistant" or meta.get("executionId") != record.id:
            continue
        call = meta.get("call")
        if isinstance(call, dict) and (m.side or "a") == side:
            if "system" in call:
                system = call["system"]
            if "toolSchemas" in call:
                tools = call["toolSchemas"]
        if m.id == upto:
            break
    return system, tools


def _sent_messages(history: list[Message], sent: dict[str, Any], system: Any, side: str | None) -> list[dict[str, Any]]:
    """The chat messages a step sent: its system prompt, then the stored history from its first
    to its last message converted from the side's point of view, as the engine converts it."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    first, last = sent.get("first"), sent.get("last")
    if first is None or last is None:
        return out
    ids = [m.id for m in history]
    try:
        start, end = ids.index(first), ids.index(last)
    except ValueError:
        return out
    dual = side is not None
    llm = LLMCache().convert(history[start:end + 1], side or "a", dual)
    out.extend(llm)
    if dual and (not llm or llm[-1]["role"] == "assistant"):
        out.append({"role": "user", "content": "(continue)"})
    return out


def step_content(record: ExecutionRecord, messages: list[Message], tool_rows: list[dict[str, Any]],
                 index: int) -> dict[str, Any]:
    """Step ``index`` (0-based, as the execution's ``steps`` list numbers them) with what it
    sent and what came back; :class:`ApiError` 404 when the execution has no such step."""
    steps = execution_detail(record, messages, tool_rows)["steps"]
    if not 0 <= index < len(steps):
        raise ApiError(404, f"execution {record.id} has no step {index} (its steps are numbered 0 to "
                            f"{len(steps) - 1})" if steps else f"execution {record.id} has no model steps")
    step = steps[index]
    reply = next(m for m in messages if m.id == step["messageId"])
    side = reply.side
    system, tools = _sent_content(messages, record, reply.id, side or "a")
    sent = step.get("sent") or {}
    rebuilt = _sent_messages(place_summaries(messages), sent, system, side)
    return {
        "executionId": record.id, "threadId": record.thread_id, "index": index, "step": step["step"],
        "messageId": reply.id, "side": side, "provider": step["provider"], "model": step["model"],
        "responseModel": step["responseModel"], "finishReason": step["finishReason"],
        "messages": rebuilt, "tools": tools or [],
        "exact": sent.get("count") == len(rebuilt),
        "reply": {"content": reply.content, "reasoning": reply.reasoning, "status": reply.status,
                  "toolCalls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls or ()]},
        "toolCalls": [{k: c[k] for k in ("id", "name", "arguments", "status", "result", "error", "durationMs",
                                         "approval")} for c in step["toolCalls"]],
        "usage": step["usage"], "cost": step["cost"], "latencyMs": step["latencyMs"], "ttftMs": step["ttftMs"],
        "createdAt": step["createdAt"],
    }


async def get_step(request: Request) -> Response:
    """One step of an execution, readable by whoever may read its thread (404 for an unknown
    execution or step, 403 for a thread the caller may not read)."""
    caller = await authenticate(request)
    execution_id = request.path_params["execution_id"]
    check_text("execution id", execution_id)
    store = server_of(request).runtime.store
    record = await store.get_execution(execution_id)
    if record is None:
        raise ApiError(404, f"unknown execution {execution_id!r}")
    await require_thread(request, record.thread_id, caller)
    messages = await store.list_messages(record.thread_id)
    rows = await store.list_tool_results(record.thread_id)
    return JSONResponse(step_content(record, messages, rows, request.path_params["n"]))


def step_routes(prefix: str) -> list[Route]:
    """The route, under the API's prefix."""
    return [Route(f"{prefix}/executions/{{execution_id}}/steps/{{n:int}}", get_step, methods=["GET"])]
