"""Resumable streams on one process (SQLite): a client that reconnects with the last event id
it saw gets exactly the events it missed, in order, then the live ones; ids too old for the
log's retention get one ``lagged`` event instead; a malformed id is refused."""

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

from standardagents.testing import OpenAIStub, StubReply

API = "/api"


class Model:
    """A stub model: a tool call first, then (once ``resume`` is set) a streamed answer."""

    def __init__(self) -> None:
        self.resume = threading.Event()
        self.second_asked = threading.Event()

    def __call__(self, body: dict[str, Any]) -> StubReply:
        if not any(m.get("role") == "tool" for m in body.get("messages", [])):
            return StubReply(tool_calls=[("add", json.dumps({"a": 2, "b": 3}))])
        self.second_asked.set()
        self.resume.wait(30)
        return StubReply(text="Two and three make five, as the tool said.", chunk_size=3)


@pytest.fixture
def model() -> Model:
    return Model()


def _project(tmp_path: Path, base_url: str) -> Path:
    from server_fixtures import write_project

    return write_project(tmp_path / "resume", {
        "agents/models/stubbed.py": f"""
            from standardagents import define_model
            stubbed = define_model(name="stubbed", provider="openai", model="stub-model",
                                   base_url="{base_url}", api_key_env="STUB_KEY")
        """,
        "agents/prompts/adder.py": """
            from standardagents import define_prompt
            adder = define_prompt(name="adder", prompt="Add.", model="stubbed", tools=["add"])
        """,
        "agents/agents/helper.py": """
            from standardagents import define_agent
            helper = define_agent(name="helper", type="ai_human",
                                  side_a={"prompt": "adder", "stop_on_response": True, "max_steps": 4})
        """,
        "agents/tools/add.py": """
            from standardagents import define_tool

            @define_tool
            def add(a: int = 1, b: int = 2) -> str:
                '''Add two integers.

                Args:
                    a: The first number.
                    b: The second number.
                '''
                return str(a + b)
        """,
    })


@pytest.fixture
def server(model: Model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from server_fixtures import serve_app

    monkeypatch.setenv("STUB_KEY", "sk-stub")
    with OpenAIStub(model) as stub:
        yield from serve_app(_project(tmp_path, stub.base_url), f"sqlite+aiosqlite:///{tmp_path / 'resume.db'}")


async def _read(c: httpx.AsyncClient, url: str, out: list[dict[str, Any]], opened: asyncio.Event, *,
                until: str = "done", headers: dict[str, str] | None = None,
                params: dict[str, str] | None = None) -> None:
    """Collect a stream's events into ``out`` until one of type ``until`` (inclusive)."""
    async with asyncio.timeout(30), aconnect_sse(c, "GET", url, headers=dict(headers or {}), params=params) as source:
        assert source.response.status_code == 200, await source.response.aread()
        async for sse in source.aiter_sse():
            event = json.loads(sse.data)
            if sse.id:
                assert int(sse.id) == event["id"]
            out.append(event)
            if event["type"] == "connected":
                opened.set()
            if event["type"] == until:
                return


def _real(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] != "connected"]


async def _start_turn(c: httpx.AsyncClient, leaver: list[dict[str, Any]] | None = None,
                      ) -> tuple[str, list[dict[str, Any]], asyncio.Task[None]]:
    """A thread, a reference client that reads it from the start to ``done``, and a turn
    (with ``leaver``: a second client that reads until the tool starts, then leaves)."""
    r = await c.post(f"{API}/threads", json={"agent": "helper"})
    assert r.status_code == 201, r.text
    tid = str(r.json()["id"])
    everything: list[dict[str, Any]] = []
    opened = asyncio.Event()
    reference = asyncio.create_task(_read(c, f"{API}/threads/{tid}/stream", everything, opened))
    await opened.wait()
    if leaver is not None:
        here = asyncio.Event()
        leaving = asyncio.create_task(_read(c, f"{API}/threads/{tid}/stream", leaver, here, until="tool_call_started"))
        await here.wait()
    posted = await c.post(f"{API}/threads/{tid}/messages", json={"content": "add 2 and 3"})
    assert posted.status_code == 202, posted.text
    if leaver is not None:
        await leaving
    return tid, everything, reference


async def test_reconnecting_with_last_event_id_replays_exactly_the_missed_events(server: Any, model: Model) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        first: list[dict[str, Any]] = []
        # this client leaves as soon as the tool starts: it misses the rest of the step
        tid, everything, reference = await _start_turn(c, first)
        last_seen = _real(first)[-1]["id"]
        await asyncio.to_thread(model.second_asked.wait, 20)  # the tool's events are out by now
        again: list[dict[str, Any]] = []
        reopened = asyncio.Event()
        resumed = asyncio.create_task(_read(c, f"{API}/threads/{tid}/stream", again, reopened,
                                            headers={"Last-Event-ID": str(last_seen)}))
        await reopened.wait()
        model.resume.set()  # the rest of the turn arrives live
        await resumed
        await reference
    missed = [e for e in _real(everything) if e["id"] > last_seen]
    assert _real(again) == missed
    ids = [e["id"] for e in _real(again)]
    assert ids == sorted(set(ids))
    assert [e["type"] for e in _real(again)].count("done") == 1 and again[-1]["type"] == "done"
    assert "tool_call_done" in [e["type"] for e in missed] and "message_chunk" in [e["type"] for e in missed]


async def test_websocket_after_replays_then_goes_live(server: Any, model: Model) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        tid, everything, reference = await _start_turn(c)
        await asyncio.to_thread(model.second_asked.wait, 20)
        after = next(e["id"] for e in everything if e["type"] == "execution_started")
        url = server.base_url.replace("http", "ws") + f"{API}/threads/{tid}/ws?after={after}"
        got: list[dict[str, Any]] = []
        async with ws_connect(url, additional_headers=server.headers) as ws:
            assert json.loads(await ws.recv())["type"] == "connected"
            model.resume.set()
            while not got or got[-1]["type"] != "done":
                got.append(json.loads(await asyncio.wait_for(ws.recv(), 20)))
        await reference
    assert got == [e for e in _real(everything) if e["id"] > after]


async def test_ids_older_than_retention_get_one_lagged_event(model: Model, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from server_fixtures import serve_app

    monkeypatch.setenv("STUB_KEY", "sk-stub")
    monkeypatch.setenv("STANDARDAGENTS_EVENT_LOG_KEEP", "3")
    model.resume.set()
    with OpenAIStub(model) as stub:
        for server in serve_app(_project(tmp_path, stub.base_url), f"sqlite+aiosqlite:///{tmp_path / 'lag.db'}"):
            async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
                tid, first_turn, reference = await _start_turn(c)
                await reference
                # a second turn; the log keeps only its newest events (whole batches)
                second_turn: list[dict[str, Any]] = []
                opened = asyncio.Event()
                reading = asyncio.create_task(_read(c, f"{API}/threads/{tid}/stream", second_turn, opened,
                                                    headers={"Last-Event-ID": str(_real(first_turn)[-1]["id"])}))
                await opened.wait()
                await c.post(f"{API}/threads/{tid}/messages", json={"content": "and again"})
                await reading
                late: list[dict[str, Any]] = []
                await _read(c, f"{API}/threads/{tid}/stream", late, asyncio.Event(), until="lagged",
                            headers={"Last-Event-ID": str(_real(first_turn)[0]["id"])})
                recent: list[dict[str, Any]] = []
                await _read(c, f"{API}/threads/{tid}/stream", recent, asyncio.Event(),
                            headers={"Last-Event-ID": str(_real(second_turn)[-2]["id"])})
    assert [e["type"] for e in late] == ["connected", "lagged"]
    assert late[1]["data"]["reason"] == "expired" and late[1]["id"] == 0
    # within retention, replay still works
    assert _real(recent) == _real(second_turn)[-1:]


@pytest.mark.parametrize("value", ["abc", "-4", "1.5", str(2**63)])
async def test_a_malformed_last_event_id_is_refused_with_400(server: Any, value: str) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        tid = (await c.post(f"{API}/threads", json={"agent": "helper"})).json()["id"]
        by_header = await c.get(f"{API}/threads/{tid}/stream", headers={"Last-Event-ID": value})
        by_query = await c.get(f"{API}/threads/{tid}/stream", params={"after": value})
    assert by_header.status_code == 400 and "Last-Event-ID" in by_header.json()["error"]["message"]
    assert by_query.status_code == 400 and "after" in by_query.json()["error"]["message"]


async def _colours(c: httpx.AsyncClient, out: list[dict[str, Any]], opened: asyncio.Event, last: str,
                   params: dict[str, str] | None = None) -> None:
    """The user stream's events until the colour value becomes ``last``."""
    async with asyncio.timeout(30), aconnect_sse(c, "GET", f"{API}/users/me/stream", params=params) as source:
        async for sse in source.aiter_sse():
            event = json.loads(sse.data)
            out.append(event)
            opened.set()
            if event["data"].get("key") == "colour" and event["data"].get("value") == last:
                return


async def test_user_stream_after_replays_value_changes(server: Any) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        seen: list[dict[str, Any]] = []
        opened = asyncio.Event()
        reader = asyncio.create_task(_colours(c, seen, opened, "green"))
        await opened.wait()
        assert (await c.put(f"{API}/users/me/values/colour", json={"value": "green"})).status_code < 300
        await reader
        mark = seen[-1]["id"]
        await c.put(f"{API}/users/me/values/colour", json={"value": "blue"})
        again: list[dict[str, Any]] = []
        await _colours(c, again, asyncio.Event(), "blue", {"after": str(mark)})
    colours = [e["data"]["value"] for e in again if e["data"].get("key") == "colour"]
    assert mark and colours == ["blue"] and all(e["id"] > mark for e in again if e["id"])
