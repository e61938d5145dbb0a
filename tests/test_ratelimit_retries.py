"""Retries under the shared rate limit: a model limited for the deployment is built without
retries of its own, and the engine sends a failed request again through the limiter, so every
attempt the provider receives is counted in a window (a retry by the provider's client would
reach it uncounted). Two runtimes with their own store connections stand for two workers."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from server_fixtures import write_project
from standardagents import Runtime
from standardagents.service.ratelimit import RateLimit, SharedRateLimiter
from standardagents.store import SQLStore
from standardagents.store.schema_service import rate_windows
from standardagents.store.serviceops import run_op
from standardagents.testing import OpenAIStub, StubReply
from store_fixtures import postgres_url

LIMIT = {"stubbed": RateLimit(requests=2, per=2)}


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        server.queue(StubReply(error_status=429, retry_after=1))
        yield server


@pytest.fixture
async def workers(tmp_path: Path, stub: OpenAIStub) -> AsyncIterator[list[Runtime]]:
    project = write_project(tmp_path / "project", {"agents/models/stubbed.py": f"""
        from standardagents import define_model
        stubbed = define_model(name="stubbed", provider="openai", model="stub-model",
                               base_url="{stub.base_url}", max_retries=2)
    """, "agents/prompts/plain_prompt.py": """
        from standardagents import define_prompt
        plain_prompt = define_prompt(name="plain_prompt", prompt="You answer briefly.", model="stubbed")
    """})
    schema = f"rlr_{uuid.uuid4().hex[:8]}"
    stores = [SQLStore(postgres_url(), schema=schema), SQLStore(postgres_url(), schema=schema)]
    try:
        await stores[0].open()
    except Exception as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL not reachable: {exc}")
        pytest.skip(f"PostgreSQL not reachable: {exc}")
    runtimes = []
    for store in stores:
        rt = await Runtime.open(project, store=store)
        rt.model_gate = SharedRateLimiter(store, LIMIT, redis_url="")
        runtimes.append(rt)
    try:
        yield runtimes
    finally:
        for rt in runtimes:
            await rt.aclose()


def _counted(conn: object) -> list[int]:
    """The requests counted in each window of the model's limit."""
    rows = conn.execute(select(rate_windows.c.requests).where(rate_windows.c.key == "model:stubbed"))  # type: ignore[attr-defined]
    return [int(r[0]) for r in rows]


async def test_a_retried_429_is_counted_in_the_shared_window_like_every_attempt(
        workers: list[Runtime], stub: OpenAIStub) -> None:
    results = await asyncio.gather(*(workers[i % 2].run("internal", f"hello {i}") for i in range(4)))
    counted = await run_op(workers[0].store, _counted, write=False)
    assert [r.outcome for r in results] == ["response"] * 4
    assert len(stub.requests) == 5  # four turns, one of them answered 429 first
    assert sum(counted) == 5  # every request the stub received, the retry too
    assert max(counted) <= 2  # and no window let more through than the limit


async def test_a_limited_models_provider_does_not_retry_by_itself(workers: list[Runtime]) -> None:
    model = workers[0].registry.get("models", "stubbed")
    gate = workers[0].model_gate
    provider = workers[0].setups.provider_for(gate.unretried(model))
    assert (model.max_retries, getattr(provider, "max_retries", None)) == (2, 0)


async def test_a_provider_installed_for_a_limited_model_still_answers_its_turns(workers: list[Runtime]) -> None:
    from standardagents.testing import TestModelProvider

    installed = TestModelProvider(["from the installed provider"])
    workers[0].use_provider("stubbed", installed)
    result = await workers[0].run("internal", "hello")
    assert result.text == "from the installed provider"
