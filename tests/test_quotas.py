"""Quotas and the shared provider rate limit hold across two server processes sharing one
PostgreSQL database: a user's turns past its limit are 429 with Retry-After whichever process
takes them, and the two processes together stay within a model's requests per window at the
OpenAI HTTP stub."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from server_fixtures import write_project
from standardagents.store import SQLStore
from standardagents.testing import OpenAIStub, StubReply
from store_fixtures import own_postgres_database

EXE = Path(sys.executable).parent / "standardagents"


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """A PostgreSQL database of its own (created and dropped here)."""
    async for url in own_postgres_database("sa_quota"):
        yield url


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Servers:
    """Two ``standardagents serve`` processes on one database, with ``env`` added."""

    def __init__(self, project: Path, database: str, env: dict[str, str]) -> None:
        self.ports = [_free_port(), _free_port()]
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        self.procs = [subprocess.Popen([str(EXE), "serve", str(project), "--port", str(port), "--database-url",
                                        database], env={**base_env, **env}, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, text=True, start_new_session=True)
                      for port in self.ports]
        self.urls = [f"http://127.0.0.1:{port}" for port in self.ports]

    async def ready(self) -> None:
        async with httpx.AsyncClient() as c:
            for url in self.urls:
                for _ in range(600):
                    try:
                        if (await c.get(f"{url}/healthz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.05)
                else:
                    raise AssertionError(f"the server at {url} did not start")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def servers_of(tmp_path: Path) -> Iterator[list[_Servers]]:
    made: list[_Servers] = []
    try:
        yield made
    finally:
        for servers in made:
            servers.stop()


async def _token(database: str) -> str:
    async with SQLStore(database) as store:
        user = await store.create_user(f"user-{uuid.uuid4().hex[:6]}")
        _, token = await store.create_api_token(user.id, "tests")
    return token


async def _turn(url: str, token: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
        thread = await c.post("/api/threads", json={"agent": "helper"})
        assert thread.status_code == 201, thread.text
        return await c.post(f"/api/threads/{thread.json()['id']}/messages?wait=true", json={"content": "hello"})


async def test_turns_per_minute_are_counted_across_two_processes(
        tmp_path: Path, database: str, servers_of: list[_Servers]) -> None:
    servers = _Servers(write_project(tmp_path / "project"), database,
                       {"STANDARDAGENTS_QUOTAS": json.dumps({"turnsPerMinute": 3})})
    servers_of.append(servers)
    await servers.ready()
    for _attempt in range(3):
        token = await _token(database)
        minute = time.time() // 60
        answers = [await _turn(servers.urls[i % 2], token) for i in range(6)]
        if time.time() // 60 == minute:  # all in one minute's window (else: again, as another user)
            break
    statuses = [r.status_code for r in answers]
    refused = [r for r in answers if r.status_code == 429]
    assert sorted(statuses) == [200, 200, 200, 429, 429, 429]
    assert {r.json()["error"]["code"] for r in refused} == {"quota_exceeded"}
    assert all(1 <= int(r.headers["retry-after"]) <= 60 for r in refused)
    assert all("has started 3 turns this minute, the limit of turnsPerMinute" in r.json()["error"]["message"] for r in refused)


STUBBED = {
    "agents/models/stubbed.py": "",
    "agents/prompts/plain_prompt.py": """
        from standardagents import define_prompt
        plain_prompt = define_prompt(name="plain_prompt", prompt="You answer briefly.", model="stubbed")
    """,
    "agents/agents/helper.py": """
        from standardagents import define_agent
        helper = define_agent(name="helper", type="ai_human",
                              side_a={"prompt": "plain_prompt", "stop_on_response": True})
    """,
}


@pytest.fixture
def stub() -> Iterator[tuple[OpenAIStub, list[float]]]:
    arrivals: list[float] = []
    lock = threading.Lock()

    def respond(_body: dict[str, object]) -> StubReply:
        with lock:
            arrivals.append(time.time())
        return StubReply(text="ok")

    with OpenAIStub(respond) as s:
        yield s, arrivals


async def test_two_processes_together_stay_within_the_models_requests_per_window(
        tmp_path: Path, database: str, servers_of: list[_Servers], stub: tuple[OpenAIStub, list[float]]) -> None:
    openai_stub, arrivals = stub
    files = {**STUBBED, "agents/models/stubbed.py": (
        "from standardagents import define_model\n"
        f"stubbed = define_model(name='stubbed', provider='openai', model='stub-model', "
        f"base_url={openai_stub.base_url!r}, max_retries=0)\n")}
    servers = _Servers(write_project(tmp_path / "project", files), database,
                       {"STANDARDAGENTS_RATE_LIMITS": json.dumps({"stubbed": {"requests": 2, "per": 2}})})
    servers_of.append(servers)
    await servers.ready()
    token = await _token(database)
    answers = await asyncio.gather(*(_turn(servers.urls[i % 2], token) for i in range(6)))
    assert [r.status_code for r in answers] == [200] * 6
    assert len(arrivals) == 6
    # the limit holds where requests are let through: at most 2 in each 2-second window, so the
    # request 4 places later was let through at least one whole window later. The stub sees each
    # request a little after that (a request let through at a window's end may arrive in the
    # next), so the arrivals are compared with a second of slack; unlimited, all 6 arrive at once
    ordered = sorted(arrivals)
    gaps = [later - earlier for earlier, later in zip(ordered, ordered[4:], strict=False)]
    assert min(gaps) >= 2 - 1.0, ordered
