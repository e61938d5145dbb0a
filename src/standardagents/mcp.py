"""MCP servers as toolsets: definitions, project loading and a per-process connection pool.

A project lists servers in ``agents/mcp/*.py`` with :func:`define_mcp_server`; the
:class:`MCPPool` keeps one live ``ClientSession`` per server and turns the server's tools into
ordinary :class:`~standardagents.definitions.ToolDefinition` values (origin ``"mcp"``), so the
engine validates and runs them like any other tool.

Tool lists are live: a server's list is cached until the session is replaced (a reconnect) or
the server sends ``notifications/tools/list_changed``; ``list_ttl`` adds an age limit for
servers that never send that notification.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import jsonschema
from pydantic import model_validator

from .definitions import ToolDefinition
from .definitions._base import Definition, build, check_snake_case
from .exceptions import NotFoundError, RuntimeFailure
from .observability.tracing import trace_headers
from .records import ToolResult

if TYPE_CHECKING:
    from mcp import ClientSession

    from .project import Problem

__all__ = [
    "MCPConnectionError",
    "MCPPool",
    "MCPServerDefinition",
    "call_result_to_tool_result",
    "define_mcp_server",
    "load_mcp_servers",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

#: JSON-RPC code the SDK uses when the connection under a request is gone
_CONNECTION_CLOSED = -32000


class MCPConnectionError(RuntimeFailure):
    """An MCP server could not be started, reached, or stayed unreachable after a reconnect."""


class MCPServerDefinition(Definition):
    """Where an MCP server lives and which of its tools to offer.

    Exactly one transport: ``command`` (a subprocess spoken to over stdio) or ``url``
    (streamable HTTP). ``tools`` is an allow-list of the server's own tool names; ``prefix``
    renames every offered tool to ``<prefix>_<name>`` so two servers' tools cannot clash.
    """

    name: str
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] | None = None
    tools: list[str] | None = None
    prefix: str | None = None

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerDefinition:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
        if self.url is None and self.headers:
            raise ValueError("headers apply to a url server only")
        if self.command is None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd apply to a command server only")
        return self

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    def tool_name(self, remote: str) -> str:
        """The name the model sees for the server's tool ``remote``."""
        return f"{self.prefix}_{remote}" if self.prefix else remote


def define_mcp_server(
    name: str,
    *,
    command: str | None = None,
    args: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    tools: Iterable[str] | None = None,
    prefix: str | None = None,
) -> MCPServerDefinition:
    """Define an MCP server; every problem is reported at once as a ``DefinitionError``."""
    data: dict[str, Any] = {
        "name": name,
        "command": command,
        "args": list(args),
        "env": dict(env) if env is not None else None,
        "cwd": str(cwd) if cwd is not None else None,
        "url": url,
        "headers": dict(headers) if headers is not None else None,
        "tools": list(tools) if tools is not None else None,
        "prefix": prefix,
    }
    problems: list[tuple[str, str]] = []
    bad = check_snake_case(name)
    if bad:
        problems.append(("name", bad))
    result: MCPServerDefinition = build(MCPServerDefinition, data, problems)
    return result


def load_mcp_servers(project_dir: str | Path) -> tuple[list[MCPServerDefinition], list[Problem]]:
    """The servers defined in ``<project>/agents/mcp/*.py``, and every problem found there.

    Files whose names start with ``_`` are skipped; a duplicate server name is a problem
    naming both files.
    """
    from .project import Problem, definitions_in, import_file

    root = Path(project_dir).resolve()
    folder = root / "agents" / "mcp"
    servers: list[MCPServerDefinition] = []
    problems: list[Problem] = []
    if not folder.is_dir():
        return servers, problems
    seen: dict[str, str] = {}
    for file in sorted(folder.rglob("*.py")):
        if file.name.startswith("_"):
            continue
        rel = str(file.relative_to(root))
        try:
            module = import_file(file, "sa_mcp")
        except Exception as exc:  # a user's file may raise anything on import
            detail = "; ".join(f"{w}: {m}" if w else m for w, m in getattr(exc, "problems", [])) or f"{type(exc).__name__}: {exc}"
            problems.append(Problem(rel, detail))
            continue
        found = definitions_in(module, MCPServerDefinition)
        if not found:
            problems.append(Problem(rel, "defines no MCP server (expected a value made with define_mcp_server)", warning=True))
        for server in found:
            if server.name in seen:
                problems.append(Problem(rel, f"duplicate MCP server name {server.name!r} (also defined in {seen[server.name]})"))
                continue
            seen[server.name] = rel
            servers.append(server.model_copy(update={"source_file": rel}))
    return servers, problems


def call_result_to_tool_result(result: Any) -> ToolResult:
    """An MCP ``CallToolResult`` as our ``ToolResult``: text blocks joined, media as attachments.

    ``isError`` becomes an error result, so the model reads what went wrong and may retry.
    """
    from mcp import types

    texts: list[str] = []
    attachments: list[dict[str, Any]] = []
    for index, block in enumerate(result.content):
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            ext = block.mime_type.split("/")[-1]
            attachments.append({"name": f"{block.type}-{index}.{ext}", "data": block.data, "mimeType": block.mime_type})
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            if isinstance(res, types.TextResourceContents):
                texts.append(res.text)
            else:
                attachments.append({"name": str(res.uri).rsplit("/", 1)[-1] or f"resource-{index}",
                                    "data": res.blob, "mimeType": res.mime_type})
        elif isinstance(block, types.ResourceLink):
            texts.append(f"[resource {block.name}: {block.uri}]")
    text = "\n".join(texts)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    if result.is_error:
        return ToolResult(status="error", error=text or "the MCP tool reported an error")
    return ToolResult(status="success", result=text, attachments=attachments)


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class _Connection:
    """One server's session, the task that owns its context managers, and its tool cache."""

    def __init__(self, server: MCPServerDefinition) -> None:
        self.server = server
        self.lock = asyncio.Lock()
        self.session: ClientSession | None = None
        self.task: asyncio.Task[None] | None = None
        self.stop: asyncio.Event | None = None
        self.tools: list[ToolDefinition] | None = None
        self.listed_at = 0.0
        self.connects = 0

    @property
    def alive(self) -> bool:
        return self.session is not None and self.task is not None and not self.task.done()


class MCPPool:
    """One pooled MCP session per server, connected on first use and reconnected after a failure.

    Each session lives inside its own task (anyio cancel scopes must be entered and left in the
    same task); callers talk to it through the ``ClientSession`` object and :meth:`aclose`
    ends every task by signalling it. A pool belongs to the event loop it first connects on.
    """

    def __init__(
        self,
        servers: Iterable[MCPServerDefinition] = (),
        *,
        list_ttl: float | None = None,
        connect_timeout: float = 30.0,
        close_timeout: float = 10.0,
        errlog: TextIO | None = None,
    ) -> None:
        self.list_ttl = list_ttl
        #: moves whenever a server's tool list may have changed (a (re)connect, list_changed)
        self.generation = 0
        self.connect_timeout = connect_timeout
        self.close_timeout = close_timeout
        self.errlog = errlog
        self._connections: dict[str, _Connection] = {}
        for server in servers:
            self.add(server)

    # servers ---------------------------------------------------------------------------------
    def add(self, server: MCPServerDefinition) -> None:
        """Make ``server`` known to the pool (no connection is made yet)."""
        current = self._connections.get(server.name)
        if current is not None and current.server != server:
            raise RuntimeFailure(f"MCP server {server.name!r} is already in the pool with a different definition")
        if current is None:
            self._connections[server.name] = _Connection(server)

    @property
    def servers(self) -> dict[str, MCPServerDefinition]:
        return {name: conn.server for name, conn in self._connections.items()}

    def connect_count(self, server: str | MCPServerDefinition) -> int:
        """How many sessions were opened for ``server`` (1 + reconnects), for diagnostics."""
        return self._conn(server).connects

    def _conn(self, server: str | MCPServerDefinition) -> _Connection:
        if isinstance(server, MCPServerDefinition):
            self.add(server)
            return self._connections[server.name]
        conn = self._connections.get(server)
        if conn is None:
            known = ", ".join(sorted(self._connections)) or "none"
            raise NotFoundError("MCP server", server, f"known: {known}")
        return conn

    # tools -----------------------------------------------------------------------------------
    async def list_tools(self, server: str | MCPServerDefinition) -> list[ToolDefinition]:
        """The server's tools (allow-list and prefix applied); invalid input schemas are skipped."""
        conn = self._conn(server)
        fresh = conn.tools is not None and conn.alive and (
            self.list_ttl is None or time.monotonic() - conn.listed_at < self.list_ttl)
        if fresh and conn.tools is not None:
            return list(conn.tools)
        listed = await self._with_session(conn, self._list_all)
        tools = [t for t in (self._definition(conn.server, tool) for tool in listed) if t is not None]
        conn.tools = tools
        conn.listed_at = time.monotonic()
        return list(tools)

    async def call_tool(self, server: str | MCPServerDefinition, tool: str, arguments: dict[str, Any] | None = None) -> ToolResult:
        """Call the server's tool ``tool`` (its own, unprefixed name)."""
        from mcp import MCPError

        conn = self._conn(server)

        traced = trace_headers()  # the caller's span, as MCP carries context: in the request's _meta

        async def call(session: ClientSession) -> Any:
            if traced:
                return await session.call_tool(tool, arguments or {}, meta=traced)  # type: ignore[call-overload]
            return await session.call_tool(tool, arguments or {})

        try:
            result = await self._with_session(conn, call)
        except MCPError as exc:
            return ToolResult(status="error", error=f"MCP server {conn.server.name!r}: {exc.error.message}")
        return call_result_to_tool_result(result)

    @staticmethod
    async def _list_all(session: ClientSession) -> list[Any]:
        from mcp import types

        tools: list[Any] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    def _definition(self, server: MCPServerDefinition, tool: Any) -> ToolDefinition | None:
        if server.tools is not None and tool.name not in server.tools:
            return None
        schema = dict(tool.input_schema or {"type": "object", "properties": {}})
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            logger.warning("MCP server %r: skipping tool %r, its input schema is not valid JSON Schema: %s",
                           server.name, tool.name, exc.message)
            return None
        remote = tool.name
        pool = self

        async def execute(args: dict[str, Any]) -> ToolResult:
            return await pool.call_tool(server.name, remote, args)

        return ToolDefinition(
            name=server.tool_name(remote),
            description=tool.description or "",
            parameters=schema,
            execute=execute,
            call_style="args",
            origin="mcp",
            origin_detail=server.name,
            source_file=server.source_file,
        )

    # sessions --------------------------------------------------------------------------------
    async def _with_session(self, conn: _Connection, op: Callable[[ClientSession], Awaitable[_T]]) -> _T:
        """Run ``op`` on a live session; a lost connection is reopened and ``op`` retried once."""
        from mcp import MCPError

        for attempt in (0, 1):
            session = await self._ensure(conn)
            try:
                return await op(session)
            except MCPError as exc:
                if exc.error.code != _CONNECTION_CLOSED:
                    raise
                failure: BaseException = exc
            except Exception as exc:
                failure = exc
            logger.warning("MCP server %r: connection lost (%s)%s", conn.server.name, _leaf(failure),
                           "; reconnecting" if attempt == 0 else "")
            await self._drop(conn, session)
            if attempt == 1:
                raise MCPConnectionError(
                    f"MCP server {conn.server.name!r} is unreachable after a reconnect: {_leaf(failure)}") from failure
        raise AssertionError("unreachable")  # pragma: no cover

    async def _ensure(self, conn: _Connection) -> ClientSession:
        if conn.alive and conn.session is not None:
            return conn.session
        async with conn.lock:
            if conn.alive and conn.session is not None:
                return conn.session
            if conn.task is not None:
                await self._stop(conn)
            return await self._start(conn)

    async def _start(self, conn: _Connection) -> ClientSession:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[ClientSession] = loop.create_future()
        stop = asyncio.Event()
        task = loop.create_task(self._serve(conn, ready, stop), name=f"mcp:{conn.server.name}")
        conn.task, conn.stop = task, stop
        try:
            session = await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
        except BaseException as exc:
            await self._stop(conn)
            if isinstance(exc, asyncio.TimeoutError):
                raise MCPConnectionError(
                    f"MCP server {conn.server.name!r} did not answer within {self.connect_timeout:g} s") from None
            if isinstance(exc, Exception):
                raise MCPConnectionError(f"MCP server {conn.server.name!r} could not be connected: {_leaf(exc)}") from exc
            raise
        conn.session = session
        conn.tools = None
        conn.connects += 1
        self.generation += 1
        return session

    async def _serve(self, conn: _Connection, ready: asyncio.Future[ClientSession], stop: asyncio.Event) -> None:
        """Own one session's context managers from open to close, inside this one task."""
        from mcp import ClientSession, types

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                conn.tools = None
                self.generation += 1
            elif isinstance(message, Exception):
                logger.debug("MCP server %r: transport error: %s", conn.server.name, message)

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(conn.server))
                session = await stack.enter_async_context(ClientSession(read, write, message_handler=on_message))
                await session.initialize()
                if not ready.done():
                    ready.set_result(session)
                await stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                logger.warning("MCP server %r: session ended: %s", conn.server.name, _leaf(exc))
        finally:
            if not ready.done():
                ready.cancel()

    @asynccontextmanager
    async def _transport(self, server: MCPServerDefinition) -> AsyncIterator[tuple[Any, Any]]:
        if server.command is not None:
            from mcp import StdioServerParameters, stdio_client

            params = StdioServerParameters(command=server.command, args=list(server.args), env=server.env, cwd=server.cwd)
            async with stdio_client(params, errlog=self.errlog or sys.stderr) as streams:
                yield streams[0], streams[1]
            return
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        assert server.url is not None
        async with create_mcp_http_client(headers=server.headers) as client, \
                streamable_http_client(server.url, http_client=client) as streams:
            yield streams[0], streams[1]

    async def _drop(self, conn: _Connection, session: ClientSession) -> None:
        """Close ``session`` unless another caller already replaced it."""
        async with conn.lock:
            if conn.session is session:
                await self._stop(conn)

    async def _stop(self, conn: _Connection) -> None:
        task, stop = conn.task, conn.stop
        conn.session, conn.task, conn.stop, conn.tools = None, None, None, None
        if task is None:
            return
        if stop is not None:
            stop.set()
        done, _ = await asyncio.wait({task}, timeout=self.close_timeout)
        if not done:
            logger.warning("MCP server %r: did not close within %g s; cancelling", conn.server.name, self.close_timeout)
            task.cancel()
            await asyncio.wait({task})

    async def aclose(self) -> None:
        """Close every session (stopping stdio subprocesses); the pool can reconnect afterwards."""
        async def close(conn: _Connection) -> None:
            async with conn.lock:
                await self._stop(conn)

        await asyncio.gather(*(close(conn) for conn in self._connections.values()))

    async def __aenter__(self) -> MCPPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

