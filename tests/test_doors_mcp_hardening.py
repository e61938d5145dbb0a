"""The MCP door's edges, driven by the real ``mcp`` client and by raw HTTP on a live server
(and over stdio): sessions bound to their opener, ``Origin`` checks, thread files named either
way, the resources a caller is shown, and the protocol's own error shapes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, MCPError, StdioServerParameters, types

import standardagents
from server_fixtures import LiveServer, serve_app, write_project
from standardagents.records import ThreadRecord
from standardagents.server.doors.mcp_server import (
    ALLOWED_ORIGINS_ENV,
    allowed_origins,
    origin_allowed,
)
from standardagents.store import SQLStore
from test_doors_mcp import EXTRA, _cli, _client

SCRIBE = {
    "agents/agents/scribe.py": """
        from standardagents import define_agent
        scribe = define_agent(name="scribe", type="ai_human", description="Keeps notes.",
                              side_a={"prompt": "scribe_prompt", "stop_on_response": True})
    """,
    "agents/prompts/scribe_prompt.py": """
        from standardagents import define_prompt
        scribe_prompt = define_prompt(name="scribe_prompt", prompt="You keep notes.", tools=["jot"])
    """,
    "agents/tools/jot.py": """
        from standardagents import define_tool

        @define_tool
        async def jot(state) -> str:
            '''Write the notes file.'''
            await state.write_file("notes.txt", "jotted by a tool", mime_type="text/plain")
            return "written"
    """,
}

MODERN = "2026-07-28"
LEGACY = "2025-06-18"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"}}
ACCEPT = "application/json, text/event-stream"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "project", {**EXTRA, **SCRIBE})


@pytest.fixture
def database(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'live.db'}"


@pytest.fixture
def server(project: Path, database: str) -> Iterator[LiveServer]:
    yield from serve_app(project, database)


@contextlib.asynccontextmanager
async def _store(database: str) -> AsyncIterator[SQLStore]:
    """A second store on the live server's SQLite file (what the CLI would open)."""
    store = SQLStore(database)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def _user_token(database: str, name: str) -> str:
    async with _store(database) as store:
        user = await store.create_user(name)
        _, token = await store.create_api_token(user.id, f"{name}'s token")
    return token


def _body(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, sent as JSON or as one SSE event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return dict(json.loads(next(d for d in data if d)))
    return dict(response.json())


async def _rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any] | None = None, *,
               headers: dict[str, str] | None = None, name: str | None = None) -> httpx.Response:
    """One 2026-07-28 request (self-contained: the envelope in ``_meta``, the routing headers)."""
    sent = {"Accept": ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        sent["Mcp-Name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": ENVELOPE}}
    return await http.post("/mcp", json=body, headers={**sent, **(headers or {})})


async def _open_session(http: httpx.AsyncClient, token: str) -> str:
    """A 2025 session opened with ``token`` (initialize, then initialized); its id."""
    auth = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
    opened = await http.post("/mcp", headers=auth, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "tests", "version": "1"}}})
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    ready = await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                            headers={**auth, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY})
    assert ready.status_code == 202, ready.text
    return session


def _thread_of(result: Any) -> str:
    thread = (result.structured_content or {}).get("thread")
    assert isinstance(thread, str) and thread.startswith("thr")
    return thread


# sessions belong to their opener -------------------------------------------------------------
async def test_a_session_answers_its_opener_and_is_unknown_to_another_user(server: LiveServer, database: str) -> None:
    alice, bob = await _user_token(database, "alice"), await _user_token(database, "bob")
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        session = await _open_session(http, alice)
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        asked = {"Accept": ACCEPT, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}
        by_bob = await http.post("/mcp", json=listing, headers={**asked, "Authorization": f"Bearer {bob}"})
        by_alice = await http.post("/mcp", json=listing, headers={**asked, "Authorization": f"Bearer {alice}"})
    assert by_bob.status_code == 404
    assert by_alice.status_code == 200 and "helper" in [t["name"] for t in _body(by_alice)["result"]["tools"]]


# Origin (DNS rebinding) ------------------------------------------------------------------------
async def test_a_foreign_origin_is_refused_with_403(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        answer = await _rpc(http, "tools/list", headers={"Host": "evil.example.com",
                                                         "Origin": "http://evil.example.com"})
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == types.INVALID_REQUEST and "mcp-session-id" not in answer.headers


async def test_a_loopback_origin_is_served_on_a_loopback_address(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        answer = await _rpc(http, "tools/list", headers={"Origin": "http://localhost:5173"})
    assert answer.status_code == 200


async def test_a_dev_server_refuses_a_foreign_origin_and_serves_a_client_without_one(project: Path,
                                                                                    database: str) -> None:
    for live in serve_app(project, database, dev=True):
        async with httpx.AsyncClient(base_url=live.base_url) as http:  # no token: the local admin
            foreign = await _rpc(http, "tools/list", headers={"Host": "evil.example.com",
                                                              "Origin": "http://evil.example.com"})
            plain = await _rpc(http, "tools/list")
    assert (foreign.status_code, plain.status_code) == (403, 200)


async def test_an_origin_on_the_allow_list_is_served(project: Path, database: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOWED_ORIGINS_ENV, "https://app.example.com, https://other.example.com:8443")
    for live in serve_app(project, database):
        async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers) as http:
            allowed = await _rpc(http, "tools/list", headers={"Origin": "https://app.example.com"})
            other = await _rpc(http, "tools/list", headers={"Origin": "https://evil.example.com"})
    assert (allowed.status_code, other.status_code) == (200, 403)


@pytest.mark.parametrize(("origin", "allowed", "local", "expected"), [
    (None, "", "203.0.113.5", True),                                  # not a browser
    ("http://localhost:3000", "", "127.0.0.1", True),                 # loopback page, loopback server
    ("http://[::1]:3000", "", "::1", True),
    ("http://127.0.0.1", "", "127.0.0.1", True),
    ("http://localhost:3000", "", "203.0.113.5", False),              # reached from the network
    ("http://evil.example.com", "", "127.0.0.1", False),              # rebinding
    ("https://app.example.com:443", "https://APP.example.com", "203.0.113.5", True),  # default port
    ("https://app.example.com:8443", "https://app.example.com", "203.0.113.5", False),
    ("null", "", "127.0.0.1", False),
    ("https://anything.example", "*", "203.0.113.5", True),
])
def test_origin_rules(origin: str | None, allowed: str, local: str, expected: bool) -> None:
    assert origin_allowed(origin, allowed_origins(allowed), local) is expected


# thread files under either spelling ----------------------------------------------------------------
async def test_a_file_a_tool_wrote_is_read_as_a_resource_over_http(server: LiveServer) -> None:
    async with _client(server) as client:
        thread = _thread_of(await client.call_tool("scribe", {"message": "take a note"}))
        read = await client.read_resource(f"thread://{thread}/files/notes.txt")
    assert read.contents[0].text == "jotted by a tool"  # type: ignore[union-attr]


async def test_a_file_a_tool_wrote_is_read_as_a_resource_over_stdio(project: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(command=_cli(), args=["mcp", str(project), "--database-url",
                                                         f"sqlite+aiosqlite:///{tmp_path / 'stdio.db'}"],
                                   env={**os.environ})
    async with Client(params) as client:
        thread = _thread_of(await client.call_tool("scribe", {"message": "take a note"}))
        read = await client.read_resource(f"thread://{thread}/files/notes.txt")
    assert read.contents[0].text == "jotted by a tool"  # type: ignore[union-attr]


async def test_a_file_a_tool_wrote_is_served_by_the_rest_route(server: LiveServer) -> None:
    async with _client(server) as client:
        thread = _thread_of(await client.call_tool("scribe", {"message": "take a note"}))
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        got = await http.get(f"/api/threads/{thread}/files/notes.txt")
    assert (got.status_code, got.text) == (200, "jotted by a tool")


# which threads' files are resources ------------------------------------------------------------
async def _with_subagent_thread(server: LiveServer, database: str) -> tuple[str, str]:
    """A top-level thread with a file, and a subagent thread under it with a file of its own."""
    async with _client(server) as client:
        top = _thread_of(await client.call_tool("scribe", {"message": "take a note"}))
    async with _store(database) as store:
        child = await store.create_thread(ThreadRecord(agent="helper", user_id=server.user_id, parent_id=top))
        await store.write_file(child.id, "/draft.txt", b"a subagent's draft", mime_type="text/plain")
    return top, child.id


async def test_resources_list_only_top_level_threads(server: LiveServer, database: str) -> None:
    top, child = await _with_subagent_thread(server, database)
    async with _client(server) as client:
        uris = [str(r.uri) for r in (await client.list_resources()).resources]
    assert f"thread://{top}/files/notes.txt" in uris
    assert not [uri for uri in uris if child in uri]


async def test_a_subagent_threads_file_is_not_a_resource(server: LiveServer, database: str) -> None:
    _, child = await _with_subagent_thread(server, database)
    uri = f"thread://{child}/files/draft.txt"
    async with _client(server) as client:
        with pytest.raises(MCPError) as refused:
            await client.read_resource(uri)
    assert (refused.value.code, refused.value.data) == (types.INVALID_PARAMS, {"uri": uri})


# the protocol's own shapes ---------------------------------------------------------------------
async def _raw_post(base_url: str, head: list[str], body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST /mcp with header lines sent exactly as given (an HTTP client would refuse to send
    a value with surrounding whitespace); the status and the JSON body."""
    host, port = base_url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    lines = ["POST /mcp HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(payload)}",
             "Content-Type: application/json", f"Accept: {ACCEPT}", "Connection: close", *head]
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 60)
    finally:
        writer.close()
    header, _, content = raw.partition(b"\r\n\r\n")
    status = int(header.split(b" ")[1])
    if b"transfer-encoding: chunked" in header.lower():
        chunks, rest = [], content
        while True:
            size, _, rest = rest.partition(b"\r\n")
            if int(size, 16) == 0:
                break
            chunks.append(rest[:int(size, 16)])
            rest = rest[int(size, 16) + 2:]
        content = b"".join(chunks)
    return status, json.loads(content)


async def test_mcp_headers_with_surrounding_whitespace_are_trimmed(server: LiveServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "helper", "arguments": {"message": "add"}, "_meta": ENVELOPE}}
    status, answer = await _raw_post(server.base_url, [
        f"Authorization: Bearer {server.token}", f"MCP-Protocol-Version:  {MODERN} ",
        "Mcp-Method: tools/call\t", "Mcp-Name:   helper  "], body)
    assert status == 200, answer
    assert answer["result"]["isError"] is False


async def test_discover_names_the_server_and_its_version(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        answer = _body(await _rpc(http, "server/discover"))
    assert answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": "standardagents", "version": standardagents.__version__}


async def test_a_missing_resource_error_carries_its_uri(server: LiveServer) -> None:
    async with _client(server) as client:
        thread = _thread_of(await client.call_tool("helper", {"message": "hi"}))
        uri = f"thread://{thread}/files/missing.txt"
        with pytest.raises(MCPError) as missing:
            await client.read_resource(uri)
    assert (missing.value.code, missing.value.data) == (types.INVALID_PARAMS, {"uri": uri})


async def test_a_null_input_responses_is_invalid_params(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=60) as http:
        answer = await _rpc(http, "tools/call", {"name": "helper", "arguments": {"message": "hi"},
                                                 "inputResponses": None}, name="helper")
    assert answer.status_code == 400
    assert _body(answer)["error"]["code"] == types.INVALID_PARAMS


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_unknown_tool_is_an_invalid_params_error(server: LiveServer, mode: str) -> None:
    async with _client(server, mode=mode) as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("internal", {"message": "hi"})  # not a primary agent
    assert (unknown.value.code, unknown.value.message) == (types.INVALID_PARAMS, "Unknown tool: internal")


async def test_a_tools_name_is_checked_before_its_arguments(server: LiveServer) -> None:
    async with _client(server) as client:
        with pytest.raises(MCPError, match="Unknown tool: nope"):
            await client.call_tool("nope", {})
