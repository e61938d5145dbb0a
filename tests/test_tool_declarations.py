"""Tools that declare what they need: variables resolved from the env scopes, the state they
use, and a fetch held to their hosts. Real parts throughout: a project on disk, the OpenAI wire
stub as the model (it calls the tool the message names, then answers), a SQLite file or
PostgreSQL as the store, and a real HTTP server on 127.0.0.1 as the API the tools fetch from."""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.types import Receive, Scope, Send

from server_fixtures import write_project
from standardagents import FilesUse, NetworkUse, Runtime, define_tool, observability
from standardagents.credentials import grant_credential
from standardagents.exceptions import DefinitionError
from standardagents.server import create_app
from standardagents.testing import OpenAIStub, StubReply
from standardagents.testing._server import LoopbackServer
from store_fixtures import Backend

API = "/api"


class ThirdPartyAPI(LoopbackServer):
    """The API the tools fetch from: ``/data`` (JSON, noting the Authorization header),
    ``/big`` (5000 bytes), ``/slow`` (answers only at shutdown), ``/hop`` (a redirect to
    ``localhost``, a host the tools may not reach)."""

    label = "third-party-api"

    def __init__(self) -> None:
        super().__init__()
        self.authorizations: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        path = scope["path"]
        status, headers, body = 200, [(b"content-type", b"application/json")], b'{"ok": true}'
        if path == "/data":
            self.authorizations.append(dict(scope["headers"]).get(b"authorization", b"").decode())
        elif path == "/big":
            body = b"x" * 5000
        elif path == "/slow":
            await self._pause(60)
        elif path == "/hop":
            status, headers, body = 302, [(b"location", f"http://localhost:{self.port}/data".encode())], b""
        else:
            status, body = 404, b"{}"
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def model_turn(body: dict[str, Any]) -> StubReply:
    """The model: the user's message is ``{"tool": ..., "args": ...}``; call it, then answer."""
    if body["messages"][-1]["role"] == "tool":
        return StubReply(text="Done.")
    asked = json.loads(body["messages"][-1]["content"])
    return StubReply(tool_calls=[(asked["tool"], json.dumps(asked.get("args", {})))])


FILES = {
    "agents/models/default.py": """
        import os
        from standardagents import define_model
        default = define_model(name="default", provider="openai", model="stub-model",
                               base_url=os.environ["MODEL_STUB_URL"], max_retries=0)
    """,
    "agents/agents/worker.py": """
        from standardagents import define_agent
        worker = define_agent(name="worker", side_a={"prompt": "worker_prompt", "stop_on_response": True, "max_steps": 4})
    """,
    "agents/prompts/worker_prompt.py": """
        from standardagents import define_prompt
        worker_prompt = define_prompt(name="worker_prompt", prompt="You work.",
                                      tools=["show_settings", "peek_files", "fetch_url", "bare"])
    """,
    "agents/tools/bare.py": """
        from standardagents import define_tool

        @define_tool
        async def bare(state) -> str:
            '''Read a note with the thread's whole state.'''
            return f"{type(state).__name__} {await state.read_file('note.txt')}"
    """,
    "agents/tools/show_settings.py": """
        import json
        from standardagents import define_tool

        @define_tool(variables={
            "region": {"type": "string", "default": "eu", "description": "Where the data lives."},
            "limit": {"type": "integer", "description": "How many rows to read."},
            "verbose": {"type": "boolean", "optional": True},
        }, tenvs={"source": "tool"})
        async def show_settings(state) -> str:
            '''Show the settings this tool runs with.'''
            return json.dumps({**state.variables, "source": await state.get_env("source")}, sort_keys=True)
    """,
    "agents/tools/peek_files.py": """
        from standardagents import define_tool

        @define_tool(uses=["env"])
        async def peek_files(state) -> str:
            '''Peek at the thread's files.'''
            return str(await state.read_file("notes.txt"))
    """,
    "agents/tools/fetch_url.py": """
        import os
        from standardagents import NetworkUse, define_tool

        HOST = f"127.0.0.1:{os.environ['API_PORT']}"

        @define_tool(network={"allow": [HOST], "timeout": 1.0, "maxBytes": 1000, "credentials": {HOST: "github"}})
        async def fetch_url(url: str, state: NetworkUse) -> str:
            '''Fetch a URL.

            Args:
                url: The URL.
            '''
            response = await state.fetch(url)
            return f"{response.status_code} {response.text}"
    """,
}


@dataclass
class Setup:
    rt: Runtime
    api: ThirdPartyAPI
    model: OpenAIStub
    alice: str
    admin_token: str

    async def ask(self, tool: str, args: dict[str, Any] | None = None, *, thread_id: str | None = None) -> Any:
        """Run one turn where the model calls ``tool``; the tool's message."""
        content = json.dumps({"tool": tool, "args": args or {}})
        if thread_id is None:
            result = await self.rt.run("worker", content, user_id=self.alice)
        else:
            result = await self.rt.send(thread_id, content)
        messages = await self.rt.store.list_messages(result.thread_id)
        (tool_message,) = [m for m in messages if m.role == "tool"]
        assert messages[-1].content == "Done."  # the turn went on to the model's answer
        return tool_message

    async def grant(self, secret: str = "s3cret") -> None:
        await grant_credential(self.rt.store, self.rt.registry, self.alice, "github", secret, tools=["fetch_url"])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.api.port}{path}"


@pytest.fixture
async def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Setup]:
    """On a SQLite file (the env scopes are the store's own: the PostgreSQL run is below)."""
    async for s in _setup(tmp_path, monkeypatch, Backend("sqlite", f"sqlite:///{tmp_path / 'store.db'}")):
        yield s


async def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: Backend) -> AsyncIterator[Setup]:
    with ThirdPartyAPI() as api, OpenAIStub(model_turn) as model:
        monkeypatch.setenv("API_PORT", str(api.port))
        monkeypatch.setenv("MODEL_STUB_URL", model.base_url)
        project = write_project(tmp_path / "project", FILES)
        rt = await Runtime.open(project, store=backend.new_store())
        try:
            alice = await rt.store.create_user("alice")
            admin = await rt.store.create_user("root", is_admin=True)
            _, token = await rt.store.create_api_token(admin.id, "root")
            yield Setup(rt, api, model, alice.id, token)
        finally:
            await rt.aclose()


# variables ------------------------------------------------------------------------------------
@pytest.mark.parametrize("scope", ["thread", "user", "instance"])
async def test_a_variable_is_read_from_each_env_scope(setup: Setup, scope: str) -> None:
    thread = await setup.rt.create_thread("worker", user_id=setup.alice)
    scope_id = {"thread": thread.id, "user": setup.alice, "instance": ""}[scope]
    await setup.rt.store.set_env(scope, scope_id, "limit", "25")
    tool = await setup.ask("show_settings", thread_id=thread.id)
    assert json.loads(tool.content) == {"limit": 25, "region": "eu", "source": "tool", "verbose": None}


async def test_the_thread_scope_wins_over_the_user_and_the_instance(setup: Setup) -> None:
    thread = await setup.rt.create_thread("worker", user_id=setup.alice)
    for scope, scope_id, value in (("instance", "", 1), ("user", setup.alice, 2), ("thread", thread.id, 3)):
        await setup.rt.store.set_env(scope, scope_id, "limit", value)
    await setup.rt.store.set_env("user", setup.alice, "region", "us")
    tool = await setup.ask("show_settings", thread_id=thread.id)
    assert json.loads(tool.content) == {"limit": 3, "region": "us", "source": "tool", "verbose": None}


async def test_a_missing_variable_is_a_tool_error_naming_the_tool_the_variable_and_where_it_looked(setup: Setup) -> None:
    thread = await setup.rt.create_thread("worker", user_id=setup.alice)
    tool = await setup.ask("show_settings", thread_id=thread.id)
    assert (tool.tool_status, tool.content) == ("error", (
        f"Error: ToolVariableError: tool 'show_settings' needs the variable 'limit' (integer) and none is set: looked in "
        f"thread {thread.id}, user {setup.alice}, instance, the agent's env, the tool's tenvs, and it has no default. "
        "Set it with set_env (thread, user or instance scope)."))


async def test_a_variable_of_the_wrong_type_is_a_tool_error_naming_where_it_came_from(setup: Setup) -> None:
    await setup.rt.store.set_env("instance", "", "limit", "many")
    tool = await setup.ask("show_settings")
    assert (tool.tool_status, tool.content) == ("error", "Error: ToolVariableError: tool 'show_settings': the variable "
                                                         "'limit' from the instance env is not a integer: 'many' is not an integer")


async def test_variables_are_never_offered_to_the_model(setup: Setup) -> None:
    await setup.rt.store.set_env("instance", "", "limit", 5)
    await setup.ask("show_settings")
    (offered,) = [t["function"] for t in setup.model.requests[0]["tools"] if t["function"]["name"] == "show_settings"]
    assert offered["parameters"] == {"additionalProperties": False, "properties": {}, "type": "object"}


# uses -----------------------------------------------------------------------------------------
async def test_an_undeclared_capability_is_a_tool_error_and_the_turn_goes_on(setup: Setup) -> None:
    tool = await setup.ask("peek_files")
    assert (tool.tool_status, tool.content) == ("error", (
        "Error: ToolCapabilityError: tool 'peek_files' did not declare the 'files' capability (state.read_file); it "
        "declares env. Add 'files' to the tool's uses."))


# fetch ----------------------------------------------------------------------------------------
async def test_fetch_refuses_a_body_over_its_size_limit(setup: Setup) -> None:
    await setup.grant()
    tool = await setup.ask("fetch_url", {"url": setup.url("/big")})
    assert (tool.tool_status, tool.content) == ("error", (
        f"Error: FetchError: tool 'fetch_url': the response from http://127.0.0.1:{setup.api.port}/big is over its "
        "limit of 1000 bytes"))


async def test_fetch_refuses_a_host_the_tool_does_not_allow(setup: Setup) -> None:
    tool = await setup.ask("fetch_url", {"url": setup.url("/data", host="localhost")})
    assert (tool.tool_status, tool.content, setup.api.authorizations) == ("error", (
        f"Error: FetchError: tool 'fetch_url' may not fetch from 'localhost' port {setup.api.port}: its network allows "
        f"127.0.0.1:{setup.api.port}"), [])


async def test_fetch_refuses_a_redirect_to_a_host_the_tool_does_not_allow(setup: Setup) -> None:
    await setup.grant()
    tool = await setup.ask("fetch_url", {"url": setup.url("/hop")})
    assert (tool.tool_status, setup.api.authorizations) == ("error", [])
    assert tool.content.startswith("Error: FetchError: tool 'fetch_url' may not fetch from 'localhost'")


async def test_fetch_gives_up_after_its_timeout(setup: Setup) -> None:
    await setup.grant()
    tool = await setup.ask("fetch_url", {"url": setup.url("/slow")})
    assert (tool.tool_status, tool.content) == ("error", (
        f"Error: FetchError: tool 'fetch_url': GET http://127.0.0.1:{setup.api.port}/slow timed out after 1.0 s"))


async def test_fetch_without_a_grant_is_a_tool_error_naming_the_grant(setup: Setup) -> None:
    tool = await setup.ask("fetch_url", {"url": setup.url("/data")})
    assert (tool.tool_status, setup.api.authorizations) == ("error", [])
    assert tool.content.startswith("Error: CredentialError: the user has not granted the credential 'github'")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observability.set_tracer_provider(provider)
    observability.capture_content(True)
    try:
        yield exporter
    finally:
        observability.set_tracer_provider(None)
        observability.capture_content(None)


async def test_a_granted_fetch_carries_the_secret_that_no_message_event_log_or_span_shows(
        setup: Setup, caplog: pytest.LogCaptureFixture, spans: InMemorySpanExporter) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "ghp_" + secrets.token_urlsafe(24)
    await setup.grant(secret)
    with setup.rt.subscribe() as sub:
        tool = await setup.ask("fetch_url", {"url": setup.url("/data?key=hunter2")})
        events = []
        while not sub.queue.empty():
            events.append(sub.queue.get_nowait())
    store = setup.rt.store
    logs = await store.list_logs(tool.thread_id)
    seen = {
        "events": json.dumps([{"type": e.type, "data": e.data} for e in events], default=str),
        "messages": json.dumps([m.to_dict() for m in await store.list_messages(tool.thread_id)], default=str),
        "logs": json.dumps([dataclasses.asdict(r) for r in logs], default=str),
        "log records": "\n".join(f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records),
        "spans": "\n".join(s.to_json() for s in spans.get_finished_spans()),
        "model requests": json.dumps([setup.model.requests, setup.model.headers]),
    }
    fetch_spans = [s for s in spans.get_finished_spans() if s.name == "fetch GET"]
    assert (tool.content, setup.api.authorizations, len(fetch_spans)) == ('200 {"ok": true}', [f"Bearer {secret}"], 1)
    assert {where: secret in text for where, text in seen.items()} == dict.fromkeys(seen, False)
    # what the runtime records of the fetch hides the query's values (the model's own arguments,
    # which carry them, are the model's to see)
    ours = {"thread logs": seen["logs"], "fetch span": json.dumps(dict(fetch_spans[0].attributes or {})),
            "fetch log records": "\n".join(r.getMessage() for r in caplog.records if r.name == "standardagents.fetch")}
    assert {where: ("hunter2" in text, "key=***" in text) for where, text in ours.items()} == dict.fromkeys(
        ours, (False, True))


async def test_each_fetch_is_logged_in_the_thread_with_its_query_values_hidden(setup: Setup) -> None:
    await setup.grant()
    tool = await setup.ask("fetch_url", {"url": setup.url("/data?key=hunter2&page=2")})
    fetched = [r.message for r in await setup.rt.store.list_logs(tool.thread_id) if "fetched" in r.message]
    assert fetched == [f"tool fetch_url fetched GET http://127.0.0.1:{setup.api.port}/data?key=***&page=***: 200 (12 bytes)"]


# over HTTP ------------------------------------------------------------------------------------
async def test_the_runtime_view_shows_each_tools_declarations_to_an_admin(setup: Setup) -> None:
    app = create_app(setup.rt, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        r = await client.get(f"{API}/runtime", headers={"Authorization": f"Bearer {setup.admin_token}"})
    (worker,) = [a for a in r.json()["agents"] if a["name"] == "worker"]
    declared = {t["name"]: t["declares"] for t in worker["sides"][0]["tools"]}
    host = f"127.0.0.1:{setup.api.port}"
    assert declared == {
        "show_settings": {"tenvs": ["source"], "variables": {
            "region": {"type": "string", "description": "Where the data lives.", "required": False, "default": "eu"},
            "limit": {"type": "integer", "description": "How many rows to read.", "required": True},
            "verbose": {"type": "boolean", "description": "", "required": False}}},
        "peek_files": {"uses": ["env"]},
        "fetch_url": {"uses": ["network"], "network": {"allow": [host], "timeout": 1.0, "maxBytes": 1000,
                                                       "credentials": {host: "github"}}},
        "bare": {},
    }


async def test_a_variable_set_for_the_instance_reaches_a_turn_sent_over_http(setup: Setup) -> None:
    await setup.rt.store.set_env("instance", "", "limit", 7)
    _, token = await setup.rt.store.create_api_token(setup.alice, "alice")
    app = create_app(setup.rt, close_runtime=False)
    auth = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        thread = (await client.post(f"{API}/threads", json={"agent": "worker"}, headers=auth)).json()
        sent = await client.post(f"{API}/threads/{thread['id']}/messages", params={"wait": "true"}, headers=auth,
                                 json={"content": json.dumps({"tool": "show_settings"})})
        messages = (await client.get(f"{API}/threads/{thread['id']}/messages", headers=auth)).json()
    items = messages["messages"] if isinstance(messages, dict) else messages
    (tool,) = [m for m in items if m["role"] == "tool"]
    assert (sent.status_code, json.loads(tool["content"])) == (
        200, {"limit": 7, "region": "eu", "source": "tool", "verbose": None})


# on PostgreSQL too --------------------------------------------------------------------------------
async def test_variables_resolve_from_the_user_scope_on_each_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     backend: Backend) -> None:
    async for setup in _setup(tmp_path, monkeypatch, backend):
        await setup.rt.store.set_env("user", setup.alice, "limit", 11)
        tool = await setup.ask("show_settings")
        assert json.loads(tool.content) == {"limit": 11, "region": "eu", "source": "tool", "verbose": None}


# declarations ---------------------------------------------------------------------------------
async def _noop(state: Any, args: Any) -> None:
    return None


def test_a_default_that_does_not_fit_its_type_is_a_definition_error_naming_the_field() -> None:
    with pytest.raises(DefinitionError) as caught:
        define_tool(name="t", parameters={"type": "object"}, execute=_noop,
                    variables={"limit": {"type": "integer", "default": "lots"}})
    assert str(caught.value) == ("tool 't': variables.limit: default does not fit the type 'integer': "
                                 "'lots' is not an integer")


def test_an_unknown_capability_is_a_definition_error_listing_the_known_ones() -> None:
    with pytest.raises(DefinitionError) as caught:
        define_tool(name="t", parameters={"type": "object"}, execute=_noop, uses=["disk"])  # type: ignore[list-item]
    assert str(caught.value) == ("tool 't': uses: 'disk' is not a capability (known: files, messages, env, values, "
                                 "subagents, code, network, tools, effects, credentials, skills)")


def test_network_in_uses_without_hosts_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError) as caught:
        define_tool(name="t", parameters={"type": "object"}, execute=_noop, uses=["network"])
    assert str(caught.value) == ("tool 't': network: uses declares 'network' but the tool names no hosts: add "
                                 "network={'allow': [...]}")


def test_a_credential_for_a_host_the_tool_does_not_allow_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError) as caught:
        define_tool(name="t", parameters={"type": "object"}, execute=_noop,
                    network={"allow": ["api.example.com"], "credentials": {"other.example.com": "github"}})
    assert str(caught.value) == ("tool 't': network: credentials name the host 'other.example.com', which is not in "
                                 "allow (api.example.com)")


def test_the_specs_camelcase_names_are_accepted() -> None:
    tool = define_tool(name="t", parameters={"type": "object"}, execute=_noop,
                       variables={"apiBase": {"type": "url", "envKey": "API_BASE", "default": "https://x.example"}},
                       network={"allow": ["x.example"], "maxBytes": 10, "maxRedirects": 0})
    assert tool.declarations() == {
        "uses": ["network"],
        "variables": {"apiBase": {"type": "url", "description": "", "required": False, "envKey": "API_BASE",
                                  "default": "https://x.example"}},
        "network": {"allow": ["x.example"], "timeout": 10.0, "maxBytes": 10, "credentials": {}},
    }


def test_a_secret_default_is_never_shown() -> None:
    tool = define_tool(name="t", parameters={"type": "object"}, execute=_noop,
                       variables={"token": {"type": "secret", "default": "abc123"}})
    assert tool.declarations() == {"variables": {"token": {"type": "secret", "description": "", "required": False,
                                                           "default": "<hidden>"}}}


class FilesAndNetwork(FilesUse, NetworkUse, Protocol):
    """A state with two capabilities, composed as a type checker sees it."""


async def _both(state: FilesAndNetwork, args: Any) -> None:
    return None


async def _reads(state: FilesUse, args: Any) -> None:
    return None


def test_a_state_typed_with_capability_protocols_declares_them() -> None:
    tool = define_tool(name="t", parameters={"type": "object"}, execute=_both, network=["api.example.com"])
    assert tool.uses == ("files", "network")


def test_a_state_typed_for_a_capability_uses_does_not_declare_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError) as caught:
        define_tool(name="t", parameters={"type": "object"}, execute=_reads, uses=["env"])
    assert str(caught.value) == ("tool 't': uses: the handler's state is typed for files, which uses does not "
                                 "declare (env)")


def test_a_tool_that_declares_nothing_declares_nothing() -> None:
    tool = define_tool(name="t", parameters={"type": "object"}, execute=_noop)
    assert (tool.declares, tool.declarations(), tool.uses) == (False, {}, None)


# the worked example of docs/tools.md ------------------------------------------------------------
DOCS = Path(__file__).resolve().parents[1] / "docs" / "tools.md"


class WeatherAPI(LoopbackServer):
    """The weather service of the docs' example: ``/forecast`` answers the query it got, to one key."""

    label = "weather-api"

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        ok = dict(scope["headers"]).get(b"authorization", b"").decode() == f"Bearer {self.key}"
        body = f"sunny ({scope['query_string'].decode()})".encode() if ok else b"who are you?"
        await send({"type": "http.response.start", "status": 200 if ok else 401, "headers": []})
        await send({"type": "http.response.body", "body": body})


def _docs_example() -> str:
    import re

    found = re.search(r"```python\n(# agents/tools/forecast\.py\n.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert found, "docs/tools.md shows agents/tools/forecast.py"
    return found[1]


async def test_the_docs_example_forecasts_with_the_operators_variables_and_the_users_grant(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = secrets.token_urlsafe(16)
    with WeatherAPI(key) as api, OpenAIStub(model_turn) as model:
        host = f"127.0.0.1:{api.port}"
        monkeypatch.setenv("WEATHER_HOST", host)
        monkeypatch.setenv("MODEL_STUB_URL", model.base_url)
        monkeypatch.setenv("API_PORT", str(api.port))
        files = {**FILES, "agents/tools/forecast.py": _docs_example(), "agents/prompts/worker_prompt.py": """
            from standardagents import define_prompt
            worker_prompt = define_prompt(name="worker_prompt", prompt="You forecast.", tools=["forecast"])
        """}
        rt = await Runtime.open(write_project(tmp_path / "project", files),
                                store=Backend("sqlite", f"sqlite:///{tmp_path / 'store.db'}").new_store())
        try:
            alice = await rt.store.create_user("alice")
            await rt.store.set_env("instance", "", "api_base", f"http://{host}")
            await rt.store.set_env("instance", "", "days", "3")
            await grant_credential(rt.store, rt.registry, alice.id, "weather", key, tools=["forecast"])
            result = await rt.run("worker", json.dumps({"tool": "forecast", "args": {"city": "Oslo"}}), user_id=alice.id)
            (tool,) = [m for m in await rt.store.list_messages(result.thread_id) if m.role == "tool"]
        finally:
            await rt.aclose()
    assert (tool.tool_status, tool.content) == ("success", "sunny (city=Oslo&units=metric&days=3)")


def test_validate_shows_what_each_tool_declares(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from standardagents.cli import app

    project = write_project(tmp_path / "p", {"agents/tools/forecast.py": _docs_example()})
    result = CliRunner().invoke(app, ["validate", str(project)], env={"COLUMNS": "400"})
    lines = [line.strip() for line in result.output.splitlines() if line.strip().startswith("tool ")]
    assert (result.exit_code, lines) == (0, [
        "tool forecast: uses network; variables api_base (url, default 'https://api.weather.example'), units (string, "
        "default 'metric'), days (integer, required); network api.weather.example (grant weather -> "
        "api.weather.example)"])


def test_a_bad_variable_declaration_in_a_project_file_names_the_file_and_the_field(tmp_path: Path) -> None:
    from standardagents import validate_project

    project = write_project(tmp_path / "p", {"agents/tools/broken.py": """
        from standardagents import define_tool

        @define_tool(variables={"days": {"type": "integer", "default": "soon"}})
        async def broken(state) -> str:
            '''Broken.'''
            return ""
    """})
    problems = [str(p) for p in validate_project(project) if not p.warning and "broken" in str(p)]
    assert problems == ["agents/tools/broken.py: variables.days: default does not fit the type "
                        "'integer': 'soon' is not an integer"]


# strict mode ------------------------------------------------------------------------------------
@pytest.fixture
def strict() -> Iterator[None]:
    from standardagents.engine.tool_state import set_strict_uses, strict_uses

    was = strict_uses()
    set_strict_uses(True)
    try:
        yield
    finally:
        set_strict_uses(was)


async def test_without_strict_mode_a_tool_that_declares_nothing_gets_the_whole_thread_state(tmp_path: Path,
                                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    async for setup in _setup(tmp_path, monkeypatch, Backend("sqlite", f"sqlite:///{tmp_path / 's.db'}")):
        tool = await setup.ask("bare")
        assert (tool.tool_status, tool.content) == ("success", "ThreadState None")


async def test_in_strict_mode_a_project_tool_that_declares_nothing_uses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strict: None) -> None:
    async for setup in _setup(tmp_path, monkeypatch, Backend("sqlite", f"sqlite:///{tmp_path / 's.db'}")):
        tool = await setup.ask("bare")
        assert (tool.tool_status, tool.content) == ("error", (
            "Error: ToolCapabilityError: tool 'bare' did not declare the 'files' capability (state.read_file); it "
            "declares nothing. Add 'files' to the tool's uses."))


async def test_a_fetch_over_its_limit_is_a_span_marked_as_an_error(setup: Setup, spans: InMemorySpanExporter) -> None:
    from opentelemetry.trace import StatusCode

    await setup.grant()
    await setup.ask("fetch_url", {"url": setup.url("/big")})
    (span,) = [s for s in spans.get_finished_spans() if s.name == "fetch GET"]
    assert (span.status.status_code, [e.name for e in span.events], span.attributes["url.full"]) == (
        StatusCode.ERROR, ["exception"], setup.url("/big"))
