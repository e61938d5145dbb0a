"""The A2A door, driven by the real ``a2a-sdk`` client against a live server: cards, send,
stream, get, cancel and an approval pause as ``input-required`` resumed by the next message."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_artifact_text, get_data_parts, new_text_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)

from server_fixtures import LiveServer, serve_app, write_project
from test_doors_mcp import EXTRA
from test_server_workers import (
    _admin_token,
    _free_port,
    _two_workers,
    _wait_ready,
    database,
)

__all__ = ["database"]  # the PostgreSQL database fixture of the workers tests

DOCS = Path(__file__).resolve().parent.parent / "docs" / "doors-a2a.md"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    project = write_project(tmp_path / "project", EXTRA)
    yield from serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'live.db'}")


@contextlib.asynccontextmanager
async def _client(live: LiveServer, agent: str, *, streaming: bool = True) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(headers=live.headers, timeout=60) as http:
        client = await create_client(f"{live.base_url}/a2a/{agent}/jsonrpc",
                                     client_config=ClientConfig(httpx_client=http, streaming=streaming))
        try:
            yield client
        finally:
            await client.close()


def _message(text: str, *, context: str | None = None, task: str | None = None) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER,
                                              parts=[new_text_part(text)], context_id=context or "",
                                              task_id=task or ""))


async def _last_task(client: Any, request: SendMessageRequest) -> tuple[Any, list[Any]]:
    seen = [response async for response in client.send_message(request)]
    tasks = [r.task for r in seen if r.HasField("task")]
    assert tasks, seen
    final = await client.get_task(GetTaskRequest(id=tasks[-1].id))
    return final, seen


async def _calling_wait_forever(stream: Any) -> str:
    """The task id from ``stream`` once its turn reports the ``wait_forever`` call (the task is
    then working and stays so); fails if the stream ends first."""
    async for response in stream:
        update = response.status_update
        if response.HasField("status_update") and update.status.message.parts and \
                update.status.message.parts[0].text == "calling wait_forever":
            return str(update.task_id)
    raise AssertionError("the stream ended before the wait_forever call")


async def test_cards_list_the_primary_agents(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        root = (await http.get("/.well-known/agent-card.json")).json()
        one = (await http.get("/a2a/helper/.well-known/agent-card.json")).json()
        missing = await http.get("/a2a/internal/.well-known/agent-card.json")
    assert sorted(s["id"] for s in root["skills"]) == ["guarded", "helper", "invoicer", "sentry", "slow"]
    assert one["name"] == "helper" and one["description"] == "Adds numbers."
    assert one["capabilities"]["streaming"] is True
    assert "bearer" in one["securitySchemes"]
    assert one["supportedInterfaces"][0]["url"] == f"{server.base_url}/a2a/helper/jsonrpc"
    assert missing.status_code == 404


async def test_send_runs_a_task_in_a_thread_and_continues_it(server: LiveServer) -> None:
    async with _client(server, "helper", streaming=False) as client:
        task, _ = await _last_task(client, _message("add please"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_artifact_text(task.artifacts[0])
        thread = task.context_id
        again, _ = await _last_task(client, _message("again", context=thread))
    assert again.context_id == thread and again.id != task.id
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        messages = (await http.get(f"/api/threads/{thread}/messages")).json()["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == ["add please", "again"]


async def test_stream_reports_tool_calls_then_the_reply(server: LiveServer) -> None:
    async with _client(server, "helper") as client:
        task, seen = await _last_task(client, _message("add"))
    notes = [r.status_update.status.message.parts[0].text for r in seen
             if r.HasField("status_update") and r.status_update.status.message.parts]
    assert "calling add" in notes
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_an_approval_pause_is_input_required_and_the_next_message_decides(server: LiveServer) -> None:
    async with _client(server, "guarded", streaming=False) as client:
        paused, _ = await _last_task(client, _message("wipe"))
        assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "wipe" in paused.status.message.parts[0].text
        done, _ = await _last_task(client, _message("yes", context=paused.context_id, task=paused.id))
    assert done.id == paused.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        messages = (await http.get(f"/api/threads/{paused.context_id}/messages")).json()["messages"]
    assert any(m["role"] == "tool" and "wiped" in (m["content"] or "") for m in messages)


async def test_a_tripped_guardrail_fails_the_task_with_its_reason(server: LiveServer) -> None:
    async with _client(server, "sentry", streaming=False) as client:
        failed, _ = await _last_task(client, _message("my password is x"))
        fine, _ = await _last_task(client, _message("hello"))
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    parts = failed.status.message.parts
    assert re.search(r"no_secrets.*secret-looking", parts[0].text)
    assert get_data_parts(list(parts)) == [{"code": "guardrail_tripped", "status": 400}]
    assert fine.status.state == TaskState.TASK_STATE_COMPLETED


async def test_cancel_stops_the_turn(server: LiveServer) -> None:
    async with _client(server, "slow") as client:
        stream = client.send_message(_message("wait"))
        task_id = await _calling_wait_forever(stream)
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        await stream.aclose()
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
            running = (await http.get(f"/api/threads/{canceled.context_id}")).json()["running"]
        assert running is False


async def test_a_second_client_resubscribes_to_a_running_task(server: LiveServer) -> None:
    async with _client(server, "slow") as client, _client(server, "slow") as watcher:
        stream = client.send_message(_message("wait"))
        task_id = await _calling_wait_forever(stream)
        watched = watcher.subscribe(SubscribeToTaskRequest(id=task_id))
        first = await anext(watched)  # the task as it is now
        assert first.task.status.state == TaskState.TASK_STATE_WORKING
        await client.cancel_task(CancelTaskRequest(id=task_id))
        states = [r.status_update.status.state async for r in watched if r.HasField("status_update")]
        await stream.aclose()
    assert states[-1] == TaskState.TASK_STATE_CANCELED


async def test_without_a_token_it_is_refused(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        answer = await http.post("/a2a/helper", json={"jsonrpc": "2.0", "id": 1, "method": "message/send",
                                                      "params": {}})
    assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"


async def test_v03_method_names_answer_and_tasks_are_the_callers(server: LiveServer, tmp_path: Path) -> None:
    body = {"jsonrpc": "2.0", "id": "1", "method": "message/send",
            "params": {"message": {"kind": "message", "messageId": "m1", "role": "user",
                                   "parts": [{"kind": "text", "text": "add"}]}}}
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=60) as http:
        sent = (await http.post("/a2a/helper", json=body)).json()
        task = sent["result"]
        got = (await http.post("/a2a/helper", json={"jsonrpc": "2.0", "id": "2", "method": "tasks/get",
                                                    "params": {"id": task["id"]}})).json()
    assert task["status"]["state"] == "completed", sent
    assert got["result"]["contextId"] == task["contextId"]
    # another user can neither read the task nor continue its thread
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "standardagents"), "tokens", "create", "mallory",
        "--project", str(tmp_path / "project"), "--database-url", f"sqlite+aiosqlite:///{tmp_path / 'live.db'}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0
    mallory = {"Authorization": f"Bearer {out.decode().strip()}"}
    async with httpx.AsyncClient(base_url=server.base_url, headers=mallory, timeout=60) as http:
        foreign = (await http.post("/a2a/helper", json={"jsonrpc": "2.0", "id": "3", "method": "tasks/get",
                                                        "params": {"id": task["id"]}})).json()
        body["params"]["message"]["contextId"] = task["contextId"]
        body["params"]["message"]["messageId"] = "m2"
        rejected = (await http.post("/a2a/helper", json=body)).json()
    assert "error" in foreign and "not found" in foreign["error"]["message"].lower()
    assert rejected["result"]["status"]["state"] == "rejected"
    assert "another user" in rejected["result"]["status"]["message"]["parts"][0]["text"]


async def test_the_project_card_routes_by_agent_metadata(server: LiveServer) -> None:
    async def send(metadata: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": "1", "method": "message/send",
                "params": {"message": {"kind": "message", "messageId": uuid.uuid4().hex, "role": "user",
                                       "parts": [{"kind": "text", "text": "go"}], "metadata": metadata}}}
        async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=60) as http:
            answer: dict[str, Any] = (await http.post("/a2a", json=body)).json()["result"]
        return answer

    guarded = await send({"agent": "guarded"})
    default = await send({})
    assert guarded["status"]["state"] == "input-required"  # the guarded agent asks for approval
    assert default["status"]["state"] == "input-required"  # the first skill is "guarded" too
    helper = await send({"agent": "helper"})
    assert helper["status"]["state"] == "completed"


async def test_the_docs_example_runs(server: LiveServer) -> None:
    code = re.search(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert code, "docs/doors-a2a.md has a python example"
    env = {**os.environ, "STANDARDAGENTS_URL": server.base_url, "STANDARDAGENTS_TOKEN": server.token}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code[1], env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    assert "TASK_STATE_COMPLETED" in out.decode()


async def test_tasks_outlive_the_server_that_ran_them(tmp_path: Path) -> None:
    """Tasks are kept in the store: after a restart on the same database a client reads
    them, continues the one waiting for input and cancels another."""
    project = write_project(tmp_path / "project", EXTRA)
    database = f"sqlite+aiosqlite:///{tmp_path / 'kept.db'}"
    first_run = serve_app(project, database)
    first = next(first_run)
    try:
        async with _client(first, "helper", streaming=False) as client:
            done, _ = await _last_task(client, _message("add please"))
        async with _client(first, "guarded", streaming=False) as client:
            paused, _ = await _last_task(client, _message("wipe"))
            other, _ = await _last_task(client, _message("wipe again"))
    finally:
        first_run.close()
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert paused.status.state == other.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    second_run = serve_app(project, database)
    second = next(second_run)
    again = LiveServer(second.base_url, first.token, first.user_id, second.runtime)  # the same caller
    try:
        async with _client(again, "helper", streaming=False) as client:
            read = await client.get_task(GetTaskRequest(id=done.id))
            assert read.status.state == TaskState.TASK_STATE_COMPLETED and read.context_id == done.context_id
            assert get_artifact_text(read.artifacts[0]) == get_artifact_text(done.artifacts[0])
        async with _client(again, "guarded", streaming=False) as client:
            waiting = await client.get_task(GetTaskRequest(id=paused.id))
            assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            resumed, _ = await _last_task(client, _message("yes", context=paused.context_id, task=paused.id))
            assert resumed.id == paused.id and resumed.status.state == TaskState.TASK_STATE_COMPLETED
            canceled = await client.cancel_task(CancelTaskRequest(id=other.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            assert (await client.get_task(GetTaskRequest(id=other.id))).status.state == TaskState.TASK_STATE_CANCELED
        # the cancelled task's execution no longer waits for a decision
        async with httpx.AsyncClient(base_url=again.base_url, headers=again.headers) as http:
            executions = (await http.get(f"/api/threads/{other.context_id}/executions")).json()["executions"]
            pending = (await http.get(f"/api/threads/{other.context_id}/approvals")).json()["approvals"]
        assert [(e["id"], e["status"]) for e in executions] == [(other.id, "cancelled")] and pending == []
        async with _client(again, "guarded", streaming=False) as client:
            # tasks/list pages through the caller's tasks
            seen: list[str] = []
            token = ""
            while True:
                page = await client.list_tasks(ListTasksRequest(page_size=2, page_token=token))
                seen += [t.id for t in page.tasks]
                token = page.next_page_token
                if not token:
                    break
            assert sorted(seen) == sorted({done.id, paused.id, other.id}) and page.total_size == 3
            cancelled = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_CANCELED))
            assert [t.id for t in cancelled.tasks] == [other.id]
        # another caller does not see them
        async with httpx.AsyncClient(base_url=second.base_url, headers=second.headers) as http:
            answer = await http.post("/a2a/helper", json={"jsonrpc": "2.0", "id": "1", "method": "tasks/get",
                                                          "params": {"id": done.id}})
        assert answer.json()["error"]["code"] == -32001
    finally:
        second_run.close()


async def test_tasks_answer_on_any_of_two_workers_on_postgresql(database: str, tmp_path: Path) -> None:
    """``serve --workers 2`` on PostgreSQL: a task running on one worker is read, followed
    and cancelled through the other."""
    project = write_project(tmp_path / "project", EXTRA)
    token = await _admin_token(database)
    async with _two_workers(project, database, token, env=dict(os.environ)) as workers:
        base_url = workers.base_url

        async def pinned(pid: str) -> Any:
            http = await workers.on(pid)
            return await create_client(f"{base_url}/a2a/slow", client_config=ClientConfig(httpx_client=http))

        one, two = await workers.discover()
        runner, reader, watcher = await pinned(one), await pinned(two), await pinned(two)
        stream = runner.send_message(_message("wait"))
        task_id = await _calling_wait_forever(stream)
        seen = await reader.get_task(GetTaskRequest(id=task_id))
        assert seen.status.state == TaskState.TASK_STATE_WORKING
        watched = watcher.subscribe(SubscribeToTaskRequest(id=task_id))
        first = await anext(watched)
        assert first.task.id == task_id and first.task.status.state == TaskState.TASK_STATE_WORKING
        canceled = await reader.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        # the follower on the other worker sees the task end (as a status update or the task)
        states = [r.status_update.status.state if r.HasField("status_update") else r.task.status.state
                  async for r in watched if r.HasField("status_update") or r.HasField("task")]
        assert states[-1] == TaskState.TASK_STATE_CANCELED
        await stream.aclose()
        # the cancel asked the worker running the turn to stop it (through the relay) and waited
        thread = (await workers.request(one, "GET", f"/api/threads/{seen.context_id}")).json()
        assert thread["running"] is False
        executions = (await workers.request(two, "GET", f"/api/threads/{seen.context_id}/executions")).json()
        assert [e["status"] for e in executions["executions"]] == ["cancelled"]


def _thread_of_execution(database: str, execution_id: str) -> str:
    """The thread of an execution, read from the database while no server runs."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(database.split("///", 1)[1])) as db:
        (thread,) = db.execute("SELECT thread_id FROM executions WHERE id = ?", (execution_id,)).fetchone()
    return str(thread)


async def test_a_task_cut_short_by_a_crash_is_read_as_its_execution_tells(tmp_path: Path) -> None:
    """The server process is killed while a task runs, before anything could record the
    task's end: on the restarted server the turn is recovered, and the task reads as its
    execution ended (completed, with the reply), not as working for ever."""
    import signal

    project = write_project(tmp_path / "project", EXTRA)
    database = f"sqlite+aiosqlite:///{tmp_path / 'crash.db'}"
    token = await _admin_token(database)
    headers = {"Authorization": f"Bearer {token}"}
    port = _free_port()
    env = dict(os.environ)

    def start() -> Any:
        return subprocess.Popen([str(Path(sys.executable).parent / "standardagents"), "serve", str(project), "--port",
                                 str(port), "--database-url", database], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    live = LiveServer(f"http://127.0.0.1:{port}", token, "", None)  # type: ignore[arg-type]
    proc = start()
    try:
        async with httpx.AsyncClient(base_url=live.base_url, headers=headers, timeout=30) as http:
            await _wait_ready(http)
        async with _client(live, "slow") as client:
            stream = client.send_message(_message("wait"))
            task_id = await _calling_wait_forever(stream)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            with contextlib.suppress(Exception):
                await stream.aclose()
        thread = _thread_of_execution(database, task_id)
        proc = start()
        async with httpx.AsyncClient(base_url=live.base_url, headers=headers, timeout=120) as http:
            await _wait_ready(http)
            # the restarted server recovers the cut turn (the call cut short is answered with an
            # error, the model answers that); wait for its end
            async with http.stream("GET", f"/api/threads/{thread}/stream") as events:
                (execution,) = (await http.get(f"/api/threads/{thread}/executions")).json()["executions"]
                if execution["status"] == "running":
                    async for line in events.aiter_lines():
                        if line.startswith("data:") and '"type":"done"' in line:
                            break
            (execution,) = (await http.get(f"/api/threads/{thread}/executions")).json()["executions"]
            messages = (await http.get(f"/api/threads/{thread}/messages")).json()["messages"]
        assert execution["id"] == task_id and execution["status"] == "complete"
        async with _client(live, "slow", streaming=False) as client:
            read = await client.get_task(GetTaskRequest(id=task_id))
        assert read.status.state == TaskState.TASK_STATE_COMPLETED
        reply = [m["content"] for m in messages if m["role"] == "assistant" and m["content"]][-1]
        assert get_artifact_text(read.artifacts[-1]) == reply
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
