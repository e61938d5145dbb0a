"""The memory store's SQL, as functions of one connection (each runs as one transaction).

The item and its vector are written in the same transaction, so an item is stored with its
vector or not at all. Search statements are built here once for every backend: the SQLite
statement is also what the sqlite-vec reader runs, with its distance function added.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.dialects.postgresql import JSONB

from ..store.schema_memory import memory_items as items
from ..store.schema_memory import memory_vectors as vectors
from ._errors import MemoryInputError

__all__ = [
    "ITEM_COLUMNS", "delete_item", "delete_owner", "filter_clauses", "get_item", "list_namespaces",
    "live", "prefix_clause", "put_item", "refresh_ttls", "set_pg_embedding", "stale_items", "sweep",
]

ITEM_COLUMNS = (items.c.id, items.c.namespace, items.c.key, items.c.value, items.c.created_at,
                items.c.updated_at, items.c.expires_at, items.c.written_by)
_OPS = {"$eq": "==", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def prefix_clause(prefix: str, dialect: str) -> Any:
    """Items whose dotted namespace is ``prefix`` or under it (always true for ``""``).

    "Under" is a range of byte order (``p.`` up to ``p/``, '/' following '.'), which the
    namespace index answers on SQLite; PostgreSQL compares text in its collation, so there it
    is a ``LIKE`` that the ``text_pattern_ops`` index of revision 0007 answers."""
    if not prefix:
        return sa.true()
    if dialect == "postgresql":
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return sa.or_(items.c.namespace == prefix, items.c.namespace.like(escaped + ".%", escape="\\"))
    return sa.or_(items.c.namespace == prefix,
                  sa.and_(items.c.namespace > prefix + ".", items.c.namespace < prefix + "/"))


def live(now: int) -> Any:
    return sa.or_(items.c.expires_at.is_(None), items.c.expires_at > now)


def _field_expr(dialect: str, field: str) -> Any:
    if not isinstance(field, str) or not field or any(c in field for c in "\"'\\$[]") or "" in field.split("."):
        raise MemoryInputError(f"filter field {field!r} must be a name or a dotted path such as 'a.b'")
    parts = field.split(".")
    if dialect == "postgresql":
        value = sa.cast(items.c.value, JSONB)
        return value[parts[0]] if len(parts) == 1 else value[tuple(parts)]
    path = "$" + "".join(f'."{p}"' for p in parts)
    return sa.func.json_extract(items.c.value, path)


def _compare(dialect: str, expr: Any, op: str, value: Any, field: str) -> Any:
    if isinstance(value, dict | list):
        raise MemoryInputError(f"filter on {field!r}: compare with a string, number, boolean or null, not {value!r}")
    if value is None:
        if op not in ("$eq", "$ne"):
            raise MemoryInputError(f"filter on {field!r}: null only compares with $eq or $ne")
        return expr.is_(None) if op == "$eq" else expr.is_not(None)
    if dialect == "postgresql":
        right: Any = sa.cast(sa.literal(json.dumps(value)), JSONB)
    else:
        right = sa.literal(int(value) if isinstance(value, bool) else value)
    return {"==": expr == right, "!=": expr != right, ">": expr > right, ">=": expr >= right,
            "<": expr < right, "<=": expr <= right}[_OPS[op]]


def filter_clauses(dialect: str, spec: Mapping[str, Any] | None) -> list[Any]:
    """``{"field": value}`` or ``{"field": {"$gt": 3}}`` (``$eq $ne $gt $gte $lt $lte``) as
    SQL conditions on the item's value; anything else is a :class:`MemoryInputError`."""
    if not spec:
        return []
    if not isinstance(spec, Mapping):
        raise MemoryInputError(f"filter must be an object of field: value, not {spec!r}")
    out = []
    for field, cond in spec.items():
        expr = _field_expr(dialect, field)
        if isinstance(cond, dict):
            if not cond:
                raise MemoryInputError(f"filter on {field!r} is an empty object")
            for op, value in cond.items():
                if op not in _OPS:
                    raise MemoryInputError(f"filter on {field!r}: unknown operator {op!r}; use one of {', '.join(_OPS)}")
                out.append(_compare(dialect, expr, op, value, field))
        else:
            out.append(_compare(dialect, expr, "$eq", cond, field))
    return out


def put_item(conn: Connection, row: dict[str, Any], vector: dict[str, Any] | None, pg_embedding: str | None,
             vector_schema: str | None) -> tuple[str, int]:
    """Insert or replace the item at (namespace, key) and its vector; its id and created_at."""
    found = conn.execute(sa.select(items.c.id, items.c.created_at).where(
        items.c.namespace == row["namespace"], items.c.key == row["key"])).first()
    if found is None:
        conn.execute(items.insert().values(**row))
        item_id, created = row["id"], row["created_at"]
    else:
        item_id, created = found[0], found[1]
        changes = {k: v for k, v in row.items() if k not in ("id", "created_at")}
        conn.execute(items.update().where(items.c.id == item_id).values(**changes))
        conn.execute(vectors.delete().where(vectors.c.item_id == item_id))
    if vector is not None:
        conn.execute(vectors.insert().values(item_id=item_id, **vector))
        if pg_embedding is not None and vector_schema is not None:
            set_pg_embedding(conn, item_id, pg_embedding, vector_schema)
    return item_id, created


def set_pg_embedding(conn: Connection, item_id: str, literal: str, vector_schema: str) -> None:
    conn.execute(sa.text(f"UPDATE memory_vectors SET embedding = CAST(:v AS {vector_schema}.vector) "
                         "WHERE item_id = :id"), {"v": literal, "id": item_id})


def get_item(conn: Connection, namespace: str, key: str, now: int) -> Any:
    """The live item's row (:data:`ITEM_COLUMNS`, then its TTL in minutes), or None."""
    return conn.execute(sa.select(*ITEM_COLUMNS, items.c.ttl_minutes).where(
        items.c.namespace == namespace, items.c.key == key, live(now))).first()


def refresh_ttls(conn: Connection, ids: list[str], now: int) -> dict[str, int]:
    """Restart the time to live of these items (those that have one and are live) from
    ``now``; their new expiry times, by id."""
    if not ids:
        return {}
    which = sa.and_(items.c.id.in_(ids), items.c.ttl_minutes > 0, items.c.expires_at > now)
    conn.execute(items.update().where(which).values(expires_at=now + items.c.ttl_minutes * 60_000))
    return {r[0]: int(r[1]) for r in conn.execute(sa.select(items.c.id, items.c.expires_at).where(
        items.c.id.in_(ids), items.c.expires_at.is_not(None)))}


def delete_item(conn: Connection, namespace: str, key: str) -> bool:
    found = conn.execute(sa.select(items.c.id).where(items.c.namespace == namespace, items.c.key == key)).first()
    if found is None:
        return False
    conn.execute(vectors.delete().where(vectors.c.item_id == found[0]))
    conn.execute(items.delete().where(items.c.id == found[0]))
    return True


def delete_where(conn: Connection, condition: Any) -> int:
    ids = sa.select(items.c.id).where(condition).scalar_subquery()
    conn.execute(vectors.delete().where(vectors.c.item_id.in_(ids)))
    return int(conn.execute(items.delete().where(condition)).rowcount or 0)


def delete_owner(conn: Connection, owner: str) -> int:
    """Every item of one user (their ``user.<id>...`` namespaces), with its vector."""
    return delete_where(conn, items.c.owner == owner)


def sweep(conn: Connection, now: int) -> int:
    """Delete items whose time to live has passed."""
    return delete_where(conn, sa.and_(items.c.expires_at.is_not(None), items.c.expires_at <= now))


def list_namespaces(conn: Connection, prefix: str, now: int) -> list[str]:
    rows = conn.execute(sa.select(items.c.namespace).distinct().where(prefix_clause(prefix, conn.dialect.name), live(now))
                        .order_by(items.c.namespace))
    return [r[0] for r in rows]


def stale_items(conn: Connection, embedder: str, limit: int) -> list[tuple[str, Any, str]]:
    """Indexed items whose vector is missing or was made by another embedder: (id, value, text)."""
    current = sa.select(vectors.c.item_id).where(vectors.c.embedder == embedder).scalar_subquery()
    rows = conn.execute(sa.select(items.c.id, items.c.value, items.c.indexed_text).where(
        items.c.indexed_text.is_not(None), items.c.id.not_in(current)).limit(limit))
    return [(r[0], r[1], r[2]) for r in rows]


def replace_vector(conn: Connection, item_id: str, vector: dict[str, Any], pg_embedding: str | None,
                   vector_schema: str | None) -> None:
    conn.execute(vectors.delete().where(vectors.c.item_id == item_id))
    conn.execute(vectors.insert().values(item_id=item_id, **vector))
    if pg_embedding is not None and vector_schema is not None:
        set_pg_embedding(conn, item_id, pg_embedding, vector_schema)


def count_stale(conn: Connection, embedder: str) -> int:
    current = sa.select(vectors.c.item_id).where(vectors.c.embedder == embedder).scalar_subquery()
    return int(conn.execute(sa.select(sa.func.count()).select_from(items).where(
        items.c.indexed_text.is_not(None), items.c.id.not_in(current))).scalar() or 0)
