"""A process killed mid-turn loses nothing: the next runtime resumes its execution."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from standardagents import Runtime
from standardagents.store import open_store

PROJECT = {
    "agents/agents/worker.py": "from standardagents import define_agent\n"
                               "worker = define_agent(name='worker', side_a={'prompt': 'worker_prompt'})\n",
    "agents/prompts/worker_prompt.py": "from standardagents import define_prompt\n"
                                       "worker_prompt = define_prompt(name='worker_prompt', prompt='x', tools=['slow_job'])\n",
    "agents/tools/slow_job.py": textwrap.dedent('''
        import asyncio
        from pathlib import Path

        from standardagents import define_tool


        @define_tool
        async def slow_job(task: str) -> str:
            """Runs for a long time the first time (the process is killed meanwhile)."""
            marker = Path(__file__).with_name("started")
            if marker.exists():
                return "quick this time"
            marker.write_text("yes")
            print("STARTED", flush=True)
            await asyncio.sleep(3600)
            return "never"
    '''),
}

SCRIPT = textwrap.dedent('''
    import asyncio, sys
    from standardagents import Runtime
    from standardagents.store import open_store

    async def main():
        rt = await Runtime.open(sys.argv[1], store=open_store(sys.argv[2]))
        thread = await rt.create_thread("worker")
        print(thread.id, flush=True)
        await rt.send(thread.id, "run the job")

    asyncio.run(main())
''')


def _write_project(root: Path) -> None:
    for rel, text in PROJECT.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _kill_when(script: str, project: Path, url: str, expected: set[str]) -> str:
    """Run ``script`` in another process, read the thread id it prints, then the lines in
    ``expected`` (any order), and kill it (SIGKILL) right there; returns the thread id."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.Popen([sys.executable, "-c", script, str(project), url], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        thread_id = proc.stdout.readline().strip()
        seen = {proc.stdout.readline().strip() for _ in expected}
        assert seen == expected, seen
    finally:
        _kill(proc)
    return thread_id


def _started(script: str, project: Path, url: str, line: str) -> tuple[subprocess.Popen[str], str]:
    """Run ``script`` in another process until it printed its thread id, then ``line``; the
    process goes on (the caller kills it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.Popen([sys.executable, "-c", script, str(project), url], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    thread_id = proc.stdout.readline().strip()
    assert proc.stdout.readline().strip() == line
    return proc, thread_id


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    if proc.stdout is not None:
        proc.stdout.close()


async def test_an_execution_of_a_killed_process_is_resumed_and_the_thread_goes_on(tmp_path: Path) -> None:
    _write_project(tmp_path)
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    thread_id = _kill_when(SCRIPT, tmp_path, url, {"STARTED"})
    rt = await Runtime.open(tmp_path, store=open_store(url))
    try:
        await rt.drain()
        (record,) = await rt.store.list_executions(thread_id=thread_id)
        assert record.status == "complete"
        messages = await rt.store.list_messages(thread_id)
        assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert messages[2].tool_status == "error" and "interrupted by a restart; not run again" in messages[2].content
        assert messages[3].content
        result = await rt.send(thread_id, "what happened?")
        assert result.stop_reason == "complete"
    finally:
        await rt.aclose()


async def test_a_live_process_of_this_host_keeps_its_turn_however_late_its_heartbeat(tmp_path: Path) -> None:
    """A worker too busy to beat in time is late, not gone: its turn and its thread claim stay
    its own (taking them over would run the turn twice); once it is killed they are taken over."""
    from standardagents.engine.claims import try_claim

    _write_project(tmp_path)
    url = f"sqlite:///{tmp_path / 'late.db'}"
    proc, thread_id = _started(SCRIPT, tmp_path, url, "STARTED")
    rt = await Runtime.open(tmp_path, store=open_store(url))
    try:
        try:
            rt.execution_lease = 0.001  # every heartbeat of the other process now counts as late
            assert await rt.recover() == []
            assert not await try_claim(rt, thread_id)
            (record,) = await rt.store.list_executions(thread_id=thread_id)
            assert record.status == "running" and record.state["owner"] != rt.owner
        finally:
            _kill(proc)
        assert await rt.recover() == [record.id]
        await rt.drain()
        (record,) = await rt.store.list_executions(thread_id=thread_id)
        assert record.status == "complete"
        assert [m.role for m in await rt.store.list_messages(thread_id)] == ["user", "assistant", "tool", "assistant"]
    finally:
        await rt.aclose()


async def test_another_hosts_execution_is_resumed_only_once_its_heartbeat_is_stale(tmp_path: Path) -> None:
    from standardagents.project import build_registry
    from standardagents.records import ExecutionRecord, Message, ThreadRecord, ToolCall, now_ms

    url = f"sqlite:///{tmp_path / 'hosts.db'}"
    seed = open_store(url)
    await seed.open()
    threads = {}
    for name, age_ms in (("stale", 10 * 60_000), ("fresh", 1_000)):
        thread = await seed.create_thread(ThreadRecord(agent="worker"))
        await seed.commit_step(messages=[
            Message(thread_id=thread.id, role="user", content="go"),
            Message(thread_id=thread.id, role="assistant", tool_calls=[ToolCall(f"call_{name}", "slow_job", "{}")])])
        await seed.save_execution(ExecutionRecord(thread_id=thread.id, state={"owner": "elsewhere:4242"},
                                                  updated_at=now_ms() - age_ms))
        threads[name] = thread.id
    await seed.close()
    from standardagents import define_agent, define_prompt

    registry = build_registry(define_agent(name="worker", side_a={"prompt": "p"}), define_prompt(name="p", prompt="x"))
    rt = await Runtime.open(registry, store=open_store(url))
    try:
        await rt.drain()
        (stale,) = await rt.store.list_executions(thread_id=threads["stale"])
        (fresh,) = await rt.store.list_executions(thread_id=threads["fresh"])
        assert (stale.status, fresh.status) == ("complete", "running")
        roles = [m.role for m in await rt.store.list_messages(threads["stale"])]
        assert roles == ["user", "assistant", "tool", "assistant"]
        assert [m.role for m in await rt.store.list_messages(threads["fresh"])] == ["user", "assistant"]
    finally:
        await rt.aclose()


QUEUE_SCRIPT = textwrap.dedent('''
    import asyncio, sys
    from standardagents import Runtime
    from standardagents.store import open_store

    async def main():
        rt = await Runtime.open(sys.argv[1], store=open_store(sys.argv[2]))
        thread = await rt.create_thread("worker")
        print(thread.id, flush=True)
        first = await rt.start(thread.id, "run the job")
        await rt.start(thread.id, "and then this, please")
        print("QUEUED", flush=True)
        await first

    asyncio.run(main())
''')


async def test_a_message_queued_behind_a_killed_turn_is_sent_after_the_restart(tmp_path: Path) -> None:
    _write_project(tmp_path)
    url = f"sqlite:///{tmp_path / 'queued.db'}"
    thread_id = _kill_when(QUEUE_SCRIPT, tmp_path, url, {"QUEUED", "STARTED"})
    rt = await Runtime.open(tmp_path, store=open_store(url))
    try:
        await rt.drain()
        contents = [(m.role, m.content) for m in await rt.store.list_messages(thread_id) if m.role == "user"]
        assert contents == [("user", "run the job"), ("user", "and then this, please")]
        messages = await rt.store.list_messages(thread_id)
        assert messages[-1].role == "assistant" and messages[-1].content
        assert await rt.store.list_scope("inbox") == []
    finally:
        await rt.aclose()


async def test_two_runtimes_on_one_database_never_run_a_thread_at_the_same_time(tmp_path: Path, stub) -> None:
    import asyncio

    from engine_helpers import stub_model
    from standardagents import define_agent, define_prompt, define_tool
    from standardagents.project import build_registry
    from standardagents.testing.openai_stub import StubReply

    release = asyncio.Event()
    started = asyncio.Event()

    @define_tool
    async def wait_here() -> str:
        """Waits until the test lets it finish."""
        started.set()
        await release.wait()
        return "released"

    def registry():
        return build_registry(define_agent(name="helper", side_a={"prompt": "p"}),
                              define_prompt(name="p", prompt="x", tools=["wait_here"]), wait_here, stub_model(stub))

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first = await Runtime.open(registry(), store=open_store(url))
    second = await Runtime.open(registry(), store=open_store(url))
    try:
        stub.queue(StubReply(tool_calls=[("wait_here", "{}")]), "first done", "second done")
        thread = await first.create_thread("helper")
        one = await first.start(thread.id, "first")
        await asyncio.wait_for(started.wait(), 10)
        two = await second.start(thread.id, "second")
        done, _ = await asyncio.wait({two}, timeout=0.5)
        assert not done, "the second runtime ran the thread while the first one held it"
        release.set()
        assert (await one).text == "first done"
        assert (await two).text == "second done"
        roles = [(m.role, m.content) for m in await first.store.list_messages(thread.id)]
        assert [r for r, _ in roles] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
        assert await first.store.list_scope("lock") == []
    finally:
        await second.aclose()
        await first.aclose()
