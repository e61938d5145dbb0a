"""The worked examples of docs/identity.md run as written: the tenant handler keeps tenants
apart, and the local provider's example signs a caller in."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from server_fixtures import write_project
from standardagents import Runtime
from standardagents.server import create_app
from standardagents.testing.oidc import OidcProvider

DOCS = Path(__file__).resolve().parents[1] / "docs" / "identity.md"


def docs_block(first_line: str) -> str:
    """The python block of docs/identity.md that starts with ``first_line``."""
    found = re.search(r"```python\n(" + re.escape(first_line) + r"\n.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert found, f"docs/identity.md shows {first_line}"
    return found.group(1)


async def test_the_documented_tenant_handler_keeps_tenants_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    handler = docs_block("# agents/authorization/tenants.py")
    project = write_project(tmp_path / "project", {"agents/authorization/tenants.py": handler})
    with OidcProvider(audience="agents-api") as idp:
        monkeypatch.setenv("STANDARDAGENTS_AUTH_ISSUER", idp.issuer)
        monkeypatch.setenv("STANDARDAGENTS_AUTH_AUDIENCE", "agents-api")
        rt = await Runtime.open(project, database_url=f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")
        try:
            app = create_app(rt, close_runtime=False)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
                def auth(user: str, tenant: str) -> dict[str, str]:
                    return {"Authorization": f"Bearer {idp.token(sub=user, tenant=tenant)}"}

                thread = (await http.post("/api/threads", json={"agent": "helper"}, headers=auth("alice", "acme"))).json()
                colleague = await http.get(f"/api/threads/{thread['id']}", headers=auth("ann", "acme"))
                stranger = await http.get(f"/api/threads/{thread['id']}", headers=auth("gus", "globex"))
        finally:
            await rt.aclose()
    assert thread["metadata"]["tenant"] == "acme"
    assert (colleague.status_code, stranger.status_code) == (200, 403)


async def test_the_documented_local_provider_example_signs_a_caller_in(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    namespace: dict[str, Any] = {}
    exec(docs_block("import asyncio"), namespace)
    monkeypatch.setenv("STANDARDAGENTS_AUTH_ISSUER", "")  # the example sets it: restored afterwards
    monkeypatch.setenv("STANDARDAGENTS_AUTH_AUDIENCE", "")
    project = write_project(tmp_path / "project")
    me = await namespace["main"](str(project), f"sqlite+aiosqlite:///{tmp_path / 'e.db'}")
    assert me == {"id": "alice", "name": "Alice", "email": None, "isAdmin": False}


def test_the_documented_approvers_define_an_agent() -> None:
    namespace: dict[str, Any] = {}
    exec(docs_block("from standardagents import define_agent"), namespace)
    agent = namespace["payments"]
    assert (agent.approvers, agent.approval_expires_in) == (["role:finance"], 3600)
