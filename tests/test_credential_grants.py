"""Credential grants: a user's secret handed to the tools it was granted to, never to the
model. Real parts throughout: the project's tool (the one docs/credentials.md shows) calls a
real HTTP stub of a third-party API, the model is the OpenAI wire stub calling each agent's
tool once, the database is a SQLite file or PostgreSQL, and the grants API is driven with real
API tokens."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.types import Receive, Scope, Send

from server_fixtures import write_project
from standardagents import Runtime, observability
from standardagents.credentials import (
    GRANT_SCOPE,
    Credential,
    CredentialError,
    grant_credential,
    grant_scope_id,
    list_credential_grants,
    revoke_credential_grant,
)
from standardagents.events import Event
from standardagents.server import create_app
from standardagents.testing import OpenAIStub, StubReply
from standardagents.testing._server import LoopbackServer
from store_fixtures import Backend

DOCS = Path(__file__).resolve().parent.parent / "docs" / "credentials.md"
API = "/api"
REPOS = [{"name": "hello-world"}, {"name": "spoon-knife"}]


class FakeGitHub(LoopbackServer):
    """A third-party API that answers ``GET /users/{owner}/repos`` to one bearer token."""

    label = "fake-github"

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token
        self.authorizations: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        self.authorizations.append(auth)
        ok = auth == f"Bearer {self.token}" and re.fullmatch(r"/users/[^/]+/repos", scope["path"]) is not None
        body = json.dumps(REPOS if ok else {"message": "Bad credentials"}).encode()
        await send({"type": "http.response.start", "status": 200 if ok else 401,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


def _docs_tool() -> str:
    found = re.search(r"```python\n(# agents/tools/list_repos\.py\n.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert found, "docs/credentials.md shows agents/tools/list_repos.py"
    return found[1]


#: the arguments the model calls each agent's one tool with
CALLS = {"list_repos": {"owner": "octocat"}, "peek": {"what": "the token"}, "push_repo": {"name": "demo"}}


def model_turn(body: dict[str, Any]) -> StubReply:
    """The model: call the prompt's tool once, then answer after its result."""
    if body["messages"][-1]["role"] == "tool":
        return StubReply(text="Done.")
    tool = body["tools"][0]["function"]["name"]
    return StubReply(tool_calls=[(tool, json.dumps(CALLS[tool]))])


FILES = {
    "agents/models/default.py": """
        import os
        from standardagents import define_model
        default = define_model(name="default", provider="openai", model="stub-model",
                               base_url=os.environ["MODEL_STUB_URL"], max_retries=0)
    """,
    "agents/agents/coder.py": """
        from standardagents import define_agent
        coder = define_agent(name="coder", side_a={"prompt": "coder_prompt", "stop_on_response": True, "max_steps": 4})
    """,
    "agents/prompts/coder_prompt.py": """
        from standardagents import define_prompt
        coder_prompt = define_prompt(name="coder_prompt", prompt="You look at GitHub.", tools=["list_repos"])
    """,
    "agents/agents/snoop.py": """
        from standardagents import define_agent
        snoop = define_agent(name="snoop", side_a={"prompt": "snoop_prompt", "stop_on_response": True, "max_steps": 4})
    """,
    "agents/prompts/snoop_prompt.py": """
        from standardagents import define_prompt
        snoop_prompt = define_prompt(name="snoop_prompt", prompt="You peek.", tools=["peek"])
    """,
    "agents/tools/peek.py": """
        from standardagents import define_tool

        @define_tool
        async def peek(what: str, state) -> str:
            '''Peek at a credential.

            Args:
                what: Anything.
            '''
            github = await state.credential("github")
            return f"got {github!r}"
    """,
    "agents/agents/writer.py": """
        from standardagents import define_agent
        writer = define_agent(name="writer", side_a={"prompt": "writer_prompt", "stop_on_response": True, "max_steps": 4})
    """,
    "agents/prompts/writer_prompt.py": """
        from standardagents import define_prompt
        writer_prompt = define_prompt(name="writer_prompt", prompt="You write to GitHub.", tools=["push_repo"])
    """,
    "agents/tools/push_repo.py": """
        from standardagents import define_tool

        @define_tool
        async def push_repo(name: str, state) -> str:
            '''Push to a repository.

            Args:
                name: The repository.
            '''
            await state.credential("github", scope="repo:write")
            return "pushed"
    """,
}


@dataclass
class Setup:
    rt: Runtime
    api: FakeGitHub
    model: OpenAIStub
    secret: str
    alice: str
    bob: str
    tokens: dict[str, str]

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    async def grant(self, **fields: Any) -> Any:
        options: dict[str, Any] = {"tools": ["list_repos"], "scopes": ["repo:read"], **fields}
        return await grant_credential(self.rt.store, self.rt.registry, self.alice, "github", self.secret, **options)

    def client(self) -> httpx.AsyncClient:
        app = create_app(self.rt, close_runtime=False)
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


@pytest.fixture
async def setup(tmp_path: Path, backend: Backend, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Setup]:
    secret = "ghp_" + secrets.token_urlsafe(24)
    with FakeGitHub(secret) as api, OpenAIStub(model_turn) as model:
        monkeypatch.setenv("GITHUB_API_URL", api.url)
        monkeypatch.setenv("MODEL_STUB_URL", model.base_url)
        project = write_project(tmp_path / "project", {**FILES, "agents/tools/list_repos.py": _docs_tool()})
        rt = await Runtime.open(project, store=backend.new_store())
        try:
            tokens = {}
            ids = {}
            for name in ("alice", "bob"):
                user = await rt.store.create_user(name)
                _, tokens[name] = await rt.store.create_api_token(user.id, name)
                ids[name] = user.id
            yield Setup(rt, api, model, secret, ids["alice"], ids["bob"], tokens)
        finally:
            await rt.aclose()


def _drain(sub: Any) -> list[Event]:
    events = []
    while not sub.queue.empty():
        events.append(sub.queue.get_nowait())
    return events


def _tool_message(messages: list[Any]) -> Any:
    (tool,) = [m for m in messages if m.role == "tool"]
    return tool


# using a grant --------------------------------------------------------------------------------
async def test_a_granted_tool_calls_the_api_with_the_users_secret(setup: Setup) -> None:
    await setup.grant()
    result = await setup.rt.run("coder", "Which repositories does octocat have?", user_id=setup.alice)
    tool = _tool_message(await setup.rt.store.list_messages(result.thread_id))
    assert (tool.content, setup.api.authorizations) == ("hello-world, spoon-knife", [f"Bearer {setup.secret}"])


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observability.set_tracer_provider(provider)
    observability.capture_content(True)  # tool arguments and results and messages in the spans too
    try:
        yield exporter
    finally:
        observability.set_tracer_provider(None)
        observability.capture_content(None)


async def test_the_secret_reaches_neither_the_model_nor_any_message_event_log_record_execution_or_trace(
        setup: Setup, caplog: pytest.LogCaptureFixture, spans: InMemorySpanExporter) -> None:
    caplog.set_level(logging.DEBUG)
    await setup.grant()
    with setup.rt.subscribe() as sub:
        result = await setup.rt.run("coder", "Which repositories does octocat have?", user_id=setup.alice)
        events = _drain(sub)
    store = setup.rt.store
    messages = await store.list_messages(result.thread_id, include_silent=True)
    logs = await store.list_logs(result.thread_id)
    executions = await store.list_executions(thread_id=result.thread_id)
    seen = {
        "events": json.dumps([{"type": e.type, "data": e.data} for e in events], default=str),
        "messages": json.dumps([m.to_dict() for m in messages], default=str),
        "logs": json.dumps([dataclasses.asdict(r) for r in logs], default=str),
        "executions": json.dumps([dataclasses.asdict(r) for r in executions], default=str),
        "log records": "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in caplog.records),
        "spans": "\n".join(s.to_json() for s in spans.get_finished_spans()),
        "result": json.dumps(result.to_dict(), default=str),
        "model requests": json.dumps([setup.model.requests, setup.model.headers]),
    }
    # the run did use the secret, was traced and the model read the tool's result, so the
    # secret's absence below means something
    assert (setup.api.authorizations, "execute_tool list_repos" in seen["spans"],
            "hello-world, spoon-knife" in seen["model requests"]) == ([f"Bearer {setup.secret}"], True, True)
    assert {where: setup.secret in text for where, text in seen.items()} == dict.fromkeys(seen, False)


async def test_the_secret_is_stored_encrypted(setup: Setup, backend: Backend) -> None:
    await setup.grant()
    rows = await backend.fetch(f"SELECT scope_id, key, value FROM env_values WHERE scope_id LIKE {backend.param(1)}",
                               "grant%")
    assert [(r[0], r[1]) for r in rows] == [(f"grant:{setup.alice}", "github")]
    assert setup.secret not in str(rows[0][2])


async def test_each_use_is_audited_in_the_threads_logs_without_the_secret(setup: Setup) -> None:
    grant = await setup.grant()
    with setup.rt.subscribe() as sub:
        result = await setup.rt.run("coder", "Which repositories does octocat have?", user_id=setup.alice)
        logged = [e.data for e in _drain(sub) if e.type == "log"]
    (row,) = await setup.rt.store.list_logs(result.thread_id)
    tool = _tool_message(await setup.rt.store.list_messages(result.thread_id))
    expected = {"credential": "github", "tool": "list_repos", "toolCallId": tool.tool_call_id,
                "grantId": grant.id, "outcome": "used"}
    assert (row.level, row.message, row.data) == ("info", "credential 'github' used by tool 'list_repos'", expected)
    assert [(e["message"], e["data"]) for e in logged] == [(row.message, expected)]


# refusals the model reads --------------------------------------------------------------------
async def test_a_revoked_grant_is_a_tool_error_the_model_reads(setup: Setup) -> None:
    async with setup.client() as c:
        created = await c.post(f"{API}/users/me/grants", headers=setup.auth("alice"),
                               json={"name": "github", "secret": setup.secret, "tools": ["list_repos"],
                                     "scopes": ["repo:read"]})
        assert created.status_code == 201
        revoked = await c.delete(f"{API}/users/me/grants/github", headers=setup.auth("alice"))
        assert revoked.json()["status"] == "revoked"
        thread = (await c.post(f"{API}/threads", json={"agent": "coder"}, headers=setup.auth("alice"))).json()
        sent = await c.post(f"{API}/threads/{thread['id']}/messages?wait=true", json={"content": "Which repositories does octocat have?"},
                            headers=setup.auth("alice"))
        assert sent.status_code == 200
    tool = _tool_message(await setup.rt.store.list_messages(thread["id"]))
    assert re.fullmatch(r"Error: CredentialError: the user revoked the credential 'github' on \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: "
                        r"ask them to grant it again if this tool should act for them", tool.content)
    assert setup.api.authorizations == []


async def test_a_tool_the_grant_does_not_name_gets_an_error_and_no_secret(setup: Setup) -> None:
    await setup.grant()
    result = await setup.rt.run("snoop", "Peek at my token.", user_id=setup.alice)
    tool = _tool_message(await setup.rt.store.list_messages(result.thread_id))
    assert tool.content == ("Error: CredentialError: the credential 'github' is not granted to the tool 'peek' "
                            "(only to list_repos): the user may grant it to this tool too")


async def test_a_scope_the_grant_lacks_is_a_tool_error(setup: Setup) -> None:
    await setup.grant(tools=["push_repo"])
    result = await setup.rt.run("writer", "Push demo.", user_id=setup.alice)
    tool = _tool_message(await setup.rt.store.list_messages(result.thread_id))
    assert tool.content == ("Error: CredentialError: the credential 'github' is not granted the scope 'repo:write' "
                            "(granted: repo:read)")


async def test_a_grant_the_user_never_gave_is_a_tool_error_naming_it(setup: Setup) -> None:
    await setup.grant()
    result = await setup.rt.run("coder", "Which repositories does octocat have?", user_id=setup.bob)  # alice's grant is not bob's
    tool = _tool_message(await setup.rt.store.list_messages(result.thread_id))
    assert tool.content == ("Error: CredentialError: the user has not granted the credential 'github': ask them to grant it "
                            "(to the tool 'list_repos') if this tool should act for them")


async def test_an_expired_grant_is_a_tool_error(setup: Setup) -> None:
    await setup.grant(expires_in=3600)
    # the clock moves on: the stored grant's end is put in the past
    record = await setup.rt.store.get_env(GRANT_SCOPE, grant_scope_id(setup.alice), "github")
    await setup.rt.store.set_env(GRANT_SCOPE, grant_scope_id(setup.alice), "github", {**record, "expiresAt": 1_700_000_000_000})
    result = await setup.rt.run("coder", "Which repositories does octocat have?", user_id=setup.alice)
    tool = _tool_message(await setup.rt.store.list_messages(result.thread_id))
    assert tool.content == ("Error: CredentialError: the credential 'github' expired on 2023-11-14T22:13:20Z: "
                            "ask the user to grant it again")


async def test_a_refused_use_is_audited_as_a_warning(setup: Setup) -> None:
    result = await setup.rt.run("coder", "Which repositories does octocat have?", user_id=setup.alice)
    (row,) = await setup.rt.store.list_logs(result.thread_id)
    assert (row.level, row.message.split(":")[0], row.data["outcome"], row.data["grantId"]) == (
        "warning", "credential 'github' refused to tool 'list_repos'", "refused", None)


async def test_a_credential_asked_outside_a_running_tool_is_refused(setup: Setup) -> None:
    await setup.grant()
    thread = await setup.rt.create_thread("coder", user_id=setup.alice)
    state = await setup.rt.state(thread.id)
    with pytest.raises(CredentialError) as raised:
        await state.credential("github")
    assert str(raised.value) == ("a credential is handed only to a running tool it was granted to "
                                 "(state.credential is for tools)")


async def test_a_sealed_secret_copied_to_another_user_does_not_open(setup: Setup) -> None:
    await setup.grant()
    record = await setup.rt.store.get_env(GRANT_SCOPE, grant_scope_id(setup.alice), "github")
    await setup.rt.store.set_env(GRANT_SCOPE, grant_scope_id(setup.bob), "github", record)
    result = await setup.rt.run("coder", "Which repositories does octocat have?", user_id=setup.bob)
    tool = _tool_message(await setup.rt.store.list_messages(result.thread_id))
    assert tool.content.startswith("Error: CredentialError: the credential 'github' cannot be read with this server's secret")
    assert setup.api.authorizations == []


def test_a_credential_never_shows_its_secret() -> None:
    credential = Credential(name="github", secret="ghp_very_secret", scopes=("repo:read",))
    assert (repr(credential), str(credential), f"{credential}") == (
        "Credential(name='github', scopes=['repo:read'], secret=<hidden>)",) * 3


# granting and revoking -----------------------------------------------------------------------
async def test_the_grants_api_answers_without_the_secret(setup: Setup) -> None:
    async with setup.client() as c:
        created = await c.post(f"{API}/users/me/grants", headers=setup.auth("alice"),
                               json={"name": "github", "secret": setup.secret, "tools": ["list_repos"],
                                     "scopes": ["repo:read"], "expiresIn": 60, "description": "my GitHub"})
        listed = await c.get(f"{API}/users/me/grants", headers=setup.auth("alice"))
        one = await c.get(f"{API}/users/me/grants/github", headers=setup.auth("alice"))
    body = created.json()
    assert (created.status_code, sorted(body)) == (201, ["createdAt", "description", "expiresAt", "id", "name",
                                                         "revokedAt", "scopes", "status", "tools"])
    assert (body["tools"], body["scopes"], body["status"], body["expiresAt"] - body["createdAt"]) == (
        ["list_repos"], ["repo:read"], "active", 60_000)
    assert (listed.json(), one.json()) == ({"grants": [body]}, body)
    assert setup.secret not in created.text + listed.text + one.text


async def test_a_user_sees_and_revokes_only_their_own_grants(setup: Setup) -> None:
    await setup.grant()
    async with setup.client() as c:
        listed = await c.get(f"{API}/users/me/grants", headers=setup.auth("bob"))
        revoked = await c.delete(f"{API}/users/me/grants/github", headers=setup.auth("bob"))
    assert (listed.json(), revoked.status_code) == ({"grants": []}, 404)
    assert [g.status() for g in await list_credential_grants(setup.rt.store, setup.alice)] == ["active"]


async def test_the_grants_api_needs_a_token(setup: Setup) -> None:
    async with setup.client() as c:
        r = await c.post(f"{API}/users/me/grants", json={"name": "github", "secret": "x", "tools": ["list_repos"]})
    assert r.status_code == 401


async def test_a_grant_naming_an_unknown_tool_is_refused_and_nothing_is_stored(setup: Setup) -> None:
    async with setup.client() as c:
        r = await c.post(f"{API}/users/me/grants", headers=setup.auth("alice"),
                         json={"name": "github", "secret": setup.secret, "tools": ["list_repos", "deploy"]})
    assert (r.status_code, r.json()["error"]["message"]) == (
        422, "tools: unknown tool 'deploy' (known tools: add, list_repos, peek, push_repo)")
    assert await list_credential_grants(setup.rt.store, setup.alice) == []


@pytest.mark.parametrize(("body", "message"), [
    ({"name": "github", "secret": "s", "tools": "list_repos"}, "tools: a list of names"),
    ({"name": "git hub", "secret": "s", "tools": ["list_repos"]},
     "name: 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit"),
    ({"name": "github", "secret": "", "tools": ["list_repos"]}, "secret: a non-empty string of at most 16384 characters"),
    ({"name": "github", "secret": "s", "tools": []}, "tools: name at least one"),
    ({"name": "github", "secret": "s", "tools": ["list_repos"], "expiresAt": "2001-01-01T00:00:00Z"},
     "expiresAt: the time is already past"),
    ({"name": "github", "secret": "s", "tools": ["list_repos"], "expiresIn": -5},
     "expiresIn: a number of seconds, more than 0 and at most ten years"),
    ({"name": "github", "secret": "s", "tools": ["list_repos"], "token": "x"},
     "unknown field 'token' (a grant takes description, expiresAt, expiresIn, name, scopes, secret, tools)"),
    ({"secret": "s", "tools": ["list_repos"]}, "name: required"),
])
async def test_a_bad_grant_is_one_422_and_nothing_is_stored(setup: Setup, body: dict[str, Any], message: str) -> None:
    async with setup.client() as c:
        r = await c.post(f"{API}/users/me/grants", headers=setup.auth("alice"), json=body)
    assert (r.status_code, r.json()["error"]["message"]) == (422, message)
    assert await list_credential_grants(setup.rt.store, setup.alice) == []


async def test_revoking_drops_the_encrypted_secret_and_keeps_the_record(setup: Setup) -> None:
    grant = await setup.grant()
    revoked = await revoke_credential_grant(setup.rt.store, setup.alice, "github")
    record = await setup.rt.store.get_env(GRANT_SCOPE, grant_scope_id(setup.alice), "github")
    assert revoked is not None
    assert (revoked.id, revoked.status(), "secret" in record) == (grant.id, "revoked", False)


async def test_granting_again_replaces_a_revoked_grant(setup: Setup) -> None:
    await setup.grant()
    await revoke_credential_grant(setup.rt.store, setup.alice, "github")
    await setup.grant()
    result = await setup.rt.run("coder", "Which repositories does octocat have?", user_id=setup.alice)
    assert _tool_message(await setup.rt.store.list_messages(result.thread_id)).content == "hello-world, spoon-knife"
