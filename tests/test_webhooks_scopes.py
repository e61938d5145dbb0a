"""Webhook subscriptions of one thread or one execution: a thread's subscription gets that
thread's events only, and the ``webhook`` of a message subscribes for that execution alone,
gets its ``execution.done`` (signed with the secret the answer carries) and is removed once
that was delivered; a bad ``webhook`` is a 422 that starts no turn and stores nothing."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from server_fixtures import LiveServer, serve_app, write_project
from webhook_receiver import Receiver


def _doc(name: str) -> str:
    return (Path(__file__).resolve().parents[1] / "docs" / name).read_text(encoding="utf-8")

@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    try:
        yield r
    finally:
        r.stop()


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    monkeypatch.setenv("STANDARDAGENTS_WEBHOOKS_ALLOW_PRIVATE", "1")
    monkeypatch.setenv("STANDARDAGENTS_WEBHOOKS_BACKOFF", "0.05")
    yield from serve_app(write_project(tmp_path / "project"), f"sqlite+aiosqlite:///{tmp_path / 'hooks.db'}")


async def _thread(c: httpx.AsyncClient) -> str:
    r = await c.post("/api/threads", json={"agent": "helper"})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _turn(c: httpx.AsyncClient, thread: str, **extra: Any) -> dict[str, Any]:
    r = await c.post(f"/api/threads/{thread}/messages?wait=true", json={"content": "hello", **extra})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def _until_gone(c: httpx.AsyncClient, hook_id: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        listed = (await c.get("/api/webhooks")).json()["webhooks"]
        if hook_id not in [h["id"] for h in listed]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"webhook {hook_id} was not removed")


async def test_a_threads_subscription_gets_only_that_threads_events(server: LiveServer, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        mine, other = await _thread(c), await _thread(c)
        r = await c.post("/api/webhooks", json={"url": receiver.url, "events": ["execution.done"], "thread": mine})
        assert r.status_code == 201, r.text
        hook = r.json()
        await _turn(c, other)
        turn = await _turn(c, mine)
        await _turn(c, other)
        assert await asyncio.to_thread(receiver.wait_for, lambda got: len(got) >= 1)
        deliveries = (await c.get(f"/api/webhooks/{hook['id']}/deliveries")).json()["deliveries"]
    assert hook["thread"] == mine
    assert [(d["type"], d["payload"]["data"]["threadId"], d["payload"]["data"]["executionId"])
            for d in deliveries] == [("execution.done", mine, turn["executionId"])]


async def test_a_messages_webhook_gets_that_execution_only_and_is_removed_after_its_done(
        server: LiveServer, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        thread = await _thread(c)
        first = await _turn(c, thread, webhook={"url": receiver.url})
        second = await _turn(c, thread)
        hook = first["webhook"]
        await _until_gone(c, hook["id"])
    [delivery] = receiver.got
    payload = Webhook(hook["secret"]).verify(delivery.body, delivery.headers)
    assert (hook["execution"], hook["events"]) == (first["executionId"], ["execution.done"])
    assert (payload["type"], payload["data"]["executionId"]) == ("execution.done", first["executionId"])
    assert second["executionId"] != first["executionId"]


async def test_a_messages_webhook_naming_other_events_still_ends_with_its_done(
        server: LiveServer, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        r = await c.post(f"/api/threads/{await _thread(c)}/messages",
                         json={"content": "hello", "webhook": {"url": receiver.url, "events": ["execution.failed"]}})
        assert r.status_code == 202, r.text
        await _until_gone(c, r.json()["webhook"]["id"])
    assert r.json()["webhook"]["events"] == ["execution.failed", "execution.done"]
    assert [Webhook(r.json()["webhook"]["secret"]).verify(d.body, d.headers)["type"] for d in receiver.got] == [
        "execution.done"]


async def test_a_bad_webhook_is_refused_and_starts_no_turn(server: LiveServer, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        thread = await _thread(c)
        r = await c.post(f"/api/threads/{thread}/messages",
                         json={"content": "hello", "webhook": {"url": receiver.url, "events": ["turn.finished"]}})
        messages = (await c.get(f"/api/threads/{thread}/messages")).json()["messages"]
        hooks = (await c.get("/api/webhooks")).json()["webhooks"]
    assert r.status_code == 422
    assert r.json()["error"]["message"].startswith("field 'events': unknown event 'turn.finished'")
    assert (messages, hooks) == ([], [])


async def test_the_webhooks_pages_message_webhook_example_is_told_of_its_turn(
        server: LiveServer, receiver: Receiver) -> None:
    text = _doc("webhooks.md")
    found = re.search(r"```python\n(import httpx\n.*?)```", text, re.S)
    assert found, "docs/webhooks.md shows the message webhook example"
    namespace: dict[str, Any] = {}
    exec(found.group(1), namespace)
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        thread = await _thread(c)
    hook = await asyncio.to_thread(namespace["ask_and_be_told"], server.base_url, server.token, thread, receiver.url)
    assert await asyncio.to_thread(receiver.wait_for, lambda got: len(got) == 1)
    event = Webhook(hook["secret"]).verify(receiver.got[0].body, receiver.got[0].headers)
    assert (event["type"], event["data"]["threadId"], event["data"]["executionId"]) == (
        "execution.done", thread, hook["execution"])
