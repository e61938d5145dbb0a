"""A2A push notifications through the webhook outbox, with the ``a2a-sdk`` client and a real
HTTP receiver: the card advertises them; a ``message/send`` carrying a push config has each
task update reach the receiver once (retried past the receiver's failures), with the config's
token in ``X-A2A-Notification-Token``, a Standard Webhooks signature and the update as a
``StreamResponse``; configs are set, read, listed and deleted per task; an internal address
is refused unless allowed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.auth.user import User
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import new_text_part
from a2a.server.cluster.version import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.types import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import Parse

from server_fixtures import LiveServer, serve_app, write_project
from standardagents.server.doors.a2a_push import StorePushConfigStore
from standardagents.server.doors.a2a_tasks import StoreTaskStore
from test_doors_mcp import EXTRA
from webhook_receiver import Delivery, Receiver
from webhook_receiver import fast_retries as fast_retries  # the fixture


def _doc(name: str) -> str:
    return (Path(__file__).resolve().parents[1] / "docs" / name).read_text(encoding="utf-8")

@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(failures=2).start()
    try:
        yield r
    finally:
        r.stop()


def _serve(tmp_path: Path) -> Iterator[LiveServer]:
    yield from serve_app(write_project(tmp_path / "project", EXTRA), f"sqlite+aiosqlite:///{tmp_path / 'a2a.db'}")


@pytest.fixture
def server(tmp_path: Path, fast_retries: None) -> Iterator[LiveServer]:
    yield from _serve(tmp_path)


@contextlib.asynccontextmanager
async def _client(live: LiveServer, **config: Any) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(headers=live.headers, timeout=60) as http:
        client = await create_client(f"{live.base_url}/a2a/helper/jsonrpc",
                                     client_config=ClientConfig(httpx_client=http, streaming=False, **config))
        try:
            yield client
        finally:
            await client.close()


def _message(text: str, push: TaskPushNotificationConfig | None = None) -> SendMessageRequest:
    configuration = SendMessageConfiguration(task_push_notification_config=push) if push is not None else None
    return SendMessageRequest(message=Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER,
                                              parts=[new_text_part(text)]), configuration=configuration)


async def _task(client: Any, request: SendMessageRequest) -> Any:
    tasks = [r.task async for r in client.send_message(request) if r.HasField("task")]
    assert tasks
    return tasks[-1]


def _update(delivery: Delivery) -> StreamResponse:
    return Parse(delivery.body, StreamResponse())


def _state(update: StreamResponse) -> int:
    return int(update.task.status.state if update.HasField("task") else update.status_update.status.state)


async def test_the_card_advertises_push_notifications(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        card = (await http.get("/a2a/helper/.well-known/agent-card.json")).json()
    assert card["capabilities"]["pushNotifications"] is True


async def test_each_task_update_reaches_the_receiver_once_with_the_token(
        server: LiveServer, receiver: Receiver) -> None:
    push = TaskPushNotificationConfig(url=receiver.url, token="tok-1")
    async with _client(server) as client:
        task = await _task(client, _message("add please", push))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED

    def completed(got: list[Delivery]) -> bool:
        # the completed update went through, and so did every other one tried so far
        # (deliveries are retried side by side: another may still be between attempts)
        done = any(d.status == 200 and _state(_update(d)) == TaskState.TASK_STATE_COMPLETED for d in got)
        tried = {d.headers["webhook-id"] for d in got}
        through = {d.headers["webhook-id"] for d in got if d.status == 200}
        return done and tried == through

    assert await asyncio.to_thread(receiver.wait_for, completed)
    delivered = receiver.succeeded()
    attempts: dict[str, list[int]] = {}
    for d in receiver.got:
        attempts.setdefault(d.headers["webhook-id"], []).append(d.status)
    updates = [_update(d) for d in delivered]
    assert {d.headers["x-a2a-notification-token"] for d in receiver.got} == {"tok-1"}
    assert all(statuses == [500, 500, 200] for statuses in attempts.values()), attempts
    assert len(delivered) == len(attempts)
    assert [_state(u) for u in updates].count(TaskState.TASK_STATE_COMPLETED) == 1
    assert {u.task.id if u.HasField("task") else (u.status_update.task_id or u.artifact_update.task_id)
            for u in updates} == {task.id}


async def test_a_tasks_configs_are_set_read_listed_and_deleted(server: LiveServer, receiver: Receiver) -> None:
    async with _client(server) as client:
        task = await _task(client, _message("add please"))
        made = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, id="mine", url=receiver.url, token="tok-2"))
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="mine"))
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id))
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="mine"))
        after = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id))
    assert (made.id, made.task_id, made.url, made.token) == ("mine", task.id, receiver.url, "tok-2")
    assert (got.id, got.url, got.token) == ("mine", receiver.url, "tok-2")
    assert [(c.id, c.url) for c in listed.configs] == [("mine", receiver.url)]
    assert list(after.configs) == []


@pytest.fixture
def strict_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    monkeypatch.delenv("STANDARDAGENTS_WEBHOOKS_ALLOW_PRIVATE", raising=False)
    yield from _serve(tmp_path)


async def test_a_push_url_on_a_loopback_address_is_refused(strict_server: LiveServer, receiver: Receiver) -> None:
    async with _client(strict_server) as client:
        with pytest.raises(InvalidParamsError) as refused:
            await _task(client, _message("add please", TaskPushNotificationConfig(url=receiver.url, token="t")))
    assert str(refused.value) == "Invalid push notification URL"
    assert receiver.got == []


async def test_the_a2a_pages_push_example_has_the_updates_posted_with_its_token(
        server: LiveServer, receiver: Receiver) -> None:
    text = _doc("doors-a2a.md")
    found = re.search(r"```python\n(# push.py.*?)```", text, re.S)
    assert found, "docs/doors-a2a.md shows the push example"
    env = {**os.environ, "STANDARDAGENTS_URL": server.base_url, "STANDARDAGENTS_TOKEN": server.token,
           "RECEIVER_URL": receiver.url}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", found.group(1), env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()

    def completed(got: list[Delivery]) -> bool:
        # the completed update went through, and so did every other one tried so far
        # (deliveries are retried side by side: another may still be between attempts)
        done = any(d.status == 200 and _state(_update(d)) == TaskState.TASK_STATE_COMPLETED for d in got)
        tried = {d.headers["webhook-id"] for d in got}
        through = {d.headers["webhook-id"] for d in got if d.status == 200}
        return done and tried == through

    assert await asyncio.to_thread(receiver.wait_for, completed)
    assert {d.headers["x-a2a-notification-token"] for d in receiver.got} == {"a-secret-the-receiver-checks"}
    assert out.decode().startswith("task ")


class _Caller(User):
    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.name


async def test_a_tasks_configs_go_with_it_when_retention_deletes_it(
        make_runtime: Callable[..., Any], fast_retries: None) -> None:
    rt = await make_runtime()
    now = [1_000_000]
    tasks = StoreTaskStore(rt, set(), retention=60.0, clock=lambda: now[0])
    configs = StorePushConfigStore(rt)
    caller = ServerCallContext(user=_Caller("u1"))
    for task_id in ("old", "young"):
        await tasks.save(Task(id=task_id, context_id=f"ctx-{task_id}",
                              status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)),
                         event=None, prev=None, prev_version=TaskVersion.MISSING, context=caller)
        await configs.set_info(task_id, TaskPushNotificationConfig(url="http://127.0.0.1:9/hook", token=task_id),
                               caller)
        now[0] += 30_000
    assert await tasks.prune() == 1  # "old" ended 60 s ago, "young" 30 s ago
    assert ([c.token for c in await configs.get_info_for_dispatch("old")],
            [c.token for c in await configs.get_info_for_dispatch("young")]) == ([], ["young"])
