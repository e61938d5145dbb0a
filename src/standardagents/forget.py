"""Forget a user, everywhere: one call removes their threads (with their subagents' threads),
messages and tool results, files, executions and their traces, logs, usage rows, event-log
entries, scheduled effects, values, memory and every other row that names them.

Tables are found from the schema itself: a table with a ``user_id`` or ``owner`` column loses
the user's rows, one with a ``thread_id`` (or ``parent_thread_id`` / ``child_thread_id``)
loses their threads' rows, so a table added later is covered without a change here. The user
account and its API tokens stay (the person may still sign in); everything runs in one
transaction, so a failure leaves all of it in place. Running turns of the user's threads are
stopped first, in this process or any worker sharing the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from .store.schema import metadata

__all__ = ["ForgetReport", "forget_user"]

#: the account itself: kept, so forgetting data does not lock the person out
_ACCOUNT_TABLES = frozenset({"users", "api_tokens"})
_THREAD_COLUMNS = ("thread_id", "parent_thread_id", "child_thread_id")


@dataclass
class ForgetReport:
    """What was removed: rows per table, the threads and the running turns stopped."""

    user_id: str
    threads: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    removed: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.removed.values())

    def to_dict(self) -> dict[str, Any]:
        return {"userId": self.user_id, "threads": self.threads, "stopped": self.stopped,
                "removed": self.removed, "total": self.total}


def _user_threads(conn: Connection, user_id: str) -> list[str]:
    threads = metadata.tables["threads"]
    found = [r[0] for r in conn.execute(sa.select(threads.c.id).where(threads.c.user_id == user_id))]
    frontier = list(found)
    while frontier:  # subagent threads, whoever they are recorded as belonging to
        children = [r[0] for r in conn.execute(sa.select(threads.c.id).where(threads.c.parent_id.in_(frontier)))]
        frontier = [c for c in children if c not in found]
        found.extend(frontier)
    return found


def _forget(conn: Connection, user_id: str) -> tuple[list[str], dict[str, int]]:
    thread_ids = _user_threads(conn, user_id)
    removed: dict[str, int] = {}

    def count(name: str, n: int | None) -> None:
        if n:
            removed[name] = removed.get(name, 0) + int(n)

    # vectors first: they are found through the items they belong to
    for table in sorted(reversed(metadata.sorted_tables), key=lambda t: t.name != "memory_vectors"):
        name = table.name
        if name in _ACCOUNT_TABLES or name == "threads":
            continue
        conditions: list[Any] = []
        for col in ("user_id", "owner"):
            if col in table.c:
                conditions.append(table.c[col] == user_id)
        for col in _THREAD_COLUMNS:
            if col in table.c and thread_ids:
                conditions.append(table.c[col].in_(thread_ids))
        if name in ("event_log", "event_floors"):
            conditions.append(table.c.stream.in_([*thread_ids, f"user:{user_id}"]))
        if name == "env_values":
            conditions.append(sa.and_(table.c.scope == "user", table.c.scope_id == user_id))
            if thread_ids:
                conditions.append(table.c.scope_id.in_(thread_ids))
        if name == "memory_vectors":
            items = metadata.tables["memory_items"]
            conditions.append(table.c.item_id.in_(sa.select(items.c.id).where(items.c.owner == user_id)))
        if conditions:
            count(name, conn.execute(sa.delete(table).where(sa.or_(*conditions))).rowcount)
    if thread_ids:
        threads = metadata.tables["threads"]
        count("threads", conn.execute(sa.delete(threads).where(threads.c.id.in_(thread_ids))).rowcount)
    return thread_ids, removed


async def forget_user(store: Any, user_id: str, *, runtime: Any = None) -> ForgetReport:
    """Remove everything of ``user_id`` from ``store`` (a :class:`SQLStore`) and report it.

    With ``runtime``, the user's running turns (here or on other workers) are stopped first,
    so no turn writes into a thread after it is gone."""
    report = ForgetReport(user_id)
    if runtime is not None:
        ids = await store._run(_user_threads, user_id, write=False)
        for thread_id in await runtime.running_threads(ids):
            if await runtime.stop(thread_id):
                report.stopped.append(thread_id)
    report.threads, report.removed = await store._run(_forget, user_id)
    return report
