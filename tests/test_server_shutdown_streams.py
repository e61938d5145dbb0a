"""An open event stream does not hold a server's shutdown up: on SIGINT or SIGTERM the
thread and user streams end (the web app keeps one open for as long as a thread is shown),
and the process exits. A real server process, real signals."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import httpx
import pytest


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_open_streams_end_and_the_server_exits_on_a_signal(project_dir: Path, tmp_path: Path,
                                                                 signum: signal.Signals) -> None:
    port = _port()
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'shutdown.db'}"
    code = ("from standardagents.server import run_server; "
            f"run_server({str(project_dir)!r}, port={port}, database_url={database_url!r}, dev=True, "
            "log_level='warning')")
    server = await asyncio.create_subprocess_exec(sys.executable, "-c", code)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            for _ in range(300):
                try:
                    if (await client.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the server did not become ready")
            thread = (await client.post("/api/threads", json={"agent": "helper"})).json()["id"]
            async with client.stream("GET", f"/api/threads/{thread}/stream") as feed, \
                    client.stream("GET", "/api/users/me/stream") as mine:
                assert feed.status_code == 200 and mine.status_code == 200
                frames = feed.aiter_lines()
                assert (await anext(frames)).startswith(("data:", "id:", "event:"))
                server.send_signal(signum)
                # both streams end (rather than waiting for the client to leave); the bound
                # only turns a regression into a failure instead of a hang
                async with asyncio.timeout(60):
                    async for _ in frames:
                        pass
                    async for _ in mine.aiter_lines():
                        pass
        async with asyncio.timeout(60):
            # a clean exit (uvicorn re-raises the signal once shut down), not a crash that also
            # ended the streams
            assert await server.wait() in (0, -signum)
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
