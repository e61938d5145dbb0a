"""A turn runs once whatever the deployment: two real `standardagents serve` processes share one
PostgreSQL database, each in its own PID namespace (`unshare --pid`) with the same hostname, as
containers with host networking or one `hostname:` would be.

- Two live processes never take each other's turns: each is pid 1 of its namespace, and only
  the heartbeat tells whether the other is alive.
- A process stalled past the lease (SIGSTOP) or cut off from the database (a TCP proxy the
  test drops) has its turn taken over by the other; when it comes back it writes nothing
  more into that turn: one tool result per call, one final reply, one ``done``, and the
  non-idempotent tool ran once.

Skipped with the reason where the kernel refuses new PID namespaces.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from standardagents.records import ExecutionRecord
from standardagents.store import open_store
from standardagents.testing.openai_stub import OpenAIStub, StubReply
from standardagents.testing.proxy import CuttableProxy
from test_server_workers import (
    EXE,
    _admin_token,
    _env_without_openai,
    _free_port,
    _stubbed_model,
    _write_files,
)
from test_server_workers import database as database  # the fixture

#: the execution lease (seconds) both servers run with where a stalled server's turn must move
LEASE = 2.0
#: the lease where no turn may move: well above any stall a loaded test machine causes, while
#: a look for gone processes still runs every third of it
LONG_LEASE = 9.0

PROJECT = {
    "agents/agents/clerk.py": (
        "from standardagents import define_agent\n"
        "clerk = define_agent(name='clerk', side_a={'prompt': 'clerk_prompt', 'stop_on_response': True,"
        " 'max_steps': 6})\n"),
    "agents/prompts/clerk_prompt.py": (
        "from standardagents import define_prompt\n"
        "clerk_prompt = define_prompt(name='clerk_prompt', prompt='File it.', model='stubbed', tools=['record'])\n"),
    "agents/tools/record.py": (
        "import os\nimport time\n\n"
        "from standardagents import define_tool\n\n\n"
        "@define_tool(timeout=120)\n"
        "def record(call: str) -> str:\n"
        "    '''Write the call to the ledger (a side effect: not safe to repeat), once released.\n\n"
        "    Args:\n        call: The call's tag.\n    '''\n"
        "    ledger = os.environ['SA_LEDGER']\n"
        "    with open(ledger, 'a') as out:\n"
        "        out.write('start ' + call + '\\n')\n"
        "    deadline = time.monotonic() + 90\n"
        "    while not os.path.exists(ledger + '.release') and time.monotonic() < deadline:\n"
        "        time.sleep(0.02)\n"
        "    with open(ledger, 'a') as out:\n"
        "        out.write('done ' + call + '\\n')\n"
        "    return 'recorded ' + call\n"),
}

#: the result the taking server gives the call cut short (its tool is not idempotent)
NOT_RUN_AGAIN = "Error: interrupted by a restart; not run again"


def _namespaces_refused() -> str | None:
    """Why this machine cannot start a process in a PID namespace of its own (None: it can)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "no unshare command (util-linux)"
    probe = subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "true"], capture_output=True, text=True,
                           check=False)
    if probe.returncode != 0:
        return f"unshare --pid refused: {probe.stderr.strip() or probe.returncode}"
    return None


pytestmark = pytest.mark.skipif(bool(_namespaces_refused()), reason=_namespaces_refused() or "")


def _model(body: dict[str, Any]) -> StubReply:
    """Ask for the tool once per user message; answer once the tool's result is in."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return StubReply(text=f"filed ({last['content']})")
    return StubReply(tool_calls=[("record", '{"call": "c1"}')])


class Server:
    """One `serve` process, pid 1 of a PID namespace of its own; its output goes to a file."""

    def __init__(self, project: Path, database: str, log: Path, env: dict[str, str]) -> None:
        self.port = _free_port()
        self.log = log
        self.base_url = f"http://127.0.0.1:{self.port}"
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", str(EXE), "serve", str(project),
                 "--port", str(self.port), "--database-url", database],
                env=env, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def pid(self) -> int:
        """The serve process's pid as this (the parent) namespace sees it."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        assert len(children) == 1, children
        return int(children[0])

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGCONT)
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=20)


async def _ready(client: httpx.AsyncClient, server: Server) -> None:
    for _ in range(600):
        with contextlib.suppress(httpx.TransportError):
            if (await client.get(f"{server.base_url}/readyz")).status_code == 200:
                return
        assert server.proc.poll() is None, server.output()
        await asyncio.sleep(0.1)
    raise AssertionError(f"the server did not start:\n{server.output()}")


async def _until(what: str, check: Any, timeout: float = 60.0) -> Any:  # noqa: ASYNC109 - a bounded wait
    """Poll ``check`` (sync or async) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Cluster:
    """Two servers (``a``, ``b``) on one database, the model stub, the ledger and a store
    the test reads the outcome from."""

    def __init__(self, tmp_path: Path, database: str, stub: OpenAIStub, token: str, lease: float) -> None:
        self.project = tmp_path / "project"
        _write_files(self.project, {**PROJECT, **_stubbed_model(stub.base_url)})
        self.ledger = tmp_path / "ledger.txt"
        self.ledger.touch()
        self.env = {**_env_without_openai(), "SA_LEDGER": str(self.ledger),
                    "STANDARDAGENTS_EXECUTION_LEASE": str(lease)}
        self.database = database
        self.headers = {"Authorization": f"Bearer {token}"}
        self.tmp_path = tmp_path
        self.servers: list[Server] = []
        self.store = open_store(database)

    def start(self, name: str, database: str | None = None) -> Server:
        server = Server(self.project, database or self.database, self.tmp_path / f"{name}.log", self.env)
        self.servers.append(server)
        return server

    def ledger_lines(self) -> list[str]:
        return self.ledger.read_text().splitlines()

    def release_tool(self) -> None:
        Path(str(self.ledger) + ".release").touch()

    async def execution(self, execution_id: str) -> ExecutionRecord | None:
        return await self.store.get_execution(execution_id)

    async def outcome(self, thread_id: str, execution_id: str) -> dict[str, Any]:
        """What the thread holds: its messages (role, content), the execution and its ``done``s."""
        messages = await self.store.list_messages(thread_id)
        _floor, events = await self.store.read_events(thread_id, 0)
        dones = [e for e in events if e[1] == "done" and e[2].get("executionId") == execution_id]
        return {"messages": [(m.role, m.content if m.role != "assistant" or not m.tool_calls else "<calls>")
                             for m in messages],
                "record": await self.store.get_execution(execution_id), "dones": len(dones)}

    async def aclose(self) -> None:
        for server in self.servers:
            server.stop()
        await self.store.close()


@contextlib.asynccontextmanager
async def _cluster(tmp_path: Path, database: str,
                   lease: float = LEASE) -> AsyncIterator[tuple[Cluster, httpx.AsyncClient]]:
    token = await _admin_token(database)
    with OpenAIStub(_model) as stub:
        cluster = Cluster(tmp_path, database, stub, token, lease)
        await cluster.store.open()
        try:
            async with httpx.AsyncClient(headers=cluster.headers, timeout=30) as client:
                yield cluster, client
        finally:
            await cluster.aclose()


async def _start_turn(client: httpx.AsyncClient, server: Server) -> tuple[str, str]:
    thread = (await client.post(f"{server.base_url}/api/threads", json={"agent": "clerk"})).json()
    sent = await client.post(f"{server.base_url}/api/threads/{thread['id']}/messages", json={"content": "file c1"})
    assert sent.status_code in (200, 201, 202), sent.text
    return thread["id"], sent.json()["executionId"]


async def test_two_live_servers_with_one_hostname_never_take_each_others_turns(database: str, tmp_path: Path) -> None:
    async with _cluster(tmp_path, database, LONG_LEASE) as (cluster, client):
        a, b = cluster.start("a"), cluster.start("b")
        await _ready(client, a)
        await _ready(client, b)
        thread_id, execution_id = await _start_turn(client, a)
        await _until("the tool to start", lambda: "start c1" in cluster.ledger_lines())
        # both are pid 1 of their namespaces and share the hostname: meanwhile the other
        # server's heartbeat looks for gone processes twice (each look a third of a lease)
        await asyncio.sleep(0.8 * LONG_LEASE)
        assert "resuming execution" not in a.output() + b.output()
        running = await cluster.execution(execution_id)
        assert running is not None and running.status == "running"
        assert "resumedFrom" not in running.state
        assert running.epoch == 0
        cluster.release_tool()

        async def ended() -> bool:
            record = await cluster.execution(execution_id)
            return record is not None and record.status == "complete"

        await _until("the turn to end", ended)
        seen = await cluster.outcome(thread_id, execution_id)
        assert seen["messages"] == [("user", "file c1"), ("assistant", "<calls>"), ("tool", "recorded c1"),
                                    ("assistant", "filed (recorded c1)")]
        assert (seen["record"].epoch, seen["dones"]) == (0, 1)
        assert cluster.ledger_lines() == ["start c1", "done c1"]


async def _taken_over_and_finished(cluster: Cluster, execution_id: str) -> None:
    async def finished_elsewhere() -> bool:
        record = await cluster.execution(execution_id)
        return record is not None and record.status == "complete" and "resumedFrom" in record.state

    await _until("the other server to take the turn over and finish it", finished_elsewhere)


async def _lost_turn_wrote_nothing(cluster: Cluster, stalled: Server, thread_id: str, execution_id: str) -> None:
    """Once the stalled server is back and its tool returned, it stops the turn unwritten."""
    await _until("the tool of the stalled server to return", lambda: "done c1" in cluster.ledger_lines())
    await _until("the stalled server to see that its turn was taken over",
                 lambda: f"execution {execution_id} of thread {thread_id} was taken over" in stalled.output())
    seen = await cluster.outcome(thread_id, execution_id)
    assert seen["messages"] == [("user", "file c1"), ("assistant", "<calls>"), ("tool", NOT_RUN_AGAIN),
                                ("assistant", f"filed ({NOT_RUN_AGAIN})")]
    assert (seen["record"].status, seen["record"].epoch, seen["dones"]) == ("complete", 1, 1)
    # the tool's side effect happened once: on the stalled server, never again on the other
    assert cluster.ledger_lines() == ["start c1", "done c1"]


async def test_a_server_stopped_past_the_lease_writes_nothing_into_the_turn_taken_over(
        database: str, tmp_path: Path) -> None:
    async with _cluster(tmp_path, database) as (cluster, client):
        a, b = cluster.start("a"), cluster.start("b")
        await _ready(client, a)
        await _ready(client, b)
        thread_id, execution_id = await _start_turn(client, a)
        await _until("the tool to start", lambda: "start c1" in cluster.ledger_lines())
        os.kill(a.pid(), signal.SIGSTOP)
        try:
            await _taken_over_and_finished(cluster, execution_id)
            cluster.release_tool()
        finally:
            os.kill(a.pid(), signal.SIGCONT)
        await _lost_turn_wrote_nothing(cluster, a, thread_id, execution_id)


async def test_a_server_cut_off_from_the_database_writes_nothing_into_the_turn_taken_over(
        database: str, tmp_path: Path) -> None:
    url = httpx.URL(database.replace("postgresql://", "http://", 1))
    proxy = CuttableProxy((url.host, url.port or 5432))
    await proxy.start()
    try:
        async with _cluster(tmp_path, database) as (cluster, client):
            through_proxy = database.replace(f"{url.host}:{url.port or 5432}", f"127.0.0.1:{proxy.port}", 1)
            a, b = cluster.start("a", through_proxy), cluster.start("b")
            await _ready(client, a)
            await _ready(client, b)
            thread_id, execution_id = await _start_turn(client, a)
            await _until("the tool to start", lambda: "start c1" in cluster.ledger_lines())
            proxy.drop()
            await _taken_over_and_finished(cluster, execution_id)
            proxy.restore()
            cluster.release_tool()
            await _lost_turn_wrote_nothing(cluster, a, thread_id, execution_id)
    finally:
        await proxy.aclose()


async def test_a_turn_whose_writes_cannot_reach_the_database_goes_on_once_it_answers(
        database: str, tmp_path: Path) -> None:
    """One server, cut off from the database while its tool runs: the turn's write fails, it
    stops unsettled (no error, no done sent), and once the database answers again the same
    server takes it up: one done, the tool run once (its lost result answered as not run again)."""
    url = httpx.URL(database.replace("postgresql://", "http://", 1))
    proxy = CuttableProxy((url.host, url.port or 5432))
    await proxy.start()
    try:
        async with _cluster(tmp_path, database) as (cluster, client):
            through_proxy = database.replace(f"{url.host}:{url.port or 5432}", f"127.0.0.1:{proxy.port}", 1)
            a = cluster.start("a", through_proxy)
            await _ready(client, a)
            thread_id, execution_id = await _start_turn(client, a)
            await _until("the tool to start", lambda: "start c1" in cluster.ledger_lines())
            proxy.drop()
            cluster.release_tool()
            await _until("the turn to stop unsettled", lambda: f"execution {execution_id} of thread {thread_id} "
                                                               "stops here unsettled" in a.output())
            proxy.restore()

            async def ended() -> bool:
                record = await cluster.execution(execution_id)
                return record is not None and record.status == "complete"

            await _until("the server to take its turn up again", ended)
            seen = await cluster.outcome(thread_id, execution_id)
            assert seen["messages"] == [("user", "file c1"), ("assistant", "<calls>"), ("tool", NOT_RUN_AGAIN),
                                        ("assistant", f"filed ({NOT_RUN_AGAIN})")]
            assert (seen["record"].epoch, seen["dones"]) == (1, 1)
            assert "resumedFrom" in seen["record"].state  # taken up again by the only server
            assert cluster.ledger_lines() == ["start c1", "done c1"]
    finally:
        await proxy.aclose()
