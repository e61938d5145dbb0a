"""The shared provider rate limit: limiters of separate workers (each with its own store
connection or Redis client) let at most a model's requests through per window between them,
on PostgreSQL and on Redis; a provider's 429 blocks the model in the store for every worker."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from server_fixtures import write_project
from standardagents import Runtime
from standardagents.definitions import define_model
from standardagents.providers.base import ModelRequest
from standardagents.records import now_ms
from standardagents.service.ratelimit import RateLimit, SharedRateLimiter
from standardagents.store import SQLStore, serviceops
from standardagents.testing import OpenAIStub, StubReply
from store_fixtures import postgres_url

REDIS_URL = os.environ.get("STANDARDAGENTS_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
MODEL = define_model(name="shared", provider="test", model="offline")
LIMIT = {"shared": RateLimit(requests=2, per=2)}


def _within_two_per_window(times: list[float]) -> None:
    """At most 2 requests are let through in each 2-second window, so the request 4 places later
    was let through at least one whole window later. ``times`` are taken as each acquire returns,
    a little after the window was counted (one let through at a window's end may return in the
    next), so they are compared with a second of slack; unlimited, all 6 return at once."""
    ordered = sorted(times)
    gaps = [later - earlier for earlier, later in zip(ordered, ordered[4:], strict=False)]
    assert min(gaps) >= 2 - 1.0, ordered


async def _acquire_all(limiters: list[SharedRateLimiter], n: int) -> list[float]:
    """``n`` requests spread over the limiters at once; when each was let through."""
    times: list[float] = []

    async def one(limiter: SharedRateLimiter) -> None:
        await limiter.acquire(MODEL, ModelRequest(model="offline", messages=[{"role": "user", "content": "hi"}]))
        times.append(time.time())

    await asyncio.gather(*(one(limiters[i % len(limiters)]) for i in range(n)))
    return times


@pytest.fixture
async def pg_stores() -> AsyncIterator[list[SQLStore]]:
    schema = f"rl_{uuid.uuid4().hex[:8]}"
    stores = [SQLStore(postgres_url(), schema=schema), SQLStore(postgres_url(), schema=schema)]
    try:
        await stores[0].open()
    except Exception as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL not reachable: {exc}")
        pytest.skip(f"PostgreSQL not reachable: {exc}")
    await stores[1].open()
    try:
        yield stores
    finally:
        for store in stores:
            await store.close()


async def test_two_workers_on_postgres_stay_within_the_requests_per_window(pg_stores: list[SQLStore]) -> None:
    limiters = [SharedRateLimiter(store, LIMIT, redis_url="") for store in pg_stores]
    times = await _acquire_all(limiters, 6)
    assert len(times) == 6
    _within_two_per_window(times)


@pytest.fixture
async def redis_limiters(pg_stores: list[SQLStore]) -> AsyncIterator[list[SharedRateLimiter]]:
    import redis.asyncio as aioredis

    probe = aioredis.from_url(REDIS_URL)
    try:
        await probe.ping()
    except Exception as exc:
        await probe.aclose()
        if os.environ.get("CI"):
            pytest.fail(f"Redis not reachable at {REDIS_URL}: {exc}")
        pytest.skip(f"Redis not reachable at {REDIS_URL}: {exc}")
    await probe.flushdb()
    await probe.aclose()
    limiters = [SharedRateLimiter(store, LIMIT, redis_url=REDIS_URL) for store in pg_stores]
    try:
        yield limiters
    finally:
        for limiter in limiters:
            await limiter.aclose()


async def test_two_workers_on_redis_stay_within_the_requests_per_window(
        redis_limiters: list[SharedRateLimiter]) -> None:
    times = await _acquire_all(redis_limiters, 6)
    assert len(times) == 6
    _within_two_per_window(times)


@pytest.fixture
def throttling_stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as stub:
        stub.queue(StubReply(error_status=429, retry_after=7))
        yield stub


async def test_providers_429_blocks_the_model_for_every_worker_until_its_retry_after(
        tmp_path: Path, throttling_stub: OpenAIStub) -> None:
    project = write_project(tmp_path / "project", {"agents/models/stubbed.py": f"""
        from standardagents import define_model
        stubbed = define_model(name="stubbed", provider="openai", model="stub-model",
                               base_url="{throttling_stub.base_url}", max_retries=0)
    """, "agents/prompts/plain_prompt.py": """
        from standardagents import define_prompt
        plain_prompt = define_prompt(name="plain_prompt", prompt="You answer briefly.", model="stubbed")
    """})
    store = SQLStore(f"sqlite:///{tmp_path / 'rl.db'}")
    rt = await Runtime.open(project, store=store)
    rt.model_gate = SharedRateLimiter(store, {"stubbed": RateLimit(requests=100)}, redis_url="")
    try:
        before = now_ms()
        result = await rt.run("internal", "hello")
        until = await serviceops.run_op(store, serviceops.blocked_until, "model:stubbed", write=False)
    finally:
        await rt.aclose()
    assert result.outcome == "model_error"
    assert before + 7000 <= until <= now_ms() + 7000
