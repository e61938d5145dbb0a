"""A thread's record read on the raw ``sqlite3`` cursor.

Every served turn reads its thread (the access check, and the turn's start from that record):
through SQLAlchemy's execution layer the read costs several times the query itself, so on
SQLite it runs the same Core statement, compiled once, straight on the cursor (as
:mod:`.fastpath` does for the per-step writes).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from sqlalchemy import Dialect

from ..records import ThreadRecord
from .fastpath import CompiledSQL
from .ops import GET_THREAD, thread_from_mapping

__all__ = ["sqlite_get_thread"]


@functools.lru_cache(maxsize=8)
def _plan(dialect: Dialect) -> tuple[CompiledSQL, tuple[str, ...]]:
    return CompiledSQL(GET_THREAD, dialect), tuple(str(c.key) for c in GET_THREAD.selected_columns)


def sqlite_get_thread(cursor: Any, dialect: Dialect, thread_id: str) -> ThreadRecord | None:
    """:data:`.ops.GET_THREAD` for ``thread_id`` on ``cursor``; None when there is no such thread."""
    plan, names = _plan(dialect)
    row = cursor.execute(plan.sql, plan.params({"id": thread_id})).fetchone()
    if row is None:
        return None
    values = list(row)
    if plan.json_columns:
        loads = getattr(dialect, "_json_deserializer", None) or json.loads
        for i in plan.json_columns:
            if values[i] is not None:
                values[i] = loads(values[i])
    return thread_from_mapping(dict(zip(names, values, strict=True)))
