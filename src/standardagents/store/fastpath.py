"""The engine's per-step store calls on SQLite, run straight on the ``sqlite3`` cursor.

The SQL is the same SQLAlchemy Core statements :mod:`standardagents.store.ops` uses,
compiled once for the store's SQLite dialect with their bind processors (JSON encoding);
only the per-call work of SQLAlchemy's execution layer is skipped, which is most of the
cost of a ~50 µs commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import JSON, ClauseElement, Dialect, Select
from sqlalchemy.sql.compiler import SQLCompiler

from ..exceptions import ExecutionTakenOver
from ..records import ExecutionRecord, Fence, Message
from . import eventops, ops

__all__ = ["CompiledSQL", "SQLiteFastPath"]


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _encode_json_or_null(value: Any) -> str | None:
    """JSON for a nullable column; empty containers are stored as NULL (read back as empty)."""
    if not value and isinstance(value, list | dict):
        return None
    return _ENCODER.encode(value)


class CompiledSQL:
    """One Core statement compiled for a dialect with qmark parameters in a fixed order."""

    __slots__ = ("json_columns", "keys", "processors", "sql")

    def __init__(self, stmt: ClauseElement, dialect: Dialect,
                 column_keys: Sequence[str] | None = None) -> None:
        compiled = cast(SQLCompiler, stmt.compile(
            dialect=dialect, column_keys=list(column_keys) if column_keys else None))
        self.sql: str = compiled.string
        self.keys: tuple[str, ...] = tuple(compiled.positiontup or ())
        table = getattr(stmt, "table", None)

        def nullable(key: str) -> bool:
            column = table.c.get(key) if table is not None else None
            return bool(column is not None and column.nullable)

        self.processors: tuple[Callable[[Any], Any] | None, ...] = tuple(
            (_encode_json_or_null if nullable(k) else _ENCODER.encode) if isinstance(compiled.binds[k].type, JSON)
            else compiled.binds[k].type.dialect_impl(dialect).bind_processor(dialect)
            for k in self.keys
        )
        self.json_columns: tuple[int, ...] = ()
        if isinstance(stmt, Select):
            self.json_columns = tuple(
                i for i, col in enumerate(stmt.selected_columns) if isinstance(col.type, JSON)
            )

    def params(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(
            v if p is None or v is None else p(v)
            for v, p in zip([values[k] for k in self.keys], self.processors, strict=True)
        )


class SQLiteFastPath:
    """``commit_step`` and ``list_messages`` on a raw ``sqlite3`` connection."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        insert_keys = [c for c in ops.MSG_COLS if c != "seq"]
        self._insert_msg = CompiledSQL(ops.INSERT_MSG, dialect, insert_keys)
        self._insert_tr = CompiledSQL(ops.INSERT_TR, dialect, list(ops.TR_COLS))
        self._upsert_exec = CompiledSQL(ops.UPSERT_EXEC["sqlite"], dialect)
        self._replace_exec = CompiledSQL(ops.REPLACE_EXEC, dialect)
        self._fence_exec = CompiledSQL(ops.FENCE_EXEC, dialect)
        # the first message of a fenced step is inserted only while the execution still holds
        # the writer's epoch: the fence is a condition on a write the step makes anyway (the
        # transaction holds SQLite's write lock, so nothing moves the epoch in between). OR
        # FAIL: the statement inserts one row at most, so failing keeps what aborting would,
        # and SQLite needs no statement journal for it (an INSERT ... SELECT that may abort
        # writes one: about two thirds of the fence's cost)
        head, _, values = self._insert_msg.sql.partition(" VALUES (")
        self._insert_msg_fenced = (f"{head.replace('INSERT INTO', 'INSERT OR FAIL INTO', 1)} SELECT {values.rstrip(')')} WHERE EXISTS "
                                   "(SELECT 1 FROM executions WHERE id = ? AND epoch = ?)")
        self._append_events = CompiledSQL(eventops.APPEND["sqlite"], dialect,
                                          ["stream", "id", "first_id", "count", "events", "ts"])
        self._lists: dict[tuple[bool, bool, bool], CompiledSQL] = {}
        self._thread_execs = CompiledSQL(ops.THREAD_EXECS, dialect)
        self._loads = getattr(dialect, "_json_deserializer", None) or json.loads

    def commit_step(self, cursor: Any, new_messages: Sequence[Message],
                    results: Sequence[dict[str, Any]], execution: ExecutionRecord | None,
                    fence: Fence | None = None) -> None:
        """The inserts of one step, fenced first (as :func:`.ops.commit_step`); the caller
        owns the transaction and the message updates."""
        if execution is not None:
            plan = self._upsert_exec
            cursor.execute(plan.sql, plan.params(ops.execution_params(execution)))
            if cursor.rowcount != 1:
                raise ExecutionTakenOver(execution.id, execution.epoch)
        elif fence is not None and not new_messages:
            plan = self._fence_exec
            cursor.execute(plan.sql, plan.params({"fenced_id": fence.execution_id, "fenced_epoch": fence.epoch}))
            if cursor.rowcount != 1:
                raise ExecutionTakenOver(fence.execution_id, fence.epoch)
        plan = self._insert_msg
        fenced = fence if execution is None else None
        for message in new_messages:
            if fenced is not None:
                cursor.execute(self._insert_msg_fenced,
                               (*plan.params(ops.message_params(message)), fenced.execution_id, fenced.epoch))
                if cursor.rowcount != 1:
                    raise ExecutionTakenOver(fenced.execution_id, fenced.epoch)
                fenced = None
            else:
                cursor.execute(plan.sql, plan.params(ops.message_params(message)))
            message.seq = cursor.lastrowid
        if results:
            plan = self._insert_tr
            rows = [plan.params(ops.tool_result_params(r)) for r in results]
            if len(rows) == 1:
                cursor.execute(plan.sql, rows[0])
            else:
                cursor.executemany(plan.sql, rows)

    def log_ending(self, cursor: Any, execution: ExecutionRecord, expected_updated_at: int,
                   rows: Sequence[eventops.BatchRow]) -> bool:
        """:func:`.eventops.log_ending` on the cursor (the caller owns the transaction)."""
        plan = self._replace_exec
        cursor.execute(plan.sql, plan.params(ops.replace_execution_params(execution, execution.status,
                                                                          expected_updated_at)))
        if cursor.rowcount != 1:
            return False
        plan = self._append_events
        cursor.executemany(plan.sql, [plan.params(p) for p in eventops.batch_params(rows)])
        return True

    def thread_executions(self, cursor: Any, thread_id: str, status: str) -> list[ExecutionRecord]:
        """A thread's executions of one status (asked before each turn: is one cut short?)."""
        plan = self._thread_execs
        loads = self._loads
        out: list[ExecutionRecord] = []
        for raw in cursor.execute(plan.sql, plan.params({"thread_id": thread_id, "status": status})).fetchall():
            row = list(raw)
            for i in plan.json_columns:
                if row[i] is not None:
                    row[i] = loads(row[i])
            out.append(ops.execution_from_row(row))
        return out

    def list_messages(self, cursor: Any, thread_id: str, limit: int | None, offset: int,
                      include_silent: bool, include_hidden: bool, newest_first: bool) -> list[Message]:
        flags = (include_silent, include_hidden, newest_first)
        plan = self._lists.get(flags)
        if plan is None:
            plan = self._lists[flags] = CompiledSQL(ops.list_messages_stmt(*flags), self._dialect)
        params = ops.list_messages_params(thread_id, limit, offset, "sqlite")
        loads = self._loads
        json_columns = plan.json_columns
        out: list[Message] = []
        for raw in cursor.execute(plan.sql, plan.params(params)).fetchall():
            row = list(raw)
            for i in json_columns:
                if row[i] is not None:
                    row[i] = loads(row[i])
            out.append(ops.message_from_row(row))
        return out
