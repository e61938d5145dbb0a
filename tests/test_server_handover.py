"""Rolling restart of `standardagents serve --workers 2` on PostgreSQL: SIGTERM a worker with
turns in flight (the supervisor starts a new one), then the other: the turns that could not
finish within ``--graceful-timeout`` are handed over and resumed by a live worker, so every
accepted message gets exactly one reply, nothing fails, and each execution has one ``done``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from standardagents.relay import asyncpg_dsn
from standardagents.testing.openai_stub import OpenAIStub, StubReply
from test_server_workers import (
    WORKER,
    _admin_token,
    _env_without_openai,
    _free_port,
    _start_server,
    _stop_server,
    _stubbed_model,
    _wait_ready,
    _Workers,
    _write_files,
)
from test_server_workers import database as database  # the fixture

PROJECT = {
    "agents/agents/talker.py": (
        "from standardagents import define_agent\n"
        "talker = define_agent(name='talker', side_a={'prompt': 'talker_prompt', 'stop_on_response': True})\n"),
    "agents/prompts/talker_prompt.py": (
        "from standardagents import define_prompt\n"
        "talker_prompt = define_prompt(name='talker_prompt', prompt='Answer.', model='stubbed')\n"),
}


async def _new_worker(workers: _Workers, gone: set[str]) -> str:
    """The pid of a worker not in ``gone`` that answers (the supervisor's replacement)."""
    for _ in range(600):
        try:
            async with httpx.AsyncClient(base_url=workers.base_url, headers=workers.headers, timeout=5) as client:
                response = await client.get("/readyz")
                pid = response.headers.get(WORKER)
                if response.status_code == 200 and pid and pid not in gone:
                    return pid
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("no new worker came up")


async def test_sigterm_hands_running_turns_over_and_every_message_gets_one_reply(database: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    token = await _admin_token(database)
    port = _free_port()
    release = threading.Event()

    def respond(body: dict[str, Any]) -> StubReply:
        question = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        return StubReply(text=f"reply to {question}", hold=release)

    with OpenAIStub(respond) as stub:
        _write_files(project, {**PROJECT, **_stubbed_model(stub.base_url)})
        proc = _start_server(project, port, database, _env_without_openai(), "--graceful-timeout", "1")
        workers = _Workers(f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"})
        accepted: dict[str, tuple[str, str]] = {}  # execution id -> (thread, question)
        try:
            async with httpx.AsyncClient(base_url=workers.base_url, headers=workers.headers, timeout=30) as client:
                await _wait_ready(client)
            one, two = await workers.discover()
            for pid in (one, two):
                for n in range(3):
                    thread = (await workers.request(pid, "POST", "/api/threads", json={"agent": "talker"})).json()["id"]
                    question = f"question {pid}-{n}"
                    sent = await workers.request(pid, "POST", f"/api/threads/{thread}/messages", json={"content": question})
                    assert sent.status_code == 202
                    accepted[sent.json()["executionId"]] = (thread, question)
            await stub.wait_requests_async(6, timeout=30)  # six turns wait for the model
            os.kill(int(one), signal.SIGTERM)
            # `one`'s three turns are handed over: `two` asks the model again for them
            await stub.wait_requests_async(9, timeout=60)
            await _new_worker(workers, {one, two})  # the supervisor's replacement of `one` answers
            os.kill(int(two), signal.SIGTERM)
            # now every turn runs on the replacement
            await stub.wait_requests_async(15, timeout=60)
            release.set()
            await workers.aclose()
            workers = _Workers(workers.base_url, workers.headers)
            async with httpx.AsyncClient(base_url=workers.base_url, headers=workers.headers, timeout=30) as client:
                for execution_id, (thread, _question) in accepted.items():
                    # the thread's whole stream from the log: every event once, then live to its done
                    dones = []
                    async with client.stream("GET", f"/api/threads/{thread}/stream",
                                             headers={"Last-Event-ID": "0"}) as response:
                        assert response.status_code == 200
                        async for line in response.aiter_lines():
                            if line.startswith("data: "):
                                event = json.loads(line[6:])
                                if event["type"] == "done":
                                    dones.append(event["data"])
                                    if event["data"]["executionId"] == execution_id:
                                        break
                    assert [d["executionId"] for d in dones] == [execution_id]
                    assert dones[0]["stopReason"] == "complete", dones
        finally:
            release.set()
            await workers.aclose()
            _stop_server(proc)
        conn = await asyncpg.connect(asyncpg_dsn(database))
        try:
            for execution_id, (thread, question) in accepted.items():
                status = await conn.fetchval("SELECT status FROM executions WHERE id = $1", execution_id)
                assert status == "complete"
                rows = await conn.fetch("SELECT role, content FROM messages WHERE thread_id = $1 ORDER BY seq", thread)
                assert [(r["role"], r["content"]) for r in rows] == [("user", question), ("assistant", f"reply to {question}")]
        finally:
            await conn.close()
