"""The A2A door's URLs, task retention, parameter checks and card caching, driven by the real
``a2a-sdk`` Python client, the real ``@a2a-js/sdk`` JavaScript client under node, and raw
JSON-RPC over httpx, against a live server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.auth.user import User
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import new_text_part
from a2a.server.cluster.version import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.types import GetTaskRequest, Message, Role, SendMessageRequest, Task, TaskState, TaskStatus

from server_fixtures import LiveServer, serve_app, write_project
from standardagents.exceptions import DefinitionError
from standardagents.server.doors.a2a_tasks import (
    DEFAULT_RETENTION,
    RETENTION_ENV,
    StoreTaskStore,
    retention_from_env,
)
from test_doors_mcp import EXTRA

DOCS = Path(__file__).resolve().parent.parent / "docs" / "doors-a2a.md"
#: the JavaScript client the tests drive (a pinned release of the npm package)
A2A_JS = "@a2a-js/sdk@1.3.0"

SEND_JS = """\
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory }
  from "@a2a-js/sdk/client";
import { Message, taskStateToJSON } from "@a2a-js/sdk";

const [url, token, text] = process.argv.slice(2);
const asked = [];
const authorized = (input, init = {}) => {
  asked.push(`${init.method ?? "GET"} ${new URL(String(input)).pathname}`);
  const headers = new Headers(init.headers ?? {});
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl: authorized })],
  cardResolver: new DefaultAgentCardResolver({ fetchImpl: authorized }),
}));
try {
  const client = await factory.createFromUrl(url);
  const message = Message.fromJSON({ messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text }] });
  const task = await client.sendMessage({ message });
  console.log(JSON.stringify({ asked, state: taskStateToJSON(task.status.state), contextId: task.contextId }));
} catch (error) {
  console.log(JSON.stringify({ asked, error: String(error) }));
}
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    project = write_project(tmp_path / "project", EXTRA)
    yield from serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'live.db'}")


@pytest.fixture(scope="session")
def a2a_js() -> Path:
    """A folder holding ``@a2a-js/sdk`` (installed with npm into the checkout's ``.test-node``,
    once) and the script sending one message with it; skipped without node and npm."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed to run the @a2a-js/sdk client")
    folder = Path(__file__).resolve().parent.parent / ".test-node" / "a2a-js"
    folder.mkdir(parents=True, exist_ok=True)
    installed = folder / "node_modules" / "@a2a-js" / "sdk" / "package.json"
    version = A2A_JS.rsplit("@", 1)[1]
    if not installed.exists() or json.loads(installed.read_text(encoding="utf-8"))["version"] != version:
        (folder / "package.json").write_text('{"name": "a2a-js-tests", "private": true, "type": "module"}\n',
                                             encoding="utf-8")
        done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-save", A2A_JS], cwd=folder,
                              capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            pytest.skip(f"npm could not install {A2A_JS}: {done.stderr.strip()[-500:]}")
    (folder / "send.mjs").write_text(SEND_JS, encoding="utf-8")
    return folder


async def _send_with_javascript(a2a_js: Path, url: str, token: str, text: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec("node", str(a2a_js / "send.mjs"), url, token, text, cwd=a2a_js,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    answer: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return answer


async def _agent_url(live: LiveServer, agent: str) -> str:
    """The URL an agent's card gives for it (the one the docs tell clients to use)."""
    async with httpx.AsyncClient(base_url=live.base_url) as http:
        card = (await http.get(f"/a2a/{agent}/.well-known/agent-card.json")).json()
    url: str = card["supportedInterfaces"][0]["url"]
    return url


async def _thread_agent(live: LiveServer, thread_id: str) -> str:
    async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers) as http:
        thread = (await http.get(f"/api/threads/{thread_id}")).json()
    agent: str = thread["agent_id"]
    return agent


def _message(text: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER,
                                              parts=[new_text_part(text)]))


@contextlib.asynccontextmanager
async def _python_client(live: LiveServer, url: str) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(headers=live.headers, timeout=60) as http:
        client = await create_client(url, client_config=ClientConfig(httpx_client=http, streaming=False))
        try:
            yield client
        finally:
            await client.close()


async def _send_with_python(live: LiveServer, url: str, text: str) -> Task:
    async with _python_client(live, url) as client:
        tasks = [r.task async for r in client.send_message(_message(text)) if r.HasField("task")]
        assert tasks
        task: Task = tasks[-1]
        return task


def _rpc(method: str, params: Any, *, version: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    headers = {"A2A-Version": version} if version else {}
    return {"jsonrpc": "2.0", "id": "1", "method": method, "params": params}, headers


# -- the agent's URL, with and without a trailing slash ---------------------------------------


async def test_the_javascript_client_sends_to_the_agent_url_without_a_trailing_slash(
        server: LiveServer, a2a_js: Path) -> None:
    url = await _agent_url(server, "helper")
    assert not url.endswith("/")
    answer = await _send_with_javascript(a2a_js, url, server.token, "add please")
    assert answer.get("state") == "TASK_STATE_COMPLETED", answer
    assert await _thread_agent(server, answer["contextId"]) == "helper"


async def test_the_javascript_client_sends_to_the_agent_url_with_a_trailing_slash(
        server: LiveServer, a2a_js: Path) -> None:
    url = await _agent_url(server, "helper") + "/"
    answer = await _send_with_javascript(a2a_js, url, server.token, "add please")
    assert answer.get("state") == "TASK_STATE_COMPLETED", answer
    assert await _thread_agent(server, answer["contextId"]) == "helper"


async def test_the_python_client_sends_to_the_agent_url_with_and_without_a_trailing_slash(server: LiveServer) -> None:
    url = await _agent_url(server, "helper")
    plain = await _send_with_python(server, url, "add please")
    slashed = await _send_with_python(server, url + "/", "add please")
    assert plain.status.state == slashed.status.state == TaskState.TASK_STATE_COMPLETED
    assert await _thread_agent(server, plain.context_id) == await _thread_agent(server, slashed.context_id) == "helper"


async def test_json_rpc_answers_at_every_form_of_an_agent_url(server: LiveServer) -> None:
    body, _ = _rpc("tasks/get", {"id": "no-such-task"})
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        answers = {path: await http.post(path, json=body) for path in
                   ("/a2a/helper", "/a2a/helper/", "/a2a/helper/jsonrpc", "/a2a/helper/jsonrpc/")}
    assert {path: (a.status_code, a.json()["error"]["code"]) for path, a in answers.items()} == {
        path: (200, -32001) for path in answers}  # the SDK's "task not found": each reached the door


async def test_the_card_answers_at_every_form_of_an_agent_url(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        cards = [(await http.get(f"{base}/.well-known/agent-card.json")).json()
                 for base in ("/a2a/helper", "/a2a/helper/jsonrpc")]
    assert [card["name"] for card in cards] == ["helper", "helper"]


async def test_the_card_path_that_names_no_agent_is_not_found(server: LiveServer) -> None:
    """Where the JavaScript client looks for ``/a2a/{agent}`` without the slash: no agent's
    card is given there (it could be the wrong agent's), but a 404 saying which URL to use."""
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        answer = await http.get("/a2a/.well-known/agent-card.json")
    assert answer.status_code == 404
    assert "/a2a/{agent}/jsonrpc" in answer.json()["error"]["message"]


async def test_the_docs_javascript_example_runs(server: LiveServer, a2a_js: Path) -> None:
    code = re.search(r"```js\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert code, "docs/doors-a2a.md has a JavaScript example"
    (a2a_js / "docs_example.mjs").write_text(code[1], encoding="utf-8")
    env = {**os.environ, "STANDARDAGENTS_URL": server.base_url, "STANDARDAGENTS_TOKEN": server.token}
    proc = await asyncio.create_subprocess_exec("node", "docs_example.mjs", cwd=a2a_js, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    assert out.decode().split()[0] == "TASK_STATE_COMPLETED"


# -- retention of the tasks that ended --------------------------------------------------------


class _Caller(User):
    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.name


def _task(task_id: str, state: TaskState) -> Task:
    return Task(id=task_id, context_id=f"ctx-{task_id}", status=TaskStatus(state=state))


async def test_prune_deletes_the_tasks_that_ended_longer_ago_than_the_retention_and_keeps_the_others(
        make_runtime: Callable[..., Any]) -> None:
    rt = await make_runtime()
    now = [1_000_000]
    tasks = StoreTaskStore(rt, set(), retention=60.0, clock=lambda: now[0])
    caller = ServerCallContext(user=_Caller("u1"))
    await tasks.save(_task("old", TaskState.TASK_STATE_COMPLETED), event=None, prev=None,
                     prev_version=TaskVersion.MISSING, context=caller)
    now[0] += 30_000
    await tasks.save(_task("young", TaskState.TASK_STATE_FAILED), event=None, prev=None,
                     prev_version=TaskVersion.MISSING, context=caller)
    now[0] += 30_000  # "old" ended 60 s ago, "young" 30 s ago

    assert await tasks.prune() == 1
    assert await tasks.get("old", caller) is None
    assert await rt.store.list_env("system", "a2a_task:old") == {}
    young = await tasks.get("young", caller)
    assert young is not None and young.task.status.state == TaskState.TASK_STATE_FAILED
    from a2a.types import ListTasksRequest

    assert [t.id for t in (await tasks.list(ListTasksRequest(), caller)).tasks] == ["young"]


def test_the_retention_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RETENTION_ENV, raising=False)
    default = retention_from_env()
    monkeypatch.setenv(RETENTION_ENV, "90")
    ninety = retention_from_env()
    monkeypatch.setenv(RETENTION_ENV, "off")
    kept = retention_from_env()
    monkeypatch.setenv(RETENTION_ENV, "-1")
    with pytest.raises(DefinitionError, match=RETENTION_ENV):
        retention_from_env()
    assert (default, ninety, kept) == (DEFAULT_RETENTION, 90.0, None)


@pytest.fixture
def server_keeping_no_ended_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    monkeypatch.setenv(RETENTION_ENV, "0")
    project = write_project(tmp_path / "project", EXTRA)
    yield from serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'live.db'}")


async def test_with_no_retention_an_ended_task_is_deleted_when_the_next_starts_and_a_waiting_one_stays(
        server_keeping_no_ended_task: LiveServer) -> None:
    live = server_keeping_no_ended_task
    helper = await _agent_url(live, "helper")
    guarded = await _agent_url(live, "guarded")
    done = await _send_with_python(live, helper, "add please")
    waiting = await _send_with_python(live, guarded, "wipe")
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    later = await _send_with_python(live, helper, "add again")
    async with _python_client(live, helper) as client:
        with pytest.raises(Exception, match=r"(?i)not found"):
            await client.get_task(GetTaskRequest(id=done.id))
        still = await client.get_task(GetTaskRequest(id=waiting.id))
        last = await client.get_task(GetTaskRequest(id=later.id))
    assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert last.status.state == TaskState.TASK_STATE_COMPLETED


# -- parameters ---------------------------------------------------------------------------------


async def test_list_tasks_with_a_status_that_is_no_task_state_is_invalid_params(server: LiveServer) -> None:
    await _send_with_python(server, await _agent_url(server, "helper"), "add please")  # a task to list
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        answers = []
        for status in ("TASK_STATE_BOGUS", "completed", 99):
            body, headers = _rpc("ListTasks", {"status": status}, version="1.0")
            answers.append((await http.post("/a2a/helper", json=body, headers=headers)).json())
    assert [("result" in a, a["error"]["code"]) for a in answers] == [(False, -32602)] * 3
    assert "TASK_STATE_COMPLETED" in answers[0]["error"]["message"]


async def test_list_tasks_with_a_task_state_still_filters(server: LiveServer) -> None:
    await _send_with_python(server, await _agent_url(server, "helper"), "add please")
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        body, headers = _rpc("ListTasks", {"status": "TASK_STATE_COMPLETED"}, version="1.0")
        completed = (await http.post("/a2a/helper", json=body, headers=headers)).json()["result"]
        body, headers = _rpc("ListTasks", {"status": "TASK_STATE_WORKING"}, version="1.0")
        working = (await http.post("/a2a/helper", json=body, headers=headers)).json()["result"]
    assert len(completed["tasks"]) == 1 and working["tasks"] == []


async def test_v03_params_that_do_not_validate_are_invalid_params(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        missing = (await http.post("/a2a/helper", json=_rpc("tasks/get", {})[0])).json()
        wrong = (await http.post("/a2a/helper", json=_rpc("message/send", {"message": {
            "kind": "message", "role": "user"}})[0])).json()
    assert (missing["error"]["code"], wrong["error"]["code"]) == (-32602, -32602)
    assert "params.id" in missing["error"]["message"]
    assert "params.message.messageId" in wrong["error"]["message"]


async def test_a_v03_request_that_is_malformed_stays_invalid_request(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        answer = (await http.post("/a2a/helper", json={"jsonrpc": "2.0", "id": "1",
                                                               "method": "tasks/get", "params": "x"})).json()
    assert answer["error"]["code"] == -32600


# -- card caching ---------------------------------------------------------------------------------


async def test_the_card_carries_cache_control_etag_and_last_modified(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        answers = [await http.get(path) for path in
                   ("/.well-known/agent-card.json", "/a2a/helper/jsonrpc/.well-known/agent-card.json")]
    for answer in answers:
        assert answer.status_code == 200
        assert "max-age=" in answer.headers["cache-control"]
        assert answer.headers["etag"].startswith('"') and answer.headers["etag"].endswith('"')
        assert answer.headers["last-modified"].endswith(" GMT")
    assert answers[0].headers["etag"] != answers[1].headers["etag"]


async def test_a_card_revalidated_with_its_etag_is_not_modified(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        first = await http.get("/a2a/helper/.well-known/agent-card.json")
        again = await http.get("/a2a/helper/.well-known/agent-card.json",
                               headers={"If-None-Match": first.headers["etag"]})
        other = await http.get("/a2a/helper/.well-known/agent-card.json", headers={"If-None-Match": '"other"'})
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", first.headers["etag"])
    assert other.status_code == 200 and other.json() == first.json()


async def test_a_card_revalidated_with_its_last_modified_is_not_modified(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        first = await http.get("/.well-known/agent-card.json")
        again = await http.get("/.well-known/agent-card.json",
                               headers={"If-Modified-Since": first.headers["last-modified"]})
    assert again.status_code == 304
