"""The project's own endpoints: routing from file names, access levels, the context and
return conversion, and thread endpoints with the thread access policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from standardagents import Runtime
from standardagents.server import create_app
from standardagents.server.endpoints import EndpointTable

API = "/api"


async def _thread(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    r = await client.post(f"{API}/threads", json={"agent": "helper"}, headers=headers)
    return str(r.json()["id"])


# controllers ----------------------------------------------------------------------------------
async def test_public_controller_runs_without_credentials(client: httpx.AsyncClient) -> None:
    r = await client.get(f"{API}/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "caller": None}


async def test_public_controller_resolves_a_verified_caller(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/health", headers=actors.auth("alice"))
    assert r.json()["caller"] == actors.ids["alice"]


async def test_public_controller_with_bad_credentials_is_anonymous(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/health", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 200
    assert r.json()["caller"] is None


async def test_authenticated_controller_without_credentials_is_401(client: httpx.AsyncClient, tmp_path: Path) -> None:
    r = await client.get(f"{API}/whoami")
    assert r.status_code == 401


async def test_authenticated_controller_gets_the_context(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/whoami", headers=actors.auth("bob"))
    assert r.json() == {"caller": actors.ids["bob"], "agents": ["helper", "internal"], "path": f"{API}/whoami"}


async def test_dynamic_segment_fills_params_for_any_method(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.patch(f"{API}/items/42", headers=actors.auth("alice"))
    assert r.json() == {"id": "42", "method": "PATCH"}


async def test_static_segment_wins_over_a_parameter(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/items/special", headers=actors.auth("alice"))
    assert r.text == "special item"
    assert r.headers["content-type"].startswith("text/plain")


async def test_method_suffix_restricts_the_method(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/nothing", headers=actors.auth("alice"))
    assert r.status_code == 405


async def test_none_return_is_204(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.post(f"{API}/nothing", headers=actors.auth("alice"))
    assert r.status_code == 204


async def test_async_iterator_return_streams(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/count", headers=actors.auth("alice"))
    assert r.text == "0\n1\n2\n"


async def test_unknown_controller_is_404(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/items/1/2", headers=actors.auth("alice"))
    assert r.status_code == 404


async def test_failing_controller_is_500_without_traceback(tmp_path: Path) -> None:
    from server_fixtures import write_project

    root = write_project(tmp_path / "p", {"agents/api/boom.get.py": """
        from standardagents import define_controller

        @define_controller(access="public")
        def boom(ctx):
            raise ValueError("secret detail")
    """})
    rt = await Runtime.open(root, database_url=f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    try:
        app = create_app(rt, close_runtime=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            r = await c.get(f"{API}/boom")
    finally:
        await rt.aclose()
    assert r.status_code == 500
    assert r.json()["error"]["code"] == "internal_error"
    assert "secret detail" not in r.text
    assert "Traceback" not in r.text


# thread endpoints -----------------------------------------------------------------------------
async def test_thread_endpoint_gets_state_and_auth(client: httpx.AsyncClient, actors: Any) -> None:
    tid = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{tid}/status", headers=actors.auth("alice"))
    assert r.json() == {"threadId": tid, "agent": "helper", "caller": actors.ids["alice"], "threadAccess": True}


async def test_authenticated_thread_endpoint_without_credentials_is_401(client: httpx.AsyncClient, actors: Any) -> None:
    tid = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{tid}/status")
    assert r.status_code == 401


async def test_authenticated_thread_endpoint_denied_by_policy_is_403(client: httpx.AsyncClient, actors: Any) -> None:
    tid = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{tid}/status", headers=actors.auth("bob"))
    assert r.status_code == 403


async def test_admin_passes_the_thread_policy(client: httpx.AsyncClient, actors: Any) -> None:
    tid = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{tid}/status", headers=actors.auth("root"))
    assert r.json()["threadAccess"] is True


async def test_public_thread_endpoint_anonymous(client: httpx.AsyncClient, actors: Any) -> None:
    tid = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{tid}/peek")
    assert r.json() == {"threadId": tid, "caller": None, "threadAccess": False}


async def test_public_thread_endpoint_other_user_has_no_thread_access(client: httpx.AsyncClient, actors: Any) -> None:
    tid = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{tid}/peek", headers=actors.auth("bob"))
    assert r.json() == {"threadId": tid, "caller": actors.ids["bob"], "threadAccess": False}


async def test_public_thread_endpoint_owner_has_thread_access(client: httpx.AsyncClient, actors: Any) -> None:
    tid = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{tid}/peek", headers=actors.auth("alice"))
    assert r.json()["threadAccess"] is True


async def test_catch_all_thread_endpoint_gets_the_rest(client: httpx.AsyncClient, actors: Any) -> None:
    tid = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{tid}/docs/a/b/c.md", headers=actors.auth("alice"))
    assert r.json() == {"rest": "a/b/c.md"}


async def test_unknown_route_under_a_thread_is_404(client: httpx.AsyncClient, actors: Any) -> None:
    tid = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{tid}/nope", headers=actors.auth("alice"))
    assert r.status_code == 404


async def test_thread_endpoint_for_unknown_thread_is_404(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/threads/thr_missing/peek", headers=actors.auth("alice"))
    assert r.status_code == 404


async def test_packed_thread_endpoints_are_mounted_and_collisions_reported(runtime: Runtime, actors: Any) -> None:
    from standardagents import define_thread_endpoint

    runtime.registry.add("thread_endpoints", "pkg-info.get",
                         define_thread_endpoint(lambda req, state: {"from": "package"}), package="acme")
    runtime.registry.add("thread_endpoints", "status.get",
                         define_thread_endpoint(lambda req, state: {"from": "package"}), package="acme")
    app = create_app(runtime, close_runtime=False)
    assert len(app.state.server.endpoints.collisions) == 1
    assert "status.get" in app.state.server.endpoints.collisions[0]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        tid = await _thread(c, actors.auth("alice"))
        packed = await c.get(f"{API}/threads/{tid}/pkg-info", headers=actors.auth("alice"))
        local = await c.get(f"{API}/threads/{tid}/status", headers=actors.auth("alice"))
    assert packed.json() == {"from": "package"}
    assert local.json()["threadId"] == tid


async def test_a_thread_endpoint_queueing_a_tool_on_an_idle_thread_starts_the_turn(runtime: Runtime, actors: Any) -> None:
    from standardagents import define_thread_endpoint

    async def invoke(req: Any, state: Any) -> dict[str, Any]:
        body = await req.json()
        await state.queue_tool(body["tool"], body["args"])
        return {"queued": True}

    runtime.registry.add("thread_endpoints", "invoke.post", define_thread_endpoint(invoke))
    app = create_app(runtime, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        tid = await _thread(c, actors.auth("alice"))
        sub = runtime.subscribe(tid)
        r = await c.post(f"{API}/threads/{tid}/invoke", json={"tool": "add", "args": {"a": 20, "b": 22}},
                         headers=actors.auth("alice"))
        assert (r.status_code, r.json()) == (200, {"queued": True})
        seen = []
        while not seen or seen[-1].type != "done":
            seen.append(await sub.get(timeout=30))
        listed = (await c.get(f"{API}/threads/{tid}/messages", headers=actors.auth("alice"))).json()
    await runtime.drain()
    assert seen[-1].data["stopReason"] == "complete"
    assert [e.type for e in seen].count("execution_started") == 1
    messages = listed["messages"] if isinstance(listed, dict) else listed
    assert [m["role"] for m in messages] == ["assistant", "tool", "assistant"]
    assert messages[0]["tool_calls"][0]["function"]["name"] == "add"
    assert messages[1]["content"] == "42"
    assert messages[2]["content"]
    while not sub.queue.empty():
        assert sub.queue.get_nowait().type != "done"


def test_index_file_routes_to_its_folder(runtime: Runtime) -> None:
    from standardagents import define_controller

    runtime.registry.add("controllers", "reports/index.get", define_controller(lambda ctx: "all reports"))
    table = EndpointTable(runtime.registry)
    found = table.find("controllers", "reports", "GET")
    assert isinstance(found, tuple)
    assert found[0].key == "reports/index.get"
