"""An OpenAI-compatible door: ``POST /v1/chat/completions`` and ``GET /v1/models``, where
the model is an agent's name, so any OpenAI client can talk to an agent.

The last user message goes to a new thread, or to the thread named by the ``thread`` body
field or the ``X-Thread-Id`` header; the thread's id comes back in the ``X-Thread-Id``
response header and the ``thread`` field. The agent runs its own tools: the client sees
the final text (streamed as chat-completion chunks with ``stream: true``).

Only the agents ``/v1/models`` lists (the primary ones) answer here, and errors come in
OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``) so its clients raise
their usual exceptions.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from ..engine.output import output_spec, to_jsonable
from ..exceptions import StandardAgentsError, UnstorableValueError
from ..records import new_id
from .auth import authenticate, require_thread
from .errors import ApiError, JSONResponse, read_json
from .state import server_of
from .streams import turn_events

__all__ = ["openai_routes"]


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "invalid_request_error", 409: "invalid_request_error", 415: "invalid_request_error",
                422: "invalid_request_error"}


def _openai_errors(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """Answer the door's errors in OpenAI's error shape (our ``code`` and ``message`` kept)."""

    @functools.wraps(handler)
    async def wrapped(request: Request) -> Response:
        try:
            try:
                return await handler(request)
            except UnstorableValueError as exc:
                raise ApiError(400, str(exc)) from exc
        except ApiError as exc:
            body = {"error": {"message": exc.message, "type": _ERROR_TYPES.get(exc.status_code, "api_error"),
                              "param": getattr(exc, "param", None), "code": exc.code}}
            return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    return wrapped


def _check_messages(messages: list[Any]) -> None:
    """The shape of ``messages``: objects with a string ``role`` and a string, null or list of
    content parts, text parts carrying string ``text`` (400 naming the place otherwise)."""
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ApiError(400, f"{where} must be an object")
        if not isinstance(message.get("role"), str):
            raise ApiError(400, f"{where}.role must be a string")
        content = message.get("content")
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise ApiError(400, f"{where}.content must be a string or a list of content parts")
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise ApiError(400, f"{where}.content[{j}] must be an object with a string 'type'")
            if part["type"] in ("text", "input_text") and not isinstance(part.get("text"), str):
                raise ApiError(400, f"{where}.content[{j}].text must be a string")


async def _primary(request: Request, model: str) -> bool:
    """Whether ``model`` names an agent ``/v1/models`` lists (a primary one)."""
    registry = server_of(request).runtime.registry
    if not registry.has("agents", model):
        return False
    return bool((await registry.aget("agents", model)).primary)


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text")]
        return "".join(texts) if texts else None
    return None


async def list_models(request: Request) -> Response:
    await authenticate(request)
    rt = server_of(request).runtime
    data: list[dict[str, Any]] = []
    for entry in rt.registry.entries("agents"):
        agent = await rt.registry.aget("agents", entry.name, entry.package)
        if agent.primary:
            data.append({"id": rt.registry.public_name(entry), "object": "model", "created": 0, "owned_by": entry.package or "project"})
    data.sort(key=lambda m: m["id"])
    return JSONResponse({"object": "list", "data": data})


def _chunk(cid: str, model: str, created: int, delta: dict[str, Any], finish: str | None, thread: str) -> bytes:
    body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "thread": thread,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def _finish(stop_reason: str | None, outcome: str | None) -> str:
    if outcome == "error" or stop_reason == "error":
        return "error"
    if stop_reason in ("max_steps", "max_tokens", "length"):
        return "length"
    return "stop"


async def chat_completions(request: Request) -> Response:
    caller = await authenticate(request)
    body = await read_json(request)
    server = server_of(request)
    rt = server.runtime
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(422, "field 'model' is required: the name of an agent (see GET /v1/models)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(422, "field 'messages' must be a non-empty list")
    _check_messages(messages)
    user_text = None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            user_text = _text_of(message.get("content"))
            break
    if user_text is None:
        raise ApiError(422, "field 'messages' needs a user message with text content")
    output_type = _response_format(body.get("response_format"))
    thread_id = body.get("thread") or request.headers.get("x-thread-id")
    if thread_id is not None and not isinstance(thread_id, str):
        raise ApiError(422, "field 'thread' must be a thread id string")
    if not await _primary(request, model):
        raise ApiError(404, f"unknown model {model!r}: the model is an agent name (see GET /v1/models)",
                       code="model_not_found")
    if thread_id:
        thread = await require_thread(request, thread_id, caller)
        owner = rt.registry.find("agents", thread.agent, thread.package)
        if owner is None or rt.registry.find("agents", model) is not owner:
            name = rt.registry.public_name(owner) if owner is not None else thread.agent
            raise ApiError(422, f"thread {thread_id!r} belongs to agent {name!r}, not {model!r}")
    else:
        thread = await rt.create_thread(model, user_id=caller.id, metadata={"source": "openai"})
    cid = new_id("chatcmpl-")
    created = int(time.time())
    headers = {"X-Thread-Id": thread.id}
    if body.get("stream"):
        sub = rt.subscribe(thread.id, reasoning=False, maxsize=server.stream_buffer)
        execution_id = new_id("exe_")
        task = await rt.start(thread.id, user_text, execution_id=execution_id, output_type=output_type)
        from .api import _keep

        _keep(request, task)

        async def frames() -> AsyncIterator[bytes]:
            yield _chunk(cid, model, created, {"role": "assistant", "content": ""}, None, thread.id)
            finish = "stop"
            async for event in turn_events(sub, task, rt, thread.id, execution_id):
                if event.type == "message_chunk" and event.data.get("delta"):
                    yield _chunk(cid, model, created, {"content": event.data["delta"]}, None, thread.id)
                elif event.type == "done":
                    finish = _finish(event.data.get("stopReason"), event.data.get("outcome"))
            yield _chunk(cid, model, created, {}, finish, thread.id)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream",
                                 headers={**headers, "Cache-Control": "no-cache"})
    result = await rt.send(thread.id, user_text, output_type=output_type)
    if result.outcome == "output_invalid":
        raise ApiError(502, f"the agent's answer did not match response_format: {result.error}", code="agent_error")
    if result.outcome == "error" and result.text is None:
        raise ApiError(502, f"the agent failed: {result.error}", code="agent_error")
    # a typed answer is its JSON (whatever way the agent's model produced it)
    content = json.dumps(to_jsonable(result.value)) if output_type is not None and result.value is not None \
        else result.text or ""
    usage = result.usage or {}
    prompt_tokens = int(usage.get("prompt_tokens", 0))
    completion_tokens = int(usage.get("completion_tokens", 0))
    return JSONResponse({
        "id": cid, "object": "chat.completion", "created": created, "model": model, "thread": thread.id,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": _finish(result.stop_reason, result.outcome)}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": int(usage.get("total_tokens", prompt_tokens + completion_tokens))},
    }, headers=headers)


def _response_format(value: Any) -> dict[str, Any] | None:
    """The JSON Schema a ``response_format`` asks for (``json_object``: any object)."""
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") not in ("text", "json_object", "json_schema"):
        raise ApiError(422, "field 'response_format' must be {type: text | json_object | json_schema}")
    if value["type"] == "text":
        return None
    if value["type"] == "json_object":
        return {"type": "object"}
    spec = value.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise ApiError(422, "field 'response_format.json_schema.schema' must be a JSON Schema object")
    try:
        output_spec(schema)
    except StandardAgentsError as exc:
        raise ApiError(422, f"field 'response_format': {exc}") from exc
    return schema


def openai_routes() -> list[BaseRoute]:
    return [
        Route("/v1/models", _openai_errors(list_models), methods=["GET"]),
        Route("/v1/chat/completions", _openai_errors(chat_completions), methods=["POST"]),
    ]
