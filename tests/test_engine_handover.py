"""Handing turns over at shutdown (one process, SQLite): ``stop_gracefully`` refuses new
turns, lets running ones finish within the grace period, then leaves the rest running and
released (no ``done``, nothing failed) for the next runtime on the store to resume at once."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from standardagents import Runtime
from standardagents.engine.handover import HANDED_OVER, RELEASED
from standardagents.exceptions import ShuttingDownError
from standardagents.testing import OpenAIStub, StubReply

PROJECT = {
    "agents/agents/talker.py": "from standardagents import define_agent\n"
                               "talker = define_agent(name='talker', side_a={'prompt': 'talk', 'stop_on_response': True})\n",
    "agents/prompts/talk.py": "from standardagents import define_prompt\n"
                              "talk = define_prompt(name='talk', prompt='Answer.', model='stubbed')\n",
}


def _project(root: Path, base_url: str) -> Path:
    files = {**PROJECT, "agents/models/stubbed.py": (
        "from standardagents import define_model\n"
        f"stubbed = define_model(name='stubbed', provider='openai', model='stub-model', base_url={base_url!r},"
        " api_key_env='STUB_KEY', max_retries=0)\n")}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


async def test_a_turn_still_running_after_the_grace_is_handed_over_and_resumed_by_the_next_runtime(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_KEY", "sk-stub")
    release = threading.Event()

    def respond(body: dict[str, Any]) -> StubReply:
        return StubReply(text="the answer", hold=release)

    url = f"sqlite:///{tmp_path / 'handover.db'}"
    with OpenAIStub(respond) as stub:
        project = _project(tmp_path / "project", stub.base_url)
        first = await Runtime.open(project, database_url=url)
        try:
            thread = await first.create_thread("talker")
            seen: list[Any] = []
            with first.subscribe() as sub:  # every thread's events, and the notice (no thread)
                task = await first.start(thread.id, "a question")
                await stub.wait_requests_async(1, timeout=20)  # the turn waits for the model
                released = await first.stop_gracefully(0.05)
                while not sub.queue.empty():
                    seen.append(sub.queue.get_nowait())
            with pytest.raises(ShuttingDownError):
                await first.start(thread.id, "too late")
            assert task.cancelled()
            record = await first.store.get_execution(released[0])
            assert record is not None and record.status == "running"
            assert str(record.state["owner"]).startswith(RELEASED)
        finally:
            await first.aclose()
        types = [e.type for e in seen]
        assert "done" not in types and "error" not in types
        assert seen[-1].type == HANDED_OVER and seen[-1].data["executionIds"] == released
        release.set()
        second = await Runtime.open(project, database_url=url)  # resumes it as it opens
        try:
            await asyncio.wait_for(second.drain(), 20)
            record = await second.store.get_execution(released[0])
            messages = await second.store.list_messages(thread.id)
        finally:
            await second.aclose()
    assert record is not None and record.status == "complete"
    assert [(m.role, m.content) for m in messages] == [("user", "a question"), ("assistant", "the answer")]


async def test_a_request_waiting_for_a_handed_over_turn_gets_503_naming_the_execution(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    from standardagents.server import create_app

    monkeypatch.setenv("STUB_KEY", "sk-stub")
    release = threading.Event()
    with OpenAIStub(lambda body: StubReply(text="the answer", hold=release)) as stub:
        rt = await Runtime.open(_project(tmp_path / "project", stub.base_url),
                                database_url=f"sqlite:///{tmp_path / 'wait.db'}")
        try:
            app = create_app(rt, dev=True, close_runtime=False)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
                thread = (await client.post("/api/threads", json={"agent": "talker"})).json()["id"]
                waiting = asyncio.create_task(client.post(f"/api/threads/{thread}/messages", params={"wait": "true"},
                                                          json={"content": "a question"}))
                await stub.wait_requests_async(1, timeout=20)
                released = await rt.stop_gracefully(0)
                answer = await waiting
                refused = await client.post(f"/api/threads/{thread}/messages", json={"content": "another"})
        finally:
            release.set()
            await rt.aclose()
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "shutting_down"
    assert released[0] in answer.json()["error"]["message"] and answer.headers["retry-after"] == "1"
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
