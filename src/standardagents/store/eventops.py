"""Statements of the event log: append batches, read a stream after an id, trim by count and
age (recording each stream's floor, the highest event id trimmed away).

A row holds one batch of one stream's events (``id`` is its last event's id, ``first_id`` its
first, ``events`` the JSON list ``[[id, type, data, ts], ...]``): a turn streaming hundreds of
token deltas writes a few rows, not hundreds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Insert, delete, func, select
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from ..records import ExecutionRecord
from .ops import replace_execution
from .schema import event_floors, event_log

__all__ = ["APPEND", "BatchRow", "append_batches", "batch_params", "log_ending", "prune_events", "read_events"]

#: one stored batch: stream, last id, first id, event count, events (JSON text), last ts
BatchRow = tuple[str, int, int, int, str, float]
#: one event read back: id, type, data, ts
EventRow = tuple[int, str, Any, float]


def _build() -> tuple[dict[str, Insert], dict[str, Insert]]:
    append: dict[str, Insert] = {}
    floor: dict[str, Insert] = {}
    for name, mod in (("sqlite", sqlite_dialect), ("postgresql", pg_dialect)):
        # a batch sent twice (a retry after a lost connection) is stored once
        append[name] = mod.insert(event_log).on_conflict_do_nothing()
        stmt = mod.insert(event_floors)
        floor[name] = stmt.on_conflict_do_update(
            index_elements=[event_floors.c.stream],
            set_={"floor": func.max(stmt.excluded.floor, event_floors.c.floor) if name == "sqlite"
                  else func.greatest(stmt.excluded.floor, event_floors.c.floor)},
        )
    return append, floor


APPEND, _FLOOR = _build()


def batch_params(rows: Sequence[BatchRow]) -> list[dict[str, Any]]:
    return [{"stream": s, "id": last, "first_id": first, "count": n, "events": text, "ts": ts}
            for s, last, first, n, text, ts in rows]


def append_batches(conn: Connection, rows: Sequence[BatchRow]) -> int:
    if not rows:
        return 0
    conn.execute(APPEND[conn.dialect.name], batch_params(rows))
    return sum(r[3] for r in rows)


def log_ending(conn: Connection, execution: ExecutionRecord, expected_updated_at: int,
               rows: Sequence[BatchRow]) -> bool:
    """Mark an ended execution (compare-and-set on its status and ``updated_at``) and append its
    closing events in the same transaction: of several writers, exactly one logs them."""
    if not replace_execution(conn, execution, execution.status, expected_updated_at):
        return False
    append_batches(conn, rows)
    return True


def read_events(conn: Connection, stream: str, after: int, limit: int) -> tuple[int, list[EventRow]]:
    """The stream's floor (0 when nothing was trimmed) and its events after ``after``, oldest
    first (at most about ``limit``: whole batches are read)."""
    floor = conn.execute(select(event_floors.c.floor).where(event_floors.c.stream == stream)).scalar()
    c = event_log.c
    out: list[EventRow] = []
    for (text,) in conn.execute(select(c.events).where(c.stream == stream, c.id > after).order_by(c.id)):
        out.extend((int(i), t, d, float(ts)) for i, t, d, ts in json.loads(text) if int(i) > after)
        if len(out) >= limit:
            break
    return int(floor or 0), out


def prune_events(conn: Connection, streams: Sequence[str], keep: int, before_ts: float | None) -> int:
    """Keep at least the newest ``keep`` events of each of ``streams`` (whole batches) and drop
    every batch older than ``before_ts``; the floors rise to the highest id dropped. Returns
    the batches dropped."""
    c = event_log.c
    floors: dict[str, int] = {}
    dropped = 0
    for stream in streams:
        kept = 0
        cut: int | None = None
        for last_id, count in conn.execute(select(c.id, c.count).where(c.stream == stream).order_by(c.id.desc())):
            if kept >= keep:
                cut = int(last_id)
                break
            kept += int(count)
        if cut is not None:
            dropped += int(conn.execute(delete(event_log).where(c.stream == stream, c.id <= cut)).rowcount or 0)
            floors[stream] = cut
    if before_ts is not None:
        old = conn.execute(select(c.stream, func.max(c.id)).where(c.ts < before_ts).group_by(c.stream)).all()
        if old:
            dropped += int(conn.execute(delete(event_log).where(c.ts < before_ts)).rowcount or 0)
            for stream, top in old:
                floors[stream] = max(floors.get(stream, 0), int(top))
    if floors:
        conn.execute(_FLOOR[conn.dialect.name], [{"stream": s, "floor": f} for s, f in floors.items()])
    return dropped
