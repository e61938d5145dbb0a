"""The MCP door: the project's primary agents as MCP tools, and thread files as resources.

Served over stdio (``standardagents mcp PROJECT``, for desktop apps and IDEs) and over
streamable HTTP at ``/mcp`` on ``standardagents serve`` (bearer tokens and dev mode as the
REST API). A tool call is one turn: ``message`` goes to a new thread, or to ``thread`` to
continue one; the reply's text comes back, with the thread's id in the structured content.
While the turn runs, each tool call it makes is sent as a progress notification; a client's
cancellation stops the turn. A turn pausing for a person's approval asks them through MCP
elicitation when the client declared that capability (approve or deny each waiting call; the
same turn then goes on and its final result is the answer); otherwise, or when the person
dismisses the question, the result says the turn waits for an approval. On a connection
with a back-channel (a 2025 session, stdio) the question is an ``elicitation/create``
request; on the 2026-07-28 single-exchange HTTP protocol it is an ``InputRequiredResult``
whose answers come with the client's retry of the call (any worker can take the retry: the
state it echoes names only the thread and execution, and the caller must own the thread).

Over HTTP a session (the 2025 handshake) belongs to the caller who opened it: the same id from
anyone else is an unknown session (404). A browser's request from a foreign ``Origin`` is
refused (403) unless that origin is allowed (DNS rebinding): see :func:`origin_allowed`.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ...engine.approval_tokens import ApprovalError
from ...engine.options import TurnRequest
from ...exceptions import QuotaExceeded
from ...files import canonical_path
from ...store.base import UserRecord
from ..auth import authenticate
from ..authorization import thread_allowed, thread_scope
from ..errors import ApiError, error_response
from ..streams import turn_events
from .common import (
    DoorError,
    agent_description,
    decide_calls,
    open_thread,
    primary_agents,
    quota_refusal,
    start_turn,
    turn_failure,
)

if TYPE_CHECKING:
    from ...engine.runtime import Runtime
    from ..state import ServerState

__all__ = ["ALLOWED_ORIGINS_ENV", "McpEndpoint", "allowed_origins", "build_mcp_server", "mcp_running",
           "origin_allowed", "serve_stdio"]

#: protocol versions without server-to-client requests (questions travel in InputRequiredResult)
_MODERN = ("2026-07-28",)
_CALLER_KEY = "standardagents_caller"
_URI = re.compile(r"^thread://(?P<thread>[^/]+)/files/(?P<path>.+)$")
#: how many of the caller's newest threads ``resources/list`` walks
_RESOURCE_THREADS = 50
#: browser origins allowed to call ``/mcp`` besides loopback ones (comma-separated; ``*``: any)
ALLOWED_ORIGINS_ENV = "STANDARDAGENTS_MCP_ALLOWED_ORIGINS"

CallerOf = Callable[[ServerRequestContext[Any, Any]], Awaitable[UserRecord]]

_DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "title": "Approve", "description": "Let the agent make this call."},
        "reason": {"type": "string", "title": "Reason", "description": "Why (told to the agent when denied)."},
    },
    "required": ["approved"],
}

_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "What to say to the agent."},
        "thread": {"type": "string",
                   "description": "The id of a thread to continue (from a previous call's result); "
                                  "leave out to start a new conversation."},
    },
    "required": ["message"],
    "additionalProperties": False,
}


def _error(message: str, thread: str | None = None, code: str | None = None,
           retry_after: int | None = None) -> types.CallToolResult:
    structured: dict[str, Any] = {"thread": thread, "status": "error", "error": message}
    if code is not None:
        structured["code"] = code
    if retry_after is not None:
        structured["retryAfter"] = retry_after
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True,
                                structured_content=structured)


def _approval_text(thread_id: str, approvals: list[dict[str, Any]]) -> str:
    calls = ", ".join(f"{a.get('toolName') or a.get('tool')}({a.get('args') or a.get('arguments') or {}})"
                      for a in approvals) or "a tool call"
    return (f"The agent paused: {calls} waits for a person's approval in thread {thread_id}. "
            f"Approve or deny it with POST /api/threads/{thread_id}/approvals (or in the web chat); "
            "the turn then continues.")


def file_uri(thread_id: str, path: str) -> str:
    """The resource URI of a thread's file."""
    return f"thread://{thread_id}/files/{quote(canonical_path(path).lstrip('/'))}"


def _not_found(uri: str, why: str) -> Exception:
    """The spec's resource-not-found error: invalid params, with the URI in ``data``."""
    from mcp import MCPError

    return MCPError(types.INVALID_PARAMS, f"Resource not found: {why}", data={"uri": uri})


def _explicit_null(params: types.CallToolRequestParams) -> str | None:
    """The name of a retry field sent as ``null`` (neither is nullable: absent or an object/string)."""
    for field, wire in (("input_responses", "inputResponses"), ("request_state", "requestState")):
        if field in params.model_fields_set and getattr(params, field) is None:
            return wire
    return None


async def _output_schema(rt: Runtime, agent_name: str) -> tuple[dict[str, Any], bool] | None:
    """The tool's output schema when the agent's prompt has an ``output_type`` (and whether the
    value is wrapped as ``{"result": value}``, structured content being an object)."""
    from ...engine.output import output_spec

    entry = rt.registry.find("agents", agent_name)
    if entry is None:
        return None
    agent = await rt.registry.aget("agents", entry.name, entry.package)
    if agent.side_a is None or not rt.registry.has("prompts", agent.side_a.prompt, entry.package):
        return None
    prompt = await rt.registry.aget("prompts", agent.side_a.prompt, entry.package)
    if getattr(prompt, "output_type", None) is None:
        return None
    spec = output_spec(prompt.output_type)
    if spec.wrapped:
        return {"type": "object", "properties": {"result": spec.schema}, "required": ["result"]}, True
    return spec.schema, False


def build_mcp_server(rt: Runtime, caller_of: CallerOf, *, name: str = "standardagents") -> Server[Any]:
    """An MCP server over ``rt``; ``caller_of`` says who sends a request (or raises DoorError).

    An agent whose prompt has an ``output_type`` declares it as the tool's output schema, and
    its typed value is the structured content (the thread's id then travels in ``_meta``)."""

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        await caller_of(ctx)
        tools = []
        for agent_name, agent in await primary_agents(rt):
            typed = await _output_schema(rt, agent_name)
            tools.append(types.Tool(name=agent_name, description=agent_description(agent_name, agent),
                                    input_schema=_INPUT_SCHEMA, output_schema=typed[0] if typed else None))
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
        from mcp import MCPError

        caller = await caller_of(ctx)
        # the tool's name first (a protocol error, as the spec has it), then the request's shape
        if params.name not in {name for name, _ in await primary_agents(rt)}:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        if (null := _explicit_null(params)) is not None:
            raise MCPError(types.INVALID_PARAMS, f"{null} must be left out or be an "
                                                 f"{'object' if null == 'inputResponses' else 'string'}, not null")
        if params.request_state is not None:
            return await _answered(ctx, caller, params)
        args = params.arguments or {}
        message, thread_id = args.get("message"), args.get("thread")
        if not isinstance(message, str) or not message.strip():
            return _error("argument 'message' is required: a non-empty string")
        if thread_id is not None and not isinstance(thread_id, str):
            return _error("argument 'thread' must be a thread id string")
        try:
            thread = await open_thread(rt, caller, params.name, thread_id, "mcp")
        except DoorError as exc:
            return _error(exc.message, thread_id)
        try:
            turn = await start_turn(rt, thread, TurnRequest(content=message))
        except QuotaExceeded as exc:  # over the caller's quota: a tool error saying when to retry
            return _error(quota_refusal(exc), thread.id, code="quota_exceeded", retry_after=exc.retry_after)
        await ctx.session.report_progress(1, None, f"thread {thread.id}: turn {turn.execution_id} started")
        return await _conclude(ctx, params.name, thread, turn.execution_id, turn.sub, turn.task, [1])

    async def _answered(ctx: ServerRequestContext[Any, Any], caller: UserRecord,
                        params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
        """A call retried with the person's answers to the approvals asked in an
        ``InputRequiredResult``: decide them and follow the same turn."""
        try:
            state = json.loads(params.request_state or "")
            thread_id, execution_id = str(state["thread"]), str(state["execution"])
        except (ValueError, TypeError, KeyError):
            return _error("the request state of this retry is not one this server gave")
        thread = await rt.store.get_thread(thread_id)
        if thread is None or not await thread_allowed(rt, caller, thread, "approve", kind="approval"):
            return _error(f"unknown thread {thread_id!r}", thread_id)
        answers = {key: value for key, value in (params.input_responses or {}).items()
                   if isinstance(value, types.ElicitResult)}
        pending = [p for p in await rt.pending_approvals(thread.id) if p.get("executionId") == execution_id]
        decisions: list[tuple[dict[str, Any], bool, str | None]] = []
        for call in pending:
            answer = answers.get(f"approval:{call['id']}")
            decision = _decision(answer) if answer is not None else None
            if decision is None:  # dismissed or not answered: the calls keep waiting
                return await _waiting(thread.id, execution_id)
            decisions.append((call, *decision))
        try:
            resumed = await _decide(thread.id, decisions, caller)
        except ApprovalError as exc:  # not an approver, a changed or expired call: it keeps waiting
            return _error(str(exc), thread.id)
        if resumed is None:
            return await _waiting(thread.id, execution_id)
        return await _conclude(ctx, params.name, thread, execution_id, resumed[0], resumed[1], [1])

    async def _conclude(ctx: ServerRequestContext[Any, Any], agent_name: str, thread: Any, execution_id: str,
                        sub: Any, task: Any, step: list[int]) -> types.CallToolResult | types.InputRequiredResult:
        """Follow the turn to its end (asking for approvals on the way when the client can be
        asked) and answer the call."""
        try:
            result = await _follow(ctx, sub, task, thread.id, execution_id, step)
            while result.outcome == "approval_required" and _can_elicit(ctx):
                if not ctx.session.can_send_request:
                    if ctx.session.protocol_version in _MODERN:
                        return await _input_required(thread.id, execution_id)
                    break
                # ask the person through the client; the same turn goes on with the decisions
                resumed = await _ask_approvals(ctx, thread.id)
                if resumed is None:
                    break
                sub, task = resumed
                result = await _follow(ctx, sub, task, thread.id, execution_id, step)
        except ApprovalError as exc:  # not an approver, a changed or expired call: it keeps waiting
            return _error(str(exc), thread.id)
        except BaseException:
            # the client cancelled (or went away): its turn stops with it (not another client's)
            with anyio.CancelScope(shield=True):
                await rt.cancel(execution_id)
            raise
        structured: dict[str, Any] = {"thread": thread.id, "execution": execution_id,
                                      "status": result.stop_reason, "outcome": result.outcome}
        if result.outcome == "approval_required":
            return await _waiting(thread.id, execution_id)
        failure = turn_failure(result.outcome, result.stop_reason, result.error, result.payload, bool(result.text))
        if failure is not None:
            return _error(failure.message, thread.id, failure.code)
        if result.stop_reason == "cancelled":
            return _error(f"the turn was cancelled before it answered{': ' + result.error if result.error else ''}",
                          thread.id, "cancelled")
        if result.outcome == "error" or result.stop_reason == "error":
            return _error(f"the agent failed: {result.error or result.outcome}", thread.id, "agent_error")
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=result.text or ""),
                   types.TextContent(type="text", text=f"(thread {thread.id}: pass it as 'thread' to continue)")]
        typed = await _output_schema(rt, agent_name)
        if typed is not None and result.value is not None:
            from ...engine.output import to_jsonable

            value = to_jsonable(result.value)
            return types.CallToolResult(content=content, structured_content={"result": value} if typed[1] else value,
                                        _meta=structured)
        return types.CallToolResult(content=content, structured_content=structured)

    async def _follow(ctx: ServerRequestContext[Any, Any], sub: Any, task: Any, thread_id: str, execution_id: str,
                      step: list[int]) -> Any:
        """Report the turn's tool calls as progress until it ends; its result."""
        async for event in turn_events(sub, task, rt, thread_id, execution_id):
            note: str | None = None
            if event.type == "tool_call_started":
                note = f"calling {event.data.get('name')}"
            elif event.type == "tool_call_done":
                note = f"{event.data.get('name')} {event.data.get('status') or 'done'}"
            elif event.type == "approval.request":
                note = f"{event.data.get('tool')} waits for approval"
            if note is not None:
                step[0] += 1
                await ctx.session.report_progress(step[0], None, note)
        return await task

    async def _waiting(thread_id: str, execution_id: str) -> types.CallToolResult:
        """The answer of a turn left waiting for approvals (today's report)."""
        approvals = await rt.pending_approvals(thread_id)
        structured: dict[str, Any] = {"thread": thread_id, "execution": execution_id, "status": "input_required",
                                      "outcome": "approval_required",
                                      "approvals": [{"tool": a.get("toolName") or a.get("tool"),
                                                     "arguments": a.get("args") or a.get("arguments")}
                                                    for a in approvals]}
        return types.CallToolResult(content=[types.TextContent(type="text", text=_approval_text(thread_id, approvals))],
                                    structured_content=structured)

    async def _input_required(thread_id: str, execution_id: str) -> types.InputRequiredResult:
        """The questions for the waiting calls, answered in the client's retry of the call."""
        requests: dict[str, Any] = {}
        for call in await rt.pending_approvals(thread_id):
            requests[f"approval:{call['id']}"] = types.ElicitRequest(params=types.ElicitRequestFormParams(
                message=_question(thread_id, call), requested_schema=_DECISION_SCHEMA))
        return types.InputRequiredResult(input_requests=requests, request_state=json.dumps(
            {"thread": thread_id, "execution": execution_id}))

    async def _decide(thread_id: str, decisions: list[tuple[dict[str, Any], bool, str | None]],
                      caller: UserRecord) -> tuple[Any, Any] | None:
        """Record the caller's decisions; the resumed turn's subscription and task (None if nothing resumed)."""
        return await decide_calls(rt, thread_id, [(p["token"], approved, reason) for p, approved, reason in decisions],
                                  caller)

    async def _ask_approvals(ctx: ServerRequestContext[Any, Any], thread_id: str) -> tuple[Any, Any] | None:
        """Ask the person about every waiting call (one elicitation each) and decide them; the
        resumed turn's subscription and task, or None when a question was dismissed (or could
        not be asked): the calls then keep waiting."""
        from mcp.shared.exceptions import MCPError

        decisions: list[tuple[dict[str, Any], bool, str | None]] = []
        for pending in await rt.pending_approvals(thread_id):
            try:
                answer = await ctx.session.elicit_form(_question(thread_id, pending), _DECISION_SCHEMA,
                                                       related_request_id=ctx.request_id)
            except MCPError:
                return None  # no way to ask on this connection: report the wait as before
            decision = _decision(answer)
            if decision is None:
                return None
            decisions.append((pending, *decision))
        return await _decide(thread_id, decisions, await caller_of(ctx))

    async def list_resources(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        caller = await caller_of(ctx)
        # top-level threads only: what a subagent attached to its answer is a file of its parent
        scope = await thread_scope(rt, caller)
        threads = [t for t in await rt.store.list_threads(user_id=scope.user_id, top_level=True,
                                                          limit=_RESOURCE_THREADS) if scope.admits(t)]
        resources: list[types.Resource] = []
        for thread in threads:
            for record in await rt.store.list_files(thread.id, ""):
                resources.append(types.Resource(name=f"{thread.id}{record.path}", uri=file_uri(thread.id, record.path),
                                                mime_type=record.mime_type, size=record.size,
                                                description=f"file {record.path} of thread {thread.id} ({thread.agent})"))
        return types.ListResourcesResult(resources=resources)

    async def list_templates(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        await caller_of(ctx)
        template = types.ResourceTemplate(name="thread-file", uri_template="thread://{id}/files/{path}",
                                          description="A file of a thread (the agent's file system).")
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(ctx: ServerRequestContext[Any, Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        caller = await caller_of(ctx)
        uri = str(params.uri)
        match = _URI.match(uri)
        if match is None:
            raise _not_found(uri, f"not a thread file URI: {uri!r} (thread://ID/files/PATH)")
        thread = await rt.store.get_thread(match["thread"])
        if thread is None or thread.parent_id is not None or not await thread_allowed(
                rt, caller, thread, "read", kind="file", resource_id=unquote(match["path"])):
            # the same answer for a missing, a foreign and a subagent's thread: ids are not disclosed
            raise _not_found(uri, f"unknown thread {match['thread']!r}")
        path = canonical_path(unquote(match["path"]))
        record = await rt.store.stat_file(thread.id, path)
        data = await rt.store.read_file(thread.id, path) if record is not None else None
        if record is None or data is None:
            raise _not_found(uri, f"thread {thread.id!r} has no file {path!r}")
        mime = record.mime_type or "application/octet-stream"
        try:
            text = data.decode("utf-8") if mime.startswith("text/") or mime.endswith("json") else None
        except UnicodeDecodeError:
            text = None
        contents: types.TextResourceContents | types.BlobResourceContents
        if text is not None:
            contents = types.TextResourceContents(uri=uri, mime_type=mime, text=text)
        else:
            contents = types.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(data).decode())
        return types.ReadResourceResult(contents=[contents])

    from ... import __version__

    return Server(name, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource,
                  instructions="Each tool is an agent: send it a message; pass the returned thread id "
                               "as 'thread' to continue the same conversation.")


def _question(thread_id: str, call: dict[str, Any]) -> str:
    tool = call.get("toolName") or call.get("tool")
    arguments = call.get("args") or call.get("arguments") or {}
    return f"The agent wants to call {tool} with {arguments} (thread {thread_id}). Do you approve?"


def _decision(answer: types.ElicitResult) -> tuple[bool, str | None] | None:
    """A person's answer as (approved, reason); None when they dismissed the question."""
    if answer.action == "cancel":
        return None
    content = answer.content or {}
    approved = answer.action == "accept" and content.get("approved") is True
    raw = content.get("reason")
    reason = raw if isinstance(raw, str) and raw else None
    return approved, reason or (None if approved else "denied by the person asked")


def _can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the client declared MCP elicitation (so a person can be asked)."""
    return bool(ctx.session.check_client_capability(types.ClientCapabilities(elicitation=types.ElicitationCapability())))


# streamable HTTP on the server ----------------------------------------------------------------
_LOOPBACK_NAMES = ("localhost", "localhost.")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_key(origin: str) -> tuple[str, str, int | None] | None:
    """``(scheme, host, port)`` of an origin (lower-cased, the scheme's default port made
    explicit); None for one that is not ``scheme://host[:port]``."""
    try:
        parts = urlsplit(origin.strip().rstrip("/").lower())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname or parts.path or parts.query or parts.fragment:
        return None
    return parts.scheme, parts.hostname, port if port is not None else _DEFAULT_PORTS.get(parts.scheme)


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_origins(raw: str | None) -> frozenset[str]:
    """The allow-list of :data:`ALLOWED_ORIGINS_ENV`: comma-separated origins, ``*`` for any."""
    return frozenset(part.strip() for part in (raw or "").split(",") if part.strip())


def origin_allowed(origin: str | None, allowed: frozenset[str], local_address: str | None) -> bool:
    """Whether a request with this ``Origin`` header may reach the MCP door.

    No ``Origin`` (a client that is not a browser): yes. An origin on the allow-list (``*``
    allows every origin): yes. A loopback origin (``http://localhost:5173``, ``127.0.0.1``,
    ``[::1]``) when the request came in on a loopback address (``local_address``, the
    server's end of the connection): yes. Anything else is a web page the server does not
    know, possibly a DNS-rebinding attack (its Host header then agrees with its Origin, so
    neither says anything): no."""
    if origin is None:
        return True
    if "*" in allowed:
        return True
    key = _origin_key(origin)
    if key is None:
        return False
    if any(_origin_key(entry) == key for entry in allowed):
        return True
    return _is_loopback(key[1]) and local_address is not None and _is_loopback(local_address)


def _trimmed_headers(scope: Scope) -> list[tuple[bytes, bytes]]:
    """The request's headers with the optional whitespace around each value removed (RFC 9110
    5.5: it is not part of the value), so ``Mcp-Name:  add `` reads ``add``."""
    return [(name, value.strip(b" \t")) for name, value in scope.get("headers", [])]


def _jsonrpc_refusal(status: int, message: str) -> Response:
    """A refusal before any MCP message was read: a JSON-RPC error without an id."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": types.INVALID_REQUEST, "message": message}}
    return Response(json.dumps(body), status_code=status, media_type="application/json")


async def _http_caller(ctx: ServerRequestContext[Any, Any]) -> UserRecord:
    request = ctx.request
    caller = getattr(getattr(request, "state", None), _CALLER_KEY, None)
    if not isinstance(caller, UserRecord):  # the ASGI wrapper below always sets it
        raise DoorError(401, "this request carries no verified caller")
    return caller


class McpEndpoint:
    """``/mcp``: refuses a foreign browser origin (403), checks the bearer token (401 as the
    REST API) and hands the request to the server's MCP session manager with the verified
    caller attached, as the session's owner too (a session is served only to its opener)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        scope = {**scope, "headers": _trimmed_headers(scope)}
        request = Request(scope, receive)
        extra = request.app.state.server.extra
        origin = request.headers.get("origin")
        local = scope.get("server")
        if not origin_allowed(origin, extra.get("mcp_origins", frozenset()), local[0] if local else None):
            await _jsonrpc_refusal(403, f"requests from origin {origin!r} are not allowed here "
                                        f"(allow it with {ALLOWED_ORIGINS_ENV})")(scope, receive, send)
            return
        try:
            caller = await authenticate(request)
        except ApiError as exc:
            await error_response(exc.status_code, exc.message, exc.code, headers=dict(exc.headers or {}))(scope, receive, send)
            return
        scope.setdefault("state", {})[_CALLER_KEY] = caller
        # the session manager binds a new session to this principal and answers 404 (an
        # unknown session) to anyone else presenting its id
        scope["user"] = AuthenticatedUser(AccessToken(token="", client_id=caller.id, subject=caller.id, scopes=[]))
        manager = extra.get("mcp_manager")
        if manager is None:
            await error_response(503, "the MCP door is not running")(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)


def _several_workers() -> bool:
    """Whether this process is one of several workers of ``serve --workers N``."""
    from ..app import ENV_PREFIX

    try:
        return int(os.environ.get(f"{ENV_PREFIX}WORKERS", "1")) > 1
    except ValueError:
        return False


@contextlib.asynccontextmanager
async def mcp_running(server: ServerState) -> AsyncIterator[None]:
    """Run the MCP session manager for the server's lifetime.

    With several workers, sessions of the 2025 protocol are stateless (each request stands
    alone), so whichever worker a request reaches answers it; 2026-07-28 requests stand alone
    anyway. What a stateless session cannot do is ask the client mid-call (no back-channel):
    an approval is then reported as waiting, as for a client without elicitation."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    manager = StreamableHTTPSessionManager(app=build_mcp_server(server.runtime, _http_caller),
                                           max_request_body_size=server.max_body, stateless=_several_workers())
    async with manager.run():
        server.extra["mcp_manager"] = manager
        server.extra["mcp_origins"] = allowed_origins(os.environ.get(ALLOWED_ORIGINS_ENV))
        try:
            yield
        finally:
            server.extra.pop("mcp_manager", None)
            server.extra.pop("mcp_origins", None)


# stdio ----------------------------------------------------------------------------------------
async def serve_stdio(rt: Runtime, token: str | None = None) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes them.

    The client is whoever started the process: the local admin (as on a dev server), or the
    owner of ``token`` when one is given (refused at start-up when it does not verify).
    """
    from mcp.server.stdio import stdio_server

    from .common import local_user

    if token:
        user = await rt.store.verify_api_token(token)
        if user is None:
            raise DoorError(401, "the API token is not valid")
    else:
        user = await local_user(rt)
    caller: UserRecord = user

    async def stdio_caller(ctx: ServerRequestContext[Any, Any]) -> UserRecord:
        return caller

    server = build_mcp_server(rt, stdio_caller)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
