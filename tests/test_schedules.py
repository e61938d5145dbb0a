"""Schedules: recurring turns claimed once per tick across workers, made, listed, paused,
resumed and deleted over the API, with clear errors for bad input."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from server_fixtures import LiveServer, serve_app, write_project
from standardagents.relay import asyncpg_dsn
from standardagents.store import SQLStore
from store_fixtures import own_postgres_database

EXE = Path(sys.executable).parent / "standardagents"
EVERY_SECOND = {"agents/schedules/every_second.py": """
    from standardagents.definitions.schedule import define_schedule
    every_second = define_schedule("every_second", agent="helper", message="hello", interval=1)
"""}


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """A PostgreSQL database of its own (created and dropped here)."""
    async for url in own_postgres_database("sa_sched"):
        yield url


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(project: Path, port: int, database: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.Popen([str(EXE), "serve", str(project), "--port", str(port), "--workers", "2",
                             "--database-url", database, "--graceful-timeout", "2"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, start_new_session=True)


def _stop(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


async def _runs(conn: asyncpg.Connection) -> list[tuple[int, str, str | None]]:
    rows = await conn.fetch("SELECT tick, status, thread_id FROM schedule_runs ORDER BY tick")
    return [(r["tick"], r["status"], r["thread_id"]) for r in rows]


async def _until_runs(conn: asyncpg.Connection, count: int, within: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        try:
            if len([r for r in await _runs(conn) if r[1] != "claimed"]) >= count:
                return
        except asyncpg.UndefinedTableError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"fewer than {count} ticks ran in {within} s")


async def test_every_second_on_two_workers_runs_each_tick_once_over_a_restart(tmp_path: Path, database: str) -> None:
    project = write_project(tmp_path / "project", EVERY_SECOND)
    port = _free_port()
    server = _serve(project, port, database)
    conn = await asyncpg.connect(asyncpg_dsn(database))
    try:
        await _until_runs(conn, 3)
        _stop(server)
        before = len(await _runs(conn))
        server = _serve(project, port, database)
        await _until_runs(conn, before + 3)
        _stop(server)
        runs = await _runs(conn)
        threads = await conn.fetch("SELECT metadata FROM threads")
        ticks = Counter(int(json.loads(t["metadata"])["tick"]) for t in threads)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
        await conn.close()
    started = [tick for tick, status, _ in runs if status == "started"]
    assert all(tick % 1000 == 0 for tick, _, _ in runs)
    assert len(started) >= 6
    # one thread (one turn) per tick run, none for a tick twice, and only for ticks run
    assert ticks == Counter(started)
    assert {status for _, status, _ in runs} <= {"started", "skipped"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    yield from serve_app(write_project(tmp_path / "project"), f"sqlite+aiosqlite:///{tmp_path / 'sched.db'}")


async def test_created_schedule_answers_201_with_its_id_and_runs_its_agent(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        r = await c.post("/api/schedules", json={"agent": "helper", "interval": 1, "message": "hello"})
        assert r.status_code == 201, r.text
        made = r.json()
        assert (made["id"].startswith("sch_"), made["agent"], made["interval"], made["overlap"], made["paused"]) == (
            True, "helper", 1, "skip", False)
        for _ in range(100):
            runs = (await c.get(f"/api/schedules/{made['id']}/runs")).json()["runs"]
            if any(run["status"] == "started" for run in runs):
                break
            await asyncio.sleep(0.1)
        run = next(run for run in runs if run["status"] == "started")
        thread = (await c.get(f"/api/threads/{run['threadId']}")).json()
        listed = (await c.get("/api/schedules")).json()["schedules"]
    assert (thread["agent_id"], thread["metadata"]["schedule"]) == ("helper", made["id"])
    assert [s["id"] for s in listed] == [made["id"]]


async def test_paused_schedule_runs_no_tick_until_resumed(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        made = (await c.post("/api/schedules", json={"agent": "helper", "interval": 1, "message": "hi",
                                                     "paused": True})).json()
        paused_runs = (await c.get(f"/api/schedules/{made['id']}/runs")).json()["runs"]
        r = await c.post(f"/api/schedules/{made['id']}/resume")
        assert (r.status_code, r.json()["paused"]) == (200, False)
        for _ in range(100):
            runs = (await c.get(f"/api/schedules/{made['id']}/runs")).json()["runs"]
            if runs:
                break
            await asyncio.sleep(0.1)
        paused = (await c.post(f"/api/schedules/{made['id']}/pause")).json()
    assert paused_runs == []
    assert len(runs) >= 1
    assert paused["paused"] is True


async def test_deleted_schedule_is_gone_from_the_list(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as c:
        made = (await c.post("/api/schedules", json={"agent": "helper", "cron": "0 9 * * 1",
                                                     "timezone": "Europe/Paris", "message": "weekly"})).json()
        r = await c.delete(f"/api/schedules/{made['id']}")
        again = await c.delete(f"/api/schedules/{made['id']}")
        listed = (await c.get("/api/schedules")).json()
    assert r.json() == {"id": made["id"], "deleted": True}
    assert again.status_code == 404
    assert listed == {"schedules": []}


@pytest.mark.parametrize(("body", "message"), [
    ({"agent": "helper", "cron": "61 * * * *", "message": "x"},
     "'cron': '61 * * * *' is not a valid cron expression (five fields: minute hour day month weekday)"),
    ({"agent": "helper", "interval": 5, "cron": "* * * * *", "message": "x"},
     "give exactly one of 'cron' (an expression) and 'interval' (seconds)"),
    ({"agent": "helper", "interval": 5, "timezone": "Mars/Olympus", "message": "x"},
     "'timezone': unknown time zone 'Mars/Olympus' (an IANA name such as 'Europe/Paris' or 'UTC')"),
    ({"agent": "nobody", "interval": 5, "message": "x"},
     "field 'agent': unknown agent 'nobody'; known: helper, internal"),
    ({"agent": "helper", "interval": 5, "message": "x", "overlap": "pile"},
     "field 'overlap' must be one of skip, queue, cancel (got 'pile')"),
])
async def test_bad_schedule_is_refused_naming_the_field(server: LiveServer, body: dict[str, object],
                                                        message: str) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as c:
        r = await c.post("/api/schedules", json=body)
        listed = (await c.get("/api/schedules")).json()
    assert (r.status_code, r.json()["error"]["message"]) == (422, message)
    assert listed == {"schedules": []}


async def test_project_schedule_is_stored_under_its_name(tmp_path: Path) -> None:
    from standardagents import Runtime
    from standardagents.service.scheduler import sync_defined
    from standardagents.store import serviceops

    project = write_project(tmp_path / "project", EVERY_SECOND)
    store = SQLStore(f"sqlite:///{tmp_path / 'defined.db'}")
    rt = await Runtime.open(project, store=store)
    try:
        await sync_defined(rt)
        await sync_defined(rt)
        [record] = await serviceops.run_op(store, serviceops.list_schedules, None, write=False)
    finally:
        await rt.aclose()
    assert (record.id, record.name, record.agent, record.interval_s, record.source) == (
        "sch_every_second", "every_second", "helper", 1, "project")


def test_cli_adds_pauses_lists_and_deletes_a_schedule(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from standardagents.cli import app as cli_app

    project = write_project(tmp_path / "project", EVERY_SECOND)
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(cli_app, ["schedules", *args, "--project", str(project)])
        assert result.exit_code == 0, result.output
        return result.output

    added = run("add", "helper", "good morning", "--cron", "0 8 * * *", "--timezone", "Europe/Paris")
    made = added.split()[1].rstrip(":")
    run("pause", "every_second")
    listed = json.loads(run("list", "--json"))
    run("delete", made)
    after = json.loads(run("list", "--json"))
    refused = runner.invoke(cli_app, ["schedules", "delete", "every_second", "--project", str(project)])
    assert {(s["id"], s["cron"], s["timezone"], s["paused"]) for s in listed} == {
        (made, "0 8 * * *", "Europe/Paris", False), ("sch_every_second", None, "UTC", True)}
    assert [s["id"] for s in after] == ["sch_every_second"]
    assert refused.exit_code == 1
    assert "schedule 'every_second' is defined in the project: remove its file (or pause it)" in refused.output


@pytest.fixture
def held_stub() -> Iterator[tuple[Any, threading.Event]]:
    from standardagents.testing import OpenAIStub, StubReply

    release = threading.Event()
    with OpenAIStub(lambda _body: StubReply(text="done", hold=release)) as stub:
        try:
            yield stub, release
        finally:
            release.set()


def _held_project(root: Path, base_url: str) -> Path:
    return write_project(root, {"agents/models/default.py": f"""
        from standardagents import define_model
        default = define_model(name="default", provider="openai", model="stub-model", base_url="{base_url}",
                               max_retries=0)
    """, "agents/agents/helper.py": """
        from standardagents import define_agent
        helper = define_agent(name="helper", type="ai_human",
                              side_a={"prompt": "plain_prompt", "stop_on_response": True})
    """})


async def _runs_until(c: httpx.AsyncClient, schedule_id: str, done: Any) -> list[dict[str, Any]]:
    for _ in range(200):
        runs: list[dict[str, Any]] = (await c.get(f"/api/schedules/{schedule_id}/runs")).json()["runs"]
        if done(runs):
            return sorted(runs, key=lambda r: r["tick"])
        await asyncio.sleep(0.05)
    raise AssertionError(f"the runs never matched: {runs}")


async def test_tick_while_the_previous_run_goes_is_skipped_with_overlap_skip(
        tmp_path: Path, held_stub: tuple[Any, threading.Event]) -> None:
    stub, release = held_stub
    for live in serve_app(_held_project(tmp_path / "project", stub.base_url), f"sqlite:///{tmp_path / 's.db'}"):
        async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers, timeout=30) as c:
            made = (await c.post("/api/schedules", json={"agent": "helper", "interval": 1, "message": "go",
                                                         "overlap": "skip"})).json()
            runs = await _runs_until(c, made["id"], lambda rs: len([r for r in rs if r["status"] == "skipped"]) >= 2)
            await c.post(f"/api/schedules/{made['id']}/pause")
            held = len(stub.requests)
            release.set()
    assert runs[0]["status"] == "started"
    assert {r["status"] for r in runs[1:]} == {"skipped"}
    assert held == 1


async def test_tick_while_the_previous_run_goes_cancels_it_with_overlap_cancel(
        tmp_path: Path, held_stub: tuple[Any, threading.Event]) -> None:
    stub, release = held_stub
    for live in serve_app(_held_project(tmp_path / "project", stub.base_url), f"sqlite:///{tmp_path / 'c.db'}"):
        async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers, timeout=30) as c:
            made = (await c.post("/api/schedules", json={"agent": "helper", "interval": 1, "message": "go",
                                                         "overlap": "cancel"})).json()
            runs = await _runs_until(c, made["id"], lambda rs: len([r for r in rs if r["status"] == "started"]) >= 2)
            await c.post(f"/api/schedules/{made['id']}/pause")
            first = (await c.get(f"/api/executions/{runs[0]['executionId']}")).json()
            release.set()
    assert [r["status"] for r in runs[:2]] == ["started", "started"]
    assert first["status"] == "cancelled"


async def test_project_schedule_message_built_by_a_function_is_sent(tmp_path: Path) -> None:
    files = {"agents/schedules/dated.py": """
        from standardagents.definitions.schedule import define_schedule

        async def build() -> str:
            return "report for " + "today"

        dated = define_schedule("dated", agent="helper", message=build, interval=1, same_thread=True)
    """}
    for live in serve_app(write_project(tmp_path / "project", files), f"sqlite:///{tmp_path / 'f.db'}"):
        async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers, timeout=30) as c:
            runs = await _runs_until(c, "sch_dated", lambda rs: len([r for r in rs if r["status"] == "started"]) >= 2)
            await c.post("/api/schedules/sch_dated/pause")
            started = [r for r in runs if r["status"] == "started"]
            messages = (await c.get(f"/api/threads/{started[0]['threadId']}/messages")).json()["messages"]
    assert started[0]["threadId"] == started[1]["threadId"]  # same_thread: one thread for every run
    assert [m["content"] for m in messages if m["role"] == "user"][:2] == ["report for today"] * 2
