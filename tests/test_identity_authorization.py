"""A project's authorization handler keeps a tenant's threads to that tenant, through every door:
the REST API, a live stream, the OpenAI door (the ``openai`` SDK) and the MCP door (the ``mcp``
client), on a live server trusting a local OIDC provider's tokens."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from server_fixtures import LiveServer, serve_app, write_project
from standardagents import Runtime
from standardagents.definitions.authorization import (
    Allow,
    AuthorizationRequest,
    Deny,
    Narrow,
    define_authorization,
)
from standardagents.server import create_app
from standardagents.testing.oidc import OidcProvider

AUDIENCE = "sa-api"

HANDLER = {
    "agents/authorization/tenants.py": """
        from standardagents.definitions.authorization import AuthorizationRequest, Narrow, define_authorization

        def same_tenant(request: AuthorizationRequest):
            '''A tenant's members share its threads; nobody sees another tenant's.'''
            caller = request.caller
            if caller is None or caller.tenant is None:
                return None
            if request.resource.kind in ("thread", "file", "approval"):
                return Narrow(metadata={"tenant": caller.tenant})
            return None

        authorization = define_authorization(same_tenant)
    """,
}


@pytest.fixture
def idp(monkeypatch: pytest.MonkeyPatch) -> Iterator[OidcProvider]:
    with OidcProvider(audience=AUDIENCE) as provider:
        monkeypatch.setenv("STANDARDAGENTS_AUTH_ISSUER", provider.issuer)
        monkeypatch.setenv("STANDARDAGENTS_AUTH_AUDIENCE", AUDIENCE)
        yield provider


@pytest.fixture
def live(idp: OidcProvider, tmp_path: Path) -> Iterator[LiveServer]:
    project = write_project(tmp_path / "project", HANDLER)
    yield from serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'live.db'}")


def _auth(idp: OidcProvider, user: str, tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {idp.token(sub=user, tenant=tenant)}"}


async def _acme_thread(live: LiveServer, idp: OidcProvider) -> str:
    async with httpx.AsyncClient(base_url=live.base_url) as http:
        r = await http.post("/api/threads", json={"agent": "helper", "metadata": {"tenant": "globex"}},
                            headers=_auth(idp, "alice", "acme"))
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["tenant"] == "acme"  # stamped from the token, not the body
    return str(r.json()["id"])


# REST ---------------------------------------------------------------------------------------------
async def test_a_tenant_member_reads_a_colleagues_thread(live: LiveServer, idp: OidcProvider) -> None:
    thread = await _acme_thread(live, idp)
    async with httpx.AsyncClient(base_url=live.base_url) as http:
        r = await http.get(f"/api/threads/{thread}", headers=_auth(idp, "ann", "acme"))
    assert r.status_code == 200
    assert r.json()["id"] == thread


async def test_another_tenant_is_refused_a_thread(live: LiveServer, idp: OidcProvider) -> None:
    thread = await _acme_thread(live, idp)
    async with httpx.AsyncClient(base_url=live.base_url) as http:
        read = await http.get(f"/api/threads/{thread}/messages", headers=_auth(idp, "gus", "globex"))
        write = await http.post(f"/api/threads/{thread}/messages", json={"content": "hi"},
                                headers=_auth(idp, "gus", "globex"))
    assert (read.status_code, write.status_code) == (403, 403)
    assert read.json()["error"]["message"] == (f"you may not read thread {thread!r} (the authorization policy "
                                               "does not grant it)")


async def test_thread_lists_hold_only_the_callers_tenant(live: LiveServer, idp: OidcProvider) -> None:
    thread = await _acme_thread(live, idp)
    async with httpx.AsyncClient(base_url=live.base_url) as http:
        acme = await http.get("/api/threads", headers=_auth(idp, "ann", "acme"))
        globex = await http.get("/api/threads", headers=_auth(idp, "gus", "globex"))
    assert [t["id"] for t in acme.json()["threads"]] == [thread]
    assert globex.json()["threads"] == []


# a stream -----------------------------------------------------------------------------------------
async def test_another_tenant_cannot_open_the_threads_stream(live: LiveServer, idp: OidcProvider) -> None:
    thread = await _acme_thread(live, idp)
    async with httpx.AsyncClient(base_url=live.base_url, timeout=10) as http:
        async with http.stream("GET", f"/api/threads/{thread}/stream", headers=_auth(idp, "gus", "globex")) as r:
            refused = r.status_code
        async with http.stream("GET", f"/api/threads/{thread}/stream", headers=_auth(idp, "ann", "acme")) as r:
            allowed = r.status_code, r.headers["content-type"].split(";")[0]
    assert refused == 403
    assert allowed == (200, "text/event-stream")


# the OpenAI door ----------------------------------------------------------------------------------
async def test_the_openai_door_refuses_another_tenants_thread(live: LiveServer, idp: OidcProvider) -> None:
    thread = await _acme_thread(live, idp)
    gus = openai.AsyncOpenAI(base_url=f"{live.base_url}/v1", api_key=idp.token(sub="gus", tenant="globex"),
                             max_retries=0)
    ann = openai.AsyncOpenAI(base_url=f"{live.base_url}/v1", api_key=idp.token(sub="ann", tenant="acme"),
                             max_retries=0)
    with pytest.raises(openai.PermissionDeniedError):
        await gus.chat.completions.create(model="helper", messages=[{"role": "user", "content": "hi"}],
                                          extra_body={"thread": thread})
    reply = await ann.chat.completions.create(model="helper", messages=[{"role": "user", "content": "add 2 and 3"}],
                                              extra_body={"thread": thread})
    await gus.close()
    await ann.close()
    assert reply.choices[0].message.content


async def test_a_thread_the_openai_door_creates_carries_the_tenant(live: LiveServer, idp: OidcProvider) -> None:
    client = openai.AsyncOpenAI(base_url=f"{live.base_url}/v1", api_key=idp.token(sub="gus", tenant="globex"),
                                max_retries=0)
    raw = await client.chat.completions.with_raw_response.create(
        model="helper", messages=[{"role": "user", "content": "hello"}])
    await client.close()
    thread = raw.headers["x-thread-id"]
    assert live.runtime is not None
    record = await live.runtime.store.get_thread(thread)
    assert record is not None
    assert (record.user_id, record.metadata["tenant"]) == ("gus", "globex")


# the MCP door -------------------------------------------------------------------------------------
@contextlib.asynccontextmanager
async def _mcp(live: LiveServer, token: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30.0, read=60.0)) as http:
        async with Client(streamable_http_client(f"{live.base_url}/mcp", http_client=http)) as client:
            yield client


async def test_the_mcp_door_refuses_another_tenants_thread(live: LiveServer, idp: OidcProvider) -> None:
    thread = await _acme_thread(live, idp)
    async with _mcp(live, idp.token(sub="gus", tenant="globex")) as client:
        refused = await client.call_tool("helper", {"message": "hi", "thread": thread})
    async with _mcp(live, idp.token(sub="ann", tenant="acme")) as client:
        allowed = await client.call_tool("helper", {"message": "add 1 and 2", "thread": thread})
    assert refused.is_error
    assert refused.content[0].text.startswith(f"you may not access thread {thread!r}")  # type: ignore[union-attr]
    assert not allowed.is_error
    assert (allowed.structured_content or {}).get("thread", (allowed.meta or {}).get("thread")) == thread


# the handler itself -------------------------------------------------------------------------------
async def test_a_deny_names_the_handlers_reason(make_runtime: Any) -> None:
    from standardagents import define_agent, define_prompt

    def no_deletes(request: AuthorizationRequest) -> Any:
        return Deny("threads are kept for audit") if request.action == "delete" else None

    rt: Runtime = await make_runtime(define_agent(name="helper", type="ai_human", side_a={"prompt": "p"}),
                                     define_prompt(name="p", prompt="hi"), define_authorization(no_deletes))
    user = await rt.store.create_user("amy")
    _, token = await rt.store.create_api_token(user.id, "t")
    app = create_app(rt, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test",
                                 headers={"Authorization": f"Bearer {token}"}) as http:
        thread = (await http.post("/api/threads", json={"agent": "helper"})).json()["id"]
        r = await http.delete(f"/api/threads/{thread}")
        kept = await http.get(f"/api/threads/{thread}")
    assert r.status_code == 403
    assert r.json()["error"]["message"] == f"you may not delete thread {thread!r}: threads are kept for audit"
    assert kept.status_code == 200


async def test_an_allow_opens_a_thread_to_another_user(make_runtime: Any) -> None:
    from standardagents import define_agent, define_prompt

    def readers(request: AuthorizationRequest) -> Any:
        caller = request.caller
        return Allow() if caller is not None and caller.name == "auditor" and request.action == "read" else None

    rt: Runtime = await make_runtime(define_agent(name="helper", type="ai_human", side_a={"prompt": "p"}),
                                     define_prompt(name="p", prompt="hi"), define_authorization(readers))
    tokens = {}
    for name in ("amy", "auditor", "eve"):
        user = await rt.store.create_user(name)
        tokens[name] = {"Authorization": f"Bearer {(await rt.store.create_api_token(user.id, 't'))[1]}"}
    app = create_app(rt, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        thread = (await http.post("/api/threads", json={"agent": "helper"}, headers=tokens["amy"])).json()["id"]
        auditor = await http.get(f"/api/threads/{thread}", headers=tokens["auditor"])
        eve = await http.get(f"/api/threads/{thread}", headers=tokens["eve"])
        auditor_write = await http.patch(f"/api/threads/{thread}", json={"title": "x"}, headers=tokens["auditor"])
    assert (auditor.status_code, eve.status_code, auditor_write.status_code) == (200, 403, 403)


def test_a_handler_answering_something_else_is_a_definition_error() -> None:
    import asyncio

    from standardagents.definitions.authorization import AuthorizationResource
    from standardagents.exceptions import DefinitionError

    definition = define_authorization(lambda request: "yes")
    with pytest.raises(DefinitionError) as caught:
        asyncio.run(definition.decide(AuthorizationRequest(None, AuthorizationResource("thread"), "read")))
    assert "returned 'yes'" in str(caught.value)


def test_narrow_matches_every_key() -> None:
    narrow = Narrow(metadata={"tenant": "acme", "region": "eu"})
    assert narrow.matches({"tenant": "acme", "region": "eu", "x": 1})
    assert not narrow.matches({"tenant": "acme"})
    assert not narrow.matches(None)


async def test_a_handler_opens_a_tenants_memory_namespace_to_its_members(make_runtime: Any, idp: OidcProvider) -> None:
    from standardagents import define_agent, define_prompt

    def shared(request: AuthorizationRequest) -> Any:
        caller = request.caller
        if request.resource.kind == "memory" and caller is not None and caller.tenant is not None:
            if list(request.resource.metadata["namespace"])[:2] == ["tenant", caller.tenant]:
                return Allow()
        return None

    rt: Runtime = await make_runtime(define_agent(name="helper", type="ai_human", side_a={"prompt": "p"}),
                                     define_prompt(name="p", prompt="hi"), define_authorization(shared))
    app = create_app(rt, close_runtime=False)
    item = {"namespace": ["tenant", "acme"], "key": "policy", "value": {"refunds": "30 days"}, "index": False}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        member = await http.put("/api/store/items", json=item, headers=_auth(idp, "alice", "acme"))
        stranger = await http.put("/api/store/items", json=item, headers=_auth(idp, "gus", "globex"))
        read = await http.get("/api/store/items", params={"namespace": "tenant.acme", "key": "policy"},
                              headers=_auth(idp, "ann", "acme"))
    assert (member.status_code, stranger.status_code, read.status_code) == (204, 403, 200)
    assert read.json()["value"] == {"refunds": "30 days"}


async def test_a_tenants_admin_sees_only_the_tenants_usage(live: LiveServer, idp: OidcProvider) -> None:
    async with httpx.AsyncClient(base_url=live.base_url, timeout=30) as http:
        for user, tenant in (("alice", "acme"), ("gus", "globex")):
            thread = (await http.post("/api/threads", json={"agent": "helper"}, headers=_auth(idp, user, tenant))).json()
            sent = await http.post(f"/api/threads/{thread['id']}/messages", params={"wait": "true"},
                                   json={"content": "add 1 and 2"}, headers=_auth(idp, user, tenant))
            assert sent.status_code == 200, sent.text
        admin = {"Authorization": f"Bearer {idp.token(sub='root', tenant='acme', roles=['admin'])}"}
        usage = await http.get("/api/usage", params={"by": "user"}, headers=admin)
    assert usage.status_code == 200
    assert [group["user"] for group in usage.json()["groups"]] == ["alice"]


async def test_a_handler_hides_agents_from_a_list(make_runtime: Any) -> None:
    from standardagents import define_agent, define_prompt

    def staff_only(request: AuthorizationRequest) -> Any:
        if request.resource.kind == "agent" and request.resource.id == "payroll":
            return Deny("staff only")
        return None

    rt: Runtime = await make_runtime(define_agent(name="helper", type="ai_human", side_a={"prompt": "p"}),
                                     define_agent(name="payroll", type="ai_human", side_a={"prompt": "p"}),
                                     define_prompt(name="p", prompt="hi"), define_authorization(staff_only))
    user = await rt.store.create_user("amy")
    _, token = await rt.store.create_api_token(user.id, "t")
    app = create_app(rt, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        r = await http.get("/api/agents", headers={"Authorization": f"Bearer {token}"})
    assert [a["name"] for a in r.json()["agents"]] == ["helper"]


async def test_a_caller_without_a_tenant_cannot_file_a_thread_under_one(live: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live.base_url) as http:
        filed = await http.post("/api/threads", json={"agent": "helper", "user_id": "someone",
                                                     "metadata": {"tenant": "acme", "topic": "x"}},
                               headers=live.headers)  # the fixture's token: an admin without a tenant
    assert filed.status_code == 201
    assert filed.json()["metadata"] == {"tenant": "acme", "topic": "x"}
    assert live.runtime is not None
    plain = await live.runtime.store.create_user("plain")
    _, token = await live.runtime.store.create_api_token(plain.id, "t")
    async with httpx.AsyncClient(base_url=live.base_url) as http:
        r = await http.post("/api/threads", json={"agent": "helper", "metadata": {"tenant": "acme", "topic": "x"}},
                            headers={"Authorization": f"Bearer {token}"})
    assert r.json()["metadata"] == {"topic": "x"}


async def test_without_a_handler_tenants_stay_apart_even_for_their_admins(runtime: Runtime,
                                                                           idp: OidcProvider) -> None:
    app = create_app(runtime, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        thread = (await http.post("/api/threads", json={"agent": "helper"}, headers=_auth(idp, "alice", "acme"))).json()
        other = {"Authorization": f"Bearer {idp.token(sub='olga', tenant='globex', roles=['admin'])}"}
        own = {"Authorization": f"Bearer {idp.token(sub='root', tenant='acme', roles=['admin'])}"}
        refused = await http.get(f"/api/threads/{thread['id']}", headers=other)
        allowed = await http.get(f"/api/threads/{thread['id']}", headers=own)
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == f"you may not access thread {thread['id']!r} (it belongs to another tenant)"
    assert allowed.status_code == 200
