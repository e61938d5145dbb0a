"""User endpoints: the project's own routes under /api/users/me, with the caller's UserState.

The endpoints are the files docs/user-endpoints.md shows, loaded from a project folder; the
requests carry real API tokens (in-process through httpx's ASGI transport, and over a real
uvicorn server for the live stream)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from httpx_sse import aconnect_sse

from server_fixtures import LiveServer, serve_app, write_project
from standardagents import DefinitionError, ProjectError, Runtime, define_user_endpoint
from standardagents.definitions import (
    UserEndpointDefinition,
    defineUserEndpoint,
    is_user_endpoint,
    isUserEndpoint,
)
from standardagents.definitions.user_endpoint import routes_collide
from standardagents.project import load_project, validate_project
from standardagents.server import create_app
from standardagents.server.user_endpoints import user_endpoints_of
from standardagents.server.users import UserState, UserThreadSummary, UserValueEntry
from test_definitions_typing import MYPY_CACHE  # one warm mypy cache for the typing tests

DOCS = Path(__file__).resolve().parent.parent / "docs" / "user-endpoints.md"
API = "/api"


def _docs_files() -> dict[str, str]:
    """The project files docs/user-endpoints.md shows (each block starts with its path)."""
    found = re.findall(r"```python\n# (agents/[^\n]+\.py)\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert [path for path, _ in found] == ["agents/api/preferences/[key].py", "agents/api/preferences/index.get.py",
                                           "agents/api/dashboard.get.py", "agents/hooks/theme_changed.py"]
    return dict(found)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "project", _docs_files())


@pytest.fixture
async def rt(project: Path, tmp_path: Path) -> AsyncIterator[Runtime]:
    runtime = await Runtime.open(project, database_url=f"sqlite+aiosqlite:///{tmp_path / 'users.db'}")
    try:
        yield runtime
    finally:
        await runtime.aclose()


class Users:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.ids: dict[str, str] = {}
        self.tokens: dict[str, str] = {}

    async def add(self, name: str, *, admin: bool = False) -> None:
        user = await self.rt.store.create_user(name, is_admin=admin)
        _, self.tokens[name] = await self.rt.store.create_api_token(user.id, name)
        self.ids[name] = user.id

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"}


@pytest.fixture
async def users(rt: Runtime) -> Users:
    made = Users(rt)
    await made.add("alice")
    await made.add("bob")
    return made


@pytest.fixture
async def client(rt: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(rt, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        yield c


# values --------------------------------------------------------------------------------------
async def test_a_user_endpoint_writes_a_value_and_the_user_value_changed_hook_fires(
        client: httpx.AsyncClient, users: Users) -> None:
    put = await client.put(f"{API}/users/me/preferences/theme", json={"value": "dark"}, headers=users.auth("alice"))
    hooked = await client.get(f"{API}/users/me/values/changed", headers=users.auth("alice"))  # server_fixtures' on_value
    assert (put.status_code, put.json()) == (200, {"key": "theme", "value": "dark"})
    assert hooked.json() == {"key": "changed", "value": "pref:theme"}


async def test_a_user_endpoint_reads_back_the_callers_value(client: httpx.AsyncClient, users: Users) -> None:
    await client.put(f"{API}/users/me/preferences/theme", json={"value": "dark"}, headers=users.auth("alice"))
    r = await client.get(f"{API}/users/me/preferences/theme", headers=users.auth("alice"))
    assert r.json() == {"key": "theme", "value": "dark"}


async def test_each_caller_reaches_only_their_own_values(client: httpx.AsyncClient, users: Users) -> None:
    await client.put(f"{API}/users/me/preferences/theme", json={"value": "dark"}, headers=users.auth("alice"))
    r = await client.get(f"{API}/users/me/preferences/theme", headers=users.auth("bob"))
    assert r.json() == {"key": "theme", "value": None}


async def test_a_user_endpoint_deletes_a_value(client: httpx.AsyncClient, users: Users) -> None:
    await client.put(f"{API}/users/me/preferences/theme", json={"value": "dark"}, headers=users.auth("alice"))
    deleted = await client.delete(f"{API}/users/me/preferences/theme", headers=users.auth("alice"))
    after = await client.get(f"{API}/users/me/values/pref:theme", headers=users.auth("alice"))
    assert (deleted.status_code, after.status_code) == (204, 404)


async def test_values_are_listed_by_prefix_and_limit_with_the_identity(client: httpx.AsyncClient, users: Users) -> None:
    for key, value in (("theme", "dark"), ("lang", "fr"), ("font", 14)):
        await client.put(f"{API}/users/me/preferences/{key}", json={"value": value}, headers=users.auth("alice"))
    await client.put(f"{API}/users/me/values/other", json={"value": 1}, headers=users.auth("alice"))
    r = await client.get(f"{API}/users/me/preferences?limit=2", headers=users.auth("alice"))
    assert r.json() == {"user": {"id": users.ids["alice"], "name": "alice", "email": None, "isAdmin": False},
                        "preferences": {"font": 14, "lang": "fr"}}


async def test_list_values_returns_entries_in_key_order(rt: Runtime, users: Users) -> None:
    app = create_app(rt, close_runtime=False)
    user = UserState(app.state.server.hub, await rt.store.get_user(users.ids["alice"]))
    for key in ("b:2", "a:1", "b:1"):
        await user.set_value(key, key.upper())
    assert await user.list_values(prefix="b:") == [UserValueEntry("b:1", "B:1"), UserValueEntry("b:2", "B:2")]


# threads -------------------------------------------------------------------------------------
async def test_a_user_endpoint_lists_the_callers_threads_as_summaries(
        rt: Runtime, client: httpx.AsyncClient, users: Users) -> None:
    done = await rt.run("helper", "add 2 and 3", user_id=users.ids["alice"])
    await rt.create_thread("internal", user_id=users.ids["alice"], title="quiet")
    await rt.create_thread("helper", user_id=users.ids["bob"])
    r = await client.get(f"{API}/users/me/dashboard?agent=helper", headers=users.auth("alice"))
    stored = await rt.store.get_thread(done.thread_id)
    assert stored is not None
    shown = await rt.store.count_messages(done.thread_id, include_silent=False)
    assert r.json() == {"name": "alice", "admin": False, "threads": [
        {"id": done.thread_id, "agent": "helper", "title": stored.title, "createdAt": stored.created_at,
         "updatedAt": stored.updated_at, "messageCount": shown, "running": False, "metadata": {}}]}


async def test_list_threads_filters_by_metadata_with_offset_and_limit(rt: Runtime, users: Users) -> None:
    alice = users.ids["alice"]
    for i, p in enumerate(["x", "y", "x", "x", "y"]):
        await rt.create_thread("helper", user_id=alice, metadata={"project": p, "n": i})
    app = create_app(rt, close_runtime=False)
    user = UserState(app.state.server.hub, await rt.store.get_user(alice))
    listed = await user.list_threads(metadata={"project": "x"}, offset=1, limit=1)
    in_order = await rt.store.list_threads(user_id=alice, top_level=True)  # the store's newest-first order
    assert [s.id for s in listed] == [t.id for t in in_order if t.metadata["project"] == "x"][1:2]
    assert isinstance(listed[0], UserThreadSummary)


# access --------------------------------------------------------------------------------------
async def test_a_user_endpoint_without_a_token_is_401(client: httpx.AsyncClient) -> None:
    r = await client.get(f"{API}/users/me/preferences")
    assert r.status_code == 401


async def test_a_user_endpoint_with_a_revoked_token_is_401(rt: Runtime, client: httpx.AsyncClient, users: Users) -> None:
    (token,) = await rt.store.list_api_tokens(users.ids["alice"])
    await rt.store.revoke_api_token(token.id)
    r = await client.get(f"{API}/users/me/preferences", headers=users.auth("alice"))
    assert r.status_code == 401


async def test_a_dev_server_serves_its_local_user_without_a_token(rt: Runtime) -> None:
    app = create_app(rt, dev=True, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        r = await c.get(f"{API}/users/me/preferences")
    assert r.json()["user"] == {"id": "local", "name": "local", "email": None, "isAdmin": True}


def test_public_access_is_refused_when_a_user_endpoint_is_defined() -> None:
    with pytest.raises(DefinitionError) as raised:
        define_user_endpoint(lambda request, user: None, access="public")  # type: ignore[arg-type]
    assert raised.value.problems == [("access", "a user endpoint serves the caller's own user scope (/users/me), so it "
                                                "needs a caller: 'public' is not allowed (use define_controller for a "
                                                "route anonymous callers may use)")]


def test_a_public_user_endpoint_file_is_a_load_error_naming_it(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {"agents/api/open.get.py": """
        from standardagents import define_user_endpoint
        open_ = define_user_endpoint(lambda request: "hi", {"access": "public"})
    """})
    problems = [str(p) for p in validate_project(root) if not p.warning]
    assert problems == ["agents/api/open.get.py: access: a user endpoint serves the caller's own user scope "
                        "(/users/me), so it needs a caller: 'public' is not allowed (use define_controller for a "
                        "route anonymous callers may use)"]


def test_the_specs_names_are_the_same_functions() -> None:
    endpoint = defineUserEndpoint(lambda request: "hi")
    assert (defineUserEndpoint, isUserEndpoint) == (define_user_endpoint, is_user_endpoint)
    assert (isinstance(endpoint, UserEndpointDefinition), is_user_endpoint(endpoint), endpoint.access) == (
        True, True, "authenticated")


# routing -------------------------------------------------------------------------------------
def test_two_user_endpoints_on_one_route_are_a_load_error_naming_both_files(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {**_docs_files(), "agents/api/preferences/[name].py": """
        from standardagents import define_user_endpoint
        other = define_user_endpoint(lambda request: "other")
    """})
    with pytest.raises(ProjectError) as raised:
        load_project(root)
    assert raised.value.problems == [(
        "agents/api/preferences/[name].py",
        "user endpoint 'preferences/[name]' has the same route as 'preferences/[key]' "
        "(defined in agents/api/preferences/[key].py): rename or remove one")]


@pytest.mark.parametrize(("a", "b", "collide"), [
    ("status.get", "status/index.get", True), ("status", "status.get", True), ("status.get", "status.post", False),
    ("items/[id]", "items/[key].delete", True), ("items/[id]", "items/[*]", False),
])
def test_which_endpoint_keys_share_a_route(a: str, b: str, collide: bool) -> None:
    assert routes_collide(a, b) is collide


async def test_a_user_endpoint_a_built_in_route_hides_is_reported(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {"agents/api/values.get.py": """
        from standardagents import define_user_endpoint
        values = define_user_endpoint(lambda request: "never")
    """})
    rt = await Runtime.open(root, database_url=f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    try:
        app = create_app(rt, close_runtime=False)
        assert user_endpoints_of(app.state.server).collisions == [
            "user endpoint 'values.get' (the project) is hidden by the built-in route GET /api/users/me/values: "
            "rename or move the endpoint"]
    finally:
        await rt.aclose()


async def test_a_path_no_user_endpoint_answers_is_404(client: httpx.AsyncClient, users: Users) -> None:
    r = await client.get(f"{API}/users/me/nothing/here", headers=users.auth("alice"))
    assert (r.status_code, r.json()["error"]["message"]) == (404, "no route /api/users/me/nothing/here")


async def test_a_method_the_user_endpoint_does_not_take_is_405(client: httpx.AsyncClient, users: Users) -> None:
    r = await client.post(f"{API}/users/me/dashboard", headers=users.auth("alice"))
    assert r.status_code == 405


async def test_a_controller_under_users_me_is_still_served(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {"agents/api/users/me/legacy.get.py": """
        from standardagents import define_controller
        legacy = define_controller(lambda ctx: {"controller": ctx.params, "caller": ctx.caller.id}, access="authenticated")
    """})
    rt = await Runtime.open(root, database_url=f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    try:
        made = Users(rt)
        await made.add("carol")
        app = create_app(rt, close_runtime=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
            r = await c.get(f"{API}/users/me/legacy", headers=made.auth("carol"))
    finally:
        await rt.aclose()
    assert r.json() == {"controller": {}, "caller": made.ids["carol"]}


# packed user endpoints -----------------------------------------------------------------------
PACKED = {
    "agents/packed/acme/__init__.py": """
        async def _status():
            from standardagents import define_user_endpoint

            @define_user_endpoint
            async def status(request, user, params):
                return {"from": "acme", "user": user.name, "package": status_package()}

            return status


        def status_package():
            return __meta["packageId"]


        userEndpoints = {"acme/status.get": _status}
        __meta = {"packageId": "standardagent-acme", "version": "1.0.0", "entryAgents": [], "packedAt": 1705012800000}
    """,
}


async def test_a_packed_user_endpoint_is_served_under_users_me(project: Path, tmp_path: Path) -> None:
    write_project(project, PACKED)
    rt = await Runtime.open(project, database_url=f"sqlite+aiosqlite:///{tmp_path / 'packed.db'}")
    try:
        made = Users(rt)
        await made.add("dora")
        app = create_app(rt, close_runtime=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
            r = await c.get(f"{API}/users/me/acme/status", headers=made.auth("dora"))
        definition = await rt.registry.aget("user_endpoints", "acme/status.get", "standardagent-acme")
    finally:
        await rt.aclose()
    assert r.json() == {"from": "acme", "user": "dora", "package": "standardagent-acme"}
    assert definition.package["packageId"] == "standardagent-acme"


def test_a_packed_user_endpoint_on_a_project_route_is_reported_naming_both(project: Path) -> None:
    write_project(project, {"agents/packed/acme/__init__.py": PACKED["agents/packed/acme/__init__.py"].replace(
        '"acme/status.get"', '"preferences/[id].get"')})
    problems = [str(p) for p in validate_project(project) if not p.warning]
    assert problems == ["package standardagent-acme: user endpoint 'preferences/[id].get' has the same route as the "
                        "user endpoint 'preferences/[key]' of the project (rename one: both would mount at the same "
                        "path)"]


# the live stream, over a real server -------------------------------------------------------
@pytest.fixture
def live(project: Path, tmp_path: Path) -> Iterator[LiveServer]:
    yield from serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'live.db'}")


async def test_a_value_written_by_a_user_endpoint_reaches_the_users_stream_through_the_hook(live: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers, timeout=20) as c:
        async with aconnect_sse(c, "GET", f"{API}/users/me/stream") as source:
            events = source.aiter_sse()
            assert json.loads((await anext(events)).data)["type"] == "connected"
            r = await c.put(f"{API}/users/me/preferences/theme", json={"value": "dark"})
            assert r.status_code == 200
            themed = []
            async for sse in events:
                event = json.loads(sse.data)
                if event["type"] == "theme_changed":
                    themed.append(event["data"])
                    break
    assert themed == [{"theme": "dark"}]


async def test_user_state_stream_carries_the_users_events(rt: Runtime, users: Users) -> None:
    app = create_app(rt, close_runtime=False)
    hub = app.state.server.hub
    user = UserState(hub, await rt.store.get_user(users.ids["alice"]))
    async with user.stream() as events:
        attached = len(user.clients)
        user.emit("hello", {"n": 1})
        seen = []
        async for event in events:  # the attach hooks' value changes come first
            seen.append(event)
            if event.type == "hello":
                break
    assert (attached, seen[-1].data, user.clients) == (1, {"n": 1}, [])
    assert [e.data["key"] for e in seen[:-1]] == ["attached", "changed"]


# typing --------------------------------------------------------------------------------------
TYPED = '''
from typing import Any

from starlette.requests import Request

from standardagents import define_user_endpoint
from standardagents.server.users import UserState


@define_user_endpoint(access="public")  # E: define_user_endpoint
async def anyone(request: Request, user: UserState) -> Any:
    return None


@define_user_endpoint
async def mine(request: Request, user: UserState) -> Any:
    await user.list_values(prefx="pref:")  # E: "prefx"
    await user.list_threads(agnt="helper")  # E: "agnt"
    await user.list_threads(agent=None, metadata={"project": "x"}, top_level=False, limit=5, offset=0)
    return [entry.to_dict() for entry in await user.list_values(prefix="pref:", limit=5)]
'''


def test_a_type_checker_flags_a_public_user_endpoint_and_misspelt_options(tmp_path: Path) -> None:
    (tmp_path / "typed.py").write_text(TYPED)
    for rel, text in _docs_files().items():
        target = tmp_path / "docs_project" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "mypy", "--explicit-package-bases", "--no-error-summary",
                           "--hide-error-context", "--no-pretty", "--cache-dir", str(MYPY_CACHE),
                           "typed.py", "docs_project"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    errors: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        found = re.match(r"^(.+?\.py):(\d+): error: (.*)$", line)
        if found:
            errors.setdefault(f"{found[1]}:{found[2]}", []).append(found[3])
    expected = {f"typed.py:{n}": marker for n, text in enumerate(TYPED.splitlines(), 1)
                for marker in re.findall(r"# E: (.*)$", text)}
    assert sorted(errors) == sorted(expected), proc.stdout + proc.stderr
    assert all(any(expected[where] in e for e in got) for where, got in errors.items()), errors
