"""``/healthz`` and ``/readyz``: answered without a token, over real HTTP on both databases;
``/readyz`` turns 503 when the database stops answering and once a shutdown signal arrived."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server_fixtures import LiveServer, serve_app
from standardagents import Runtime
from standardagents.server import create_app
from store_fixtures import Backend


@pytest.fixture
def server(project_dir: Path, backend: Backend) -> Iterator[LiveServer]:
    yield from serve_app(project_dir, backend.url, schema=backend.schema)


def test_probes_answer_without_a_token_over_http(server: LiveServer) -> None:
    with httpx.Client(base_url=server.base_url) as http:
        health = http.get("/healthz")
        ready = http.get("/readyz")
        refused = http.get("/api/threads")
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "checks": {"worker": "ok", "database": "ok"}}
    assert refused.status_code == 401  # the probes are open; the API is not


def test_probes_are_in_the_openapi_document_without_security(server: LiveServer) -> None:
    doc = httpx.get(f"{server.base_url}/api/openapi.json").json()
    assert doc["paths"]["/healthz"]["get"]["security"] == []
    readyz = doc["paths"]["/readyz"]["get"]
    assert readyz["security"] == [] and set(readyz["responses"]) == {"200", "503"}


async def test_readyz_is_503_when_the_database_does_not_answer(project_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "db"
    folder.mkdir()
    rt = await Runtime.open(project_dir, database_url=f"sqlite:///{folder / 'agents.db'}")
    try:
        app = create_app(rt, close_runtime=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            assert (await http.get("/readyz")).status_code == 200
            await rt.store.close()
            shutil.rmtree(folder)  # the database is gone: reopening it fails
            r = await http.get("/readyz")
            health = await http.get("/healthz")
    finally:
        await rt.aclose()
    assert r.status_code == 503
    body = r.json()
    assert body["status"] == "unready" and body["checks"]["worker"] == "ok"
    assert body["checks"]["database"] == "unavailable (StoreError)"  # no database text leaks out
    assert health.status_code == 200  # alive, just not ready


async def test_readyz_is_503_once_sigterm_arrived_and_the_server_still_shuts_down(runtime: Runtime) -> None:
    received: list[int] = []

    def servers_own_handler(signum: int, frame: Any) -> None:
        received.append(signum)  # stands where uvicorn's handler begins its shutdown

    before = signal.signal(signal.SIGTERM, servers_own_handler)
    try:
        app = create_app(runtime, close_runtime=False)
        async with app.router.lifespan_context(app), \
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            assert (await http.get("/readyz")).status_code == 200
            signal.raise_signal(signal.SIGTERM)
            r = await http.get("/readyz")
            assert (await http.get("/healthz")).status_code == 200
        after_lifespan = signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert r.status_code == 503
    assert r.json()["checks"]["worker"] == "draining"
    assert received == [signal.SIGTERM]  # the server's own handler still ran
    assert after_lifespan is servers_own_handler  # and is back in place after shutdown
