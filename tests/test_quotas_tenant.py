"""Tenant quotas: with ``by="tenant"`` the daily token and cost limits count what every user of
the tenant spent today, so a colleague of a user who spent the tenant's tokens is refused (429
with Retry-After) through the REST API and the OpenAI door, while another tenant is not. The
callers sign in with tokens of a local OIDC provider that carry their tenant."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from server_fixtures import LiveServer, serve_app, write_project
from standardagents.testing import OpenAIStub, StubReply
from standardagents.testing.oidc import OidcProvider

AUDIENCE = "sa-api"
#: each reply spends 120 tokens; the tenant may spend 100 a day
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub(lambda _body: StubReply(text="ok", usage=USAGE)) as s:
        yield s


@pytest.fixture
def idp(monkeypatch: pytest.MonkeyPatch) -> Iterator[OidcProvider]:
    with OidcProvider(audience=AUDIENCE) as provider:
        monkeypatch.setenv("STANDARDAGENTS_AUTH_ISSUER", provider.issuer)
        monkeypatch.setenv("STANDARDAGENTS_AUTH_AUDIENCE", AUDIENCE)
        yield provider


@pytest.fixture
def live(tmp_path: Path, stub: OpenAIStub, idp: OidcProvider, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    monkeypatch.setenv("STANDARDAGENTS_QUOTAS", json.dumps({"by": "tenant", "tokensPerDay": 100}))
    project = write_project(tmp_path / "project", {"agents/models/default.py": f"""
        from standardagents import define_model
        default = define_model(name="default", provider="openai", model="stub-model",
                               base_url="{stub.base_url}", max_retries=0)
    """, "agents/agents/helper.py": """
        from standardagents import define_agent
        helper = define_agent(name="helper", type="ai_human",
                              side_a={"prompt": "plain_prompt", "stop_on_response": True})
    """})
    yield from serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'q.db'}")


async def _turn(live: LiveServer, idp: OidcProvider, user: str, tenant: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {idp.token(sub=user, tenant=tenant)}"}
    async with httpx.AsyncClient(base_url=live.base_url, headers=headers, timeout=60) as c:
        thread = await c.post("/api/threads", json={"agent": "helper"})
        assert thread.status_code == 201, thread.text
        return await c.post(f"/api/threads/{thread.json()['id']}/messages?wait=true", json={"content": "hello"})


async def test_a_colleague_is_refused_once_the_tenant_spent_its_tokens(live: LiveServer, idp: OidcProvider) -> None:
    first = await _turn(live, idp, "alice", "acme")
    refused = await _turn(live, idp, "ann", "acme")
    assert first.status_code == 200
    assert refused.status_code == 429
    assert refused.json()["error"]["message"] == "tenant:acme has used 120 tokens today, over tokensPerDay (100)"
    assert 1 <= int(refused.headers["retry-after"]) <= 86_400


async def test_another_tenant_still_has_its_own_tokens(live: LiveServer, idp: OidcProvider) -> None:
    await _turn(live, idp, "alice", "acme")
    other = await _turn(live, idp, "gus", "globex")
    assert other.status_code == 200


async def test_the_openai_door_refuses_a_colleague_with_a_rate_limit_error(
        live: LiveServer, idp: OidcProvider) -> None:
    await _turn(live, idp, "alice", "acme")
    async with openai.AsyncOpenAI(base_url=f"{live.base_url}/v1", max_retries=0,
                                  api_key=idp.token(sub="ann", tenant="acme")) as client:
        with pytest.raises(openai.RateLimitError) as refused:
            await client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "hi"}])
    assert refused.value.status_code == 429
    assert 1 <= int(refused.value.response.headers["retry-after"]) <= 86_400
    assert "tenant:acme has used 120 tokens today, over tokensPerDay (100)" in refused.value.message
