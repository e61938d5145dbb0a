"""Webhooks: signed deliveries from a durable outbox, retried until the receiver takes them,
exactly once per event after success (also across a SIGKILL of the sending server), with a
delivery log, replays, and no internal addresses unless allowed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from standardwebhooks import Webhook

from server_fixtures import LiveServer, serve_app, write_project
from standardagents.store import SQLStore
from webhook_receiver import Receiver
from webhook_receiver import fast_retries as fast_retries  # the fixture

EXE = Path(sys.executable).parent / "standardagents"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(failures=2).start()
    try:
        yield r
    finally:
        r.stop()


@pytest.fixture
def server(tmp_path: Path, fast_retries: None) -> Iterator[LiveServer]:
    yield from serve_app(write_project(tmp_path / "project"), f"sqlite+aiosqlite:///{tmp_path / 'hooks.db'}")


async def _subscribe(c: httpx.AsyncClient, url: str, events: list[str]) -> dict[str, object]:
    r = await c.post("/api/webhooks", json={"url": url, "events": events})
    assert r.status_code == 201, r.text
    return dict(r.json())


async def _turn(c: httpx.AsyncClient) -> tuple[str, str]:
    thread = (await c.post("/api/threads", json={"agent": "helper"})).json()
    r = await c.post(f"/api/threads/{thread['id']}/messages?wait=true", json={"content": "hello"})
    assert r.status_code == 200, r.text
    return thread["id"], r.json()["executionId"]


async def test_receiver_failing_twice_gets_each_ended_turn_once_signed(server: LiveServer, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        hook = await _subscribe(c, receiver.url, ["execution.done"])
        turns = [await _turn(c) for _ in range(3)]
    assert await asyncio.to_thread(receiver.wait_for, lambda got: sum(d.status == 200 for d in got) == 3)
    verifier = Webhook(str(hook["secret"]))
    received = {}
    for delivery in receiver.succeeded():
        payload = verifier.verify(delivery.body, delivery.headers)
        received[payload["data"]["executionId"]] = payload
    assert {e: (p["type"], p["data"]["threadId"], p["data"]["outcome"]) for e, p in received.items()} == {
        execution: ("execution.done", thread, "response") for thread, execution in turns}
    by_message: dict[str, list[int]] = {}
    for delivery in receiver.got:
        by_message.setdefault(delivery.headers["webhook-id"], []).append(delivery.status)
    assert sorted(by_message.values()) == [[500, 500, 200]] * 3


async def test_delivery_log_lists_each_attempt_and_replay_sends_again(server: LiveServer, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as c:
        hook = await _subscribe(c, receiver.url, ["execution.done"])
        _thread, execution = await _turn(c)
        assert await asyncio.to_thread(receiver.wait_for, lambda got: any(d.status == 200 for d in got))
        for _ in range(100):  # the attempt is recorded right after the receiver's answer
            log = (await c.get(f"/api/webhooks/{hook['id']}/deliveries")).json()
            if log["deliveries"][0]["status"] == "delivered":
                break
            await asyncio.sleep(0.05)
        [delivery] = log["deliveries"]
        assert (delivery["status"], delivery["attempts"], delivery["payload"]["data"]["executionId"]) == (
            "delivered", 3, execution)
        assert sorted((a["attempt"], a["statusCode"]) for a in log["attempts"]) == [(1, 500), (2, 500), (3, 200)]
        r = await c.post(f"/api/webhooks/{hook['id']}/deliveries/{delivery['id']}/replay")
        assert r.status_code == 202
    assert await asyncio.to_thread(receiver.wait_for, lambda got: sum(d.status == 200 for d in got) == 2)
    assert [d.headers["webhook-id"] for d in receiver.succeeded()] == [delivery["id"]] * 2


async def test_url_resolving_to_loopback_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STANDARDAGENTS_WEBHOOKS_ALLOW_PRIVATE", raising=False)
    for live in serve_app(write_project(tmp_path / "project"), f"sqlite+aiosqlite:///{tmp_path / 'ssrf.db'}"):
        async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers) as c:
            r = await c.post("/api/webhooks", json={"url": "http://localhost:9/hook", "events": ["execution.done"]})
            listed = (await c.get("/api/webhooks")).json()
    assert r.status_code == 422
    assert "internal address 127.0.0.1" in r.json()["error"]["message"] or "internal address ::1" in r.json()["error"]["message"]
    assert listed == {"webhooks": []}


async def test_unknown_event_name_is_refused_with_the_known_ones(server: LiveServer, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as c:
        r = await c.post("/api/webhooks", json={"url": receiver.url, "events": ["turn.finished"]})
    assert r.status_code == 422
    assert r.json()["error"]["message"] == ("field 'events': unknown event 'turn.finished'; known: execution.done, "
                                            "execution.failed, approval.requested, schedule.failed or '*'")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(project: Path, port: int, database: str) -> subprocess.Popen[str]:
    env = {**os.environ, "STANDARDAGENTS_WEBHOOKS_ALLOW_PRIVATE": "1", "STANDARDAGENTS_WEBHOOKS_BACKOFF": "0.05"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([str(EXE), "serve", str(project), "--port", str(port), "--database-url", database],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)


async def _until_up(base: str) -> None:
    async with httpx.AsyncClient(base_url=base) as c:
        for _ in range(300):
            try:
                if (await c.get("/healthz")).status_code < 500:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("the server did not start")


async def test_event_pending_when_sender_is_killed_is_delivered_once_after_restart(
        tmp_path: Path, receiver: Receiver) -> None:
    project = write_project(tmp_path / "project")
    database = f"sqlite:///{tmp_path / 'killed.db'}"
    receiver.refusing = True
    async with SQLStore(database) as store:
        user = await store.create_user("tester", is_admin=True)
        _, bearer = await store.create_api_token(user.id, "tests")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = _serve(project, port, database)
    try:
        await _until_up(base)
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {bearer}"}, timeout=30) as c:
            hook = await _subscribe(c, receiver.url, ["execution.done"])
            _thread, execution = await _turn(c)
        assert await asyncio.to_thread(receiver.wait_for, lambda got: len(got) >= 2)
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(10)
        receiver.refusing = False
        server = _serve(project, port, database)
        await _until_up(base)
        assert await asyncio.to_thread(receiver.wait_for, lambda got: any(d.status == 200 for d in got))
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(10)
    [delivered] = receiver.succeeded()
    payload = Webhook(str(hook["secret"])).verify(delivered.body, delivered.headers)
    assert payload["data"]["executionId"] == execution
    assert {d.headers["webhook-id"] for d in receiver.got} == {delivered.headers["webhook-id"]}
    assert json.loads(delivered.body)["type"] == "execution.done"


APPROVALS = {
    "agents/agents/ops.py": """
        from standardagents import define_agent
        ops = define_agent(name="ops", side_a={"prompt": "ops_prompt"})
    """,
    "agents/prompts/ops_prompt.py": """
        from standardagents import define_prompt
        ops_prompt = define_prompt(name="ops_prompt", prompt="x", tools=["wipe"])
    """,
    "agents/tools/wipe.py": """
        from standardagents import define_tool

        @define_tool(needs_approval=True)
        def wipe(target: str) -> str:
            '''Wipe a target.'''
            return f"wiped {target}"
    """,
}


async def test_call_waiting_for_approval_sends_approval_requested_without_its_token(
        tmp_path: Path, fast_retries: None) -> None:
    receiver = Receiver().start()
    try:
        for live in serve_app(write_project(tmp_path / "project", APPROVALS), f"sqlite:///{tmp_path / 'a.db'}"):
            async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers, timeout=30) as c:
                hook = await _subscribe(c, receiver.url, ["approval.requested", "execution.done"])
                thread = (await c.post("/api/threads", json={"agent": "ops"})).json()
                sent = await c.post(f"/api/threads/{thread['id']}/messages?wait=true",
                                    json={"content": "wipe the cache"})
                assert sent.json()["outcome"] == "approval_required"
                assert await asyncio.to_thread(receiver.wait_for, lambda got: len(got) >= 1)
        [delivery] = receiver.got
    finally:
        receiver.stop()
    event = Webhook(str(hook["secret"])).verify(delivery.body, delivery.headers)
    assert event["type"] == "approval.requested"
    assert (event["data"]["threadId"], event["data"]["tool"], event["data"]["executionId"]) == (
        thread["id"], "wipe", sent.json()["executionId"])
    assert not {"token", "stateToken", "approvalToken"} & set(event["data"])
