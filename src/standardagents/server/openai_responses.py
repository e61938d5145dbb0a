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

Function ``tools`` are client tools (see engine/client_tools): a call of one is a
``function_call`` output item of a completed response, and ``function_call_output`` input
items answering it (with or without ``previous_response_id``) continue the same turn.
``text.format`` asks for a typed answer the way ``response_format`` does on chat completions.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..engine.client_tools import ClientToolError, ClientTools, client_tools
from ..engine.options import TurnRequest
from ..engine.output import to_jsonable
from ..records import new_id
from .auth import authenticate, require_thread
from .errors import ApiError, JSONResponse, read_json
from .openai_history import text_of, to_message
from .state import server_of
from .streams import turn_events

__all__ = ["create_response", "get_response"]

#: stored responses: the system scope, one key per response id
_SCOPE, _SCOPE_ID = "system", "openai_responses"


def _usage(raw: dict[str, int] | None, subagents: dict[str, int] | None = None) -> dict[str, Any]:
    """The turn's usage in the Responses shape; its subagents' apart under ``subagents``."""
    usage = raw or {}
    prompt = int(usage.get("prompt_tokens", 0))
    completion = int(usage.get("completion_tokens", 0))
    out: dict[str, Any] = {
        "input_tokens": prompt, "output_tokens": completion,
        "total_tokens": int(usage.get("total_tokens") or prompt + completion),
        "input_tokens_details": {"cached_tokens": int(usage.get("cached_tokens", 0))},
        "output_tokens_details": {"reasoning_tokens": int(usage.get("reasoning_tokens", 0))}}
    if subagents:
        out["subagents"] = _usage(subagents)
    return out


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


def _client_tools(body: dict[str, Any]) -> ClientTools | None:
    """Responses ``tools`` (flat function tools), ``tool_choice`` and ``parallel_tool_calls``
    as the turn's client tools (400 for tool types the door cannot hand to the client)."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    if tools is None and choice is None and body.get("parallel_tool_calls") is None:
        return None
    if tools is not None and not isinstance(tools, list):
        raise ClientToolError("tools must be a list of function tools")
    schemas = []
    for i, tool in enumerate(tools or []):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise ClientToolError(f"tools[{i}]: only function tools can be client tools here, not {kind!r}")
        fn = {k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None}
        schemas.append({"type": "function", "function": fn})
    if isinstance(choice, dict) and choice.get("type") == "function" and "function" not in choice:
        choice = {"type": "function", "function": {"name": choice.get("name")}}
    return client_tools(schemas, choice, body.get("parallel_tool_calls"))


def _text_format(body: dict[str, Any]) -> dict[str, Any] | None:
    """``text.format`` as a ``response_format`` (None: free text)."""
    text = body.get("text")
    if text is None:
        return None
    if not isinstance(text, dict):
        raise ApiError(400, "field 'text' must be an object")
    fmt = text.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise ApiError(422, "field 'text.format' must be {type: text | json_object | json_schema}")
    if fmt["type"] == "json_schema":
        return {"type": "json_schema", "json_schema": {k: fmt[k] for k in ("name", "schema", "strict") if k in fmt}}
    return {"type": fmt["type"]}


def _message_item(item_id: str, text: str) -> dict[str, Any]:
    return {"type": "message", "id": item_id, "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _call_item(call: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {"type": "function_call", "id": "fc_" + call["id"], "call_id": call["id"], "name": call["name"],
            "arguments": call["arguments"] if status == "completed" else "", "status": status}


def _response(rid: str, model: str, created: int, thread_id: str, body: dict[str, Any], *, status: str,
              output: list[dict[str, Any]] | None = None, usage: dict[str, Any] | None = None,
              error: dict[str, Any] | None = None) -> dict[str, Any]:
    text = body.get("text") if isinstance(body.get("text"), dict) else None
    return {"id": rid, "object": "response", "created_at": created, "status": status, "model": model,
            "output": output or [], "usage": usage, "error": error, "incomplete_details": None,
            "instructions": body.get("instructions"), "previous_response_id": body.get("previous_response_id"),
            "metadata": body.get("metadata") or {}, "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "tool_choice": body.get("tool_choice") or "auto", "tools": body.get("tools") or [],
            "temperature": body.get("temperature"), "top_p": body.get("top_p"),
            "text": text or {"format": {"type": "text"}},
            "store": body.get("store", True), "thread": thread_id}


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: ".encode() + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"


def _answer_text(result: Any, typed: bool) -> str:
    """The turn's answer: a typed one as its JSON (however the model produced it)."""
    if typed and result.value is not None:
        return json.dumps(to_jsonable(result.value))
    return str(result.text or "")


async def create_response(request: Request) -> Response:
    from .openai_door import (
        DoorError,
        _check_client_tools,
        _error_object,
        _primary,
        _response_format,
        _sampling,
        _turn_error,
        begin_turn,
        new_thread_with_history,
        store_history,
        tool_results,
    )

    caller = await authenticate(request)
    body = await read_json(request)
    rt = server_of(request).runtime
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(422, "field 'model' is required: the name of an agent (see GET /v1/models)")
    client = _client_tools(body)
    output_type = _response_format(_text_format(body))
    sampling = _sampling({**body, "max_tokens": body.get("max_output_tokens")})
    chat = _as_chat(body.get("input"))
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ApiError(400, "field 'instructions' must be a string")
    if instructions:
        chat.insert(0, {"role": "system", "content": instructions})
    last = chat[-1]
    if last["role"] not in ("user", "tool"):
        raise ApiError(422, "field 'input' must end with a user message or function_call_output items: the "
                            "agent answers the last message")
    answering = last["role"] == "tool"
    earlier = [to_message("", m, i) for i, m in enumerate(chat if answering else chat[:-1])]
    user_text = None if answering else last["content"] or ""
    store = body.get("store", True)
    if not isinstance(store, bool):
        raise ApiError(400, "field 'store' must be a boolean")
    if not await _primary(request, model):
        raise ApiError(404, f"unknown model {model!r}: the model is an agent name (see GET /v1/models)",
                       code="model_not_found")
    if client is not None:
        await _check_client_tools(request, model, client)
    previous = body.get("previous_response_id")
    kept_thread: str | None = None
    if previous is not None:
        if not isinstance(previous, str):
            raise ApiError(400, "field 'previous_response_id' must be a string")
        kept = await rt.store.get_env(_SCOPE, _SCOPE_ID, previous)
        if not isinstance(kept, dict):
            raise DoorError(404, f"no stored response {previous!r}", param="previous_response_id")
        kept_thread = str(kept["thread"])
    results = tool_results(chat) if answering else {}
    waiting = await rt.waiting_for_tool_results(list(results), kept_thread) if results else None
    if waiting is not None:
        # the results the paused turn waits for: the same turn goes on
        thread = await require_thread(request, waiting.thread_id, caller)
        if rt.registry.find("agents", thread.agent, thread.package) is not rt.registry.find("agents", model):
            raise ApiError(422, f"the turn waiting for these tool results belongs to another agent than {model!r}")
        earlier = []
    elif kept_thread is not None:
        thread = await require_thread(request, kept_thread, caller)
        if rt.registry.find("agents", thread.agent, thread.package) is not rt.registry.find("agents", model):
            raise ApiError(422, f"response {previous!r} belongs to another agent than {model!r}")
        await store_history(request, thread.id, earlier, named=True)
    else:
        thread = await new_thread_with_history(request, model, caller.id, earlier)
    rid = new_id("resp_")
    item_id = new_id("msg_")
    created = int(time.time())
    headers = {"X-Thread-Id": thread.id}
    typed = output_type is not None

    async def keep(final: dict[str, Any]) -> None:
        if store:
            await rt.store.set_env(_SCOPE, _SCOPE_ID, rid, {"thread": thread.id, "user": caller.id, "body": final})

    sub = rt.subscribe(thread.id, reasoning=False) if body.get("stream") else None
    turn = TurnRequest(content=user_text, output_type=output_type, sampling=sampling or None, client_tools=client)
    task, execution_id = await begin_turn(request, thread.id, waiting, results, turn, sub)
    if sub is None:
        result = await task
        if result.outcome == "output_invalid":
            raise ApiError(502, f"the agent's answer did not match text.format: {result.error}", code="agent_error")
        failure = _turn_error(result.outcome, result.stop_reason, result.error, result.payload, bool(result.text))
        if failure is not None:
            raise failure
        calls = (result.payload or {}).get("toolCalls", []) if result.outcome == "client_tool_calls" else []
        text = _answer_text(result, typed)
        output = [_message_item(item_id, text)] if text or not calls else []
        output += [_call_item(c) for c in calls]
        final = _response(rid, model, created, thread.id, body, status="completed", output=output,
                          usage=_usage(result.usage, result.subagent_usage))
        await keep(final)
        return JSONResponse(final, headers=headers)

    async def frames() -> AsyncIterator[bytes]:
        seq = 0

        def event(kind: str, **fields: Any) -> bytes:
            nonlocal seq
            seq += 1
            return _sse({"type": kind, "sequence_number": seq - 1, **fields})

        def open_message() -> list[bytes]:
            item = {"type": "message", "id": item_id, "status": "in_progress", "role": "assistant", "content": []}
            return [event("response.output_item.added", output_index=0, item=item),
                    event("response.content_part.added", item_id=item_id, output_index=0, content_index=0,
                          part={"type": "output_text", "text": "", "annotations": []})]

        yield event("response.created", response=_response(rid, model, created, thread.id, body, status="in_progress"))
        yield event("response.in_progress", response=_response(rid, model, created, thread.id, body, status="in_progress"))
        text = ""
        opened = False
        calls: list[dict[str, Any]] = []
        async for ev in turn_events(sub, task, rt, thread.id, execution_id):
            if ev.type == "message_chunk" and ev.data.get("delta"):
                if not opened:
                    opened = True
                    for frame in open_message():
                        yield frame
                text += ev.data["delta"]
                yield event("response.output_text.delta", item_id=item_id, output_index=0, content_index=0,
                            delta=ev.data["delta"], logprobs=[])
            elif ev.type == "done" and ev.data.get("executionId") == execution_id:
                data = ev.data
                failure = _turn_error(data.get("outcome"), data.get("stopReason"), data.get("error"),
                                      data.get("payload"), bool(text))
                if data.get("outcome") == "output_invalid":
                    failure = DoorError(502, f"the agent's answer did not match text.format: {data.get('error')}",
                                        "agent_error")
                if failure is not None:
                    err = _error_object(failure)["error"]
                    yield event("response.failed", response=_response(
                        rid, model, created, thread.id, body, status="failed",
                        error={"code": err["code"], "message": err["message"]}))
                    return
                if data.get("outcome") == "client_tool_calls":
                    calls = list(data.get("toolCalls") or [])
        result = await task
        output: list[dict[str, Any]] = []
        final_text = _answer_text(result, typed) or text
        if opened or not calls:
            if not opened:
                for frame in open_message():
                    yield frame
            yield event("response.output_text.done", item_id=item_id, output_index=0, content_index=0,
                        text=final_text, logprobs=[])
            part = {"type": "output_text", "text": final_text, "annotations": []}
            yield event("response.content_part.done", item_id=item_id, output_index=0, content_index=0, part=part)
            message = _message_item(item_id, final_text)
            yield event("response.output_item.done", output_index=0, item=message)
            output.append(message)
        for call in calls:
            index = len(output)
            fc_id = "fc_" + call["id"]
            yield event("response.output_item.added", output_index=index, item=_call_item(call, "in_progress"))
            yield event("response.function_call_arguments.delta", item_id=fc_id, output_index=index,
                        delta=call["arguments"])
            yield event("response.function_call_arguments.done", item_id=fc_id, output_index=index,
                        arguments=call["arguments"])
            done_item = _call_item(call)
            yield event("response.output_item.done", output_index=index, item=done_item)
            output.append(done_item)
        final = _response(rid, model, created, thread.id, body, status="completed", output=output,
                          usage=_usage(result.usage, result.subagent_usage))
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

