"""The REST API: agents, threads, messages, executions, files, logs and user values.

Every route answers JSON (errors as ``{"error": {"code", "message"}}``) and checks the caller
first (401), then the thread (404), then the thread access policy (403).
"""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
import os
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..costs import UsageTotals, summarize
from ..definitions.limits import usage_limits
from ..engine.busy import BUSY_POLICIES
from ..engine.client_tools import forget_thread
from ..engine.options import TurnRequest
from ..engine.output import output_spec
from ..engine.steps import execution_summary, load_execution
from ..exceptions import DefinitionError, StandardAgentsError
from ..files import check_regex
from ..records import FileRecord, ThreadRecord, new_id
from ..store.base import UserRecord
from ..store.checks import INT64_MAX, check_text
from .auth import authenticate, caller_dict, require_thread
from .authorization import (
    agent_listed,
    handler_of,
    list_scoped_threads,
    tenant_rows,
    thread_metadata,
    thread_scope,
)
from .errors import ApiError, JSONResponse, read_json
from .forks import fork_thread, rename_thread
from .openapi import openapi_document
from .reruns import overrides_allowed, rerun_step
from .runtime_view import runtime_view
from .state import server_of
from .steps_api import step_routes
from .streams import (
    sse_encode,
    sse_response,
    thread_stream,
    thread_ws,
    turn_batches,
    user_stream,
    user_ws,
)
from .traces import trace_link
from .webhooks_api import subscribe_run

__all__ = ["WORKER_HEADER", "WorkerHeaderMiddleware", "api_routes", "file_dict", "thread_dict"]

#: names the server process that answered (several workers share one port)
WORKER_HEADER = "X-Standardagents-Worker"

_MAX_LIMIT = 500


class WorkerHeaderMiddleware:
    """Adds :data:`WORKER_HEADER` (the worker's pid) to every HTTP response, so a client or
    an operator can tell which of several workers answered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.value = str(os.getpid()).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (WORKER_HEADER.lower().encode(), self.value)]
            await send(message)

        await self.app(scope, receive, tagged)


def thread_dict(thread: ThreadRecord, running: bool | None = None) -> dict[str, Any]:
    data = thread.to_dict()
    if running is not None:
        data["running"] = running
    return data


def file_dict(record: FileRecord) -> dict[str, Any]:
    return {"path": record.path, "size": record.size, "mimeType": record.mime_type,
            "metadata": dict(record.metadata), "createdAt": record.created_at, "updatedAt": record.updated_at}


def _int_param(request: Request, name: str, default: int, low: int, high: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(422, f"query parameter {name!r} must be an integer (got {raw[:40]!r})") from None
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise ApiError(400, f"query parameter {name!r} does not fit in a 64-bit integer")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ApiError(422, f"query parameter {name!r} must be {bound} (got {value})")
    return value


def _flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name)
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in ("", "1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ApiError(422, f"query parameter {name!r} must be true or false (got {raw!r})")


# agents --------------------------------------------------------------------------------------
async def list_agents(request: Request) -> Response:
    """Agents a client may start threads with; ``primary: false`` ones only with ``?all=true``."""
    caller = await authenticate(request)
    rt = server_of(request).runtime
    show_all = _flag(request, "all")
    handled = handler_of(rt) is not None
    agents = []
    for entry in rt.registry.entries("agents"):
        agent = await rt.registry.aget("agents", entry.name, entry.package)
        if not agent.primary and not show_all:
            continue
        if handled and not await agent_listed(rt, caller, rt.registry.public_name(entry)):
            continue
        # a packed agent sharing a project agent's name is listed (and started) as "package/name"
        agents.append({"name": rt.registry.public_name(entry), "type": agent.type, "description": agent.description,
                       "primary": agent.primary, "package": entry.package,
                       "exposeAsTool": bool(getattr(agent, "expose_as_tool", False)),
                       "sides": {key: side.label for key, side in (("a", agent.side_a), ("b", agent.side_b))
                                 if side is not None and side.label}})
    agents.sort(key=lambda a: a["name"])
    return JSONResponse({"agents": agents})


# threads -------------------------------------------------------------------------------------
def _optional_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise ApiError(422, f"field {key!r} must be a string")
    return value


async def create_thread(request: Request) -> Response:
    caller = await authenticate(request)
    body = await read_json(request)
    rt = server_of(request).runtime
    agent = body.get("agent", body.get("agent_id", body.get("agentId")))
    if not isinstance(agent, str) or not agent:
        raise ApiError(422, "field 'agent' is required: the name of the agent to talk to (GET /api/agents lists them)")
    if not rt.registry.has("agents", agent):
        raise ApiError(422, f"field 'agent': unknown agent {agent!r}; known: {', '.join(rt.registry.names('agents'))} "
                            "(GET /api/agents lists them)")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ApiError(422, "field 'metadata' must be an object")
    title = _optional_str(body, "title")
    owner = _optional_str(body, "user_id") or _optional_str(body, "userId") or caller.id
    if owner != caller.id and not caller.is_admin:
        raise ApiError(403, "only an admin may create threads for another user")
    metadata = await thread_metadata(rt, caller, agent, metadata)
    thread = await rt.create_thread(agent, user_id=owner, title=title, metadata=metadata)
    return JSONResponse(thread_dict(thread, False), status_code=201)


async def list_threads(request: Request) -> Response:
    caller = await authenticate(request)
    rt = server_of(request).runtime
    limit = _int_param(request, "limit", 50, 1, _MAX_LIMIT)
    offset = _int_param(request, "offset", 0, 0)
    user = request.query_params.get("user") or request.query_params.get("user_id")
    scope = await thread_scope(rt, caller, user)
    threads = await list_scoped_threads(rt, scope, agent=request.query_params.get("agent") or None,
                                        top_level=_flag(request, "top_level"), limit=limit, offset=offset)
    running = await rt.running_threads([t.id for t in threads])
    return JSONResponse({"threads": [thread_dict(t, t.id in running) for t in threads],
                         "limit": limit, "offset": offset})


async def get_thread(request: Request) -> Response:
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    rt = server_of(request).runtime
    running = await rt.running_threads([thread.id])
    data = thread_dict(thread, thread.id in running)
    rows = await rt.store.list_usage(thread_id=thread.id)
    data["usage"] = summarize(rows, None)[0] if rows else UsageTotals().to_dict()
    return JSONResponse(data)


async def list_executions(request: Request) -> Response:
    """``GET .../executions``: the thread's executions, each with its outcome, usage and cost."""
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    records = await server_of(request).runtime.store.list_executions(thread_id=thread.id)
    return JSONResponse({"executions": [execution_summary(r) for r in sorted(records, key=lambda r: r.created_at)]})


async def list_subagents(request: Request) -> Response:
    """``GET .../subagents``: the subagent runs the thread started, oldest first, each naming
    its child thread, so a client can show a child's conversation inside the parent's turn."""
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    links = await server_of(request).runtime.store.list_subagents(thread.id)
    return JSONResponse({"subagents": [
        {"id": link.id, "childThreadId": link.child_thread_id, "agent": link.agent, "status": link.status,
         "createdAt": link.created_at, "updatedAt": link.updated_at} for link in links]})


async def get_execution(request: Request) -> Response:
    """``GET /api/executions/{id}``: one execution with its steps (model calls with the tool
    calls they asked for), usage, cost, timings and trace id; readable by whoever may read
    its thread. ``traceUrl`` links the trace id to the tracing UI when a template is set
    (:mod:`.traces`); ``rerunOverrides`` says whether the caller may re-run its steps with
    another model or system prompt (:mod:`.reruns`)."""
    caller = await authenticate(request)
    execution_id = request.path_params["execution_id"]
    store = server_of(request).runtime.store
    check_text("execution id", execution_id)
    record = await store.get_execution(execution_id)
    if record is None:
        raise ApiError(404, f"unknown execution {execution_id!r}")
    thread = await require_thread(request, record.thread_id, caller)
    detail = await load_execution(store, record)
    detail["traceUrl"] = trace_link(detail.get("traceId"))
    detail["rerunOverrides"] = await overrides_allowed(request, caller, thread)
    return JSONResponse(detail)


_USAGE_GROUPS = ("agent", "model", "user", "day")


def _time_param(request: Request, name: str) -> int | None:
    """Epoch milliseconds, or an ISO date/time (UTC when it has no zone)."""
    raw = request.query_params.get(name)
    if not raw:
        return None
    if raw.isdigit():
        if int(raw) > 2**63 - 1:
            raise ApiError(422, f"query parameter '{name}' is beyond 64-bit epoch milliseconds")
        return int(raw)
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise ApiError(422, f"query parameter '{name}' must be epoch milliseconds or an ISO date") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


async def usage_summary(request: Request) -> Response:
    """``GET /api/usage``: tokens and cost summed (``by`` agent, model, user or day), filtered
    by ``agent``, ``model``, ``user``, ``thread``, ``since`` and ``until``. Callers who are
    not admins see only their own threads."""
    caller = await authenticate(request)
    params = request.query_params
    by = params.get("by") or None
    if by is not None and by not in _USAGE_GROUPS:
        raise ApiError(422, f"query parameter 'by' must be one of {', '.join(_USAGE_GROUPS)}")
    user = params.get("user") or params.get("user_id") or None
    if not caller.is_admin:
        if user is not None and user != caller.id:
            raise ApiError(403, "you may only see your own usage")
        user = caller.id
    thread_id = params.get("thread") or None
    if thread_id is not None:
        await require_thread(request, thread_id, caller)
    rows = await server_of(request).runtime.store.list_usage(
        thread_id=thread_id, user_id=user, agent=params.get("agent") or None,
        since=_time_param(request, "since"), until=_time_param(request, "until"))
    rows = await tenant_rows(server_of(request).runtime, caller, rows)
    model = params.get("model")
    if model:
        rows = [r for r in rows if r.get("model") == model]
    return JSONResponse({"total": summarize(rows, None)[0] if rows else UsageTotals().to_dict(),
                         "by": by, "groups": summarize(rows, by) if by else []})


async def delete_thread(request: Request) -> Response:
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    rt = server_of(request).runtime
    # a running turn (on this worker or another) is stopped first, so nothing writes into
    # the deleted thread; one that does not stop in time refuses the delete
    await rt.stop(thread.id)
    if await rt.running_threads([thread.id]):
        raise ApiError(409, f"thread {thread.id} is running a turn that did not stop; try again", code="thread_busy")
    await forget_thread(rt, thread.id)
    await rt.store.delete_thread(thread.id)
    return Response(status_code=204)


# messages ------------------------------------------------------------------------------------
async def list_messages(request: Request) -> Response:
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    rt = server_of(request).runtime
    limit = _int_param(request, "limit", 100, 1, _MAX_LIMIT)
    offset = _int_param(request, "offset", 0, 0)
    include_silent = _flag(request, "include_silent")
    messages = await rt.store.list_messages(thread.id, limit=limit, offset=offset, include_silent=include_silent)
    total = await rt.store.count_messages(thread.id, include_silent=include_silent)
    return JSONResponse({"messages": [m.to_dict() for m in messages], "total": total,
                         "limit": limit, "offset": offset})


def _message_input(body: dict[str, Any], execution_id: str) -> TurnRequest:
    """The turn a message body asks for, as execution ``execution_id`` (every field checked:
    a bad one is a 422)."""
    content = body.get("content")
    if content is not None and not isinstance(content, str):
        raise ApiError(422, "field 'content' must be a string")
    attachments = body.get("attachments")
    if attachments is not None and (not isinstance(attachments, list) or not all(isinstance(a, dict) for a in attachments)):
        raise ApiError(422, "field 'attachments' must be a list of objects")
    parts = body.get("parts")
    if parts is not None and (not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts)):
        raise ApiError(422, "field 'parts' must be a list of objects")
    if content is None and not attachments and not parts:
        raise ApiError(422, "field 'content' is required (or send 'attachments' / 'parts')")
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ApiError(422, "field 'metadata' must be an object")
    silent = body.get("silent", False)
    if not isinstance(silent, bool):
        raise ApiError(422, "field 'silent' must be true or false")
    busy = body.get("busy")
    if busy is not None and busy not in BUSY_POLICIES:
        raise ApiError(422, f"field 'busy' must be one of {', '.join(BUSY_POLICIES)}")
    output = _output_input(body)
    return TurnRequest(content=content, attachments=attachments, parts=parts, metadata=metadata, silent=silent,
                       busy=busy, output_type=output["output_type"], output_retries=output["output_retries"],
                       usage_limits=output["usage_limits"], execution_id=execution_id)


def _output_input(body: dict[str, Any]) -> dict[str, Any]:
    """``outputType`` (a JSON Schema the turn's answer must match), ``outputRetries`` and
    ``usageLimits`` (what the turn may spend)."""
    schema = body.get("outputType", body.get("output_type"))
    retries = body.get("outputRetries", body.get("output_retries"))
    if schema is not None:
        if not isinstance(schema, dict):
            raise ApiError(422, "field 'outputType' must be a JSON Schema object")
        try:
            output_spec(schema)
        except StandardAgentsError as exc:
            raise ApiError(422, f"field 'outputType': {exc}") from exc
    if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int) or retries < 0):
        raise ApiError(422, "field 'outputRetries' must be a whole number of at least 0")
    limits = body.get("usageLimits", body.get("usage_limits"))
    if limits is not None:
        if not isinstance(limits, dict):
            raise ApiError(422, "field 'usageLimits' must be an object of limits")
        try:
            usage_limits(limits)
        except DefinitionError as exc:
            raise ApiError(422, f"field 'usageLimits': {exc}") from exc
    return {"output_type": schema, "output_retries": retries, "usage_limits": limits}


def _keep(request: Request, task: asyncio.Task[Any]) -> None:
    """Hold a reference to a background execution and consume its outcome."""
    tasks: set[asyncio.Task[Any]] = server_of(request).extra.setdefault("tasks", set())
    tasks.add(task)

    def finished(t: asyncio.Task[Any]) -> None:
        tasks.discard(t)
        if not t.cancelled():
            t.exception()

    task.add_done_callback(finished)


async def _until_started(sub: Any, task: asyncio.Task[Any], execution_id: str) -> bool:
    """Wait until the message is durable: its execution stored it and started (or ended
    early), or it was stored in the thread's inbox behind a busy turn (here or on another
    worker; True: queued). A 202 never waits for another turn to end."""
    while not task.done():
        getter = asyncio.ensure_future(sub.queue.get())
        done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
        if getter not in done:
            getter.cancel()
            with contextlib.suppress(BaseException):
                await getter
            return False
        event = getter.result()
        if event.data.get("executionId") != execution_id:
            continue
        if event.type == "message_queued":
            return True
        if event.type in ("execution_started", "done"):
            return False
    return False


async def send_message(request: Request) -> Response:
    """Start (or queue) an execution with a new message: 202 with its id, the reply as SSE with
    ``?stream=true``, or the finished result with ``?wait=true``."""
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    body = await read_json(request)
    execution_id = new_id("exe_")
    turn_request = _message_input(body, execution_id)
    stream, wait = _flag(request, "stream"), _flag(request, "wait")
    if stream and wait:
        raise ApiError(422, "choose one of ?stream=true and ?wait=true")
    server = server_of(request)
    rt = server.runtime
    # ``webhook``: a subscription to this execution's events alone (removed if it does not start)
    hook, unsubscribe = await subscribe_run(request, caller, thread.id, execution_id, body.get("webhook"))
    subscribed = {"webhook": hook.to_dict(secret=True)} if hook is not None else {}
    if wait:
        try:
            task = (await rt.begin(thread, turn_request)).task
        except BaseException:
            await unsubscribe()
            raise
        _keep(request, task)
        await asyncio.wait({task})
        if task.cancelled() and rt.draining:
            # handed over at shutdown: another worker finishes the turn under the same id
            raise ApiError(503, f"this worker shut down before the turn ended; another worker finishes it as execution "
                                f"{execution_id}: follow the thread's stream or GET {server.prefix}/executions/{execution_id}",
                           "shutting_down", headers={"Retry-After": "1"})
        result = task.result()
        return JSONResponse({**result.to_dict(), **subscribed})
    from .streams import wants_reasoning

    sub = rt.subscribe(thread.id, reasoning=wants_reasoning(request), maxsize=server.stream_buffer)
    try:
        task = (await rt.begin(thread, turn_request)).task
    except BaseException:
        sub.close()
        await unsubscribe()
        raise
    _keep(request, task)
    if stream:
        async def frames() -> Any:
            # the events waiting together go out in one write
            async for batch in turn_batches(sub, task, rt, thread.id, execution_id):
                yield b"".join(map(sse_encode, batch))

        return sse_response(frames(), headers={"X-Thread-Id": thread.id}, on_close=sub.close)
    try:
        queued = await _until_started(sub, task, execution_id)
    finally:
        sub.close()
    prefix = server.prefix
    return JSONResponse({"threadId": thread.id, "executionId": execution_id, "queued": queued, "status": "accepted",
                         **subscribed}, status_code=202, headers={"Location": f"{prefix}/threads/{thread.id}/stream"})


async def stop_thread(request: Request) -> Response:
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    # the turn may run on another worker: it is asked through the store's relay
    stopped = await server_of(request).runtime.stop(thread.id)
    return JSONResponse({"threadId": thread.id, "stopped": stopped})


async def cancel_execution(request: Request) -> Response:
    """``POST /api/executions/{id}/cancel``: cancel that turn only (queued, running on any
    worker, or waiting), never another turn of its thread; ``cancelled`` is false when it had
    already ended."""
    caller = await authenticate(request)
    execution_id = request.path_params["execution_id"]
    check_text("execution id", execution_id)
    runtime = server_of(request).runtime
    thread_id = await runtime.execution_thread(execution_id)
    if thread_id is None:
        raise ApiError(404, f"unknown execution {execution_id!r}")
    thread = await require_thread(request, thread_id, caller)
    cancelled = await runtime.cancel(execution_id)
    return JSONResponse({"executionId": execution_id, "threadId": thread.id, "cancelled": cancelled})


# approvals -----------------------------------------------------------------------------------
async def list_approvals(request: Request) -> Response:
    """``GET .../approvals``: the calls waiting for a decision, each with its resume token."""
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    return JSONResponse({"approvals": await server_of(request).runtime.pending_approvals(thread.id)})


async def decide_approval(request: Request) -> Response:
    """``POST .../approvals`` with ``{"token", "approved": bool, "reason"?}``: approve or deny a
    paused call; the last decision continues the same execution (202 with its id)."""
    from ..engine.approvals import ApprovalError

    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    body = await read_json(request)
    token = body.get("token")
    approved = body.get("approved")
    if not isinstance(token, str) or not token:
        raise ApiError(422, "send the approval's resume token as 'token'")
    if not isinstance(approved, bool):
        raise ApiError(422, "send 'approved': true or false")
    reason = body.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ApiError(422, "'reason' must be a string")
    try:
        task = await server_of(request).runtime.decide(token, approved, reason=reason, thread_id=thread.id)
    except ApprovalError as exc:
        raise ApiError(403, str(exc), code="invalid_approval") from exc
    if task is None:
        return JSONResponse({"threadId": thread.id, "resumed": False, "status": "recorded"})
    _keep(request, task)
    return JSONResponse({"threadId": thread.id, "resumed": True, "status": "accepted"}, status_code=202)


# effects -------------------------------------------------------------------------------------
def effect_dict(e: Any) -> dict[str, Any]:
    return {"id": e.id, "threadId": e.thread_id, "name": e.name, "args": e.args, "runAt": e.run_at,
            "status": e.status, "attempts": e.attempts, "lastError": e.last_error, "result": e.result,
            "createdAt": e.created_at, "updatedAt": e.updated_at}


async def list_effects(request: Request) -> Response:
    """``GET .../effects``: the thread's scheduled effects (``?status=`` filters)."""
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    status = request.query_params.get("status") or None
    effects = await server_of(request).runtime.store.list_effects(thread_id=thread.id, status=status)
    return JSONResponse({"effects": [effect_dict(e) for e in effects]})


async def cancel_effect(request: Request) -> Response:
    """``POST {prefix}/effects/{id}/cancel``: cancel a pending effect (409 once it ran)."""
    caller = await authenticate(request)
    store = server_of(request).runtime.store
    effect = await store.get_effect(request.path_params["effect_id"])
    if effect is None:
        raise ApiError(404, f"unknown effect {request.path_params['effect_id']!r}")
    await require_thread(request, effect.thread_id, caller)
    if not await store.cancel_effect(effect.id):
        raise ApiError(409, f"effect {effect.id} is {effect.status} and can no longer be cancelled")
    return JSONResponse(effect_dict(await store.get_effect(effect.id)))


# files and logs ------------------------------------------------------------------------------
def _file_path(request: Request) -> str:
    """The request's file path, canonical (as the store keeps it); 422 for an empty path or
    one with empty, ``.`` or ``..`` segments."""
    from ..files import canonical_path

    path = request.path_params["path"].strip("/")
    if not path or any(part in ("", ".", "..") for part in path.split("/")):
        raise ApiError(422, f"invalid file path {request.path_params['path']!r}")
    return canonical_path(path)


async def list_files(request: Request) -> Response:
    """The thread's files; ``?dir=`` lists one directory, ``?glob=`` finds by path pattern,
    ``?grep=`` searches lines by regex (narrowed by ``glob``)."""
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    store = server_of(request).runtime.store
    query = request.query_params
    limit = _int_param(request, "limit", 1000, 1, 10_000)
    if "grep" in query:
        pattern = query["grep"]
        try:
            check_regex(pattern)
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None
        grep = await store.grep_files(thread.id, pattern, ignore_case=_flag(request, "ignoreCase"),
                                      glob=query.get("glob") or None, max_matches=limit)
        return JSONResponse(grep.to_dict())
    if "glob" in query:
        found = await store.find_files(thread.id, query["glob"], limit=limit)
        return JSONResponse(found.to_dict())
    if "dir" in query:
        listing = await store.readdir(thread.id, query["dir"])
        if listing is None:
            raise ApiError(404, f"thread {thread.id!r} has no directory {query['dir']!r}")
        return JSONResponse(listing.to_dict())
    prefix = query.get("prefix", "")
    files = await store.list_files(thread.id, prefix)
    return JSONResponse({"files": [file_dict(f) for f in files]})


async def get_file(request: Request) -> Response:
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    path = _file_path(request)
    store = server_of(request).runtime.store
    if _flag(request, "stat"):
        stats = await store.stat_path(thread.id, path)
        if stats is None:
            raise ApiError(404, f"thread {thread.id!r} has no file or directory {path!r}")
        return JSONResponse(stats.to_dict())
    if "offset" in request.query_params or "length" in request.query_params:
        offset = _int_param(request, "offset", 0, 0, 1 << 62)
        length = _int_param(request, "length", 1 << 20, 1, 64 << 20)
        chunk = await store.read_file_chunk(thread.id, path, offset, length)
        if chunk is None:
            raise ApiError(404, f"thread {thread.id!r} has no file {path!r}")
        return Response(chunk.data, media_type="application/octet-stream",
                        headers={"X-File-Size": str(chunk.size), "X-Chunk-Offset": str(offset),
                                 "X-Chunk-EOF": "true" if chunk.eof else "false"})
    record = await store.stat_file(thread.id, path)
    data = await store.read_file(thread.id, path) if record is not None else None
    if record is None or data is None:
        raise ApiError(404, f"thread {thread.id!r} has no file {path!r}")
    media = record.mime_type or mimetypes.guess_type(path)[0] or "application/octet-stream"
    return Response(data, media_type=media)


async def put_file(request: Request) -> Response:
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    path = _file_path(request)
    data = await request.body()
    ctype = request.headers.get("content-type")
    mime = ctype.split(";")[0].strip() if ctype else (mimetypes.guess_type(path)[0] or "application/octet-stream")
    store = server_of(request).runtime.store
    existed = await store.stat_file(thread.id, path) is not None
    record = await store.write_file(thread.id, path, data, mime_type=mime)
    return JSONResponse(file_dict(record), status_code=200 if existed else 201)


async def list_logs(request: Request) -> Response:
    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    limit = _int_param(request, "limit", 100, 1, _MAX_LIMIT)
    offset = _int_param(request, "offset", 0, 0)
    logs = await server_of(request).runtime.store.list_logs(thread.id, limit=limit, offset=offset)
    return JSONResponse({"logs": [{"id": r.id, "level": r.level, "message": r.message, "data": r.data,
                                   "createdAt": r.created_at} for r in logs], "limit": limit, "offset": offset})


# users ---------------------------------------------------------------------------------------
async def me(request: Request) -> Response:
    caller = await authenticate(request)
    return JSONResponse(caller_dict(caller))


def _key(request: Request) -> str:
    key = request.path_params["key"]
    if not key or len(key) > 200:
        raise ApiError(422, "a value key is 1 to 200 characters")
    return str(key)


async def list_values(request: Request) -> Response:
    caller = await authenticate(request)
    return JSONResponse({"values": await server_of(request).runtime.store.list_user_values(caller.id)})


async def get_value(request: Request) -> Response:
    caller = await authenticate(request)
    key = _key(request)
    values = await server_of(request).runtime.store.list_user_values(caller.id)
    if key not in values:
        raise ApiError(404, f"you have no value {key!r}")
    return JSONResponse({"key": key, "value": values[key]})


async def put_value(request: Request) -> Response:
    caller: UserRecord = await authenticate(request)
    key = _key(request)
    body = await read_json(request)
    if "value" not in body:
        raise ApiError(422, "send {\"value\": ...}")
    await server_of(request).hub.set_value(caller, key, body["value"])
    return JSONResponse({"key": key, "value": body["value"]})


async def delete_value(request: Request) -> Response:
    caller = await authenticate(request)
    key = _key(request)
    if not await server_of(request).hub.delete_value(caller, key):
        raise ApiError(404, f"you have no value {key!r}")
    return Response(status_code=204)


async def openapi(request: Request) -> Response:
    return JSONResponse(openapi_document(server_of(request).prefix))


def api_routes(prefix: str) -> list[BaseRoute]:
    """The built-in routes, mounted before the project's own endpoints so they take precedence."""
    p = prefix
    t = f"{p}/threads/{{thread_id}}"
    return [
        Route(f"{p}/openapi.json", openapi, methods=["GET"]),
        Route(f"{p}/agents", list_agents, methods=["GET"]),
        Route(f"{p}/threads", list_threads, methods=["GET"]),
        Route(f"{p}/threads", create_thread, methods=["POST"]),
        Route(t, get_thread, methods=["GET"]),
        Route(t, delete_thread, methods=["DELETE"]),
        Route(t, rename_thread, methods=["PATCH"]),
        Route(f"{t}/fork", fork_thread, methods=["POST"]),
        Route(f"{t}/messages", list_messages, methods=["GET"]),
        Route(f"{t}/executions", list_executions, methods=["GET"]),
        Route(f"{t}/subagents", list_subagents, methods=["GET"]),
        Route(f"{p}/executions/{{execution_id}}", get_execution, methods=["GET"]),
        Route(f"{p}/executions/{{execution_id}}/cancel", cancel_execution, methods=["POST"]),
        Route(f"{p}/executions/{{execution_id}}/steps/{{n:int}}/rerun", rerun_step, methods=["POST"]),
        *step_routes(p),
        Route(f"{p}/usage", usage_summary, methods=["GET"]),
        Route(f"{p}/runtime", runtime_view, methods=["GET"]),
        Route(f"{t}/messages", send_message, methods=["POST"]),
        Route(f"{t}/stop", stop_thread, methods=["POST"]),
        Route(f"{t}/approvals", list_approvals, methods=["GET"]),
        Route(f"{t}/effects", list_effects, methods=["GET"]),
        Route(f"{p}/effects/{{effect_id}}/cancel", cancel_effect, methods=["POST"]),
        Route(f"{t}/approvals", decide_approval, methods=["POST"]),
        Route(f"{t}/stream", thread_stream, methods=["GET"]),
        WebSocketRoute(f"{t}/ws", thread_ws),
        Route(f"{t}/files", list_files, methods=["GET"]),
        Route(f"{t}/files/{{path:path}}", get_file, methods=["GET"]),
        Route(f"{t}/files/{{path:path}}", put_file, methods=["PUT"]),
        Route(f"{t}/logs", list_logs, methods=["GET"]),
        Route(f"{p}/users/me", me, methods=["GET"]),
        Route(f"{p}/users/me/stream", user_stream, methods=["GET"]),
        WebSocketRoute(f"{p}/users/me/ws", user_ws),
        Route(f"{p}/users/me/values", list_values, methods=["GET"]),
        Route(f"{p}/users/me/values/{{key}}", get_value, methods=["GET"]),
        Route(f"{p}/users/me/values/{{key}}", put_value, methods=["PUT"]),
        Route(f"{p}/users/me/values/{{key}}", delete_value, methods=["DELETE"]),
    ]
