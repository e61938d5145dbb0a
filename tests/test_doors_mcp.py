"""The MCP door, driven by the real ``mcp`` client over streamable HTTP (``/mcp`` on a live
server) and over stdio (``standardagents mcp PROJECT`` as a subprocess)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from server_fixtures import LiveServer, serve_app, write_project

DOCS = Path(__file__).resolve().parent.parent / "docs" / "doors-mcp.md"

EXTRA = {
    "agents/agents/invoicer.py": """
        from standardagents import define_agent
        invoicer = define_agent(name="invoicer", type="ai_human", description="Writes invoices.",
                                side_a={"prompt": "invoice_prompt", "stop_on_response": True})
    """,
    "agents/prompts/invoice_prompt.py": """
        from pydantic import BaseModel
        from standardagents import define_prompt

        class Invoice(BaseModel):
            customer: str
            total: int

        invoice_prompt = define_prompt(name="invoice_prompt", prompt="You write invoices.", output_type=Invoice)
    """,
    "agents/agents/slow.py": """
        from standardagents import define_agent
        slow = define_agent(name="slow", type="ai_human", description="Waits for ever.",
                            side_a={"prompt": "slow_prompt", "stop_on_response": True})
    """,
    "agents/prompts/slow_prompt.py": """
        from standardagents import define_prompt
        slow_prompt = define_prompt(name="slow_prompt", prompt="You wait.", tools=["wait_forever"])
    """,
    "agents/tools/wait_forever.py": """
        import asyncio
        from standardagents import define_tool

        @define_tool
        async def wait_forever() -> str:
            '''Wait until stopped.'''
            await asyncio.Event().wait()
            return "never"
    """,
    "agents/agents/guarded.py": """
        from standardagents import define_agent
        guarded = define_agent(name="guarded", type="ai_human", description="Wipes with permission.",
                               side_a={"prompt": "guarded_prompt", "stop_on_response": True})
    """,
    "agents/prompts/guarded_prompt.py": """
        from standardagents import define_prompt
        guarded_prompt = define_prompt(name="guarded_prompt", prompt="You wipe.", tools=["wipe"])
    """,
    "agents/tools/wipe.py": """
        from standardagents import define_tool

        @define_tool(needs_approval=True)
        def wipe(target: str) -> str:
            '''Wipe a target.'''
            return f"wiped {target}"
    """,
}


@pytest.fixture
def doors_project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "project", EXTRA)


@pytest.fixture
def server(doors_project: Path, tmp_path: Path) -> Iterator[LiveServer]:
    yield from serve_app(doors_project, f"sqlite+aiosqlite:///{tmp_path / 'live.db'}")


@contextlib.asynccontextmanager
async def _client(live: LiveServer, token: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token or live.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=60.0)) as http:
        async with Client(streamable_http_client(f"{live.base_url}/mcp", http_client=http)) as client:
            yield client


def _thread_of(result: Any) -> str:
    thread = (result.structured_content or {}).get("thread")
    assert isinstance(thread, str) and thread.startswith("thr")
    return thread


async def test_tools_are_the_primary_agents(server: LiveServer) -> None:
    async with _client(server) as client:
        tools = (await client.list_tools()).tools
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"guarded", "helper", "invoicer", "slow"}
    assert by_name["helper"].output_schema is None
    assert set(by_name["invoicer"].output_schema["required"]) == {"customer", "total"}  # "internal" is not primary
    assert by_name["helper"].description == "Adds numbers."
    assert by_name["helper"].input_schema["required"] == ["message"]


async def test_a_call_runs_a_turn_reports_progress_and_continues_its_thread(server: LiveServer) -> None:
    notes: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")

    async with _client(server) as client:
        first = await client.call_tool("helper", {"message": "add 1 and 2"}, progress_callback=progress)
        thread = _thread_of(first)
        second = await client.call_tool("helper", {"message": "again", "thread": thread})
    assert not first.is_error and not second.is_error
    assert first.content[0].text  # type: ignore[union-attr]
    assert _thread_of(second) == thread
    assert "calling add" in notes and "add success" in notes
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        messages = (await http.get(f"/api/threads/{thread}/messages")).json()["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == ["add 1 and 2", "again"]


async def test_a_typed_agent_answers_structured_content(server: LiveServer) -> None:
    async with _client(server) as client:
        result = await client.call_tool("invoicer", {"message": "invoice ACME"})
    assert not result.is_error
    value = result.structured_content or {}
    assert isinstance(value["customer"], str) and isinstance(value["total"], int)
    assert (result.meta or {})["thread"].startswith("thr")


async def test_bad_calls_are_tool_errors(server: LiveServer) -> None:
    async with _client(server) as client:
        missing = await client.call_tool("helper", {"message": ""})
        unknown = await client.call_tool("internal", {"message": "hi"})
        foreign = await client.call_tool("helper", {"message": "hi", "thread": "thr_nope"})
    assert missing.is_error and "message" in missing.content[0].text  # type: ignore[union-attr]
    assert unknown.is_error and "unknown agent 'internal'" in unknown.content[0].text  # type: ignore[union-attr]
    assert foreign.is_error and "unknown thread" in foreign.content[0].text  # type: ignore[union-attr]


async def test_cancelling_the_call_stops_the_turn(server: LiveServer) -> None:
    started: asyncio.Queue[str] = asyncio.Queue()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        await started.put(message or "")

    async with _client(server) as client:
        call = asyncio.create_task(client.call_tool("slow", {"message": "wait"}, progress_callback=progress))
        first = await asyncio.wait_for(started.get(), 30)
        match = re.search(r"thread (thr\w+)", first)
        assert match, first
        thread = match[1]
        assert await asyncio.wait_for(started.get(), 30) == "calling wait_forever"
        async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as http:
            async with http.stream("GET", f"/api/threads/{thread}/stream") as stream:
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call
                done = None
                async for line in stream.aiter_lines():
                    if line.startswith("data:") and '"type":"done"' in line:
                        done = json.loads(line[5:])
                        break
    assert done is not None and done["data"]["stopReason"] == "cancelled"


async def test_an_approval_wait_is_reported(server: LiveServer) -> None:
    async with _client(server) as client:
        result = await client.call_tool("guarded", {"message": "wipe it"})
    assert not result.is_error
    structured = result.structured_content or {}
    assert structured["status"] == "input_required"
    assert structured["approvals"][0]["tool"] == "wipe"
    assert "approval" in result.content[0].text  # type: ignore[union-attr]
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        pending = (await http.get(f"/api/threads/{structured['thread']}/approvals")).json()["approvals"]
    assert [p["tool"] for p in pending] == ["wipe"]


async def test_thread_files_are_resources(server: LiveServer) -> None:
    async with _client(server) as client:
        thread = _thread_of(await client.call_tool("helper", {"message": "hi"}))
        async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
            put = await http.put(f"/api/threads/{thread}/files/notes/a.txt", content=b"hello file",
                                 headers={"Content-Type": "text/plain"})
            assert put.status_code == 201
        listed = (await client.list_resources()).resources
        uri = f"thread://{thread}/files/notes/a.txt"
        assert uri in [str(r.uri) for r in listed]
        read = await client.read_resource(uri)
        assert read.contents[0].text == "hello file"  # type: ignore[union-attr]
        templates = (await client.list_resource_templates()).resource_templates
        assert templates[0].uri_template == "thread://{id}/files/{path}"
        with pytest.raises(MCPError, match="no file"):
            await client.read_resource(f"thread://{thread}/files/missing.txt")


async def test_another_users_thread_is_refused(server: LiveServer, doors_project: Path, tmp_path: Path) -> None:
    async with _client(server) as client:
        thread = _thread_of(await client.call_tool("helper", {"message": "hi"}))
    # a second, plain user, made with the CLI on the server's database
    proc = await asyncio.create_subprocess_exec(
        _cli(), "tokens", "create", "mallory", "--project", str(doors_project),
        "--database-url", f"sqlite+aiosqlite:///{tmp_path / 'live.db'}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0
    token = out.decode().strip()
    async with _client(server, token) as client:
        foreign = await client.call_tool("helper", {"message": "hi", "thread": thread})
        assert foreign.is_error and "belongs to another user" in foreign.content[0].text  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="unknown thread"):
            await client.read_resource(f"thread://{thread}/files/a.txt")


async def test_no_token_is_refused(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        answer = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                 headers={"Accept": "application/json, text/event-stream"})
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    assert "API token" in answer.json()["error"]["message"]
    # the real client with a wrong token cannot even connect
    with pytest.raises(BaseExceptionGroup) as refused:
        async with _client(server, "sa_not_a_token") as client:
            await client.list_tools()
    assert refused.group_contains(MCPError, match="error response")


def _cli() -> str:
    return str(Path(sys.executable).parent / "standardagents")


async def test_stdio_serves_the_same_tools(doors_project: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(command=_cli(), args=["mcp", str(doors_project), "--database-url",
                                                         f"sqlite+aiosqlite:///{tmp_path / 'stdio.db'}"],
                                   env={**os.environ})
    notes: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")

    async with Client(params) as client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
        result = await client.call_tool("helper", {"message": "add"}, progress_callback=progress)
    assert names == ["guarded", "helper", "invoicer", "slow"]
    assert not result.is_error and result.content[0].text  # type: ignore[union-attr]
    assert "calling add" in notes


def test_stdio_refuses_a_token_that_does_not_verify(doors_project: Path, tmp_path: Path) -> None:
    done = subprocess.run([_cli(), "mcp", str(doors_project), "--token", "sa_wrong", "--database-url",
                           f"sqlite+aiosqlite:///{tmp_path / 'stdio.db'}"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert done.stdout == ""
    assert "API token is not valid" in done.stderr


def test_stdio_refuses_a_folder_that_is_not_a_project(tmp_path: Path) -> None:
    done = subprocess.run([_cli(), "mcp", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stdout == ""
    assert "not an agents project" in done.stderr


async def test_the_docs_example_runs(server: LiveServer) -> None:
    text = DOCS.read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code, "docs/doors-mcp.md has a python example"
    env = {**os.environ, "STANDARDAGENTS_URL": server.base_url, "STANDARDAGENTS_TOKEN": server.token}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code[1], env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    assert "helper" in out.decode()
    assert "thread thr" in out.decode()
