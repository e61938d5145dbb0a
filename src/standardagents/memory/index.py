"""The semantic index: ranking items by similarity to a query vector, on the database's own
vector search where it has one.

- PostgreSQL with ``pgvector``: an HNSW index per vector size (cosine), queried with ``<=>``.
- SQLite with ``sqlite-vec``: its ``vec_distance_cosine`` over the stored float32 vectors, on a
  read connection of its own (``sqlean.py``, a build of SQLite that may load extensions: the
  standard library's usually may not); writes stay on the store's connection.
- Otherwise an exact scan in Python, announced once at start-up with what to install.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.dialects import sqlite as sqlite_dialect

from ..store.schema_memory import memory_items as items
from ..store.schema_memory import memory_vectors as vectors
from ._ops import ITEM_COLUMNS, live, prefix_clause

__all__ = ["IndexKind", "SearchQuery", "VectorIndex", "pack", "unpack", "vector_literal"]

log = logging.getLogger("standardagents.memory")
#: one dialect for compiling sqlite-vec's statements (a new one per search costs milliseconds)
_SQLITE = sqlite_dialect.dialect(paramstyle="qmark")
IndexKind = Literal["pgvector", "sqlite-vec", "exact"]


def pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack(blob: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(blob) // 4}f", blob)


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form (``[0.1,0.2]``): only formatted floats, safe to inline."""
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


@dataclass(frozen=True)
class SearchQuery:
    prefix: str
    conditions: list[Any]
    embedder: str
    dims: int
    vector: Sequence[float]
    limit: int
    offset: int
    now: int


def _base(q: SearchQuery, dialect: str, *extra: Any) -> Any:
    """Candidates: the embedder's vectors of live items under the prefix matching the filter.
    With a prefix, the items are found first (the namespace index) and their vectors by key,
    so a search within one user's memory reads only that user's rows."""
    embedder: Any = vectors.c.embedder
    if q.prefix and dialect == "sqlite":
        embedder = embedder + ""  # not the embedder index: SQLite would scan every vector through it
    stmt = (sa.select(*ITEM_COLUMNS, *extra).select_from(items.join(vectors, vectors.c.item_id == items.c.id))
            .where(embedder == q.embedder, vectors.c.dims == q.dims, live(q.now), *q.conditions))
    if q.prefix:
        stmt = stmt.where(vectors.c.item_id.in_(sa.select(items.c.id).where(prefix_clause(q.prefix, dialect))))
    return stmt


#: what :func:`_base` builds for a prefix and no value filter, on SQLite, with the distance
_PREFIX_SEARCH = (
    "SELECT i.id, i.namespace, i.key, i.value, i.created_at, i.updated_at, i.expires_at, i.written_by, "
    "vec_distance_cosine(v.vector, ?) AS distance "
    "FROM memory_items AS i JOIN memory_vectors AS v ON v.item_id = i.id "
    "WHERE v.embedder || '' = ? AND v.dims = ? AND (i.expires_at IS NULL OR i.expires_at > ?) "
    "AND v.item_id IN (SELECT id FROM memory_items WHERE namespace = ? OR (namespace > ? AND namespace < ?)) "
    "ORDER BY distance LIMIT ? OFFSET ?")


#: the nearest vectors of one embedder, alone (the first step of a search of the whole store)
_NEAREST = ("SELECT item_id, vec_distance_cosine(vector, ?) AS distance FROM memory_vectors "
            "WHERE embedder = ? AND dims = ? ORDER BY distance, item_id LIMIT ?")
#: candidates taken beyond the results asked for (some may be expired or filtered out), and the most
_SPARE = 32
_MAX_CANDIDATES = 4000


def _decoded(row: Any) -> tuple[Any, ...]:
    """An item row read on sqlite-vec's connection: its JSON columns (value, written_by) parsed."""
    values = list(row)
    for i in (3, 7):
        if isinstance(values[i], str):
            values[i] = json.loads(values[i])
    return tuple(values)


def _exact(conn: Connection, q: SearchQuery) -> list[tuple[Any, float]]:
    rows = conn.execute(_base(q, conn.dialect.name, vectors.c.vector)).all()
    query = q.vector
    scored = []
    for row in rows:
        v = unpack(row[-1])
        scored.append((row[:-1], sum(a * b for a, b in zip(query, v, strict=False))))
    scored.sort(key=lambda s: -s[1])
    return scored[q.offset: q.offset + q.limit]


def _pgvector(conn: Connection, q: SearchQuery, schema: str) -> list[tuple[Any, float]]:
    """Nearest first: within a namespace prefix, exactly over its rows; across the whole store,
    through the HNSW index, and when a value filter or expired items leave fewer than
    ``limit`` of the index's candidates (pgvector filters after the index scan), once more
    ordered exactly over the filtered rows, so a search never comes back short."""
    n = int(q.dims)
    literal = vector_literal(q.vector)
    expr = (f"(memory_vectors.embedding::{schema}.vector({n})) OPERATOR({schema}.<=>) "
            f"'{literal}'::{schema}.vector({n})")
    if q.prefix:
        # one namespace (a user's memory) is found by its index and ordered exactly: the HNSW
        # scan would mostly return other namespaces' items and be filtered down to few
        rows = conn.execute(_pg_statement(q, n, f"({expr}) + 0")).all()  # not the index's expression
        return [(row[:-1], 1.0 - float(row[-1])) for row in rows]
    conn.execute(sa.text(f"SET LOCAL hnsw.ef_search = {max(40, min(1000, (q.limit + q.offset) * 4))}"))
    rows = conn.execute(_pg_statement(q, n, expr)).all()
    if len(rows) < q.limit:
        rows = conn.execute(_pg_statement(q, n, f"({expr}) + 0")).all()
    return [(row[:-1], 1.0 - float(row[-1])) for row in rows]


def _pg_statement(q: SearchQuery, n: int, expr: str) -> Any:
    distance: Any = sa.literal_column(expr)
    return (sa.select(*ITEM_COLUMNS, distance.label("distance"))
            .select_from(items.join(vectors, vectors.c.item_id == items.c.id))
            .where(vectors.c.embedder == q.embedder, vectors.c.dims == sa.literal_column(str(n)),
                   prefix_clause(q.prefix, "postgresql"), live(q.now), *q.conditions)
            .order_by(sa.literal_column("distance")).limit(q.limit).offset(q.offset))


def ensure_hnsw(conn: Connection, dims: int, schema: str) -> None:
    n = int(dims)
    conn.execute(sa.text(
        f"CREATE INDEX IF NOT EXISTS ix_memory_vectors_hnsw_{n} ON memory_vectors USING hnsw "
        f"((embedding::{schema}.vector({n})) {schema}.vector_cosine_ops) WHERE dims = {n}"))


def _pg_probe(conn: Connection) -> str | None:
    """pgvector's schema when the vectors table has its column here, else None."""
    schema = conn.execute(sa.text(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'vector'")).scalar()
    if schema is None:
        return None
    column = conn.execute(sa.text(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = 'memory_vectors' AND column_name = 'embedding'")).first()
    return str(schema) if column is not None else None


class VectorIndex:
    """Which vector search a store uses, decided once at :meth:`open` and said in the log."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.kind: IndexKind = "exact"
        self.reason = ""
        #: pgvector's schema (quoted), on PostgreSQL with the extension
        self.vector_schema: str | None = None
        self._hnsw: set[int] = set()
        self._reader: Any = None
        self._reader_lock = threading.Lock()
        self._sqlite_path: Path | None = None

    async def open(self) -> None:
        from ._run import run

        if self.store.dialect == "postgresql":
            schema = await run(self.store, _pg_probe, write=False)
            if schema is not None:
                self.kind = "pgvector"
                self.vector_schema = '"' + schema.replace('"', '""') + '"'
            else:
                self.reason = ("this PostgreSQL has no pgvector extension (CREATE EXTENSION vector); "
                               "semantic search uses an exact scan in Python")
        else:
            self.reason = self._open_sqlite_vec()
            if not self.reason:
                self.kind = "sqlite-vec"
        if self.kind == "exact":
            log.warning("memory: %s", self.reason)
        else:
            log.info("memory: semantic search on %s", self.kind)

    def _open_sqlite_vec(self) -> str:
        database = self.store._url.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            return "an in-memory SQLite database cannot be read by sqlite-vec's connection; semantic search uses an exact scan"
        try:
            import sqlean
            import sqlite_vec
        except ImportError:
            return ("sqlite-vec is not installed (pip install 'standardagents[memory]'); "
                    "semantic search uses an exact scan in Python")
        try:
            path = Path(database).expanduser()
            conn = sqlean.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            conn.enable_load_extension(False)
            conn.execute("PRAGMA busy_timeout=5000")
            # a search reads every candidate vector: map the file rather than copy it page by page
            conn.execute("PRAGMA mmap_size=1073741824")
            conn.execute("PRAGMA cache_size=-65536")
        except Exception as exc:
            return f"sqlite-vec could not be loaded ({exc}); semantic search uses an exact scan in Python"
        self._reader, self._sqlite_path = conn, path
        return ""

    async def prepare(self, dims: int) -> None:
        """Create the approximate index for vectors of ``dims`` floats (pgvector), once."""
        if self.kind != "pgvector" or dims in self._hnsw:
            return
        from ._run import run

        assert self.vector_schema is not None
        try:
            await run(self.store, ensure_hnsw, dims, self.vector_schema)
        except Exception as exc:  # another process created it meanwhile
            log.debug("memory: HNSW index for %d dimensions: %s", dims, exc)
        self._hnsw.add(dims)

    async def search(self, q: SearchQuery) -> list[tuple[Any, float]]:
        from ._run import run

        if self.kind == "pgvector":
            assert self.vector_schema is not None
            await self.prepare(q.dims)
            return await run(self.store, _pgvector, q, self.vector_schema, write=False)
        if self.kind == "sqlite-vec":
            if q.prefix:  # one namespace's rows: quicker than a hop to a worker thread
                return self._sqlite_vec(q)
            return await asyncio.to_thread(self._sqlite_vec, q)
        return await run(self.store, _exact, q, write=False)

    def _sqlite_vec(self, q: SearchQuery) -> list[tuple[Any, float]]:
        if not q.prefix:
            nearest = self._sqlite_vec_nearest(q)
            if nearest is not None:
                return nearest
        if q.prefix and not q.conditions:  # recall's search: one statement, written once
            sql = _PREFIX_SEARCH
            params: list[Any] = [pack(q.vector), q.embedder, q.dims, q.now, q.prefix, q.prefix + ".",
                                 q.prefix + "/", q.limit, q.offset]
        else:
            distance = sa.func.vec_distance_cosine(vectors.c.vector, sa.bindparam("qv", pack(q.vector)))
            stmt = _base(q, "sqlite", distance.label("distance")).order_by(sa.literal_column("distance")) \
                .limit(q.limit).offset(q.offset)
            compiled = stmt.compile(dialect=_SQLITE)
            sql = str(compiled)
            params = [compiled.params[name] for name in compiled.positiontup or ()]
        with self._reader_lock:
            rows = self._reader.execute(sql, params).fetchall()
        return [(_decoded(row[:-1]), 1.0 - float(row[-1])) for row in rows]

    def _sqlite_vec_nearest(self, q: SearchQuery) -> list[tuple[Any, float]] | None:
        """A search of the whole store in two steps: the nearest vectors alone (a scan of the
        vectors table, no look-up per row), then their items, checked for being live and for
        the filter. Joining every vector to its item first costs a look-up in the items table
        per stored vector, most of a search's time at 100,000 items. None when too few of the
        candidates pass (a selective filter, many expired items): the caller then runs the
        exact statement, so a search is never short."""
        wanted = q.limit + q.offset
        fetch = min(max(wanted * 4, wanted + _SPARE), _MAX_CANDIDATES)
        with self._reader_lock:
            candidates = self._reader.execute(_NEAREST, [pack(q.vector), q.embedder, q.dims, fetch]).fetchall()
        if not candidates:
            return []
        distance = {item_id: float(d) for item_id, d in candidates}
        stmt = sa.select(*ITEM_COLUMNS).where(items.c.id.in_(list(distance)), live(q.now), *q.conditions)
        compiled = stmt.compile(dialect=_SQLITE, compile_kwargs={"render_postcompile": True})
        params = [compiled.params[name] for name in compiled.positiontup or ()]
        with self._reader_lock:
            rows = self._reader.execute(str(compiled), params).fetchall()
        if len(rows) < wanted and len(candidates) == fetch:
            return None
        ranked = sorted(rows, key=lambda row: (distance[row[0]], row[0]))[q.offset: wanted]
        return [(_decoded(row), 1.0 - distance[row[0]]) for row in ranked]

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
