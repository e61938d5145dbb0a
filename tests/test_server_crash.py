"""Crashes under load: `standardagents serve --workers 2` on PostgreSQL runs many concurrent
turns against a slow stub model, each with a tool round (an idempotent tool and one with a
side effect), while a worker is SIGKILLed, then the whole server, then the workers are
replaced one by one (SIGHUP: each gets SIGTERM and hands its turns over). On SQLite, one
process (no supervisor) is SIGKILLed mid-turn and started again.

Every accepted message must get exactly one final reply (the turn resumed, not failed); the
side-effect tool must run at most once per call; a client following each thread, reconnecting
with ``Last-Event-ID`` whenever its connection breaks, must see each event once, in order,
and exactly one ``done`` per execution, also for a turn that ended just as the whole server
was SIGKILLed (its ``done`` is written with the turn's end, or at recovery).

``SA_CRASH_TURNS`` sets the concurrent turns of each phase (default 100), ``SA_CRASH_REPEAT`` how many times the whole scenario runs (default 1) and
``SA_CRASH_LEASE`` the execution lease in seconds (default 2).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from standardagents.testing.openai_stub import OpenAIStub, StubReply
from test_server_workers import (
    EXE,
    WORKER,
    _admin_token,
    _env_without_openai,
    _free_port,
    _stubbed_model,
    _wait_ready,
    _write_files,
)
from test_server_workers import database as database  # the fixture

TURNS = int(os.environ.get("SA_CRASH_TURNS") or 100)
REPEAT = int(os.environ.get("SA_CRASH_REPEAT") or 1)
#: seconds a model reply takes
MODEL_DELAY = 0.3
#: the execution lease (seconds) the server runs with: a dead turn is found within about it
LEASE = float(os.environ.get("SA_CRASH_LEASE") or 2.0)

PROJECT = {
    "agents/agents/clerk.py": (
        "from standardagents import define_agent\n"
        "clerk = define_agent(name='clerk', side_a={'prompt': 'clerk_prompt', 'stop_on_response': True,"
        " 'max_steps': 6})\n"),
    "agents/prompts/clerk_prompt.py": (
        "from standardagents import define_prompt\n"
        "clerk_prompt = define_prompt(name='clerk_prompt', prompt='File it.', model='stubbed',"
        " tools=['lookup', 'record'])\n"),
    "agents/tools/lookup.py": (
        "from standardagents import define_tool\n\n\n"
        "@define_tool(idempotent=True)\n"
        "def lookup(key: str) -> str:\n"
        "    '''Look a key up (no side effect).\n\n    Args:\n        key: The key.\n    '''\n"
        "    return 'value-of-' + key\n"),
    "agents/tools/record.py": (
        "import os\n\n"
        "from standardagents import define_tool\n\n\n"
        "@define_tool\n"
        "def record(call: str) -> str:\n"
        "    '''Append a line to the ledger (a side effect: not safe to repeat).\n\n"
        "    Args:\n        call: The call's tag.\n    '''\n"
        "    with open(os.environ['SA_CRASH_LEDGER'], 'a') as ledger:\n"
        "        ledger.write(call + '\\n')\n"
        "    return 'recorded ' + call\n"),
}


class Model:
    """Each turn: both tools at once, then (after their results) a final answer naming the turn.
    Every reply takes :data:`MODEL_DELAY`; each tool-call reply tags ``record`` uniquely, so
    the ledger counts runs per call. ``asked`` counts first-step requests."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.serial = 0
        self.asked = 0

    def __call__(self, body: dict[str, Any]) -> StubReply:
        messages = body.get("messages", [])
        last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        content = messages[last_user]["content"]
        turn = content if isinstance(content, str) else json.dumps(content)
        if not any(m.get("role") == "tool" for m in messages[last_user:]):
            with self.lock:
                self.serial += 1
                self.asked += 1
                tag = f"{turn}#{self.serial}"
            return StubReply(tool_calls=[("lookup", json.dumps({"key": turn})),
                                         ("record", json.dumps({"call": tag}))], delay=MODEL_DELAY)
        return StubReply(text=f"Filed {turn}.", delay=MODEL_DELAY, chunk_size=3)

    def first_steps(self) -> int:
        with self.lock:
            return self.asked


class Follower:
    """A client following one thread's SSE stream, reconnecting with ``Last-Event-ID`` (the
    last id it saw) whenever the connection breaks, as a browser does."""

    def __init__(self, base_url: str, headers: dict[str, str], thread_id: str) -> None:
        self.base_url = base_url
        self.headers = headers
        self.thread_id = thread_id
        self.events: list[tuple[int, dict[str, Any]]] = []
        self.others: list[dict[str, Any]] = []  # events without an id (connected, lagged)
        self.connections = 0
        self.reconnects: list[int | None] = []  # the Last-Event-ID of each connection
        self.changed = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    @property
    def last_id(self) -> int | None:
        return self.events[-1][0] if self.events else None

    async def _run(self) -> None:
        async with httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(30, read=None)) as client:
            while True:
                headers = dict(self.headers)
                if self.last_id is not None:
                    headers["Last-Event-ID"] = str(self.last_id)
                try:
                    async with client.stream("GET", f"/api/threads/{self.thread_id}/stream",
                                             headers=headers) as response:
                        if response.status_code != 200:
                            raise httpx.TransportError(f"status {response.status_code}")
                        self.connections += 1
                        self.reconnects.append(self.last_id)
                        await self._frames(response)
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)  # the server is down or restarting: try again

    async def _frames(self, response: httpx.Response) -> None:
        buffer = ""
        async for text in response.aiter_text():
            buffer += text
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                fields = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
                if "data" not in fields:
                    continue
                event = json.loads(fields["data"])
                if "id" in fields:
                    self.events.append((int(fields["id"]), event))
                else:
                    self.others.append(event)
                self.changed.set()

    def dones(self) -> collections.Counter[str]:
        return collections.Counter(str(e["data"].get("executionId")) for _, e in self.events if e["type"] == "done")

    async def until_done(self, execution_id: str) -> None:
        async with asyncio.timeout(20):
            while execution_id not in self.dones():
                self.changed.clear()
                await self.changed.wait()

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task


def _start(project: Path, port: int, database: str, env: dict[str, str], log: Path,
           workers: int) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([str(EXE), "serve", str(project), "--port", str(port), "--workers", str(workers),
                                 "--database-url", database, "--graceful-timeout", "0.2"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _kill_all(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=20)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)  # the supervisor, which stops its workers
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _kill_all(proc)


async def _until(check: Callable[[], bool], what: str, within: float = 300.0) -> None:
    """Poll a condition the test cannot be told of (a count in the stub's thread, a log line),
    for up to ``within`` seconds: on a loaded machine a rolling restart's new workers take long
    to import and warm up."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def _until_ended(client: httpx.AsyncClient, execution_id: str) -> None:
    for _ in range(1200):
        try:
            if (await client.get(f"/api/executions/{execution_id}")).json()["status"] != "running":
                return
        except httpx.TransportError:  # a kept-alive connection to the worker just killed
            pass
        await asyncio.sleep(0.05)
    raise AssertionError(f"execution {execution_id} did not end")


async def _logged(client: httpx.AsyncClient, thread_id: str, last: int,
                  quiet: float = 30) -> list[tuple[int, dict[str, Any]]]:
    """A thread's logged events from the start (``after=0``) up to id ``last`` (or what came
    within ``quiet`` seconds)."""
    events: list[tuple[int, dict[str, Any]]] = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(quiet), client.stream("GET", f"/api/threads/{thread_id}/stream",
                                                      params={"after": "0"}) as response:
            buffer = ""
            async for text in response.aiter_text():
                buffer += text
                while "\n\n" in buffer:
                    frame, buffer = buffer.split("\n\n", 1)
                    fields = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
                    if "id" in fields:
                        events.append((int(fields["id"]), json.loads(fields["data"])))
                        if events[-1][0] >= last:
                            return events
    return events


def _worker_pids(log: Path) -> list[int]:
    return [int(p) for p in re.findall(r"Started server process \[(\d+)\]", log.read_text(errors="replace"))]


@pytest.mark.parametrize("repetition", range(REPEAT))
async def test_turns_survive_worker_kill_server_kill_and_rolling_restart(
        database: str, tmp_path: Path, repetition: int) -> None:
    await _scenario(database, tmp_path, 2, ["kill-worker", "kill-server", "rolling"])


@pytest.mark.parametrize("repetition", range(REPEAT))
async def test_turns_survive_a_sigkilled_single_process_server_on_sqlite(tmp_path: Path, repetition: int) -> None:
    await _scenario(f"sqlite+aiosqlite:///{tmp_path / 'crash.db'}", tmp_path, 1, ["kill-server"])


async def _scenario(database: str, tmp_path: Path, workers: int, phases: list[str]) -> None:
    project = tmp_path / "project"
    ledger = tmp_path / "ledger.txt"
    ledger.touch()
    log = tmp_path / "server.log"
    token = await _admin_token(database)
    headers = {"Authorization": f"Bearer {token}"}
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = _env_without_openai()
    env |= {"STANDARDAGENTS_EXECUTION_LEASE": str(LEASE), "SA_CRASH_LEDGER": str(ledger)}
    model = Model()
    accepted: dict[str, list[str]] = {}  # thread id -> its turns' execution ids
    with OpenAIStub(model) as stub:
        _write_files(project, {**PROJECT, **_stubbed_model(stub.base_url)})
        proc = _start(project, port, database, env, log, workers)
        followers: list[Follower] = []
        try:
            async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as client:
                await _wait_ready(client)
                threads = [(await client.post("/api/threads", json={"agent": "clerk"})).json()["id"]
                           for _ in range(TURNS)]
                followers = [Follower(base_url, headers, t) for t in threads]
                await _until(lambda: all(f.connections for f in followers), "the streams to open")

                async def phase(name: str, crash: Callable[[], Any]) -> None:
                    """One turn on every thread at once; ``crash`` once about half have asked the model."""
                    before = model.first_steps()
                    sends = await asyncio.gather(*(client.post(f"/api/threads/{t}/messages",
                                                               json={"content": f"{name}-{i}"})
                                                   for i, t in enumerate(threads)))
                    for t, sent in zip(threads, sends, strict=True):
                        assert sent.status_code == 202, sent.text
                        accepted.setdefault(t, []).append(sent.json()["executionId"])
                    await _until(lambda: model.first_steps() - before >= max(1, TURNS // 2), "the turns to ask the model")
                    await crash()
                    for t in threads:  # every turn ends in the store (polled: nothing to await)
                        await _until_ended(client, accepted[t][-1])
                    waits = await asyncio.gather(*(f.until_done(accepted[f.thread_id][-1]) for f in followers),
                                                 return_exceptions=True)
                    missing = []
                    for f, waited in zip(followers, waits, strict=True):
                        if waited is not None:  # what the follower saw last, and what the log has
                            logged = await _logged(client, f.thread_id, 1 << 62, quiet=2)
                            missing.append((f.thread_id, accepted[f.thread_id][-1],
                                            [(i, e["type"]) for i, e in f.events[-4:]],
                                            [(i, e["type"]) for i, e in logged[-6:]]))
                    assert not missing, (name, missing)

                async def kill_one_worker() -> None:
                    pid = int((await client.get("/api/agents")).headers[WORKER])
                    os.kill(pid, signal.SIGKILL)

                async def kill_server() -> None:
                    nonlocal proc
                    await asyncio.to_thread(_kill_all, proc)
                    proc = _start(project, port, database, env, log, workers)
                    await _wait_ready(client)

                async def rolling_restart() -> None:
                    started = len(_worker_pids(log))
                    os.kill(proc.pid, signal.SIGHUP)  # each worker replaced in turn, the old one SIGTERMed
                    await _until(lambda: len(_worker_pids(log)) >= started + 2, "both workers to be replaced")

                crashes = {"kill-worker": kill_one_worker, "kill-server": kill_server, "rolling": rolling_restart}
                for name in phases:
                    await phase(name, crashes[name])

            # a new client: kept-alive connections to the retired workers are closed
            async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as client:
                for thread in threads:
                    for execution_id in accepted[thread]:
                        record = (await client.get(f"/api/executions/{execution_id}")).json()
                        assert record["status"] == "complete", record
                    messages = (await client.get(f"/api/threads/{thread}/messages")).json()["messages"]
                    replies = [m["content"] for m in messages
                               if m["role"] == "assistant" and m.get("content") and not m.get("tool_calls")]
                    turns = [m["content"] for m in messages if m["role"] == "user"]
                    assert replies == [f"Filed {turn}." for turn in turns], (thread, [
                        (m["role"], m.get("content"), m.get("seq"), (m.get("metadata") or {}).get("executionId"),
                         (m.get("metadata") or {}).get("step")) for m in messages])
                    assert len(turns) == len(phases)
                # what the event log kept is what the followers saw under the same ids
                for follower in followers:
                    seen = dict(follower.events)
                    logged = await _logged(client, follower.thread_id, max(seen))
                    differ = [(i, e, seen.get(i)) for i, e in logged if i >= follower.events[0][0] and seen.get(i) != e]
                    if differ:
                        print("missed or changed:", [(i, e["type"], g is None) for i, e, g in differ])
                        print("connections after:", follower.reconnects)
                        print("seen:", [(i, e["type"]) for i, e in follower.events])
                        print("logged:", [(i, e["type"]) for i, e in logged])
                    assert logged and not differ, follower.thread_id
        finally:
            for follower in followers:
                await follower.close()
            _stop(proc)

    runs = collections.Counter(ledger.read_text().split())
    assert runs and max(runs.values()) == 1, [c for c, n in runs.items() if n > 1]
    for follower in followers:
        ids = [i for i, _ in follower.events]
        assert ids == sorted(set(ids)), (follower.thread_id, ids)  # each event once, in order
        assert follower.dones() == collections.Counter(accepted[follower.thread_id]), follower.thread_id
        assert not [e for e in follower.others if e["type"] == "lagged"], follower.thread_id
