"""The MCP door: the project's primary agents as MCP tools, and thread files as resources.

Served over stdio (``standardagents mcp PROJECT``, for desktop apps and IDEs) and over
streamable HTTP at ``/mcp`` on ``standardagents serve`` (bearer tokens and dev mode as the
REST API). A tool call is one turn: ``message`` goes to a new thread, or to ``thread`` to
continue one; the reply's text comes back, with the thread's id in the structured content.
While the turn runs, each tool call it makes is sent as a progress notification; a client's
cancellation stops the turn; a turn pausing for a person's approval says so in its result.
"""

from __future__ import annotations

import base64
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from starlette.requests import Request
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from ...store.base import UserRecord
from ..auth import authenticate, can_access_thread
from ..errors import ApiError, error_response
from ..streams import turn_events
from .common import DoorError, agent_description, open_thread, primary_agents, start_turn

if TYPE_CHECKING:
    from ...engine.runtime import Runtime
    from ..state import ServerState

__all__ = ["MCP_PATH", "build_mcp_server", "mcp_routes", "mcp_running", "serve_stdio"]

#: where ``standardagents serve`` answers MCP's streamable HTTP transport
MCP_PATH = "/mcp"
_CALLER_KEY = "standardagents_caller"
_URI = re.compile(r"^thread://(?P<thread>[^/]+)/files/(?P<path>.+)$")
#: how many of the caller's newest threads ``resources/list`` walks
_RESOURCE_THREADS = 50

CallerOf = Callable[[ServerRequestContext[Any, Any]], Awaitable[UserRecord]]

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


def _error(message: str, thread: str | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True,
                                structured_content={"thread": thread, "status": "error", "error": message})


def _approval_text(thread_id: str, approvals: list[dict[str, Any]]) -> str:
    calls = ", ".join(f"{a.get('toolName') or a.get('tool')}({a.get('args') or a.get('arguments') or {}})"
                      for a in approvals) or "a tool call"
    return (f"The agent paused: {calls} waits for a person's approval in thread {thread_id}. "
            f"Approve or deny it with POST /api/threads/{thread_id}/approvals (or in the web chat); "
            "the turn then continues.")


def file_uri(thread_id: str, path: str) -> str:
    """The resource URI of a thread's file."""
    return f"thread://{thread_id}/files/{quote(path.lstrip('/'))}"


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
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = await caller_of(ctx)
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
        turn = await start_turn(rt, thread, message)
        step = 1
        try:
            await ctx.session.report_progress(step, None, f"thread {thread.id}: turn {turn.execution_id} started")
            async for event in turn_events(turn.sub, turn.task, rt, thread.id, turn.execution_id):
                note: str | None = None
                if event.type == "tool_call_started":
                    note = f"calling {event.data.get('name')}"
                elif event.type == "tool_call_done":
                    note = f"{event.data.get('name')} {event.data.get('status') or 'done'}"
                elif event.type == "approval.request":
                    note = f"{event.data.get('tool')} waits for approval"
                if note is not None:
                    step += 1
                    await ctx.session.report_progress(step, None, note)
            result = await turn.task
        except BaseException:
            # the client cancelled (or went away): the turn stops with it
            with anyio.CancelScope(shield=True):
                await rt.stop(thread.id)
            raise
        structured: dict[str, Any] = {"thread": thread.id, "execution": turn.execution_id,
                                      "status": result.stop_reason, "outcome": result.outcome}
        if result.outcome == "approval_required":
            approvals = await rt.pending_approvals(thread.id)
            structured["status"] = "input_required"
            structured["approvals"] = [{"tool": a.get("toolName") or a.get("tool"),
                                        "arguments": a.get("args") or a.get("arguments")} for a in approvals]
            text = _approval_text(thread.id, approvals)
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                        structured_content=structured)
        if result.outcome == "error" or result.stop_reason == "error" or result.outcome == "output_invalid":
            return _error(f"the agent failed: {result.error or result.outcome}", thread.id)
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=result.text or ""),
                   types.TextContent(type="text", text=f"(thread {thread.id}: pass it as 'thread' to continue)")]
        typed = await _output_schema(rt, params.name)
        if typed is not None and result.value is not None:
            from ...engine.output import to_jsonable

            value = to_jsonable(result.value)
            return types.CallToolResult(content=content, structured_content={"result": value} if typed[1] else value,
                                        _meta=structured)
        return types.CallToolResult(content=content, structured_content=structured)

    async def list_resources(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        caller = await caller_of(ctx)
        threads = await rt.store.list_threads(user_id=None if caller.is_admin else caller.id, limit=_RESOURCE_THREADS)
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
        from mcp import MCPError

        caller = await caller_of(ctx)
        uri = str(params.uri)
        match = _URI.match(uri)
        if match is None:
            raise MCPError(types.INVALID_PARAMS, f"not a thread file URI: {uri!r} (thread://ID/files/PATH)")
        thread = await rt.store.get_thread(match["thread"])
        if thread is None or not can_access_thread(caller, thread):
            # the same answer for a missing and a foreign thread: ids are not disclosed
            raise MCPError(types.INVALID_PARAMS, f"unknown thread {match['thread']!r}")
        path = "/" + unquote(match["path"]).strip("/")
        record = await rt.store.stat_file(thread.id, path)
        data = await rt.store.read_file(thread.id, path) if record is not None else None
        if record is None or data is None:
            raise MCPError(types.INVALID_PARAMS, f"thread {thread.id!r} has no file {path!r}")
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

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource,
                  instructions="Each tool is an agent: send it a message; pass the returned thread id "
                               "as 'thread' to continue the same conversation.")


# streamable HTTP on the server ----------------------------------------------------------------
async def _http_caller(ctx: ServerRequestContext[Any, Any]) -> UserRecord:
    request = ctx.request
    caller = getattr(getattr(request, "state", None), _CALLER_KEY, None)
    if not isinstance(caller, UserRecord):  # the ASGI wrapper below always sets it
        raise DoorError(401, "this request carries no verified caller")
    return caller


class _McpEndpoint:
    """``/mcp``: checks the bearer token (401 as the REST API) and hands the request to the
    server's MCP session manager with the verified caller attached."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            caller = await authenticate(request)
        except ApiError as exc:
            await error_response(exc.status_code, exc.message, exc.code, headers=dict(exc.headers or {}))(scope, receive, send)
            return
        scope.setdefault("state", {})[_CALLER_KEY] = caller
        manager = request.app.state.server.extra.get("mcp_manager")
        if manager is None:
            await error_response(503, "the MCP door is not running")(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)


def mcp_routes() -> list[BaseRoute]:
    return [Route(MCP_PATH, _McpEndpoint(), methods=["GET", "POST", "DELETE"])]


@contextlib.asynccontextmanager
async def mcp_running(server: ServerState) -> AsyncIterator[None]:
    """Run the MCP session manager for the server's lifetime."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    manager = StreamableHTTPSessionManager(app=build_mcp_server(server.runtime, _http_caller),
                                           max_request_body_size=server.max_body)
    async with manager.run():
        server.extra["mcp_manager"] = manager
        try:
            yield
        finally:
            server.extra.pop("mcp_manager", None)


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
