"""Shared fixtures: a real OpenAI wire stub on 127.0.0.1 and runtimes on real SQLite files."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from standardagents import Runtime
from standardagents.project import build_registry
from standardagents.store import open_store
from standardagents.testing.openai_stub import OpenAIStub

# Timing is not what property tests check: a loaded 2-core machine must not fail them.
settings.register_profile("standardagents", deadline=None)
settings.load_profile("standardagents")

# Shared fixture modules, registered here (before any test module imports from them) so that
# pytest rewrites their asserts and their fixtures are available everywhere.
pytest_plugins = ["server_fixtures", "store_fixtures"]


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    """A real HTTP server speaking the chat-completions protocol, scripted per test."""
    with OpenAIStub() as server:
        yield server


@pytest.fixture
async def make_runtime(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Build a Runtime from definitions, on a SQLite file in the test's tmp dir."""
    made: list[Runtime] = []

    async def factory(*definitions: Any, **options: Any) -> Runtime:
        registry = build_registry(*definitions)
        store = open_store(f"sqlite:///{tmp_path / f'rt{len(made)}.db'}")
        rt = await Runtime.open(registry, store=store, **options)
        made.append(rt)
        return rt

    yield factory
    for rt in made:
        await rt.aclose()
