"""Every store operation as a plain function of a synchronous SQLAlchemy ``Connection``.

Writing each statement once here lets :class:`~standardagents.store.sql.SQLStore` run them
two ways: inline on its single SQLite connection (tens of microseconds, no thread hop) and
through ``AsyncConnection.run_sync`` on PostgreSQL, where the driver never blocks the loop.
Statements are module constants with bound parameters so SQLAlchemy's compiled cache hits.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from sqlalchemy import (
    Connection,
    Insert,
    Row,
    Select,
    Table,
    and_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from ..exceptions import ExecutionTakenOver, NotFoundError, StoreError
from ..files import canonical_path
from ..records import (
    ExecutionRecord,
    Fence,
    FileRecord,
    LogRecord,
    Message,
    ThreadRecord,
    ToolCall,
    Usage,
    new_id,
    now_ms,
)
from . import fileops
from .records import ApiTokenRecord, EffectRecord, SubagentRecord, UserRecord
from .schema import (
    api_tokens,
    env_values,
    event_log,
    executions,
    logs,
    messages,
    scheduled_effects,
    subagents,
    thread_files,
    threads,
    tool_results,
    user_values,
    users,
)

__all__ = [
    "FENCE_EXEC",
    "INSERT_MSG",
    "INSERT_TR",
    "MSG_COLS",
    "REPLACE_EXEC",
    "THREAD_EXECS",
    "TOKEN_PREFIX",
    "UPSERT_EXEC",
    "check_fence",
    "execution_from_row",
    "execution_params",
    "hash_token",
    "list_messages_params",
    "list_messages_stmt",
    "list_usage",
    "message_from_row",
    "message_params",
    "release_claim",
    "replace_execution_params",
    "tool_result_params",
]

TOKEN_PREFIX = "sat_"


def hash_token(plaintext: str) -> str:
    """The SHA-256 hex digest under which an API token is stored."""
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


def _upsert(table: Table, keys: Sequence[str], update_cols: Sequence[str], *,
            unless_changed: str | None = None) -> dict[str, Insert]:
    """``INSERT ... ON CONFLICT (keys) DO UPDATE`` built once per dialect; with
    ``unless_changed``, an existing row is updated only while that column still holds the
    new row's value (else nothing is written and the row count is 0)."""
    out: dict[str, Insert] = {}
    for name, mod in (("sqlite", sqlite_dialect), ("postgresql", pg_dialect)):
        stmt = mod.insert(table)
        out[name] = stmt.on_conflict_do_update(
            index_elements=[table.c[k] for k in keys],
            set_={c: stmt.excluded[c] for c in update_cols},
            where=None if unless_changed is None else table.c[unless_changed] == stmt.excluded[unless_changed],
        )
    return out


def _dialect(conn: Connection) -> str:
    return conn.dialect.name


# ---------------------------------------------------------------- threads

_THREAD_FIELDS = ("agent", "user_id", "title", "parent_id", "package", "metadata", "updated_at")
_INSERT_THREAD = insert(threads)
GET_THREAD = select(threads).where(threads.c.id == bindparam("id"))


def _thread_from_row(row: Row[Any]) -> ThreadRecord:
    return thread_from_mapping(row._mapping)


def thread_from_mapping(m: Mapping[Any, Any]) -> ThreadRecord:
    """A thread record from a row of :data:`GET_THREAD` (or of ``threads``) by column name."""
    return ThreadRecord(
        agent=m["agent"], id=m["id"], user_id=m["user_id"], title=m["title"],
        parent_id=m["parent_id"], package=m["package"], metadata=m["metadata"] or {},
        created_at=m["created_at"], updated_at=m["updated_at"],
    )


def create_thread(conn: Connection, thread: ThreadRecord) -> ThreadRecord:
    conn.execute(_INSERT_THREAD, {
        "id": thread.id, "agent": thread.agent, "user_id": thread.user_id, "title": thread.title,
        "parent_id": thread.parent_id, "package": thread.package,
        "metadata": dict(thread.metadata), "created_at": thread.created_at,
        "updated_at": thread.updated_at,
    })
    return thread


def get_thread(conn: Connection, thread_id: str) -> ThreadRecord | None:
    row = conn.execute(GET_THREAD, {"id": thread_id}).first()
    return _thread_from_row(row) if row is not None else None


def list_threads(
    conn: Connection, agent: str | None, user_id: str | None, parent_id: str | None,
    limit: int, offset: int, top_level: bool = False,
) -> list[ThreadRecord]:
    stmt = select(threads)
    if top_level:
        stmt = stmt.where(threads.c.parent_id.is_(None))
    if agent is not None:
        stmt = stmt.where(threads.c.agent == agent)
    if user_id is not None:
        stmt = stmt.where(threads.c.user_id == user_id)
    if parent_id is not None:
        stmt = stmt.where(threads.c.parent_id == parent_id)
    stmt = stmt.order_by(threads.c.created_at.desc(), threads.c.id.desc()).limit(limit).offset(offset)
    return [_thread_from_row(r) for r in conn.execute(stmt)]


def update_thread(conn: Connection, thread_id: str, changes: dict[str, Any]) -> ThreadRecord:
    values = dict(changes)
    if "agent_id" in values:
        values["agent"] = values.pop("agent_id")
    unknown = sorted(set(values) - set(_THREAD_FIELDS))
    if unknown:
        raise StoreError(
            f"cannot update thread field(s) {', '.join(unknown)}; "
            f"updatable fields are {', '.join(_THREAD_FIELDS)}"
        )
    values.setdefault("updated_at", now_ms())
    row = conn.execute(
        update(threads).where(threads.c.id == thread_id).values(**values).returning(*threads.c)
    ).first()
    if row is None:
        raise NotFoundError("thread", thread_id)
    return _thread_from_row(row)


def delete_thread(conn: Connection, thread_id: str) -> bool:
    """Delete a thread and every row that belongs to it, in every table."""
    for table in (messages, tool_results, executions, logs, thread_files, scheduled_effects):
        conn.execute(delete(table).where(table.c.thread_id == thread_id))
    conn.execute(delete(env_values).where(
        and_(env_values.c.scope.in_(("thread", "inbox")), env_values.c.scope_id == thread_id)))
    conn.execute(delete(subagents).where(or_(
        subagents.c.parent_thread_id == thread_id, subagents.c.child_thread_id == thread_id)))
    conn.execute(delete(event_log).where(event_log.c.stream == thread_id))
    return conn.execute(delete(threads).where(threads.c.id == thread_id)).rowcount > 0


# ---------------------------------------------------------------- messages


def delete_messages(conn: Connection, thread_id: str, message_ids: Sequence[str]) -> int:
    """Delete these messages of the thread and the tool results stored with them."""
    if not message_ids:
        return 0
    ids = list(message_ids)
    conn.execute(delete(tool_results).where(tool_results.c.thread_id == thread_id, tool_results.c.message_id.in_(ids)))
    return int(conn.execute(delete(messages).where(messages.c.thread_id == thread_id, messages.c.id.in_(ids))).rowcount)


MSG_COLS = (
    "seq", "id", "thread_id", "role", "content", "parts", "tool_calls", "tool_call_id", "name",
    "side", "silent", "hidden", "attachments", "usage", "reasoning", "status", "tool_status",
    "metadata", "created_at", "updated_at", "cost",
)
_MSG_SELECT_COLS = [messages.c[c] for c in MSG_COLS]
_MSG_UPDATABLE = frozenset(MSG_COLS) - {"seq", "id"}
INSERT_MSG = insert(messages)
INSERT_MSGS_RETURNING = insert(messages).returning(messages.c.seq, sort_by_parameter_order=True)
_GET_MSG = select(*_MSG_SELECT_COLS).where(messages.c.id == bindparam("id"))


def message_params(m: Message) -> dict[str, Any]:
    tcs = m.tool_calls
    usage = m.usage
    return {
        "id": m.id, "thread_id": m.thread_id, "role": m.role, "content": m.content,
        "parts": m.parts, "tool_calls": [tc.to_dict() for tc in tcs] if tcs else None,
        "tool_call_id": m.tool_call_id, "name": m.name, "side": m.side, "silent": m.silent,
        "hidden": m.hidden, "attachments": m.attachments or None,
        "usage": usage.to_dict() if usage is not None else None, "reasoning": m.reasoning,
        "status": m.status, "tool_status": m.tool_status, "metadata": m.metadata or None,
        "created_at": m.created_at, "updated_at": m.updated_at, "cost": m.cost,
    }


def message_from_row(r: Sequence[Any]) -> Message:
    tcs = r[6]
    usage = r[13]
    return Message(
        seq=r[0], id=r[1], thread_id=r[2], role=r[3], content=r[4], parts=r[5],
        tool_calls=[ToolCall.from_dict(tc) for tc in tcs] if tcs else None,
        tool_call_id=r[7], name=r[8], side=r[9], silent=bool(r[10]), hidden=bool(r[11]),
        attachments=list(r[12] or ()), usage=Usage.from_dict(usage) if usage else None,
        reasoning=r[14], status=r[15], tool_status=r[16], metadata=dict(r[17] or {}),
        created_at=r[18], updated_at=r[19], cost=r[20],
    )


def insert_messages(conn: Connection, items: Sequence[Message]) -> list[Message]:
    """Insert messages in order; each gets the ``seq`` the database assigned."""
    if not items:
        return []
    if len(items) == 1:
        key = conn.execute(INSERT_MSG, message_params(items[0])).inserted_primary_key
        if key is None:  # pragma: no cover - both dialects report the new key
            raise StoreError("the database did not report the new message's seq")
        items[0].seq = int(key[0])
        return list(items)
    seqs = conn.execute(INSERT_MSGS_RETURNING, [message_params(m) for m in items]).scalars().all()
    for message, seq in zip(items, seqs, strict=True):
        message.seq = int(seq)
    return list(items)


def get_message(conn: Connection, message_id: str) -> Message:
    row = conn.execute(_GET_MSG, {"id": message_id}).first()
    if row is None:
        raise NotFoundError("message", message_id)
    return message_from_row(row)


def _message_changes(changes: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in changes.items():
        if key == "reasoning_content":
            key = "reasoning"
        if key not in _MSG_UPDATABLE:
            raise StoreError(
                f"cannot update message field {key!r}; updatable fields are "
                f"{', '.join(sorted(_MSG_UPDATABLE))}"
            )
        if key == "tool_calls" and value:
            value = [tc.to_dict() if isinstance(tc, ToolCall) else tc for tc in value]
        elif key == "usage" and isinstance(value, Usage):
            value = value.to_dict()
        values[key] = value
    values.setdefault("updated_at", now_ms())
    return values


def update_message(conn: Connection, message_id: str, changes: dict[str, Any]) -> Message:
    values = _message_changes(changes)
    row = conn.execute(
        update(messages).where(messages.c.id == message_id).values(**values)
        .returning(*_MSG_SELECT_COLS)
    ).first()
    if row is None:
        raise NotFoundError("message", message_id)
    return message_from_row(row)


@functools.cache
def list_messages_stmt(include_silent: bool, include_hidden: bool, newest_first: bool) -> Select[Any]:
    """The message listing for one combination of filters, built once.

    Parameters: ``thread_id``, ``limit`` (-1 for no limit) and ``offset``.
    """
    stmt = select(*_MSG_SELECT_COLS).where(messages.c.thread_id == bindparam("thread_id"))
    if not include_silent:
        stmt = stmt.where(messages.c.silent.is_(False))
    if not include_hidden:
        stmt = stmt.where(messages.c.hidden.is_(False))
    stmt = stmt.order_by(messages.c.seq.desc() if newest_first else messages.c.seq)
    return stmt.limit(bindparam("limit")).offset(bindparam("offset"))


def list_messages_params(thread_id: str, limit: int | None, offset: int, dialect: str) -> dict[str, Any]:
    if limit is None:
        # SQLite takes -1 as "no limit"; PostgreSQL takes NULL (LIMIT ALL).
        return {"thread_id": thread_id, "limit": -1 if dialect == "sqlite" else None, "offset": offset}
    if limit < 0 or offset < 0:
        raise StoreError(f"limit and offset must not be negative (got limit={limit}, offset={offset})")
    return {"thread_id": thread_id, "limit": limit, "offset": offset}


def list_messages(
    conn: Connection, thread_id: str, limit: int | None, offset: int,
    include_silent: bool, include_hidden: bool, newest_first: bool,
) -> list[Message]:
    stmt = list_messages_stmt(include_silent, include_hidden, newest_first)
    params = list_messages_params(thread_id, limit, offset, _dialect(conn))
    return [message_from_row(r) for r in conn.execute(stmt, params)]


def count_messages(conn: Connection, thread_id: str, include_silent: bool) -> int:
    stmt = select(func.count()).select_from(messages).where(messages.c.thread_id == thread_id)
    if not include_silent:
        stmt = stmt.where(messages.c.silent.is_(False))
    return int(conn.execute(stmt).scalar_one())


# ---------------------------------------------------------------- tool results

TR_COLS = (
    "id", "thread_id", "message_id", "tool_call_id", "tool_name", "arguments", "status",
    "result", "error", "stack", "attachments", "metadata", "created_at",
)
INSERT_TR = insert(tool_results)


def tool_result_params(item: dict[str, Any]) -> dict[str, Any]:
    if not item.get("thread_id"):
        raise StoreError("a tool result needs a 'thread_id'")
    params = {c: item.get(c) for c in TR_COLS}
    extra = {k: v for k, v in item.items() if k not in params}
    if extra:
        params["metadata"] = {**(params["metadata"] or {}), **extra}
    if not params["id"]:
        params["id"] = new_id("tr_")
    if not params["status"]:
        params["status"] = "success"
    if params["created_at"] is None:
        params["created_at"] = now_ms()
    return params


def insert_tool_results(conn: Connection, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    if not items:
        return []
    rows = [tool_result_params(i) for i in items]
    conn.execute(INSERT_TR, rows if len(rows) > 1 else rows[0])
    return rows


def list_tool_results(conn: Connection, thread_id: str, tool_call_id: str | None) -> list[dict[str, Any]]:
    from .base import ToolResultRow

    stmt = select(*(tool_results.c[c] for c in TR_COLS)).where(tool_results.c.thread_id == thread_id)
    if tool_call_id is not None:
        stmt = stmt.where(tool_results.c.tool_call_id == tool_call_id)
    stmt = stmt.order_by(tool_results.c.created_at, tool_results.c.id)
    out: list[dict[str, Any]] = []
    for r in conn.execute(stmt):
        row = ToolResultRow(zip(TR_COLS, r, strict=True))
        row["attachments"] = list(row["attachments"] or [])
        row["metadata"] = dict(row["metadata"] or {})
        out.append(row)
    return out


def list_usage(conn: Connection, thread_id: str | None, user_id: str | None, agent: str | None,
               since: int | None, until: int | None) -> list[dict[str, Any]]:
    """One row per model reply with usage: its thread's agent and user, time, usage, cost and
    model (what usage summaries add up)."""
    stmt = (select(messages.c.thread_id, threads.c.agent, threads.c.user_id, messages.c.created_at,
                   messages.c.usage, messages.c.cost, messages.c.metadata)
            .select_from(messages.join(threads, threads.c.id == messages.c.thread_id))
            .where(messages.c.role == "assistant", messages.c.usage.is_not(None)))
    if thread_id is not None:
        stmt = stmt.where(messages.c.thread_id == thread_id)
    if user_id is not None:
        stmt = stmt.where(threads.c.user_id == user_id)
    if agent is not None:
        stmt = stmt.where(threads.c.agent == agent)
    if since is not None:
        stmt = stmt.where(messages.c.created_at >= since)
    if until is not None:
        stmt = stmt.where(messages.c.created_at < until)
    return [{"thread_id": r[0], "agent": r[1], "user_id": r[2], "created_at": r[3], "usage": r[4], "cost": r[5],
             "model": (r[6] or {}).get("model")} for r in conn.execute(stmt.order_by(messages.c.seq))]


# ---------------------------------------------------------------- executions

_EXEC_COLS = tuple(f.name for f in fields(ExecutionRecord))
#: an execution written only while its stored epoch is the writer's (the fence)
UPSERT_EXEC = _upsert(executions, ["id"], [c for c in _EXEC_COLS if c not in ("id", "thread_id", "created_at")],
                      unless_changed="epoch")
#: the fence of a step that writes no execution record: the row is locked and must still
#: hold the writer's epoch (parameters: ``fenced_id``, ``fenced_epoch``)
FENCE_EXEC = (update(executions)
              .where(executions.c.id == bindparam("fenced_id"), executions.c.epoch == bindparam("fenced_epoch"))
              .values(epoch=bindparam("fenced_epoch")))
_GET_EXEC = select(*(executions.c[c] for c in _EXEC_COLS)).where(executions.c.id == bindparam("id"))
#: a thread's executions of one status, oldest first (parameters: ``thread_id``, ``status``)
THREAD_EXECS = (select(*(executions.c[c] for c in _EXEC_COLS))
                .where(executions.c.thread_id == bindparam("thread_id"), executions.c.status == bindparam("status"))
                .order_by(executions.c.created_at, executions.c.id))


def execution_params(e: ExecutionRecord) -> dict[str, Any]:
    return {
        "thread_id": e.thread_id, "id": e.id, "status": e.status, "side": e.side,
        "step_count": e.step_count, "stop_reason": e.stop_reason, "stopped_by": e.stopped_by,
        "error": e.error, "state": e.state, "created_at": e.created_at, "updated_at": e.updated_at,
        "epoch": e.epoch,
    }


def execution_from_row(r: Sequence[Any]) -> ExecutionRecord:
    values = dict(zip(_EXEC_COLS, r, strict=True))
    values["state"] = values["state"] or {}
    return ExecutionRecord(**values)


def save_execution(conn: Connection, execution: ExecutionRecord) -> None:
    """Insert or update ``execution``; an update only while the stored epoch is still the
    record's (else :class:`ExecutionTakenOver`, and nothing is written)."""
    if conn.execute(UPSERT_EXEC[_dialect(conn)], execution_params(execution)).rowcount != 1:
        raise ExecutionTakenOver(execution.id, execution.epoch)


def check_fence(conn: Connection, fence: Fence) -> None:
    """Lock the fenced execution's row for this transaction, and raise
    :class:`ExecutionTakenOver` (rolling the transaction back) when its epoch moved on."""
    if conn.execute(FENCE_EXEC, {"fenced_id": fence.execution_id, "fenced_epoch": fence.epoch}).rowcount != 1:
        raise ExecutionTakenOver(fence.execution_id, fence.epoch)


_EXEC_SET = [c for c in _EXEC_COLS if c not in ("id", "thread_id", "created_at")]
#: the compare-and-set of an execution (parameters: :func:`replace_execution_params`)
REPLACE_EXEC = (update(executions)
                .where(executions.c.id == bindparam("expected_id"), executions.c.status == bindparam("expected_status"),
                       executions.c.updated_at == bindparam("expected_updated_at"))
                .values({c: bindparam(f"new_{c}", type_=executions.c[c].type) for c in _EXEC_SET}))


def replace_execution_params(execution: ExecutionRecord, expected_status: str, expected_updated_at: int) -> dict[str, Any]:
    params = execution_params(execution)
    return {"expected_id": execution.id, "expected_status": expected_status, "expected_updated_at": expected_updated_at,
            **{f"new_{c}": params[c] for c in _EXEC_SET}}


def replace_execution(conn: Connection, execution: ExecutionRecord, expected_status: str, expected_updated_at: int) -> bool:
    """Write ``execution`` only if its stored row still has ``expected_status`` and
    ``expected_updated_at`` (a compare-and-set: of concurrent writers, exactly one wins)."""
    result = conn.execute(REPLACE_EXEC, replace_execution_params(execution, expected_status, expected_updated_at))
    return bool(result.rowcount == 1)


def touch_executions(conn: Connection, held: Sequence[Fence], now: int) -> list[str]:
    """Refresh ``updated_at`` of the running executions still held at their epochs (a
    heartbeat); returns the ids of those another process took over (epoch moved on). Ended
    ones are left alone and are not counted as taken over."""
    if not held:
        return []
    e = executions.c
    pairs = [(f.execution_id, f.epoch) for f in held]
    result = conn.execute(update(executions).where(tuple_(e.id, e.epoch).in_(pairs), e.status == "running")
                          .values(updated_at=now))
    if int(result.rowcount or 0) == len(held):
        return []
    epochs = dict(pairs)
    rows = conn.execute(select(e.id, e.epoch).where(e.id.in_(list(epochs))))
    return [r[0] for r in rows if r[1] != epochs[r[0]]]


def get_execution(conn: Connection, execution_id: str) -> ExecutionRecord | None:
    row = conn.execute(_GET_EXEC, {"id": execution_id}).first()
    return execution_from_row(row) if row is not None else None


def list_executions(conn: Connection, thread_id: str | None, status: str | None) -> list[ExecutionRecord]:
    stmt = select(*(executions.c[c] for c in _EXEC_COLS))
    if thread_id is not None:
        stmt = stmt.where(executions.c.thread_id == thread_id)
    if status is not None:
        stmt = stmt.where(executions.c.status == status)
    stmt = stmt.order_by(executions.c.created_at, executions.c.id)
    return [execution_from_row(r) for r in conn.execute(stmt)]


# ---------------------------------------------------------------- one step

def commit_step(
    conn: Connection, new_messages: Sequence[Message], updates: Sequence[tuple[str, dict[str, Any]]],
    results: Sequence[dict[str, Any]], execution: ExecutionRecord | None, fence: Fence | None = None,
) -> list[Message]:
    """Everything one model step produced; the caller wraps it in a single transaction. The
    execution record's own epoch fences the step; without a record, ``fence`` does."""
    if execution is not None:
        save_execution(conn, execution)
    elif fence is not None:
        check_fence(conn, fence)
    inserted = insert_messages(conn, new_messages)
    for message_id, changes in updates:
        update_message(conn, message_id, changes)
    insert_tool_results(conn, results)
    return inserted


# ---------------------------------------------------------------- logs

_INSERT_LOG = insert(logs).returning(logs.c.id)


def add_log(conn: Connection, log: LogRecord) -> LogRecord:
    log.id = int(conn.execute(_INSERT_LOG, {
        "thread_id": log.thread_id, "level": log.level, "message": log.message,
        "data": log.data, "created_at": log.created_at,
    }).scalar_one())
    return log


def list_logs(conn: Connection, thread_id: str, limit: int, offset: int) -> list[LogRecord]:
    stmt = (select(logs.c.id, logs.c.thread_id, logs.c.level, logs.c.message, logs.c.data,
                   logs.c.created_at)
            .where(logs.c.thread_id == thread_id).order_by(logs.c.id).limit(limit).offset(offset))
    return [LogRecord(id=r[0], thread_id=r[1], level=r[2], message=r[3], data=r[4], created_at=r[5])
            for r in conn.execute(stmt)]


# ---------------------------------------------------------------- thread files
# A file is stored under its canonical path (files.canonical_path); reads also find the rows
# older versions stored under another spelling, and a write moves such a row to the canonical path.

_FILE_META_COLS = (thread_files.c.thread_id, thread_files.c.path, thread_files.c.size,
                   thread_files.c.mime_type, thread_files.c.metadata, thread_files.c.created_at,
                   thread_files.c.updated_at)
_UPSERT_FILE = {
    name: stmt.returning(*_FILE_META_COLS)
    for name, stmt in _upsert(thread_files, ["thread_id", "path"],
                              ["content", "size", "mime_type", "metadata", "updated_at"]).items()
}


def _file_from_row(r: Sequence[Any]) -> FileRecord:
    return FileRecord(thread_id=r[0], path=canonical_path(r[1]), size=r[2], mime_type=r[3],
                      metadata=dict(r[4] or {}), created_at=r[5], updated_at=r[6])


def write_file(conn: Connection, thread_id: str, path: str, data: bytes, mime_type: str | None,
               meta: dict[str, Any] | None) -> FileRecord:
    now = now_ms()
    path = canonical_path(path)
    fileops.adopt_spelling(conn, thread_id, path)
    row = conn.execute(_UPSERT_FILE[_dialect(conn)], {
        "thread_id": thread_id, "path": path, "content": bytes(data), "size": len(data),
        "mime_type": mime_type, "metadata": meta or {}, "created_at": now, "updated_at": now,
    }).one()
    return _file_from_row(row)


def read_file(conn: Connection, thread_id: str, path: str) -> bytes | None:
    row = fileops.file_row(conn, thread_id, path, thread_files.c.content)
    return bytes(row[0]) if row is not None else None


def stat_file(conn: Connection, thread_id: str, path: str) -> FileRecord | None:
    row = fileops.file_row(conn, thread_id, path, *_FILE_META_COLS)
    return _file_from_row(row) if row is not None else None


def list_files(conn: Connection, thread_id: str, prefix: str) -> list[FileRecord]:
    stmt = select(*_FILE_META_COLS).where(thread_files.c.thread_id == thread_id)
    clause = fileops.prefix_clause(prefix)
    if clause is not None:
        stmt = stmt.where(clause)
    return [_file_from_row(r) for r in fileops.one_row_per_file(conn.execute(stmt), index=1)]


def delete_file(conn: Connection, thread_id: str, path: str) -> bool:
    return fileops.delete_spellings(conn, thread_id, path)


# ---------------------------------------------------------------- env values

_UPSERT_ENV = _upsert(env_values, ["scope", "scope_id", "key"], ["value", "updated_at"])
_ENV_SCOPE = and_(env_values.c.scope == bindparam("scope"), env_values.c.scope_id == bindparam("scope_id"))
_ENV_KEY = and_(_ENV_SCOPE, env_values.c.key == bindparam("key"))
#: "inbox" holds messages sent to a busy thread until their turn starts (scope id: the thread);
#: "lock" holds which process runs a thread's execution (key: the thread);
#: "system" holds the runtime's own values (the approval signing secret), out of reach of
#: tools, which read and write only the thread, user and instance scopes
ENV_SCOPES = ("thread", "user", "instance", "inbox", "lock", "system")
_INSERT_ENV_IF_ABSENT = {name: mod.insert(env_values).on_conflict_do_nothing(
    index_elements=[env_values.c.scope, env_values.c.scope_id, env_values.c.key])
    for name, mod in (("sqlite", sqlite_dialect), ("postgresql", pg_dialect))}


def _check_scope(scope: str) -> None:
    if scope not in ENV_SCOPES:
        raise StoreError(f"unknown env scope {scope!r}; use one of {', '.join(ENV_SCOPES)}")


def set_env(conn: Connection, scope: str, scope_id: str, key: str, value: Any) -> None:
    _check_scope(scope)
    conn.execute(_UPSERT_ENV[_dialect(conn)], {"scope": scope, "scope_id": scope_id, "key": key,
                                                "value": value, "updated_at": now_ms()})


def get_env(conn: Connection, scope: str, scope_id: str, key: str) -> Any:
    _check_scope(scope)
    row = conn.execute(select(env_values.c.value).where(_ENV_KEY),
                       {"scope": scope, "scope_id": scope_id, "key": key}).first()
    return row[0] if row is not None else None


def list_env(conn: Connection, scope: str, scope_id: str) -> dict[str, Any]:
    _check_scope(scope)
    rows = conn.execute(select(env_values.c.key, env_values.c.value).where(_ENV_SCOPE)
                        .order_by(env_values.c.key), {"scope": scope, "scope_id": scope_id})
    return {r[0]: r[1] for r in rows}


def claim_env(conn: Connection, scope: str, scope_id: str, key: str, value: Any, now: int,
              stale_before: int | None = None) -> bool:
    """Set ``key`` only if it is absent, or (with ``stale_before``) last written before then:
    an atomic claim. True when this call wrote it."""
    _check_scope(scope)
    params = {"scope": scope, "scope_id": scope_id, "key": key, "value": value, "updated_at": now}
    if conn.execute(_INSERT_ENV_IF_ABSENT[_dialect(conn)], params).rowcount == 1:
        return True
    if stale_before is None:
        return False
    e = env_values.c
    result = conn.execute(update(env_values).where(e.scope == scope, e.scope_id == scope_id, e.key == key,
                                                   e.updated_at < stale_before).values(value=value, updated_at=now))
    return bool(result.rowcount == 1)


def touch_env(conn: Connection, scope: str, scope_id: str, keys: list[str], now: int,
              owner: str | None = None) -> int:
    """Refresh ``updated_at`` of some keys of one scope (a heartbeat for claims); with
    ``owner``, only of those whose value's ``owner`` is still that one."""
    _check_scope(scope)
    if not keys:
        return 0
    e = env_values.c
    stmt = update(env_values).where(e.scope == scope, e.scope_id == scope_id, e.key.in_(keys))
    if owner is not None:
        stmt = stmt.where(e.value["owner"].as_string() == owner)
    return int(conn.execute(stmt.values(updated_at=now)).rowcount or 0)


def release_claim(conn: Connection, scope: str, scope_id: str, key: str, owner: str) -> bool:
    """Delete a claim only while ``owner`` holds it (one taken over stays with its taker)."""
    _check_scope(scope)
    e = env_values.c
    result = conn.execute(delete(env_values).where(e.scope == scope, e.scope_id == scope_id, e.key == key,
                                                   e.value["owner"].as_string() == owner))
    return bool(result.rowcount)


def list_scope(conn: Connection, scope: str) -> list[tuple[str, str, Any]]:
    """Every ``(scope_id, key, value)`` of one scope, oldest first."""
    _check_scope(scope)
    rows = conn.execute(select(env_values.c.scope_id, env_values.c.key, env_values.c.value)
                        .where(env_values.c.scope == scope).order_by(env_values.c.updated_at, env_values.c.key))
    return [(r[0], r[1], r[2]) for r in rows]


def delete_env(conn: Connection, scope: str, scope_id: str, key: str) -> bool:
    _check_scope(scope)
    result = conn.execute(delete(env_values).where(_ENV_KEY),
                          {"scope": scope, "scope_id": scope_id, "key": key})
    return result.rowcount > 0


# ---------------------------------------------------------------- users and tokens

_USER_COLS = tuple(f.name for f in fields(UserRecord))
_TOKEN_COLS = tuple(f.name for f in fields(ApiTokenRecord))


def _user_from_row(r: Sequence[Any]) -> UserRecord:
    values = dict(zip(_USER_COLS, r, strict=True))
    values["is_admin"] = bool(values["is_admin"])
    return UserRecord(**values)


def create_user(conn: Connection, user: UserRecord) -> UserRecord:
    conn.execute(insert(users), {c: getattr(user, c) for c in _USER_COLS})
    return user


def get_user(conn: Connection, user_id: str) -> UserRecord | None:
    row = conn.execute(select(*(users.c[c] for c in _USER_COLS)).where(users.c.id == user_id)).first()
    return _user_from_row(row) if row is not None else None


def get_user_by_email(conn: Connection, email: str) -> UserRecord | None:
    row = conn.execute(select(*(users.c[c] for c in _USER_COLS)).where(users.c.email == email)).first()
    return _user_from_row(row) if row is not None else None


def list_users(conn: Connection) -> list[UserRecord]:
    stmt = select(*(users.c[c] for c in _USER_COLS)).order_by(users.c.created_at, users.c.id)
    return [_user_from_row(r) for r in conn.execute(stmt)]


def create_api_token(conn: Connection, user_id: str, name: str) -> tuple[ApiTokenRecord, str]:
    if get_user(conn, user_id) is None:
        raise NotFoundError("user", user_id)
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    record = ApiTokenRecord(user_id=user_id, name=name, token_hash=hash_token(plaintext),
                            prefix=plaintext[: len(TOKEN_PREFIX) + 6])
    conn.execute(insert(api_tokens), {c: getattr(record, c) for c in _TOKEN_COLS})
    return record, plaintext


def verify_api_token(conn: Connection, plaintext: str) -> UserRecord | None:
    token_row = conn.execute(
        select(api_tokens.c.id, api_tokens.c.user_id)
        .where(api_tokens.c.token_hash == hash_token(plaintext), api_tokens.c.revoked_at.is_(None))
    ).first()
    if token_row is None:
        return None
    conn.execute(update(api_tokens).where(api_tokens.c.id == token_row[0])
                 .values(last_used_at=now_ms()))
    return get_user(conn, token_row[1])


def list_api_tokens(conn: Connection, user_id: str | None) -> list[ApiTokenRecord]:
    stmt = select(*(api_tokens.c[c] for c in _TOKEN_COLS))
    if user_id is not None:
        stmt = stmt.where(api_tokens.c.user_id == user_id)
    stmt = stmt.order_by(api_tokens.c.created_at, api_tokens.c.id)
    return [ApiTokenRecord(**dict(zip(_TOKEN_COLS, r, strict=True))) for r in conn.execute(stmt)]


def revoke_api_token(conn: Connection, token_id: str) -> bool:
    result = conn.execute(update(api_tokens)
                          .where(api_tokens.c.id == token_id, api_tokens.c.revoked_at.is_(None))
                          .values(revoked_at=now_ms()))
    return result.rowcount > 0


# ---------------------------------------------------------------- user values

_UPSERT_USER_VALUE = _upsert(user_values, ["user_id", "key"], ["value", "updated_at"])
_USER_VALUE_KEY = and_(user_values.c.user_id == bindparam("user_id"),
                       user_values.c.key == bindparam("key"))


def set_user_value(conn: Connection, user_id: str, key: str, value: Any) -> None:
    conn.execute(_UPSERT_USER_VALUE[_dialect(conn)],
                 {"user_id": user_id, "key": key, "value": value, "updated_at": now_ms()})


def get_user_value(conn: Connection, user_id: str, key: str) -> Any:
    row = conn.execute(select(user_values.c.value).where(_USER_VALUE_KEY),
                       {"user_id": user_id, "key": key}).first()
    return row[0] if row is not None else None


def list_user_values(conn: Connection, user_id: str) -> dict[str, Any]:
    rows = conn.execute(select(user_values.c.key, user_values.c.value)
                        .where(user_values.c.user_id == user_id).order_by(user_values.c.key))
    return {r[0]: r[1] for r in rows}


def delete_user_value(conn: Connection, user_id: str, key: str) -> bool:
    result = conn.execute(delete(user_values).where(_USER_VALUE_KEY),
                          {"user_id": user_id, "key": key})
    return result.rowcount > 0


# ---------------------------------------------------------------- scheduled effects

_EFFECT_COLS = tuple(f.name for f in fields(EffectRecord))
_EFFECT_SELECT = [scheduled_effects.c[c] for c in _EFFECT_COLS]


def _effect_from_row(r: Sequence[Any]) -> EffectRecord:
    return EffectRecord(**dict(zip(_EFFECT_COLS, r, strict=True)))


def schedule_effect(conn: Connection, effect: EffectRecord) -> EffectRecord:
    conn.execute(insert(scheduled_effects), {c: getattr(effect, c) for c in _EFFECT_COLS})
    return effect


def get_effect(conn: Connection, effect_id: str) -> EffectRecord | None:
    row = conn.execute(select(*_EFFECT_SELECT).where(scheduled_effects.c.id == effect_id)).first()
    return _effect_from_row(row) if row is not None else None


def claim_due_effects(conn: Connection, now: int, worker_id: str, limit: int, lease_ms: int) -> list[EffectRecord]:
    """Claim up to ``limit`` due effects (or ones whose lease expired) in one statement.

    On PostgreSQL the candidate rows are locked with ``FOR UPDATE SKIP LOCKED`` so two
    workers never take the same row; SQLite serialises writers, so the single
    ``UPDATE ... RETURNING`` is already exclusive.
    """
    e = scheduled_effects.c
    due = or_(and_(e.status == "pending", e.run_at <= now),
              and_(e.status == "running", e.claimed_until < now))
    candidates = select(e.id).where(due).order_by(e.run_at, e.id).limit(limit)
    if _dialect(conn) == "postgresql":
        candidates = candidates.with_for_update(skip_locked=True)
    stmt = (update(scheduled_effects).where(e.id.in_(candidates.scalar_subquery()))
            .values(status="running", claimed_by=worker_id, claimed_until=now + lease_ms,
                    attempts=e.attempts + 1, updated_at=now)
            .returning(*_EFFECT_SELECT))
    claimed = [_effect_from_row(r) for r in conn.execute(stmt)]
    claimed.sort(key=lambda eff: (eff.run_at, eff.id))
    return claimed


def _owned(effect_id: str, worker_id: str | None) -> Any:
    e = scheduled_effects.c
    cond = and_(e.id == effect_id, e.status == "running")
    return and_(cond, e.claimed_by == worker_id) if worker_id is not None else cond


def renew_effect(conn: Connection, effect_id: str, worker_id: str, claimed_until: int) -> bool:
    res = conn.execute(update(scheduled_effects).where(_owned(effect_id, worker_id))
                       .values(claimed_until=claimed_until))
    return res.rowcount > 0


def finish_effect(conn: Connection, effect_id: str, result: Any, worker_id: str | None) -> bool:
    res = conn.execute(update(scheduled_effects).where(_owned(effect_id, worker_id))
                       .values(status="done", result=result, claimed_until=None,
                               updated_at=now_ms()))
    return res.rowcount > 0


def fail_effect(conn: Connection, effect_id: str, error: str, retry_at: int | None,
                worker_id: str | None) -> bool:
    values: dict[str, Any] = {"last_error": error, "claimed_until": None, "updated_at": now_ms()}
    if retry_at is None:
        values["status"] = "failed"
    else:
        values.update(status="pending", run_at=retry_at, claimed_by=None)
    res = conn.execute(update(scheduled_effects).where(_owned(effect_id, worker_id)).values(**values))
    return res.rowcount > 0


def cancel_effect(conn: Connection, effect_id: str) -> bool:
    e = scheduled_effects.c
    res = conn.execute(update(scheduled_effects)
                       .where(e.id == effect_id, e.status.in_(("pending", "running")))
                       .values(status="cancelled", claimed_until=None, updated_at=now_ms()))
    return res.rowcount > 0


def list_effects(conn: Connection, thread_id: str | None, status: str | None) -> list[EffectRecord]:
    e = scheduled_effects.c
    stmt = select(*_EFFECT_SELECT)
    if thread_id is not None:
        stmt = stmt.where(e.thread_id == thread_id)
    if status is not None:
        stmt = stmt.where(e.status == status)
    return [_effect_from_row(r) for r in conn.execute(stmt.order_by(e.run_at, e.id))]


# ---------------------------------------------------------------- subagents

_SUB_COLS = tuple(f.name for f in fields(SubagentRecord))
_SUB_SELECT = [subagents.c[c] for c in _SUB_COLS]
_SUB_UPDATABLE = ("child_thread_id", "agent", "relationship", "status", "result", "updated_at")


def _subagent_from_row(r: Sequence[Any]) -> SubagentRecord:
    return SubagentRecord(**dict(zip(_SUB_COLS, r, strict=True)))


def add_subagent(conn: Connection, link: SubagentRecord) -> SubagentRecord:
    conn.execute(insert(subagents), {c: getattr(link, c) for c in _SUB_COLS})
    return link


def get_subagent(conn: Connection, subagent_id: str) -> SubagentRecord | None:
    row = conn.execute(select(*_SUB_SELECT).where(subagents.c.id == subagent_id)).first()
    return _subagent_from_row(row) if row is not None else None


def update_subagent(conn: Connection, subagent_id: str, changes: dict[str, Any]) -> SubagentRecord:
    unknown = sorted(set(changes) - set(_SUB_UPDATABLE))
    if unknown:
        raise StoreError(f"cannot update subagent field(s) {', '.join(unknown)}; "
                         f"updatable fields are {', '.join(_SUB_UPDATABLE)}")
    values = {**changes}
    values.setdefault("updated_at", now_ms())
    row = conn.execute(update(subagents).where(subagents.c.id == subagent_id).values(**values)
                       .returning(*_SUB_SELECT)).first()
    if row is None:
        raise NotFoundError("subagent", subagent_id)
    return _subagent_from_row(row)


def list_subagents(conn: Connection, parent_thread_id: str) -> list[SubagentRecord]:
    stmt = (select(*_SUB_SELECT).where(subagents.c.parent_thread_id == parent_thread_id)
            .order_by(subagents.c.created_at, subagents.c.id))
    return [_subagent_from_row(r) for r in conn.execute(stmt)]


