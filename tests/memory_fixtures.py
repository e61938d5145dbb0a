"""Databases for the memory tests: a SQLite file (sqlite-vec), the machine's PostgreSQL (no
pgvector: the exact scan) and a PostgreSQL with pgvector from the ``pgserver`` wheel, started
once per test run in a temporary folder and stopped at its end."""

from __future__ import annotations

import os
import tempfile
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from standardagents.store import SQLStore
from store_fixtures import _asyncpg_dsn, _pg_problem, postgres_url

__all__ = ["memory_db", "pgvector_url"]


@pytest.fixture(scope="session")
def pgvector_url() -> Iterator[str]:
    """A PostgreSQL server with the pgvector extension (the ``pgserver`` wheel's own build)."""
    pgserver = pytest.importorskip("pgserver")
    folder = tempfile.mkdtemp(prefix="sa-pgvector-")
    with warnings.catch_warnings():  # platformdirs warns that XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        server: Any = pgserver.get_server(folder, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


async def _pg_schema(url: str) -> tuple[str, str]:
    problem = await _pg_problem(url)
    if problem is not None:
        reason = f"PostgreSQL not reachable at {url} ({problem})"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return url, f"sa_mem_{uuid.uuid4().hex[:12]}"


async def _drop(url: str, schema: str) -> None:
    conn = await asyncpg.connect(_asyncpg_dsn(url))
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture(params=["sqlite", "postgres", "pgvector"])
async def memory_db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SQLStore]:
    """An open store on a fresh database of each kind, closed after the test."""
    if request.param == "sqlite":
        store = SQLStore(f"sqlite:///{tmp_path / 'memory.db'}")
        await store.open()
        yield store
        await store.close()
        return
    url = postgres_url() if request.param == "postgres" else request.getfixturevalue("pgvector_url")
    url, schema = await _pg_schema(url)
    store = SQLStore(url, schema=schema)
    await store.open()
    yield store
    await store.close()
    await _drop(url, schema)
