"""Correctness when several runtimes share a database, or one restarts with the same
identity: approvals decided once, recovery after a restart with the same host and pid,
history read on every turn, queued messages persisted before any wait, failures that
still end the turn, cancellation that reaches the caller."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_prompt, define_tool
from standardagents.engine.approvals import ApprovalError
from standardagents.engine.owners import NAMESPACE
from standardagents.project import build_registry
from standardagents.store import open_store
from standardagents.testing.openai_stub import StubReply
from store_fixtures import Backend, backend  # noqa: F401 - the fixture
from test_engine_recovery import _write_project

# -- approvals: one decision wins across runtimes ---------------------------------------------


async def test_an_approval_decided_twice_at_once_on_two_runtimes_runs_the_tool_once(backend: Backend, stub,  # noqa: F811
                                                                                     tmp_path: Path) -> None:
    ledger = tmp_path / "launches.txt"

    @define_tool(needs_approval=True)
    async def launch(target: str) -> str:
        """Launch something (needs a person's approval)."""
        with ledger.open("a") as fh:
            fh.write(f"{target}\n")
        return f"launched {target}"

    def registry() -> Any:
        return build_registry(define_agent(name="ops", side_a={"prompt": "p"}),
                              define_prompt(name="p", prompt="x", tools=["launch"]), launch, stub_model(stub))

    first = await Runtime.open(registry(), store=backend.new_store())
    second = await Runtime.open(registry(), store=backend.new_store())
    try:
        stub.queue(StubReply(tool_calls=[("launch", '{"target": "rocket"}')]), "launched", "launched again")
        paused = await first.run("ops", "launch it")
        assert paused.outcome == "approval_required"
        token = paused.payload["approvals"][0]["token"]
        outcomes = await asyncio.gather(first.decide(token, True), second.decide(token, True),
                                        return_exceptions=True)
        tasks = [o for o in outcomes if isinstance(o, asyncio.Task)]
        refused = [o for o in outcomes if isinstance(o, ApprovalError)]
        assert (len(tasks), len(refused)) == (1, 1), outcomes
        assert (await tasks[0]).stop_reason == "complete"
        await first.drain()
        await second.drain()
        assert ledger.read_text().splitlines() == ["rocket"]
        tool_messages = [m for m in await first.store.list_messages(paused.thread_id) if m.role == "tool"]
        assert len(tool_messages) == 1 and tool_messages[0].content == "launched rocket"
    finally:
        await second.aclose()
        await first.aclose()


async def test_the_approval_secret_is_out_of_reach_of_tools(stub, make_runtime) -> None:
    seen: dict[str, Any] = {}

    @define_tool
    async def snoop(state: Any) -> str:
        """Read and overwrite the instance env."""
        seen["value"] = await state.get_env("_signing_secret")
        await state.set_env("_signing_secret", "attacker", scope="instance")
        return "done"

    @define_tool(needs_approval=True)
    async def risky() -> str:
        """Needs approval."""
        return "ran"

    stub.queue(StubReply(tool_calls=[("risky", "{}")]), StubReply(tool_calls=[("snoop", "{}")]), "finished")
    rt = await make_runtime(define_agent(name="a", side_a={"prompt": "p"}),
                            define_prompt(name="p", prompt="x", tools=["risky", "snoop"]), risky, snoop,
                            stub_model(stub))
    paused = await rt.run("a", "go")
    token = paused.payload["approvals"][0]["token"]
    result = await (await rt.decide(token, True))  # type: ignore[misc]
    assert result.stop_reason == "complete"
    assert seen["value"] is None
    # the tool's overwrite did not change the secret: the old token still verifies (as stale)
    with pytest.raises(ApprovalError, match="stale"):
        await rt.decide(token, True)


# -- recovery after a restart with the same host and pid --------------------------------------

# The worker project of the recovery tests: a tool that runs until the process is killed.

# The killed process takes the identity a restarted container's process would have had
# before: this host and the pid of the process that recovers afterwards.
SAME_IDENTITY_SCRIPT = textwrap.dedent('''
    import asyncio, socket, sys
    from standardagents import Runtime
    from standardagents.engine.owners import NAMESPACE
    from standardagents.store import open_store

    async def main():
        rt = await Runtime.open(sys.argv[1], store=open_store(sys.argv[2]))
        rt.owner = f"{socket.gethostname()}/{NAMESPACE}:{sys.argv[3]}:0-0123456789ab"
        thread = await rt.create_thread("worker")
        print(thread.id, flush=True)
        first = await rt.start(thread.id, "run the job")
        await rt.start(thread.id, "and then this, please", execution_id="exe_queued_before_the_crash")
        print("QUEUED", flush=True)
        await first

    asyncio.run(main())
''')


def _run_and_kill(script: str, args: list[str], expected: set[str]) -> str:
    """Run ``script``; read the thread id it prints, then the ``expected`` lines; SIGKILL it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        thread_id = proc.stdout.readline().strip()
        seen = {proc.stdout.readline().strip() for _ in expected}
        assert seen == expected, seen
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    return thread_id


async def test_a_restart_with_the_same_host_and_pid_still_recovers_what_the_dead_process_left(tmp_path: Path) -> None:
    _write_project(tmp_path)
    url = f"sqlite:///{tmp_path / 'same.db'}"
    thread_id = _run_and_kill(SAME_IDENTITY_SCRIPT, [str(tmp_path), url, str(os.getpid())], {"STARTED", "QUEUED"})
    rt = await Runtime.open(tmp_path, store=open_store(url))
    try:
        await rt.drain()
        crashed = next(r for r in await rt.store.list_executions(thread_id=thread_id) if r.id != "exe_queued_before_the_crash")
        assert crashed.status == "complete"  # resumed, then the queued message's turn
        delivered = await rt.store.get_execution("exe_queued_before_the_crash")
        assert delivered is not None and delivered.status == "complete"
        users = [m.content for m in await rt.store.list_messages(thread_id) if m.role == "user"]
        assert users == ["run the job", "and then this, please"]
        assert await rt.store.list_scope("inbox") == []
        assert await rt.store.list_scope("lock") == []
        assert rt.owner != f"{socket.gethostname()}/{NAMESPACE}:{os.getpid()}:0-0123456789ab"
    finally:
        await rt.aclose()


# -- every turn reads the stored conversation -------------------------------------------------


async def test_a_message_added_before_the_first_turn_reaches_the_model(stub, make_runtime) -> None:
    rt = await make_runtime(define_agent(name="a", side_a={"prompt": "p"}), define_prompt(name="p", prompt="x"),
                            stub_model(stub))
    thread = await rt.create_thread("a")
    state = await rt.state(thread.id)
    await state.inject_message("The customer's name is Ada.", role="user")
    stub.queue("Hello Ada")
    await rt.send(thread.id, "What is my name?")
    contents = [m.get("content") for m in stub.requests[0]["messages"]]
    assert "The customer's name is Ada." in contents and contents[-1] == "What is my name?"


async def test_a_second_runtime_answers_turn_two_with_turn_one_in_the_history(stub, tmp_path: Path) -> None:
    def registry() -> Any:
        return build_registry(define_agent(name="a", side_a={"prompt": "p"}), define_prompt(name="p", prompt="x"),
                              stub_model(stub))

    url = f"sqlite:///{tmp_path / 'two.db'}"
    first = await Runtime.open(registry(), store=open_store(url))
    second = await Runtime.open(registry(), store=open_store(url))
    try:
        thread = await first.create_thread("a")
        stub.queue("one", "two", "three")
        await second.send(thread.id, "turn one")
        await first.send(thread.id, "turn two")
        contents = [m.get("content") for m in stub.requests[1]["messages"]]
        assert contents[-3:] == ["turn one", "one", "turn two"]
    finally:
        await second.aclose()
        await first.aclose()


# -- a message accepted for a thread busy elsewhere is stored before anything waits ----------


def _blocking_registry(stub: Any, started: asyncio.Event, release: asyncio.Event) -> Any:
    @define_tool
    async def wait_here() -> str:
        """Waits until the test lets it finish."""
        started.set()
        await release.wait()
        return "released"

    return build_registry(define_agent(name="helper", side_a={"prompt": "p"}),
                          define_prompt(name="p", prompt="x", tools=["wait_here"]), wait_here, stub_model(stub))


async def test_a_message_for_a_thread_busy_on_another_runtime_survives_a_shutdown_while_it_waits(stub, tmp_path: Path) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    url = f"sqlite:///{tmp_path / 'busy.db'}"
    holder = await Runtime.open(_blocking_registry(stub, started, release), store=open_store(url))
    waiter = await Runtime.open(_blocking_registry(stub, started, release), store=open_store(url))
    later: Runtime | None = None
    try:
        stub.queue(StubReply(tool_calls=[("wait_here", "{}")]), "first done", "second done")
        thread = await holder.create_thread("helper")
        one = await holder.start(thread.id, "first")
        await asyncio.wait_for(started.wait(), 10)
        sub = waiter.subscribe(thread.id)
        await waiter.start(thread.id, "second", execution_id="exe_second")
        queued = await asyncio.wait_for(sub.get(), 10)
        assert queued.type == "message_queued" and queued.data["executionId"] == "exe_second"
        [(inbox_thread, _, entry)] = await holder.store.list_scope("inbox")
        assert inbox_thread == thread.id and entry["executionId"] == "exe_second"
        await waiter.aclose()  # a shutdown while the message waits for the thread
        release.set()
        assert (await one).text == "first done"
        later = await Runtime.open(_blocking_registry(stub, started, release), store=open_store(url))
        await later.drain()
        record = await later.store.get_execution("exe_second")
        assert record is not None and record.status == "complete"
        users = [m.content for m in await later.store.list_messages(thread.id) if m.role == "user"]
        assert users == ["first", "second"]
        assert await later.store.list_scope("inbox") == []
    finally:
        if later is not None:
            await later.aclose()
        await waiter.aclose()
        await holder.aclose()


# -- every failure ends the turn ---------------------------------------------------------------


async def test_an_import_error_before_the_turn_starts_still_ends_it_with_one_done(stub, make_runtime) -> None:
    @define_tool
    def helper_tool() -> str:
        """A tool."""
        return "ok"

    rt = await make_runtime(define_agent(name="a", side_a={"prompt": "p"}),
                            define_prompt(name="p", prompt="x", tools=["helper_tool"]), helper_tool, stub_model(stub))
    thread = await rt.create_thread("a")

    def broken() -> Any:
        raise ImportError("No module named 'missing_dependency'")

    rt.registry.add("tools", "helper_tool", loader=broken)  # a packed agent's lazy loader that fails
    rt.invalidate()
    sub = rt.subscribe(thread.id)
    result = await rt.send(thread.id, "hello")
    assert result.stop_reason == "error" and "missing_dependency" in (result.error or "")
    assert not rt.is_running(thread.id)
    events = []
    while not sub.queue.empty():
        events.append(sub.queue.get_nowait())
    assert [e.type for e in events].count("done") == 1
    (record,) = await rt.store.list_executions(thread_id=thread.id)
    assert record.status == "error" and record.id == result.execution_id
    assert stub.requests == []


# -- a handoff: the queued message is answered by the new agent --------------------------------


async def test_a_message_queued_during_a_handoff_is_answered_by_the_new_agent(stub, make_runtime) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @define_tool
    async def wait_here() -> str:
        """Waits until the test lets it finish."""
        started.set()
        await release.wait()
        return "released"

    billing = define_agent(name="billing", side_a={"prompt": "billing_prompt"}, expose_as_tool=True, primary=False,
                           tool_description="Hand the customer to billing.")
    rt = await make_runtime(define_agent(name="boss", side_a={"prompt": "boss_prompt"}),
                            define_prompt(name="boss_prompt", prompt="You are the boss.", tools=["wait_here", "billing"]),
                            billing, define_prompt(name="billing_prompt", prompt="You handle billing."),
                            wait_here, stub_model(stub))
    stub.queue(StubReply(tool_calls=[("wait_here", "{}")]), StubReply(tool_calls=[("billing", '{"message": "refund"}')]),
               "Billing here.")
    thread = await rt.create_thread("boss")
    first = await rt.start(thread.id, "I want a refund.")
    await asyncio.wait_for(started.wait(), 10)
    second = await rt.start(thread.id, "Where is my money?")
    release.set()
    assert (await first).outcome == "handoff"
    assert (await second).text == "Billing here."
    assert stub.requests[2]["messages"][0] == {"role": "system", "content": "You handle billing."}


# -- stop() and aclose() let the caller's own cancellation through -----------------------------


async def test_stop_and_aclose_do_not_swallow_the_callers_cancellation(stub, make_runtime) -> None:
    started, cancelled, cleanup = asyncio.Event(), asyncio.Event(), asyncio.Event()

    @define_tool
    async def slow_cleanup() -> str:
        """Takes a while to clean up when cancelled."""
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            await cleanup.wait()
            raise
        return "never"

    rt = await make_runtime(define_agent(name="a", side_a={"prompt": "p"}),
                            define_prompt(name="p", prompt="x", tools=["slow_cleanup"]), slow_cleanup, stub_model(stub))
    for closer in ("stop", "aclose"):
        started.clear()
        cancelled.clear()
        cleanup.clear()
        stub.queue(StubReply(tool_calls=[("slow_cleanup", "{}")]))
        thread = await rt.create_thread("a")
        turn = await rt.start(thread.id, "go")
        await asyncio.wait_for(started.wait(), 10)
        caller = asyncio.ensure_future(rt.stop(thread.id) if closer == "stop" else rt.aclose())
        await asyncio.wait_for(cancelled.wait(), 10)
        caller.cancel()
        cleanup.set()
        with pytest.raises(asyncio.CancelledError):
            await caller
        await asyncio.gather(turn, return_exceptions=True)
        assert caller.cancelled(), closer


def test_a_bus_listener_can_be_removed_through_the_public_method() -> None:
    from standardagents.events import EventBus

    bus = EventBus()
    seen: list[str] = []

    def listener(event: Any) -> None:
        seen.append(event.type)

    bus.add_listener(listener)
    bus.emit("one", "thr", {})
    assert bus.remove_listener(listener) and not bus.remove_listener(listener)
    bus.emit("two", "thr", {})
    assert seen == ["one"] and not bus.has_subscribers("thr")
