"""``/metrics`` of a real ``standardagents serve --workers 2`` on PostgreSQL, scraped during and after a
load of concurrent turns: whichever worker answers, the counters add up to the store."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from standardagents.store import open_store
from test_server_workers import (
    WORKER,
    database,  # noqa: F401  (a PostgreSQL database of the test's own)
)

EXE = Path(sys.executable).parent / "standardagents"
QUICKSTART = Path(__file__).parent.parent / "examples" / "quickstart"
TURNS = 6


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server(project: Path, port: int, database: str, env: dict[str, str]) -> subprocess.Popen[str]:  # noqa: F811
    return subprocess.Popen([str(EXE), "serve", str(project), "--port", str(port), "--workers", "2",
                             "--database-url", database], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def total(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in found.items() if n == name and all((k, w) in ls for k, w in labels.items()))


async def _both_workers_answer(base: str, headers: dict[str, str]) -> None:
    """Wait until each of the two workers has answered once (fresh connections land on either):
    one that is still starting would miss the other's events, relayed only to live workers."""
    seen: set[str] = set()
    for _ in range(600):
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as probe:
            with contextlib.suppress(httpx.TransportError):
                answer = await probe.get("/api/agents")
                if answer.status_code == 200:
                    seen.add(answer.headers[WORKER])
        if len(seen) == 2:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"only worker(s) {sorted(seen)} answered")


async def test_metrics_of_two_workers_add_up_to_the_store(tmp_path: Path, database: str) -> None:  # noqa: F811
    project = tmp_path / "project"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".standardagents", "__pycache__"))
    store = open_store(database)
    await store.open()
    user = await store.create_user("metrics-test", is_admin=True)
    _, token = await store.create_api_token(user.id, "tests")
    await store.close()
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OTEL_", "PROMETHEUS_", "STANDARDAGENTS_"))}
    proc = _start_server(project, port, database, env)
    headers = {"Authorization": f"Bearer {token}"}
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
            for _ in range(600):
                try:
                    if (await client.get("/api/agents")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the server did not start")
            await _both_workers_answer(base, headers)
            async with httpx.AsyncClient(base_url=base, timeout=10) as anonymous:
                assert (await anonymous.get("/metrics")).status_code == 401

            async def turn(i: int) -> None:
                # a connection each, so the turns spread over both workers
                async with httpx.AsyncClient(base_url=base, headers=headers, timeout=120) as own:
                    thread = (await own.post("/api/threads", json={"agent": "assistant"})).json()["id"]
                    sent = await own.post(f"/api/threads/{thread}/messages?wait=true", json={"content": f"What is {i} + 3?"})
                    assert sent.status_code == 200, sent.text

            load = asyncio.gather(*(turn(i) for i in range(TURNS)))
            during = await client.get("/metrics")  # while the turns run
            await load
            assert during.status_code == 200 and total(samples(during.text), "standardagents_turns_started_total") >= 0

            store = open_store(database)
            await store.open()
            try:
                executions = await store.list_executions()
            finally:
                await store.close()
            by_agent: dict[str, int] = {}
            for record in executions:
                thread = await client.get(f"/api/threads/{record.thread_id}")
                agent = thread.json()["agent_id"]
                by_agent[agent] = by_agent.get(agent, 0) + 1
            assert by_agent["assistant"] == TURNS

            for _ in range(4):  # fresh connections: answers come from either worker
                async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as scraper:
                    scraped = await scraper.get("/metrics")
                assert scraped.status_code == 200
                assert scraped.headers["content-type"].startswith("text/plain")
                found = samples(scraped.text)
                for agent, count in by_agent.items():
                    assert total(found, "standardagents_turns_started_total", agent=agent) == count
                    assert total(found, "standardagents_turns_ended_total", agent=agent) == count
                assert total(found, "standardagents_turns_ended_total", agent="assistant", outcome="response") == TURNS
                assert total(found, "standardagents_running_executions") == 0
                assert total(found, "standardagents_tool_calls_total", tool="calculate", status="success") == TURNS
                assert total(found, "standardagents_turn_duration_seconds_count") == len(executions)
                assert total(found, "standardagents_model_call_duration_seconds_count") > 0
                # streamed replies: the first delta is timed by the engine's own read of the stream
                assert total(found, "standardagents_model_time_to_first_token_seconds_count") > 0
                assert total(found, "standardagents_model_tokens_total", type="input") > 0
                # each worker's events reached the other through the PostgreSQL relay, timed there
                assert total(found, "standardagents_relay_lag_seconds_count") > 0
                assert total(found, "standardagents_http_requests_total", method="POST",
                             route="/api/threads/{thread_id}/messages", status="200") == TURNS
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


async def test_gauges_read_from_the_store_and_the_route_is_protected(runtime, actors, monkeypatch):
    """In-process: pending approvals, inbox messages and effects come from the store."""
    import time as _time

    from standardagents.observability import metrics
    from standardagents.server import create_app

    app = create_app(runtime, close_runtime=False)
    thread = await runtime.create_thread("helper")
    now = int(_time.time() * 1000)
    broken = await runtime.store.schedule_effect(thread.id, "broken", run_at=now - 1000)
    assert [e.id for e in await runtime.store.claim_due_effects(now, "w1", limit=1)] == [broken.id]
    assert await runtime.store.fail_effect(broken.id, "it broke", worker_id="w1")
    await runtime.store.schedule_effect(thread.id, "later", run_at=now + 3_600_000)
    await runtime.store.schedule_effect(thread.id, "due", run_at=now - 1000)
    await runtime.store.set_env("inbox", thread.id, "msg_waiting", {"message": {"content": "later"}})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        assert (await c.get("/metrics")).status_code == 401
        found = samples((await c.get("/metrics", headers=actors.auth("alice"))).text)
        monkeypatch.setenv(metrics.SETTING_ENV, "public")
        assert (await c.get("/metrics")).status_code == 200
    assert total(found, "standardagents_inbox_messages") == 1
    assert total(found, "standardagents_effects", state="due") == 1
    assert total(found, "standardagents_effects", state="scheduled") == 1
    assert total(found, "standardagents_effects", state="failed") == 1
    assert total(found, "standardagents_pending_approvals") == 0
