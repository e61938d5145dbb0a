"""Event ids across `standardagents serve --workers 2` on PostgreSQL: on every connection, to
either worker, a thread's ids only grow, and a client reconnecting with ``Last-Event-ID``
after any id it saw is sent every later event, whichever worker produced them.

A busy thread gets messages through both workers at once (some start turns, most wait in
its inbox and run later on the worker that took them), so its events come from both
processes, interleaved within milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from standardagents.testing.openai_stub import OpenAIStub, StubReply
from test_server_workers import (
    WORKER,
    _admin_token,
    _env_without_openai,
    _free_port,
    _start_server,
    _stop_server,
    _stubbed_model,
    _Workers,
    _write_files,
)
from test_server_workers import database as database  # the fixture

PROJECT = {
    "agents/agents/talker.py": (
        "from standardagents import define_agent\n"
        "talker = define_agent(name='talker', side_a={'prompt': 'talk_prompt', 'stop_on_response': True})\n"),
    "agents/prompts/talk_prompt.py": (
        "from standardagents import define_prompt\n"
        "talk_prompt = define_prompt(name='talk_prompt', prompt='Talk.', model='stubbed')\n"),
}

#: a streamed reply of many small chunks: each turn publishes a burst of events
REPLY = StubReply(text="word " * 60, chunk_size=3)
ROUNDS = 4
MESSAGES = 6


@contextlib.asynccontextmanager
async def two_workers(project: Path, database: str, token: str, env: dict[str, str] | None = None,
                      ready_within: float = 90.0) -> AsyncIterator[_Workers]:
    """``serve --workers 2`` of ``project`` on ``database``, once it answers (a loaded machine
    starts two workers slowly); stopped on the way out."""
    port = _free_port()
    proc = _start_server(project, port, database, _env_without_openai() if env is None else env)
    workers = _Workers(f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"})
    try:
        deadline = time.monotonic() + ready_within
        async with httpx.AsyncClient(base_url=workers.base_url, headers=workers.headers, timeout=30) as client:
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get("/api/agents")).status_code == 200:
                        break
                assert time.monotonic() < deadline, "the server did not start"
                await asyncio.sleep(0.1)
        yield workers
    finally:
        await workers.aclose()
        _stop_server(proc)


class _Stream:
    """A thread's SSE stream on one worker, read in the background: the ids and types seen."""

    def __init__(self, client: httpx.AsyncClient, thread_id: str, after: int | None = None) -> None:
        self.client = client
        self.thread_id = thread_id
        self.after = after
        self.events: list[tuple[int, str, dict[str, Any]]] = []
        self.worker: str | None = None
        self._open = asyncio.Event()
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        headers = {} if self.after is None else {"Last-Event-ID": str(self.after)}
        async with aconnect_sse(self.client, "GET", f"/api/threads/{self.thread_id}/stream",
                                headers=headers, timeout=httpx.Timeout(30, read=None)) as source:
            source.response.raise_for_status()
            self.worker = source.response.headers[WORKER]
            self._open.set()
            async for sse in source.aiter_sse():
                event = sse.json()
                if not event["id"]:
                    continue  # connected, lagged: for this client only
                async with self._changed:
                    self.events.append((event["id"], event["type"], event["data"]))
                    self._changed.notify_all()

    async def opened(self) -> str:
        await asyncio.wait_for(self._open.wait(), 10)
        assert self.worker is not None
        return self.worker

    async def until(self, test: Any, timeout: float = 20.0) -> None:  # noqa: ASYNC109 - a bounded wait
        async def wait() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: test(self.events))
        await asyncio.wait_for(wait(), timeout)

    def ids(self) -> list[int]:
        return [event_id for event_id, _t, _d in self.events]

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


def _dones(executions: set[str]) -> Any:
    return lambda events: executions <= {d.get("executionId") for _i, t, d in events if t == "done"}


def _backwards(ids: list[int]) -> list[tuple[int, int]]:
    return [(a, b) for a, b in itertools.pairwise(ids) if b <= a]


async def _send(workers: _Workers, pid: str, thread: str, n: int) -> str:
    sent = await workers.request(pid, "POST", f"/api/threads/{thread}/messages", json={"content": f"message {n}"})
    assert sent.status_code == 202, sent.text
    return str(sent.json()["executionId"])


async def _round(workers: _Workers, one: str, two: str, thread: str) -> None:
    streams = [_Stream(await workers.on(pid), thread) for pid in (one, two)]
    try:
        assert [await s.opened() for s in streams] == [one, two]
        executions = set(await asyncio.gather(*(_send(workers, (one, two)[n % 2], thread, n)
                                                for n in range(MESSAGES))))
        for stream in streams:
            await stream.until(_dones(executions))
    finally:
        for stream in streams:
            await stream.close()
    for stream in streams:
        assert _backwards(stream.ids()) == [], f"ids went backwards on the stream of worker {stream.worker}"
    assert streams[0].ids() == streams[1].ids()
    every = streams[0].ids()
    # a client that saw any of these ids and reconnects (to either worker) gets every later one
    picks = sorted({every[0], every[len(every) // 3], every[len(every) // 2], every[-2]})
    for n, after in enumerate(picks):
        pid = (one, two)[n % 2]
        again = _Stream(await workers.on(pid), thread, after=after)
        try:
            await again.opened()
            await again.until(lambda events: bool(events) and events[-1][0] >= every[-1], timeout=10)
        finally:
            await again.close()
        assert again.ids() == [i for i in every if i > after], f"resumed after {after} on worker {pid}"


async def test_ids_grow_on_every_connection_and_resume_gets_every_later_event(database: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    token = await _admin_token(database)
    with OpenAIStub(lambda _body: REPLY) as stub:
        _write_files(project, {**PROJECT, **_stubbed_model(stub.base_url)})
        async with two_workers(project, database, token) as workers:
            one, two = await workers.discover()
            thread = (await workers.request(one, "POST", "/api/threads", json={"agent": "talker"})).json()["id"]
            for _ in range(ROUNDS):
                await _round(workers, one, two, thread)
