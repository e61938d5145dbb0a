"""MCP servers as toolsets: a real MCP server (tests/mcp_servers/calc_server.py) over stdio and
streamable HTTP, through the pool."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

from standardagents.exceptions import DefinitionError, NotFoundError
from standardagents.mcp import (
    MCPConnectionError,
    MCPPool,
    MCPServerDefinition,
    define_mcp_server,
    load_mcp_servers,
)
from standardagents.records import ToolResult
from standardagents.toolsets import PluginRegistry, resolve_tool_name

CALC = Path(__file__).parent / "mcp_servers" / "calc_server.py"


def calc_stdio(**options: Any) -> MCPServerDefinition:
    return define_mcp_server("calc", command=sys.executable, args=[str(CALC)], **options)


def calc_children() -> list[int]:
    """Live (not zombie) child processes of this test process running the calc server."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == os.getpid() and state != "Z" and str(CALC).encode() in cmdline:
            found.append(int(entry))
    return found


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    """Where the stdio servers' stderr goes (a real file: the subprocess needs a descriptor)."""
    with (tmp_path / "server-stderr.log").open("w") as handle:
        yield handle


@pytest.fixture
async def pool(errlog: TextIO) -> AsyncIterator[MCPPool]:
    pool = MCPPool(errlog=errlog)
    yield pool
    await pool.aclose()


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The calc server over streamable HTTP, in a subprocess on a free 127.0.0.1 port."""
    proc = subprocess.Popen([sys.executable, str(CALC), "--http"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once the socket listens
        assert line.startswith("PORT "), f"server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def by_name(tools: list[Any]) -> dict[str, Any]:
    return {t.name: t for t in tools}


# definitions ---------------------------------------------------------------------------------

def test_server_needs_exactly_one_transport() -> None:
    with pytest.raises(DefinitionError, match="exactly one of command"):
        define_mcp_server("both", command="x", url="http://127.0.0.1:1/mcp")
    with pytest.raises(DefinitionError, match="exactly one of command"):
        define_mcp_server("neither")


def test_server_name_must_be_snake_case() -> None:
    with pytest.raises(DefinitionError, match="snake_case"):
        define_mcp_server("Web-Search", url="http://127.0.0.1:1/mcp")


def test_server_accepts_camel_case_fields() -> None:
    server = MCPServerDefinition.model_validate({"name": "web", "url": "http://h/mcp", "headers": {"A": "b"}})
    assert (server.transport, server.headers) == ("http", {"A": "b"})


def test_project_servers_load_with_their_problems(tmp_path: Path) -> None:
    folder = tmp_path / "agents" / "mcp"
    folder.mkdir(parents=True)
    (folder / "calc.py").write_text(
        "import sys\nfrom standardagents.mcp import define_mcp_server\n"
        "calc = define_mcp_server('calc', command=sys.executable, args=['server.py'])\n")
    (folder / "bad.py").write_text("from standardagents.mcp import define_mcp_server\n"
                                   "web = define_mcp_server('web')\n")
    servers, problems = load_mcp_servers(tmp_path)
    assert [(s.name, s.source_file) for s in servers] == [("calc", "agents/mcp/calc.py")]
    assert [p.file for p in problems] == ["agents/mcp/bad.py"]
    assert "exactly one of command" in problems[0].message


# stdio -----------------------------------------------------------------------------------------

async def test_stdio_server_tools_come_with_mcp_origin(pool: MCPPool) -> None:
    tools = by_name(await pool.list_tools(calc_stdio()))
    assert {"add", "echo"} <= set(tools)
    assert {(t.origin, t.origin_detail) for t in tools.values()} == {("mcp", "calc")}
    assert tools["add"].parameters["required"] == ["a", "b"]


async def test_stdio_tool_call_returns_its_result(pool: MCPPool) -> None:
    add = by_name(await pool.list_tools(calc_stdio()))["add"]
    result = await add.invoke(None, add.validate_arguments({"a": 19, "b": 23}))
    assert result == ToolResult(status="success", result="42")


async def test_tool_reporting_an_error_gives_an_error_result(pool: MCPPool) -> None:
    result = await pool.call_tool(calc_stdio(), "fail", {"reason": "disk on fire"})
    assert result.status == "error"
    assert "disk on fire" in (result.error or "")


async def test_tool_with_invalid_input_schema_is_skipped_with_a_warning(pool: MCPPool, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="standardagents.mcp"):
        tools = by_name(await pool.list_tools(calc_stdio()))
    assert "broken" not in tools
    assert "add" in tools
    assert any("'broken'" in r.getMessage() and "not valid JSON Schema" in r.getMessage() for r in caplog.records)


async def test_allow_list_and_prefix_shape_the_offered_tools(pool: MCPPool) -> None:
    tools = await pool.list_tools(calc_stdio(tools=["add"], prefix="calc"))
    assert [t.name for t in tools] == ["calc_add"]
    assert await tools[0].invoke(None, {"a": 1, "b": 2}) == ToolResult(status="success", result="3")


async def test_one_session_is_shared_by_concurrent_first_uses(pool: MCPPool) -> None:
    import asyncio

    server = calc_stdio()
    lists = await asyncio.gather(*(pool.list_tools(server) for _ in range(4)))
    assert all({t.name for t in tools} == {t.name for t in lists[0]} for tools in lists)
    assert pool.connect_count(server) == 1
    assert len(calc_children()) == 1


async def test_tool_list_changed_notification_relists(pool: MCPPool) -> None:
    server = calc_stdio()
    assert "shout" not in by_name(await pool.list_tools(server))
    assert (await pool.call_tool(server, "grow")).result == "grown"
    shout = by_name(await pool.list_tools(server))["shout"]
    assert await shout.invoke(None, {"text": "hi"}) == ToolResult(status="success", result="HI")


async def test_killed_stdio_server_is_reconnected_on_next_call(pool: MCPPool) -> None:
    server = calc_stdio()
    await pool.list_tools(server)
    [first] = calc_children()
    os.kill(first, signal.SIGKILL)
    result = await pool.call_tool(server, "echo", {"text": "still here"})
    assert result == ToolResult(status="success", result="still here")
    assert pool.connect_count(server) == 2
    assert first not in calc_children()


async def test_aclose_leaves_no_running_subprocess(pool: MCPPool) -> None:
    await pool.list_tools(calc_stdio())
    await pool.list_tools(calc_stdio(tools=["echo"]).model_copy(update={"name": "calc_two"}))
    assert len(calc_children()) == 2
    await pool.aclose()
    assert calc_children() == []


async def test_unstartable_server_raises_a_connection_error(pool: MCPPool, tmp_path: Path) -> None:
    server = define_mcp_server("missing", command=str(tmp_path / "no-such-binary"))
    with pytest.raises(MCPConnectionError, match="'missing' could not be connected"):
        await pool.list_tools(server)


# streamable HTTP -----------------------------------------------------------------------------------

async def test_http_server_gives_tools(pool: MCPPool, http_url: str) -> None:
    tools = by_name(await pool.list_tools(define_mcp_server("calc_http", url=http_url)))
    assert {"add", "echo"} <= set(tools)
    assert "broken" not in tools
    assert tools["echo"].origin_detail == "calc_http"


async def test_http_tool_call_returns_its_result(pool: MCPPool, http_url: str) -> None:
    echo = by_name(await pool.list_tools(define_mcp_server("calc_http", url=http_url)))["echo"]
    assert await echo.invoke(None, {"text": "over http"}) == ToolResult(status="success", result="over http")


async def test_unreachable_http_server_raises_a_connection_error(pool: MCPPool) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = define_mcp_server("gone", url=f"http://127.0.0.1:{port}/mcp")
    with pytest.raises(MCPConnectionError, match="'gone'"):
        await pool.list_tools(server)


# resolving prompt entries ------------------------------------------------------------------------

async def test_resolve_names_a_whole_server_or_one_tool(pool: MCPPool) -> None:
    servers = [calc_stdio(prefix="calc")]
    everything = await resolve_tool_name("mcp:calc", registry=None, pool=pool, plugins=PluginRegistry(), servers=servers)
    by_server_name = await resolve_tool_name("calc", registry=None, pool=pool, plugins=PluginRegistry(), servers=servers)
    one = await resolve_tool_name("mcp:calc/echo", registry=None, pool=pool, plugins=PluginRegistry(), servers=servers)
    assert {"calc_add", "calc_echo"} <= {t.name for t in everything}
    assert [t.name for t in by_server_name] == [t.name for t in everything]
    assert [t.name for t in one] == ["calc_echo"]


async def test_resolve_unknown_server_tool_lists_what_the_server_offers(pool: MCPPool) -> None:
    with pytest.raises(NotFoundError, match=r"offers: .*add"):
        await resolve_tool_name("mcp:calc/nope", registry=None, pool=pool, plugins=PluginRegistry(), servers=[calc_stdio()])
