"""Approvals as an audited decision: bound to a digest of the tool and its exact arguments,
consumed once, decided only by the agent's approvers (the thread's owner by default; a role
from the identity provider when the agent says so), optionally expiring, and listed to admins
by ``GET /api/approvals/audit``. Callers sign in with real tokens of a local OIDC provider."""

from __future__ import annotations

import asyncio
import hashlib
import json
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from standardagents import Runtime
from standardagents.server import create_app
from standardagents.testing.oidc import OidcProvider

AUDIENCE = "sa-api"

FILES = {
    "agents/agents/ops.py": """
        from standardagents import define_agent
        ops = define_agent(name="ops", side_a={"prompt": "ops_prompt"}, approval_expires_in=30)
    """,
    "agents/agents/payments.py": """
        from standardagents import define_agent
        payments = define_agent(name="payments", side_a={"prompt": "ops_prompt"}, approvers=["role:finance"])
    """,
    "agents/prompts/ops_prompt.py": """
        from standardagents import define_prompt
        ops_prompt = define_prompt(name="ops_prompt", prompt="x", tools=["wipe"])
    """,
    "agents/tools/wipe.py": """
        from standardagents import define_tool

        @define_tool(needs_approval=True)
        def wipe(target: str) -> str:
            '''Wipe a target.'''
            return f"wiped {target}"
    """,
    "agents/authorization/tenants.py": """
        from standardagents.definitions.authorization import Narrow, define_authorization

        def same_tenant(request):
            caller = request.caller
            if caller is None or caller.tenant is None or request.resource.kind == "agent":
                return None
            return Narrow(metadata={"tenant": caller.tenant})

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
async def rt(tmp_path: Path) -> AsyncIterator[Runtime]:
    root = tmp_path / "project"
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    runtime = await Runtime.open(root, database_url=f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    try:
        yield runtime
    finally:
        await runtime.aclose()


@pytest.fixture
async def http(idp: OidcProvider, rt: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(rt, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        yield client


def _as(idp: OidcProvider, user: str, **claims: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {idp.token(sub=user, tenant='acme', **claims)}"}


async def _paused_call(http: httpx.AsyncClient, owner: dict[str, str], agent: str = "ops") -> tuple[str, dict[str, Any]]:
    """A thread of ``agent`` whose turn waits for a decision on ``wipe``: its id and the call."""
    thread = (await http.post("/api/threads", json={"agent": agent}, headers=owner)).json()["id"]
    sent = await http.post(f"/api/threads/{thread}/messages", json={"content": "wipe the cache"}, headers=owner)
    assert sent.status_code in (200, 202), sent.text
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while loop.time() < deadline:
        pending = (await http.get(f"/api/threads/{thread}/approvals", headers=owner)).json()["approvals"]
        if pending:
            return thread, pending[0]
        await asyncio.sleep(0.02)
    raise AssertionError("the turn never paused for approval")


def _digest(tool: str, arguments: Any) -> str:
    return hashlib.sha256(json.dumps([tool, arguments], sort_keys=True, separators=(",", ":")).encode()).hexdigest()


async def _decide(http: httpx.AsyncClient, thread: str, call: dict[str, Any], who: dict[str, str],
                  approved: bool = True, reason: str | None = "looks right") -> httpx.Response:
    return await http.post(f"/api/threads/{thread}/approvals", headers=who,
                           json={"token": call["token"], "approved": approved, "reason": reason})


async def test_the_owners_decision_is_audited_with_who_when_why_and_what(http: httpx.AsyncClient,
                                                                         idp: OidcProvider) -> None:
    alice = _as(idp, "alice", name="Alice")
    thread, call = await _paused_call(http, alice)
    assert call["digest"] == _digest("wipe", {"target": "wipe the cache"})
    decided = await _decide(http, thread, call, alice, reason="cache is stale")
    assert decided.status_code == 202, decided.text
    audit = await http.get("/api/approvals/audit", headers=_as(idp, "root", roles=["admin"]))
    assert audit.status_code == 200
    [entry] = audit.json()["decisions"]
    assert {k: v for k, v in entry.items() if k != "decidedAt"} == {
        "id": f"{call['executionId']}:{call['id']}", "threadId": thread, "executionId": call["executionId"],
        "callId": call["id"], "tool": "wipe", "digest": call["digest"], "approved": True, "reason": "cache is stale",
        "decidedBy": "alice", "decidedByName": "Alice", "tenant": "acme", "roles": []}
    assert isinstance(entry["decidedAt"], int)


async def test_a_decision_is_consumed_once(http: httpx.AsyncClient, idp: OidcProvider) -> None:
    alice = _as(idp, "alice")
    thread, call = await _paused_call(http, alice)
    first = await _decide(http, thread, call, alice)
    again = await _decide(http, thread, call, alice)
    assert first.status_code == 202
    assert again.status_code == 403
    assert again.json()["error"]["message"].startswith("this approval is stale")


async def test_a_colleague_who_is_not_an_approver_gets_403(http: httpx.AsyncClient, idp: OidcProvider) -> None:
    thread, call = await _paused_call(http, _as(idp, "alice"))
    ann = _as(idp, "ann")  # same tenant: may read the thread, not decide its calls
    assert (await http.get(f"/api/threads/{thread}", headers=ann)).status_code == 200
    refused = await _decide(http, thread, call, ann)
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == ("you may not decide this call: agent 'ops' takes decisions from "
                                                  "owner, admin")


async def test_an_agents_approver_role_decides_and_the_owner_may_not(http: httpx.AsyncClient,
                                                                      idp: OidcProvider) -> None:
    alice = _as(idp, "alice")
    thread, call = await _paused_call(http, alice, agent="payments")
    owner = await _decide(http, thread, call, alice)
    finance = await _decide(http, thread, call, _as(idp, "fran", roles=["finance"]))
    assert owner.status_code == 403
    assert owner.json()["error"]["message"] == "you may not decide this call: agent 'payments' takes decisions from role:finance"
    assert finance.status_code == 202
    audit = (await http.get("/api/approvals/audit", headers=_as(idp, "root", roles=["admin"]))).json()["decisions"]
    assert [(d["decidedBy"], d["roles"]) for d in audit] == [("fran", ["finance"])]


async def test_a_changed_call_needs_a_new_approval(http: httpx.AsyncClient, idp: OidcProvider, rt: Runtime) -> None:
    alice = _as(idp, "alice")
    thread, call = await _paused_call(http, alice)
    [record] = await rt.store.list_executions(thread_id=thread, status="waiting")
    seen = record.updated_at
    record.state = {**record.state, "pending": [{**p, "arguments": json.dumps({"target": "everything"})}
                                                for p in record.state["pending"]]}
    assert await rt.store.replace_execution(record, expected_status="waiting", expected_updated_at=seen)
    refused = await _decide(http, thread, call, alice)
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == ("this approval was asked for another call: the tool or its "
                                                  "arguments changed, so the call needs a new approval")
    fresh = (await http.get(f"/api/threads/{thread}/approvals", headers=alice)).json()["approvals"][0]
    assert fresh["digest"] == _digest("wipe", {"target": "everything"})
    assert (await _decide(http, thread, fresh, alice)).status_code == 202


async def test_a_call_waiting_past_its_expiry_cannot_be_decided(http: httpx.AsyncClient, idp: OidcProvider,
                                                                 rt: Runtime) -> None:
    alice = _as(idp, "alice")
    thread, call = await _paused_call(http, alice)
    [record] = await rt.store.list_executions(thread_id=thread, status="waiting")
    seen = record.updated_at
    record.state = {**record.state, "waitingSince": seen - 60_000}  # paused a minute ago; ops waits 30 s
    assert await rt.store.replace_execution(record, expected_status="waiting", expected_updated_at=seen)
    refused = await _decide(http, thread, call, alice)
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == "this approval expired: agent 'ops' waits 30 s for a decision"


async def test_the_audit_is_for_admins_only(http: httpx.AsyncClient, idp: OidcProvider) -> None:
    r = await http.get("/api/approvals/audit", headers=_as(idp, "alice"))
    assert r.status_code == 403
    assert r.json()["error"]["message"] == "only an admin may read the audit of approval decisions"


async def test_a_tenants_admin_sees_only_the_tenants_decisions(http: httpx.AsyncClient, idp: OidcProvider) -> None:
    alice = _as(idp, "alice")
    thread, call = await _paused_call(http, alice)
    assert (await _decide(http, thread, call, alice)).status_code == 202
    other = {"Authorization": f"Bearer {idp.token(sub='olga', tenant='globex', roles=['admin'])}"}
    own = _as(idp, "root", roles=["admin"])
    assert (await http.get("/api/approvals/audit", headers=other)).json()["decisions"] == []
    assert len((await http.get("/api/approvals/audit", headers=own)).json()["decisions"]) == 1


class _Approver:
    """An MCP elicitation callback approving every question."""

    async def __call__(self, context: Any, params: Any) -> Any:
        from mcp import types

        return types.ElicitResult(action="accept", content={"approved": True})


async def _mcp_call(live: Any, token: str, agent: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30.0, read=60.0)) as client_http:
        async with Client(streamable_http_client(f"{live.base_url}/mcp", http_client=client_http),
                          elicitation_callback=_Approver()) as client:
            return await client.call_tool(agent, {"message": "wipe the cache"})


@pytest.fixture
def live(idp: OidcProvider, tmp_path: Path) -> Iterator[Any]:
    from server_fixtures import serve_app

    root = tmp_path / "live-project"
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    yield from serve_app(root, f"sqlite+aiosqlite:///{tmp_path / 'live.db'}")


async def test_an_mcp_decision_is_the_callers_and_is_audited(live: Any, idp: OidcProvider) -> None:
    result = await _mcp_call(live, idp.token(sub="alice", tenant="acme"), "ops")
    assert not result.is_error, result
    async with httpx.AsyncClient(base_url=live.base_url) as http:
        audit = (await http.get("/api/approvals/audit", headers=_as(idp, "root", roles=["admin"]))).json()
    assert [(d["decidedBy"], d["tool"], d["approved"]) for d in audit["decisions"]] == [("alice", "wipe", True)]


async def test_an_mcp_caller_outside_the_approvers_cannot_decide(live: Any, idp: OidcProvider) -> None:
    result = await _mcp_call(live, idp.token(sub="alice", tenant="acme"), "payments")
    assert result.is_error
    assert "you may not decide this call: agent 'payments' takes decisions from role:finance" in \
        result.content[0].text
