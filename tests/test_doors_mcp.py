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
from mcp import Client, MCPError, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client

from server_fixtures import LiveServer, serve_app, write_project
from test_server_workers import (
    WORKER,
    _admin_token,
    _two_workers,
    database,
)

__all__ = ["database"]  # the PostgreSQL database fixture of the workers tests

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
    "agents/agents/sentry.py": """
        from standardagents import define_agent
        sentry = define_agent(name="sentry", type="ai_human", description="Answers, but never about secrets.",
                              input_guardrails=["no_secrets"], side_a={"prompt": "sentry_prompt", "stop_on_response": True})
    """,
    "agents/prompts/sentry_prompt.py": """
        from standardagents import define_prompt
        sentry_prompt = define_prompt(name="sentry_prompt", prompt="You answer.")
    """,
    "agents/tools/no_secrets.py": """
        from standardagents import define_tool

        @define_tool(guardrail=True)
        def no_secrets(text: str) -> dict:
            '''Trip on anything that looks like a secret.'''
            found = "password" in text.lower()
            return {"tripwire": found, "info": {"reason": "secret-looking text"} if found else None}
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
async def _client(live: LiveServer, token: str | None = None, **options: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token or live.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=60.0)) as http:
        async with Client(streamable_http_client(f"{live.base_url}/mcp", http_client=http), **options) as client:
            yield client


class _Person:
    """An elicitation callback answering every question the same way, keeping the questions."""

    def __init__(self, action: str, content: dict[str, Any] | None = None) -> None:
        self.action = action
        self.content = content
        self.asked: list[Any] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        return types.ElicitResult(action=self.action, content=self.content)  # type: ignore[arg-type]


def _thread_of(result: Any) -> str:
    thread = (result.structured_content or {}).get("thread")
    assert isinstance(thread, str) and thread.startswith("thr")
    return thread


async def test_tools_are_the_primary_agents(server: LiveServer) -> None:
    async with _client(server) as client:
        tools = (await client.list_tools()).tools
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"guarded", "helper", "invoicer", "sentry", "slow"}
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
        foreign = await client.call_tool("helper", {"message": "hi", "thread": "thr_nope"})
    assert missing.is_error and "message" in missing.content[0].text  # type: ignore[union-attr]
    assert foreign.is_error and "unknown thread" in foreign.content[0].text  # type: ignore[union-attr]


async def test_a_tripped_guardrail_is_a_tool_error_with_its_reason(server: LiveServer) -> None:
    async with _client(server) as client:
        tripped = await client.call_tool("sentry", {"message": "my password is x"})
        fine = await client.call_tool("sentry", {"message": "hello"})
    assert tripped.is_error
    assert re.search(r"no_secrets.*secret-looking", tripped.content[0].text)  # type: ignore[union-attr]
    assert (tripped.structured_content or {})["code"] == "guardrail_tripped"
    assert not fine.is_error


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


async def test_an_approval_is_asked_through_elicitation_and_the_turn_goes_on(server: LiveServer) -> None:
    person = _Person("accept", {"approved": True})
    async with _client(server, elicitation_callback=person) as client:
        result = await client.call_tool("guarded", {"message": "wipe it"})
    assert not result.is_error, result
    (question,) = person.asked
    assert "wipe" in question.message and question.requested_schema["required"] == ["approved"]
    structured = result.structured_content or {}
    assert structured["status"] == "complete"
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        messages = (await http.get(f"/api/threads/{structured['thread']}/messages")).json()["messages"]
        executions = (await http.get(f"/api/threads/{structured['thread']}/executions")).json()["executions"]
    assert any(m["role"] == "tool" and (m["content"] or "").startswith("wiped") for m in messages)
    assert [e["id"] for e in executions] == [structured["execution"]]  # one turn, resumed


async def test_a_2025_session_is_asked_with_an_elicitation_request(server: LiveServer) -> None:
    """The handshake protocol has a back-channel: the question is an ``elicitation/create``
    request sent while the call runs (not an InputRequiredResult)."""
    person = _Person("accept", {"approved": True})
    async with _client(server, elicitation_callback=person, mode="legacy") as client:
        assert not client.session.protocol_version.startswith("2026")
        result = await client.call_tool("guarded", {"message": "wipe it"})
    assert len(person.asked) == 1 and "wipe" in person.asked[0].message
    assert (result.structured_content or {})["status"] == "complete"


async def test_a_denial_through_elicitation_reaches_the_agent(server: LiveServer) -> None:
    person = _Person("accept", {"approved": False, "reason": "not today"})
    async with _client(server, elicitation_callback=person) as client:
        result = await client.call_tool("guarded", {"message": "wipe it"})
    structured = result.structured_content or {}
    assert not result.is_error and structured["status"] == "complete"
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        messages = (await http.get(f"/api/threads/{structured['thread']}/messages")).json()["messages"]
    denied = [m["content"] for m in messages if m["role"] == "tool"]
    assert denied and "not today" in denied[0]


async def test_a_retry_with_a_state_the_server_never_gave_is_refused(server: LiveServer) -> None:
    async with _client(server) as client:
        forged = await client.session.call_tool("guarded", {"message": "wipe it"}, request_state="not json",
                                                allow_input_required=True)
        unknown = await client.session.call_tool("guarded", {"message": "wipe it"}, allow_input_required=True,
                                                 request_state=json.dumps({"thread": "thr_nope", "execution": "x"}))
    assert isinstance(forged, types.CallToolResult) and forged.is_error
    assert "request state" in forged.content[0].text  # type: ignore[union-attr]
    assert isinstance(unknown, types.CallToolResult) and unknown.is_error
    assert "unknown thread" in unknown.content[0].text  # type: ignore[union-attr]


async def test_a_dismissed_question_leaves_the_call_waiting(server: LiveServer) -> None:
    person = _Person("cancel")
    async with _client(server, elicitation_callback=person) as client:
        result = await client.call_tool("guarded", {"message": "wipe it"})
    structured = result.structured_content or {}
    assert len(person.asked) == 1 and structured["status"] == "input_required"
    assert "approval" in result.content[0].text  # type: ignore[union-attr]


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

    person = _Person("accept", {"approved": True})
    async with Client(params, elicitation_callback=person) as client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
        result = await client.call_tool("helper", {"message": "add"}, progress_callback=progress)
        approved = await client.call_tool("guarded", {"message": "wipe"})
    assert names == ["guarded", "helper", "invoicer", "sentry", "slow"]
    assert not result.is_error and result.content[0].text  # type: ignore[union-attr]
    assert "calling add" in notes
    assert len(person.asked) == 1 and (approved.structured_content or {})["status"] == "complete"


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


async def test_the_docs_approval_example_runs(server: LiveServer) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    code = next(b for b in blocks if "elicitation_callback" in b)
    env = {**os.environ, "STANDARDAGENTS_URL": server.base_url, "STANDARDAGENTS_TOKEN": server.token,
           "APPROVE": "yes"}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert "wipe" in lines[0] and lines[0].endswith("Do you approve?")
    assert lines[1].startswith("complete - ")


class _Alternate(httpx2.AsyncBaseTransport):
    """Sends requests to two workers in turn: each of its two transports keeps one
    connection, opened (and checked) to one worker; every answer's worker is recorded with
    the JSON-RPC method it answered."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        self.base_url = base_url
        self.headers = headers
        self.pinned: list[httpx2.AsyncHTTPTransport] = []
        self.pids: tuple[str, str] = ("", "")
        self.answered: list[tuple[str, str]] = []
        self.sent = 0

    async def _reaches(self, transport: httpx2.AsyncHTTPTransport) -> str:
        probe = await transport.handle_async_request(
            httpx2.Request("GET", f"{self.base_url}/api/agents", headers=self.headers))
        await probe.aread()
        return probe.headers[WORKER]

    async def _to(self, pid: str, transport: httpx2.AsyncHTTPTransport | None) -> httpx2.AsyncHTTPTransport:
        """A transport whose kept-alive connection reaches ``pid`` now (the server closes idle
        connections after a few seconds; a new one may reach the other worker)."""
        for _ in range(60):
            if transport is not None and await self._reaches(transport) == pid:
                return transport
            if transport is not None:
                await transport.aclose()
            transport = httpx2.AsyncHTTPTransport(limits=httpx2.Limits(max_connections=1,
                                                                       max_keepalive_connections=1))
        raise AssertionError(f"could not reach worker {pid}")

    async def pin(self, pids: tuple[str, str]) -> None:
        self.pids = pids
        self.pinned = [await self._to(pid, None) for pid in pids]

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        turn = self.sent % 2
        self.sent += 1
        if request.method == "POST":  # checked right before: it goes where it is meant to
            self.pinned[turn] = await self._to(self.pids[turn], self.pinned[turn])
        response = await self.pinned[turn].handle_async_request(request)
        try:
            method = json.loads(request.content or b"{}").get("method", request.method)
        except ValueError:
            method = request.method
        self.answered.append((str(method), response.headers.get(WORKER, "?")))
        return response

    async def aclose(self) -> None:
        for transport in self.pinned:
            await transport.aclose()


async def test_two_workers_on_postgresql_answer_mcp(database: str, tmp_path: Path) -> None:
    """``serve --workers 2`` on PostgreSQL: every MCP request may reach either worker, for a
    2026-07-28 client (an approval asked and answered across workers) and a 2025 session
    (stateless there)."""
    project = write_project(tmp_path / "project", EXTRA)
    token = await _admin_token(database)
    async with _two_workers(project, database, token, env=dict(os.environ)) as workers:
        base_url, headers = workers.base_url, workers.headers
        pids = await workers.discover()
        for mode in ("auto", "legacy"):
            person = _Person("accept", {"approved": True})
            transport = _Alternate(base_url, headers)
            await transport.pin(pids)
            async with httpx2.AsyncClient(headers=headers, transport=transport,
                                          timeout=httpx2.Timeout(30.0, read=60.0)) as http2:
                async with Client(streamable_http_client(f"{base_url}/mcp", http_client=http2), mode=mode,
                                  elicitation_callback=person) as client:
                    tools = sorted(t.name for t in (await client.list_tools()).tools)
                    added = await client.call_tool("helper", {"message": "add"})
                    again = await client.call_tool("helper", {"message": "again", "thread": _thread_of(added)})
                    wiped = await client.call_tool("guarded", {"message": "wipe it"})
            await transport.aclose()
            assert tools == ["guarded", "helper", "invoicer", "sentry", "slow"]
            assert not added.is_error and _thread_of(again) == _thread_of(added)
            calls = [pid for method, pid in transport.answered if method == "tools/call"]
            assert set(calls) == set(pids), transport.answered  # both workers answered calls
            structured = wiped.structured_content or {}
            if mode == "auto":
                # asked in an InputRequiredResult; the retry carrying the answer went on elsewhere
                assert len(person.asked) == 1 and structured["status"] == "complete"
                assert calls[-1] != calls[-2], transport.answered
            else:
                # a stateless 2025 session cannot be asked mid-call: the wait is reported
                assert person.asked == [] and structured["status"] == "input_required"
