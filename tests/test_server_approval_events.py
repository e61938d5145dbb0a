"""``approval.request`` in the pattern's shape (``interruption`` and ``stateToken``) on every
surface: the bus, SSE, WebSocket, the approvals listing (on SQLite and PostgreSQL) and the
``done`` event."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse
from websockets.asyncio.client import connect as ws_connect

from store_fixtures import Backend

API = "/api"

FILES = {
    "agents/agents/ops.py": """
        from standardagents import define_agent
        ops = define_agent(name="ops", side_a={"prompt": "ops_prompt"})
    """,
    "agents/prompts/ops_prompt.py": """
        from standardagents import define_prompt
        ops_prompt = define_prompt(name="ops_prompt", prompt="x", tools=["wipe"])
    """,
    "agents/tools/wipe.py": """
        from standardagents import define_tool

        @define_tool(needs_approval=True)
        def wipe(target: str) -> str:
            '''Wipe a target.'''
            return f"wiped {target}"
    """,
}


def _check(request: dict[str, Any]) -> None:
    """The pattern's fields, consistent with the flat fields kept beside them."""
    assert request["interruption"] == {"id": request["id"], "toolName": "wipe", "args": {"target": "wipe the cache"}}
    assert request["stateToken"] == request["token"]
    assert isinstance(request["stateToken"], str) and request["stateToken"]


async def _until_done(next_event: Any) -> list[dict[str, Any]]:
    events = []
    while True:
        event = await asyncio.wait_for(next_event(), 20)
        events.append(event)
        if event["type"] == "done":
            return events


async def test_approval_request_carries_interruption_and_state_token_everywhere(tmp_path: Path) -> None:
    from server_fixtures import serve_app, write_project

    root = write_project(tmp_path / "project", FILES)
    server = serve_app(root, f"sqlite+aiosqlite:///{tmp_path / 'approvals.db'}")
    live = next(server)
    try:
        async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers, timeout=20) as c:
            tid = (await c.post(f"{API}/threads", json={"agent": "ops"})).json()["id"]
            ws_url = live.base_url.replace("http", "ws") + f"{API}/threads/{tid}/ws"
            async with ws_connect(ws_url, additional_headers=live.headers) as ws, \
                    aconnect_sse(c, "GET", f"{API}/threads/{tid}/stream") as source:
                assert json.loads(await ws.recv())["type"] == "connected"
                sse = source.aiter_sse()

                async def next_sse() -> dict[str, Any]:
                    return dict(json.loads((await sse.__anext__()).data))

                assert (await next_sse())["type"] == "connected"
                sent = await c.post(f"{API}/threads/{tid}/messages?wait=true", json={"content": "wipe the cache"})
                assert sent.json()["outcome"] == "approval_required"

                async def next_ws() -> dict[str, Any]:
                    return dict(json.loads(await ws.recv()))

                ws_events = await _until_done(next_ws)
                sse_events = await _until_done(next_sse)
            listed = (await c.get(f"{API}/threads/{tid}/approvals")).json()["approvals"]
        (on_ws,) = [e["data"] for e in ws_events if e["type"] == "approval.request"]
        (on_sse,) = [e["data"] for e in sse_events if e["type"] == "approval.request"]
        (in_done,) = sse_events[-1]["data"]["approvals"]
        (in_listing,) = listed
        for request in (on_ws, on_sse, in_listing):
            _check(request)
        # the terminal event names the paused call but, as before, carries no token
        assert in_done["interruption"] == on_ws["interruption"]
        assert "stateToken" not in in_done and "token" not in in_done
        assert on_ws == on_sse
        assert in_listing["interruption"] == on_ws["interruption"]
    finally:
        server.close()


async def test_approval_request_on_the_bus_and_in_the_result(tmp_path: Path, backend: Backend) -> None:
    from server_fixtures import write_project
    from standardagents import Runtime

    root = write_project(tmp_path / "project", FILES)
    rt = await Runtime.open(root, store=backend.new_store())
    try:
        sub = rt.subscribe()
        paused = await rt.run("ops", "wipe the cache")
        events = []
        while not sub.queue.empty():
            events.append(sub.queue.get_nowait())
        (on_bus,) = [e.data for e in events if e.type == "approval.request"]
        (in_result,) = paused.payload["approvals"]
        (listed,) = await rt.pending_approvals(paused.thread_id)
    finally:
        await rt.aclose()
    for request in (on_bus, in_result, listed):
        _check(request)
    assert on_bus == in_result
