"""Memory over HTTP: the LangGraph store client (``langgraph-sdk``) against a live server,
each user bound to their own namespaces, bad input as one clear 4xx, an embedder that is down
as a 503, and forgetting a user everywhere (every table read afterwards)."""

from __future__ import annotations

import json
import logging
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from server_fixtures import LiveServer, serve_app
from standardagents import Runtime
from standardagents.store import SQLStore
from standardagents.testing import OpenAIStub


@pytest.fixture
def live(project_dir: Path, tmp_path: Path) -> Iterator[LiveServer]:
    yield from serve_app(project_dir, f"sqlite:///{tmp_path / 'live.db'}")


async def _user(tmp_path: Path, name: str) -> tuple[str, str]:
    """A plain user with an API token, written to the live server's database."""
    store = SQLStore(f"sqlite:///{tmp_path / 'live.db'}")
    await store.open()
    try:
        user = await store.create_user(name)
        _, token = await store.create_api_token(user.id, "tests")
        return user.id, token
    finally:
        await store.close()


async def test_a_langgraph_store_client_puts_gets_searches_lists_and_deletes(live: LiveServer, tmp_path: Path) -> None:
    alice, token = await _user(tmp_path, "alice")
    async with get_client(url=f"{live.base_url}/api", api_key=None,
                          headers={"Authorization": f"Bearer {token}"}) as client:
        store = client.store
        ns = ["user", alice, "prefs"]
        await store.put_item(ns, key="food", value={"text": "Alice loves ramen with garlic"})
        await store.put_item(ns, key="car", value={"text": "Alice drives a green Volvo"})
        item = await store.get_item(ns, key="food")
        assert (item["namespace"], item["key"], item["value"]) == (ns, "food", {"text": "Alice loves ramen with garlic"})
        assert item["created_at"].endswith("Z") and item["updated_at"] == item["created_at"]
        found = await store.search_items(["user", alice], query="which ramen does Alice love?", limit=1)
        assert [(i["key"], i["score"] > 0) for i in found["items"]] == [("food", True)]
        assert await store.list_namespaces(prefix=["user", alice]) == {"namespaces": [ns]}
        await store.delete_item(ns, key="food")
        with pytest.raises(httpx.HTTPStatusError) as missing:
            await store.get_item(ns, key="food")
        assert missing.value.response.status_code == 404


async def test_a_user_cannot_reach_another_users_namespace(live: LiveServer, tmp_path: Path) -> None:
    alice, token = await _user(tmp_path, "alice")
    bob, _ = await _user(tmp_path, "bob")
    async with httpx.AsyncClient(base_url=f"{live.base_url}/api", headers={"Authorization": f"Bearer {token}"}) as c:
        r = await c.put("/store/items", json={"namespace": ["user", bob, "notes"], "key": "k", "value": {"text": "x"}})
        assert r.status_code == 403
        assert r.json()["error"]["message"] == (f"namespace ['user', '{bob}', 'notes'] is not yours: your memory lives "
                                                f"under [\"user\", '{alice}', ...]")
        r = await c.post("/store/items/search", json={"namespace_prefix": ["user", bob]})
        assert r.status_code == 403


async def test_a_search_without_a_prefix_finds_only_the_callers_items(live: LiveServer, tmp_path: Path) -> None:
    alice, token = await _user(tmp_path, "alice")
    admin = {"Authorization": f"Bearer {live.token}"}
    async with httpx.AsyncClient(base_url=f"{live.base_url}/api") as c:
        await c.put("/store/items", headers=admin, json={"namespace": ["user", "someone", "n"], "key": "k", "value": {"a": 1}})
        await c.put("/store/items", headers={"Authorization": f"Bearer {token}"},
                    json={"namespace": ["user", alice, "n"], "key": "k", "value": {"a": 2}})
        mine = await c.post("/store/items/search", headers={"Authorization": f"Bearer {token}"}, json={})
        everyone = await c.post("/store/items/search", headers=admin, json={})
    assert [i["value"] for i in mine.json()["items"]] == [{"a": 2}]
    assert sorted(i["value"]["a"] for i in everyone.json()["items"]) == [1, 2]


@pytest.mark.parametrize(("body", "message"), [
    ({"namespace": "user.x", "key": "k", "value": {}}, "namespace must be a list of strings"),
    ({"namespace": [], "key": "k", "value": {}}, "namespace must have at least one label"),
    ({"namespace": ["a.b"], "key": "k", "value": {}}, "namespace[0] 'a.b' contains a '.'"),
    ({"namespace": ["n"], "key": "", "value": {}}, "key must be a non-empty string"),
    ({"namespace": ["n"], "key": "k", "value": [1]}, "value must be a JSON object, not list"),
    ({"namespace": ["n"], "key": "k", "value": {"t": "x" * 70_000}}, "at most 65536 bytes"),
    ({"namespace": ["n"], "key": "k", "value": {}, "ttl": -1}, "ttl must be a positive number of minutes"),
])
async def test_a_bad_put_is_one_422_naming_the_field_and_writes_nothing(live: LiveServer, body: dict[str, Any],
                                                                       message: str) -> None:
    async with httpx.AsyncClient(base_url=f"{live.base_url}/api", headers={"Authorization": f"Bearer {live.token}"}) as c:
        r = await c.put("/store/items", content=json.dumps(body), headers={"content-type": "application/json"})
        assert r.status_code == 422
        assert message in r.json()["error"]["message"]
        listed = await c.post("/store/items/search", json={})
    assert listed.json() == {"items": []}


async def test_a_search_with_an_embedder_that_is_down_is_503_and_a_put_writes_nothing(
        project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with OpenAIStub() as stub:
        monkeypatch.setenv("STANDARDAGENTS_MEMORY_EMBEDDER", json.dumps(
            {"provider": "openai", "model": "text-embedding-3-small", "baseUrl": stub.base_url}))
        stub.embeddings_down = True
        for live in serve_app(project_dir, f"sqlite:///{tmp_path / 'live.db'}"):
            async with httpx.AsyncClient(base_url=f"{live.base_url}/api",
                                         headers={"Authorization": f"Bearer {live.token}"}) as c:
                r = await c.put("/store/items", json={"namespace": ["n"], "key": "k", "value": {"text": "hello"}})
                assert (r.status_code, r.json()["error"]["code"]) == (503, "embedder_unavailable")
                assert "answered 503" in r.json()["error"]["message"]
                r = await c.post("/store/items/search", json={"query": "hello"})
                assert r.status_code == 503
                r = await c.post("/store/items/search", json={})
                assert r.json() == {"items": []}


def _rows_naming(db: Path, needles: list[str]) -> dict[str, int]:
    """Per table, the rows in which any column's text holds one of ``needles``."""
    out: dict[str, int] = {}
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                text = " ".join(v.decode(errors="replace") if isinstance(v, bytes) else str(v) for v in row)
                if any(n in text for n in needles):
                    out[table] = out.get(table, 0) + 1
    return out


async def test_forgetting_a_user_removes_every_row_of_theirs_and_keeps_others(
        runtime: Runtime, client: httpx.AsyncClient, actors: Any, tmp_path: Path) -> None:
    alice, bob = actors.ids["alice"], actors.ids["bob"]
    threads: dict[str, list[str]] = {alice: [], bob: []}
    for user in (alice, bob):
        for text in ("Hello there", "What time is it?"):
            result = await runtime.run("helper", text, user_id=user)
            threads[user].append(result.thread_id)
        name = "alice" if user == alice else "bob"
        r = await client.put("/api/store/items", headers=actors.auth(name),
                             json={"namespace": ["user", user, "facts"], "key": "k", "value": {"text": f"{name} fact"}})
        assert r.status_code == 204
        await runtime.store.set_user_value(user, "theme", "dark")
        await runtime.store.write_file(threads[user][0], "notes.txt", b"private notes")
    forbidden = await client.delete(f"/api/users/{alice}/data", headers=actors.auth("bob"))
    assert forbidden.status_code == 403
    r = await client.delete(f"/api/users/{alice}/data", headers=actors.auth("root"))
    assert r.status_code == 200
    report = r.json()
    assert sorted(report["threads"]) == sorted(threads[alice])
    assert report["removed"]["threads"] == 2 and report["removed"]["memory_items"] == 1
    assert report["removed"]["memory_vectors"] == 1 and report["removed"]["user_values"] == 1
    assert report["removed"]["thread_files"] == 1 and report["removed"]["messages"] >= 4
    db = tmp_path / "server.db"
    # the account itself (users, api_tokens) stays; nothing else names alice or her threads
    assert _rows_naming(db, [alice, *threads[alice]]) == {"users": 1, "api_tokens": 1}
    assert _rows_naming(db, [bob])["threads"] == 2
    assert _rows_naming(db, threads[bob])["messages"] >= 4


async def test_a_server_whose_postgresql_lacks_pgvector_says_so_at_start_up(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from server_fixtures import write_project
    from store_fixtures import _pg_problem, postgres_url

    url = postgres_url()
    if await _pg_problem(url) is not None:
        pytest.skip(f"PostgreSQL not reachable at {url}")
    project = write_project(tmp_path / "p", {
        "agents/agents/keeper.py": "from standardagents import define_agent\n"
                                   "keeper = define_agent(name='keeper', side_a={'prompt': 'keeper_prompt'}, memory={})\n",
        "agents/prompts/keeper_prompt.py": "from standardagents import define_prompt\n"
                                           "keeper_prompt = define_prompt(name='keeper_prompt', prompt='x')\n",
    })
    schema = f"sa_memstart_{uuid.uuid4().hex[:10]}"
    caplog.set_level(logging.WARNING, logger="standardagents.memory")
    try:
        for _live in serve_app(project, url, schema=schema):
            warnings = [r.getMessage() for r in caplog.records if r.name == "standardagents.memory"]
            assert warnings == ["memory: this PostgreSQL has no pgvector extension (CREATE EXTENSION vector); "
                                "semantic search uses an exact scan in Python"]
    finally:
        import asyncpg

        conn = await asyncpg.connect(url)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()
