"""A turn whose process died is resumed, not failed: a live runtime takes it over from its
last committed step under the same execution id, re-runs only the idempotent tools whose
results were never committed, answers the others with an error, ends with exactly one
``done``; found when a runtime opens and, continuously, by the heartbeat of one already open;
claimed by exactly one of several runtimes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_prompt, define_tool
from standardagents.engine.owners import NAMESPACE
from standardagents.engine.resume import NOT_RUN_AGAIN
from standardagents.project import build_registry, load_project
from standardagents.records import ExecutionRecord, Message, ThreadRecord, ToolCall, now_ms
from standardagents.store import SQLStore
from standardagents.testing.openai_stub import OpenAIStub, StubReply
from store_fixtures import Backend

TOOL = '''
import asyncio, os
from pathlib import Path
from standardagents import define_tool


@define_tool(idempotent={idempotent})
async def {name}(item: str) -> str:
    """{doc}"""
    with Path(__file__).with_name("{name}.count").open("a") as fh:
        fh.write("ran\\n")
    if os.environ.get("BLOCK_TOOLS") == "1":
        print("STARTED {name}", flush=True)
        await asyncio.sleep(3600)
    return "{name} done"
'''

PROJECT = {
    "agents/agents/shop.py": "from standardagents import define_agent\n"
                             "shop = define_agent(name='shop', side_a={'prompt': 'shop_prompt', 'stop_on_response': True})\n",
    "agents/prompts/shop_prompt.py": "from standardagents import define_prompt\n"
                                     "shop_prompt = define_prompt(name='shop_prompt', prompt='You shop.', "
                                     "tools=['charge', 'lookup'])\n",
    "agents/tools/charge.py": TOOL.format(name="charge", idempotent=False, doc="Charge a card (not safe to repeat)."),
    "agents/tools/lookup.py": TOOL.format(name="lookup", idempotent=True, doc="Look a price up (safe to repeat)."),
}

SCRIPT = textwrap.dedent('''
    import asyncio, sys
    from standardagents import Runtime
    from standardagents.store import SQLStore

    async def main():
        store = SQLStore(sys.argv[2], schema=sys.argv[3] or None)
        rt = await Runtime.open(sys.argv[1], store=store)
        thread = await rt.create_thread("shop")
        print(thread.id, flush=True)
        await rt.send(thread.id, "buy the blue one")

    asyncio.run(main())
''')


def _write_project(root: Path) -> Path:
    for rel, text in PROJECT.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _runs(root: Path, tool: str) -> int:
    path = root / "agents" / "tools" / f"{tool}.count"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _kill_mid_tools(project: Path, url: str, schema: str | None) -> str:
    """Run a turn in another process; SIGKILL it once both tools started (no result
    committed); returns the thread id."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["BLOCK_TOOLS"] = "1"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(project), url, schema or ""],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        thread_id = proc.stdout.readline().strip()
        seen = {proc.stdout.readline().strip() for _ in range(2)}
        assert seen == {"STARTED charge", "STARTED lookup"}, seen
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    return thread_id


async def _check_resumed(rt: Runtime, project: Path, thread_id: str, dones: list[Any]) -> None:
    (record,) = await rt.store.list_executions(thread_id=thread_id)
    assert record.status == "complete"
    assert [d.data["executionId"] for d in dones] == [record.id]  # the same id, one done
    messages = await rt.store.list_messages(thread_id)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    results = {m.name: m for m in messages if m.role == "tool"}
    assert results["charge"].tool_status == "error" and NOT_RUN_AGAIN in (results["charge"].content or "")
    assert (results["lookup"].tool_status, results["lookup"].content) == ("success", "lookup done")
    assert messages[-1].content  # the final reply
    assert _runs(project, "charge") == 1  # never run again
    assert _runs(project, "lookup") == 2  # cut short, then run again


async def test_a_killed_turn_is_resumed_when_a_runtime_opens(tmp_path: Path) -> None:
    project = _write_project(tmp_path / "project")
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    thread_id = _kill_mid_tools(project, url, None)
    store = SQLStore(url)
    await store.open()
    rt = Runtime(load_project(project), store)
    try:
        with rt.subscribe(thread_id) as events:
            assert len(await rt.recover()) == 1
            await rt.drain()
            seen = [events.queue.get_nowait() for _ in range(events.queue.qsize())]
        await _check_resumed(rt, project, thread_id, [e for e in seen if e.type == "done"])
        assert [e.type for e in seen].count("execution_started") == 1
    finally:
        await rt.aclose()


async def test_a_runtime_already_open_resumes_a_turn_whose_process_dies(backend: Backend, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # a short lease: the live runtime's heartbeat looks for dead turns every half second
    monkeypatch.setenv("STANDARDAGENTS_EXECUTION_LEASE", "1.5")
    project = _write_project(tmp_path / "project")
    rt = await Runtime.open(project, store=backend.new_store())
    try:
        with rt.subscribe() as events:
            thread_id = await asyncio.to_thread(_kill_mid_tools, project, backend.url, backend.schema)
            dones: list[Any] = []
            while not dones:
                event = await asyncio.wait_for(events.queue.get(), 60)
                if event.type == "done" and event.thread_id == thread_id:
                    dones.append(event)
            await rt.drain()
            dones += [e for e in (events.queue.get_nowait() for _ in range(events.queue.qsize()))
                      if e.type == "done" and e.thread_id == thread_id]
        await _check_resumed(rt, project, thread_id, dones)
    finally:
        await rt.aclose()


async def test_two_runtimes_recovering_at_once_resume_a_dead_turn_once(backend: Backend) -> None:
    runs: list[str] = []

    @define_tool(idempotent=True)
    async def lookup(item: str) -> str:
        """Look a price up (safe to repeat)."""
        runs.append(item)
        return f"{item}: 3 coins"

    def registry() -> Any:
        return build_registry(define_agent(name="shop", side_a={"prompt": "p", "stop_on_response": True}),
                              define_prompt(name="p", prompt="You shop.", tools=["lookup"]), lookup)

    seed = backend.new_store()
    await seed.open()
    thread = await seed.create_thread(ThreadRecord(agent="shop"))
    await seed.commit_step(messages=[
        Message(thread_id=thread.id, role="user", content="price?"),
        Message(thread_id=thread.id, role="assistant", tool_calls=[ToolCall("call_1", "lookup", '{"item": "tea"}')])])
    await seed.save_execution(ExecutionRecord(thread_id=thread.id, id="exe_dead", state={"owner": "elsewhere:4242:ab"},
                                              updated_at=now_ms() - 10 * 60_000))
    await seed.close()
    first, second = Runtime(registry(), backend.new_store()), Runtime(registry(), backend.new_store())
    try:
        await first.store.open()
        await second.store.open()
        with first.subscribe(thread.id) as one, second.subscribe(thread.id) as two:
            resumed = await asyncio.gather(first.recover(), second.recover())
            await first.drain()
            await second.drain()
            events = [*(one.queue.get_nowait() for _ in range(one.queue.qsize())),
                      *(two.queue.get_nowait() for _ in range(two.queue.qsize()))]
        assert sorted(len(r) for r in resumed) == [0, 1]
        assert runs == ["tea"]
        messages = await first.store.list_messages(thread.id)
        assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert [e.data["executionId"] for e in events if e.type == "done"] == ["exe_dead"]
        record = await first.store.get_execution("exe_dead")
        assert record is not None and record.status == "complete"
    finally:
        await first.aclose()
        await second.aclose()


def _exited_pid() -> int:
    """The pid of a process of this namespace that has exited."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    return dead.pid


async def test_a_message_sent_after_a_crash_is_answered_after_the_interrupted_turn(backend: Backend) -> None:
    """A turn left running by a dead process (its claim already gone) and a new message: the
    runtime taking the message runs the interrupted turn on first, whatever recovery did yet."""
    from standardagents.testing.openai_stub import StubReply

    def answer(body: dict[str, Any]) -> StubReply:
        last = body["messages"][-1]
        return StubReply(text="answer to the first" if last["role"] == "tool" else f"answer to: {last['content']}")

    @define_tool
    async def order(item: str) -> str:
        """Place an order (not safe to repeat)."""
        return f"ordered {item}"

    with OpenAIStub(answer) as stub:
        registry = build_registry(define_agent(name="shop", side_a={"prompt": "p", "stop_on_response": True}),
                                  define_prompt(name="p", prompt="You shop.", tools=["order"]), order,
                                  stub_model(stub))
        seed = backend.new_store()
        await seed.open()
        thread = await seed.create_thread(ThreadRecord(agent="shop"))
        await seed.commit_step(messages=[
            Message(thread_id=thread.id, role="user", content="order tea"),
            Message(thread_id=thread.id, role="assistant", tool_calls=[ToolCall("call_1", "order", '{"item": "tea"}')])])
        owner = f"{os.uname().nodename}/{NAMESPACE}:{_exited_pid()}:0-0123456789ab"
        await seed.save_execution(ExecutionRecord(thread_id=thread.id, id="exe_cut_short", state={"owner": owner}))
        await seed.close()
        rt = await Runtime.open(registry, store=backend.new_store(), take_over=False)
        try:
            result = await rt.send(thread.id, "and coffee")
            assert result.text == "answer to: and coffee"
            messages = [(m.role, m.content) for m in await rt.store.list_messages(thread.id)]
            assert messages == [("user", "order tea"), ("assistant", None), ("tool", f"Error: {NOT_RUN_AGAIN}"),
                                ("assistant", "answer to the first"), ("user", "and coffee"),
                                ("assistant", "answer to: and coffee")]
            record = await rt.store.get_execution("exe_cut_short")
            assert record is not None and (record.status, record.epoch) == ("complete", 1)
        finally:
            await rt.aclose()
