"""Live streams against a real server: SSE and WebSocket per thread, reasoning on request,
joining mid-turn, bounded buffers, and the user stream with its hooks."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse
from websockets.asyncio.client import connect as ws_connect

from standardagents import Runtime
from standardagents.server import create_app
from standardagents.testing import OpenAIStub, StubReply

API = "/api"


@pytest.fixture
def gate() -> threading.Event:
    return threading.Event()


@pytest.fixture
def stub(gate: threading.Event) -> Iterator[OpenAIStub]:
    """A model that answers with reasoning and text once ``gate`` opens."""

    def respond(body: dict[str, Any]) -> StubReply:
        gate.wait(10)
        return StubReply(text="The answer is four.", reasoning="Two plus two.", chunk_size=5)

    with OpenAIStub(respond) as server:
        yield server


@pytest.fixture
def stub_server(stub: OpenAIStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from server_fixtures import serve_app, write_project

    monkeypatch.setenv("STUB_KEY", "sk-stub")
    root = write_project(tmp_path / "stubbed", {
        "agents/models/stubbed.py": f"""
            from standardagents import define_model
            stubbed = define_model(name="stubbed", provider="openai", model="stub-model",
                                   base_url="{stub.base_url}", api_key_env="STUB_KEY")
        """,
        "agents/prompts/plain_prompt.py": """
            from standardagents import define_prompt
            plain_prompt = define_prompt(name="plain_prompt", prompt="Answer.", model="stubbed")
        """,
        "agents/agents/internal.py": """
            from standardagents import define_agent
            internal = define_agent(name="internal", type="ai_human",
                                    side_a={"prompt": "plain_prompt", "stop_on_response": True})
        """,
    })
    yield from serve_app(root, f"sqlite+aiosqlite:///{tmp_path / 'stub.db'}")


async def _new_thread(c: httpx.AsyncClient, agent: str = "helper") -> str:
    r = await c.post(f"{API}/threads", json={"agent": agent})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _collect_sse(c: httpx.AsyncClient, url: str, started: asyncio.Event, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with aconnect_sse(c, "GET", url, params=params) as source:
        assert source.response.status_code == 200
        async for sse in source.aiter_sse():
            event = json.loads(sse.data)
            events.append(event)
            if event["type"] == "connected":
                started.set()
            if event["type"] == "done":
                break
    return events


async def test_sse_stream_carries_every_event_of_a_turn(live_server: Any) -> None:
    async with httpx.AsyncClient(base_url=live_server.base_url, headers=live_server.headers, timeout=20) as c:
        tid = await _new_thread(c)
        connected = asyncio.Event()
        reader = asyncio.create_task(_collect_sse(c, f"{API}/threads/{tid}/stream", connected))
        await connected.wait()
        r = await c.post(f"{API}/threads/{tid}/messages", json={"content": "add please"})
        events = await reader
    assert r.status_code == 202
    types = [e["type"] for e in events]
    assert types[0] == "connected"
    for expected in ("execution_started", "message_created", "tool_call_started", "tool_call_done", "message_chunk"):
        assert expected in types
    assert events[-1]["data"]["executionId"] == r.json()["executionId"]
    assert all(e["threadId"] == tid for e in events)


async def test_sse_stream_without_token_is_401(live_server: Any) -> None:
    async with httpx.AsyncClient(base_url=live_server.base_url, timeout=20) as c:
        r = await c.get(f"{API}/threads/thr_x/stream")
    assert r.status_code == 401


async def test_sse_stream_of_unknown_thread_is_404(live_server: Any) -> None:
    async with httpx.AsyncClient(base_url=live_server.base_url, headers=live_server.headers, timeout=20) as c:
        r = await c.get(f"{API}/threads/thr_missing/stream")
    assert r.status_code == 404


async def test_websocket_stream_carries_the_turn(live_server: Any) -> None:
    async with httpx.AsyncClient(base_url=live_server.base_url, headers=live_server.headers, timeout=20) as c:
        tid = await _new_thread(c)
        ws_url = live_server.base_url.replace("http", "ws") + f"{API}/threads/{tid}/ws"
        async with ws_connect(ws_url, additional_headers=live_server.headers) as ws:
            hello = json.loads(await ws.recv())
            await c.post(f"{API}/threads/{tid}/messages", json={"content": "go"})
            types = []
            while True:
                event = json.loads(await asyncio.wait_for(ws.recv(), 20))
                types.append(event["type"])
                if event["type"] == "done":
                    break
    assert hello["type"] == "connected"
    assert "tool_call_done" in types
    assert "message_chunk" in types


async def test_websocket_without_token_is_refused(live_server: Any) -> None:
    from websockets.exceptions import ConnectionClosed

    ws_url = live_server.base_url.replace("http", "ws") + f"{API}/threads/thr_x/ws"
    with pytest.raises(ConnectionClosed) as info:
        async with ws_connect(ws_url) as ws:
            await ws.recv()
    assert info.value.rcvd is not None
    assert info.value.rcvd.code == 4401


async def test_reasoning_only_for_clients_that_ask(stub_server: Any, gate: threading.Event) -> None:
    async with httpx.AsyncClient(base_url=stub_server.base_url, headers=stub_server.headers, timeout=20) as c:
        tid = await _new_thread(c, "internal")
        plain_ready, reasoning_ready = asyncio.Event(), asyncio.Event()
        url = f"{API}/threads/{tid}/stream"
        plain = asyncio.create_task(_collect_sse(c, url, plain_ready))
        with_reasoning = asyncio.create_task(_collect_sse(c, url, reasoning_ready, {"includeReasoning": "true"}))
        await plain_ready.wait()
        await reasoning_ready.wait()
        gate.set()
        await c.post(f"{API}/threads/{tid}/messages", json={"content": "2+2?"})
        plain_events, reasoning_events = await plain, await with_reasoning
    assert "reasoning_chunk" not in [e["type"] for e in plain_events]
    assert "reasoning_chunk" in [e["type"] for e in reasoning_events]
    assert "message_chunk" in [e["type"] for e in plain_events]


async def test_client_joining_mid_turn_gets_events_from_that_point(stub_server: Any, gate: threading.Event) -> None:
    async with httpx.AsyncClient(base_url=stub_server.base_url, headers=stub_server.headers, timeout=20) as c:
        tid = await _new_thread(c, "internal")
        first_ready, late_ready = asyncio.Event(), asyncio.Event()
        url = f"{API}/threads/{tid}/stream"
        first = asyncio.create_task(_collect_sse(c, url, first_ready))
        await first_ready.wait()
        r = await c.post(f"{API}/threads/{tid}/messages", json={"content": "2+2?"})
        assert r.json()["executionId"]
        late = asyncio.create_task(_collect_sse(c, url, late_ready))
        await late_ready.wait()
        gate.set()
        first_events, late_events = await first, await late
    late_types = [e["type"] for e in late_events]
    assert "execution_started" in [e["type"] for e in first_events]
    assert "execution_started" not in late_types
    assert "message_chunk" in late_types
    assert late_types[-1] == "done"


async def test_stop_cancels_a_running_turn(stub_server: Any, gate: threading.Event) -> None:
    async with httpx.AsyncClient(base_url=stub_server.base_url, headers=stub_server.headers, timeout=20) as c:
        tid = await _new_thread(c, "internal")
        ready = asyncio.Event()
        reader = asyncio.create_task(_collect_sse(c, f"{API}/threads/{tid}/stream", ready))
        await ready.wait()
        await c.post(f"{API}/threads/{tid}/messages", json={"content": "2+2?"})
        stopped = await c.post(f"{API}/threads/{tid}/stop")
        gate.set()
        events = await reader
    assert stopped.json()["stopped"] is True
    assert events[-1]["type"] == "done"
    assert events[-1]["data"]["outcome"] == "cancelled" or events[-1]["data"]["stopReason"] == "cancelled"


async def test_slow_client_is_told_it_lagged(runtime: Runtime, actors: Any) -> None:
    """A stream whose client does not read keeps a bounded buffer; the engine's emits never wait."""
    app = create_app(runtime, close_runtime=False)
    app.state.server.stream_buffer = 3
    thread = await runtime.create_thread("helper", user_id=actors.ids["alice"])
    sent: list[dict[str, Any]] = []
    release = asyncio.Event()
    subscribed = asyncio.Event()
    disconnect = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and len(sent) == 2:
            subscribed.set()
            await release.wait()
        body = message.get("body", b"")
        if b'"n":2' in body:
            runtime.bus.emit("done", thread.id, {"stopReason": "test"})
        if b"event: done" in body:
            disconnect.set()

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": f"{API}/threads/{thread.id}/stream", "raw_path": b"", "query_string": b"", "root_path": "",
             "headers": [(b"authorization", f"Bearer {actors.tokens['alice']}".encode())],
             "client": ("127.0.0.1", 1), "server": ("test", 80), "app": app}
    call = asyncio.create_task(app(scope, receive, send))
    await subscribed.wait()
    for i in range(10):
        runtime.bus.emit("log", thread.id, {"n": i})
    release.set()
    await asyncio.wait_for(call, 10)
    text = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    lagged = [e for e in events if e["type"] == "lagged"]
    assert [e["data"].get("n") for e in events if e["type"] == "log"] == [0, 1, 2]
    assert [e["data"]["missed"] for e in lagged] == [7]
    assert events[-1]["type"] == "done"


async def test_user_stream_runs_attach_and_detach_hooks(live_server: Any) -> None:
    ws_base = live_server.base_url.replace("http", "ws")
    async with ws_connect(ws_base + f"{API}/users/me/ws", additional_headers=live_server.headers) as watcher:
        await watcher.recv()
        async with ws_connect(ws_base + f"{API}/users/me/ws", additional_headers=live_server.headers) as ws:
            hello = json.loads(await ws.recv())
            client_id = hello["data"]["client"]["id"]
        seen = {}
        while "detached" not in seen:
            event = json.loads(await asyncio.wait_for(watcher.recv(), 10))
            if event["type"] == "user_value_changed":
                seen[event["data"]["key"]] = event["data"]["value"]
    assert seen["attached"] == client_id
    assert seen["detached"] == client_id


async def test_user_sse_stream_carries_value_changes(live_server: Any) -> None:
    async with httpx.AsyncClient(base_url=live_server.base_url, headers=live_server.headers, timeout=20) as c:
        async with aconnect_sse(c, "GET", f"{API}/users/me/stream") as source:
            events = source.aiter_sse()
            first = json.loads((await anext(events)).data)
            r = await c.put(f"{API}/users/me/values/color", json={"value": "teal"})
            assert r.status_code == 200
            changes = []
            async for sse in events:
                event = json.loads(sse.data)
                if event["type"] == "user_value_changed" and event["data"]["key"] == "color":
                    changes.append(event["data"])
                    break
    assert first["type"] == "connected"
    assert changes == [{"key": "color", "value": "teal"}]


async def test_user_stream_without_token_is_401(live_server: Any) -> None:
    async with httpx.AsyncClient(base_url=live_server.base_url, timeout=20) as c:
        r = await c.get(f"{API}/users/me/stream")
    assert r.status_code == 401


async def test_a_client_gone_before_the_stream_body_starts_leaves_no_subscription(app: Any, runtime: Runtime,
                                                                                    actors: Any) -> None:
    thread = await runtime.create_thread("helper", user_id=actors.ids["alice"])
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        await never.wait()  # the response never gets to its body

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": f"{API}/threads/{thread.id}/stream", "raw_path": b"",
             "query_string": b"", "root_path": "", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
             "headers": [(b"authorization", actors.auth("alice")["Authorization"].encode())]}
    await asyncio.wait_for(app(scope, receive, send), 10)
    assert not runtime.bus.has_subscribers(thread.id)
