"""A turn's ``done`` survives a SIGKILL of the server (engine/done.py): a real ``serve``
process on SQLite whose event log writes its batches only once an hour, so that nothing but
the durable ``done`` itself can bring the event to a client after a restart.

One process is killed after it sent the ``done`` (it must be in the log, from the turn's own
transaction); another kills itself from an ``after_create_message`` hook right after the
commit that ended the turn, before any ``done`` was written (the restarted server must write
and send it, once). A client following the thread reconnects with ``Last-Event-ID``."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx

from standardagents.engine.done import DONE_KEY
from standardagents.engine.owners import NAMESPACE
from standardagents.store import open_store
from standardagents.testing.openai_stub import OpenAIStub, StubReply
from store_fixtures import Backend, backend  # noqa: F401 - the fixture
from test_server_crash import Follower, _logged
from test_server_workers import (
    EXE,
    _admin_token,
    _env_without_openai,
    _free_port,
    _stubbed_model,
    _wait_ready,
    _write_files,
)

PROJECT = {
    "agents/agents/clerk.py": (
        "from standardagents import define_agent\n"
        "clerk = define_agent(name='clerk', side_a={'prompt': 'clerk_prompt', 'stop_on_response': True},"
        " hooks=['die_once'])\n"),
    "agents/prompts/clerk_prompt.py": (
        "from standardagents import define_prompt\n"
        "clerk_prompt = define_prompt(name='clerk_prompt', prompt='Answer.', model='stubbed')\n"),
    "agents/hooks/die_once.py": (
        "import os\nimport signal\n\n"
        "from standardagents import define_hook\n\n\n"
        "@define_hook('after_create_message', id='die_once')\n"
        "def die_once(state, message):\n"
        "    '''With the flag file present: SIGKILL this process once the turn's final reply (and the\n"
        "    execution's end) is committed, before its done is written.'''\n"
        "    flag = os.environ['SA_DIE_FLAG']\n"
        "    if message.role == 'assistant' and message.content and os.path.exists(flag):\n"
        "        os.remove(flag)\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"),
}


def _serve(project: Path, port: int, database: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(EXE), "serve", str(project), "--port", str(port), "--workers", "1",
                             "--database-url", database], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=20)


async def _one_turn_then_restart(tmp_path: Path, die_in_hook: bool) -> tuple[Follower, str, list[Any], Any]:
    """Run one turn on a fresh thread, SIGKILL the server (or let the hook do it), start it
    again; returns the follower (after it has the done), the execution id, the thread's logged
    events and the stored record."""
    project = tmp_path / "project"
    flag = tmp_path / "die.flag"
    if die_in_hook:
        flag.touch()
    database = f"sqlite+aiosqlite:///{tmp_path / 'done.db'}"
    token = await _admin_token(database)
    headers = {"Authorization": f"Bearer {token}"}
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = _env_without_openai()
    env |= {"STANDARDAGENTS_EVENT_LOG_FLUSH": "3600", "SA_DIE_FLAG": str(flag)}
    with OpenAIStub(lambda body: StubReply(text="Answered.")) as stub:
        _write_files(project, {**PROJECT, **_stubbed_model(stub.base_url)})
        proc = _serve(project, port, database, env)
        follower: Follower | None = None
        try:
            async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as client:
                await _wait_ready(client)
                thread_id = (await client.post("/api/threads", json={"agent": "clerk"})).json()["id"]
                follower = Follower(base_url, headers, thread_id)
                while not follower.connections:
                    follower.changed.clear()
                    await follower.changed.wait()
                sent = await client.post(f"/api/threads/{thread_id}/messages", json={"content": "hello"})
                assert sent.status_code == 202, sent.text
                execution_id = sent.json()["executionId"]
                if die_in_hook:
                    proc.wait(timeout=30)  # the hook killed it
                else:
                    await follower.until_done(execution_id)
                _kill(proc)
                proc = _serve(project, port, database, env)
                await _wait_ready(client)
                await follower.until_done(execution_id)
                logged = await _logged(client, thread_id, 1 << 62, quiet=2)
        finally:
            if follower is not None:
                await follower.close()
            _kill(proc)
    store = open_store(database)
    await store.open()
    try:
        record = await store.get_execution(execution_id)
    finally:
        await store.close()
    return follower, execution_id, logged, record


def _dones(events: list[tuple[int, dict[str, Any]]]) -> collections.Counter[str]:
    return collections.Counter(str(e["data"].get("executionId")) for _, e in events if e["type"] == "done")


async def test_a_sent_done_is_in_the_event_log_when_the_server_is_killed_before_its_next_batch(
        tmp_path: Path) -> None:
    follower, execution_id, logged, record = await _one_turn_then_restart(tmp_path, die_in_hook=False)
    assert follower.dones() == {execution_id: 1}
    assert _dones(logged) == {execution_id: 1}
    done_id = next(i for i, e in logged if e["type"] == "done")
    assert record is not None and record.status == "complete" and record.state[DONE_KEY] == done_id
    assert follower.reconnects[-1] is not None  # it came back with Last-Event-ID after the kill


async def test_a_turn_ended_as_its_process_died_gets_its_done_once_after_the_restart(tmp_path: Path) -> None:
    follower, execution_id, logged, record = await _one_turn_then_restart(tmp_path, die_in_hook=True)
    assert follower.dones() == {execution_id: 1}
    ids = [i for i, _ in follower.events]
    assert ids == sorted(set(ids))
    assert _dones(logged) == {execution_id: 1}
    done = next(e for _, e in logged if e["type"] == "done")
    assert done["data"]["stopReason"] == "complete" and done["data"]["outcome"] == "response"
    assert record is not None and record.status == "complete" and DONE_KEY in record.state


# -- in process: two runtimes recovering the same lost done, and the bus holding a thread ------


def _dead_pid() -> int:
    """The pid of a process that has exited."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    return dead.pid


def _runtime_registry() -> Any:
    from standardagents import define_agent, define_prompt
    from standardagents.project import build_registry

    return build_registry(define_agent(name="clerk", side_a={"prompt": "p"}), define_prompt(name="p", prompt="x"))


async def test_two_runtimes_recovering_a_lost_done_at_once_write_and_send_it_once(backend: Backend) -> None:  # noqa: F811
    from standardagents import Runtime
    from standardagents.engine.done import recover_done
    from standardagents.eventlog import EventLog
    from standardagents.records import ExecutionRecord, ThreadRecord, now_ms

    runtimes = [await Runtime.open(_runtime_registry(), store=backend.new_store()) for _ in range(2)]
    logs = [EventLog(rt.bus, rt.store) for rt in runtimes]
    for event_log in logs:
        event_log.start()
    try:
        store = runtimes[0].store
        thread = await store.create_thread(ThreadRecord(agent="clerk"))
        # a turn that ended (its record says so) in a process that died before its done was written
        ended = ExecutionRecord(thread_id=thread.id, status="complete", stop_reason="complete",
                                state={"outcome": "response", "value": None})
        await store.save_execution(ended)
        owner = f"{socket.gethostname()}/{NAMESPACE}:{_dead_pid()}:0-0123456789ab"
        assert await store.claim_env("lock", "", thread.id, {"owner": owner}, now_ms())
        subs = [rt.subscribe(thread.id) for rt in runtimes]
        await asyncio.gather(*(rt.recover() for rt in runtimes))
        sent = [s.queue.get_nowait() for s in subs for _ in range(s.queue.qsize())]
        assert [(e.type, e.data["executionId"]) for e in sent] == [("done", ended.id)]
        for event_log in logs:
            await event_log.flush()
        _floor, logged = await store.read_events(thread.id, 0)
        assert [(t, d["executionId"], d["stopReason"]) for _i, t, d, _ts in logged] == [("done", ended.id, "complete")]
        record = await store.get_execution(ended.id)
        assert record is not None and record.state[DONE_KEY] == logged[0][0] == sent[0].id
        # a second look (the dead process's claim is gone by now) sends the logged done again,
        # under its id, and writes nothing
        await recover_done(runtimes[1], thread.id)
        again = subs[1].queue.get_nowait()
        assert (again.type, again.id) == ("done", sent[0].id)
        assert len((await store.read_events(thread.id, 0))[1]) == 1
    finally:
        for event_log in logs:
            await event_log.aclose()
        for rt in runtimes:
            await rt.aclose()


def test_events_of_a_held_thread_wait_behind_the_held_event_in_order() -> None:
    from standardagents.events import Event, EventBus

    bus = EventBus()
    sub = bus.subscribe("thr_1")
    other = bus.subscribe("thr_2")
    held_id = bus.hold("thr_1")
    bus.emit("message_queued", "thr_1", {"n": 1})
    bus.emit("log", "thr_2", {"n": 2})  # another thread is not held
    assert sub.queue.qsize() == 0 and other.queue.qsize() == 1
    bus.release("thr_1", Event("done", "thr_1", {}, held_id))
    got = [sub.queue.get_nowait() for _ in range(sub.queue.qsize())]
    assert [e.type for e in got] == ["done", "message_queued"]
    assert got[0].id == held_id < got[1].id
