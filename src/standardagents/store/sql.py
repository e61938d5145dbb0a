"""``SQLStore``: the one ``Store`` implementation, for SQLite and PostgreSQL.

The statements live in :mod:`standardagents.store.ops`; this module only decides how to run
them. SQLite runs inline on one connection per store (WAL, ``synchronous=NORMAL``), because
a commit takes tens of microseconds and a thread hop would cost more than the write. What
could hold the event loop is kept off it: the connection never waits for a lock (busy
timeout 0) but retries with ``await asyncio.sleep`` backoff while another process writes,
and WAL checkpoints (which fsync the database file) run on a worker thread with a connection
of their own (see :meth:`SQLStore._checkpoint`). PostgreSQL runs on SQLAlchemy's async
engine so network waits never block the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from ..exceptions import NotFoundError, StandardAgentsError, StoreError, StoreUnavailable
from ..files import FileChunk, FileStats, FindResult, GrepResult, ReaddirResult
from ..records import ExecutionRecord, Fence, FileRecord, LogRecord, Message, ThreadRecord, now_ms
from . import contextops, eventops, fileops, ops, threadreads
from .checks import check_json, check_key, check_path, check_text, check_window
from .fastpath import SQLiteFastPath
from .migrate import upgrade_to_head
from .records import ApiTokenRecord, EffectRecord, SubagentRecord, UserRecord

__all__ = ["DATABASE_URL_ENV", "SQLStore", "open_store", "resolve_url"]

DATABASE_URL_ENV = "STANDARDAGENTS_DATABASE_URL"
log = logging.getLogger("standardagents.store")
T = TypeVar("T")

#: how long an operation keeps retrying while another process holds SQLite's write lock
SQLITE_LOCK_WAIT = 10.0
#: write transactions between two checkpoints: a step's commit adds about six WAL pages, so
#: the WAL stays near SQLite's own default threshold (about 16 MB)
CHECKPOINT_COMMITS = 600
#: a WAL file grown past this (bytes) is cut back to it when SQLite starts it over
WAL_SIZE_LIMIT = 64 * 1024 * 1024


class _Busy(Exception):
    """Internal: SQLite reported its write lock taken by another connection."""


def _is_busy(exc: BaseException) -> bool:
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, sqlite3.OperationalError):
        code = getattr(orig, "sqlite_errorcode", None)
        return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "database is locked" in str(orig)
    return False


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _dumps(value: Any) -> str:
    """Compact JSON; one shared encoder (``json.dumps`` with options builds one per call)."""
    return _ENCODER.encode(value)


def resolve_url(url: str | None = None, *, project_dir: Path | None = None) -> str:
    """The database URL to use: ``url``, else ``$STANDARDAGENTS_DATABASE_URL``, else a SQLite
    file under ``<project_dir>/.standardagents/`` (the directory is created)."""
    if url:
        return url
    env = os.environ.get(DATABASE_URL_ENV)
    if env:
        return env
    base = Path(project_dir) if project_dir is not None else Path.cwd()
    folder = base / ".standardagents"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'standardagents.db'}"


def _driver_url(url: str) -> URL:
    """Parse ``url`` and pick our drivers: pysqlite for SQLite, asyncpg for PostgreSQL."""
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise StoreError(f"invalid database URL {url!r}: {exc}") from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+pysqlite")
    if backend in ("postgresql", "postgres"):
        query = dict(parsed.query)
        sslmode = query.pop("sslmode", None)
        if sslmode is not None and "ssl" not in query:
            query["ssl"] = sslmode
        return parsed.set(drivername="postgresql+asyncpg", query=query)
    raise StoreError(f"unsupported database URL {url!r}: use sqlite:///path or postgresql://...")


def _select_one(conn: Connection) -> None:
    conn.execute(text("SELECT 1"))


class SQLStore:
    """A :class:`~standardagents.store.base.Store` on SQLAlchemy Core.

    ``schema`` (PostgreSQL only) keeps every table in that schema, created on open; it lets
    several independent stores share one database.
    """

    def __init__(self, url: str, *, schema: str | None = None) -> None:
        self.url = url
        self.schema = schema
        self._url = _driver_url(url)
        self.dialect = "sqlite" if self._url.get_backend_name() == "sqlite" else "postgresql"
        self._engine: Engine | None = None
        self._conn: Connection | None = None
        self._dbapi: Any = None
        self._cursor: Any = None
        self._fast: SQLiteFastPath | None = None
        self._aengine: AsyncEngine | None = None
        self._lock = threading.Lock()
        self._memory = False
        self._writes = 0  # write transactions since the last checkpoint
        self._checkpointing: asyncio.Task[None] | None = None
        self._checkpoint_conn: sqlite3.Connection | None = None
        #: set while writes wait for the last part of a checkpoint (reads go on)
        self._writes_paused: asyncio.Event | None = None

    # ------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Connect and bring the schema to the newest migration (safe to repeat)."""
        if self._conn is not None or self._aengine is not None:
            return
        if self.dialect == "sqlite":
            self._open_sqlite()
        else:
            await self._open_postgres()

    def _open_sqlite(self) -> None:
        database = self._url.database or ""
        memory = database in ("", ":memory:") or database.startswith("file::memory:")
        folder = Path(database).expanduser().parent
        if not memory and not folder.is_dir():
            # a mistyped path must not quietly grow folders and an empty database
            raise StoreError(f"cannot open SQLite database {self.url!r}: the folder {folder} does not exist")
        engine = create_engine(
            self._url, poolclass=StaticPool, json_serializer=_dumps,
            connect_args={"check_same_thread": False, "isolation_level": None},
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            # The driver's own transaction handling is off: BEGIN is issued explicitly.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            if not memory:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            # Never wait inside SQLite (that would hold the event loop): a taken write lock
            # is reported at once and the operation retried with an asynchronous backoff.
            cur.execute("PRAGMA busy_timeout=0")
            # Checkpoints fsync the database file: they run on a worker thread (_checkpoint).
            cur.execute(f"PRAGMA wal_autocheckpoint={0 if not memory else 1000}")
            cur.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            cur.execute("PRAGMA temp_store=MEMORY")
            cur.execute("PRAGMA cache_size=-16000")
            cur.close()

        try:
            conn = engine.connect()
        except SQLAlchemyError as exc:
            engine.dispose()
            raise StoreError(f"cannot open SQLite database {self.url!r}: {exc}") from exc
        self._engine, self._conn = engine, conn
        self._dbapi = conn.connection.driver_connection
        self._cursor = self._dbapi.cursor()
        self._fast = SQLiteFastPath(engine.dialect)
        try:
            self._run_sqlite_waiting(upgrade_to_head, ())
        except StoreError:
            self._close_sqlite()
            raise
        self._memory = memory
        self._writes = 0

    async def _open_postgres(self) -> None:
        connect_args: dict[str, Any] = {}
        if self.schema:
            connect_args["server_settings"] = {"search_path": self.schema}
        try:
            engine = create_async_engine(
                self._url, json_serializer=_dumps, connect_args=connect_args, pool_pre_ping=False,
            )
        except ImportError as exc:
            raise StoreError("PostgreSQL needs the postgres extra: pip install 'standardagents[postgres]' "
                             f"({exc})") from exc
        try:
            async with engine.begin() as conn:
                await conn.run_sync(upgrade_to_head, schema=self.schema)
        except (SQLAlchemyError, OSError) as exc:
            await engine.dispose()
            where = self._url.render_as_string(hide_password=True)
            raise StoreError(f"cannot open PostgreSQL database at {where}: {exc}") from exc
        if self._aengine is not None:  # another task opened it meanwhile
            await engine.dispose()
            return
        self._aengine = engine

    def _close_sqlite(self) -> None:
        if self._checkpoint_conn is not None:
            self._checkpoint_conn.close()
            self._checkpoint_conn = None
        if self._conn is not None:
            self._conn.close()
        if self._engine is not None:
            self._engine.dispose()
        self._conn = self._engine = self._dbapi = self._cursor = self._fast = None

    async def close(self) -> None:
        """Release connections; the store can be opened again."""
        if self.dialect == "sqlite":
            task, self._checkpointing = self._checkpointing, None
            if task is not None:
                try:
                    await task
                except Exception:  # a failed checkpoint leaves the WAL to the next open
                    pass
            with self._lock:
                self._close_sqlite()
        elif self._aengine is not None:
            engine, self._aengine = self._aengine, None
            await engine.dispose()

    async def ping(self) -> None:
        """One ``SELECT 1``: raises :class:`StoreError` when the database does not answer."""
        await self._run(_select_one, write=False)

    async def __aenter__(self) -> SQLStore:
        await self.open()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------ running ops

    def _run_sqlite(self, fn: Callable[..., T], args: tuple[Any, ...], *, write: bool) -> T:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError("the store is closed; open it again with `await store.open()`")
            dbapi = self._dbapi
            try:
                if write:
                    dbapi.execute("BEGIN IMMEDIATE")
                result = fn(conn, *args)
                if conn.in_transaction():  # only when an op went through SQLAlchemy
                    conn.commit()
                if dbapi.in_transaction:
                    dbapi.commit()
                if write:
                    self._writes += 1
                return result
            except BaseException as exc:
                try:
                    if conn.in_transaction():
                        conn.rollback()
                    if dbapi.in_transaction:
                        dbapi.rollback()
                except Exception:
                    pass
                if isinstance(exc, SQLAlchemyError | sqlite3.Error):
                    if _is_busy(exc):
                        raise _Busy() from exc
                    raise StoreError(f"{fn.__name__} failed: {_reason(exc)}") from exc
                raise

    def _run_sqlite_waiting(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """``_run_sqlite`` retried while the database is locked, blocking (start-up only)."""
        deadline = time.monotonic() + SQLITE_LOCK_WAIT
        delay = 0.001
        while True:
            try:
                return self._run_sqlite(fn, args, write=True)
            except _Busy as exc:
                if time.monotonic() >= deadline:
                    raise StoreError(f"{fn.__name__} failed: the database is locked by another process") from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    async def _run(self, fn: Callable[..., T], *args: Any, write: bool = True) -> T:
        """Run one op as one transaction; database failures become ``StoreError``."""
        if self.dialect == "sqlite":
            if self._conn is None:
                self._open_sqlite()
            if write and self._writes_paused is not None:
                await self._writes_paused.wait()
            try:
                result = self._run_sqlite(fn, args, write=write)
            except _Busy:
                result = await self._run_sqlite_later(fn, args, write)
            if self._writes >= CHECKPOINT_COMMITS and not self._memory:
                if self._checkpointing is None:
                    self._checkpointing = asyncio.get_running_loop().create_task(self._checkpoint())
                elif self._writes >= 4 * CHECKPOINT_COMMITS:
                    # the caller writes without ever letting the loop run the checkpoint task
                    # (a script in a tight loop): checkpoint here, as SQLite itself would
                    self._checkpoint_inline()
            return result
        engine = self._aengine
        if engine is None:
            await self._open_postgres()
            engine = self._aengine
            assert engine is not None
        try:
            async with engine.begin() as conn:
                return await conn.run_sync(fn, *args)
        except StandardAgentsError:
            raise
        except (SQLAlchemyError, OSError) as exc:
            if _unreachable(exc):
                raise StoreUnavailable(f"{fn.__name__} failed: {_reason(exc)}") from exc
            raise StoreError(f"{fn.__name__} failed: {_reason(exc)}") from exc

    async def _checkpoint(self) -> None:
        """Copy the WAL into the database file without holding the event loop, and let
        SQLite start the WAL over.

        A checkpoint only copies the frames present when it starts, and SQLite starts the WAL
        over only once every frame is copied: under a steady stream of commits a checkpoint
        running beside them never catches up and the WAL grows without end. So it runs in two
        parts on a worker thread with a connection of its own: first beside the commits (most
        of the copying and the fsyncs), then with this store's writes waiting (reads go on)
        for the few frames written meanwhile. The next write then starts the WAL over."""
        try:
            await asyncio.to_thread(self._checkpoint_passive)
            paused = self._writes_paused = asyncio.Event()
            try:
                if await asyncio.to_thread(self._checkpoint_passive):
                    self._writes = 0
            finally:
                self._writes_paused = None
                paused.set()
        except Exception as exc:  # the next checkpoint tries again
            log.warning("SQLite checkpoint failed: %s", exc)
        finally:
            self._checkpointing = None

    def _checkpoint_passive(self) -> bool:
        """One PASSIVE checkpoint on the checkpoint connection; True when every frame was copied."""
        conn = self._checkpoint_conn
        if conn is None:
            database = self._url.database or ""
            conn = sqlite3.connect(str(Path(database).expanduser()), check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=1000")  # another process's checkpoint: wait for it here
            self._checkpoint_conn = conn
        busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return not busy and frames == copied

    def _checkpoint_inline(self) -> None:
        with self._lock:
            if self._dbapi is None:
                return
            busy, frames, copied = self._dbapi.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if not busy and frames == copied:
            self._writes = 0

    async def _run_sqlite_later(self, fn: Callable[..., T], args: tuple[Any, ...], write: bool) -> T:
        """Retry an op another process's write lock turned away, sleeping asynchronously
        between attempts (1 ms doubling to 50 ms) for up to ``SQLITE_LOCK_WAIT`` seconds."""
        deadline = time.monotonic() + SQLITE_LOCK_WAIT
        delay = 0.001
        while True:
            await asyncio.sleep(delay)
            try:
                return self._run_sqlite(fn, args, write=write)
            except _Busy as exc:
                if time.monotonic() >= deadline:
                    raise StoreError(f"{fn.__name__} failed: the database is locked by another process "
                                     f"(waited {SQLITE_LOCK_WAIT:g} s)") from exc
            delay = min(delay * 2, 0.05)

    # ------------------------------------------------------------ threads

    async def create_thread(self, thread: ThreadRecord) -> ThreadRecord:
        _check_thread_fields({"id": thread.id, "agent": thread.agent, "user_id": thread.user_id,
                              "title": thread.title, "parent_id": thread.parent_id, "package": thread.package,
                              "metadata": thread.metadata})
        return await self._run(ops.create_thread, thread)

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        check_text("thread id", thread_id)
        if self.dialect == "sqlite":
            return await self._run(self._sqlite_thread, thread_id, write=False)
        return await self._run(ops.get_thread, thread_id, write=False)

    def _sqlite_thread(self, _conn: Connection, thread_id: str) -> ThreadRecord | None:
        assert self._engine is not None
        return threadreads.sqlite_get_thread(self._cursor, self._engine.dialect, thread_id)

    async def list_threads(
        self, *, agent: str | None = None, user_id: str | None = None,
        parent_id: str | None = None, top_level: bool = False, limit: int = 50, offset: int = 0,
    ) -> list[ThreadRecord]:
        check_window(limit, offset)
        for name, value in (("agent", agent), ("user id", user_id), ("parent thread id", parent_id)):
            check_text(name, value)
        return await self._run(ops.list_threads, agent, user_id, parent_id, limit, offset, top_level, write=False)

    async def update_thread(self, thread_id: str, **changes: Any) -> ThreadRecord:
        check_text("thread id", thread_id)
        _check_thread_fields(changes)
        return await self._run(ops.update_thread, thread_id, changes)

    async def delete_thread(self, thread_id: str) -> bool:
        check_text("thread id", thread_id)
        return await self._run(ops.delete_thread, thread_id)

    # ------------------------------------------------------------ messages

    async def add_message(self, message: Message) -> Message:
        if self.dialect == "sqlite":
            await self._run(self._sqlite_step, [message], (), (), None, None)
            return message
        return (await self._run(ops.insert_messages, [message]))[0]

    async def get_message(self, message_id: str) -> Message | None:
        """The message; raises ``NotFoundError`` when there is none with that id."""
        return await self._run(ops.get_message, message_id, write=False)

    async def update_message(self, message_id: str, changes: dict[str, Any]) -> Message:
        return await self._run(ops.update_message, message_id, changes)

    async def list_messages(
        self, thread_id: str, *, limit: int | None = None, offset: int = 0,
        include_silent: bool = True, include_hidden: bool = True, newest_first: bool = False,
    ) -> list[Message]:
        check_text("thread id", thread_id)
        check_window(limit, offset)
        fn = self._sqlite_list if self.dialect == "sqlite" else ops.list_messages
        return await self._run(fn, thread_id, limit, offset, include_silent,
                               include_hidden, newest_first, write=False)

    async def list_context_messages(self, thread_id: str) -> list[Message]:
        """The thread's messages from the oldest one not hidden on (from the newest when all
        are hidden), in order: what a turn's context is built from, read in O(context)."""
        check_text("thread id", thread_id)
        if self.dialect == "sqlite":
            return await self._run(self._sqlite_context, thread_id, write=False)
        return await self._run(contextops.list_context_messages, thread_id, write=False)

    def _sqlite_context(self, _conn: Connection, thread_id: str) -> list[Message]:
        assert self._engine is not None
        return contextops.sqlite_context_messages(self._cursor, self._engine.dialect, thread_id)

    async def message_positions(self, thread_id: str, message_ids: list[str]) -> dict[str, int]:
        """The stored position (``seq``) of each of these messages of the thread that exists."""
        check_text("thread id", thread_id)
        return await self._run(contextops.message_positions, thread_id, list(message_ids), write=False)

    async def delete_messages(self, thread_id: str, message_ids: list[str]) -> int:
        check_text("thread id", thread_id)
        return await self._run(ops.delete_messages, thread_id, list(message_ids))

    async def count_messages(self, thread_id: str, *, include_silent: bool = True) -> int:
        check_text("thread id", thread_id)
        return await self._run(ops.count_messages, thread_id, include_silent, write=False)

    async def commit_step(
        self,
        *,
        messages: list[Message] | None = None,
        updates: list[tuple[str, dict[str, Any]]] | None = None,
        tool_results: list[dict[str, Any]] | None = None,
        execution: ExecutionRecord | None = None,
        fence: Fence | None = None,
    ) -> list[Message]:
        """Insert messages, apply updates, insert tool results and upsert the execution in
        ONE transaction, fenced by the execution's epoch (or ``fence``); any failure rolls all
        of it back and raises ``StoreError`` (``ExecutionTakenOver`` when fenced off)."""
        fn = self._sqlite_step if self.dialect == "sqlite" else ops.commit_step
        try:
            return await self._run(fn, messages or [], updates or [], tool_results or [], execution, fence)
        except NotFoundError as exc:
            for message in messages or []:
                message.seq = None
            raise StoreError(f"step not committed: {exc}") from exc
        except StoreError:
            for message in messages or []:
                message.seq = None
            raise

    def _sqlite_step(
        self, conn: Connection, new_messages: list[Message],
        updates: list[tuple[str, dict[str, Any]]], results: list[dict[str, Any]],
        execution: ExecutionRecord | None, fence: Fence | None,
    ) -> list[Message]:
        assert self._fast is not None
        self._fast.commit_step(self._cursor, new_messages, results, execution, fence)
        for message_id, changes in updates:
            ops.update_message(conn, message_id, changes)
        return new_messages

    def _sqlite_list(self, _conn: Connection, *args: Any) -> list[Message]:
        assert self._fast is not None
        return self._fast.list_messages(self._cursor, *args)

    async def list_tool_results(self, thread_id: str, *, tool_call_id: str | None = None) -> list[dict[str, Any]]:
        return await self._run(ops.list_tool_results, thread_id, tool_call_id, write=False)

    async def list_usage(self, *, thread_id: str | None = None, user_id: str | None = None,
                         agent: str | None = None, since: int | None = None,
                         until: int | None = None) -> list[dict[str, Any]]:
        return await self._run(ops.list_usage, thread_id, user_id, agent, since, until, write=False)

    # ------------------------------------------------------------ executions

    async def save_execution(self, execution: ExecutionRecord) -> None:
        await self._run(ops.save_execution, execution)

    async def replace_execution(self, execution: ExecutionRecord, *, expected_status: str,
                                expected_updated_at: int) -> bool:
        return await self._run(ops.replace_execution, execution, expected_status, expected_updated_at)

    async def claim_env(self, scope: str, scope_id: str, key: str, value: Any, now: int,
                        stale_before: int | None = None) -> bool:
        if self.dialect == "sqlite":  # taken around every execution: straight on the cursor
            return await self._run(self._sqlite_claim, scope, scope_id, key, value, now, stale_before)
        return await self._run(ops.claim_env, scope, scope_id, key, value, now, stale_before)

    def _sqlite_claim(self, conn: Connection, scope: str, scope_id: str, key: str, value: Any, now: int,
                      stale_before: int | None) -> bool:
        if scope not in ops.ENV_SCOPES:
            return ops.claim_env(conn, scope, scope_id, key, value, now, stale_before)
        cur = self._cursor
        cur.execute("INSERT INTO env_values (scope, scope_id, key, value, updated_at) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT DO NOTHING", (scope, scope_id, key, _dumps(value), now))
        if cur.rowcount == 1:
            return True
        if stale_before is None:
            return False
        cur.execute("UPDATE env_values SET value = ?, updated_at = ? WHERE scope = ? AND scope_id = ? AND key = ? "
                    "AND updated_at < ?", (_dumps(value), now, scope, scope_id, key, stale_before))
        return bool(cur.rowcount == 1)

    async def release_env(self, scope: str, scope_id: str, key: str, owner: str | None = None) -> bool:
        """Delete a claim (like :meth:`delete_env`, straight on the cursor for SQLite); with
        ``owner``, only while that owner holds it."""
        if self.dialect == "sqlite":
            return await self._run(self._sqlite_release, scope, scope_id, key, owner)
        if owner is not None:
            return await self._run(ops.release_claim, scope, scope_id, key, owner)
        return await self._run(ops.delete_env, scope, scope_id, key)

    def _sqlite_release(self, conn: Connection, scope: str, scope_id: str, key: str, owner: str | None) -> bool:
        cur = self._cursor
        if owner is None:
            cur.execute("DELETE FROM env_values WHERE scope = ? AND scope_id = ? AND key = ?", (scope, scope_id, key))
        else:
            cur.execute("DELETE FROM env_values WHERE scope = ? AND scope_id = ? AND key = ? "
                        "AND json_extract(value, '$.owner') = ?", (scope, scope_id, key, owner))
        return bool(cur.rowcount == 1)

    async def touch_env(self, scope: str, scope_id: str, keys: list[str], now: int, owner: str | None = None) -> int:
        return await self._run(ops.touch_env, scope, scope_id, list(keys), now, owner)

    async def list_scope(self, scope: str) -> list[tuple[str, str, Any]]:
        return await self._run(ops.list_scope, scope, write=False)

    async def touch_executions(self, held: list[Fence], now: int) -> list[str]:
        return await self._run(ops.touch_executions, list(held), now)

    async def get_execution(self, execution_id: str) -> ExecutionRecord | None:
        return await self._run(ops.get_execution, execution_id, write=False)

    async def list_executions(self, *, thread_id: str | None = None, status: str | None = None) -> list[ExecutionRecord]:
        if self.dialect == "sqlite" and thread_id is not None and status is not None:
            # asked before every turn (is one of the thread's turns cut short?): on the cursor
            return await self._run(self._sqlite_thread_executions, thread_id, status, write=False)
        return await self._run(ops.list_executions, thread_id, status, write=False)

    def _sqlite_thread_executions(self, _conn: Connection, thread_id: str, status: str) -> list[ExecutionRecord]:
        assert self._fast is not None
        return self._fast.thread_executions(self._cursor, thread_id, status)

    # ------------------------------------------------------------ logs

    async def add_log(self, log: LogRecord) -> LogRecord:
        return await self._run(ops.add_log, log)

    async def list_logs(self, thread_id: str, *, limit: int = 100, offset: int = 0) -> list[LogRecord]:
        check_text("thread id", thread_id)
        check_window(limit, offset)
        return await self._run(ops.list_logs, thread_id, limit, offset, write=False)

    # ------------------------------------------------------------ event log

    async def append_events(self, rows: list[tuple[str, int, int, int, str, float]]) -> int:
        """Store batches of events ``(stream, last id, first id, count, JSON list, last ts)`` in
        one transaction (a batch already stored is skipped); returns the events stored."""
        return await self._run(eventops.append_batches, rows)

    async def log_ending(self, execution: ExecutionRecord, expected_updated_at: int,
                         rows: list[tuple[str, int, int, int, str, float]]) -> bool:
        """Save an ended ``execution`` only if the stored row still has its status and
        ``expected_updated_at``, and store event batches ``rows`` in the same transaction;
        False (nothing written) when another writer changed the row first."""
        fn = self._sqlite_log_ending if self.dialect == "sqlite" else eventops.log_ending
        return await self._run(fn, execution, int(expected_updated_at), rows)

    def _sqlite_log_ending(self, _conn: Connection, execution: ExecutionRecord, expected_updated_at: int,
                           rows: list[tuple[str, int, int, int, str, float]]) -> bool:
        assert self._fast is not None
        return self._fast.log_ending(self._cursor, execution, expected_updated_at, rows)

    async def read_events(self, stream: str, after: int, *,
                          limit: int = 10_000) -> tuple[int, list[tuple[int, str, Any, float]]]:
        """The stream's floor (highest id trimmed away, 0 when none) and its events
        ``(id, type, data, ts)`` after ``after``."""
        return await self._run(eventops.read_events, stream, int(after), int(limit), write=False)

    async def prune_events(self, streams: list[str], keep: int, before_ts: float | None) -> int:
        """Trim the log: ``keep`` newest events per stream in ``streams``, none older than ``before_ts``."""
        return await self._run(eventops.prune_events, list(streams), int(keep), before_ts)

    # ------------------------------------------------------------ thread files

    async def write_file(self, thread_id: str, path: str, data: bytes, *, mime_type: str | None = None,
                         metadata: dict[str, Any] | None = None) -> FileRecord:
        _check_file(thread_id, path)
        check_key("mime type", mime_type)
        check_json("file metadata", metadata)
        return await self._run(ops.write_file, thread_id, path, data, mime_type, metadata)

    async def read_file(self, thread_id: str, path: str) -> bytes | None:
        _check_file(thread_id, path)
        return await self._run(ops.read_file, thread_id, path, write=False)

    async def stat_file(self, thread_id: str, path: str) -> FileRecord | None:
        _check_file(thread_id, path)
        return await self._run(ops.stat_file, thread_id, path, write=False)

    async def list_files(self, thread_id: str, prefix: str = "") -> list[FileRecord]:
        check_text("thread id", thread_id)
        check_text("file path prefix", prefix)
        return await self._run(ops.list_files, thread_id, prefix, write=False)

    async def delete_file(self, thread_id: str, path: str) -> bool:
        _check_file(thread_id, path)
        return await self._run(ops.delete_file, thread_id, path)

    async def stat_path(self, thread_id: str, path: str) -> FileStats | None:
        _check_file(thread_id, path)
        return await self._run(fileops.stat_path, thread_id, path, write=False)

    async def readdir(self, thread_id: str, path: str = "/") -> ReaddirResult | None:
        _check_file(thread_id, path)
        return await self._run(fileops.readdir, thread_id, path, write=False)

    async def find_files(self, thread_id: str, pattern: str, *, limit: int = 1000) -> FindResult:
        check_text("thread id", thread_id)
        check_text("pattern", pattern)
        return await self._run(fileops.find_files, thread_id, pattern, limit, write=False)

    async def grep_files(self, thread_id: str, pattern: str, *, ignore_case: bool = False,
                         glob: str | None = None, max_matches: int = 1000) -> GrepResult:
        check_text("thread id", thread_id)
        check_text("pattern", pattern)
        check_text("glob", glob)
        return await self._run(fileops.grep_files, thread_id, pattern, ignore_case, glob,
                               max_matches, write=False)

    async def read_file_chunk(self, thread_id: str, path: str, offset: int, length: int) -> FileChunk | None:
        _check_file(thread_id, path)
        check_window(length, offset)
        return await self._run(fileops.read_file_chunk, thread_id, path, offset, length, write=False)

    # ------------------------------------------------------------ env values

    async def set_env(self, scope: str, scope_id: str, key: str, value: Any) -> None:
        await self._run(ops.set_env, scope, scope_id, key, value)

    async def get_env(self, scope: str, scope_id: str, key: str) -> Any:
        return await self._run(ops.get_env, scope, scope_id, key, write=False)

    async def list_env(self, scope: str, scope_id: str) -> dict[str, Any]:
        return await self._run(ops.list_env, scope, scope_id, write=False)

    async def delete_env(self, scope: str, scope_id: str, key: str) -> bool:
        return await self._run(ops.delete_env, scope, scope_id, key)

    # ------------------------------------------------------------ users and API tokens

    async def create_user(self, name: str, *, email: str | None = None, is_admin: bool = False,
                          user_id: str | None = None) -> UserRecord:
        user = UserRecord(name=name, email=email, is_admin=is_admin)
        if user_id is not None:
            user.id = user_id
        return await self._run(ops.create_user, user)

    async def get_user(self, user_id: str) -> UserRecord | None:
        return await self._run(ops.get_user, user_id, write=False)

    async def get_user_by_email(self, email: str) -> UserRecord | None:
        return await self._run(ops.get_user_by_email, email, write=False)

    async def list_users(self) -> list[UserRecord]:
        return await self._run(ops.list_users, write=False)

    async def create_api_token(self, user_id: str, name: str) -> tuple[ApiTokenRecord, str]:
        """A new token for ``user_id``; the plaintext is returned once and never stored."""
        return await self._run(ops.create_api_token, user_id, name)

    async def verify_api_token(self, plaintext: str) -> UserRecord | None:
        """The user a live (not revoked) token belongs to, else ``None``."""
        return await self._run(ops.verify_api_token, plaintext)

    async def list_api_tokens(self, user_id: str | None = None) -> list[ApiTokenRecord]:
        return await self._run(ops.list_api_tokens, user_id, write=False)

    async def revoke_api_token(self, token_id: str) -> bool:
        return await self._run(ops.revoke_api_token, token_id)

    # ------------------------------------------------------------ user values

    async def set_user_value(self, user_id: str, key: str, value: Any) -> None:
        check_key("value key", key)
        check_json("value", value)
        await self._run(ops.set_user_value, user_id, key, value)

    async def get_user_value(self, user_id: str, key: str) -> Any:
        check_key("value key", key)
        return await self._run(ops.get_user_value, user_id, key, write=False)

    async def list_user_values(self, user_id: str) -> dict[str, Any]:
        return await self._run(ops.list_user_values, user_id, write=False)

    async def delete_user_value(self, user_id: str, key: str) -> bool:
        check_key("value key", key)
        return await self._run(ops.delete_user_value, user_id, key)

    # ------------------------------------------------------------ scheduled effects

    async def schedule_effect(self, thread_id: str, name: str, args: Any = None, *,
                              run_at: int | None = None, effect_id: str | None = None,
                              trace: dict[str, str] | None = None) -> EffectRecord:
        effect = EffectRecord(thread_id=thread_id, name=name, args=args,
                              run_at=run_at if run_at is not None else now_ms(), trace=trace or None)
        if effect_id is not None:
            effect.id = effect_id
        return await self._run(ops.schedule_effect, effect)

    async def get_effect(self, effect_id: str) -> EffectRecord | None:
        check_text("effect id", effect_id)
        return await self._run(ops.get_effect, effect_id, write=False)

    async def claim_due_effects(self, now: int, worker_id: str, limit: int = 10,
                                lease_ms: int = 60_000) -> list[EffectRecord]:
        """Atomically claim due effects for ``worker_id``: no two workers get the same one."""
        return await self._run(ops.claim_due_effects, now, worker_id, limit, lease_ms)

    async def renew_effect(self, effect_id: str, worker_id: str, claimed_until: int) -> bool:
        """Extend ``worker_id``'s lease on a running effect; ``False`` when it no longer owns it."""
        return await self._run(ops.renew_effect, effect_id, worker_id, claimed_until)

    async def finish_effect(self, effect_id: str, result: Any = None, *,
                            worker_id: str | None = None) -> bool:
        """Mark a running effect done; ``False`` if it is not running (or not ``worker_id``'s)."""
        return await self._run(ops.finish_effect, effect_id, result, worker_id)

    async def fail_effect(self, effect_id: str, error: str, retry_at: int | None = None, *,
                          worker_id: str | None = None) -> bool:
        """Record a failure: back to pending at ``retry_at``, or ``failed`` for good."""
        return await self._run(ops.fail_effect, effect_id, error, retry_at, worker_id)

    async def cancel_effect(self, effect_id: str) -> bool:
        return await self._run(ops.cancel_effect, effect_id)

    async def list_effects(self, *, thread_id: str | None = None, status: str | None = None) -> list[EffectRecord]:
        return await self._run(ops.list_effects, thread_id, status, write=False)

    # ------------------------------------------------------------ subagents

    async def add_subagent(self, link: SubagentRecord) -> SubagentRecord:
        return await self._run(ops.add_subagent, link)

    async def update_subagent(self, subagent_id: str, **changes: Any) -> SubagentRecord:
        return await self._run(ops.update_subagent, subagent_id, changes)

    async def get_subagent(self, subagent_id: str) -> SubagentRecord | None:
        return await self._run(ops.get_subagent, subagent_id, write=False)

    async def list_subagents(self, parent_thread_id: str) -> list[SubagentRecord]:
        return await self._run(ops.list_subagents, parent_thread_id, write=False)


def _check_thread_fields(fields: dict[str, Any]) -> None:
    """Thread columns refused before the statement: ids within 64 characters, names within 255."""
    sizes = {"id": 64, "user_id": 64, "parent_id": 64, "agent": 255, "agent_id": 255, "package": 255}
    for name, value in fields.items():
        label = "thread " + name.replace("_", " ")
        if name == "metadata":
            check_json("metadata", value)
        elif isinstance(value, str):
            check_text(label, value, max_length=sizes.get(name))


def _check_file(thread_id: str, path: str) -> None:
    check_text("thread id", thread_id)
    check_path(path)


def _unreachable(exc: BaseException) -> bool:
    """Whether a failure means the database could not be reached (rather than refused the
    statement): a socket error, or a connection SQLAlchemy had to invalidate."""
    if isinstance(exc, OSError | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    cause = exc.__cause__ or exc.__context__
    return isinstance(cause, OSError | ConnectionError | TimeoutError) or isinstance(exc, InterfaceError)


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc)
    return text.splitlines()[0] if text else type(exc).__name__


def open_store(url: str | None = None, *, project_dir: Path | None = None,
               schema: str | None = None) -> SQLStore:
    """The store at ``url``, ``$STANDARDAGENTS_DATABASE_URL`` or the project's SQLite file
    ``<project_dir>/.standardagents/standardagents.db``.

    It connects and migrates on ``await store.open()``, ``async with store`` or its first call.
    """
    return SQLStore(resolve_url(url, project_dir=project_dir), schema=schema)
