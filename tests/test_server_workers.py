"""Scale-out: `standardagents serve --workers 2` on PostgreSQL. A client's live stream sees a
turn whichever worker runs it, and every turn completes with its messages."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from httpx_sse import aconnect_sse

from standardagents.relay import asyncpg_dsn
from standardagents.store import open_store
from store_fixtures import own_postgres_database

EXE = Path(sys.executable).parent / "standardagents"
QUICKSTART = Path(__file__).parent.parent / "examples" / "quickstart"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """A PostgreSQL database of its own (created and dropped here)."""
    async for url in own_postgres_database("sa_workers"):
        yield url


def _start_server(project: Path, port: int, database: str, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    """``standardagents serve`` with two workers (and ``extra`` options), in its own process group."""
    return subprocess.Popen([str(EXE), "serve", str(project), "--port", str(port), "--workers", "2",
                             "--database-url", database, *extra], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)


def _write_files(project: Path, files: dict[str, str]) -> None:
    """A project's files written below ``project`` (relative path -> text)."""
    for rel, text in files.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)


def _stubbed_model(base_url: str) -> dict[str, str]:
    """The ``stubbed`` model file: the OpenAI HTTP stub at ``base_url``, no retries."""
    return {"agents/models/stubbed.py": (
        "from standardagents import define_model\n"
        f"stubbed = define_model(name='stubbed', provider='openai', model='stub-model', base_url={base_url!r},"
        " max_retries=0)\n")}


def _env_without_openai() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}


def _stop_server(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


WORKER = "x-standardagents-worker"


async def _wait_ready(client: httpx.AsyncClient) -> None:
    for _ in range(300):
        try:
            if (await client.get("/api/agents")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("the server did not start")


class _Workers:
    """Clients each on one kept-alive connection, by the worker (pid) it reaches. The server
    closes idle connections after a few seconds and a new one may reach the other worker,
    so :meth:`on` checks a client's worker right before its use (the response header of
    the request that matters is asserted as well)."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        self.base_url = base_url
        self.headers = headers
        self.idle: dict[str, list[httpx.AsyncClient]] = {}
        self.made: list[httpx.AsyncClient] = []

    async def _probe(self, client: httpx.AsyncClient) -> str:
        return (await client.get("/api/agents")).headers[WORKER]

    async def discover(self) -> tuple[str, str]:
        """The two workers' pids."""
        for _ in range(60):
            if len(self.idle) == 2:
                break
            client = httpx.AsyncClient(base_url=self.base_url, headers=self.headers, timeout=30,
                                       limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
            self.made.append(client)
            self.idle.setdefault(await self._probe(client), []).append(client)
        assert len(self.idle) == 2, "did not reach both workers"
        one, two = self.idle
        return one, two

    async def on(self, pid: str) -> httpx.AsyncClient:
        """A client whose connection reaches worker ``pid`` now (give it back with :meth:`back`)."""
        for _ in range(60):
            pool = self.idle.setdefault(pid, [])
            if pool:
                client = pool.pop()
            else:
                client = httpx.AsyncClient(base_url=self.base_url, headers=self.headers, timeout=30,
                                           limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
                self.made.append(client)
            reached = await self._probe(client)
            if reached == pid:
                return client
            self.idle.setdefault(reached, []).append(client)
        raise AssertionError(f"could not reach worker {pid}")

    def back(self, pid: str, client: httpx.AsyncClient) -> None:
        self.idle.setdefault(pid, []).append(client)

    async def request(self, pid: str, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One request sent to worker ``pid``; the response says which worker answered."""
        client = await self.on(pid)
        try:
            response = await client.request(method, url, **kwargs)
        finally:
            self.back(pid, client)
        assert response.headers[WORKER] == pid
        return response

    async def aclose(self) -> None:
        for client in self.made:
            await client.aclose()


@contextlib.asynccontextmanager
async def _two_workers(project: Path, database: str, token: str, *extra: str,
                       env: dict[str, str] | None = None) -> AsyncIterator[_Workers]:
    """``serve --workers 2`` of ``project`` on ``database``, ready; its clients act as ``token``'s
    user. Stopped (and the clients closed) on the way out."""
    port = _free_port()
    proc = _start_server(project, port, database, _env_without_openai() if env is None else env, *extra)
    workers = _Workers(f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"})
    try:
        async with httpx.AsyncClient(base_url=workers.base_url, headers=workers.headers, timeout=30) as client:
            await _wait_ready(client)
        yield workers
    finally:
        await workers.aclose()
        _stop_server(proc)


class _Watch:
    """A thread's SSE stream read in the background; events can be awaited by type."""

    def __init__(self, client: httpx.AsyncClient, thread_id: str) -> None:
        self.client = client
        self.thread_id = thread_id
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.worker: str | None = None
        self._open = asyncio.Event()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async with aconnect_sse(self.client, "GET", f"/api/threads/{self.thread_id}/stream") as source:
            source.response.raise_for_status()
            self.worker = source.response.headers[WORKER]
            self._open.set()
            async for sse in source.aiter_sse():
                await self.events.put(sse.json())

    async def opened(self) -> str:
        await asyncio.wait_for(self._open.wait(), 10)
        assert self.worker is not None
        return self.worker

    async def until(self, type_: str, **data: Any) -> dict[str, Any]:
        """The next event of that type whose data has these values (earlier ones are skipped)."""
        async def find() -> dict[str, Any]:
            while True:
                event = await self.events.get()
                if event["type"] == type_ and all(event["data"].get(k) == v for k, v in data.items()):
                    return event
        return await asyncio.wait_for(find(), 20)

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


async def _admin_token(database: str) -> str:
    store = open_store(database)
    await store.open()
    user = await store.create_user("worker-test", is_admin=True)
    _, token = await store.create_api_token(user.id, "tests")
    await store.close()
    return token


async def test_two_workers_on_postgresql_stream_every_turn_to_any_client(database: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".standardagents", "__pycache__"))
    token = await _admin_token(database)
    async with _two_workers(project, database, token) as workers:
        one, two = await workers.discover()
        for round_ in range(4):
            # the stream on one worker, the message posted to the other (both ways)
            poster, watcher = (one, two) if round_ % 2 == 0 else (two, one)
            thread = (await workers.request(poster, "POST", "/api/threads", json={"agent": "assistant"})).json()["id"]
            watch = _Watch(await workers.on(watcher), thread)
            try:
                assert await watch.opened() == watcher
                sent = await workers.request(poster, "POST", f"/api/threads/{thread}/messages",
                                             json={"content": "What is 2 + 3?"})
                assert sent.status_code == 202 and sent.headers[WORKER] != watch.worker
                await watch.until("message_created")
                await watch.until("done", executionId=sent.json()["executionId"])
            finally:
                await watch.close()
            messages = (await workers.request(poster, "GET", f"/api/threads/{thread}/messages")).json()["messages"]
            assert messages[0]["content"] == "What is 2 + 3?" and messages[-1]["role"] == "assistant"


HOLD_PROJECT = {
    "agents/agents/holder.py": (
        "from standardagents import define_agent\n"
        "holder = define_agent(name='holder', side_a={'prompt': 'holder_prompt'})\n"),
    "agents/prompts/holder_prompt.py": (
        "from standardagents import define_prompt\n"
        "holder_prompt = define_prompt(name='holder_prompt', prompt='x', model='stubbed', tools=['hold'])\n"),
    "agents/tools/hold.py": (
        "import asyncio\n"
        "from standardagents import define_tool\n\n\n"
        "@define_tool\n"
        "async def hold() -> str:\n"
        "    '''Runs until the turn is stopped.'''\n"
        "    await asyncio.sleep(3600)\n"
        "    return 'never'\n"),
}


async def test_stop_delete_and_running_work_across_two_workers(database: str, tmp_path: Path) -> None:
    from standardagents.testing.openai_stub import OpenAIStub, StubReply

    project = tmp_path / "project"
    token = await _admin_token(database)
    with OpenAIStub() as stub:
        _write_files(project, {**HOLD_PROJECT, **_stubbed_model(stub.base_url)})
        stub.queue(StubReply(tool_calls=[("hold", "{}")]), "the queued one", StubReply(tool_calls=[("hold", "{}")]))
        async with _two_workers(project, database, token) as workers:
            runner, other = await workers.discover()
            thread = (await workers.request(runner, "POST", "/api/threads", json={"agent": "holder"})).json()["id"]
            watch = _Watch(await workers.on(other), thread)
            try:
                assert await watch.opened() == other
                sent = await workers.request(runner, "POST", f"/api/threads/{thread}/messages", json={"content": "hold on"})
                assert sent.status_code == 202
                first = sent.json()["executionId"]
                await watch.until("tool_call_started", name="hold")
                # `running` says the same on both workers (each request's header names its worker)
                assert (await workers.request(other, "GET", f"/api/threads/{thread}")).json()["running"] is True
                listed = (await workers.request(other, "GET", "/api/threads")).json()["threads"]
                assert next(t for t in listed if t["id"] == thread)["running"] is True
                # a message for a thread busy on the other worker is accepted (stored) at once
                queued = await workers.request(other, "POST", f"/api/threads/{thread}/messages",
                                               json={"content": "and this"}, timeout=10)
                assert queued.status_code == 202 and queued.json()["queued"] is True
                # stop, asked of the worker that does not run the turn
                stopped = await workers.request(other, "POST", f"/api/threads/{thread}/stop")
                assert stopped.json()["stopped"] is True
                done = await watch.until("done", executionId=first)
                assert done["data"]["stopReason"] == "cancelled"
                # the queued message runs next, under the id its 202 returned
                await watch.until("done", executionId=queued.json()["executionId"], stopReason="complete")
            finally:
                await watch.close()
            listed = (await workers.request(other, "GET", f"/api/threads/{thread}/messages")).json()["messages"]
            assert [m["content"] for m in listed if m["role"] == "user"] == ["hold on", "and this"]
            assert (await workers.request(other, "GET", f"/api/threads/{thread}")).json()["running"] is False

            # DELETE on one worker while the other runs the thread's turn: the turn ends first
            doomed = (await workers.request(runner, "POST", "/api/threads", json={"agent": "holder"})).json()["id"]
            watch = _Watch(await workers.on(other), doomed)
            try:
                await watch.opened()
                sent = await workers.request(runner, "POST", f"/api/threads/{doomed}/messages", json={"content": "hold on"})
                await watch.until("tool_call_started", name="hold")
                assert (await workers.request(other, "DELETE", f"/api/threads/{doomed}")).status_code == 204
                await watch.until("done", executionId=sent.json()["executionId"])
            finally:
                await watch.close()
            assert (await workers.request(runner, "GET", f"/api/threads/{doomed}")).status_code == 404
            conn = await asyncpg.connect(asyncpg_dsn(database))
            try:
                for table in ("messages", "executions", "tool_results"):
                    count = await conn.fetchval(f"SELECT count(*) FROM {table} WHERE thread_id = $1", doomed)
                    assert count == 0, table
            finally:
                await conn.close()
