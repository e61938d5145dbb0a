"""Quotas at the doors: a turn over a user's quota through the OpenAI door is OpenAI's
rate-limit error (429, Retry-After); a concurrent turn over the limit is refused, or waits
for the running one to end when the policy says wait."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from server_fixtures import LiveServer, serve_app, write_project
from standardagents.store import SQLStore
from standardagents.testing import OpenAIStub, StubReply


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub(lambda _body: StubReply(text="ok", delay=0.5)) as s:
        yield s


def _project(root: Path, stub: OpenAIStub) -> Path:
    return write_project(root, {"agents/models/default.py": f"""
        from standardagents import define_model
        default = define_model(name="default", provider="openai", model="stub-model",
                               base_url="{stub.base_url}", max_retries=0)
    """, "agents/agents/helper.py": """
        from standardagents import define_agent
        helper = define_agent(name="helper", type="ai_human",
                              side_a={"prompt": "plain_prompt", "stop_on_response": True})
    """})


def _serve(tmp_path: Path, stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch, policy: dict[str, object]
           ) -> Iterator[LiveServer]:
    monkeypatch.setenv("STANDARDAGENTS_QUOTAS", json.dumps(policy))
    yield from serve_app(_project(tmp_path / "project", stub), f"sqlite+aiosqlite:///{tmp_path / 'q.db'}")


async def _user_token(tmp_path: Path) -> str:
    async with SQLStore(f"sqlite:///{tmp_path / 'q.db'}") as store:
        user = await store.create_user(f"user-{time.monotonic_ns()}")
        _, token = await store.create_api_token(user.id, "tests")
    return token


async def _turn(server: LiveServer, token: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.base_url, headers={"Authorization": f"Bearer {token}"},
                                 timeout=60) as c:
        thread = (await c.post("/api/threads", json={"agent": "helper"})).json()
        return await c.post(f"/api/threads/{thread['id']}/messages?wait=true", json={"content": "hello"})


@pytest.fixture
def per_minute(tmp_path: Path, stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    yield from _serve(tmp_path, stub, monkeypatch, {"turnsPerMinute": 1})


async def test_openai_door_turn_over_quota_is_a_rate_limit_error_with_retry_after(
        per_minute: LiveServer, tmp_path: Path) -> None:
    for _attempt in range(3):
        token = await _user_token(tmp_path)
        minute = time.time() // 60
        async with openai.AsyncOpenAI(base_url=f"{per_minute.base_url}/v1", api_key=token, max_retries=0) as client:
            first = await client.chat.completions.create(model="helper",
                                                         messages=[{"role": "user", "content": "hi"}])
            with pytest.raises(openai.RateLimitError) as refused:
                await client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "again"}])
        if time.time() // 60 == minute:
            break
    assert first.choices[0].message.content == "ok"
    assert refused.value.status_code == 429
    assert 1 <= int(refused.value.response.headers["retry-after"]) <= 60
    assert "has started 1 turns this minute, the limit of turnsPerMinute" in refused.value.message


@pytest.fixture
def one_at_a_time(tmp_path: Path, stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    yield from _serve(tmp_path, stub, monkeypatch, {"concurrentTurns": 1})


async def test_second_concurrent_turn_over_the_limit_is_refused(
        one_at_a_time: LiveServer, stub: OpenAIStub, tmp_path: Path) -> None:
    token = await _user_token(tmp_path)
    first = asyncio.ensure_future(_turn(one_at_a_time, token))
    await stub.wait_requests_async(1, timeout=20)
    second = await _turn(one_at_a_time, token)
    assert (await first).status_code == 200
    assert second.status_code == 429
    assert second.json()["error"]["message"].endswith("already runs 1 turns at once, the limit of concurrentTurns")
    third = await _turn(one_at_a_time, token)  # the first turn's slot was given back
    assert third.status_code == 200


@pytest.fixture
def waiting(tmp_path: Path, stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    yield from _serve(tmp_path, stub, monkeypatch, {"concurrentTurns": 1, "onLimit": "wait", "maxWait": 30})


async def test_concurrent_turn_over_the_limit_waits_for_the_running_one_when_configured(
        waiting: LiveServer, stub: OpenAIStub, tmp_path: Path) -> None:
    token = await _user_token(tmp_path)
    answers = await asyncio.gather(*(_turn(waiting, token) for _ in range(3)))
    assert [r.status_code for r in answers] == [200, 200, 200]
    assert (len(stub.requests), stub.max_in_flight) == (3, 1)
