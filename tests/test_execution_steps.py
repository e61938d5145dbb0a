"""The steps of a turn, recorded, streamed and served: each model call (model, provider, the stored
messages it was sent by reference, tools offered, finish reason, tokens, cost, timings) with
the tool calls it asked for, read through the runtime, over HTTP and from the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine_helpers import stub_model
from server_fixtures import write_project
from standardagents import Runtime, define_agent, define_prompt, define_tool
from standardagents.engine.steps import load_execution
from standardagents.project import build_registry
from standardagents.records import now_ms
from standardagents.server import create_app
from standardagents.testing.openai_stub import OpenAIStub, StubReply

EXE = Path(sys.executable).parent / "standardagents"
PRICED = {"input": 2.0, "output": 8.0}
FIRST = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
SECOND = {"prompt_tokens": 150, "completion_tokens": 5, "total_tokens": 155}


def _cost(usage: dict[str, int]) -> float:
    return (usage["prompt_tokens"] * 2.0 + usage["completion_tokens"] * 8.0) / 1e6


def _script(stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("add", '{"a": 2, "b": 40}')], usage=FIRST),
               StubReply(text="It is 42.", usage=SECOND))


def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def _definitions(stub: OpenAIStub) -> list[Any]:
    return [define_agent(name="calc", side_a={"prompt": "p", "stop_on_response": True, "max_steps": 4}),
            define_prompt(name="p", prompt="You add.", tools=["add"]), define_tool(add),
            stub_model(stub, prices=PRICED)]


def _check_steps(detail: dict[str, Any], messages: list[Any]) -> None:
    """The recorded steps match the scripted turn: a tool round, then the answer."""
    user = next(m for m in messages if m.role == "user")
    replies = [m for m in messages if m.role == "assistant"]
    tool_msg = next(m for m in messages if m.role == "tool")
    assert detail["outcome"] == "response" and detail["errors"] == []
    first, second = detail["steps"]
    assert (first["model"], first["provider"], first["responseModel"]) == ("default", "openai", "stub-model")
    assert first["finishReason"] == "tool_calls" and second["finishReason"] == "stop"
    assert first["tools"] == ["add"] == second["tools"]
    assert [first["messageId"], second["messageId"]] == [m.id for m in replies]
    # what was sent is named by stored ids and a count, never copied
    assert first["sent"] == {"first": user.id, "last": user.id, "count": 2}
    assert second["sent"] == {"first": user.id, "last": tool_msg.id, "count": 4}
    assert first["usage"]["prompt_tokens"] == 100 and second["usage"]["completion_tokens"] == 5
    assert first["cost"] == pytest.approx(_cost(FIRST)) and second["cost"] == pytest.approx(_cost(SECOND))
    assert detail["cost"] == pytest.approx(_cost(FIRST) + _cost(SECOND))
    assert detail["usage"]["total_tokens"] == 275
    assert first["latencyMs"] is not None and first["ttftMs"] is not None and first["attempts"] == []
    (call,) = first["toolCalls"]
    assert (call["name"], json.loads(call["arguments"]), call["status"], call["result"]) == ("add", {"a": 2, "b": 40},
                                                                                          "success", "42")
    assert call["resultMessageId"] == tool_msg.id and call["durationMs"] is not None and call["repaired"] is False
    assert second["toolCalls"] == []


async def test_runtime_and_http_serve_the_steps_of_a_turn(backend, stub):
    _script(stub)
    rt = await Runtime.open(build_registry(*_definitions(stub)), store=backend.new_store())
    try:
        alice = await rt.store.create_user("alice")
        bob = await rt.store.create_user("bob")
        _, alice_token = await rt.store.create_api_token(alice.id, "t")
        _, bob_token = await rt.store.create_api_token(bob.id, "t")
        app = create_app(rt, close_runtime=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            auth = {"Authorization": f"Bearer {alice_token}"}
            tid = (await client.post("/api/threads", json={"agent": "calc"}, headers=auth)).json()["id"]
            done = await client.post(f"/api/threads/{tid}/messages?wait=true", json={"content": "2+40?"}, headers=auth)
            assert done.status_code == 200, done.text
            runs = (await client.get(f"/api/threads/{tid}/executions", headers=auth)).json()["executions"]
            assert [r["outcome"] for r in runs] == ["response"]
            got = await client.get(f"/api/executions/{runs[0]['id']}", headers=auth)
            assert got.status_code == 200
            messages = await rt.store.list_messages(tid)
            _check_steps(got.json(), messages)
            record = await rt.store.get_execution(runs[0]["id"])
            assert record is not None
            # the API adds the trace link (none: no template is set)
            assert {**await load_execution(rt.store, record), "traceUrl": None, "rerunOverrides": False} == got.json()
            other = {"Authorization": f"Bearer {bob_token}"}
            assert (await client.get(f"/api/executions/{runs[0]['id']}", headers=other)).status_code == 403
            missing = await client.get("/api/executions/exe_nope", headers=auth)
            assert missing.status_code == 404 and "unknown execution" in missing.json()["error"]["message"]
            assert (await client.get("/api/executions/bad%00id", headers=auth)).status_code == 400
            assert (await client.get(f"/api/executions/{runs[0]['id']}")).status_code == 401
            spec = (await client.get("/api/openapi.json")).json()
            assert "/api/executions/{execution_id}" in spec["paths"]
    finally:
        await rt.aclose()


async def test_a_fallback_is_recorded_as_a_failed_attempt(make_runtime, stub):
    stub.queue(StubReply(error_status=503), StubReply(text="from the fallback", usage=FIRST))
    primary = stub_model(stub, name="primary", fallbacks=["backup"])
    rt = await make_runtime(define_agent(name="a", side_a={"prompt": "p"}),
                            define_prompt(name="p", prompt="x", model="primary"), primary,
                            stub_model(stub, name="backup"))
    sub = rt.subscribe()
    result = await rt.run("a", "go")
    events = []
    while not sub.queue.empty():
        events.append(sub.queue.get_nowait())
    # the step's record reaches live listeners with the stored reply
    live = [e.data["message"]["metadata"]["call"] for e in events
            if e.type == "message_created" and e.data["message"]["role"] == "assistant"]
    assert [c["model"] for c in live] == ["backup"]
    record = await rt.store.get_execution(result.execution_id)
    assert record is not None
    (step,) = (await load_execution(rt.store, record))["steps"]
    assert step["model"] == "backup"
    assert [(a["model"], a["provider"]) for a in step["attempts"]] == [("primary", "openai")]
    assert "503" in step["attempts"][0]["error"]


def test_cli_lists_threads_and_shows_the_tree_of_steps(tmp_path, stub):
    model = f"""
        from standardagents import define_model
        default = define_model(name="default", provider="openai", model="stub-model", base_url="{stub.base_url}",
                               max_retries=0, prices={PRICED!r})
    """
    project = write_project(tmp_path / "project", {"agents/models/default.py": model})
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    stub.queue(StubReply(tool_calls=[("add", '{"a": 2, "b": 40}')], usage=FIRST),
               StubReply(text="It is 42.", usage=SECOND))

    async def turn() -> str:
        rt = await Runtime.open(project, database_url=url)
        try:
            result = await rt.run("helper", "2+40?")
            assert result.outcome == "response"
            return result.thread_id
        finally:
            await rt.aclose()

    import asyncio

    tid = asyncio.run(turn())
    base = ["--project", str(project), "--database-url", url]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(EXE), "threads", *args, *base], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})

    listed = cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert (row["id"], row["agent"], row["executions"], row["tokens"]) == (tid, "helper", 1, 275)
    assert row["cost"] == pytest.approx(_cost(FIRST) + _cost(SECOND))
    table = cli("list")
    assert table.returncode == 0 and tid in table.stdout and "275" in table.stdout
    shown = cli("show", tid, "--json")
    assert shown.returncode == 0, shown.stderr
    (execution,) = json.loads(shown.stdout)["executions"]
    assert [s["finishReason"] for s in execution["steps"]] == ["tool_calls", "stop"]
    assert [c["name"] for c in execution["steps"][0]["toolCalls"]] == ["add"]
    tree = cli("show", tid)
    assert tree.returncode == 0, tree.stderr
    assert "model default (openai)  tool_calls  100 in / 20 out" in tree.stdout
    assert "tool add  success" in tree.stdout and "150 in / 5 out" in tree.stdout
    unknown = cli("show", "thr_nope")
    assert unknown.returncode == 1 and "unknown thread 'thr_nope'" in unknown.stderr


async def test_approvals_waiting_and_decided_are_on_the_execution(make_runtime, stub):
    @define_tool(needs_approval=True)
    def wipe(what: str) -> str:
        """Wipe something."""
        return f"wiped {what}"

    stub.queue(StubReply(tool_calls=[("wipe", '{"what": "logs"}'), ("wipe", '{"what": "db"}')]), "Done what I may.")
    rt = await make_runtime(define_agent(name="a", side_a={"prompt": "p", "stop_on_response": True}),
                            define_prompt(name="p", prompt="x", tools=["wipe"]), wipe, stub_model(stub))
    paused = await rt.run("a", "clean up")
    assert paused.outcome == "approval_required"
    record = await rt.store.get_execution(paused.execution_id)
    assert record is not None
    waiting = (await load_execution(rt.store, record))["waitingForApproval"]
    assert [(w["name"], json.loads(w["arguments"])["what"]) for w in waiting] == [("wipe", "logs"), ("wipe", "db")]
    logs, db = paused.payload["approvals"]
    before = now_ms()
    await rt.decide(logs["token"], True)
    task = await rt.decide(db["token"], False, reason="not the database")
    after = now_ms()
    assert task is not None and (await task).text == "Done what I may."
    record = await rt.store.get_execution(paused.execution_id)
    assert record is not None
    detail = await load_execution(rt.store, record)
    assert detail["waitingForApproval"] == []
    calls = {json.loads(c["arguments"])["what"]: c for c in detail["steps"][0]["toolCalls"]}
    # who decided (no caller here: no one named) and when (the moment of each decide call)
    nobody = {"decidedBy": None, "decidedByName": None}
    logs_at, db_at = calls["logs"]["approval"].pop("decidedAt"), calls["db"]["approval"].pop("decidedAt")
    assert before <= logs_at <= db_at <= after
    assert calls["logs"]["approval"] == {"approved": True, "reason": None, **nobody}
    assert calls["logs"]["result"] == "wiped logs"
    assert calls["db"]["approval"] == {"approved": False, "reason": "not the database", **nobody}
    assert calls["db"]["status"] == "error"
