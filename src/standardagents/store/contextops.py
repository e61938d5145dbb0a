"""The messages a turn's context is built from, read in one statement however long the thread.

Compaction marks the folded messages ``hidden``; everything before a thread's oldest message
that is not hidden is therefore out of every model context. The context read starts there
(or at the newest message, when every message is hidden): an index on ``(thread_id, hidden,
seq)`` finds that position in O(log n), and the range from there is read by an index too, so
a turn reads the rows of its context, not of the thread. (SQLite ranges over ``(thread_id,
seq)``. PostgreSQL's planner prefers the primary key's ``seq`` range for a long thread, as it
takes the thread's rows to be spread over the table: it then also steps over the messages
other threads stored since the context began; either way, not over the thread's past.)
One statement, one snapshot: a message another worker stored or showed again before it runs
is in the answer.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Dialect, bindparam, false, func, select

from ..records import Message
from .fastpath import CompiledSQL
from .ops import MSG_COLS, message_from_row
from .schema import messages

__all__ = ["CONTEXT_STMT", "list_context_messages", "message_positions", "sqlite_context_messages"]

_first_visible = (select(func.min(messages.c.seq))
                  .where(messages.c.thread_id == bindparam("thread_id"), messages.c.hidden == false())
                  .scalar_subquery())
_newest = select(func.max(messages.c.seq)).where(messages.c.thread_id == bindparam("thread_id")).scalar_subquery()

#: parameter ``thread_id``; the messages from the oldest not hidden on, oldest first
CONTEXT_STMT = (select(*[messages.c[c] for c in MSG_COLS])
                .where(messages.c.thread_id == bindparam("thread_id"),
                       messages.c.seq >= func.coalesce(_first_visible, _newest))
                .order_by(messages.c.seq))


def list_context_messages(conn: Connection, thread_id: str) -> list[Message]:
    return [message_from_row(r) for r in conn.execute(CONTEXT_STMT, {"thread_id": thread_id})]


@functools.lru_cache(maxsize=8)
def _sqlite_plan(dialect: Dialect) -> CompiledSQL:
    return CompiledSQL(CONTEXT_STMT, dialect)


def sqlite_context_messages(cursor: Any, dialect: Dialect, thread_id: str) -> list[Message]:
    """:data:`CONTEXT_STMT` on the raw ``sqlite3`` cursor (the engine's per-turn read skips
    SQLAlchemy's execution layer, as :mod:`.fastpath` does for the per-step calls). SQLite
    ranges over ``(thread_id, seq)`` for it, from the position its subquery finds."""
    plan = _sqlite_plan(dialect)
    loads = getattr(dialect, "_json_deserializer", None) or json.loads
    json_columns = plan.json_columns
    out: list[Message] = []
    for raw in cursor.execute(plan.sql, plan.params({"thread_id": thread_id})).fetchall():
        row = list(raw)
        for i in json_columns:
            if row[i] is not None:
                row[i] = loads(row[i])
        out.append(message_from_row(row))
    return out


def message_positions(conn: Connection, thread_id: str, message_ids: Sequence[str]) -> dict[str, int]:
    """The ``seq`` of each of these messages of the thread that exists (by the unique id index)."""
    if not message_ids:
        return {}
    rows: Any = conn.execute(select(messages.c.id, messages.c.seq)
                             .where(messages.c.thread_id == thread_id, messages.c.id.in_(list(message_ids))))
    return {row[0]: int(row[1]) for row in rows}
