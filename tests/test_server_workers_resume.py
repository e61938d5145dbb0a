"""Resumable streams across `standardagents serve --workers 2` on PostgreSQL: a client that
drops mid-turn and comes back with ``Last-Event-ID``, on either worker, sees every event of
the turn once, in order, ending with exactly one ``done``."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from standardagents.testing.openai_stub import OpenAIStub
from test_server_stream_resume import Model
from test_server_workers import WORKER, _admin_token, _stubbed_model, _two_workers, _write_files
from test_server_workers import database as database  # the fixture

PROJECT = {
    "agents/agents/adder.py": (
        "from standardagents import define_agent\n"
        "adder = define_agent(name='adder', side_a={'prompt': 'adder_prompt', 'stop_on_response': True})\n"),
    "agents/prompts/adder_prompt.py": (
        "from standardagents import define_prompt\n"
        "adder_prompt = define_prompt(name='adder_prompt', prompt='Add.', model='stubbed', tools=['add'])\n"),
    "agents/tools/add.py": (
        "from standardagents import define_tool\n\n\n"
        "@define_tool\n"
        "def add(a: int = 1, b: int = 2) -> str:\n"
        "    '''Add two integers.\n\n    Args:\n        a: The first.\n        b: The second.\n    '''\n"
        "    return str(a + b)\n"),
}


class Stream:
    """A thread's SSE stream read in the background (optionally resuming after an id)."""

    def __init__(self, client: httpx.AsyncClient, thread_id: str, last_event_id: int | None = None) -> None:
        self.client = client
        self.events: list[dict[str, Any]] = []
        self.worker: str | None = None
        self._headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
        self._open = asyncio.Event()
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._read(thread_id))

    async def _read(self, thread_id: str) -> None:
        async with aconnect_sse(self.client, "GET", f"/api/threads/{thread_id}/stream", headers=self._headers) as source:
            source.response.raise_for_status()
            self.worker = source.response.headers[WORKER]
            self._open.set()
            async for sse in source.aiter_sse():
                async with self._changed:
                    self.events.append(sse.json())
                    self._changed.notify_all()

    async def opened(self) -> str:
        await asyncio.wait_for(self._open.wait(), 10)
        assert self.worker is not None
        return self.worker

    async def until(self, type_: str) -> list[dict[str, Any]]:
        """Every event so far, once one of this type arrived."""
        async def seen() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: any(e["type"] == type_ for e in self.events))
        await asyncio.wait_for(seen(), 30)
        return [e for e in self.events if e["type"] != "connected"]

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


async def test_a_client_reconnecting_on_either_worker_sees_every_event_once(database: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    token = await _admin_token(database)
    models = [Model(), Model()]
    current: list[Model] = []
    with OpenAIStub(lambda body: current[-1](body)) as stub:
        _write_files(project, {**PROJECT, **_stubbed_model(stub.base_url)})
        async with _two_workers(project, database, token) as workers:
            one, two = await workers.discover()
            # the turn runs on `one`; the client first reads from `first`, then comes back on `then`
            for model, (first, then) in zip(models, ((two, one), (one, two)), strict=True):
                current.append(model)
                thread = (await workers.request(one, "POST", "/api/threads", json={"agent": "adder"})).json()["id"]
                reference = Stream(await workers.on(two), thread)
                dropped = Stream(await workers.on(first), thread)
                resumed: Stream | None = None
                try:
                    await reference.opened()
                    assert await dropped.opened() == first
                    sent = await workers.request(one, "POST", f"/api/threads/{thread}/messages", json={"content": "2+3?"})
                    assert sent.status_code == 202
                    last_seen = (await dropped.until("tool_call_started"))[-1]["id"]
                    await dropped.close()  # gone mid-turn
                    await asyncio.to_thread(model.second_asked.wait, 30)
                    resumed = Stream(await workers.on(then), thread, last_seen)
                    assert await resumed.opened() == then
                    model.resume.set()
                    got = await resumed.until("done")
                    everything = await reference.until("done")
                finally:
                    for stream in (reference, dropped, resumed):
                        if stream is not None:
                            await stream.close()
                missed = [e for e in everything if e["id"] > last_seen]
                assert got == missed, (first, then)
                assert [e["type"] for e in got].count("done") == 1 and got[-1]["type"] == "done"
                assert got[-1]["data"]["executionId"] == sent.json()["executionId"]
                assert "tool_call_done" in [e["type"] for e in got] and "message_chunk" in [e["type"] for e in got]
