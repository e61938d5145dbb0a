"""The memory store on SQLite (sqlite-vec), PostgreSQL without pgvector (exact scan) and
PostgreSQL with pgvector: put, get, list, search, TTL, delete, and bad input."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import memory_fixtures
from standardagents.memory import (
    EmbedderError,
    MemoryInputError,
    MemoryRejected,
    MemoryStore,
    OfflineEmbedder,
    OpenAIEmbedder,
    WrittenBy,
)
from standardagents.store import SQLStore
from standardagents.testing import OpenAIStub

FACTS = {
    "dog": {"text": "My dog is called Rex and he loves the beach"},
    "job": {"text": "I work as a dentist in Lyon"},
    "food": {"text": "My favourite food is ramen with extra garlic"},
    "car": {"text": "I drive an old green Volvo"},
}
USER = ("user", "u1", "facts")


@pytest.fixture
async def sqlite_db(tmp_path: Any) -> AsyncIterator[SQLStore]:
    """A SQLite store, for input checks that happen before any database is asked."""
    store = SQLStore(f"sqlite:///{tmp_path / 'm.db'}")
    await store.open()
    yield store
    await store.close()


memory_db = memory_fixtures.memory_db
pgvector_url = memory_fixtures.pgvector_url

EXPECTED_INDEX = {"sqlite": "sqlite-vec", "postgres": "exact", "pgvector": "pgvector"}


async def _memory(store: SQLStore, embedder: Any = None) -> MemoryStore:
    return await MemoryStore(store, embedder=embedder or OfflineEmbedder()).open()


async def _seed(memory: MemoryStore) -> None:
    for key, value in FACTS.items():
        await memory.put(USER, key, value)


def _kind(request: pytest.FixtureRequest) -> str:
    return str(request.node.callspec.params["memory_db"])


async def test_each_database_uses_its_vector_search(memory_db: SQLStore, request: pytest.FixtureRequest) -> None:
    memory = await _memory(memory_db)
    assert memory.vector_index.kind == EXPECTED_INDEX[_kind(request)]


async def test_put_then_get_returns_the_value_with_its_times_and_writer(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    put = await memory.put(USER, "dog", FACTS["dog"], written_by=WrittenBy(thread_id="t1", tool="memory_save"))
    got = await memory.get(USER, "dog")
    assert got is not None
    assert (got.namespace, got.key, got.value) == (USER, "dog", FACTS["dog"])
    assert got.written_by == {"threadId": "t1", "tool": "memory_save"}
    assert got.created_at == put.created_at and got.updated_at == put.updated_at


async def test_put_again_replaces_the_value_and_keeps_created_at(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    first = await memory.put(USER, "dog", FACTS["dog"])
    await memory.put(USER, "dog", {"text": "My dog is called Bruno"})
    got = await memory.get(USER, "dog")
    assert got is not None and got.value == {"text": "My dog is called Bruno"}
    assert got.created_at == first.created_at
    hits = await memory.search(USER, query="dog Bruno")
    assert [h.key for h in hits] == ["dog"]


async def test_search_ranks_the_relevant_item_first(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    await _seed(memory)
    hits = await memory.search(("user", "u1"), query="what food do I like?", limit=2)
    assert hits[0].key == "food"
    assert hits[0].score is not None and hits[0].score > (hits[1].score or 0)


async def test_search_filters_on_value_fields(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    await memory.put(USER, "a", {"kind": "pet", "age": 3, "text": "cat"})
    await memory.put(USER, "b", {"kind": "pet", "age": 9, "text": "dog"})
    await memory.put(USER, "c", {"kind": "car", "age": 12, "text": "volvo"})
    assert sorted(h.key for h in await memory.search(USER, filter={"kind": "pet"})) == ["a", "b"]
    assert sorted(h.key for h in await memory.search(USER, filter={"age": {"$gte": 9}})) == ["b", "c"]
    assert [h.key for h in await memory.search(USER, query="dog", filter={"kind": "pet"}, limit=1)] == ["b"]


async def test_search_stays_within_its_namespace_prefix(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    await memory.put(("user", "u1", "facts"), "dog", FACTS["dog"])
    await memory.put(("user", "u10", "facts"), "dog", {"text": "My dog is called Max"})
    hits = await memory.search(("user", "u1"), query="dog")
    assert [(h.namespace, h.key) for h in hits] == [(("user", "u1", "facts"), "dog")]


async def test_list_namespaces_with_prefix_and_depth(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    await memory.put(("user", "u1", "facts"), "k", {"text": "x"})
    await memory.put(("user", "u1", "prefs"), "k", {"text": "y"})
    await memory.put(("user", "u2", "facts"), "k", {"text": "z"})
    assert await memory.list_namespaces(("user", "u1")) == [("user", "u1", "facts"), ("user", "u1", "prefs")]
    assert await memory.list_namespaces(("user",), max_depth=2) == [("user", "u1"), ("user", "u2")]
    assert await memory.list_namespaces(suffix=("prefs",)) == [("user", "u1", "prefs")]


async def test_delete_removes_the_item_and_its_vector(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    await _seed(memory)
    assert await memory.delete(USER, "dog") is True
    assert await memory.get(USER, "dog") is None
    assert "dog" not in [h.key for h in await memory.search(USER, query="dog Rex")]
    assert await memory.delete(USER, "dog") is False


async def test_an_expired_item_is_neither_read_nor_found_and_sweep_removes_it(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    await memory.put(USER, "short", {"text": "a passing thought"}, ttl=0.0001)  # 6 ms
    await memory.put(USER, "long", {"text": "a lasting thought"}, ttl=60)
    deadline = asyncio.get_running_loop().time() + 5
    while await memory.get(USER, "short") is not None:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.005)
    assert [h.key for h in await memory.search(USER, query="thought")] == ["long"]
    assert await memory.sweep() == 1
    assert (await memory.get(USER, "long")) is not None


async def test_an_item_put_with_index_false_is_not_ranked_but_is_listed(memory_db: SQLStore) -> None:
    memory = await _memory(memory_db)
    await memory.put(USER, "secret-ish", {"text": "dog"}, index=False)
    assert await memory.search(USER, query="dog") == []
    assert [h.key for h in await memory.search(USER)] == ["secret-ish"]


@pytest.mark.parametrize("namespace", [[], "user.u1", ["user", ""], ["user", "a.b"], ["x"] * 11, ["user", 3]])
async def test_a_namespace_of_the_wrong_shape_is_refused(tmp_path: Any, namespace: Any) -> None:
    store = SQLStore(f"sqlite:///{tmp_path / 'm.db'}")
    memory = await _memory(store)
    with pytest.raises(MemoryInputError, match="namespace"):
        await memory.put(namespace, "k", {"text": "x"})
    assert await memory.search() == []
    await store.close()


async def test_a_value_too_large_is_refused_and_nothing_is_written(sqlite_db: SQLStore) -> None:
    memory = await _memory(sqlite_db)
    with pytest.raises(MemoryInputError, match=r"value is \d+ bytes as JSON; at most 65536"):
        await memory.put(USER, "big", {"text": "x" * 70_000})
    assert await memory.get(USER, "big") is None


async def test_a_value_that_is_not_an_object_is_refused(sqlite_db: SQLStore) -> None:
    memory = await _memory(sqlite_db)
    with pytest.raises(MemoryInputError, match="value must be a JSON object, not list"):
        await memory.put(USER, "k", [1, 2])  # type: ignore[arg-type]


async def test_a_bad_filter_names_the_field(sqlite_db: SQLStore) -> None:
    memory = await _memory(sqlite_db)
    with pytest.raises(MemoryInputError, match=r"filter on 'age': unknown operator '\$near'"):
        await memory.search(USER, filter={"age": {"$near": 3}})


async def test_a_filter_hook_that_refuses_leaves_nothing_written(sqlite_db: SQLStore) -> None:
    memory = await _memory(sqlite_db)

    def no_secrets(namespace: Any, key: str, value: dict[str, Any]) -> dict[str, Any]:
        if "password" in str(value).lower():
            raise MemoryRejected("values holding passwords are not kept")
        return value

    memory.add_filter(no_secrets)
    with pytest.raises(MemoryRejected, match="passwords are not kept"):
        await memory.put(USER, "pw", {"text": "my password is hunter2"})
    assert await memory.get(USER, "pw") is None


async def test_the_openai_embedder_speaks_to_v1_embeddings(memory_db: SQLStore) -> None:
    async with OpenAIStub() as stub:
        embedder = OpenAIEmbedder("text-embedding-3-small", base_url=stub.base_url, api_key="sk-test", dims=64)
        memory = await _memory(memory_db, embedder)
        await _seed(memory)
        hits = await memory.search(USER, query="where do I work?", limit=1)
        assert [h.key for h in hits] == ["job"]
        assert stub.embedding_requests[0]["model"] == "text-embedding-3-small"
        assert stub.embedding_requests[0]["dimensions"] == 64
        await embedder.aclose()


async def test_an_embedder_that_is_down_fails_the_put_and_writes_nothing(memory_db: SQLStore) -> None:
    async with OpenAIStub() as stub:
        embedder = OpenAIEmbedder("text-embedding-3-small", base_url=stub.base_url, api_key="sk-test")
        memory = await _memory(memory_db, embedder)
        stub.embeddings_down = True
        with pytest.raises(EmbedderError, match="answered 503"):
            await memory.put(USER, "dog", FACTS["dog"])
        with pytest.raises(EmbedderError, match="answered 503"):
            await memory.search(USER, query="dog")
        stub.embeddings_down = False
        assert await memory.get(USER, "dog") is None
        await embedder.aclose()


async def test_reembed_moves_every_item_to_the_new_embedder(memory_db: SQLStore) -> None:
    old = await _memory(memory_db, OfflineEmbedder(dims=64))
    await _seed(old)
    new = await _memory(memory_db, OfflineEmbedder(dims=128))
    assert await new.stale_count() == len(FACTS)
    assert await new.search(USER, query="dog") == []
    assert await new.reembed(batch=3) == len(FACTS)
    assert await new.stale_count() == 0
    assert [h.key for h in await new.search(USER, query="dog Rex", limit=1)] == ["dog"]
