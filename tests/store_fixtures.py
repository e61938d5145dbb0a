"""Fixtures that give each test a fresh, real database: a SQLite file or a PostgreSQL schema.

``store`` is parametrized over both backends. PostgreSQL comes from
``$STANDARDAGENTS_TEST_POSTGRES_URL``; when it cannot be reached its cases skip, unless
``$CI`` is set, where they fail so a broken CI database is never silently ignored.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from standardagents.store import SQLStore

__all__ = ["Backend", "backend", "own_postgres_database", "postgres_url", "store"]

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_url() -> str:
    return os.environ.get("STANDARDAGENTS_TEST_POSTGRES_URL", DEFAULT_PG_URL)


def _asyncpg_dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://").replace("postgres://", "postgresql://", 1)


_pg_reachable: dict[str, str | None] = {}


async def _pg_problem(url: str) -> str | None:
    """``None`` when PostgreSQL answers at ``url``, else why not (checked once per run)."""
    if url not in _pg_reachable:
        try:
            conn = await asyncpg.connect(_asyncpg_dsn(url), timeout=3)
            await conn.close()
            _pg_reachable[url] = None
        except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
            _pg_reachable[url] = f"{type(exc).__name__}: {exc}"
    return _pg_reachable[url]


@dataclass
class Backend:
    """Where a test's database lives, so a test can open more stores on the same data."""

    name: str
    url: str
    schema: str | None = None

    def new_store(self) -> SQLStore:
        return SQLStore(self.url, schema=self.schema)

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """Rows of a raw query on an independent connection (``?`` SQLite / ``$1`` PG params)."""
        if self.name == "sqlite":
            with sqlite3.connect(self.url.removeprefix("sqlite:///")) as conn:
                return [tuple(r) for r in conn.execute(sql, args).fetchall()]
        conn = await asyncpg.connect(_asyncpg_dsn(self.url),
                                     server_settings={"search_path": self.schema or "public"})
        try:
            return [tuple(r) for r in await conn.fetch(sql, *args)]
        finally:
            await conn.close()

    def param(self, n: int) -> str:
        """The placeholder for the n-th (1-based) raw query parameter."""
        return "?" if self.name == "sqlite" else f"${n}"


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """A fresh empty database on each backend."""
    if request.param == "sqlite":
        yield Backend("sqlite", f"sqlite:///{tmp_path / 'store.db'}")
        return
    url = postgres_url()
    problem = await _pg_problem(url)
    if problem is not None:
        reason = f"PostgreSQL not reachable at {url} ({problem})"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    schema = f"sa_test_{uuid.uuid4().hex[:12]}"
    yield Backend("postgres", url, schema)
    conn = await asyncpg.connect(_asyncpg_dsn(url))
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[SQLStore]:
    """An open store on a fresh database, closed after the test."""
    s = backend.new_store()
    await s.open()
    yield s
    await s.close()


async def own_postgres_database(prefix: str) -> AsyncIterator[str]:
    """The URL of a PostgreSQL database of its own on the test server, created here and dropped
    (with its sessions) when the caller is done: for tests whose several processes share one."""
    base = postgres_url()
    try:
        admin = await asyncpg.connect(_asyncpg_dsn(base), timeout=3)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        reason = f"PostgreSQL not reachable at {base} ({type(exc).__name__}: {exc})"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base.rsplit("/", 1)[0] + "/" + name
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
