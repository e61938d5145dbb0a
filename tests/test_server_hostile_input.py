"""Hostile input over HTTP, on SQLite and PostgreSQL: every request below gets one clear 4xx,
stores nothing and breaks nothing; a database's own error text never reaches a client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from server_fixtures import write_project
from standardagents import Runtime
from standardagents.server import create_app
from store_fixtures import Backend

API = "/api"

EXTRA = {
    "agents/api/echo.post.py": """
        from standardagents import define_controller

        @define_controller
        async def echo(ctx):
            return {"got": await ctx.req.json()}
    """,
    "agents/api/note.post.py": """
        from standardagents import define_thread_endpoint

        @define_thread_endpoint
        async def note(req, state, params):
            body = await req.json()
            await state.runtime.store.update_thread(state.thread_id, metadata={"note": body})
            return {"stored": body}
    """,
    "agents/api/dup.post.py": """
        from standardagents import define_controller

        @define_controller
        async def dup(ctx):
            store = ctx.env["store"]
            await store.create_user("first", user_id="same-id")
            await store.create_user("second", user_id="same-id")
            return "unreachable"
    """,
}

JSON = {"Content-Type": "application/json"}


class Api:
    """The app on one backend, with an owner (alice) and an admin (root)."""

    def __init__(self, client: httpx.AsyncClient, runtime: Runtime, backend: Backend, tokens: dict[str, str]) -> None:
        self.client, self.runtime, self.backend, self.tokens = client, runtime, backend, tokens

    def auth(self, who: str = "alice", extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}", **(extra or {})}

    async def raw(self, method: str, url: str, body: str | bytes, who: str = "alice") -> httpx.Response:
        return await self.client.request(method, url, content=body, headers=self.auth(who, JSON))

    async def thread(self) -> str:
        r = await self.client.post(f"{API}/threads", json={"agent": "helper"}, headers=self.auth())
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    async def thread_count(self) -> int:
        return len(await self.runtime.store.list_threads(limit=500))


@pytest.fixture
async def api(backend: Backend, tmp_path: Path) -> AsyncIterator[Api]:
    root = write_project(tmp_path / "project", EXTRA)
    rt = await Runtime.open(root, store=backend.new_store())
    tokens = {}
    for name, admin in (("alice", False), ("root", True)):
        user = await rt.store.create_user(name, is_admin=admin)
        tokens[name] = (await rt.store.create_api_token(user.id, name))[1]
    app = create_app(rt, close_runtime=False)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            yield Api(client, rt, backend, tokens)
    finally:
        await rt.aclose()


def _assert_400(r: httpx.Response, *words: str) -> None:
    assert r.status_code == 400, (r.status_code, r.text)
    error = r.json()["error"]
    assert error["code"] in ("bad_request", "invalid_request_error") or error.get("type") == "invalid_request_error"
    for word in words:
        assert word in error["message"], error["message"]


# non-finite numbers ----------------------------------------------------------------------------
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999"]


@pytest.mark.parametrize("number", NON_FINITE)
async def test_a_non_finite_number_creating_a_thread_is_400_and_stores_nothing(api: Api, number: str) -> None:
    r = await api.raw("POST", f"{API}/threads", f'{{"agent":"helper","metadata":{{"a":{number}}}}}')
    _assert_400(r, "finite")
    assert await api.thread_count() == 0
    listed = await api.client.get(f"{API}/threads", headers=api.auth())
    assert listed.status_code == 200 and listed.json()["threads"] == []


async def test_non_finite_numbers_are_refused_on_every_json_route(api: Api) -> None:
    tid = await api.thread()
    routes = [
        ("POST", f"{API}/threads/{tid}/messages", '{"content":"hi","metadata":{"x":NaN}}'),
        ("POST", f"{API}/threads/{tid}/approvals", '{"token":"t","approved":true,"reason":Infinity}'),
        ("PUT", f"{API}/users/me/values/k", '{"value":NaN}'),
        ("POST", "/v1/chat/completions", '{"model":"helper","temperature":NaN,"messages":[{"role":"user","content":"hi"}]}'),
        ("POST", f"{API}/echo", '{"a":-Infinity}'),
        ("POST", f"{API}/threads/{tid}/note", '{"a":NaN}'),
    ]
    for method, url, body in routes:
        _assert_400(await api.raw(method, url, body))
    assert await api.runtime.store.list_messages(tid) == []
    assert await api.runtime.store.list_user_values((await api.runtime.store.list_users())[0].id) == {}
    assert (await api.runtime.store.get_thread(tid)).metadata == {}  # type: ignore[union-attr]
    assert await api.thread_count() == 1


async def test_listing_survives_a_thread_row_already_holding_nan(api: Api) -> None:
    if api.backend.name != "sqlite":
        pytest.skip("PostgreSQL's JSON type cannot hold NaN, so no such row can exist there")
    alice = (await api.client.get(f"{API}/users/me", headers=api.auth())).json()["id"]
    await api.backend.fetch(
        "INSERT INTO threads (id, agent, user_id, title, metadata, created_at, updated_at) "
        "VALUES ('thr_nan', 'helper', ?, 'old', '{\"a\": NaN, \"b\": [Infinity, 1]}', 1, 1)", alice)
    for who in ("alice", "root"):
        r = await api.client.get(f"{API}/threads", headers=api.auth(who))
        assert r.status_code == 200, r.text
        (thread,) = r.json()["threads"]
        assert thread["metadata"] == {"a": None, "b": [None, 1]}
    one = await api.client.get(f"{API}/threads/thr_nan", headers=api.auth())
    assert one.status_code == 200 and one.json()["metadata"]["a"] is None


# nesting, windows, content shapes, Unicode -----------------------------------------------------------------
async def test_json_nested_fifty_thousand_levels_is_400(api: Api) -> None:
    deep = "[" * 50_000 + "]" * 50_000
    tid = await api.thread()
    for method, url, body in (
        ("POST", f"{API}/threads", '{"agent":"helper","metadata":{"a":' + deep + "}}"),
        ("POST", f"{API}/threads/{tid}/messages", '{"content":"hi","parts":' + deep + "}"),
        ("POST", "/v1/chat/completions", '{"model":"helper","messages":' + deep + "}"),
        ("POST", f"{API}/threads/{tid}/note", deep),
    ):
        _assert_400(await api.raw(method, url, body), "nest")
    moderately = '{"agent":"helper","metadata":{"a":' + "[" * 200 + "]" * 200 + "}}"
    _assert_400(await api.raw("POST", f"{API}/threads", moderately), "nest")
    assert await api.thread_count() == 1
    assert await api.runtime.store.list_messages(tid) == []


async def test_offset_and_limit_beyond_64_bits_are_400(api: Api) -> None:
    tid = await api.thread()
    for url in (f"{API}/threads", f"{API}/threads/{tid}/messages", f"{API}/threads/{tid}/logs"):
        for query in ("offset=9223372036854775808", "offset=-9223372036854775809", "limit=99999999999999999999"):
            r = await api.client.get(f"{url}?{query}", headers=api.auth())
            _assert_400(r, "64-bit")
        edge = await api.client.get(f"{url}?offset=9223372036854775807", headers=api.auth())
        assert edge.status_code == 200, edge.text


async def test_a_lone_surrogate_in_content_is_400_and_nothing_is_stored(api: Api) -> None:
    tid = await api.thread()
    r = await api.raw("POST", f"{API}/threads/{tid}/messages?wait=true", '{"content":"hello \\ud800 there"}')
    _assert_400(r, "surrogate")
    r = await api.raw("POST", f"{API}/threads", '{"agent":"helper","title":"\\udfff"}')
    _assert_400(r, "surrogate")
    assert await api.runtime.store.list_messages(tid) == []
    assert await api.thread_count() == 1
    after = await api.client.post(f"{API}/threads/{tid}/messages?wait=true", json={"content": "add 1 and 2"},
                                  headers=api.auth())
    assert after.status_code == 200 and after.json()["outcome"] == "response"


# NUL characters and sizes ----------------------------------------------------------------------------
async def test_nul_characters_are_400_wherever_they_come(api: Api) -> None:
    tid = await api.thread()
    _assert_400(await api.raw("POST", f"{API}/threads", '{"agent":"helper","title":"a\\u0000b"}'), "NUL")
    _assert_400(await api.raw("POST", f"{API}/threads/{tid}/messages", '{"content":"a\\u0000b"}'), "NUL")
    _assert_400(await api.raw("PUT", f"{API}/users/me/values/k", '{"value":{"x":"\\u0000"}}'), "NUL")
    for method, url in (("GET", f"{API}/threads/thr%00x"), ("GET", f"{API}/threads/thr%00x/messages"),
                        ("GET", f"{API}/threads/{tid}/files/a%00b.txt"), ("PUT", f"{API}/threads/{tid}/files/a%00b.txt"),
                        ("PUT", f"{API}/users/me/values/k%00y"), ("GET", f"{API}/users/me/values/k%00y"),
                        ("GET", f"{API}/threads?agent=help%00er"), ("GET", f"{API}/threads/{tid}/files?prefix=%00")):
        r = await api.client.request(method, url, content=b'{"value": 1}', headers=api.auth(extra=JSON))
        _assert_400(r, "NUL")
    assert await api.thread_count() == 1
    assert await api.runtime.store.list_files(tid) == []
    assert await api.runtime.store.list_messages(tid) == []


async def test_a_file_path_over_1024_characters_is_400_and_not_stored(api: Api) -> None:
    tid = await api.thread()
    long_path = "d/" * 300 + "x" * 500
    r = await api.client.put(f"{API}/threads/{tid}/files/{long_path}", content=b"data", headers=api.auth())
    _assert_400(r, "1024")
    r = await api.client.get(f"{API}/threads/{tid}/files/{long_path}", headers=api.auth())
    _assert_400(r, "1024")
    assert await api.runtime.store.list_files(tid) == []
    ok = await api.client.put(f"{API}/threads/{tid}/files/{'y' * 1000}", content=b"data", headers=api.auth())
    assert ok.status_code == 201, ok.text


# database errors -------------------------------------------------------------------------------
async def test_a_database_error_is_a_generic_500_without_the_database_text(api: Api, caplog: Any) -> None:
    r = await api.client.post(f"{API}/dup", headers=api.auth())
    assert r.status_code == 500
    message = r.json()["error"]["message"]
    assert message == "the database failed while handling this request; see the server log"
    for leak in ("UNIQUE", "unique", "duplicate", "users", "same-id", "constraint"):
        assert leak not in r.text
    assert any("failed" in rec.getMessage() for rec in caplog.records)


async def test_an_unstorable_user_id_is_400_not_the_database_text(api: Api) -> None:
    r = await api.client.post(f"{API}/threads", json={"agent": "helper", "user_id": "u" * 100},
                              headers=api.auth("root"))
    _assert_400(r, "64")
    assert "character varying" not in r.text
    assert await api.thread_count() == 0


# the OpenAI door -------------------------------------------------------------------------------
def _openai(api: Api) -> openai.AsyncOpenAI:
    http = httpx.AsyncClient(transport=api.client._transport, base_url="http://test")
    return openai.AsyncOpenAI(base_url="http://test/v1", api_key=api.tokens["alice"], http_client=http, max_retries=0)


async def test_a_text_part_whose_text_is_not_a_string_is_400(api: Api) -> None:
    async with _openai(api) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="helper", messages=[{"role": "user", "content": [{"type": "text", "text": 5}]}])  # type: ignore[list-item]
    assert "messages[0].content[0].text" in str(caught.value)
    assert await api.thread_count() == 0


async def test_a_non_primary_agent_does_not_answer_through_the_openai_door(api: Api) -> None:
    async with _openai(api) as client:
        listed = [m.id for m in (await client.models.list()).data]
        with pytest.raises(openai.NotFoundError) as caught:
            await client.chat.completions.create(model="internal", messages=[{"role": "user", "content": "hi"}])
    assert "internal" not in listed
    assert caught.value.code == "model_not_found"
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "invalid_request_error"
    assert await api.thread_count() == 0
    internal = await api.runtime.create_thread("internal", user_id=(await api.runtime.store.list_users())[0].id)
    async with _openai(api) as client:
        with pytest.raises(openai.NotFoundError):
            await client.chat.completions.create(model="internal", messages=[{"role": "user", "content": "hi"}],
                                                 extra_body={"thread": internal.id})
    assert await api.runtime.store.list_messages(internal.id) == []


async def test_the_openai_door_still_answers_a_primary_agent(api: Api) -> None:
    async with _openai(api) as client:
        completion = await client.chat.completions.create(
            model="helper", messages=[{"role": "user", "content": [{"type": "text", "text": "add 2 and 3"}]}])
    assert completion.choices[0].message.content


def test_nothing_here_is_json_that_the_reader_would_take(tmp_path: Path) -> None:
    from standardagents.server.errors import ApiError, parse_json

    for text in ('{"a": NaN}', '[Infinity]', '{"a": 1e999}', '"\\ud800"', '{"\\u0000": 1}'):
        with pytest.raises(ApiError) as caught:
            parse_json(text)
        assert caught.value.status_code == 400
    assert parse_json('{"a": [1.5, "x\\u00e9"]}') == {"a": [1.5, "x\u00e9"]}
    assert json.loads(json.dumps(parse_json('"a\\u0000b"', allow_nul=True))) == "a\x00b"
