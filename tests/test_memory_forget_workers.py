"""Forgetting a user on `standardagents serve --workers 2` on PostgreSQL: one
``DELETE /api/users/{id}/data`` through one worker stops the user's turn running on the other,
removes every row of theirs, and leaves neither worker able to send their events again: their
threads' streams are gone (``Last-Event-ID`` included) and a replay of the user's own stream
holds nothing from before, although each worker kept those events in memory for replay. The
command line's ``standardagents memory forget-user`` asks both serving workers the same."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from httpx_sse import aconnect_sse

from standardagents.relay import asyncpg_dsn
from standardagents.store import open_store
from standardagents.testing.openai_stub import OpenAIStub, StubReply
from test_server_event_order import PROJECT as TALK_PROJECT
from test_server_event_order import two_workers
from test_server_workers import (
    EXE,
    HOLD_PROJECT,
    WORKER,
    _admin_token,
    _env_without_openai,
    _stubbed_model,
    _Watch,
    _Workers,
    _write_files,
)
from test_server_workers import database as database  # the fixture

#: the account itself stays (the person may still sign in)
ACCOUNT_TABLES = {"users", "api_tokens"}


async def _user(database: str, name: str) -> tuple[str, dict[str, str]]:
    """A user of their own and the headers of their API token."""
    store = open_store(database)
    await store.open()
    try:
        user = await store.create_user(name)
        _, token = await store.create_api_token(user.id, "tests")
    finally:
        await store.close()
    return user.id, {"Authorization": f"Bearer {token}"}


async def _talk(workers: _Workers, pid: str, auth: dict[str, str], text: str) -> str:
    """A thread of the user's on worker ``pid`` with one finished turn; its id."""
    thread = (await workers.request(pid, "POST", "/api/threads", json={"agent": "talker"}, headers=auth)).json()["id"]
    sent = await workers.request(pid, "POST", f"/api/threads/{thread}/messages", json={"content": text}, headers=auth)
    assert sent.status_code == 202, sent.text
    deadline = time.monotonic() + 30
    while True:
        found = await workers.request(pid, "GET", f"/api/threads/{thread}/messages", headers=auth)
        if [m["role"] for m in found.json()["messages"]][-1:] == ["assistant"]:
            return str(thread)
        assert time.monotonic() < deadline, "the turn did not finish"
        await asyncio.sleep(0.05)


async def _user_events(workers: _Workers, pid: str, auth: dict[str, str], marker: str) -> list[tuple[str, Any]]:
    """What the user's own stream on worker ``pid`` sends a client resuming after id 0, up to a
    value set through the same worker once the stream is open (the marker): the replay, then
    that live event, as ``(type, key)``."""
    client = await workers.on(pid)
    seen: list[tuple[str, Any]] = []
    try:
        async with aconnect_sse(client, "GET", "/api/users/me/stream", headers={**auth, "Last-Event-ID": "0"},
                                timeout=httpx.Timeout(30, read=None)) as source:
            assert source.response.status_code == 200 and source.response.headers[WORKER] == pid

            async def read() -> None:
                async for sse in source.aiter_sse():
                    event = sse.json()
                    if not event.get("id"):
                        continue  # connected: for this client only
                    seen.append((event["type"], event["data"].get("key")))
                    if event["data"].get("key") == marker:
                        return

            reader = asyncio.create_task(read())
            try:
                put = await workers.request(pid, "PUT", f"/api/users/me/values/{marker}", json={"value": 1},
                                            headers=auth)
                assert put.status_code == 200
                await asyncio.wait_for(reader, 20)
            finally:
                reader.cancel()
                with contextlib.suppress(BaseException):
                    await reader
    finally:
        workers.back(pid, client)
    return seen


async def _stream_status(workers: _Workers, pid: str, url: str, headers: dict[str, str]) -> int:
    """The status a stream request to worker ``pid`` is answered with (its body is not read)."""
    client = await workers.on(pid)
    try:
        async with client.stream("GET", url, headers=headers) as response:
            assert response.headers[WORKER] == pid
            return response.status_code
    finally:
        workers.back(pid, client)


def _text(value: Any) -> str:
    if isinstance(value, memoryview | bytes):
        return bytes(value).decode(errors="replace")
    return str(value)


async def _rows_naming(database: str, needles: list[str]) -> dict[str, int]:
    """Rows of every table of the database that name one of ``needles``, by table."""
    conn = await asyncpg.connect(asyncpg_dsn(database))
    try:
        tables = [r["tablename"] for r in await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'alembic_version'")]
        out: dict[str, int] = {}
        for table in tables:
            for row in await conn.fetch(f'SELECT * FROM "{table}"'):
                text = " ".join(_text(v) for v in row.values())
                if any(n in text for n in needles):
                    out[table] = out.get(table, 0) + 1
        return out
    finally:
        await conn.close()


async def test_forgetting_a_user_through_one_worker_stops_their_turn_on_the_other_and_leaves_nothing(
        database: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    admin = await _admin_token(database)
    target, auth = await _user(database, "forgotten")
    with OpenAIStub() as stub:
        _write_files(project, {**TALK_PROJECT, **HOLD_PROJECT, **_stubbed_model(stub.base_url)})
        stub.queue("the first reply", "the second reply", StubReply(tool_calls=[("hold", "{}")]))
        async with two_workers(project, database, admin) as workers:
            one, other = await workers.discover()
            threads = [await _talk(workers, one, auth, "I live in Lyon"), await _talk(workers, other, auth, "I like tea")]
            for pid in (one, other):  # the user's own stream: an event kept in each worker's memory
                await workers.request(pid, "PUT", "/api/users/me/values/secret", json={"value": "kept"}, headers=auth)
            held = (await workers.request(other, "POST", "/api/threads", json={"agent": "holder"},
                                          headers=auth)).json()["id"]
            threads.append(held)
            watch = _Watch(await workers.on(other), held)
            try:
                await watch.opened()
                sent = await workers.request(other, "POST", f"/api/threads/{held}/messages", json={"content": "hold on"},
                                             headers=auth)
                await watch.until("tool_call_started", name="hold")
                # before: a replay on either worker sends the user's kept event first
                for pid in (one, other):
                    assert ("user_value_changed", "secret") in await _user_events(workers, pid, auth, f"before-{pid}")

                report = await workers.request(one, "DELETE", f"/api/users/{target}/data")
                assert report.status_code == 200, report.text
                await watch.until("done", executionId=sent.json()["executionId"])
            finally:
                await watch.close()
            body = report.json()
            assert (sorted(body["threads"]), body["stopped"], body["workers"]) == (
                sorted(threads), [held], {"asked": 1, "confirmed": 1})
            # every table: nothing of theirs but the account
            naming = await _rows_naming(database, [target, *threads])
            assert {t: n for t, n in naming.items() if t not in ACCOUNT_TABLES} == {}
            # no stream of their threads on either worker, resumed from the start or not
            for pid in (one, other):
                for thread in threads:
                    for who in (auth, {}):  # the user, and the admin
                        status = await _stream_status(workers, pid, f"/api/threads/{thread}/stream",
                                                      {**who, "Last-Event-ID": "0"})
                        assert status == 404, (pid, thread)
                    # the user's own stream, resumed from the start on each worker: only what came after
            # (this worker's new event, and the other's when it was written first)
            for pid in (one, other):
                seen = await _user_events(workers, pid, auth, f"after-{pid}")
                assert ("user_value_changed", f"after-{pid}") in seen
                assert {name for _type, name in seen} <= {f"after-{one}", f"after-{other}"}, seen


async def test_forgetting_a_user_from_the_command_line_empties_both_serving_workers_memory(
        database: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    admin = await _admin_token(database)
    target, auth = await _user(database, "forgotten")
    with OpenAIStub() as stub:
        _write_files(project, {**TALK_PROJECT, **_stubbed_model(stub.base_url)})
        async with two_workers(project, database, admin) as workers:
            one, other = await workers.discover()
            for pid in (one, other):
                await workers.request(pid, "PUT", "/api/users/me/values/secret", json={"value": "kept"}, headers=auth)
            cli = await asyncio.create_subprocess_exec(
                str(EXE), "memory", "forget-user", target, "--project", str(project), "--database-url", database,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env_without_openai())
            stdout, stderr = await asyncio.wait_for(cli.communicate(), 120)
            assert cli.returncode == 0, stderr.decode()
            assert json.loads(stdout)["workers"] == {"asked": 2, "confirmed": 2}
            for pid in (one, other):
                assert await _user_events(workers, pid, auth, f"after-{pid}") == [("user_value_changed", f"after-{pid}")]
