"""Shared by the multi-process benchmarks: a PostgreSQL database of their own, a project whose
model is an OpenAI wire stub, ``standardagents serve`` in its own process group, an admin
token, and a thread stream reader that reconnects with ``Last-Event-ID``.

Not a benchmark itself; the scripts beside it import it (run them from any directory)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

__all__ = ["EXE", "Follower", "database", "free_port", "kill_group", "make_token", "serve", "stop_group",
           "wait_ready", "write_project"]

EXE = Path(sys.executable).parent / "standardagents"
WORKER = "x-standardagents-worker"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def database() -> AsyncIterator[str]:
    """A database of its own on the PostgreSQL of ``STANDARDAGENTS_TEST_POSTGRES`` (or the
    local test server), dropped afterwards."""
    import asyncpg

    from standardagents.relay import asyncpg_dsn

    base = os.environ.get("STANDARDAGENTS_TEST_POSTGRES") or "postgresql://postgres@127.0.0.1:5432/test"
    admin = await asyncpg.connect(asyncpg_dsn(base), timeout=5)
    name = f"sa_bench_{uuid.uuid4().hex[:10]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base.rsplit("/", 1)[0] + "/" + name
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def write_project(root: Path, base_url: str, files: dict[str, str]) -> Path:
    """A project whose model ``stubbed`` is the stub at ``base_url``, plus ``files``."""
    everything = {
        "agents/models/stubbed.py": f"""
            from standardagents import define_model
            stubbed = define_model(name="stubbed", provider="openai", model="stub-model",
                                   base_url="{base_url}", api_key_env="STUB_API_KEY", max_retries=0)
        """,
        **files,
    }
    for rel, text in everything.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


async def make_token(database_url: str, project_dir: Path | None = None) -> str:
    """An admin's API token on that database (a relative SQLite URL is the project's)."""
    from standardagents.store import open_store

    store = open_store(database_url, project_dir=project_dir)
    await store.open()
    try:
        user = await store.create_user("bench", is_admin=True)
        _, secret = await store.create_api_token(user.id, "bench")
        return secret
    finally:
        await store.close()


def serve(project: Path, port: int, database_url: str, workers: int, env: dict[str, str] | None = None,
          log: Path | None = None) -> subprocess.Popen[bytes]:
    """``standardagents serve`` in its own process group (its output to ``log`` or nowhere)."""
    full = {**os.environ, "STUB_API_KEY": "sk-bench", **(env or {})}
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen([str(EXE), "serve", str(project), "--port", str(port), "--workers", str(workers),
                                 "--database-url", database_url], env=full, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        if log is not None and not isinstance(out, int):
            out.close()


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(20)


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        kill_group(proc)


async def wait_ready(base: str, headers: dict[str, str], within: float = 120.0) -> None:
    end = time.monotonic() + within
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=5) as client:
        while time.monotonic() < end:
            try:
                if (await client.get("/api/agents")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit("the server did not start")


class Follower:
    """One thread's SSE stream, reconnecting with ``Last-Event-ID`` when the connection breaks;
    each event is kept with the time (``time.perf_counter``) it arrived."""

    def __init__(self, base_url: str, headers: dict[str, str], thread_id: str) -> None:
        self.base_url = base_url
        self.headers = headers
        self.thread_id = thread_id
        self.events: list[tuple[float, int, dict[str, Any]]] = []
        self.opened = asyncio.Event()
        self.changed = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async with httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(30, read=None)) as client:
            while True:
                headers = dict(self.headers)
                if self.events:
                    headers["Last-Event-ID"] = str(self.events[-1][1])
                try:
                    async with client.stream("GET", f"/api/threads/{self.thread_id}/stream",
                                             headers=headers) as response:
                        if response.status_code == 200:
                            self.opened.set()
                            buffer = ""
                            async for text in response.aiter_text():
                                buffer += text
                                while "\n\n" in buffer:
                                    frame, buffer = buffer.split("\n\n", 1)
                                    fields = dict(ln.split(": ", 1) for ln in frame.splitlines() if ": " in ln)
                                    if "id" in fields and "data" in fields:
                                        self.events.append((time.perf_counter(), int(fields["id"]),
                                                            json.loads(fields["data"])))
                                        self.changed.set()
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)

    async def wait_for(self, type_: str, after: float = 0.0) -> float:
        """The arrival time of the first event of ``type_`` that arrived after ``after``."""
        while True:
            for at, _, event in self.events:
                if at > after and event["type"] == type_:
                    return at
            self.changed.clear()
            await self.changed.wait()

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task
