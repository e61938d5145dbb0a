"""Forget a user, everywhere: one call removes their threads (with their subagents' threads),
messages and tool results, files, executions and their traces, logs, usage rows, event-log
entries, scheduled effects, values, memory and every other row that names them.

Tables are found from the schema itself: a table with a ``user_id`` or ``owner`` column loses
the user's rows, one with a ``thread_id`` (or ``parent_thread_id`` / ``child_thread_id``)
loses their threads' rows, so a table added later is covered without a change here. The user
account and its API tokens stay (the person may still sign in); everything runs in one
transaction, so a failure leaves all of it in place. Running turns of the user's threads are
stopped first, in this process or any worker sharing the database.

Every worker also keeps its recent events in memory for replay (:class:`~standardagents.eventlog.EventLog`).
After the transaction, this process empties its own of the user's streams, then asks every
other worker through the PostgreSQL relay to do the same (a control message each answers once
done), and waits for their answers: a relay message rather than a check on every replay,
because only the workers can drop what they hold, including events not yet written that a
check on reads could not stop from landing in the log after the delete. Each worker also
deletes the streams' log rows again while none of its batches is being written, so a batch
that was on its way when the transaction ran leaves nothing behind.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from .eventlog import user_stream_key
from .store.schema import metadata

__all__ = ["FORGET_STREAMS", "ForgetReport", "forget_user", "forget_user_elsewhere", "listen_for_forgets",
           "purge_streams"]

log = logging.getLogger("standardagents.forget")

#: the relay's control message asking a worker to drop forgotten streams' events
FORGET_STREAMS = "forget-streams"
#: thread ids per control message (one PostgreSQL notification holds under 8000 bytes)
_PER_MESSAGE = 100

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
    #: other workers asked to drop the user's events from memory, and those that confirmed
    workers: int = 0
    confirmed: int = 0

    @property
    def total(self) -> int:
        return sum(self.removed.values())

    def to_dict(self) -> dict[str, Any]:
        return {"userId": self.user_id, "threads": self.threads, "stopped": self.stopped,
                "removed": self.removed, "total": self.total,
                "workers": {"asked": self.workers, "confirmed": self.confirmed}}


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


def _purge(conn: Connection, streams: list[str]) -> int:
    log_rows, floors = metadata.tables["event_log"], metadata.tables["event_floors"]
    n = conn.execute(sa.delete(log_rows).where(log_rows.c.stream.in_(streams))).rowcount or 0
    return int(n) + int(conn.execute(sa.delete(floors).where(floors.c.stream.in_(streams))).rowcount or 0)


async def purge_streams(store: Any, streams: list[str]) -> int:
    """Delete these streams' event-log rows (and floors); how many rows."""
    return int(await store._run(_purge, list(streams))) if streams else 0


def listen_for_forgets(relay: Any, event_log: Any, store: Any) -> None:
    """Make this worker drop forgotten streams' events when another worker asks (see the
    module's docstring)."""
    async def handle(body: dict[str, Any]) -> None:
        threads, others = [str(t) for t in body.get("threads") or []], [str(s) for s in body.get("others") or []]
        if event_log is not None:
            await event_log.forget(threads, others, purge=functools.partial(purge_streams, store))
        else:
            await purge_streams(store, [*threads, *others])

    relay.controls[FORGET_STREAMS] = handle


async def forget_user(store: Any, user_id: str, *, runtime: Any = None, event_log: Any = None,
                      relay: Any = None) -> ForgetReport:
    """Remove everything of ``user_id`` from ``store`` (a :class:`SQLStore`) and report it.

    With ``runtime``, the user's running turns (here or on other workers) are stopped first,
    so no turn writes into a thread after it is gone. ``event_log`` (this process's) and
    ``relay`` (to the other workers) drop the user's events kept in memory too."""
    report = ForgetReport(user_id)
    if runtime is not None:
        ids = await store._run(_user_threads, user_id, write=False)
        for thread_id in await runtime.running_threads(ids):
            if await runtime.stop(thread_id):
                report.stopped.append(thread_id)
    report.threads, report.removed = await store._run(_forget, user_id)
    others = [user_stream_key(user_id)]
    if event_log is not None:
        await event_log.forget(report.threads, others, purge=functools.partial(purge_streams, store))
    if relay is not None:
        chunks = [report.threads[i:i + _PER_MESSAGE] for i in range(0, len(report.threads), _PER_MESSAGE)] or [[]]
        bodies = [{"threads": chunk, "others": others if n == 0 else []} for n, chunk in enumerate(chunks)]
        try:
            report.workers, report.confirmed = await relay.broadcast(FORGET_STREAMS, bodies)
        except Exception as exc:  # the rows are gone; the others' memory ages out in recent_seconds
            report.workers = len(getattr(relay.sequencer, "peers", ()))
            log.warning("forget: could not ask the other workers to drop %s's events (%s)", user_id, exc)
    return report


async def forget_user_elsewhere(store: Any, user_id: str) -> ForgetReport:
    """:func:`forget_user` from a process that serves nothing (the CLI): on PostgreSQL, a
    relay of its own asks the serving workers to drop the user's events they keep. Running
    turns are not stopped from here (that takes a runtime: use the REST API to stop them)."""
    from .events import EventBus
    from .relay import relay_for_store

    relay = relay_for_store(EventBus(), store)
    if relay is not None:
        try:
            await relay.start()
        except Exception as exc:
            log.warning("forget: no relay to the serving workers (%s); their recent events of %s age out", exc, user_id)
            relay = None
    try:
        return await forget_user(store, user_id, relay=relay)
    finally:
        if relay is not None:
            await relay.aclose()
