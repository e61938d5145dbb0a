"""Scale-out: `standardagents serve --workers 2` on PostgreSQL. A client's live stream sees a
turn whichever worker runs it, and every turn completes with its messages."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from standardagents.relay import asyncpg_dsn
from standardagents.store import open_store
from store_fixtures import postgres_url

EXE = Path(sys.executable).parent / "standardagents"
QUICKSTART = Path(__file__).parent.parent / "examples" / "quickstart"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """A database of its own on the test server (created and dropped here)."""
    base = postgres_url()
    try:
        admin = await asyncpg.connect(asyncpg_dsn(base), timeout=3)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        reason = f"PostgreSQL not reachable at {base} ({type(exc).__name__}: {exc})"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    name = f"sa_workers_{uuid.uuid4().hex[:10]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base.rsplit("/", 1)[0] + "/" + name
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def _start_server(project: Path, port: int, database: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """``standardagents serve`` with two workers, in its own process group."""
    return subprocess.Popen([str(EXE), "serve", str(project), "--port", str(port), "--workers", "2",
                             "--database-url", database], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)


def _stop_server(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


async def _stream_until_done(client: httpx.AsyncClient, thread_id: str, ready: asyncio.Event) -> list[str]:
    types: list[str] = []
    async with client.stream("GET", f"/api/threads/{thread_id}/stream") as response:
        response.raise_for_status()
        ready.set()
        buffer = ""
        async for text in response.aiter_text():
            buffer += text
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                data = next((line[6:] for line in frame.splitlines() if line.startswith("data: ")), None)
                if data is None:
                    continue
                event = json.loads(data)
                types.append(event["type"])
                if event["type"] == "done":
                    return types
    return types


async def test_two_workers_on_postgresql_stream_every_turn_to_any_client(database: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".standardagents", "__pycache__"))
    store = open_store(database)
    await store.open()
    user = await store.create_user("worker-test", is_admin=True)
    _, token = await store.create_api_token(user.id, "tests")
    await store.close()
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = _start_server(project, port, database, env)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            for _ in range(300):
                try:
                    if (await client.get("/api/agents")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the server did not start")
            for _ in range(8):
                # separate connections, so the stream and the POST may land on different workers
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as watcher:
                    thread = (await client.post("/api/threads", json={"agent": "assistant"})).json()["id"]
                    ready = asyncio.Event()
                    watching = asyncio.create_task(_stream_until_done(watcher, thread, ready))
                    await asyncio.wait_for(ready.wait(), 10)
                    sent = await client.post(f"/api/threads/{thread}/messages", json={"content": "What is 2 + 3?"})
                    assert sent.status_code == 202
                    types = await asyncio.wait_for(watching, 30)
                    assert "message_created" in types and types[-1] == "done", types
                    messages = (await client.get(f"/api/threads/{thread}/messages")).json()["messages"]
                    assert messages[0]["content"] == "What is 2 + 3?" and messages[-1]["role"] == "assistant"
    finally:
        _stop_server(proc)
