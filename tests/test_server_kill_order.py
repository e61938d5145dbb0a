"""Replies in order after a worker is killed: on `standardagents serve --workers 2` (PostgreSQL),
the worker running a turn is SIGKILLed while a follow-up message waits in the thread's inbox
on the other worker. The interrupted turn is finished first, then the follow-up is answered:
the transcript reads user 1, tool call, tool result, reply to user 1, user 2, reply to user 2,
on every round (uvicorn starts a new worker in place of the killed one for the next).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from standardagents.testing.openai_stub import OpenAIStub, StubReply
from test_server_event_order import two_workers
from test_server_workers import (
    _admin_token,
    _env_without_openai,
    _stubbed_model,
    _Workers,
    _write_files,
)
from test_server_workers import database as database  # the fixture

PROJECT = {
    "agents/agents/keeper.py": (
        "from standardagents import define_agent\n"
        "keeper = define_agent(name='keeper', side_a={'prompt': 'keeper_prompt', 'stop_on_response': True,"
        " 'max_steps': 6})\n"),
    "agents/prompts/keeper_prompt.py": (
        "from standardagents import define_prompt\n"
        "keeper_prompt = define_prompt(name='keeper_prompt', prompt='Keep.', model='stubbed', tools=['wait_here'])\n"),
    "agents/tools/wait_here.py": (
        "import asyncio, os, pathlib\n\n"
        "from standardagents import define_tool\n\n\n"
        "@define_tool\n"
        "async def wait_here(tag: str) -> str:\n"
        "    '''Marks the round with the pid running it, then waits until that process is killed.\n\n"
        "    Args:\n        tag: The round's tag.\n    '''\n"
        "    mark = pathlib.Path(os.environ['SA_MARKS']) / tag\n"
        "    if mark.exists():\n"
        "        return 'resumed ' + tag\n"
        "    mark.write_text(str(os.getpid()))\n"
        "    await asyncio.sleep(3600)\n"
        "    return 'never'\n"),
}
ROUNDS = 3
#: the transcript last read while waiting (for the message of a wait that timed out)
_LAST: list[Any] = []
#: the execution lease: a look for gone processes runs every third of it
LEASE = 2.0


def _model(body: dict[str, Any]) -> StubReply:
    """The first message of a round asks for the waiting tool; every other turn is answered
    by naming the user message it answers."""
    messages = body["messages"]
    user = next(m for m in reversed(messages) if m["role"] == "user")["content"]
    if messages[-1]["role"] == "user" and user.startswith("first"):
        return StubReply(tool_calls=[("wait_here", json.dumps({"tag": user.replace(" ", "-")}))])
    return StubReply(text=f"reply to {user}")


def _transcript(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            out.append(("assistant", "tool call"))
        elif m["role"] == "tool":
            out.append(("tool", "result"))
        else:
            out.append((m["role"], m["content"]))
    return out


async def _until(test: Any, what: str, timeout: float = 30.0) -> Any:  # noqa: ASYNC109 - a bounded wait
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = await test()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {_LAST}")


def _read_mark(mark: Path) -> str:
    return mark.read_text() if mark.exists() else ""


async def _ran(mark: Path) -> str:
    """The pid the round's tool wrote, once it runs ("" before)."""
    return await asyncio.to_thread(_read_mark, mark)


async def _both(workers: _Workers) -> tuple[str, str] | None:
    """The two workers' pids, once both answer (the killed one's place is taken by a new one)."""
    workers.idle.clear()
    try:
        return await workers.discover()
    except AssertionError:
        return None


async def _answered(workers: _Workers, pid: str, thread: str, round_: int) -> list[dict[str, Any]] | None:
    """The thread's messages once the follow-up of the round is answered."""
    got = await workers.request(pid, "GET", f"/api/threads/{thread}/messages")
    messages: list[dict[str, Any]] = got.json()["messages"]
    _LAST[:] = [_transcript(messages)]  # told when the wait times out
    return messages if any(m["content"] == f"reply to second {round_}" for m in messages) else None


async def test_a_follow_up_queued_on_the_other_worker_is_answered_after_the_killed_turn(
        database: str, tmp_path: Path) -> None:
    project, marks = tmp_path / "project", tmp_path / "marks"
    marks.mkdir()
    token = await _admin_token(database)
    env = {**_env_without_openai(), "SA_MARKS": str(marks), "STANDARDAGENTS_EXECUTION_LEASE": str(LEASE)}
    with OpenAIStub(_model) as stub:
        _write_files(project, {**PROJECT, **_stubbed_model(stub.base_url)})
        async with two_workers(project, database, token, env=env) as workers:
            for round_ in range(ROUNDS):
                runner, other = await _until(functools.partial(_both, workers), "two workers")
                thread = (await workers.request(runner, "POST", "/api/threads", json={"agent": "keeper"})).json()["id"]
                first = await workers.request(runner, "POST", f"/api/threads/{thread}/messages",
                                              json={"content": f"first {round_}"})
                assert first.status_code == 202
                pid = await _until(functools.partial(_ran, marks / f"first-{round_}"), "the tool to run")
                assert pid == runner  # the turn runs where it was posted
                second = await workers.request(other, "POST", f"/api/threads/{thread}/messages",
                                               json={"content": f"second {round_}"})
                assert second.status_code == 202 and second.json()["queued"] is True
                os.kill(int(runner), signal.SIGKILL)
                messages = await _until(functools.partial(_answered, workers, other, thread, round_),
                                        f"the follow-up's reply in round {round_}")
                assert _transcript(messages) == [
                    ("user", f"first {round_}"), ("assistant", "tool call"), ("tool", "result"),
                    ("assistant", f"reply to first {round_}"),
                    ("user", f"second {round_}"), ("assistant", f"reply to second {round_}"),
                ], f"round {round_}"
