"""Fixtures for the server tests: a small project written to a tmp dir, a runtime on a real
SQLite file, the app behind an httpx client, users with API tokens, and a real uvicorn
server on a free 127.0.0.1 port for the streaming and end-to-end tests.
"""

from __future__ import annotations

import socket
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from standardagents import Runtime
from standardagents.server import create_app

__all__ = [
    "Actors",
    "LiveServer",
    "actors",
    "app",
    "client",
    "live_server",
    "project_dir",
    "runtime",
    "serve_app",
    "write_project",
]

FILES: dict[str, str] = {
    "agents/agents/helper.py": """
        from standardagents import define_agent
        helper = define_agent(name="helper", type="ai_human", description="Adds numbers.",
                              side_a={"prompt": "helper_prompt", "stop_on_response": True, "max_steps": 6})
    """,
    "agents/agents/internal.py": """
        from standardagents import define_agent
        internal = define_agent(name="internal", type="ai_human", primary=False,
                                side_a={"prompt": "plain_prompt", "stop_on_response": True})
    """,
    "agents/prompts/helper_prompt.py": """
        from standardagents import define_prompt
        helper_prompt = define_prompt(name="helper_prompt", prompt="You add numbers.", tools=["add"])
    """,
    "agents/prompts/plain_prompt.py": """
        from standardagents import define_prompt
        plain_prompt = define_prompt(name="plain_prompt", prompt="You answer briefly.")
    """,
    "agents/tools/add.py": """
        from standardagents import define_tool

        @define_tool
        def add(a: int = 1, b: int = 2) -> str:
            '''Add two integers.

            Args:
                a: The first number.
                b: The second number.
            '''
            return str(a + b)
    """,
    "agents/hooks/on_attach.py": """
        from standardagents import define_hook

        @define_hook("user_client_attached", id="on_attach")
        async def on_attach(user, client):
            await user.set_value("attached", client.id)
    """,
    "agents/hooks/on_detach.py": """
        from standardagents import define_hook

        @define_hook("user_client_detached", id="on_detach")
        async def on_detach(user, client):
            await user.set_value("detached", client.id)
    """,
    "agents/hooks/on_value.py": """
        from standardagents import define_hook

        @define_hook("user_value_changed", id="on_value")
        async def on_value(user, key):
            if key != "changed":
                await user.set_value("changed", key)
    """,
    "agents/models/default.py": """
        from standardagents import define_model
        default = define_model(name="default", provider="test", model="offline")
    """,
    "agents/api/health.get.py": """
        from standardagents import define_controller

        @define_controller(access="public")
        async def health(ctx):
            return {"status": "ok", "caller": ctx.caller.id if ctx.caller else None}
    """,
    "agents/api/whoami.get.py": """
        from standardagents import define_controller

        @define_controller
        async def whoami(ctx):
            return {"caller": ctx.caller.id, "agents": ctx.agentNames, "path": ctx.url.path}
    """,
    "agents/api/items/[id].py": """
        from standardagents import define_controller

        @define_controller
        def item(ctx):
            return {"id": ctx.params["id"], "method": ctx.req.method}
    """,
    "agents/api/items/special.get.py": """
        from standardagents import define_controller
        special = define_controller(lambda ctx: "special item")
    """,
    "agents/api/nothing.post.py": """
        from standardagents import define_controller
        nothing = define_controller(lambda ctx: None)
    """,
    "agents/api/count.get.py": """
        from standardagents import define_controller

        async def numbers():
            for i in range(3):
                yield f"{i}\\n"

        count = define_controller(lambda ctx: numbers())
    """,
    "agents/api/status.get.py": """
        from standardagents import define_thread_endpoint

        @define_thread_endpoint
        async def status(req, state, params, auth):
            return {"threadId": state.thread_id, "agent": state.agent_id, "caller": auth.caller.id,
                    "threadAccess": auth.threadAccess}
    """,
    "agents/api/peek.get.py": """
        from standardagents import define_thread_endpoint

        @define_thread_endpoint(access="public")
        async def peek(req, state, params, auth):
            return {"threadId": state.thread_id,
                    "caller": auth.caller.id if auth.caller else None,
                    "threadAccess": auth.threadAccess}
    """,
    "agents/api/docs/[*].get.py": """
        from standardagents import define_thread_endpoint

        @define_thread_endpoint
        async def docs(req, state, params):
            return {"rest": params["*"]}
    """,
}


def write_project(root: Path, files: dict[str, str] | None = None) -> Path:
    """Write a project folder (the default files, overridden or extended by ``files``)."""
    for rel, text in {**FILES, **(files or {})}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    return write_project(tmp_path / "project")


@pytest.fixture
async def runtime(project_dir: Path, tmp_path: Path) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(project_dir, database_url=f"sqlite+aiosqlite:///{tmp_path / 'server.db'}")
    try:
        yield rt
    finally:
        await rt.aclose()


@pytest.fixture
def app(runtime: Runtime) -> Any:
    return create_app(runtime, max_body=10_000, close_runtime=False)


@pytest.fixture
async def client(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        yield c


@dataclass
class Actors:
    """Three users with tokens: ``alice`` and ``bob`` (plain) and ``root`` (admin)."""

    ids: dict[str, str]
    tokens: dict[str, str]

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"}


@pytest.fixture
async def actors(runtime: Runtime) -> Actors:
    ids, tokens = {}, {}
    for name, admin in (("alice", False), ("bob", False), ("root", True)):
        user = await runtime.store.create_user(name, is_admin=admin)
        _, token = await runtime.store.create_api_token(user.id, f"{name} token")
        ids[name], tokens[name] = user.id, token
    return Actors(ids, tokens)


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@dataclass
class LiveServer:
    """A running uvicorn server; ``token`` belongs to an admin user created at start-up."""

    base_url: str
    token: str
    user_id: str
    runtime: Runtime | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass
class _Holder:
    runtime: Runtime | None = None
    token: str = ""
    user_id: str = ""


def serve_app(project: Path, database_url: str, *, dev: bool = False, schema: str | None = None) -> Iterator[LiveServer]:
    """Run the app for ``project`` in a uvicorn server on its own thread and event loop
    (``schema``: a PostgreSQL schema of its own, as ``store_fixtures.Backend`` gives)."""
    holder = _Holder()

    async def open_runtime() -> Runtime:
        from standardagents.store import SQLStore

        store = SQLStore(database_url, schema=schema) if schema else None
        rt = await Runtime.open(project, database_url=database_url, store=store)
        user = await rt.store.create_user("tester", is_admin=True)
        _, holder.token = await rt.store.create_api_token(user.id, "tests")
        holder.user_id = user.id
        holder.runtime = rt
        return rt

    sock = _free_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(open_runtime, dev=dev), lifespan="on", log_level="warning",
                            ws="websockets-sansio")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    ready = threading.Event()

    def wait_started() -> None:
        while not server.started and thread.is_alive():
            ready.wait(0.02)

    wait_started()
    if not server.started:
        raise RuntimeError("the test server did not start")
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", holder.token, holder.user_id, holder.runtime)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
def live_server(project_dir: Path, tmp_path: Path) -> Iterator[LiveServer]:
    yield from serve_app(project_dir, f"sqlite+aiosqlite:///{tmp_path / 'live.db'}")
