"""A search of the whole store (no namespace prefix) on SQLite (sqlite-vec), PostgreSQL and
PostgreSQL with pgvector: on sqlite-vec it takes the nearest vectors first and then their
items, so these pin that what it returns is what an exact search over every item returns when
the nearest vectors' items are expired or filtered out, and across pages."""

from __future__ import annotations

from typing import Any

import memory_fixtures
from standardagents.memory import MemoryStore, OfflineEmbedder
from standardagents.records import now_ms
from standardagents.store import SQLStore
from standardagents.store.schema_memory import memory_items

memory_db = memory_fixtures.memory_db
pgvector_url = memory_fixtures.pgvector_url

#: more items nearer the query than a search takes as candidates for ten results
CROWD = 80


async def _memory(store: SQLStore) -> MemoryStore:
    return await MemoryStore(store, embedder=OfflineEmbedder()).open()


async def _crowd(memory: MemoryStore) -> None:
    """Items about a dog in many users' namespaces, all nearer a dog query than anything else."""
    for n in range(CROWD):
        await memory.put(("user", f"u{n % 7}", "facts"), f"dog{n}", {"text": f"my dog barks dog {n}", "kind": "dog"})


async def test_a_filter_that_none_of_the_nearest_items_pass_still_finds_the_item_that_does(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    await _crowd(memory)
    await memory.put(("team", "garage"), "car", {"text": "an old green Volvo", "kind": "car"})
    hits = await memory.search(query="my dog barks", filter={"kind": "car"}, limit=3)
    assert [(h.namespace, h.key) for h in hits] == [(("team", "garage"), "car")]


async def test_expired_items_nearest_the_query_are_passed_over(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    await _crowd(memory)
    await memory.put(("team", "pets"), "cat", {"text": "my cat purrs", "kind": "cat"})
    past = now_ms() - 1

    def expire_the_dogs(conn: Any) -> None:
        conn.execute(memory_items.update().where(memory_items.c.key.like("dog%")).values(expires_at=past))

    await memory_db._run(expire_the_dogs)
    hits = await memory.search(query="my dog barks", limit=10)
    assert [h.key for h in hits] == ["cat"]


async def test_pages_of_a_whole_store_search_follow_one_another(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    for n in range(30):
        words = " ".join(f"w{k}" for k in range(n, 30))  # each item shares fewer words with the query
        await memory.put(("user", f"u{n % 3}", "notes"), f"n{n:02d}", {"text": words})
    query = " ".join(f"w{k}" for k in range(30))
    every = [h.key for h in await memory.search(query=query, limit=30, refresh_ttl=False)]
    assert every == [f"n{n:02d}" for n in range(30)]
    pages = [[h.key for h in await memory.search(query=query, limit=7, offset=start)] for start in range(0, 30, 7)]
    assert [key for page in pages for key in page] == every
