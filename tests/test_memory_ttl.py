"""Reads restart an item's time to live, as LangGraph's store does: ``get`` and ``search``
refresh the TTL of what they return unless told not to (``refresh_ttl``, default the store's),
on SQLite, PostgreSQL and PostgreSQL with pgvector, in Python and over HTTP.

An item is put with a TTL of an hour and its expiry then moved back to a minute from now in
the database; a read that refreshes it moves it an hour from the read again."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

import memory_fixtures
from server_fixtures import LiveServer, serve_app
from standardagents.memory import MemoryInputError, MemoryStore, OfflineEmbedder
from standardagents.records import now_ms
from standardagents.store import SQLStore
from standardagents.store.schema_memory import memory_items

memory_db = memory_fixtures.memory_db
pgvector_url = memory_fixtures.pgvector_url

USER = ("user", "u1", "facts")
HOUR = 60 * 60_000
#: more than this left means the expiry was restarted (it was set to a minute from now)
RESTARTED = 50 * 60_000


async def _memory(store: SQLStore, **options: Any) -> MemoryStore:
    return await MemoryStore(store, embedder=OfflineEmbedder(), **options).open()


async def _put_nearly_expired(memory: MemoryStore, key: str, text: str) -> int:
    """An item with a TTL of an hour whose expiry is moved to a minute from now; that expiry."""
    await memory.put(USER, key, {"text": text}, ttl=60)
    soon = now_ms() + 60_000

    def move(conn: Any) -> None:
        conn.execute(memory_items.update().where(memory_items.c.key == key).values(expires_at=soon))

    await memory.store._run(move)
    return soon


async def _stored_expiry(memory: MemoryStore, key: str) -> int:
    def read(conn: Any) -> int:
        return int(conn.execute(sa.select(memory_items.c.expires_at).where(memory_items.c.key == key)).scalar_one())

    return int(await memory.store._run(read, write=False))


async def test_get_restarts_the_ttl_of_the_item_it_returns(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    soon = await _put_nearly_expired(memory, "dog", "My dog is called Rex")
    item = await memory.get(USER, "dog")
    assert item is not None and item.expires_at is not None
    assert item.expires_at - soon > RESTARTED
    assert await _stored_expiry(memory, "dog") == item.expires_at


async def test_get_with_refresh_ttl_false_leaves_the_ttl(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    soon = await _put_nearly_expired(memory, "dog", "My dog is called Rex")
    item = await memory.get(USER, "dog", refresh_ttl=False)
    assert item is not None and item.expires_at == soon
    assert await _stored_expiry(memory, "dog") == soon


async def test_search_restarts_the_ttl_of_the_items_it_returns_only(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    soon = {key: await _put_nearly_expired(memory, key, text)
            for key, text in (("dog", "My dog is called Rex and loves the beach"), ("car", "I drive a green Volvo"))}
    hits = await memory.search(USER, query="what is my dog called?", limit=1)
    assert [h.key for h in hits] == ["dog"]
    assert hits[0].expires_at is not None and hits[0].expires_at - soon["dog"] > RESTARTED
    assert (await _stored_expiry(memory, "dog"), await _stored_expiry(memory, "car")) == (hits[0].expires_at, soon["car"])


async def test_search_without_a_query_restarts_the_ttl_too_unless_told_not_to(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    soon = await _put_nearly_expired(memory, "dog", "My dog is called Rex")
    assert [h.expires_at for h in await memory.search(USER, refresh_ttl=False)] == [soon]
    assert await _stored_expiry(memory, "dog") == soon
    [hit] = await memory.search(USER)
    assert hit.expires_at is not None and hit.expires_at - soon > RESTARTED


async def test_a_store_that_does_not_refresh_by_default_refreshes_when_asked(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db, refresh_ttl=False)
    soon = await _put_nearly_expired(memory, "dog", "My dog is called Rex")
    await memory.get(USER, "dog")
    await memory.search(USER, query="dog")
    assert await _stored_expiry(memory, "dog") == soon
    item = await memory.get(USER, "dog", refresh_ttl=True)
    assert item is not None and item.expires_at is not None and item.expires_at - soon > RESTARTED


async def test_an_item_without_a_ttl_keeps_none_after_a_read(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    await memory.put(USER, "job", {"text": "I work as a dentist"})
    item = await memory.get(USER, "job")
    assert item is not None and item.expires_at is None
    assert [h.expires_at for h in await memory.search(USER, query="dentist")] == [None]


async def test_refresh_ttl_of_another_type_is_refused(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    with pytest.raises(MemoryInputError, match="refresh_ttl must be true, false or null, not 'yes'"):
        await memory.get(USER, "dog", refresh_ttl="yes")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------- over HTTP

@pytest.fixture
def live(project_dir: Path, tmp_path: Path) -> Iterator[LiveServer]:
    yield from serve_app(project_dir, f"sqlite:///{tmp_path / 'live.db'}")


def _move_expiry(db: Path, key: str) -> int:
    soon = now_ms() + 60_000
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE memory_items SET expires_at = ? WHERE key = ?", (soon, key))
    return soon


def _expiry(db: Path, key: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT expires_at FROM memory_items WHERE key = ?", (key,)).fetchone()[0])


async def _admin(tmp_path: Path) -> dict[str, str]:
    store = SQLStore(f"sqlite:///{tmp_path / 'live.db'}")
    await store.open()
    try:
        user = await store.create_user(f"admin-{uuid.uuid4().hex[:6]}", is_admin=True)
        _, token = await store.create_api_token(user.id, "tests")
        return {"Authorization": f"Bearer {token}"}
    finally:
        await store.close()


async def test_the_rest_api_refreshes_on_read_unless_refresh_ttl_is_false(live: LiveServer, tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    async with httpx.AsyncClient(base_url=f"{live.base_url}/api", headers=await _admin(tmp_path)) as client:
        put = await client.put("/store/items", json={"namespace": ["team", "notes"], "key": "k",
                                                     "value": {"text": "the vet is on Monday"}, "ttl": 60})
        assert put.status_code == 204
        soon = _move_expiry(db, "k")
        got = await client.get("/store/items", params={"namespace": "team.notes", "key": "k", "refresh_ttl": "false"})
        assert got.status_code == 200 and _expiry(db, "k") == soon
        found = await client.post("/store/items/search", json={"namespace_prefix": ["team"], "query": "vet",
                                                               "refresh_ttl": False})
        assert [i["key"] for i in found.json()["items"]] == ["k"] and _expiry(db, "k") == soon
        await client.post("/store/items/search", json={"namespace_prefix": ["team"], "query": "vet"})
        assert _expiry(db, "k") - soon > RESTARTED
        soon = _move_expiry(db, "k")
        await client.get("/store/items", params={"namespace": "team.notes", "key": "k"})
        assert _expiry(db, "k") - soon > RESTARTED


@pytest.mark.parametrize(("where", "value", "message"), [
    ("query", "maybe", "query parameter 'refresh_ttl' must be true or false, not 'maybe'"),
    ("body", "maybe", "refresh_ttl must be true, false or null, not 'maybe'"),
])
async def test_the_rest_api_refuses_a_refresh_ttl_that_is_not_a_boolean(live: LiveServer, tmp_path: Path, where: str,
                                                                       value: str, message: str) -> None:
    async with httpx.AsyncClient(base_url=f"{live.base_url}/api", headers=await _admin(tmp_path)) as client:
        await client.put("/store/items", json={"namespace": ["team", "notes"], "key": "k", "value": {"text": "x"}})
        if where == "query":
            r = await client.get("/store/items", params={"namespace": "team.notes", "key": "k", "refresh_ttl": value})
        else:
            r = await client.post("/store/items/search", json={"namespace_prefix": ["team"], "refresh_ttl": value})
        assert (r.status_code, r.json()["error"]["message"]) == (422, message)
