"""An OpenAI-compatible door: ``POST /v1/chat/completions`` and ``GET /v1/models``, where
the model is an agent's name, so any OpenAI client can talk to an agent.

The request's message list is the conversation: with no thread named it becomes a new
thread's history; with a thread named (the ``thread`` body field or the ``X-Thread-Id``
header) only the messages the thread does not hold yet are appended (see openai_history).
The agent answers the last message, a user one. The thread's id comes back in the
``X-Thread-Id`` response header and the ``thread`` field; ``usage`` sums every model call of
the turn (a final usage chunk with ``stream_options.include_usage``). The agent runs its own tools: the client sees
the final text (streamed as chat-completion chunks with ``stream: true``).

The request's ``tools`` are client tools (see engine/client_tools): offered to the agent's
model beside its own, and a call of one ends the response with ``finish_reason:
"tool_calls"`` while the turn waits durably. A request whose messages end with the ``tool``
results of those calls continues that same turn (found on the named thread, else by the
calls' ids); ``tool_choice`` applies to the first model request of the turn or continuation.

Only the agents ``/v1/models`` lists (the primary ones) answer here, and errors come in
OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``) so its clients raise
their usual exceptions.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from ..engine.client_tools import ClientToolError, ClientTools, client_tools
from ..engine.options import TurnRequest
from ..engine.output import output_spec, to_jsonable
from ..exceptions import (
    QuotaExceeded,
    ShuttingDownError,
    StandardAgentsError,
    ThreadBusyError,
    UnstorableValueError,
)
from ..records import Message, ThreadRecord, new_id
from .auth import authenticate, require_thread
from .authorization import thread_metadata
from .doors.common import turn_failure
from .errors import ApiError, JSONResponse, error_of, read_json
from .openai_history import new_history, to_message
from .openai_history import text_of as _text_of
from .state import server_of
from .streams import turn_events

__all__ = ["openai_routes"]


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "invalid_request_error", 409: "invalid_request_error", 415: "invalid_request_error",
                422: "invalid_request_error", 429: "rate_limit_error"}


class DoorError(ApiError):
    """An ApiError naming the request field at fault (OpenAI's ``param``)."""

    def __init__(self, status: int, message: str, code: str | None = None, *, param: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(status, message, code, headers)
        self.param = param


def _error_object(exc: ApiError) -> dict[str, Any]:
    return {"error": {"message": exc.message, "type": _ERROR_TYPES.get(exc.status_code, "api_error"),
                      "param": getattr(exc, "param", None), "code": exc.code}}


def _openai_errors(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """Answer the door's errors in OpenAI's error shape (our ``code`` and ``message`` kept)."""

    @functools.wraps(handler)
    async def wrapped(request: Request) -> Response:
        try:
            try:
                return await handler(request)
            except UnstorableValueError as exc:
                raise ApiError(400, str(exc)) from exc
            except ClientToolError as exc:
                raise DoorError(400, str(exc), "invalid_tools", param="tools") from exc
            except (ThreadBusyError, ShuttingDownError, QuotaExceeded) as exc:  # busy, draining, over quota
                status, code, message = error_of(exc)
                raise DoorError(status, message, code, headers=getattr(exc, "headers", None)) from exc
        except ApiError as exc:
            return JSONResponse(_error_object(exc), status_code=exc.status_code, headers=exc.headers)

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
            if part["type"] in ("text", "input_text", "output_text") and not isinstance(part.get("text"), str):
                raise ApiError(400, f"{where}.content[{j}].text must be a string")


async def _primary(request: Request, model: str) -> bool:
    """Whether ``model`` names an agent ``/v1/models`` lists (a primary one)."""
    registry = server_of(request).runtime.registry
    if not registry.has("agents", model):
        return False
    return bool((await registry.aget("agents", model)).primary)


async def _check_client_tools(request: Request, model: str, client: ClientTools) -> None:
    """400 before anything is stored when a client tool clashes with one of the agent's."""
    rt = server_of(request).runtime
    entry = rt.registry.find("agents", model)
    if entry is not None:
        await rt.check_client_tools(await rt.registry.aget("agents", entry.name, entry.package), entry.package, client)


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


def _frame(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def _chunk(cid: str, model: str, created: int, delta: dict[str, Any], finish: str | None, thread: str) -> bytes:
    return _frame({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "thread": thread,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _finish(stop_reason: str | None, outcome: str | None) -> str:
    if outcome == "client_tool_calls":
        return "tool_calls"
    if outcome in ("max_steps", "max_tokens", "length") or stop_reason in ("max_steps", "max_tokens", "length"):
        return "length"
    return "stop"


def _turn_error(outcome: str | None, stop_reason: str | None, error: str | None, payload: dict[str, Any] | None,
                has_text: bool) -> ApiError | None:
    """How a turn that did not answer is told to an OpenAI client (None: it answered): the
    doors' shared classification, plus what this door cannot carry on with (a call waiting
    for approval is a 409 naming the approvals API; a cancelled turn is a 409)."""
    if outcome == "approval_required":
        return DoorError(409, "the agent is waiting for a tool call to be approved, which this door cannot do: "
                              "approve or deny it with GET/POST /api/threads/{id}/approvals (the thread is in "
                              "X-Thread-Id), then continue the thread", "approval_required")
    if outcome == "cancelled" or stop_reason == "cancelled":
        return DoorError(409, f"the turn was cancelled before it answered{': ' + error if error else ''}", "cancelled")
    failure = turn_failure(outcome, stop_reason, error, payload, has_text)
    if failure is None:
        return None
    headers = None if failure.retry_after is None else {"Retry-After": str(max(1, round(failure.retry_after)))}
    return DoorError(failure.status, failure.message, failure.code, headers=headers)


def _sampling(body: dict[str, Any]) -> dict[str, Any]:
    """Refuse what the door cannot honour (400 saying so); collect the sampling settings
    passed on to the agent's model."""
    n = body.get("n")
    if n is not None and n != 1:
        raise DoorError(400, "n must be 1: the agent answers each request with one turn, so one choice", param="n")
    if body.get("logprobs") or body.get("top_logprobs") is not None:
        raise DoorError(400, "logprobs are not available: an agent's answer spans several model calls",
                        param="logprobs")
    out: dict[str, Any] = {}
    for name, low, high in (("temperature", 0.0, 2.0), ("top_p", 0.0, 1.0)):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise DoorError(400, f"{name} must be a number from {low:g} to {high:g}", param=name)
        out[name] = value
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DoorError(400, f"{name} must be a whole number of at least 1", param=name)
        out.setdefault("max_tokens", value)
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if not isinstance(stops, list) or not all(isinstance(x, str) and x for x in stops) or len(stops) > 4:
            raise DoorError(400, "stop must be a string or a list of up to 4 strings", param="stop")
        if stops:
            out["stop"] = stops
    seed = body.get("seed")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise DoorError(400, "seed must be a whole number", param="seed")
        out["seed"] = seed
    return out


def _usage(raw: dict[str, int] | None, subagents: dict[str, int] | None = None) -> dict[str, Any]:
    """The turn's usage (summed over every model call of the turn) in OpenAI's shape; what
    its subagents spent is apart, under ``subagents`` (a key OpenAI's clients keep as an
    extra), only when there is some."""
    usage = raw or {}
    prompt = int(usage.get("prompt_tokens", 0))
    completion = int(usage.get("completion_tokens", 0))
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": int(usage.get("total_tokens") or prompt + completion)}
    if usage.get("cached_tokens"):
        out["prompt_tokens_details"] = {"cached_tokens": int(usage["cached_tokens"])}
    if usage.get("reasoning_tokens"):
        out["completion_tokens_details"] = {"reasoning_tokens": int(usage["reasoning_tokens"])}
    if subagents:
        out["subagents"] = _usage(subagents)
    return out


async def begin_turn(request: Request, thread_id: str, waiting: Any, results: dict[str, str],
                     turn: TurnRequest, sub: Any) -> tuple[asyncio.Task[Any], str]:
    """Start the door's ``turn``, or continue the one ``waiting`` for these client tool
    results with the turn's options; the turn is kept past the request and ``sub`` is closed
    if starting fails. Both doors (Chat Completions and Responses) begin their turns here."""
    rt = server_of(request).runtime
    try:
        if waiting is not None:
            execution_id = waiting.id
            task = await rt.resume_with_results(waiting.id, results, turn.turn_options())
        else:
            started = await rt.begin(thread_id, turn)
            execution_id, task = started.id, started.task
    except BaseException:
        if sub is not None:
            sub.close()
        raise
    from .api import _keep

    _keep(request, task)
    return task, execution_id


def client_tools_of(body: dict[str, Any]) -> ClientTools | None:
    """The request's ``tools``, ``tool_choice`` and ``parallel_tool_calls`` as the turn's
    client tools (None when it sends none of them)."""
    if body.get("tools") is None and body.get("tool_choice") is None and body.get("parallel_tool_calls") is None:
        return None
    return client_tools(body.get("tools"), body.get("tool_choice"), body.get("parallel_tool_calls"))


def tool_results(messages: list[dict[str, Any]]) -> dict[str, str]:
    """The trailing ``tool`` messages of a request: call id -> result text."""
    out: dict[str, str] = {}
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise ApiError(400, "a tool message needs its tool_call_id")
        out[call_id] = _text_of(message.get("content")) or ""
    return dict(reversed(out.items()))


def _request_messages(messages: list[Any]) -> tuple[list[Message], str | None]:
    """The messages before the last (as messages to store) and the last one's text; a
    conversation ending with tool results is all history (the agent answers them)."""
    last = messages[-1]
    if last.get("role") == "tool":
        return [to_message("", m, i) for i, m in enumerate(messages)], None
    if last.get("role") != "user":
        raise ApiError(422, "field 'messages' must end with a user message or tool results: the agent answers "
                            "the last message")
    user_text = _text_of(last.get("content"))
    if user_text is None:
        raise ApiError(422, "field 'messages' needs a user message with text content")
    return [to_message("", m, i) for i, m in enumerate(messages[:-1])], user_text


async def store_history(request: Request, thread_id: str, earlier: list[Message], named: bool) -> None:
    """Store the request's earlier messages the thread does not hold yet (see openai_history).

    ``named``: the client continues a thread it named (or a stored response's): only the
    messages the thread lacks are added, and none while a turn runs there (409), since the
    running turn's history must not change under it."""
    rt = server_of(request).runtime
    if named:
        earlier = new_history(await rt.store.list_messages(thread_id), earlier)
        if earlier and rt.is_running(thread_id):
            raise ApiError(409, f"thread {thread_id!r} is running a turn: its history cannot change now; "
                                "send only the new message or wait for the turn to end")
    if not earlier:
        return
    for message in earlier:
        message.thread_id = thread_id
    await rt.create_messages(await rt.state(thread_id), earlier)


async def new_thread_with_history(request: Request, agent: str, user_id: str, earlier: list[Message]) -> ThreadRecord:
    """A new thread of ``agent`` holding the request's earlier messages; a history that cannot
    be stored leaves no thread behind."""
    rt = server_of(request).runtime
    caller = await authenticate(request)  # verified a moment ago: answered from the cache
    metadata = await thread_metadata(rt, caller, agent, {"source": "openai"})
    thread = await rt.create_thread(agent, user_id=user_id, metadata=metadata)
    try:
        await store_history(request, thread.id, earlier, named=False)
    except BaseException:
        await rt.store.delete_thread(thread.id)
        raise
    return thread


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
    sampling = _sampling(body)
    client = client_tools_of(body)
    earlier, user_text = _request_messages(messages)
    output_type = _response_format(body.get("response_format"))
    thread_id = body.get("thread") or request.headers.get("x-thread-id")
    if thread_id is not None and not isinstance(thread_id, str):
        raise ApiError(422, "field 'thread' must be a thread id string")
    stream_options = body.get("stream_options")
    if stream_options is not None and not isinstance(stream_options, dict):
        raise ApiError(400, "field 'stream_options' must be an object")
    include_usage = bool((stream_options or {}).get("include_usage"))
    if not await _primary(request, model):
        raise ApiError(404, f"unknown model {model!r}: the model is an agent name (see GET /v1/models)",
                       code="model_not_found")
    if client is not None:
        await _check_client_tools(request, model, client)
    results = tool_results(messages) if user_text is None else {}
    waiting = await rt.waiting_for_tool_results(list(results), thread_id) if results else None
    if waiting is not None:
        # the results the paused turn waits for: the same turn goes on
        thread = await require_thread(request, waiting.thread_id, caller)
        if rt.registry.find("agents", thread.agent, thread.package) is not rt.registry.find("agents", model):
            raise ApiError(422, f"the turn waiting for these tool results belongs to another agent than {model!r}")
    elif thread_id:
        thread = await require_thread(request, thread_id, caller)
        owner = rt.registry.find("agents", thread.agent, thread.package)
        if owner is None or rt.registry.find("agents", model) is not owner:
            name = rt.registry.public_name(owner) if owner is not None else thread.agent
            raise ApiError(422, f"thread {thread_id!r} belongs to agent {name!r}, not {model!r}")
        await store_history(request, thread.id, earlier, named=True)
    else:
        thread = await new_thread_with_history(request, model, caller.id, earlier)
    cid = new_id("chatcmpl-")
    created = int(time.time())
    headers = {"X-Thread-Id": thread.id}
    sub = rt.subscribe(thread.id, reasoning=False, maxsize=server.stream_buffer) if body.get("stream") else None
    turn = TurnRequest(content=user_text, output_type=output_type, sampling=sampling or None, client_tools=client)
    task, execution_id = await begin_turn(request, thread.id, waiting, results, turn, sub)
    if sub is None:
        result = await task
        if result.outcome == "output_invalid":
            raise ApiError(502, f"the agent's answer did not match response_format: {result.error}",
                           code="agent_error")
        failure = _turn_error(result.outcome, result.stop_reason, result.error, result.payload, bool(result.text))
        if failure is not None:
            raise failure
        # a typed answer is its JSON (whatever way the agent's model produced it)
        content: str | None = json.dumps(to_jsonable(result.value)) \
            if output_type is not None and result.value is not None else result.text or ""
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if result.outcome == "client_tool_calls":
            calls = (result.payload or {}).get("toolCalls", [])
            message = {"role": "assistant", "content": result.text or None, "tool_calls": [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls]}
        return JSONResponse({
            "id": cid, "object": "chat.completion", "created": created, "model": model, "thread": thread.id,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": _finish(result.stop_reason, result.outcome)}],
            "usage": _usage(result.usage, result.subagent_usage),
        }, headers=headers)
    events = turn_events(sub, task, rt, thread.id, execution_id)
    # hold the response until the turn says something: a turn that fails before its first
    # token is answered with its real status, not a 200 stream
    first: list[Any] = []
    async for event in events:
        first.append(event)
        if (event.type == "message_chunk" and event.data.get("delta")) or event.type == "done":
            break
    if first and first[-1].type == "done":
        data = first[-1].data
        failure = _turn_error(data.get("outcome"), data.get("stopReason"), data.get("error"), data.get("payload"),
                              any(e.type == "message_chunk" for e in first))
        if failure is not None:
            sub.close()
            raise failure

    async def replay() -> AsyncIterator[Any]:
        for event in first:
            yield event
        async for event in events:
            yield event

    async def frames() -> AsyncIterator[bytes]:
        yield _chunk(cid, model, created, {"role": "assistant", "content": ""}, None, thread.id)
        finish = "stop"
        spoke = False
        async for event in replay():
            if event.type == "message_chunk" and event.data.get("delta"):
                spoke = True
                yield _chunk(cid, model, created, {"content": event.data["delta"]}, None, thread.id)
            elif event.type == "done":
                data = event.data
                failure = _turn_error(data.get("outcome"), data.get("stopReason"), data.get("error"),
                                      data.get("payload"), spoke)
                if failure is not None:
                    # OpenAI's way to fail a stream already under way: an error object, then the end
                    yield _frame(_error_object(failure))
                    return
                finish = _finish(data.get("stopReason"), data.get("outcome"))
                for i, call in enumerate(data.get("toolCalls") or () if finish == "tool_calls" else ()):
                    yield _chunk(cid, model, created, {"tool_calls": [{
                        "index": i, "id": call["id"], "type": "function",
                        "function": {"name": call["name"], "arguments": ""}}]}, None, thread.id)
                    yield _chunk(cid, model, created, {"tool_calls": [{
                        "index": i, "function": {"arguments": call["arguments"]}}]}, None, thread.id)
        yield _chunk(cid, model, created, {}, finish, thread.id)
        if include_usage:
            result = await task
            yield _frame({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                          "thread": thread.id, "choices": [], "usage": _usage(result.usage, result.subagent_usage)})
        yield b"data: [DONE]\n\n"

    return StreamingResponse(frames(), media_type="text/event-stream",
                             headers={**headers, "Cache-Control": "no-cache"})


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
    from .openai_responses import create_response, get_response

    return [
        Route("/v1/models", _openai_errors(list_models), methods=["GET"]),
        Route("/v1/chat/completions", _openai_errors(chat_completions), methods=["POST"]),
        Route("/v1/responses", _openai_errors(create_response), methods=["POST"]),
        Route("/v1/responses/{response_id}", _openai_errors(get_response), methods=["GET"]),
    ]
