"""The Responses API on the OpenAI door: ``POST /v1/responses`` and ``GET /v1/responses/{id}``.

A response is one turn of an agent. ``input`` (a string or a list of items: messages and
``function_call``/``function_call_output`` items) follows the door's history rule (see
openai_history): with no ``previous_response_id`` it becomes a new thread's history, with
one it continues that response's thread, storing only what the thread does not hold yet.
``instructions`` is a system message at the head of the conversation. A stored response
(``store`` true, the default) can be fetched again and continued; with ``store: false`` it
is neither. Streamed, the Responses event types are sent (``response.created``,
``response.output_item.added``, ``response.output_text.delta``, ``response.completed`` or
``response.failed``...).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..records import new_id
from .auth import authenticate, require_thread
from .errors import ApiError, JSONResponse, read_json
from .openai_history import new_history, text_of, to_message
from .state import server_of
from .streams import turn_events

__all__ = ["create_response", "get_response"]

#: stored responses: the system scope, one key per response id
_SCOPE, _SCOPE_ID = "system", "openai_responses"


def _usage(raw: dict[str, int] | None) -> dict[str, Any]:
    usage = raw or {}
    prompt = int(usage.get("prompt_tokens", 0))
    completion = int(usage.get("completion_tokens", 0))
    return {"input_tokens": prompt, "output_tokens": completion,
            "total_tokens": int(usage.get("total_tokens") or prompt + completion),
            "input_tokens_details": {"cached_tokens": int(usage.get("cached_tokens", 0))},
            "output_tokens_details": {"reasoning_tokens": int(usage.get("reasoning_tokens", 0))}}


def _as_chat(items: Any) -> list[dict[str, Any]]:
    """Responses input items as chat messages (400 naming the item that cannot be one)."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise ApiError(400, "field 'input' must be a string or a non-empty list of input items")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise ApiError(400, f"{where} must be an object")
        kind = item.get("type", "message")
        if kind == "message":
            if not isinstance(item.get("role"), str):
                raise ApiError(400, f"{where}.role must be a string")
            content = item.get("content")
            if not isinstance(content, str | list) or (text_of(content) is None and content):
                raise ApiError(400, f"{where}.content must be a string or a list of text parts")
            out.append({"role": item["role"], "content": text_of(content) or ""})
        elif kind == "function_call":
            if not isinstance(item.get("call_id"), str) or not isinstance(item.get("name"), str):
                raise ApiError(400, f"{where} (function_call) needs a string call_id and name")
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": str(item.get("arguments") or "{}")}}
            if out and out[-1]["role"] == "assistant" and out[-1].get("tool_calls") is not None:
                out[-1]["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str):
                raise ApiError(400, f"{where} (function_call_output) needs a string call_id")
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": item["call_id"],
                        "content": output if isinstance(output, str) else json.dumps(output)})
        else:
            raise ApiError(400, f"{where}.type {kind!r} is not supported here: use message, function_call "
                                "or function_call_output")
    return out


def _response(rid: str, model: str, created: int, thread_id: str, body: dict[str, Any], *, status: str,
              text: str | None = None, usage: dict[str, Any] | None = None,
              error: dict[str, Any] | None = None, item_id: str = "") -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if text is not None:
        output.append({"type": "message", "id": item_id, "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    return {"id": rid, "object": "response", "created_at": created, "status": status, "model": model,
            "output": output, "usage": usage, "error": error, "incomplete_details": None,
            "instructions": body.get("instructions"), "previous_response_id": body.get("previous_response_id"),
            "metadata": body.get("metadata") or {}, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "temperature": body.get("temperature"), "top_p": body.get("top_p"),
            "store": body.get("store", True), "thread": thread_id}


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: ".encode() + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"


async def create_response(request: Request) -> Response:
    from .openai_door import DoorError, _error_object, _primary, _sampling, _turn_error

    caller = await authenticate(request)
    body = await read_json(request)
    rt = server_of(request).runtime
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(422, "field 'model' is required: the name of an agent (see GET /v1/models)")
    if body.get("tools"):
        raise DoorError(400, "tools sent by the client are not supported on /v1/responses yet: the agent "
                             "runs its own tools", param="tools")
    sampling = _sampling({**body, "max_tokens": body.get("max_output_tokens")})
    chat = _as_chat(body.get("input"))
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ApiError(400, "field 'instructions' must be a string")
    if instructions:
        chat.insert(0, {"role": "system", "content": instructions})
    last = chat[-1]
    if last["role"] != "user":
        raise ApiError(422, "field 'input' must end with a user message: the agent answers the last message")
    earlier = [to_message("", m, i) for i, m in enumerate(chat[:-1])]
    user_text = last["content"] or ""
    store = body.get("store", True)
    if not isinstance(store, bool):
        raise ApiError(400, "field 'store' must be a boolean")
    if not await _primary(request, model):
        raise ApiError(404, f"unknown model {model!r}: the model is an agent name (see GET /v1/models)",
                       code="model_not_found")
    previous = body.get("previous_response_id")
    if previous is not None:
        if not isinstance(previous, str):
            raise ApiError(400, "field 'previous_response_id' must be a string")
        kept = await rt.store.get_env(_SCOPE, _SCOPE_ID, previous)
        if not isinstance(kept, dict):
            raise DoorError(404, f"no stored response {previous!r}", param="previous_response_id")
        thread = await require_thread(request, kept["thread"], caller)
        if rt.registry.find("agents", thread.agent, thread.package) is not rt.registry.find("agents", model):
            raise ApiError(422, f"response {previous!r} belongs to another agent than {model!r}")
        earlier = new_history(await rt.store.list_messages(thread.id), earlier)
    else:
        thread = await rt.create_thread(model, user_id=caller.id, metadata={"source": "openai"})
    if earlier:
        for message in earlier:
            message.thread_id = thread.id
        await rt.create_messages(await rt.state(thread.id), earlier)
    rid = new_id("resp_")
    item_id = new_id("msg_")
    created = int(time.time())
    headers = {"X-Thread-Id": thread.id}

    async def keep(final: dict[str, Any]) -> None:
        if store:
            await rt.store.set_env(_SCOPE, _SCOPE_ID, rid, {"thread": thread.id, "user": caller.id, "body": final})

    sub = rt.subscribe(thread.id, reasoning=False) if body.get("stream") else None
    execution_id = new_id("exe_")
    task = await rt.start(thread.id, user_text, execution_id=execution_id, sampling=sampling or None)
    from .api import _keep

    _keep(request, task)
    if sub is None:
        result = await task
        failure = _turn_error(result.outcome, result.stop_reason, result.error, result.payload, bool(result.text))
        if failure is not None:
            raise failure
        final = _response(rid, model, created, thread.id, body, status="completed", text=result.text or "",
                          usage=_usage(result.usage), item_id=item_id)
        await keep(final)
        return JSONResponse(final, headers=headers)

    async def frames() -> AsyncIterator[bytes]:
        seq = 0

        def event(kind: str, **fields: Any) -> bytes:
            nonlocal seq
            seq += 1
            return _sse({"type": kind, "sequence_number": seq - 1, **fields})

        yield event("response.created", response=_response(rid, model, created, thread.id, body, status="in_progress"))
        yield event("response.in_progress", response=_response(rid, model, created, thread.id, body, status="in_progress"))
        item = {"type": "message", "id": item_id, "status": "in_progress", "role": "assistant", "content": []}
        yield event("response.output_item.added", output_index=0, item=item)
        yield event("response.content_part.added", item_id=item_id, output_index=0, content_index=0,
                    part={"type": "output_text", "text": "", "annotations": []})
        text = ""
        async for ev in turn_events(sub, task, rt, thread.id, execution_id):
            if ev.type == "message_chunk" and ev.data.get("delta"):
                text += ev.data["delta"]
                yield event("response.output_text.delta", item_id=item_id, output_index=0, content_index=0,
                            delta=ev.data["delta"], logprobs=[])
            elif ev.type == "done":
                data = ev.data
                failure = _turn_error(data.get("outcome"), data.get("stopReason"), data.get("error"),
                                      data.get("payload"), bool(text))
                if failure is not None:
                    err = _error_object(failure)["error"]
                    yield event("response.failed", response=_response(
                        rid, model, created, thread.id, body, status="failed",
                        error={"code": err["code"], "message": err["message"]}))
                    return
        result = await task
        text = result.text or text
        yield event("response.output_text.done", item_id=item_id, output_index=0, content_index=0, text=text,
                    logprobs=[])
        part = {"type": "output_text", "text": text, "annotations": []}
        yield event("response.content_part.done", item_id=item_id, output_index=0, content_index=0, part=part)
        yield event("response.output_item.done", output_index=0,
                    item={**item, "status": "completed", "content": [part]})
        final = _response(rid, model, created, thread.id, body, status="completed", text=text,
                          usage=_usage(result.usage), item_id=item_id)
        await keep(final)
        yield event("response.completed", response=final)

    return StreamingResponse(frames(), media_type="text/event-stream", headers={**headers, "Cache-Control": "no-cache"})


async def get_response(request: Request) -> Response:
    caller = await authenticate(request)
    rt = server_of(request).runtime
    rid = request.path_params["response_id"]
    kept = await rt.store.get_env(_SCOPE, _SCOPE_ID, rid)
    if not isinstance(kept, dict):
        raise ApiError(404, f"no stored response {rid!r}")
    await require_thread(request, kept["thread"], caller)
    return JSONResponse(kept["body"], headers={"X-Thread-Id": kept["thread"]})

