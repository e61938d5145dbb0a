"""The REST API over the app in process: routes, status codes, access rules, error bodies."""

from __future__ import annotations

import json
from typing import Any

import httpx

from standardagents import Runtime

API = "/api"


async def _thread(client: httpx.AsyncClient, headers: dict[str, str], agent: str = "helper") -> dict[str, Any]:
    r = await client.post(f"{API}/threads", json={"agent": agent}, headers=headers)
    assert r.status_code == 201, r.text
    return dict(r.json())


def _error_code(r: httpx.Response) -> str:
    body = r.json()
    assert set(body["error"]) == {"code", "message"}
    return str(body["error"]["code"])


# auth -----------------------------------------------------------------------------------------
async def test_api_without_token_is_401_with_json_error(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/agents")
    assert r.status_code == 401
    assert _error_code(r) == "unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"


async def test_api_with_unknown_token_is_401(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/agents", headers={"Authorization": "Bearer sa_not_a_token"})
    assert r.status_code == 401
    assert "not valid" in r.json()["error"]["message"]


async def test_api_with_revoked_token_is_401(client: httpx.AsyncClient, actors: Any, runtime: Runtime) -> None:
    tokens = await runtime.store.list_api_tokens(actors.ids["alice"])
    await runtime.store.revoke_api_token(tokens[0].id)
    r = await client.get(f"{API}/agents", headers=actors.auth("alice"))
    assert r.status_code == 401


async def test_users_me_returns_the_caller(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/users/me", headers=actors.auth("alice"))
    assert r.status_code == 200
    assert r.json() == {"id": actors.ids["alice"], "name": "alice", "email": None, "isAdmin": False}


async def test_dev_mode_without_credentials_is_local_admin(runtime: Runtime) -> None:
    from standardagents.server import create_app

    app = create_app(runtime, dev=True, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        r = await c.get(f"{API}/users/me")
        bad = await c.get(f"{API}/users/me", headers={"Authorization": "Bearer sat_wrong"})  # shaped like a token: checked
    assert r.status_code == 200
    assert r.json()["id"] == "local"
    assert r.json()["isAdmin"] is True
    assert bad.status_code == 401


# agents ---------------------------------------------------------------------------------------
async def test_agents_lists_primary_agents_only(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/agents", headers=actors.auth("alice"))
    assert r.status_code == 200
    assert [a["name"] for a in r.json()["agents"]] == ["helper"]


async def test_agents_all_true_includes_non_primary(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/agents", params={"all": "true"}, headers=actors.auth("alice"))
    assert [a["name"] for a in r.json()["agents"]] == ["helper", "internal"]


# threads --------------------------------------------------------------------------------------
async def test_create_thread_is_owned_by_the_caller(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    assert thread["agent_id"] == "helper"
    assert thread["user_id"] == actors.ids["alice"]
    assert thread["running"] is False


async def test_create_thread_unknown_agent_is_422(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.post(f"{API}/threads", json={"agent": "nobody"}, headers=actors.auth("alice"))
    assert r.status_code == 422
    assert "nobody" in r.json()["error"]["message"]


async def test_create_thread_without_agent_is_422(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.post(f"{API}/threads", json={"title": "x"}, headers=actors.auth("alice"))
    assert r.status_code == 422


async def test_create_thread_for_another_user_needs_admin(client: httpx.AsyncClient, actors: Any) -> None:
    body = {"agent": "helper", "user_id": actors.ids["bob"]}
    denied = await client.post(f"{API}/threads", json=body, headers=actors.auth("alice"))
    allowed = await client.post(f"{API}/threads", json=body, headers=actors.auth("root"))
    assert denied.status_code == 403
    assert allowed.status_code == 201
    assert allowed.json()["user_id"] == actors.ids["bob"]


async def test_malformed_json_is_400(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.post(f"{API}/threads", content=b"{not json", headers={**actors.auth("alice"), "content-type": "application/json"})
    assert r.status_code == 400
    assert _error_code(r) == "bad_request"


async def test_json_array_body_is_422(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.post(f"{API}/threads", json=["helper"], headers=actors.auth("alice"))
    assert r.status_code == 422


async def test_wrong_media_type_is_415(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.post(f"{API}/threads", content=b"agent=helper",
                          headers={**actors.auth("alice"), "content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 415


async def test_oversized_body_is_413(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.post(f"{API}/threads", json={"agent": "helper", "title": "x" * 20_000}, headers=actors.auth("alice"))
    assert r.status_code == 413
    assert _error_code(r) == "payload_too_large"


async def test_oversized_streamed_body_is_413(client: httpx.AsyncClient, actors: Any) -> None:
    async def chunks() -> Any:
        for _ in range(20):
            yield b"x" * 1000

    r = await client.post(f"{API}/threads", content=chunks(), headers={**actors.auth("alice"), "content-type": "application/json"})
    assert r.status_code == 413


async def test_wrong_method_is_405(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.delete(f"{API}/agents", headers=actors.auth("alice"))
    assert r.status_code == 405
    assert _error_code(r) == "method_not_allowed"


async def test_unknown_route_is_404_json(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/no/such/route", headers=actors.auth("alice"))
    assert r.status_code == 404
    assert _error_code(r) == "not_found"


async def test_list_threads_shows_only_own_threads(client: httpx.AsyncClient, actors: Any) -> None:
    mine = await _thread(client, actors.auth("alice"))
    await _thread(client, actors.auth("bob"))
    r = await client.get(f"{API}/threads", headers=actors.auth("alice"))
    assert [t["id"] for t in r.json()["threads"]] == [mine["id"]]


async def test_list_threads_of_another_user_is_403(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/threads", params={"user": actors.ids["bob"]}, headers=actors.auth("alice"))
    assert r.status_code == 403


async def test_admin_lists_threads_filtered_by_user(client: httpx.AsyncClient, actors: Any) -> None:
    await _thread(client, actors.auth("alice"))
    bobs = await _thread(client, actors.auth("bob"))
    r = await client.get(f"{API}/threads", params={"user": actors.ids["bob"]}, headers=actors.auth("root"))
    assert [t["id"] for t in r.json()["threads"]] == [bobs["id"]]


async def test_list_threads_filters_by_agent(client: httpx.AsyncClient, actors: Any) -> None:
    await _thread(client, actors.auth("alice"), "helper")
    internal = await _thread(client, actors.auth("alice"), "internal")
    r = await client.get(f"{API}/threads", params={"agent": "internal"}, headers=actors.auth("alice"))
    assert [t["id"] for t in r.json()["threads"]] == [internal["id"]]


async def test_list_threads_paginates(client: httpx.AsyncClient, actors: Any) -> None:
    made = {(await _thread(client, actors.auth("alice")))["id"] for _ in range(3)}
    first = (await client.get(f"{API}/threads", params={"limit": 2}, headers=actors.auth("alice"))).json()
    rest = (await client.get(f"{API}/threads", params={"limit": 2, "offset": 2}, headers=actors.auth("alice"))).json()
    assert len(first["threads"]) == 2
    assert len(rest["threads"]) == 1
    assert {t["id"] for t in first["threads"] + rest["threads"]} == made


async def test_bad_pagination_is_422(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/threads", params={"limit": "lots"}, headers=actors.auth("alice"))
    assert r.status_code == 422


async def test_get_thread(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{thread['id']}", headers=actors.auth("alice"))
    assert r.status_code == 200
    assert r.json()["id"] == thread["id"]


async def test_get_unknown_thread_is_404(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.get(f"{API}/threads/thr_missing", headers=actors.auth("alice"))
    assert r.status_code == 404


async def test_get_thread_of_another_user_is_403(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{thread['id']}", headers=actors.auth("bob"))
    assert r.status_code == 403


async def test_admin_may_read_any_thread(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{thread['id']}", headers=actors.auth("root"))
    assert r.status_code == 200


async def test_delete_thread(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.delete(f"{API}/threads/{thread['id']}", headers=actors.auth("alice"))
    gone = await client.get(f"{API}/threads/{thread['id']}", headers=actors.auth("alice"))
    assert r.status_code == 204
    assert gone.status_code == 404


async def test_delete_thread_of_another_user_is_403(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.delete(f"{API}/threads/{thread['id']}", headers=actors.auth("bob"))
    assert r.status_code == 403


# messages and executions ----------------------------------------------------------------------
async def test_send_message_wait_returns_the_result(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.post(f"{API}/threads/{thread['id']}/messages", params={"wait": "true"},
                          json={"content": "add two numbers"}, headers=actors.auth("alice"))
    assert r.status_code == 200
    result = r.json()
    # the offline model calls the agent's one tool (add, with its defaults 1 and 2), then answers
    assert {key: result[key] for key in ("threadId", "outcome", "stopReason", "text", "error")} == {
        "threadId": thread["id"], "outcome": "response", "stopReason": "complete",
        "text": "Tool results: add -> 3", "error": None}
    executions = (await client.get(f"{API}/threads/{thread['id']}/executions", headers=actors.auth("alice"))).json()
    assert [e["id"] for e in executions["executions"]] == [result["executionId"]]


async def test_send_message_returns_202_with_execution_id(client: httpx.AsyncClient, actors: Any, runtime: Runtime) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.post(f"{API}/threads/{thread['id']}/messages", json={"content": "hi"}, headers=actors.auth("alice"))
    assert r.status_code == 202
    body = r.json()
    assert body["queued"] is False
    execution = await runtime.store.get_execution(body["executionId"])
    assert execution is not None
    assert execution.thread_id == thread["id"]


async def test_send_message_stream_carries_the_turn_until_done(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.post(f"{API}/threads/{thread['id']}/messages", params={"stream": "true"},
                          json={"content": "add"}, headers=actors.auth("alice"))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    types = [e["type"] for e in events]
    assert "execution_started" in types
    assert types[-1] == "done"
    assert "tool_call_started" in types
    assert "tool_call_done" in types
    assert "message_chunk" in types


async def test_send_message_without_content_is_422(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.post(f"{API}/threads/{thread['id']}/messages", json={"content": 5}, headers=actors.auth("alice"))
    assert r.status_code == 422


async def test_send_message_to_another_users_thread_is_403(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.post(f"{API}/threads/{thread['id']}/messages", json={"content": "hi"}, headers=actors.auth("bob"))
    assert r.status_code == 403


async def test_send_message_to_unknown_thread_is_404(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.post(f"{API}/threads/thr_missing/messages", json={"content": "hi"}, headers=actors.auth("alice"))
    assert r.status_code == 404


async def test_list_messages_after_a_turn(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    await client.post(f"{API}/threads/{thread['id']}/messages", params={"wait": "1"}, json={"content": "go"},
                      headers=actors.auth("alice"))
    r = await client.get(f"{API}/threads/{thread['id']}/messages", headers=actors.auth("alice"))
    body = r.json()
    roles = [m["role"] for m in body["messages"]]
    assert roles[0] == "user"
    assert "tool" in roles
    assert roles[-1] == "assistant"
    assert body["total"] == len(roles)


async def test_list_messages_paginates(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    await client.post(f"{API}/threads/{thread['id']}/messages", params={"wait": "1"}, json={"content": "go"},
                      headers=actors.auth("alice"))
    everything = (await client.get(f"{API}/threads/{thread['id']}/messages", headers=actors.auth("alice"))).json()
    page = (await client.get(f"{API}/threads/{thread['id']}/messages", params={"limit": 1, "offset": 1},
                             headers=actors.auth("alice"))).json()
    assert [m["id"] for m in page["messages"]] == [everything["messages"][1]["id"]]


async def test_silent_messages_hidden_unless_asked(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    await client.post(f"{API}/threads/{thread['id']}/messages", params={"wait": "1"},
                      json={"content": "quiet", "silent": True}, headers=actors.auth("alice"))
    shown = (await client.get(f"{API}/threads/{thread['id']}/messages", headers=actors.auth("alice"))).json()
    everything = (await client.get(f"{API}/threads/{thread['id']}/messages", params={"include_silent": "true"},
                                   headers=actors.auth("alice"))).json()
    assert "quiet" not in [m["content"] for m in shown["messages"]]
    assert "quiet" in [m["content"] for m in everything["messages"]]


async def test_stop_idle_thread_reports_nothing_stopped(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.post(f"{API}/threads/{thread['id']}/stop", headers=actors.auth("alice"))
    assert r.status_code == 200
    assert r.json() == {"threadId": thread["id"], "stopped": False}


async def test_stop_of_another_users_thread_is_403(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.post(f"{API}/threads/{thread['id']}/stop", headers=actors.auth("bob"))
    assert r.status_code == 403


# files and logs -------------------------------------------------------------------------------
async def test_put_then_get_a_thread_file(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    url = f"{API}/threads/{thread['id']}/files/notes/a.txt"
    put = await client.put(url, content=b"hello", headers={**actors.auth("alice"), "content-type": "text/plain"})
    again = await client.put(url, content=b"hello again", headers={**actors.auth("alice"), "content-type": "text/plain"})
    got = await client.get(url, headers=actors.auth("alice"))
    assert put.status_code == 201
    assert again.status_code == 200
    assert got.content == b"hello again"
    assert got.headers["content-type"].startswith("text/plain")


async def test_list_thread_files(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    await client.put(f"{API}/threads/{thread['id']}/files/x.bin", content=b"123", headers=actors.auth("alice"))
    r = await client.get(f"{API}/threads/{thread['id']}/files", headers=actors.auth("alice"))
    assert [(f["path"], f["size"]) for f in r.json()["files"]] == [("/x.bin", 3)]


async def test_missing_thread_file_is_404(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{thread['id']}/files/none.txt", headers=actors.auth("alice"))
    assert r.status_code == 404


async def test_thread_file_path_with_dot_dot_is_422(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.put(f"{API}/threads/{thread['id']}/files/a/%2E%2E/b", content=b"x", headers=actors.auth("alice"))
    assert r.status_code == 422


async def test_thread_files_of_another_user_are_403(client: httpx.AsyncClient, actors: Any) -> None:
    thread = await _thread(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{thread['id']}/files", headers=actors.auth("bob"))
    assert r.status_code == 403


async def test_thread_logs(client: httpx.AsyncClient, actors: Any, runtime: Runtime) -> None:
    thread = await _thread(client, actors.auth("alice"))
    state = await runtime.state(thread["id"])
    await state.log("checked in", data={"n": 1})
    r = await client.get(f"{API}/threads/{thread['id']}/logs", headers=actors.auth("alice"))
    assert [(x["message"], x["data"]) for x in r.json()["logs"]] == [("checked in", {"n": 1})]


# user values ----------------------------------------------------------------------------------
async def test_user_value_put_get_delete(client: httpx.AsyncClient, actors: Any) -> None:
    url = f"{API}/users/me/values/theme"
    put = await client.put(url, json={"value": {"dark": True}}, headers=actors.auth("alice"))
    got = await client.get(url, headers=actors.auth("alice"))
    deleted = await client.delete(url, headers=actors.auth("alice"))
    missing = await client.get(url, headers=actors.auth("alice"))
    assert put.status_code == 200
    assert got.json() == {"key": "theme", "value": {"dark": True}}
    assert deleted.status_code == 204
    assert missing.status_code == 404


async def test_user_values_are_per_user(client: httpx.AsyncClient, actors: Any) -> None:
    await client.put(f"{API}/users/me/values/theme", json={"value": "dark"}, headers=actors.auth("alice"))
    r = await client.get(f"{API}/users/me/values/theme", headers=actors.auth("bob"))
    assert r.status_code == 404


async def test_user_value_change_runs_the_hook(client: httpx.AsyncClient, actors: Any, runtime: Runtime) -> None:
    await client.put(f"{API}/users/me/values/theme", json={"value": "dark"}, headers=actors.auth("alice"))
    assert await runtime.store.get_user_value(actors.ids["alice"], "changed") == "theme"


async def test_user_value_put_without_value_is_422(client: httpx.AsyncClient, actors: Any) -> None:
    r = await client.put(f"{API}/users/me/values/theme", json={"v": 1}, headers=actors.auth("alice"))
    assert r.status_code == 422


# openapi --------------------------------------------------------------------------------------
async def test_openapi_document_lists_the_routes(client: httpx.AsyncClient) -> None:
    r = await client.get(f"{API}/openapi.json")
    doc = r.json()
    assert doc["openapi"].startswith("3.")
    assert f"{API}/threads/{{thread_id}}/messages" in doc["paths"]
    assert "post" in doc["paths"][f"{API}/threads"]


# approvals over HTTP -------------------------------------------------------------------------

APPROVAL_FILES = {
    "agents/agents/ops.py": (
        "from standardagents import define_agent\n"
        "ops = define_agent(name='ops', side_a={'prompt': 'ops_prompt'})\n"),
    "agents/prompts/ops_prompt.py": (
        "from standardagents import define_prompt\n"
        "ops_prompt = define_prompt(name='ops_prompt', prompt='x', tools=['wipe'])\n"),
    "agents/tools/wipe.py": (
        "from standardagents import define_tool\n"
        "@define_tool(needs_approval=True)\n"
        "def wipe(target: str) -> str:\n"
        "    '''Wipe a target.'''\n"
        "    return f'wiped {target}'\n"),
}


async def test_approvals_are_listed_decided_and_forged_tokens_refused(tmp_path):
    import asyncio

    from standardagents import Runtime
    from standardagents.server import create_app
    from standardagents.store import open_store

    for rel, text in APPROVAL_FILES.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    rt = await Runtime.open(tmp_path, store=open_store(f"sqlite:///{tmp_path / 'a.db'}"))
    app = create_app(rt, dev=True)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        thread = (await client.post("/api/threads", json={"agent": "ops"})).json()
        tid = thread["id"]
        sent = await client.post(f"/api/threads/{tid}/messages?wait=true", json={"content": "wipe the cache"})
        assert sent.json()["outcome"] == "approval_required"
        pending = (await client.get(f"/api/threads/{tid}/approvals")).json()["approvals"]
        assert [(p["tool"], p["arguments"]) for p in pending] == [("wipe", {"target": "wipe the cache"})]
        forged = await client.post(f"/api/threads/{tid}/approvals", json={"token": pending[0]["token"] + "x", "approved": True})
        assert forged.status_code == 403 and forged.json()["error"]["code"] == "invalid_approval"
        bad = await client.post(f"/api/threads/{tid}/approvals", json={"token": pending[0]["token"]})
        assert bad.status_code == 422
        ok = await client.post(f"/api/threads/{tid}/approvals", json={"token": pending[0]["token"], "approved": True})
        assert ok.status_code == 202 and ok.json()["resumed"] is True
        for _ in range(200):
            if not rt.is_running(tid) and (await client.get(f"/api/threads/{tid}/approvals")).json()["approvals"] == []:
                messages = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
                if any(m["role"] == "tool" for m in messages):
                    break
            await asyncio.sleep(0.02)
        tool = next(m for m in messages if m["role"] == "tool")
        assert tool["content"] == "wiped wipe the cache"
        again = await client.post(f"/api/threads/{tid}/approvals", json={"token": pending[0]["token"], "approved": True})
        assert again.status_code == 403


# effects over HTTP ---------------------------------------------------------------------------

EFFECT_FILES = {
    "agents/agents/planner.py": "from standardagents import define_agent\n"
                                "planner = define_agent(name='planner', side_a={'prompt': 'planner_prompt'})\n",
    "agents/prompts/planner_prompt.py": "from standardagents import define_prompt\n"
                                        "planner_prompt = define_prompt(name='planner_prompt', prompt='x', tools=['remind'])\n",
    "agents/tools/remind.py": "from standardagents import define_tool\n"
                              "@define_tool\n"
                              "async def remind(note: str, state=None) -> str:\n"
                              "    '''Schedule a reminder.'''\n"
                              "    effect_id = await state.schedule_effect('send_reminder', {'note': note}, delay=3600)\n"
                              "    return effect_id\n",
    "agents/effects/send_reminder.py": "from standardagents import define_effect\n"
                                       "async def handler(state, args):\n"
                                       "    await state.log('reminder: ' + args['note'])\n"
                                       "send_reminder = define_effect('send_reminder', 'Send a reminder.', {'type': 'object'}, handler)\n",
}


async def test_effects_are_listed_and_cancelled_over_http(tmp_path):
    from standardagents import Runtime
    from standardagents.server import create_app
    from standardagents.store import open_store

    for rel, text in EFFECT_FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    rt = await Runtime.open(tmp_path, store=open_store(f"sqlite:///{tmp_path / 'e.db'}"))
    app = create_app(rt, dev=True)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                                                    base_url="http://t") as client:
        tid = (await client.post("/api/threads", json={"agent": "planner"})).json()["id"]
        done = await client.post(f"/api/threads/{tid}/messages?wait=true", json={"content": "remind me to stretch"})
        assert done.json()["stopReason"] == "complete"
        (effect,) = (await client.get(f"/api/threads/{tid}/effects")).json()["effects"]
        assert (effect["name"], effect["status"], effect["args"]) == ("send_reminder", "pending", {"note": "remind me to stretch"})
        cancelled = await client.post(f"/api/effects/{effect['id']}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        again = await client.post(f"/api/effects/{effect['id']}/cancel")
        assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
        missing = await client.post("/api/effects/eff_nope/cancel")
        assert missing.status_code == 404
        assert (await client.get(f"/api/threads/{tid}/effects?status=pending")).json()["effects"] == []


# child threads and subagent links -------------------------------------------------------------
async def test_top_level_threads_leave_out_child_threads_and_subagents_name_them(
        client: httpx.AsyncClient, actors: Any, runtime: Runtime) -> None:
    from standardagents.store.records import SubagentRecord

    parent = await _thread(client, actors.auth("alice"))
    child = await runtime.create_thread("helper", user_id=actors.ids["alice"], parent_id=parent["id"])
    await runtime.store.add_subagent(SubagentRecord(parent_thread_id=parent["id"], child_thread_id=child.id,
                                                    agent="helper"))
    every = (await client.get(f"{API}/threads", headers=actors.auth("alice"))).json()["threads"]
    top = (await client.get(f"{API}/threads?top_level=true", headers=actors.auth("alice"))).json()["threads"]
    assert {t["id"] for t in every} == {parent["id"], child.id}
    assert [t["id"] for t in top] == [parent["id"]]
    r = await client.get(f"{API}/threads/{parent['id']}/subagents", headers=actors.auth("alice"))
    assert r.status_code == 200
    [link] = r.json()["subagents"]
    assert (link["childThreadId"], link["agent"], link["status"]) == (child.id, "helper", "running")
    # bad input: a clear 4xx, and bob may not read alice's links
    bad = await client.get(f"{API}/threads?top_level=maybe", headers=actors.auth("alice"))
    assert bad.status_code == 422 and "top_level" in bad.json()["error"]["message"]
    other = await client.get(f"{API}/threads/{parent['id']}/subagents", headers=actors.auth("bob"))
    assert other.status_code in (403, 404)
    missing = await client.get(f"{API}/threads/thr_nope/subagents", headers=actors.auth("alice"))
    assert missing.status_code == 404


# runtime view ---------------------------------------------------------------------------------
async def test_runtime_view_lists_agents_with_prompt_tools_and_model_for_admins_only(
        client: httpx.AsyncClient, actors: Any) -> None:
    assert (await client.get(f"{API}/runtime")).status_code == 401
    refused = await client.get(f"{API}/runtime", headers=actors.auth("alice"))
    assert refused.status_code == 403 and _error_code(refused) == "forbidden"
    r = await client.get(f"{API}/runtime", headers=actors.auth("root"))
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"agents", "models", "traceUrl", "running", "approvals", "effects", "errors"}
    helper = next(a for a in body["agents"] if a["name"] == "helper")
    [side] = helper["sides"]
    assert side["prompt"] == {"name": "helper_prompt", "text": "You add numbers."}
    add = next(t for t in side["tools"] if t["name"] == "add")
    assert add["origin"] == "code" and side["model"]["name"]
    assert body["running"] == [] and body["approvals"] == [] and body["effects"] == []
    spec = (await client.get(f"{API}/openapi.json")).json()
    assert "get" in spec["paths"][f"{API}/runtime"]
