"""``MemoryStore``: long-term memory on the runtime's database.

Items are JSON objects under a namespace tuple and a key, with optional time to live, the
times they were written and who wrote them. An item is embedded (when the store has an
embedder and the item is indexed) *before* its transaction, so an embedder that is down
leaves nothing written, and the item and its vector are committed together.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..records import now_ms
from ._errors import EmbedderError, MemoryInputError, MemoryRejected
from ._namespace import Namespace, check_key, check_namespace, dotted, owner_of
from ._ops import (
    count_stale,
    delete_item,
    delete_owner,
    filter_clauses,
    get_item,
    list_namespaces,
    put_item,
    refresh_ttls,
    replace_vector,
    stale_items,
    sweep,
)
from ._run import run
from .embedders import Embedder
from .index import SearchQuery, VectorIndex, pack, vector_literal

__all__ = ["MAX_VALUE_BYTES", "Item", "MemoryFilter", "MemoryStore", "WrittenBy"]

#: the largest value (as compact JSON) one item may hold
MAX_VALUE_BYTES = 64 * 1024
#: the most results one search or listing returns
MAX_LIMIT = 1000

#: a filter hook: given (namespace, key, value), return the value to keep (possibly changed),
#: or raise :class:`MemoryRejected` to keep nothing
MemoryFilter = Callable[[Namespace, str, dict[str, Any]], "dict[str, Any] | Awaitable[dict[str, Any]]"]


@dataclass(frozen=True)
class WrittenBy:
    """Who wrote an item: the thread, execution and tool of an agent's turn, or a user."""

    thread_id: str | None = None
    execution_id: str | None = None
    tool: str | None = None
    user_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"threadId": self.thread_id, "executionId": self.execution_id, "tool": self.tool, "userId": self.user_id}
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class Item:
    """One stored item; ``score`` is its similarity to a search's query (1 is identical)."""

    namespace: Namespace
    key: str
    value: dict[str, Any]
    created_at: int
    updated_at: int
    expires_at: int | None = None
    written_by: dict[str, Any] = field(default_factory=dict)
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"namespace": list(self.namespace), "key": self.key, "value": self.value,
                               "created_at": _iso(self.created_at), "updated_at": _iso(self.updated_at),
                               "expires_at": _iso(self.expires_at) if self.expires_at else None,
                               "written_by": self.written_by}
        if self.score is not None:
            out["score"] = round(self.score, 6)
        return out


def _iso(ms: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).isoformat().replace("+00:00", "Z")


def _item(row: Any, score: float | None = None) -> Item:
    value = row[3] if not isinstance(row[3], str) else json.loads(row[3])
    written = row[7] if not isinstance(row[7], str) else json.loads(row[7])
    return Item(tuple(row[1].split(".")), row[2], value, int(row[4]), int(row[5]),
                int(row[6]) if row[6] is not None else None, written or {}, score)


def _leaves(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        out.append(str(value))
    elif isinstance(value, dict):
        for v in value.values():
            _leaves(v, out)
    elif isinstance(value, list):
        for v in value:
            _leaves(v, out)


def index_text(value: dict[str, Any], fields: Sequence[str]) -> str:
    """The text embedded for ``value``: the string leaves of each field (``$`` is the whole)."""
    out: list[str] = []
    for path in fields:
        node: Any = value
        if path != "$":
            for part in path.split("."):
                node = node.get(part) if isinstance(node, dict) else None
        _leaves(node, out)
    return " ".join(out)


class MemoryStore:
    """Put, get, delete, list and search memory items on ``store`` (a :class:`SQLStore`).

    ``embedder`` makes items searchable by meaning; without one, search filters and lists.
    ``index`` is the value fields embedded by default (``"$"``: all its text). ``filters`` run
    on every write, in order (see :data:`MemoryFilter`). ``refresh_ttl``: whether ``get`` and
    ``search`` restart the time to live of what they return when not told (as LangGraph's
    store does by default), so an item in use does not expire.
    """

    def __init__(self, store: Any, *, embedder: Embedder | None = None, index: Sequence[str] = ("$",),
                 filters: Sequence[MemoryFilter] = (), max_value_bytes: int = MAX_VALUE_BYTES,
                 refresh_ttl: bool = True) -> None:
        self.store = store
        self.refresh_ttl = refresh_ttl
        self.embedder = embedder
        self.index_fields = list(index)
        self.filters: list[MemoryFilter] = list(filters)
        self.max_value_bytes = max_value_bytes
        self.vector_index = VectorIndex(store)
        self._opened = False

    async def open(self) -> MemoryStore:
        """Open the database (idempotent) and choose the vector search; says which in the log."""
        if not self._opened:
            await self.store.open()
            await self.vector_index.open()
            self._opened = True
        return self

    async def aclose(self) -> None:
        self.vector_index.close()
        close = getattr(self.embedder, "aclose", None)
        if close is not None:
            await close()

    def add_filter(self, hook: MemoryFilter) -> MemoryFilter:
        """Register a filter hook (usable as a decorator)."""
        self.filters.append(hook)
        return hook

    # ----------------------------------------------------------------------------- writes
    async def put(self, namespace: Sequence[str], key: str, value: Mapping[str, Any], *,
                  index: Sequence[str] | Literal[False] | None = None, ttl: float | None = None,
                  written_by: WrittenBy | None = None) -> Item:
        """Store ``value`` at (namespace, key), replacing what was there.

        ``index``: the fields to embed (default the store's), or ``False`` to keep the item out
        of the semantic index. ``ttl``: minutes until the item expires (None: never).
        """
        await self.open()
        ns = check_namespace(namespace)
        check_key(key)
        if not isinstance(value, Mapping):
            raise MemoryInputError(f"value must be a JSON object, not {type(value).__name__}")
        clean = await self._filtered(ns, key, dict(value))
        try:
            encoded = json.dumps(clean, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise MemoryInputError(f"value is not JSON: {exc}") from exc
        if len(encoded.encode()) > self.max_value_bytes:
            raise MemoryInputError(f"value is {len(encoded.encode())} bytes as JSON; "
                                   f"at most {self.max_value_bytes} bytes may be stored in one item")
        if ttl is not None and (not isinstance(ttl, int | float) or isinstance(ttl, bool) or ttl <= 0):
            raise MemoryInputError(f"ttl must be a positive number of minutes, not {ttl!r}")
        fields = self.index_fields if index is None else ([] if index is False else list(index))
        if index not in (None, False) and (isinstance(index, str) or not all(isinstance(f, str) and f for f in fields)):
            raise MemoryInputError(f"index must be false or a list of field paths, not {index!r}")
        text = index_text(clean, fields) if fields and self.embedder is not None else ""
        vector_row: dict[str, Any] | None = None
        pg_literal: str | None = None
        if text.strip():
            assert self.embedder is not None
            vector = (await self._embed([text]))[0]
            vector_row = {"embedder": self.embedder.name, "dims": len(vector), "vector": pack(vector)}
            if self.vector_index.kind == "pgvector":
                pg_literal = vector_literal(vector)
                await self.vector_index.prepare(len(vector))
        now = now_ms()
        expires = now + int(ttl * 60_000) if ttl is not None else None
        written = written_by.to_dict() if written_by else None
        row: dict[str, Any] = {"id": "mem_" + uuid.uuid4().hex, "namespace": dotted(ns), "key": key, "value": clean,
               "owner": owner_of(ns), "written_by": written_by.to_dict() if written_by else None,
               "indexed_text": text if vector_row is not None else None,
               "ttl_minutes": int(ttl) if ttl is not None else None, "expires_at": expires,
               "created_at": now, "updated_at": now}
        _, created = await run(self.store, put_item, row, vector_row, pg_literal, self.vector_index.vector_schema)
        return Item(ns, key, clean, created, now, expires, written or {})

    async def _filtered(self, ns: Namespace, key: str, value: dict[str, Any]) -> dict[str, Any]:
        for hook in self.filters:
            result = hook(ns, key, value)
            if hasattr(result, "__await__"):
                result = await result
            if result is None:
                raise MemoryRejected(f"a memory filter refused the value at {dotted(ns)}/{key}")
            if not isinstance(result, dict):
                raise MemoryInputError(f"memory filter {getattr(hook, '__name__', hook)!r} returned "
                                       f"{type(result).__name__}, not an object")
            value = result
        return value

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        assert self.embedder is not None
        try:
            return await self.embedder.embed(texts)
        except EmbedderError:
            raise
        except Exception as exc:
            raise EmbedderError(f"the embedder {self.embedder.name!r} failed: {exc}") from exc

    async def delete(self, namespace: Sequence[str], key: str) -> bool:
        """Remove the item (and its vector); False when there was none."""
        await self.open()
        ns = check_namespace(namespace)
        return await run(self.store, delete_item, dotted(ns), check_key(key))

    async def delete_user(self, user_id: str) -> int:
        """Remove every item in ``("user", user_id, ...)`` namespaces; how many."""
        await self.open()
        return await run(self.store, delete_owner, user_id)

    async def sweep(self) -> int:
        """Remove expired items now (reads already skip them); how many."""
        await self.open()
        return await run(self.store, sweep, now_ms())

    # ------------------------------------------------------------------------------ reads
    def _refreshing(self, refresh_ttl: bool | None) -> bool:
        if refresh_ttl is None:
            return self.refresh_ttl
        if not isinstance(refresh_ttl, bool):
            raise MemoryInputError(f"refresh_ttl must be true, false or null, not {refresh_ttl!r}")
        return refresh_ttl

    async def _refreshed(self, rows: list[Any], now: int) -> dict[str, int]:
        """Restart the TTL of the rows' items that have one; their new expiry times."""
        ids = [row[0] for row in rows if row[6] is not None]
        return await run(self.store, refresh_ttls, ids, now) if ids else {}

    async def get(self, namespace: Sequence[str], key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        """The item, or None when there is none (or it expired). ``refresh_ttl`` (default:
        the store's) restarts its time to live."""
        await self.open()
        ns = check_namespace(namespace)
        refresh = self._refreshing(refresh_ttl)
        now = now_ms()
        row = await run(self.store, get_item, dotted(ns), check_key(key), now, write=False)
        if row is None:
            return None
        item = _item(row)
        if refresh and row[8]:
            item.expires_at = (await self._refreshed([row], now)).get(row[0], item.expires_at)
        return item

    async def search(self, namespace_prefix: Sequence[str] = (), *, query: str | None = None,
                     filter: Mapping[str, Any] | None = None, limit: int = 10, offset: int = 0,
                     refresh_ttl: bool | None = None) -> list[Item]:
        """Items under ``namespace_prefix`` whose value matches ``filter``; with ``query`` (and
        an embedder), the indexed ones ranked by similarity, each with its ``score``;
        otherwise the most recently updated first. ``refresh_ttl`` (default: the store's)
        restarts the time to live of the items returned."""
        refresh = self._refreshing(refresh_ttl)
        found = await self._search(namespace_prefix, query, filter, limit, offset)
        if not refresh or not found:
            return [item for _, item in found]
        expiries = await self._refreshed([row for row, _ in found], now_ms())
        for row, item in found:
            item.expires_at = expiries.get(row[0], item.expires_at)
        return [item for _, item in found]

    async def _search(self, namespace_prefix: Sequence[str], query: str | None, filter: Mapping[str, Any] | None,
                      limit: int, offset: int) -> list[tuple[Any, Item]]:
        await self.open()
        prefix = dotted(check_namespace(namespace_prefix, field="namespace_prefix", allow_empty=True))
        for name, n, low in (("limit", limit, 1), ("offset", offset, 0)):
            if not isinstance(n, int) or isinstance(n, bool) or n < low or n > (MAX_LIMIT if name == "limit" else 10**9):
                raise MemoryInputError(f"{name} must be an integer from {low}" + (f" to {MAX_LIMIT}" if name == "limit" else ""))
        conditions = filter_clauses(self.store.dialect, filter)
        now = now_ms()
        if query is not None and not isinstance(query, str):
            raise MemoryInputError(f"query must be a string, not {query!r}")
        if query and self.embedder is not None:
            vector = (await self._embed([query]))[0]
            q = SearchQuery(prefix, conditions, self.embedder.name, len(vector), vector, limit, offset, now)
            return [(row, _item(row, score)) for row, score in await self.vector_index.search(q)]
        rows = await run(self.store, _plain, prefix, conditions, limit, offset, now, write=False)
        return [(row, _item(row)) for row in rows]

    async def list_namespaces(self, prefix: Sequence[str] = (), *, suffix: Sequence[str] = (),
                              max_depth: int | None = None, limit: int = 100, offset: int = 0) -> list[Namespace]:
        """The namespaces holding items under ``prefix`` (ending with ``suffix``), cut to
        ``max_depth`` labels and de-duplicated, in order."""
        await self.open()
        p = check_namespace(prefix, field="prefix", allow_empty=True)
        s = check_namespace(suffix, field="suffix", allow_empty=True)
        if max_depth is not None and (not isinstance(max_depth, int) or max_depth < 1):
            raise MemoryInputError("max_depth must be a positive integer")
        out: list[Namespace] = []
        for text in await run(self.store, list_namespaces, dotted(p), now_ms(), write=False):
            ns = tuple(text.split("."))
            if s and ns[-len(s):] != s:
                continue
            if max_depth is not None:
                ns = ns[:max_depth]
            if ns not in out:
                out.append(ns)
        return out[offset: offset + limit]

    # --------------------------------------------------------------------- re-embedding
    async def stale_count(self) -> int:
        """Indexed items whose vector was made by another embedder (or is missing)."""
        await self.open()
        if self.embedder is None:
            return 0
        return await run(self.store, count_stale, self.embedder.name, write=False)

    async def reembed(self, *, batch: int = 64) -> int:
        """Embed again every indexed item whose vector another embedder made; how many."""
        await self.open()
        if self.embedder is None:
            raise MemoryInputError("re-embedding needs an embedder")
        done = 0
        while True:
            rows = await run(self.store, stale_items, self.embedder.name, batch, write=False)
            if not rows:
                return done
            vectors = await self._embed([text for _, _, text in rows])
            for (item_id, _, _), vector in zip(rows, vectors, strict=True):
                row = {"embedder": self.embedder.name, "dims": len(vector), "vector": pack(vector)}
                literal = vector_literal(vector) if self.vector_index.kind == "pgvector" else None
                if literal is not None:
                    await self.vector_index.prepare(len(vector))
                await run(self.store, replace_vector, item_id, row, literal, self.vector_index.vector_schema)
            done += len(rows)


def _plain(conn: Any, prefix: str, conditions: list[Any], limit: int, offset: int, now: int) -> list[Any]:
    import sqlalchemy as sa

    from ..store.schema_memory import memory_items as items
    from ._ops import ITEM_COLUMNS, live, prefix_clause

    stmt = (sa.select(*ITEM_COLUMNS).where(prefix_clause(prefix, conn.dialect.name), live(now), *conditions)
            .order_by(items.c.updated_at.desc(), items.c.key).limit(limit).offset(offset))
    return list(conn.execute(stmt))
