"""Statements of the event log: append a batch, read a stream after an id, trim by count
and age (recording each stream's floor, the highest id trimmed away)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Insert, delete, func, select
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from .schema import event_floors, event_log

__all__ = ["append_events", "prune_events", "read_events"]

#: a row of the log: stream, id, type, data, ts
EventRow = tuple[str, int, str, Any, float]


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


_APPEND, _FLOOR = _build()


def append_events(conn: Connection, rows: Sequence[EventRow]) -> int:
    if not rows:
        return 0
    conn.execute(_APPEND[conn.dialect.name],
                 [{"stream": s, "id": i, "type": t, "data": d, "ts": ts} for s, i, t, d, ts in rows])
    return len(rows)


def read_events(conn: Connection, stream: str, after: int, limit: int) -> tuple[int, list[EventRow]]:
    """The stream's floor (0 when nothing was trimmed) and up to ``limit`` events after ``after``, oldest first."""
    floor = conn.execute(select(event_floors.c.floor).where(event_floors.c.stream == stream)).scalar()
    c = event_log.c
    rows = conn.execute(select(c.stream, c.id, c.type, c.data, c.ts)
                        .where(c.stream == stream, c.id > after).order_by(c.id).limit(limit))
    return int(floor or 0), [(r[0], int(r[1]), r[2], r[3], float(r[4])) for r in rows]


def _raise_floors(conn: Connection, floors: dict[str, int]) -> None:
    if floors:
        conn.execute(_FLOOR[conn.dialect.name], [{"stream": s, "floor": f} for s, f in floors.items()])


def prune_events(conn: Connection, streams: Sequence[str], keep: int, before_ts: float | None) -> int:
    """Keep the newest ``keep`` events of each of ``streams`` and drop every event older
    than ``before_ts``; the floors rise to the highest id dropped. Returns the rows dropped."""
    c = event_log.c
    floors: dict[str, int] = {}
    dropped = 0
    for stream in streams:
        cut = conn.execute(select(c.id).where(c.stream == stream).order_by(c.id.desc())
                           .offset(keep).limit(1)).scalar()
        if cut is not None:
            dropped += int(conn.execute(delete(event_log).where(c.stream == stream, c.id <= cut)).rowcount or 0)
            floors[stream] = int(cut)
    if before_ts is not None:
        old = conn.execute(select(c.stream, func.max(c.id)).where(c.ts < before_ts).group_by(c.stream)).all()
        if old:
            dropped += int(conn.execute(delete(event_log).where(c.ts < before_ts)).rowcount or 0)
            for stream, top in old:
                floors[stream] = max(floors.get(stream, 0), int(top))
    _raise_floors(conn, floors)
    return dropped
